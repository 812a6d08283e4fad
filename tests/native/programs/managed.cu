// __managed__ variables (tests/native/test_managed_memory.py): their initial values as the host's
// code reads them, a write and what cudaPointerGetAttributes says of them. One rank.
#include "check.h"

#include <cstdio>

__managed__ float counter = 3;
__managed__ int table[4] = {1, 2, 3, 4};
__managed__ double zeroed;

__global__ void bump() { counter += table[1] + zeroed; }

int main() {
  printf("initial %g %d %d %d %d %g\n", counter, table[0], table[1], table[2], table[3], zeroed);
  counter = 1;
  bump<<<1, 1>>>();
  CHECK(cudaDeviceSynchronize());
  printf("written %g\n", counter);  // skeleton mode: bump did not run
  cudaPointerAttributes attr;
  CHECK(cudaPointerGetAttributes(&attr, &table[2]));
  printf("type %d device %d\n", (int)attr.type, attr.device);
  size_t free_bytes, total;
  CHECK(cudaMemGetInfo(&free_bytes, &total));
  printf("used %zu\n", total - free_bytes);
  return 0;
}
