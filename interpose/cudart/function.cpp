/* A kernel's attributes and occupancy: cudaFuncGetAttributes, cudaFuncSetAttribute,
 * cudaFuncSetCacheConfig, cudaFuncGetName and the cudaOccupancy* calls (with them, cuda_runtime.h's
 * own cudaOccupancyMaxPotentialBlockSize, and CUB's and Thrust's launch tuning, run unchanged).
 *
 * The resources come from the kernel's code for the simulated GPU (core/cubin.hpp): registers,
 * static shared memory, local memory, launch bounds, barriers. Occupancy is the CUDA Occupancy
 * Calculator's (the toolkit's cuda_occupancy.h, against which tests/native/test_function_attributes.py
 * checks every answer): the fewest blocks a multiprocessor holds by its warps, its block slots,
 * its registers (allocated per warp in units of 256, in four sub-partitions), its shared memory
 * (allocated per block in units of 128 bytes on 8.0 and later, the driver's reserved 1 KiB
 * included) and, on 9.0 and later, its barriers. With the default shared memory carveout the
 * whole of a multiprocessor's shared memory is available; a kernel given another carveout or
 * cache preference stops an occupancy query, which would need the architecture's carveout
 * steps. Skeleton mode's kernel times come from the cost file whatever these say. */
#include "core/cubin.hpp"
#include "core/runtime.hpp"
#include "cudart/cuda_api.h"

#include <climits>
#include <algorithm>
#include <cstring>

using namespace orrery;

