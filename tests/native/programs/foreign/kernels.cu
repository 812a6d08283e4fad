// A library of kernels as users prebuild them (tests/native/test_foreign_runtime.py): with plain
// nvcc it carries its own static copy of the CUDA runtime, with -cudart shared it uses Orrery's.
__global__ void fill(double* x) { x[threadIdx.x] = 1; }

extern "C" int run_kernels() {
  double* d = nullptr;
  cudaError_t e = cudaMalloc(&d, 32 * sizeof(double));
  if (e == cudaSuccess) {
    fill<<<1, 32>>>(d);
    e = cudaDeviceSynchronize();
  }
  return (int)e;
}
