// __device__ and __constant__ variables through the symbol calls (tests/native/test_symbols.py), one
// rank. Usage: symbols MODE [N]
//   copies N: cudaMemcpyToSymbol then cudaMemcpyFromSymbol of N bytes (at most 8000) between pinned
//          host memory and the constant array, each timed ("to S", "from S"); then
//          cudaMemcpyToSymbolAsync of N bytes on a stream: the time it returns after ("async S")
//          and the time after cudaStreamSynchronize ("async_synced S");
//   answers: every answer as "name value" lines: sizes, errors of bad calls, the variables'
//          addresses on devices 0 and 1 and what cudaPointerGetAttributes says of them;
//   cache:  the device's cache preference and shared memory bank size, set and read back;
//   prefer-l1: the device prefers L1 (cudaDeviceSetCacheConfig), then an occupancy query of bump,
//          which has no preference of its own.
#include "check.h"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

__constant__ double coefficients[1000];  // 8000 bytes
__device__ int counter;

static double plain[1000];  // a host variable: no symbol

__global__ void bump() { counter += (int)coefficients[0]; }

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const char* mode = argc > 1 ? argv[1] : "";
  if (!strcmp(mode, "copies")) {
    const size_t n = argc > 2 ? strtoul(argv[2], nullptr, 10) : 8000;
    double* h;
    cudaStream_t s;
    CHECK(cudaMallocHost(&h, 8000));
    CHECK(cudaStreamCreate(&s));
    double t = MPI_Wtime();
    CHECK(cudaMemcpyToSymbol(coefficients, h, n));
    printf("to %.17g\n", MPI_Wtime() - t);
    t = MPI_Wtime();
    CHECK(cudaMemcpyFromSymbol(h, coefficients, n));
    printf("from %.17g\n", MPI_Wtime() - t);
    t = MPI_Wtime();
    CHECK(cudaMemcpyToSymbolAsync(coefficients, h, n, 0, cudaMemcpyHostToDevice, s));
    printf("async %.17g\n", MPI_Wtime() - t);
    CHECK(cudaStreamSynchronize(s));
    printf("async_synced %.17g\n", MPI_Wtime() - t);
  } else if (!strcmp(mode, "answers")) {
    size_t size = 0;
    CHECK(cudaGetSymbolSize(&size, coefficients));
    printf("size_coefficients %zu\n", size);
    CHECK(cudaGetSymbolSize(&size, counter));
    printf("size_counter %zu\n", size);
    double h[2] = {0, 0};
    printf("beyond %s\n", cudaGetErrorName(cudaMemcpyToSymbol(coefficients, h, 16, 7992)));
    printf("last_byte %s\n", cudaGetErrorName(cudaMemcpyToSymbol(coefficients, h, 8, 7992)));
    printf("to_direction %s\n",
           cudaGetErrorName(cudaMemcpyToSymbol(coefficients, h, 8, 0, cudaMemcpyDeviceToHost)));
    printf("from_direction %s\n",
           cudaGetErrorName(cudaMemcpyFromSymbol(h, coefficients, 8, 0, cudaMemcpyHostToDevice)));
    printf("not_a_symbol %s\n", cudaGetErrorName(cudaMemcpyToSymbol(plain, h, 8)));
    printf("size_not_a_symbol %s\n", cudaGetErrorName(cudaGetSymbolSize(&size, plain)));
    cudaGetLastError();
    void *a0, *again, *a1, *c0;
    CHECK(cudaGetSymbolAddress(&a0, counter));
    CHECK(cudaGetSymbolAddress(&again, counter));
    CHECK(cudaGetSymbolAddress(&c0, coefficients));
    CHECK(cudaSetDevice(1));
    CHECK(cudaGetSymbolAddress(&a1, counter));
    cudaPointerAttributes at0, at1;
    CHECK(cudaPointerGetAttributes(&at0, a0));
    CHECK(cudaPointerGetAttributes(&at1, a1));
    printf("same_address_twice %d\n", a0 == again);
    printf("other_device_other_address %d\n", a0 != a1);
    printf("distinct_variables %d\n", a0 != c0);
    printf("device_of_0 %d\n", at0.device);
    printf("device_of_1 %d\n", at1.device);
    printf("type_device %d\n", at0.type == cudaMemoryTypeDevice && at1.type == cudaMemoryTypeDevice);
    // the address is device memory the copies know: a copy from it succeeds
    int value = -1;
    CHECK(cudaMemcpy(&value, a1, sizeof value, cudaMemcpyDeviceToHost));
    CHECK(cudaSetDevice(0));
    bump<<<1, 1>>>();
    CHECK(cudaDeviceSynchronize());
    size_t free_bytes, total;
    CHECK(cudaMemGetInfo(&free_bytes, &total));
    printf("used %zu\n", total - free_bytes);
  } else if (!strcmp(mode, "cache")) {
    cudaFuncCache config = cudaFuncCachePreferEqual;
    CHECK(cudaDeviceGetCacheConfig(&config));
    printf("initial %d\n", (int)config);
    CHECK(cudaDeviceSetCacheConfig(cudaFuncCachePreferShared));
    CHECK(cudaDeviceGetCacheConfig(&config));
    printf("set %d\n", (int)config);
    printf("bad %s\n", cudaGetErrorName(cudaDeviceSetCacheConfig((cudaFuncCache)7)));
    CHECK(cudaSetDevice(1));
    CHECK(cudaDeviceGetCacheConfig(&config));
    printf("other_device %d\n", (int)config);
    cudaSharedMemConfig bank;
    CHECK(cudaDeviceSetSharedMemConfig(cudaSharedMemBankSizeEightByte));
    CHECK(cudaDeviceGetSharedMemConfig(&bank));
    printf("bank %d\n", (int)bank);
  } else if (!strcmp(mode, "prefer-l1")) {
    int blocks = 0;
    CHECK(cudaDeviceSetCacheConfig(cudaFuncCachePreferL1));
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, bump, 32, 0));
    printf("blocks %d\n", blocks);
  } else {
    fprintf(stderr, "unknown mode '%s'\n", mode);
    return 2;
  }
  MPI_Finalize();
  return 0;
}
