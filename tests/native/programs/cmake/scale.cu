// The executable's CUDA part: the buffer filled on the device (the static library's kernel), then
// `launches` kernel launches on it, between a copy in and a copy out.
#include <cuda_runtime.h>

extern "C" void fill_on_device(double* d, double v, int n);

// Global data, as real codes have: compiled -fPIE, its PC-relative accesses cannot be linked into
// a shared object ("relocation R_X86_64_PC32 ... recompile with -fPIC").
int launches_so_far = 0;

__global__ void scale(double* x, double a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}

extern "C" int scale_on_device(double* host, int n, int launches) {
  double* d = nullptr;
  if (cudaMalloc(&d, n * sizeof(double)) != cudaSuccess) return 1;
  cudaMemcpy(d, host, n * sizeof(double), cudaMemcpyHostToDevice);
  fill_on_device(d, 1.0, n);
  for (int k = 0; k < launches; ++k, ++launches_so_far) scale<<<(n + 255) / 256, 256>>>(d, 2.0, n);
  cudaMemcpy(host, d, n * sizeof(double), cudaMemcpyDeviceToHost);
  cudaFree(d);
  return cudaDeviceSynchronize() != cudaSuccess;
}
