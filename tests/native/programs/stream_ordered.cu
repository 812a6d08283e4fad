// Stream-ordered allocation: cudaMallocAsync, cudaFreeAsync and their pools.
// Usage: stream_ordered MODE [N]; prints "name value" lines (tests/native/test_stream_ordered.py).
//   timing N  a memset of N bytes between cudaMallocAsync and cudaFreeAsync on a stream: the host
//             times of the calls' returns, and the memory in use before and after the stream
//             reaches the free; then the same with cudaMalloc and cudaFree
//   pools     pool handles, attributes and errors
//   capture   cudaMallocAsync in a stream capture (stops the run)
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <mpi.h>

static void error(const char* what, cudaError_t e) {
  printf("%s %d\n", what, (int)e);
  cudaGetLastError();
}

static size_t used() {
  size_t free_b, total_b;
  cudaMemGetInfo(&free_b, &total_b);
  return total_b - free_b;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const char* mode = argc > 1 ? argv[1] : "";
  size_t n = argc > 2 ? strtoull(argv[2], nullptr, 10) : 1 << 20;
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (!strcmp(mode, "timing")) {
    double t0 = MPI_Wtime();
    void* p;
    cudaMallocAsync(&p, n, s);
    cudaMemsetAsync(p, 0, n, s);
    cudaFreeAsync(p, s);
    printf("async_returned %.9e\n", MPI_Wtime() - t0);
    printf("used_before_sync %zu\n", used());
    cudaMemPool_t pool;
    cudaDeviceGetMemPool(&pool, 0);
    uint64_t v = 0;
    cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &v);
    printf("pool_used_before_sync %llu\n", (unsigned long long)v);
    cudaStreamSynchronize(s);
    printf("synced %.9e\n", MPI_Wtime() - t0);
    printf("used_after_sync %zu\n", used());
    cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &v);
    printf("pool_used_after_sync %llu\n", (unsigned long long)v);
    cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &v);
    printf("pool_used_high %llu\n", (unsigned long long)v);
    double t1 = MPI_Wtime();
    cudaMalloc(&p, n);
    cudaMemsetAsync(p, 0, n, s);
    cudaFree(p);  // synchronises the device
    printf("sync_free_returned %.9e\n", MPI_Wtime() - t1);
  } else if (!strcmp(mode, "pools")) {
    int supported = -1;
    cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, 0);
    printf("pools_supported %d\n", supported);
    cudaMemPool_t def, current;
    cudaDeviceGetDefaultMemPool(&def, 0);
    cudaDeviceGetMemPool(&current, 0);
    printf("current_is_default %d\n", (int)(def == current));
    uint64_t threshold = UINT64_MAX, back = 0;
    error("set_threshold", cudaMemPoolSetAttribute(def, cudaMemPoolAttrReleaseThreshold, &threshold));
    cudaMemPoolGetAttribute(def, cudaMemPoolAttrReleaseThreshold, &back);
    printf("threshold_back %d\n", (int)(back == UINT64_MAX));
    error("destroy_default", cudaMemPoolDestroy(def));
    cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    cudaMemPool_t mine;
    error("create", cudaMemPoolCreate(&mine, &props));
    void *a, *b;
    error("from_pool", cudaMallocFromPoolAsync(&a, n, mine, s));
    uint64_t in_mine = 0;
    cudaMemPoolGetAttribute(mine, cudaMemPoolAttrUsedMemCurrent, &in_mine);
    printf("mine_used %llu\n", (unsigned long long)in_mine);
    error("set_current", cudaDeviceSetMemPool(0, mine));
    cudaDeviceGetMemPool(&current, 0);
    printf("current_is_mine %d\n", (int)(current == mine));
    error("malloc_async", cudaMallocAsync(&b, n, s));  // from the current pool: mine
    cudaMemPoolGetAttribute(mine, cudaMemPoolAttrUsedMemCurrent, &in_mine);
    printf("mine_used_2 %llu\n", (unsigned long long)in_mine);
    error("free_a", cudaFreeAsync(a, s));
    error("free_a_again", cudaFreeAsync(a, s));
    error("cudafree_pending", cudaFree(a));
    void* plain;
    cudaMalloc(&plain, 4096);
    error("freeasync_of_cudamalloc", cudaFreeAsync(plain, s));
    error("free_b", cudaFreeAsync(b, s));
    cudaStreamSynchronize(s);
    cudaMemPoolGetAttribute(mine, cudaMemPoolAttrUsedMemCurrent, &in_mine);
    printf("mine_used_3 %llu\n", (unsigned long long)in_mine);
    error("destroy_mine", cudaMemPoolDestroy(mine));
    cudaDeviceGetMemPool(&current, 0);
    printf("current_is_default_again %d\n", (int)(current == def));
  } else if (!strcmp(mode, "capture")) {
    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    void* p;
    cudaMallocAsync(&p, n, s);
    printf("not reached\n");
  }
  MPI_Finalize();
  return 0;
}
