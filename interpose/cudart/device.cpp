/* Device management, answered from the machine description carried by the
 * platform's GPU hosts. A rank sees the GPUs of its node, as on a cluster. */
#include "core/capture.hpp"
#include "core/runtime.hpp"
#include "core/trace.hpp"
#include "cudart/cuda_api.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include <dlfcn.h>

using namespace orrery;

bool orrery::device_attribute(const cudaDeviceProp& p, int attr, int* value) {
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *value = p.maxThreadsPerBlock; break;
    case cudaDevAttrMaxBlockDimX: *value = p.maxThreadsDim[0]; break;
    case cudaDevAttrMaxBlockDimY: *value = p.maxThreadsDim[1]; break;
    case cudaDevAttrMaxBlockDimZ: *value = p.maxThreadsDim[2]; break;
    case cudaDevAttrMaxGridDimX: *value = p.maxGridSize[0]; break;
    case cudaDevAttrMaxGridDimY: *value = p.maxGridSize[1]; break;
    case cudaDevAttrMaxGridDimZ: *value = p.maxGridSize[2]; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = (int)p.sharedMemPerBlock; break;
    case cudaDevAttrTotalConstantMemory: *value = (int)p.totalConstMem; break;
    case cudaDevAttrWarpSize: *value = p.warpSize; break;
    case cudaDevAttrMaxRegistersPerBlock: *value = p.regsPerBlock; break;
    case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; break;
    case cudaDevAttrIntegrated: *value = p.integrated; break;
    case cudaDevAttrCanMapHostMemory: *value = p.canMapHostMemory; break;
    case cudaDevAttrComputeMode: *value = 0; break;
    case cudaDevAttrConcurrentKernels: *value = p.concurrentKernels; break;
    case cudaDevAttrEccEnabled: *value = p.ECCEnabled; break;
    case cudaDevAttrPciBusId: *value = p.pciBusID; break;
    case cudaDevAttrPciDeviceId: *value = p.pciDeviceID; break;
    case cudaDevAttrPciDomainId: *value = p.pciDomainID; break;
    case cudaDevAttrGlobalMemoryBusWidth: *value = p.memoryBusWidth; break;
    case cudaDevAttrL2CacheSize: *value = p.l2CacheSize; break;
    case cudaDevAttrMaxThreadsPerMultiProcessor: *value = p.maxThreadsPerMultiProcessor; break;
    case cudaDevAttrAsyncEngineCount: *value = p.asyncEngineCount; break;
    case cudaDevAttrUnifiedAddressing: *value = p.unifiedAddressing; break;
    case cudaDevAttrComputeCapabilityMajor: *value = p.major; break;
    case cudaDevAttrComputeCapabilityMinor: *value = p.minor; break;
    case cudaDevAttrStreamPrioritiesSupported: *value = p.streamPrioritiesSupported; break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *value = (int)p.sharedMemPerMultiprocessor; break;
    case cudaDevAttrMaxRegistersPerMultiprocessor: *value = p.regsPerMultiprocessor; break;
    case cudaDevAttrManagedMemory: *value = p.managedMemory; break;
    case cudaDevAttrCooperativeLaunch: *value = p.cooperativeLaunch; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = (int)p.sharedMemPerBlockOptin; break;
    case cudaDevAttrMaxBlocksPerMultiprocessor: *value = p.maxBlocksPerMultiProcessor; break;
    case cudaDevAttrGPUDirectRDMASupported: *value = p.gpuDirectRDMASupported; break;
    default: return false;
  }
  return true;
}

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
  if (!device_attribute(r.gpus[device]->prop, attr, value))
    fatal("cudaDeviceGetAttribute: attribute %d is not described by Orrery's machine model", attr);
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaDeviceSynchronize(void) {
  Rank& r = rank_self("cudaDeviceSynchronize");
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

ORR_EXPORT cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags) {
  Rank& r = rank_self("cudaDeviceEnablePeerAccess");
  if (peer < 0 || peer >= (int)r.gpus.size() || peer == r.device)
    return r.last_error = cudaErrorInvalidDevice;
  return flags ? r.last_error = cudaErrorInvalidValue : cudaSuccess;
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
