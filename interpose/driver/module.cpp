/* Modules, libraries and launches through the driver: cuModuleLoad* and cuLibraryLoad* read a
 * cubin, a fat binary or PTX (the CUDA samples' *Drv programs, NVRTC's output, codes that embed
 * their kernels' PTX) into the runtime's kernels (cudart/module.cpp), and cuLaunchKernel launches
 * one of them as cudaLaunchKernel launches a registered kernel: the same checks, cost and stream
 * order. A CUkernel is its CUfunction and a CUlibrary its CUmodule here: a library is loaded
 * into the current context at once. */
#include "driver/driver.hpp"

#include "cudart/cuda_api.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

using namespace orrery_driver;

namespace {

/* ptxas's options for what the JIT options ask of the compiled code, and the logs and wall time
 * they ask back (written by report_jit once the load is done). An option that would change the
 * code in a way ptxas cannot be asked for stops the run naming it. */
struct Jit {
  std::string ptxas;  // options for ptxas, space-separated
  char* info_log = nullptr;
  char* error_log = nullptr;
  void** info_size = nullptr;
  void** error_size = nullptr;
  void** wall_time = nullptr;
};

Jit jit_options(const char* fn, unsigned n, const CUjit_option* options, void** values) {
  Jit j;
  if (n && (!options || !values))
    orrery_private_fatal(fn, "JIT options without their values");
  for (unsigned i = 0; i < n; i++) {
    uintptr_t v = (uintptr_t)values[i];
    switch (options[i]) {
      case 0: j.ptxas += " --maxrregcount=" + std::to_string((unsigned)v); break;  // CU_JIT_MAX_REGISTERS
      case CU_JIT_WALL_TIME: j.wall_time = &values[i]; break;
      case CU_JIT_INFO_LOG_BUFFER: j.info_log = (char*)values[i]; break;
      case CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES: j.info_size = &values[i]; break;
      case CU_JIT_ERROR_LOG_BUFFER: j.error_log = (char*)values[i]; break;
      case CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES: j.error_size = &values[i]; break;
      case 7: j.ptxas += " -O" + std::to_string((unsigned)v); break;  // CU_JIT_OPTIMIZATION_LEVEL
      case 8: break;                                                   // CU_JIT_TARGET_FROM_CUCONTEXT: what it does anyway
      case 10: break;                                                  // CU_JIT_FALLBACK_STRATEGY: for images, not PTX
      case 11: j.ptxas += v ? " -g" : ""; break;                       // CU_JIT_GENERATE_DEBUG_INFO
      case 12: break;                                                  // CU_JIT_LOG_VERBOSE: its log only
      case 13: j.ptxas += v ? " -lineinfo" : ""; break;                // CU_JIT_GENERATE_LINE_INFO
      case 14: j.ptxas += v == 1 ? " -dlcm=cg" : v == 2 ? " -dlcm=ca" : ""; break;  // CU_JIT_CACHE_MODE
      default: {
        std::string what = "JIT option " + std::to_string(options[i]) +
                           " (CUjit_option), which Orrery does not give its PTX compiler (ptxas)";
        orrery_private_fatal(fn, what.c_str());
      }
    }
  }
  return j;
}

/* The logs' sizes are the bytes written; the compiler's wall time is 0 ms: a load costs no
 * simulated time. */
void report_jit(const Jit& j, const char* error) {
  auto write = [](char* buffer, void** size, const char* text) {
    size_t capacity = size ? (size_t)(uintptr_t)*size : 0;
    size_t n = buffer && capacity ? std::min(strlen(text), capacity - 1) : 0;
    if (buffer && capacity) {
      memcpy(buffer, text, n);
      buffer[n] = '\0';
    }
    if (size)
      *size = (void*)(uintptr_t)n;
  };
  write(j.info_log, j.info_size, "");
  write(j.error_log, j.error_size, error ? error : "");
  if (j.wall_time) {
    float ms = 0.0f;
    memcpy(j.wall_time, &ms, sizeof ms);
  }
}

CUresult load(const char* fn, void* out, const void* image, const Jit& jit) {
  if (!out || !image)
    return CUDA_ERROR_INVALID_VALUE;
  const char* log = nullptr;
  CUresult e = orrery_private_module_load(fn, image, jit.ptxas.c_str(), (CUmodule*)out, &log);
  report_jit(jit, e ? log : nullptr);
  return e;
}

CUresult load_file(const char* fn, void* out, const char* path, const Jit& jit) {
  if (!out || !path)
    return CUDA_ERROR_INVALID_VALUE;
  std::ifstream f(path, std::ios::binary);
  if (!f)
    return CUDA_ERROR_FILE_NOT_FOUND;
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return load(fn, out, bytes.c_str(), jit);  // NUL-terminated, as PTX text must be
}

/* cuLaunchKernel's `extra`: CU_LAUNCH_PARAM_BUFFER_POINTER and _SIZE, both or neither, up to
 * CU_LAUNCH_PARAM_END (or a null key). The kernel reads nothing in skeleton mode. */
bool valid_extra(void** extra) {
  bool pointer = false, size = false;
  for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
    if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
      pointer = extra[i + 1] != nullptr;
    else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
      size = extra[i + 1] != nullptr;
    else
      return false;
  }
  return pointer && size;
}

