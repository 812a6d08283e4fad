/* Device management, answered from the machine description carried by the
 * platform's GPU hosts. A rank sees the GPUs of its node, as on a cluster. */
#include "core/capture.hpp"
#include "core/runtime.hpp"
#include "core/trace.hpp"
#include "cudart/cuda_api.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include <dlfcn.h>

using namespace orrery;

ORR_EXPORT cudaError_t cudaGetDeviceCount(int* count) {
  Rank& r = rank_self("cudaGetDeviceCount");
  if (!count)
    return r.last_error = cudaErrorInvalidValue;
  *count = (int)r.gpus.size();
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaSetDevice(int device) {
  Rank& r = rank_self("cudaSetDevice");
  if (device < 0 || device >= (int)r.gpus.size())
    return r.last_error = cudaErrorInvalidDevice;
  r.device = device;
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaGetDevice(int* device) {
  Rank& r = rank_self("cudaGetDevice");
  if (!device)
    return r.last_error = cudaErrorInvalidValue;
  *device = r.device;
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaSetDeviceFlags(unsigned int) { return cudaSuccess; }

ORR_EXPORT cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  Rank& r = rank_self("cudaGetDeviceProperties");
  if (!prop)
    return r.last_error = cudaErrorInvalidValue;
  if (device < 0 || device >= (int)r.gpus.size())
    return r.last_error = cudaErrorInvalidDevice;
  *prop = r.gpus[device]->prop;
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaDeviceGetAttribute(int* value, int attr, int device) {
  Rank& r = rank_self("cudaDeviceGetAttribute");
  if (!value)
    return r.last_error = cudaErrorInvalidValue;
  if (device < 0 || device >= (int)r.gpus.size())
    return r.last_error = cudaErrorInvalidDevice;
  if (const char* why = device_attribute(*r.gpus[device], attr, value))
    fatal("cudaDeviceGetAttribute: attribute %d (%s) %s", attr, device_attribute_name(attr), why);
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaDeviceSynchronize(void) {
  Rank& r = rank_deferring("cudaDeviceSynchronize");  // waits: no sooner than the rank's own time
  if (Capture* c = active_capture(r, r.device)) {  // it would wait for a captured stream
    capture_invalidate(c);
    return r.last_error = cudaErrorStreamCaptureUnsupported;
  }
  trace::CudaCall call(r, "cudaDeviceSynchronize");
  wait_device(r, r.device);
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaDeviceReset(void) {
  Rank& r = rank_self("cudaDeviceReset");
  trace::CudaCall call(r, "cudaDeviceReset");
  wait_device(r, r.device);
  return cudaSuccess;
}

/* Device limits (cudaLimit): kept per rank and device as set, read back; unset, the defaults of
 * CUDA 13's data-centre GPUs: a 1 KiB stack per thread, a 1 MiB printf buffer, an 8 MiB device heap
 * (CUDA C++ Programming Guide), a synchronisation depth of 2 and 2048 pending launches for dynamic
 * parallelism, no persisting L2 cache. None changes a simulated time. The L2 fetch granularity has
 * no default here: reading it before setting it stops the run naming it. A persisting L2 cache
 * stops the run too: its largest size is not described (persistingL2CacheMaxSize reads 0). */
namespace {
enum { kStackSize, kPrintfFifo, kMallocHeap, kSyncDepth, kPendingLaunches, kL2Fetch, kPersistingL2, kLimits };
std::map<std::pair<int, int>, std::map<int, size_t>>& limits() {  // per (rank, device): as set
  static std::map<std::pair<int, int>, std::map<int, size_t>> set;
  return set;
}
}  // namespace

ORR_EXPORT cudaError_t cudaDeviceSetLimit(int limit, size_t value) {
  Rank& r = rank_self("cudaDeviceSetLimit");
  if (limit < 0 || limit >= kLimits)
    return r.last_error = cudaErrorUnsupportedLimit;
  if (limit == kL2Fetch && value > 128)
    return r.last_error = cudaErrorInvalidValue;
  if (limit == kPersistingL2 && value > 0)
    fatal("cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, %zu): a persisting L2 cache, which Orrery does not "
          "simulate",
          value);
  limits()[{r.id, r.device}][limit] = value;
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaDeviceGetLimit(size_t* value, int limit) {
  Rank& r = rank_self("cudaDeviceGetLimit");
  if (!value)
    return r.last_error = cudaErrorInvalidValue;
  if (limit < 0 || limit >= kLimits)
    return r.last_error = cudaErrorUnsupportedLimit;
  const auto& set = limits()[{r.id, r.device}];
  if (auto it = set.find(limit); it != set.end()) {
    *value = it->second;
    return cudaSuccess;
  }
  static const size_t defaults[] = {1024, 1 << 20, 8 << 20, 2, 2048, 0, 0};
  if (limit == kL2Fetch)
    fatal("cudaDeviceGetLimit(cudaLimitMaxL2FetchGranularity): its default is not described by Orrery's machine "
          "model (set it first)");
  *value = defaults[limit];
  return cudaSuccess;
}

/* The device's cache preference (cudaFuncCache: PreferNone 0, Shared 1, L1 2, Equal 3), which
 * kernels without one of their own take: it matters to the occupancy Orrery answers (a kernel's
 * time comes from its cost). */
ORR_EXPORT cudaError_t cudaDeviceSetCacheConfig(int config) {
  Rank& r = rank_self("cudaDeviceSetCacheConfig");
  if (config < 0 || config > 3)
    return r.last_error = cudaErrorInvalidValue;
  r.cache_config[&current_gpu(r)] = config;
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaDeviceGetCacheConfig(int* config) {
  Rank& r = rank_self("cudaDeviceGetCacheConfig");
  if (!config)
    return r.last_error = cudaErrorInvalidValue;
  auto it = r.cache_config.find(&current_gpu(r));
  *config = it == r.cache_config.end() ? 0 : it->second;
  return cudaSuccess;
}

/* Shared memory bank size (cudaSharedMemConfig: Default 0, FourByte 1, EightByte 2): only Kepler
 * could change it. On later GPUs, as CUDA documents, setting it has no effect and the answer is
 * four bytes. */
ORR_EXPORT cudaError_t cudaDeviceSetSharedMemConfig(int config) {
  Rank& r = rank_self("cudaDeviceSetSharedMemConfig");
  if (config < 0 || config > 2)
    return r.last_error = cudaErrorInvalidValue;
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaDeviceGetSharedMemConfig(int* config) {
  Rank& r = rank_self("cudaDeviceGetSharedMemConfig");
  if (!config)
    return r.last_error = cudaErrorInvalidValue;
  *config = 1;
  return cudaSuccess;
}

/* The PCI address as the driver stand-in writes it (cuDeviceGetPCIBusId): domain:bus:device.0. */
ORR_EXPORT cudaError_t cudaDeviceGetPCIBusId(char* bus, int len, int device) {
  Rank& r = rank_self("cudaDeviceGetPCIBusId");
  if (device < 0 || device >= (int)r.gpus.size())
    return r.last_error = cudaErrorInvalidDevice;
  if (!bus || len <= 0)
    return r.last_error = cudaErrorInvalidValue;
  const cudaDeviceProp& p = r.gpus[device]->prop;
  snprintf(bus, (size_t)len, "%04x:%02x:%02x.0", p.pciDomainID, p.pciBusID, p.pciDeviceID);
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaDeviceGetByPCIBusId(int* device, const char* bus) {
  Rank& r = rank_self("cudaDeviceGetByPCIBusId");
  unsigned domain = 0, bus_id = 0, dev = 0;
  if (!device || !bus)
    return r.last_error = cudaErrorInvalidValue;
  // [domain:]bus:device[.function], in hexadecimal, as CUDA reads it
  if (sscanf(bus, "%x:%x:%x", &domain, &bus_id, &dev) != 3) {
    domain = 0;
    if (sscanf(bus, "%x:%x", &bus_id, &dev) != 2)
      return r.last_error = cudaErrorInvalidValue;
  }
  for (size_t i = 0; i < r.gpus.size(); i++) {
    const cudaDeviceProp& p = r.gpus[i]->prop;
    if ((unsigned)p.pciDomainID == domain && (unsigned)p.pciBusID == bus_id && (unsigned)p.pciDeviceID == dev) {
      *device = (int)i;
      return cudaSuccess;
    }
  }
  return r.last_error = cudaErrorInvalidDevice;
}

/* The range a profiler (Nsight Systems' --capture-range=cudaProfilerApi) records: Orrery's
 * timeline is --trace's, of the whole run, so the calls only appear in it. */
ORR_EXPORT cudaError_t cudaProfilerStart(void) {
  Rank& r = rank_self("cudaProfilerStart");
  trace::CudaCall call(r, "cudaProfilerStart");
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaProfilerStop(void) {
  Rank& r = rank_self("cudaProfilerStop");
  trace::CudaCall call(r, "cudaProfilerStop");
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaDeviceCanAccessPeer(int* can, int device, int peer) {
  Rank& r = rank_self("cudaDeviceCanAccessPeer");
  int n = (int)r.gpus.size();
  if (!can)
    return r.last_error = cudaErrorInvalidValue;
  if (device < 0 || device >= n || peer < 0 || peer >= n)
    return r.last_error = cudaErrorInvalidDevice;
  *can = device != peer;
  return cudaSuccess;
}

/* Peer access costs no time; it decides the path of the rank's peer copies (memory.cpp,
 * peer_to_peer): GPU to GPU where enabled either way, else staged through host memory, as the
 * driver does. Kernels' peer accesses are not simulated. Enabling twice, or disabling what is not
 * enabled, fails as in CUDA. */
ORR_EXPORT cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags) {
  Rank& r = rank_self("cudaDeviceEnablePeerAccess");
  if (peer < 0 || peer >= (int)r.gpus.size() || peer == r.device)
    return r.last_error = cudaErrorInvalidDevice;
  if (flags)
    return r.last_error = cudaErrorInvalidValue;
  if (!r.peer_access.insert({r.device, peer}).second)
    return r.last_error = cudaErrorPeerAccessAlreadyEnabled;
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaDeviceDisablePeerAccess(int peer) {
  Rank& r = rank_self("cudaDeviceDisablePeerAccess");
  if (peer < 0 || peer >= (int)r.gpus.size() || peer == r.device)
    return r.last_error = cudaErrorInvalidDevice;
  if (!r.peer_access.erase({r.device, peer}))
    return r.last_error = cudaErrorPeerAccessNotEnabled;
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaDeviceGetStreamPriorityRange(int* least, int* greatest) {
  if (least)
    *least = 0;
  if (greatest)
    *greatest = -5;
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaRuntimeGetVersion(int* v) {
  *v = 13000;
  return cudaSuccess;
}
ORR_EXPORT cudaError_t cudaDriverGetVersion(int* v) {
  *v = 13000;
  return cudaSuccess;
}

/* Driver entry points come from the driver stand-in's own cuGetProcAddress (libcuda.so.1, which
 * `orrery run` puts first on the library path), as the real runtime asks the real driver. */
static cudaError_t driver_entry_point(const char* fn, const char* symbol, void** fp, unsigned version,
                                      unsigned long long flags, int* status, bool per_thread) {
  Rank& r = rank_self(fn);
  if (!symbol || !fp || flags > 2)
    return r.last_error = cudaErrorInvalidValue;
  if (flags == 0 && per_thread)  // cudaEnableDefault in code built for per-thread default streams
    flags = 2;
  using GetProc = int (*)(const char*, void**, int, unsigned long long, int*);
  static GetProc get = nullptr;
  if (!get) {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    void* f = lib ? dlsym(lib, "cuGetProcAddress_v2") : nullptr;
    Dl_info ours{}, theirs{};
    if (!f || !dladdr((void*)&driver_entry_point, &ours) || !dladdr(f, &theirs))
      fatal("%s: cannot load the driver stand-in libcuda.so.1 (%s)", fn, lib ? "no cuGetProcAddress_v2" : dlerror());
    // the real driver would answer with its own functions, for a GPU the run does not simulate
    auto folder = [](const char* path) {
      char* real = realpath(path, nullptr);
      std::string f = real ? real : path;
      free(real);
      return f.substr(0, f.rfind('/'));
    };
    if (folder(ours.dli_fname) != folder(theirs.dli_fname))
      fatal("%s: libcuda.so.1 was loaded from %s, not Orrery's driver stand-in beside %s", fn, theirs.dli_fname,
            ours.dli_fname);
    get = (GetProc)f;
  }
  int found = 0;
  get(symbol, fp, (int)version, flags, &found);  // not found: *fp is NULL and found says why
  if (status)
    *status = found;
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaGetDriverEntryPoint(const char* symbol, void** fp, unsigned long long flags, int* status) {
  return driver_entry_point("cudaGetDriverEntryPoint", symbol, fp, 13000, flags, status, false);
}
ORR_EXPORT cudaError_t cudaGetDriverEntryPoint_ptsz(const char* symbol, void** fp, unsigned long long flags,
                                                    int* status) {
  return driver_entry_point("cudaGetDriverEntryPoint_ptsz", symbol, fp, 13000, flags, status, true);
}
ORR_EXPORT cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** fp, unsigned int version,
                                                        unsigned long long flags, int* status) {
  return driver_entry_point("cudaGetDriverEntryPointByVersion", symbol, fp, version, flags, status, false);
}
ORR_EXPORT cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char* symbol, void** fp, unsigned int version,
                                                             unsigned long long flags, int* status) {
  return driver_entry_point("cudaGetDriverEntryPointByVersion_ptsz", symbol, fp, version, flags, status, true);
}
