// Kernel attributes and occupancy, as a program built for the simulated GPU (-arch=sm_90) asks
// them. Usage: function_attributes MODE [ARGS]; prints one line per answer
// (tests/native/test_function_attributes.py compares each with ptxas and cuda_occupancy.h).
//   attributes                 per kernel: "attr NAME shared const local maxthreads regs ptx binary maxdyn carveout"
//   occupancy B:D ...          per kernel and pair: "occ NAME B D blocks"
//   potential                  per kernel: cudaOccupancyMaxPotentialBlockSize, "potential NAME mingrid block"
//   available N:B ...          per kernel and pair: "available NAME N B bytes" (or its error)
//   setattr                    cudaFuncSetAttribute on dynamic_kernel, its errors, cudaFuncGetName
//   carveout                   a 50 % carveout, then an occupancy query (stops the run)
//   launch                     launches beyond a kernel's limits, and within them: "launch WHAT ERROR"
//   cooperative BLOCKS ...     cudaLaunchCooperativeKernel of shared_kernel, 256 threads: "cooperative BLOCKS ERROR";
//                              then cudaLaunchKernelEx with the cooperative attribute: "cooperative_ex BLOCKS ERROR"
#include <cstdio>
#include <cstdlib>
#include <cstring>

__constant__ float coeffs[64];

__global__ void empty_kernel() {}

__global__ void __launch_bounds__(256) shared_kernel(float* x, int n) {
  __shared__ float tile[1024];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x] = x[i] * coeffs[threadIdx.x % 64];
  __syncthreads();
  if (i < n)
    x[i] = tile[(threadIdx.x + 1) % 256];
}

__global__ void local_kernel(double* x, int n) {  // an array indexed at run time: a stack frame
  double acc[16];
  for (int k = 0; k < 16; k++)
    acc[k] = x[(threadIdx.x + k * 7) % n];
  for (int j = 0; j < n; j++)
    for (int k = 0; k < 16; k++)
      acc[k] = acc[k] * acc[(k + j) % 16] + 1.0;
  double s = 0;
  for (int k = 0; k < 16; k++)
    s += acc[k];
  x[threadIdx.x] = s;
}

__global__ void register_kernel(const double* __restrict__ x, double* y, int n) {  // many live values
  double v[48];
#pragma unroll
  for (int k = 0; k < 48; k++)
    v[k] = x[threadIdx.x + k * n];
  double s = 0;
#pragma unroll
  for (int k = 0; k < 48; k++)
#pragma unroll
    for (int j = 0; j < 48; j++)
      s += v[k] * v[j] * (k + 1);
  y[threadIdx.x] = s;
}

extern __shared__ float dynamic_shared[];
__global__ void dynamic_kernel(float* x) {  // dynamic shared memory and named barriers
  dynamic_shared[threadIdx.x] = x[threadIdx.x];
  asm volatile("bar.sync 3, 128;");
  x[threadIdx.x] = dynamic_shared[(threadIdx.x + 1) % blockDim.x];
}

struct Kernel {
  const char* name;
  const void* f;
};
static const Kernel kKernels[] = {
    {"empty_kernel", (const void*)empty_kernel},       {"shared_kernel", (const void*)shared_kernel},
    {"local_kernel", (const void*)local_kernel},       {"register_kernel", (const void*)register_kernel},
    {"dynamic_kernel", (const void*)dynamic_kernel},
};