namespace {

/* A fat binary's kernels for the GPU: its cubin's, or those of the PTX a real GPU compiles as the
 * program loads, compiled by the driver's JIT (core/jit.cpp). */
FatbinKernels kernels_for_gpu(const void* fatbin, const cudaDeviceProp& p) {
  FatbinKernels f = read_fatbin(fatbin, p.major, p.minor, p.reservedSharedMemPerBlock);
  if (f.ptx.empty())
    return f;
  std::string cubin, why;
  if (!jit_available()) {
    f.why += ", and " + why_no_jit() + ": build with -arch=sm_" + std::to_string(p.major * 10 + p.minor);
    return f;
  }
  if (!jit(f.ptx, "", p.major * 10 + p.minor, cubin, why)) {
    f.why = "its PTX does not compile for the simulated GPU: " + why;
    return f;
  }
  ModuleImage compiled = read_module(cubin.c_str(), p.major, p.minor, p.reservedSharedMemPerBlock);
  if (compiled.status != ModuleImage::Loaded)
    f.why = "the cubin ptxas compiled of its PTX: " + compiled.why;
  f.kernels = std::move(compiled.kernels);
  return f;
}

const FatbinKernels& fatbin_of(Rank& r, const Kernel& k) {
  static std::map<const void*, FatbinKernels> read;  // per fat binary, for the run's one GPU model
  auto it = read.find(k.fatbin);
  if (it == read.end())
    it = read.emplace(k.fatbin, kernels_for_gpu(k.fatbin, current_gpu(r).prop)).first;
  return it->second;
}

const KernelResources* find_resources(Rank& r, Kernel& k) {
  if (!k.code_looked_up) {  // once per kernel: every launch checks it
    const FatbinKernels& f = fatbin_of(r, k);
    auto found = f.kernels.find(k.mangled);
    k.code = found == f.kernels.end() ? nullptr : &found->second;
    k.code_looked_up = true;
  }
  return k.code;
}

const KernelResources& resources(Rank& r, Kernel& k, const char* fn) {
  if (const KernelResources* res = find_resources(r, k))
    return *res;
  if (!k.no_code.empty())
    fatal("%s: kernel '%s': %s", fn, k.name.c_str(), k.no_code.c_str());
  const FatbinKernels& f = fatbin_of(r, k);
  fatal("%s: kernel '%s': %s", fn, k.name.c_str(),
        f.why.empty() ? "its code is not in the program's fat binary" : f.why.c_str());
}

// A kernel whose program has no code a real GPU of this kind could run (no cubin for it, no PTX)
bool no_image(Rank& r, const Kernel& k) { return k.fatbin && fatbin_of(r, k).no_code; }

int round_up(int x, int unit) { return (x + unit - 1) / unit * unit; }

constexpr int kRegisterUnit = 256, kSubPartitions = 4, kMaxRegistersPerThread = 255;

int warps_for_registers(const cudaDeviceProp& p, int registers_per_thread) {
  return round_up(registers_per_thread * p.warpSize, kRegisterUnit);
}

/* The most threads a block of this kernel may have: its launch bounds, the device's limit, and the
 * warps whose registers fit a block (the hardware's check counts warps in whole sub-partitions). */
int max_threads_per_block(const cudaDeviceProp& p, const KernelResources& k) {
  int limit = k.launch_bound_threads > 0 ? std::min(k.launch_bound_threads, p.maxThreadsPerBlock) : p.maxThreadsPerBlock;
  int per_warp = warps_for_registers(p, k.registers);
  if (per_warp == 0)
    return limit;
  int warps = limit / p.warpSize;
  while (warps > 0 && (per_warp * round_up(warps, kSubPartitions) > p.regsPerBlock || per_warp * warps > p.regsPerBlock))
    warps--;
  return std::min(limit, warps * p.warpSize);
}

int max_dynamic_shared(const cudaDeviceProp& p, const Kernel& k, const KernelResources& res) {
  if (k.max_dynamic_shared >= 0)
    return k.max_dynamic_shared;
  return p.sharedMemPerBlock > res.static_shared ? (int)(p.sharedMemPerBlock - res.static_shared) : 0;
}

int shared_granularity(const cudaDeviceProp& p) { return p.major >= 8 ? 128 : 256; }

/* Blocks of `block` threads with `dynamic` bytes of dynamic shared memory one multiprocessor holds. */
int active_blocks(const cudaDeviceProp& p, const Kernel& k, const KernelResources& res, int block, size_t dynamic) {
  // As the calculator: a block beyond the device's limit fits nowhere; one beyond the kernel's
  // launch bounds alone is counted by the other limits (its launch would fail all the same).
  if (block > p.maxThreadsPerBlock)
    return 0;
  int warps = (block + p.warpSize - 1) / p.warpSize;
  int by_warps = p.maxThreadsPerMultiProcessor / p.warpSize / warps;
  int by_slots = p.maxBlocksPerMultiProcessor;

  int by_registers = INT_MAX;
  int per_warp = warps_for_registers(p, res.registers);
  if (res.registers > kMaxRegistersPerThread + 1 || per_warp * warps > p.regsPerBlock ||
      per_warp * round_up(warps, kSubPartitions) > p.regsPerBlock)
    by_registers = 0;
  else if (per_warp > 0)
    by_registers = p.regsPerMultiprocessor / kSubPartitions / per_warp * kSubPartitions / warps;

  int by_shared = INT_MAX;
  size_t reserved = p.major >= 8 ? p.reservedSharedMemPerBlock : 0;
  size_t fixed = res.static_shared + reserved;
  size_t allocated = (size_t)round_up((int)(fixed + dynamic), shared_granularity(p));
  size_t max_dynamic = (size_t)max_dynamic_shared(p, k, res);
  size_t per_block_limit = (fixed + max_dynamic > p.sharedMemPerBlock ? p.sharedMemPerBlockOptin : p.sharedMemPerBlock) + reserved;
  if (dynamic > max_dynamic || allocated > per_block_limit)
    by_shared = 0;
  else if (allocated > 0)
    by_shared = (int)(p.sharedMemPerMultiprocessor / allocated);

  int blocks = std::min({by_warps, by_slots, by_registers, by_shared});
  if (p.major >= 9 && res.barriers > 0)
    blocks = std::min(blocks, 2 * by_slots / res.barriers);
  return blocks;
}

// Occupancy with another carveout or cache preference needs the architecture's carveout steps. A
// kernel without a preference of its own (cudaFuncCachePreferNone) takes its device's
// (cudaDeviceSetCacheConfig).
void refuse_carveout(const Rank& r, const Kernel& k, const char* fn) {
  if (k.carveout != -1 && k.carveout != 100)
    fatal("%s: kernel '%s' has a preferred shared memory carveout of %d %%, which Orrery's occupancy does not "
          "model (the default, or 100, it does)",
          fn, k.name.c_str(), k.carveout);
  auto device = r.cache_config.find(r.gpus[r.device]);
  int config = k.cache_config ? k.cache_config : device != r.cache_config.end() ? device->second : 0;
  if (config == 2 || config == 3)
    fatal("%s: kernel '%s' prefers %s (%s), which Orrery's occupancy does not model", fn, k.name.c_str(),
          config == 2 ? "a larger L1 cache" : "equal L1 cache and shared memory",
          k.cache_config ? "cudaFuncSetCacheConfig" : "cudaDeviceSetCacheConfig");
}

}  // namespace

