// The program's CUDA part, compiled with $(NVCC): a kernel launched a given number of times.
#include <cuda_runtime.h>

__global__ void double_it(double* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    x[i] *= 2;
}

extern "C" int launch_kernels(int times) {
  const int n = 1 << 12;
  double* x = nullptr;
  if (cudaMalloc(&x, n * sizeof(double)) != cudaSuccess)
    return -1;
  for (int t = 0; t < times; t++)
    double_it<<<(n + 255) / 256, 256>>>(x, n);
  if (cudaDeviceSynchronize() != cudaSuccess)
    return -1;
  int device = -1;
  cudaGetDevice(&device);
  cudaFree(x);
  return device;
}
