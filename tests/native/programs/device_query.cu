// Device management as a program compiled against the real CUDA 13 headers sees it.
#include <mpi.h>

#include <cstdio>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    int count = -1, sms = -1, major = -1, dev = -1;
    cudaGetDeviceCount(&count);
    printf("count %d\n", count);
    printf("set_invalid %s\n", cudaGetErrorName(cudaSetDevice(count)));
    printf("last_error %s\n", cudaGetErrorString(cudaGetLastError()));
    cudaSetDevice(count - 1);
    cudaGetDevice(&dev);
    printf("device %d\n", dev);
    cudaDeviceProp p;
    cudaGetDeviceProperties(&p, 0);
    printf("name %s\n", p.name);
    printf("sms %d\nmem %zu\ncc %d.%d\nl2 %d\nengines %d\nthreads_per_sm %d\nwarp %d\n", p.multiProcessorCount,
           p.totalGlobalMem, p.major, p.minor, p.l2CacheSize, p.asyncEngineCount, p.maxThreadsPerMultiProcessor,
           p.warpSize);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
    printf("attr_sms %d\nattr_major %d\n", sms, major);
    void *d, *h;
    int stack_var;
    cudaMalloc(&d, 1 << 20);
    cudaMallocHost(&h, 1 << 20);
    cudaPointerAttributes a;
    cudaPointerGetAttributes(&a, (char*)d + 100);
    printf("ptr_device %d %d\n", (int)a.type, a.device);
    cudaPointerGetAttributes(&a, h);
    printf("ptr_host %d\n", (int)a.type);
    cudaPointerGetAttributes(&a, &stack_var);
    printf("ptr_unregistered %d\n", (int)a.type);
    size_t free_b, total_b;
    cudaMemGetInfo(&free_b, &total_b);
    printf("meminfo %zu %zu\n", free_b, total_b);
    void* too_big;
    printf("oom %s\n", cudaGetErrorName(cudaMalloc(&too_big, total_b)));
  }
  MPI_Finalize();
  return 0;
}