CUresult launch(const char* fn, CUfunction f, dim3 grid, dim3 block, unsigned shared, CUstream stream, void** params,
                void** extra, bool cooperative, bool per_thread) {
  if (!has_context(fn))
    return CUDA_ERROR_INVALID_CONTEXT;
  if (CUresult e = orrery_private_function_check(fn, f, false))
    return e;
  if ((params && extra) || (extra && !valid_extra(extra)))
    return CUDA_ERROR_INVALID_VALUE;
  cudaStream_t s = per_thread && !stream ? cudaStreamPerThread : (cudaStream_t)stream;
  return via_runtime(fn, [&] {
    return cooperative ? cudaLaunchCooperativeKernel(f, grid, block, params, shared, s)
                       : cudaLaunchKernel(f, grid, block, params, shared, s);
  });
}

CUresult attribute(const char* fn, int* value, CUfunction_attribute attribute, const void* f) {
  if (!value)
    return CUDA_ERROR_INVALID_VALUE;
  if (CUresult e = orrery_private_function_check(fn, f, true))
    return e;
  cudaFuncAttributes a;
  if (CUresult e = via_runtime(fn, [&] { return cudaFuncGetAttributes(&a, f); }))
    return e;
  switch (attribute) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *value = a.maxThreadsPerBlock; break;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: *value = (int)a.sharedSizeBytes; break;
    case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES: *value = (int)a.constSizeBytes; break;
    case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES: *value = (int)a.localSizeBytes; break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS: *value = a.numRegs; break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION: *value = a.ptxVersion; break;
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *value = a.binaryVersion; break;
    case CU_FUNC_ATTRIBUTE_CACHE_MODE_CA: *value = a.cacheModeCA; break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *value = a.maxDynamicSharedSizeBytes; break;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: *value = a.preferredShmemCarveout; break;
    case CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET: *value = a.clusterDimMustBeSet; break;
    case 11: *value = a.requiredClusterWidth; break;  // CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH
    case 12: *value = a.requiredClusterHeight; break;
    case 13: *value = a.requiredClusterDepth; break;
    case 14: *value = a.nonPortableClusterSizeAllowed; break;
    case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE: *value = a.clusterSchedulingPolicyPreference; break;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult enumerate(const char* fn, void* out, unsigned n, const void* module) {
  if (!out)
    return CUDA_ERROR_INVALID_VALUE;
  return orrery_private_module_functions(fn, (CUmodule)module, (CUfunction*)out, &n);
}

CUresult count(const char* fn, unsigned* n, const void* module) {
  if (!n)
    return CUDA_ERROR_INVALID_VALUE;
  return orrery_private_module_functions(fn, (CUmodule)module, nullptr, n);
}

/* CU_LIBRARY_HOST_UNIVERSAL_FUNCTION_AND_DATA_TABLE (0), CU_LIBRARY_BINARY_IS_PRESERVED (1): how
 * the driver keeps the image, not what it runs. Any other stops the run naming it. */
void library_options(const char* fn, unsigned n, const CUlibraryOption* options) {
  for (unsigned i = 0; i < n; i++)
    if (!options || (options[i] != 0 && options[i] != 1)) {
      std::string what = "library option " + std::to_string(options ? options[i] : -1) +
                         " (CUlibraryOption), which Orrery does not know";
      orrery_private_fatal(fn, what.c_str());
    }
}

}  // namespace

