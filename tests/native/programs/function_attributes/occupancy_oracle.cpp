// The CUDA toolkit's own occupancy calculator (cuda_occupancy.h, host code, no GPU) for the
// kernels test_function_attributes.py describes: the answers Orrery's must equal.
// Usage: occupancy_oracle MAJOR MINOR SMS MAX_THREADS_PER_SM SHARED_PER_BLOCK SHARED_PER_SM OPTIN RESERVED
// then, on stdin, one query per line:
//   occ REGS STATIC_SHARED MAX_DYNAMIC BARRIERS MAX_THREADS BLOCK DYNAMIC  -> active blocks per SM
//   potential REGS STATIC_SHARED MAX_DYNAMIC BARRIERS MAX_THREADS            -> min grid, block size
//   available REGS STATIC_SHARED MAX_DYNAMIC BARRIERS MAX_THREADS BLOCKS BLOCK -> bytes (or -1)
#include <cuda_occupancy.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char** argv) {
  if (argc != 9)
    return 2;
  cudaOccDeviceProp p;
  p.computeMajor = atoi(argv[1]);
  p.computeMinor = atoi(argv[2]);
  p.numSms = atoi(argv[3]);
  p.maxThreadsPerMultiprocessor = atoi(argv[4]);
  p.sharedMemPerBlock = strtoull(argv[5], nullptr, 10);
  p.sharedMemPerMultiprocessor = strtoull(argv[6], nullptr, 10);
  p.sharedMemPerBlockOptin = strtoull(argv[7], nullptr, 10);
  p.reservedSharedMemPerBlock = strtoull(argv[8], nullptr, 10);
  p.maxThreadsPerBlock = 1024;
  p.regsPerBlock = 65536;
  p.regsPerMultiprocessor = 65536;
  p.warpSize = 32;
  cudaOccDeviceState state;
  char kind[32];
  int regs, barriers, max_threads;
  size_t shared, max_dynamic;
  while (scanf("%31s %d %zu %zu %d %d", kind, &regs, &shared, &max_dynamic, &barriers, &max_threads) == 6) {
    cudaOccFuncAttributes f;  // as converted from cudaFuncAttributes: the opt-in limit applies
    f.maxThreadsPerBlock = max_threads;
    f.numRegs = regs;
    f.sharedSizeBytes = shared;
    f.partitionedGCConfig = PARTITIONED_GC_OFF;
    f.shmemLimitConfig = FUNC_SHMEM_LIMIT_OPTIN;
    f.maxDynamicSharedSizeBytes = max_dynamic;
    f.numBlockBarriers = barriers;
    f.virtualResourceCount = 0;
    if (!strcmp(kind, "occ")) {
      int block;
      size_t dynamic;
      if (scanf("%d %zu", &block, &dynamic) != 2)
        return 2;
      cudaOccResult r;
      cudaOccError e = cudaOccMaxActiveBlocksPerMultiprocessor(&r, &p, &f, &state, block, dynamic);
      printf("%d\n", e == CUDA_OCC_SUCCESS ? r.activeBlocksPerMultiprocessor : -1);
    } else if (!strcmp(kind, "potential")) {
      int grid = -1, block = -1;
      cudaOccError e = cudaOccMaxPotentialOccupancyBlockSize(&grid, &block, &p, &f, &state, nullptr, 0);
      printf("%d %d\n", e == CUDA_OCC_SUCCESS ? grid : -1, block);
    } else if (!strcmp(kind, "available")) {
      int blocks, block;
      if (scanf("%d %d", &blocks, &block) != 2)
        return 2;
      size_t bytes = 0;
      cudaOccError e = cudaOccAvailableDynamicSMemPerBlock(&bytes, &p, &f, &state, blocks, block);
      printf("%lld\n", e == CUDA_OCC_SUCCESS ? (long long)bytes : -1LL);
    }
  }
  return 0;
}
