// Kernels that tests/native/test_driver_modules.py compiles into cubins, fat binaries and PTX with
// the real nvcc, for driver_modules.cu to load through the driver: busy and brief (extern "C", the
// names the cost file gives), a template instance (a mangled name), a kernel whose launch bounds
// limit its blocks, and the variables brief reads (a __constant__ and __device__ ones, which the
// program finds with cuModuleGetGlobal).
extern "C" __global__ void busy(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    x[i] = x[i] * 2.0f + 1.0f;
}

__constant__ float coefficients[8] = {1, 2, 3, 4, 5, 6, 7, 8};
__device__ int counter;

extern "C" __global__ void __launch_bounds__(256) brief(float* x) {
  __shared__ float s[512];
  s[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  x[threadIdx.x] = s[511 - threadIdx.x] * coefficients[threadIdx.x % 8] + counter;
}

template <typename T>
__global__ void scaled(T* x, T a) {
  x[threadIdx.x] *= a;
}
template __global__ void scaled<double>(double*, double);
