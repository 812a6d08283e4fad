/* Kernel registration and launch: the entry points nvcc's host stubs call.
 *
 * Each rank's copy of the program registers its kernels (SMPI loads one copy
 * per rank), so the table maps every copy's stub address to the kernel's
 * demangled name. A launch costs the host the machine's launch overhead and
 * keeps the stream's GPU busy for the kernel's modelled time. */
#include "core/capture.hpp"
#include "core/runtime.hpp"
#include "core/trace.hpp"
#include "cudart/cuda_api.h"

#include <cxxabi.h>

#include <cstdlib>

namespace orrery {

static std::map<const void*, Kernel>& kernels() {
  static std::map<const void*, Kernel> k;
  return k;
}

Kernel* registered_kernel(const void* stub) {
  auto it = kernels().find(stub);
  return it == kernels().end() ? nullptr : &it->second;
}

static std::string demangle(const char* mangled) {
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string out = status == 0 && d ? d : mangled;
  free(d);
  return out;
}

Kernel& register_kernel(const void* handle, const std::string& mangled) {
  Kernel& k = kernels()[handle] = Kernel{};
  k.name = demangle(mangled.c_str());
  k.mangled = mangled;
  return k;
}

void unregister_kernel(const void* handle) { kernels().erase(handle); }

/* The keys a cost entry may use for a kernel, most specific first: the full
 * demangled signature, the name without its parameter list (and without a
 * template's return type), and that name without template arguments. */
static std::vector<std::string> cost_keys(const std::string& full) {
  std::vector<std::string> keys{full};
  int depth = 0;
  size_t paren = std::string::npos;
  for (size_t i = 0; i < full.size(); i++) {
    char c = full[i];
    if (c == '<') depth++;
    else if (c == '>') depth--;
    else if (c == '(' && depth == 0) { paren = i; break; }
  }
  std::string name = full.substr(0, paren);
  depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < name.size(); i++) {
    char c = name[i];
    if (c == '<') depth++;
    else if (c == '>') depth--;
    else if (c == ' ' && depth == 0) start = i + 1;
  }
  name = name.substr(start);
  if (name != full)
    keys.push_back(name);
  size_t lt = name.find('<');
  if (lt != std::string::npos)
    keys.push_back(name.substr(0, lt));
  return keys;
}

// A kernel's time from the cost file; `uncosted` when it has none and gets the default.
static double kernel_seconds(const std::string& name, dim3 grid, dim3 block, bool& uncosted) {
  const RunDescription& c = run_description();
  for (const std::string& key : cost_keys(name)) {
    auto it = c.kernels.find(key);
    if (it != c.kernels.end()) {
      double threads = (double)grid.x * grid.y * grid.z * block.x * block.y * block.z;
      return it->second.alpha_s + it->second.beta_s_per_thread * threads;
    }
  }
  if (c.strict)
    fatal("kernel '%s' has no cost in the cost file (--strict)", name.c_str());
  uncosted = true;
  return c.default_kernel_s;
}

/* The kernel operation a launch of `stub` enqueues (a graph's kernel node holds the same), once its
 * configuration is checked: CUDA's error for a bad one. */
cudaError_t kernel_op(Rank& r, const char* fn, const void* stub, dim3 grid, dim3 block, size_t shmem, Op& op) {
  Kernel* k = registered_kernel(stub);
  if (!k)
    fatal("%s: no kernel is registered at %p", fn, stub);
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || block.x == 0 || block.y == 0 || block.z == 0 ||
      (unsigned long)block.x * block.y * block.z > 1024)
    return cudaErrorInvalidConfiguration;
  if (cudaError_t e = check_launch(r, *k, (int)(block.x * block.y * block.z), shmem))
    return e;
  op = Op{Op::Kernel};
  op.name = k->name;
  op.grid = grid;
  op.block = block;
  op.seconds = kernel_seconds(k->name, grid, block, op.uncosted);
  return cudaSuccess;
}