static void error(const char* what, cudaError_t e) { printf("%s %d %s\n", what, (int)e, cudaGetErrorName(e)); }

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  if (!strcmp(mode, "attributes")) {
    for (const Kernel& k : kKernels) {
      cudaFuncAttributes a;
      cudaError_t e = cudaFuncGetAttributes(&a, k.f);
      if (e != cudaSuccess) {
        error(k.name, e);
        continue;
      }
      printf("attr %s %zu %zu %zu %d %d %d %d %d %d\n", k.name, a.sharedSizeBytes, a.constSizeBytes,
             a.localSizeBytes, a.maxThreadsPerBlock, a.numRegs, a.ptxVersion, a.binaryVersion,
             a.maxDynamicSharedSizeBytes, a.preferredShmemCarveout);
    }
  } else if (!strcmp(mode, "occupancy") || !strcmp(mode, "available")) {
    for (const Kernel& k : kKernels)
      for (int i = 2; i < argc; i++) {
        long a = atol(argv[i]), b = atol(strchr(argv[i], ':') + 1);
        if (!strcmp(mode, "occupancy")) {
          int blocks = -1;
          cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, k.f, (int)a, (size_t)b);
          printf("occ %s %ld %ld %d %d\n", k.name, a, b, blocks, (int)e);
        } else {
          size_t bytes = 0;
          cudaError_t e = cudaOccupancyAvailableDynamicSMemPerBlock(&bytes, k.f, (int)a, (int)b);
          printf("available %s %ld %ld %zu %d\n", k.name, a, b, bytes, (int)e);
          cudaGetLastError();
        }
      }
  } else if (!strcmp(mode, "potential")) {
    for (const Kernel& k : kKernels) {
      int grid = -1, block = -1;
      cudaError_t e = cudaOccupancyMaxPotentialBlockSize(&grid, &block, k.f, 0, 0);
      printf("potential %s %d %d %d\n", k.name, grid, block, (int)e);
    }
  } else if (!strcmp(mode, "setattr")) {
    const void* f = (const void*)dynamic_kernel;
    error("set_100k", cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, 100 * 1024));
    cudaFuncAttributes a;
    cudaFuncGetAttributes(&a, f);
    printf("maxdyn %d\n", a.maxDynamicSharedSizeBytes);
    int blocks = -1;
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, f, 128, 100 * 1024);
    printf("occ_100k %d\n", blocks);
    int optin = 0;
    cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0);
    error("set_too_much", cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, optin + 1));
    error("set_carveout_bad", cudaFuncSetAttribute(f, cudaFuncAttributePreferredSharedMemoryCarveout, 101));
    error("not_a_kernel", cudaFuncGetAttributes(&a, (const void*)main));
    const char* name = nullptr;
    error("name", cudaFuncGetName(&name, (const void*)shared_kernel));
    printf("mangled %s\n", name);
  } else if (!strcmp(mode, "launch")) {
    float* x;
    double* d;
    cudaMalloc(&x, 1 << 20);
    cudaMalloc(&d, 1 << 20);
    dynamic_kernel<<<1, 128, 48 * 1024 + 1>>>(x);  // beyond the default 48 KiB
    error("launch dynamic_48k_plus_1", cudaGetLastError());
    cudaFuncSetAttribute((const void*)dynamic_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024);
    dynamic_kernel<<<1, 128, 60000>>>(x);  // within the limit set
    error("launch dynamic_60000_after_set", cudaGetLastError());
    shared_kernel<<<1, 512>>>(x, 512);  // beyond __launch_bounds__(256)
    error("launch shared_512", cudaGetLastError());
    register_kernel<<<1, 512>>>(d, d, 1);  // beyond what its registers allow
    error("launch register_512", cudaGetLastError());
    register_kernel<<<1, 256>>>(d, d, 1);
    error("launch register_256", cudaGetLastError());
    cudaDeviceSynchronize();
  } else if (!strcmp(mode, "cooperative")) {
    float* x;
    int n = 0;
    cudaMalloc(&x, 1 << 20);
    void* args[] = {&x, &n};
    for (int i = 2; i < argc; i++) {
      cudaError_t e = cudaLaunchCooperativeKernel((const void*)shared_kernel, dim3(atoi(argv[i])), dim3(256), args);
      printf("cooperative %s %d\n", argv[i], (int)e);
      cudaGetLastError();
      // the same through cudaLaunchKernelEx's cooperative attribute
      cudaLaunchAttribute attr;
      attr.id = cudaLaunchAttributeCooperative;
      attr.val.cooperative = 1;
      cudaLaunchConfig_t config = {};
      config.gridDim = dim3(atoi(argv[i]));
      config.blockDim = dim3(256);
      config.attrs = &attr;
      config.numAttrs = 1;
      e = cudaLaunchKernelEx(&config, shared_kernel, x, n);
      printf("cooperative_ex %s %d\n", argv[i], (int)e);
      cudaGetLastError();
    }
    cudaDeviceSynchronize();
  } else if (!strcmp(mode, "carveout")) {
    cudaFuncSetAttribute((const void*)shared_kernel, cudaFuncAttributePreferredSharedMemoryCarveout, 50);
    int blocks = -1;
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, (const void*)shared_kernel, 256, 0);
    printf("not reached %d\n", blocks);
  }
  return 0;
}