namespace orrery {

cudaError_t check_launch(Rank& r, Kernel& k, int threads, size_t dynamic_shared) {
  const KernelResources* res = find_resources(r, k);
  if (!res)  // a real GPU cannot run a kernel without code for it; elsewhere what it needs is not known
    return no_image(r, k) ? cudaErrorNoKernelImageForDevice : cudaSuccess;
  const cudaDeviceProp& p = current_gpu(r).prop;
  if (dynamic_shared > (size_t)max_dynamic_shared(p, k, *res))
    return cudaErrorInvalidValue;
  if (threads > max_threads_per_block(p, *res))
    return cudaErrorLaunchOutOfResources;
  return cudaSuccess;
}

cudaError_t check_cooperative(Rank& r, Kernel& k, long blocks, int threads, size_t dynamic_shared) {
  const KernelResources* res = find_resources(r, k);
  if (!res)
    return no_image(r, k) ? cudaErrorNoKernelImageForDevice : cudaSuccess;
  const cudaDeviceProp& p = current_gpu(r).prop;
  refuse_carveout(r, k, "cudaLaunchCooperativeKernel");
  long resident = (long)active_blocks(p, k, *res, threads, dynamic_shared) * p.multiProcessorCount;
  return blocks > resident ? cudaErrorCooperativeLaunchTooLarge : cudaSuccess;
}

}  // namespace orrery

ORR_EXPORT cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, const void* func) {
  Rank& r = rank_self("cudaFuncGetAttributes");
  Kernel* k = registered_kernel(func);
  if (!attr)
    return r.last_error = cudaErrorInvalidValue;
  if (!k)
    return r.last_error = cudaErrorInvalidDeviceFunction;
  if (no_image(r, *k))
    return r.last_error = cudaErrorNoKernelImageForDevice;
  const KernelResources& res = resources(r, *k, "cudaFuncGetAttributes");
  const cudaDeviceProp& p = current_gpu(r).prop;
  memset(attr, 0, sizeof *attr);
  attr->sharedSizeBytes = res.static_shared;
  attr->localSizeBytes = res.local_bytes;
  attr->maxThreadsPerBlock = max_threads_per_block(p, res);
  attr->numRegs = res.registers;
  attr->ptxVersion = res.ptx_version;
  attr->binaryVersion = res.binary_version;
  attr->maxDynamicSharedSizeBytes = max_dynamic_shared(p, *k, res);
  attr->preferredShmemCarveout = k->carveout;
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaFuncGetName(const char** name, const void* func) {
  Rank& r = rank_self("cudaFuncGetName");
  Kernel* k = registered_kernel(func);
  if (!name)
    return r.last_error = cudaErrorInvalidValue;
  if (!k)
    return r.last_error = cudaErrorInvalidDeviceFunction;
  *name = k->mangled.c_str();
  return cudaSuccess;
}

/* What a real GPU's launches and occupancy would take from these; skeleton mode's kernel times
 * come from the cost file, measured with whatever attributes applied. */
ORR_EXPORT cudaError_t cudaFuncSetAttribute(const void* func, int attr, int value) {
  Rank& r = rank_self("cudaFuncSetAttribute");
  Kernel* k = registered_kernel(func);
  if (!k)
    return r.last_error = cudaErrorInvalidDeviceFunction;
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    const cudaDeviceProp& p = current_gpu(r).prop;
    const KernelResources* res = find_resources(r, *k);  // without its code, the static part is not known
    if (value < 0 || (size_t)value + (res ? res->static_shared : 0) > p.sharedMemPerBlockOptin)
      return r.last_error = cudaErrorInvalidValue;
    k->max_dynamic_shared = value;
  } else if (attr == cudaFuncAttributePreferredSharedMemoryCarveout) {
    if (value < -1 || value > 100)
      return r.last_error = cudaErrorInvalidValue;
    k->carveout = value;
  } else if (attr < cudaFuncAttributeMaxDynamicSharedMemorySize ||
             attr > cudaFuncAttributeClusterSchedulingPolicyPreference) {
    return r.last_error = cudaErrorInvalidValue;
  }
  return cudaSuccess;  // the cluster attributes: no cluster launch is simulated
}