static cudaError_t launch(const char* fn, const void* stub, dim3 grid, dim3 block, size_t shmem, cudaStream_t stream,
                          bool cooperative = false) {
  Rank& r = rank_deferring(fn);  // only enqueues: the kernel starts no sooner than the launch
  Op op{Op::Kernel};
  if (cudaError_t e = kernel_op(r, fn, stub, grid, block, shmem, op))
    return r.last_error = e;
  Kernel* k = registered_kernel(stub);
  if (cooperative)
    if (cudaError_t e = check_cooperative(r, *k, (long)grid.x * grid.y * grid.z, (int)(block.x * block.y * block.z),
                                          shmem))
      return r.last_error = e;
  Stream* s = resolve_stream(r, stream, fn);
  trace::CudaCall call(r, "cudaLaunchKernel");  // nvcc's <<<...>>> launches through it too
  call.about(k->name);
  host_overhead(r, current_gpu(r).launch_overhead_s);
  // counted once enqueued; a captured kernel is launched (and counted) by each launch of its graph
  const bool count = op.uncosted && !s->capture;
  if (cudaError_t e = enqueue(s, std::move(op)))
    return r.last_error = e;
  if (count)
    r.stats.uncosted[k->name].count++;
  return cudaSuccess;
}

}  // namespace orrery

using namespace orrery;

ORR_EXPORT void** __cudaRegisterFatBinary(void* fat_cubin) {
  // The handle is the wrapper itself: unique and stable, and what a kernel's attributes are read
  // from (cudart/function.cpp). The fat binary is never loaded.
  return (void**)fat_cubin;
}
ORR_EXPORT void __cudaRegisterFatBinaryEnd(void**) {}
ORR_EXPORT void __cudaUnregisterFatBinary(void**) {}
/* __managed__ variables, by the fat binary that registered them (each rank's copy of the program has
 * its own). The host code reaches one through a pointer (`host_pointer`) that the runtime sets when
 * the code first calls __cudaInitModule, as nvcc's host code does before its first access. */
namespace {
struct ManagedVariable {
  void** host_pointer;
  std::string name;  // its symbol in the device code
  size_t size;
};
std::map<void**, std::vector<ManagedVariable>>& managed_variables() {
  static std::map<void**, std::vector<ManagedVariable>> m;
  return m;
}
}  // namespace

ORR_EXPORT char __cudaInitModule(void** fatbin) {
  auto it = managed_variables().find(fatbin);
  if (it != managed_variables().end()) {
    for (ManagedVariable& v : it->second)
      *v.host_pointer = managed_variable(fatbin, v.name.c_str(), v.size);
    managed_variables().erase(it);  // once: later calls find the pointers set
  }
  return 1;
}

ORR_EXPORT void __cudaRegisterFunction(void** fatbin, const char* host_fun, char*, const char* device_name, int,
                                       void*, void*, void*, void*, int*) {
  Kernel& k = kernels()[host_fun];
  k = Kernel{};
  k.name = demangle(device_name);
  k.mangled = device_name;
  k.fatbin = fatbin;
}

ORR_EXPORT void __cudaRegisterVar(void**, char* host_var, char*, const char*, int, size_t size, int, int) {
  // __device__/__constant__ variables: their host shadow stays the program's own; the symbol calls
  // (cudaMemcpyToSymbol, cudaGetSymbolAddress, ...) reach their device instances
  register_symbol(host_var, size);
}
ORR_EXPORT void __cudaRegisterManagedVar(void** fatbin, void** host_pointer, char* device_name, const char*, int,
                                         size_t size, int, int) {
  managed_variables()[fatbin].push_back({host_pointer, device_name, size});
}

ORR_EXPORT unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shmem, cudaStream_t stream) {
  Rank& r = rank_deferring("<<<...>>>");
  r.cfg_grid = grid;
  r.cfg_block = block;
  r.cfg_shmem = shmem;
  r.cfg_stream = stream;
  return 0;
}

ORR_EXPORT cudaError_t __cudaPopCallConfiguration(dim3* grid, dim3* block, size_t* shmem, cudaStream_t* stream) {
  Rank& r = rank_deferring("<<<...>>>");
  *grid = r.cfg_grid;
  *block = r.cfg_block;
  *shmem = r.cfg_shmem;
  *stream = r.cfg_stream;
  return cudaSuccess;
}

ORR_EXPORT cudaError_t __cudaGetKernel(cudaKernel_t* kernel, const void* stub) {
  *kernel = (cudaKernel_t)stub;
  return cudaSuccess;
}

ORR_EXPORT cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void**, size_t shmem,
                                          cudaStream_t stream) {
  return launch("<<<...>>>", kernel, grid, block, shmem, stream);
}

ORR_EXPORT cudaError_t cudaLaunchKernel(const void* func, dim3 grid, dim3 block, void**, size_t shmem,
                                        cudaStream_t stream) {
  return launch("cudaLaunchKernel", func, grid, block, shmem, stream);
}

