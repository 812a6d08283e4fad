// Pinning the program's own memory (cudaHostRegister) and peer access, with their errors.
// Usage: host_memory MODE [N]; prints "name value" lines (tests/native/test_host_memory.py).
//   register N  the host time of an N-byte cudaMemcpyAsync from malloc'd memory before, while and
//               after it is registered; the registration's errors, device pointer and flags
//   iomemory    cudaHostRegister with cudaHostRegisterIoMemory (refused: stops the run)
//   peer        cudaDeviceEnablePeerAccess / cudaDeviceDisablePeerAccess and their errors
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

static void error(const char* name, cudaError_t e) {
  printf("%s %d %s\n", name, (int)e, cudaGetErrorString(e));
  cudaGetLastError();
}

// The simulated host time an asynchronous H2D copy of n bytes from src takes to return.
static double async_h2d(void* dst, const void* src, size_t n, cudaStream_t s) {
  double t0 = MPI_Wtime();
  cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, s);
  double t = MPI_Wtime() - t0;
  cudaStreamSynchronize(s);
  return t;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const char* mode = argc > 1 ? argv[1] : "";
  if (!strcmp(mode, "register")) {
    size_t n = argc > 2 ? strtoull(argv[2], nullptr, 10) : 1 << 20;
    char* buf = (char*)malloc(n);
    void* d;
    cudaStream_t s;
    cudaMalloc(&d, n);
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    printf("pageable %.9e\n", async_h2d(d, buf, n, s));
    error("register", cudaHostRegister(buf, n, cudaHostRegisterPortable));
    printf("registered %.9e\n", async_h2d(d, buf, n, s));
    error("again", cudaHostRegister(buf, n, 0));
    error("overlap", cudaHostRegister(buf + n / 2, n, 0));
    void* dp = nullptr;
    error("devptr", cudaHostGetDevicePointer(&dp, buf + 10, 0));
    printf("devptr_offset %td\n", (char*)dp - buf);
    unsigned flags = 99;
    error("getflags", cudaHostGetFlags(&flags, buf));
    printf("flags %u\n", flags);
    error("freehost", cudaFreeHost(buf));
    error("unregister", cudaHostUnregister(buf));
    error("unregister_again", cudaHostUnregister(buf));
    printf("unregistered %.9e\n", async_h2d(d, buf, n, s));
    error("devptr_pageable", cudaHostGetDevicePointer(&dp, buf, 0));
    void* h;
    error("hostalloc_badflags", cudaHostAlloc(&h, 4096, 0x100));
    error("hostalloc_mapped", cudaHostAlloc(&h, 4096, cudaHostAllocMapped));
    cudaHostGetFlags(&flags, h);
    printf("hostalloc_flags %u\n", flags);
    free(buf);
  } else if (!strcmp(mode, "iomemory")) {
    static char page[4096];
    cudaHostRegister(page, sizeof page, cudaHostRegisterIoMemory);
    printf("not reached\n");
  } else if (!strcmp(mode, "peer")) {
    cudaSetDevice(0);
    error("enable", cudaDeviceEnablePeerAccess(1, 0));
    error("enable_again", cudaDeviceEnablePeerAccess(1, 0));
    error("enable_flags", cudaDeviceEnablePeerAccess(2, 1));
    error("enable_self", cudaDeviceEnablePeerAccess(0, 0));
    error("disable", cudaDeviceDisablePeerAccess(1));
    error("disable_again", cudaDeviceDisablePeerAccess(1));
    cudaSetDevice(1);  // access is per direction: 1 -> 0 was never enabled
    error("disable_other_direction", cudaDeviceDisablePeerAccess(0));
  }
  MPI_Finalize();
  return 0;
}