ORR_EXPORT CUresult cuModuleLoad(CUmodule* module, const char* fname) {
  if (!has_context(__func__))
    return CUDA_ERROR_INVALID_CONTEXT;
  return load_file(__func__, module, fname, Jit{});
}

ORR_EXPORT CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  if (!has_context(__func__))
    return CUDA_ERROR_INVALID_CONTEXT;
  return load(__func__, module, image, Jit{});
}

ORR_EXPORT CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int n, CUjit_option* options,
                                       void** values) {
  if (!has_context(__func__))
    return CUDA_ERROR_INVALID_CONTEXT;
  return load(__func__, module, image, jit_options(__func__, n, options, values));
}

ORR_EXPORT CUresult cuModuleLoadFatBinary(CUmodule* module, const void* fat) {
  if (!has_context(__func__))
    return CUDA_ERROR_INVALID_CONTEXT;
  return load(__func__, module, fat, Jit{});
}

ORR_EXPORT CUresult cuModuleUnload(CUmodule module) { return orrery_private_module_unload(__func__, module); }

// CUDA_MODULE_LOADING=EAGER loads every kernel at once, else (CUDA 12.2 on) each at its first use
ORR_EXPORT CUresult cuModuleGetLoadingMode(CUmoduleLoadingMode* mode) {
  if (!mode)
    return CUDA_ERROR_INVALID_VALUE;
  const char* env = getenv("CUDA_MODULE_LOADING");
  *mode = env && !strcmp(env, "EAGER") ? CU_MODULE_EAGER_LOADING : CU_MODULE_LAZY_LOADING;
  return CUDA_SUCCESS;
}

ORR_EXPORT CUresult cuModuleGetFunction(CUfunction* f, CUmodule module, const char* name) {
  if (!f || !name)
    return CUDA_ERROR_INVALID_VALUE;
  return orrery_private_module_function(__func__, module, name, f);
}

// A module's __device__ or __constant__ variable: device memory holding its initial value
ORR_EXPORT CUresult cuModuleGetGlobal_v2(CUdeviceptr* dptr, size_t* bytes, CUmodule module, const char* name) {
  if (!name)
    return CUDA_ERROR_INVALID_VALUE;
  return orrery_private_module_global(__func__, module, name, dptr, bytes);
}

ORR_EXPORT CUresult cuLibraryGetGlobal(CUdeviceptr* dptr, size_t* bytes, CUlibrary library, const char* name) {
  if (!name)
    return CUDA_ERROR_INVALID_VALUE;
  return orrery_private_module_global(__func__, (CUmodule)library, name, dptr, bytes);
}

ORR_EXPORT CUresult cuModuleGetFunctionCount(unsigned int* n, CUmodule module) { return count(__func__, n, module); }

ORR_EXPORT CUresult cuModuleEnumerateFunctions(CUfunction* functions, unsigned int n, CUmodule module) {
  return enumerate(__func__, functions, n, module);
}

ORR_EXPORT CUresult cuLibraryLoadData(CUlibrary* library, const void* code, CUjit_option* jit, void** jit_values,
                                      unsigned int n_jit, CUlibraryOption* options, void** option_values,
                                      unsigned int n_options) {
  library_options(__func__, n_options, options);
  return load(__func__, library, code, jit_options(__func__, n_jit, jit, jit_values));
}

ORR_EXPORT CUresult cuLibraryLoadFromFile(CUlibrary* library, const char* path, CUjit_option* jit, void** jit_values,
                                          unsigned int n_jit, CUlibraryOption* options, void** option_values,
                                          unsigned int n_options) {
  library_options(__func__, n_options, options);
  return load_file(__func__, library, path, jit_options(__func__, n_jit, jit, jit_values));
}

ORR_EXPORT CUresult cuLibraryUnload(CUlibrary library) {
  return orrery_private_module_unload(__func__, (CUmodule)library);
}

ORR_EXPORT CUresult cuLibraryGetKernel(CUkernel* kernel, CUlibrary library, const char* name) {
  if (!kernel || !name)
    return CUDA_ERROR_INVALID_VALUE;
  return orrery_private_module_function(__func__, (CUmodule)library, name, (CUfunction*)kernel);
}

