// CUB, unchanged: a sum of 2^20 floats (cub::DeviceReduce::Sum) and a sort of 2^20 int keys
// (cub::DeviceRadixSort::SortKeys), each first asked its temporary storage. CUB tunes its
// launches with cudaFuncGetAttributes and cudaOccupancyMaxActiveBlocksPerMultiprocessor.
#include <cub/cub.cuh>

#include <cstdio>

int main() {
  const int n = 1 << 20;
  float *in, *sum;
  int *keys, *sorted;
  cudaMalloc(&in, n * sizeof(float));
  cudaMalloc(&sum, sizeof(float));
  cudaMalloc(&keys, n * sizeof(int));
  cudaMalloc(&sorted, n * sizeof(int));
  void* temp = nullptr;
  size_t reduce_bytes = 0, sort_bytes = 0;
  cub::DeviceReduce::Sum(temp, reduce_bytes, in, sum, n);
  cub::DeviceRadixSort::SortKeys(temp, sort_bytes, keys, sorted, n);
  size_t bytes = reduce_bytes > sort_bytes ? reduce_bytes : sort_bytes;
  cudaMalloc(&temp, bytes);
  cudaError_t reduced = cub::DeviceReduce::Sum(temp, bytes, in, sum, n);
  cudaError_t sorted_keys = cub::DeviceRadixSort::SortKeys(temp, bytes, keys, sorted, n);
  cudaDeviceSynchronize();
  printf("reduce %s\nsort %s\n", cudaGetErrorName(reduced), cudaGetErrorName(sorted_keys));
  return 0;
}
