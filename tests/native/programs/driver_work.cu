// Work through the CUDA driver API (tests/native/test_driver.py): allocations, copies, memsets,
// streams, events and peer access, each next to the runtime's call for the same work. Compiled
// against the real cuda.h, linked with -lcuda. Usage: driver_work (one rank, two GPUs).
#include <cuda.h>
#include <cuda_runtime.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>

#define CU(call)                                                            \
  do {                                                                      \
    CUresult e_ = (call);                                                   \
    if (e_ != CUDA_SUCCESS) {                                               \
      fprintf(stderr, "%s failed: %d\n", #call, (int)e_);                   \
      exit(1);                                                              \
    }                                                                       \
  } while (0)

static const size_t N = 64 << 20;

// The milliseconds between two events recorded around `work` on stream s (driver events).
template <typename Work>
static float timed(CUstream s, Work work) {
  CUevent a, b;
  CU(cuEventCreate(&a, CU_EVENT_DEFAULT));
  CU(cuEventCreate(&b, CU_EVENT_DEFAULT));
  CU(cuEventRecord(a, s));
  work();
  CU(cuEventRecord(b, s));
  CU(cuEventSynchronize(b));
  float ms = 0;
  CU(cuEventElapsedTime(&ms, a, b));
  CU(cuEventDestroy(a));
  CU(cuEventDestroy(b));
  return ms;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  CU(cuInit(0));
  CUcontext ctx0, ctx1;
  CU(cuDevicePrimaryCtxRetain(&ctx0, 0));
  CU(cuDevicePrimaryCtxRetain(&ctx1, 1));
  CU(cuCtxSetCurrent(ctx0));

  CUdeviceptr d = 0, d1 = 0;
  printf("alloc_zero %d\n", (int)cuMemAlloc(&d, 0));
  size_t free0, free1, total;
  CU(cuMemGetInfo(&free0, &total));
  CU(cuMemAlloc(&d, N));
  CU(cuMemGetInfo(&free1, &total));
  printf("alloc_used %zu\n", free0 - free1);
  void* h;
  CU(cuMemHostAlloc(&h, N, CU_MEMHOSTALLOC_PORTABLE));
  unsigned type = 0;
  CU(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)h));
  printf("host_alloc_type %u\n", type);

  CUstream s;
  CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUcontext sctx;
  CU(cuStreamGetCtx(s, &sctx));
  printf("stream_ctx_is_primary %d\n", sctx == ctx0);
  printf("driver_h2d_ms %.9g\n", timed(s, [&] { CU(cuMemcpyAsync(d, (CUdeviceptr)h, N, s)); }));
  printf("runtime_h2d_ms %.9g\n",
         timed(s, [&] { cudaMemcpyAsync((void*)d, h, N, cudaMemcpyHostToDevice, (cudaStream_t)s); }));
  printf("driver_d2h_ms %.9g\n", timed(s, [&] { CU(cuMemcpyDtoHAsync(h, d, N, s)); }));
  printf("driver_memset_ms %.9g\n", timed(s, [&] { CU(cuMemsetD32Async(d, 0x01020304u, N / 4, s)); }));
  printf("runtime_memset_ms %.9g\n", timed(s, [&] { cudaMemsetAsync((void*)d, 1, N, (cudaStream_t)s); }));
  // a copy still running: the stream and an event after it are not ready
  CUevent e;
  CU(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  CU(cuMemcpyAsync(d, (CUdeviceptr)h, N, s));
  CU(cuEventRecord(e, s));
  printf("query_running %d %d\n", (int)cuStreamQuery(s), (int)cuEventQuery(e));
  CU(cuStreamSynchronize(s));
  printf("query_done %d %d\n", (int)cuStreamQuery(s), (int)cuEventQuery(e));
  const char* name = nullptr;
  cuGetErrorName(CUDA_ERROR_NOT_READY, &name);
  printf("not_ready_name %s\n", name);

  // peer access, and the runtime's last error left alone by the driver's
  CU(cuCtxSetCurrent(ctx1));
  CU(cuMemAlloc(&d1, N));
  CU(cuCtxSetCurrent(ctx0));
  printf("staged_peer_ms %.9g\n", timed(s, [&] { CU(cuMemcpyAsync(d1, d, N, s)); }));
  printf("enable_peer %d\n", (int)cuCtxEnablePeerAccess(ctx1, 0));
  printf("enable_peer_again %d\n", (int)cuCtxEnablePeerAccess(ctx1, 0));
  printf("runtime_last_error %d\n", (int)cudaGetLastError());
  printf("driver_peer_ms %.9g\n", timed(s, [&] { CU(cuMemcpyAsync(d1, d, N, s)); }));
  printf("runtime_peer_ms %.9g\n",
         timed(s, [&] { cudaMemcpyPeerAsync((void*)d1, 1, (void*)d, 0, N, (cudaStream_t)s); }));
  printf("disable_peer %d\n", (int)cuCtxDisablePeerAccess(ctx1));

  // no context current: the driver's calls fail, as on a GPU
  CU(cuCtxSetCurrent(nullptr));
  CUdeviceptr none;
  CUstream none_s;
  printf("no_context %d %d\n", (int)cuMemAlloc(&none, 4096), (int)cuStreamCreate(&none_s, 0));
  CU(cuCtxSetCurrent(ctx0));

  CU(cuMemFree(d));
  CU(cuMemFreeHost(h));
  CU(cuStreamDestroy(s));
  CU(cuEventDestroy(e));
  CU(cuMemGetInfo(&free1, &total));
  printf("freed_used %zu\n", free0 - free1);
  CU(cuCtxSetCurrent(ctx1));
  CU(cuMemFree(d1));
  MPI_Finalize();
  return 0;
}