ORR_EXPORT CUresult cuLibraryGetKernelCount(unsigned int* n, CUlibrary library) { return count(__func__, n, library); }

ORR_EXPORT CUresult cuLibraryEnumerateKernels(CUkernel* kernels, unsigned int n, CUlibrary library) {
  return enumerate(__func__, kernels, n, library);
}

ORR_EXPORT CUresult cuLibraryGetModule(CUmodule* module, CUlibrary library) {
  if (!module)
    return CUDA_ERROR_INVALID_VALUE;
  unsigned n;  // asked only to learn whether the rank holds the library (INVALID_HANDLE)
  if (CUresult e = orrery_private_module_functions(__func__, (CUmodule)library, nullptr, &n))
    return e;
  *module = (CUmodule)library;
  return CUDA_SUCCESS;
}

ORR_EXPORT CUresult cuKernelGetFunction(CUfunction* f, CUkernel kernel) {
  if (!f)
    return CUDA_ERROR_INVALID_VALUE;
  if (CUresult e = orrery_private_function_check(__func__, kernel, false))
    return e;
  *f = (CUfunction)kernel;
  return CUDA_SUCCESS;
}

ORR_EXPORT CUresult cuKernelGetName(const char** name, CUkernel kernel) { return cuFuncGetName(name, (CUfunction)kernel); }

ORR_EXPORT CUresult cuKernelGetAttribute(int* value, CUfunction_attribute attr, CUkernel kernel, CUdevice dev) {
  if (!valid_device(__func__, dev))
    return CUDA_ERROR_INVALID_DEVICE;
  return attribute(__func__, value, attr, kernel);
}

ORR_EXPORT CUresult cuFuncGetAttribute(int* value, CUfunction_attribute attr, CUfunction f) {
  return attribute(__func__, value, attr, f);
}

// The attributes a program may set (the maximum dynamic shared memory, the carveout, the cluster
// ones), numbered as the runtime's cudaFuncAttribute
ORR_EXPORT CUresult cuFuncSetAttribute(CUfunction f, CUfunction_attribute attr, int value) {
  if (CUresult e = orrery_private_function_check(__func__, f, false))
    return e;
  return via_runtime(__func__, [&] { return cudaFuncSetAttribute(f, attr, value); });
}

ORR_EXPORT CUresult cuFuncSetCacheConfig(CUfunction f, CUfunc_cache config) {
  if (CUresult e = orrery_private_function_check(__func__, f, false))
    return e;
  return via_runtime(__func__, [&] { return cudaFuncSetCacheConfig(f, config); });
}

ORR_EXPORT CUresult cuFuncGetName(const char** name, CUfunction f) {
  if (!name)
    return CUDA_ERROR_INVALID_VALUE;
  if (CUresult e = orrery_private_function_check(__func__, f, false))
    return e;
  return via_runtime(__func__, [&] { return cudaFuncGetName(name, f); });
}

ORR_EXPORT CUresult cuFuncGetModule(CUmodule* module, CUfunction f) {
  if (!module)
    return CUDA_ERROR_INVALID_VALUE;
  return orrery_private_function_module(__func__, f, module);
}

ORR_EXPORT CUresult cuFuncIsLoaded(CUfunctionLoadingState* state, CUfunction f) {
  if (!state)
    return CUDA_ERROR_INVALID_VALUE;
  if (CUresult e = orrery_private_function_check(__func__, f, false))
    return e;
  *state = CU_FUNCTION_LOADING_STATE_LOADED;  // loaded with its module
  return CUDA_SUCCESS;
}

ORR_EXPORT CUresult cuFuncLoad(CUfunction f) { return orrery_private_function_check(__func__, f, false); }

ORR_EXPORT CUresult cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* blocks, CUfunction f, int block_size,
                                                                         size_t dynamic, unsigned int flags) {
  if (CUresult e = orrery_private_function_check(__func__, f, true))
    return e;
  return via_runtime(__func__, [&] {
    return cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(blocks, f, block_size, dynamic, flags);
  });
}

ORR_EXPORT CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, CUfunction f, int block_size,
                                                                size_t dynamic) {
  return cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(blocks, f, block_size, dynamic, 0);
}