/* cudaLaunchKernelEx (cuda_runtime.h's template calls cudaLaunchKernelExC): a launch with its
 * configuration and attributes in one struct. Attributes that change what runs or when are taken
 * (cooperative), those without an effect on the kernel's time from its cost are accepted (a
 * priority, as a stream's; cluster dimensions and scheduling preference, as cudaFuncSetAttribute's;
 * memory synchronisation domains); the others change timing Orrery does not model and stop the
 * run naming them (programmatic dependent launch and its event, an L2 access policy window, a
 * launch completion event, ...). */
static cudaError_t launch_ex(const char* fn, const cudaLaunchConfig_t* config, const void* func, bool per_thread_default) {
  if (!config)
    return rank_self(fn).last_error = cudaErrorInvalidValue;
  enum { kIgnore = 0, kCooperative = 2, kClusterDimension = 4, kClusterScheduling = 5, kProgrammaticSerialization = 6,
         kPriority = 8, kMemSyncDomainMap = 9, kMemSyncDomain = 10, kPreferredClusterDimension = 11 };
  static const char* const names[] = {"Ignore", "AccessPolicyWindow", "Cooperative", "SynchronizationPolicy",
                                      "ClusterDimension", "ClusterSchedulingPolicyPreference",
                                      "ProgrammaticStreamSerialization", "ProgrammaticEvent", "Priority",
                                      "MemSyncDomainMap", "MemSyncDomain", "PreferredClusterDimension",
                                      "LaunchCompletionEvent", "DeviceUpdatableKernelNode",
                                      "PreferredSharedMemoryCarveout", "15", "NvlinkUtilCentricScheduling"};
  bool cooperative = false;
  for (unsigned i = 0; i < config->numAttrs; i++) {
    const cudaLaunchAttribute& a = config->attrs[i];
    switch (a.id) {
      case kCooperative: cooperative = a.val.cooperative != 0; break;
      case kProgrammaticSerialization:
        if (a.val.programmaticStreamSerializationAllowed)
          fatal("%s: launch attribute cudaLaunchAttributeProgrammaticStreamSerialization (programmatic dependent "
                "launch: a kernel that starts before the one ahead of it in its stream ends), which Orrery does not "
                "simulate",
                fn);
        break;
      case kIgnore:
      case kClusterDimension:
      case kClusterScheduling:
      case kPriority:
      case kMemSyncDomainMap:
      case kMemSyncDomain:
      case kPreferredClusterDimension: break;
      default: {
        int n = (int)(sizeof names / sizeof *names);
        fatal("%s: launch attribute cudaLaunchAttribute%s (%d), which Orrery does not simulate", fn,
              a.id >= 0 && a.id < n ? names[a.id] : "?", a.id);
      }
    }
  }
  cudaStream_t stream = per_thread_default ? per_thread(config->stream) : config->stream;
  return launch(fn, func, config->gridDim, config->blockDim, config->dynamicSmemBytes, stream, cooperative);
}

ORR_EXPORT cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t* config, const void* func, void**) {
  return launch_ex("cudaLaunchKernelEx", config, func, false);
}

ORR_EXPORT cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t* config, const void* func, void**) {
  return launch_ex("cudaLaunchKernelEx", config, func, true);
}

/* A cooperative launch (grid-wide synchronisation, cooperative groups' grid.sync()) is a launch
 * whose blocks must all be resident at once: more than the GPU holds fails. */
ORR_EXPORT cudaError_t cudaLaunchCooperativeKernel(const void* func, dim3 grid, dim3 block, void**, size_t shmem,
                                                   cudaStream_t stream) {
  return launch("cudaLaunchCooperativeKernel", func, grid, block, shmem, stream, true);
}

ORR_EXPORT cudaError_t cudaLaunchCooperativeKernel_ptsz(const void* func, dim3 grid, dim3 block, void**,
                                                        size_t shmem, cudaStream_t stream) {
  return launch("cudaLaunchCooperativeKernel", func, grid, block, shmem, per_thread(stream), true);
}

// nvcc --default-stream per-thread: stream 0 is the per-thread default stream
ORR_EXPORT cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 grid, dim3 block, void**, size_t shmem,
                                               cudaStream_t stream) {
  return launch("<<<...>>>", kernel, grid, block, shmem, per_thread(stream));
}

ORR_EXPORT cudaError_t cudaLaunchKernel_ptsz(const void* func, dim3 grid, dim3 block, void**, size_t shmem,
                                             cudaStream_t stream) {
  return launch("cudaLaunchKernel", func, grid, block, shmem, per_thread(stream));
}