ORR_EXPORT cudaError_t cudaFuncSetCacheConfig(const void* func, int config) {
  Rank& r = rank_self("cudaFuncSetCacheConfig");
  Kernel* k = registered_kernel(func);
  if (!k)
    return r.last_error = cudaErrorInvalidDeviceFunction;
  if (config < 0 || config > 3)
    return r.last_error = cudaErrorInvalidValue;
  k->cache_config = config;
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* blocks, const void* func,
                                                                              int block_size, size_t dynamic,
                                                                              unsigned int flags) {
  const char* fn = "cudaOccupancyMaxActiveBlocksPerMultiprocessor";
  Rank& r = rank_self(fn);
  Kernel* k = registered_kernel(func);
  if (!blocks || block_size <= 0 || flags > 1)  // cudaOccupancyDefault, cudaOccupancyDisableCachingOverride
    return r.last_error = cudaErrorInvalidValue;
  if (!k)
    return r.last_error = cudaErrorInvalidDeviceFunction;
  refuse_carveout(r, *k, fn);
  if (no_image(r, *k))
    return r.last_error = cudaErrorNoKernelImageForDevice;
  *blocks = active_blocks(current_gpu(r).prop, *k, resources(r, *k, fn), block_size, dynamic);
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, const void* func, int block_size,
                                                                     size_t dynamic) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(blocks, func, block_size, dynamic, 0);
}

/* The dynamic shared memory per block with which `blocks` blocks of `block_size` threads share a
 * multiprocessor, as the calculator gives it: the multiprocessor's shared memory (a block's limit
 * for one block) over the blocks, in allocation units, at most a block's limit, less the static
 * part, at most what the kernel may request. The blocks must fit without dynamic memory. */
ORR_EXPORT cudaError_t cudaOccupancyAvailableDynamicSMemPerBlock(size_t* bytes, const void* func, int blocks,
                                                                 int block_size) {
  const char* fn = "cudaOccupancyAvailableDynamicSMemPerBlock";
  Rank& r = rank_self(fn);
  Kernel* k = registered_kernel(func);
  if (!bytes || blocks <= 0 || block_size <= 0)
    return r.last_error = cudaErrorInvalidValue;
  if (!k)
    return r.last_error = cudaErrorInvalidDeviceFunction;
  refuse_carveout(r, *k, fn);
  const cudaDeviceProp& p = current_gpu(r).prop;
  if (no_image(r, *k))
    return r.last_error = cudaErrorNoKernelImageForDevice;
  const KernelResources& res = resources(r, *k, fn);
  if (active_blocks(p, *k, res, block_size, 0) < blocks)
    return r.last_error = cudaErrorInvalidValue;
  size_t reserved = p.major >= 8 ? p.reservedSharedMemPerBlock : 0;
  size_t block_limit = p.sharedMemPerBlockOptin + reserved;
  size_t unit = (size_t)shared_granularity(p);
  size_t available = (blocks == 1 ? block_limit : p.sharedMemPerMultiprocessor) / blocks / unit * unit;
  available = std::min(available, block_limit);
  available = available > res.static_shared ? available - res.static_shared : 0;
  *bytes = std::min(available, (size_t)max_dynamic_shared(p, *k, res));
  return cudaSuccess;
}