/* The block size that puts the most threads on a multiprocessor, as cuda_runtime.h's
 * cudaOccupancyMaxPotentialBlockSize finds it: from the largest block the kernel and the device
 * allow down by warps, each size's occupancy (with its dynamic shared memory), the first size of
 * the best; and the grid that fills the GPU with blocks of it. */
ORR_EXPORT CUresult cuOccupancyMaxPotentialBlockSizeWithFlags(int* min_grid, int* block, CUfunction f,
                                                              CUoccupancyB2DSize shared_of, size_t shared, int limit,
                                                              unsigned int flags) {
  const char* fn = "cuOccupancyMaxPotentialBlockSize";
  if (!min_grid || !block)
    return CUDA_ERROR_INVALID_VALUE;
  if (CUresult e = orrery_private_function_check(fn, f, true))
    return e;
  const cudaDeviceProp* p = orrery_private_device_prop(fn, orrery_private_current_device(fn));
  cudaFuncAttributes a;
  if (CUresult e = via_runtime(fn, [&] { return cudaFuncGetAttributes(&a, f); }))
    return e;
  limit = limit <= 0 ? p->maxThreadsPerBlock : std::min(limit, p->maxThreadsPerBlock);
  limit = std::min(limit, a.maxThreadsPerBlock);
  const int warp = p->warpSize;
  int best_threads = 0, best_block = 0, best_blocks = 0;
  for (int aligned = (limit + warp - 1) / warp * warp; aligned > 0; aligned -= warp) {
    int size = std::min(aligned, limit);
    size_t dynamic = shared_of ? shared_of(size) : shared;
    int blocks = 0;
    if (CUresult e = via_runtime(fn, [&] {
          return cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&blocks, f, size, dynamic, flags);
        }))
      return e;
    if (blocks * size > best_threads) {
      best_threads = blocks * size;
      best_block = size;
      best_blocks = blocks;
    }
    if (best_threads == p->maxThreadsPerMultiProcessor)
      break;
  }
  *min_grid = best_blocks * p->multiProcessorCount;
  *block = best_block;
  return CUDA_SUCCESS;
}

ORR_EXPORT CUresult cuOccupancyMaxPotentialBlockSize(int* min_grid, int* block, CUfunction f,
                                                     CUoccupancyB2DSize shared_of, size_t shared, int limit) {
  return cuOccupancyMaxPotentialBlockSizeWithFlags(min_grid, block, f, shared_of, shared, limit, 0);
}

ORR_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                                   unsigned int by, unsigned int bz, unsigned int shared, CUstream stream,
                                   void** params, void** extra) {
  return launch(__func__, f, dim3{gx, gy, gz}, dim3{bx, by, bz}, shared, stream, params, extra, false, false);
}

ORR_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                        unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                                        CUstream stream, void** params, void** extra) {
  return launch(__func__, f, dim3{gx, gy, gz}, dim3{bx, by, bz}, shared, stream, params, extra, false, true);
}

ORR_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                              unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                                              CUstream stream, void** params) {
  return launch(__func__, f, dim3{gx, gy, gz}, dim3{bx, by, bz}, shared, stream, params, nullptr, true, false);
}

// The runtime's cudaLaunchKernelExC on the same configuration: its attributes are the runtime's
ORR_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  static_assert(sizeof(CUlaunchAttribute) == sizeof(cudaLaunchAttribute), "CUlaunchAttribute is cudaLaunchAttribute");
  const char* fn = "cuLaunchKernelEx";
  if (!config)
    return CUDA_ERROR_INVALID_VALUE;
  if (!has_context(fn))
    return CUDA_ERROR_INVALID_CONTEXT;
  if (CUresult e = orrery_private_function_check(fn, f, false))
    return e;
  if ((params && extra) || (extra && !valid_extra(extra)))
    return CUDA_ERROR_INVALID_VALUE;
  cudaLaunchConfig_t c{};
  c.gridDim = dim3{config->gridDimX, config->gridDimY, config->gridDimZ};
  c.blockDim = dim3{config->blockDimX, config->blockDimY, config->blockDimZ};
  c.dynamicSmemBytes = config->sharedMemBytes;
  c.stream = (cudaStream_t)config->hStream;
  c.attrs = (cudaLaunchAttribute*)config->attrs;
  c.numAttrs = config->numAttrs;
  return via_runtime(fn, [&] { return cudaLaunchKernelExC(&c, f, params); });
}
