/* Contexts: each device's primary context, and at most one context of cuCtxCreate's per device
 * (the CUDA samples' *Drv programs, and codes that load their kernels as modules, create one),
 * current as the runtime's current device is, so that cudaSetDevice and cuCtxSetCurrent are two
 * ways of saying one thing; cuCtxPushCurrent and cuCtxPopCurrent keep a stack of them per rank.
 * A created context is its device's: its streams, memory and modules are the device's, as the
 * primary context's are. A second created context on one device stops the run: two contexts on
 * one GPU take turns on it (time-slicing), which Orrery does not simulate. */
#include "driver/driver.hpp"

#include "cudart/cuda_api.h"

using namespace orrery_driver;

namespace orrery_driver {

static char g_primary[kMaxDevices];  // their addresses are the handles
static char g_created[kMaxDevices];

CUcontext primary_context(const char* fn, int device) {
  if (device >= kMaxDevices)
    orrery_private_fatal(fn, "more devices than the driver stand-in has context handles for (256)");
  return reinterpret_cast<CUcontext>(&g_primary[device]);
}

static CUcontext created_context(int device) { return reinterpret_cast<CUcontext>(&g_created[device]); }

static int device_of_created(CUcontext ctx) {
  const char* c = reinterpret_cast<const char*>(ctx);
  return c >= g_created && c < g_created + kMaxDevices ? (int)(c - g_created) : -1;
}

int device_of_context(CUcontext ctx) {
  const char* c = reinterpret_cast<const char*>(ctx);
  return c >= g_primary && c < g_primary + kMaxDevices ? (int)(c - g_primary) : device_of_created(ctx);
}

CUcontext device_context(const char* fn, int device) {
  return orrery_private_created_context(fn, kCreatedAsk, device) ? created_context(device) : primary_context(fn, device);
}

}  // namespace orrery_driver

namespace {

CUcontext current(const char* fn) {
  if (!orrery_private_context_bound(fn, -1))
    return nullptr;
  int created = orrery_private_created_context(fn, kCreatedCurrent, -1);
  return created >= 0 ? created_context(created) : primary_context(fn, orrery_private_current_device(fn));
}

// Makes ctx current (null: none): its device the runtime's current one.
CUresult make_current(const char* fn, CUcontext ctx) {
  if (!ctx) {
    orrery_private_context_bound(fn, 0);
    return CUDA_SUCCESS;
  }
  int device = device_of_context(ctx);
  int created = device_of_created(ctx);
  if (device < 0 || (created >= 0 && !orrery_private_created_context(fn, kCreatedAsk, created)) ||
      orrery_private_set_current_device(fn, device) != CUDA_SUCCESS)
    return CUDA_ERROR_INVALID_CONTEXT;
  orrery_private_context_bound(fn, 1);
  orrery_private_created_context(fn, kCreatedMakeCurrent, created);
  return CUDA_SUCCESS;
}

// The context below the current one, made current (none when the stack is empty).
CUresult pop_to_previous(const char* fn) {
  uintptr_t previous = 0;
  return make_current(fn, orrery_private_context_stack(fn, kStackPop, &previous) ? (CUcontext)previous : nullptr);
}

}  // namespace

ORR_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  const char* fn = "cuDevicePrimaryCtxRetain";
  if (!pctx)
    return CUDA_ERROR_INVALID_VALUE;
  if (orrery_private_primary_retain(fn, dev, 1) < 0)
    return CUDA_ERROR_INVALID_DEVICE;
  *pctx = primary_context(fn, dev);
  return CUDA_SUCCESS;
}

static CUresult release(const char* fn, CUdevice dev) {
  int left = orrery_private_primary_retain(fn, dev, -1);
  return left == -1 ? CUDA_ERROR_INVALID_DEVICE : left == -2 ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
}
ORR_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev) { return release("cuDevicePrimaryCtxRelease", dev); }
ORR_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) { return release("cuDevicePrimaryCtxRelease_v2", dev); }

ORR_EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active) {
  if (!flags || !active)
    return CUDA_ERROR_INVALID_VALUE;
  return orrery_private_primary_state("cuDevicePrimaryCtxGetState", dev, flags, active);
}

ORR_EXPORT CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags) {
  // the scheduling flags (spin, yield, blocking sync) and CU_CTX_LMEM_RESIZE_TO_MAX: no effect on
  // simulated time, as cudaSetDeviceFlags
  if (flags & ~0x1fu)
    return CUDA_ERROR_INVALID_VALUE;
  return orrery_private_primary_set_flags("cuDevicePrimaryCtxSetFlags_v2", dev, flags);
}

ORR_EXPORT CUresult cuCtxGetCurrent(CUcontext* pctx) {
  if (!pctx)
    return CUDA_ERROR_INVALID_VALUE;
  *pctx = current("cuCtxGetCurrent");
  return CUDA_SUCCESS;
}

ORR_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) { return make_current("cuCtxSetCurrent", ctx); }

// Execution affinity (SM partitions) and CUDA-in-graphics contexts are not simulated; the flags
// (scheduling, mapped host memory, local memory, core dumps, memory operations' sync) take no
// simulated time, as cudaSetDeviceFlags's
ORR_EXPORT CUresult cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* params, unsigned int flags, CUdevice dev) {
  const char* fn = "cuCtxCreate_v4";
  if (!pctx || (flags & ~0xffu))
    return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(fn, dev))
    return CUDA_ERROR_INVALID_DEVICE;
  if (params && (params->numExecAffinityParams > 0 || params->cigParams))
    orrery_private_fatal(fn, "a context with execution affinity or CUDA-in-graphics parameters, which Orrery does "
                             "not simulate");
  if (orrery_private_created_context(fn, kCreatedAsk, dev))
    orrery_private_fatal(fn, "a second context on one GPU: contexts sharing a GPU take turns on it "
                             "(time-slicing), which Orrery does not simulate");
  if (CUcontext below = current(fn)) {  // the new context is pushed onto the rank's stack
    uintptr_t c = (uintptr_t)below;
    orrery_private_context_stack(fn, kStackPush, &c);
  }
  orrery_private_created_context(fn, kCreatedMake, dev);
  *pctx = created_context(dev);
  return make_current(fn, *pctx);
}

// The CUDA 3.2 to 12 entry point (programs that load the driver themselves name it)
ORR_EXPORT CUresult cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  return cuCtxCreate_v4(pctx, nullptr, flags, dev);
}

// A primary context is not destroyed but released (CUDA_ERROR_INVALID_CONTEXT here, as in CUDA)
ORR_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) {
  const char* fn = "cuCtxDestroy_v2";
  int dev = device_of_created(ctx);
  if (dev < 0 || !orrery_private_created_context(fn, kCreatedAsk, dev))
    return CUDA_ERROR_INVALID_CONTEXT;
  const bool was_current = current(fn) == ctx;
  if (was_current)
    orrery_private_synchronize(fn);  // its work ends with it
  uintptr_t c = (uintptr_t)ctx;
  orrery_private_context_stack(fn, kStackRemove, &c);
  orrery_private_created_context(fn, kCreatedDrop, dev);
  return was_current ? pop_to_previous(fn) : CUDA_SUCCESS;
}

ORR_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  const char* fn = "cuCtxPushCurrent_v2";
  if (!ctx)
    return CUDA_ERROR_INVALID_VALUE;
  if (device_of_context(ctx) < 0)
    return CUDA_ERROR_INVALID_CONTEXT;
  CUcontext below = current(fn);
  if (CUresult e = make_current(fn, ctx))
    return e;
  if (below) {
    uintptr_t c = (uintptr_t)below;
    orrery_private_context_stack(fn, kStackPush, &c);
  }
  return CUDA_SUCCESS;
}

ORR_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext* pctx) {
  const char* fn = "cuCtxPopCurrent_v2";
  CUcontext top = current(fn);
  if (!top)
    return CUDA_ERROR_INVALID_CONTEXT;
  if (pctx)
    *pctx = top;
  return pop_to_previous(fn);
}

ORR_EXPORT CUresult cuCtxGetDevice(CUdevice* device) {
  const char* fn = "cuCtxGetDevice";
  if (!device)
    return CUDA_ERROR_INVALID_VALUE;
  if (!orrery_private_context_bound(fn, -1))
    return CUDA_ERROR_INVALID_CONTEXT;
  *device = orrery_private_current_device(fn);
  return CUDA_SUCCESS;
}

ORR_EXPORT CUresult cuCtxSynchronize(void) {
  const char* fn = "cuCtxSynchronize";
  if (!orrery_private_context_bound(fn, -1))
    return CUDA_ERROR_INVALID_CONTEXT;
  orrery_private_synchronize(fn);
  return CUDA_SUCCESS;
}

/* The current context's device's limits, cache preference and stream priorities: the runtime's
 * (cudaDeviceSetLimit, ...), whose numbering CUlimit and CUfunc_cache share. */
ORR_EXPORT CUresult cuCtxSetLimit(CUlimit limit, size_t value) {
  if (!orrery_private_context_bound(__func__, -1))
    return CUDA_ERROR_INVALID_CONTEXT;
  return via_runtime(__func__, [&] { return cudaDeviceSetLimit(limit, value); });
}

ORR_EXPORT CUresult cuCtxGetLimit(size_t* value, CUlimit limit) {
  if (!orrery_private_context_bound(__func__, -1))
    return CUDA_ERROR_INVALID_CONTEXT;
  return via_runtime(__func__, [&] { return cudaDeviceGetLimit(value, limit); });
}

ORR_EXPORT CUresult cuCtxSetCacheConfig(CUfunc_cache config) {
  if (!orrery_private_context_bound(__func__, -1))
    return CUDA_ERROR_INVALID_CONTEXT;
  return via_runtime(__func__, [&] { return cudaDeviceSetCacheConfig(config); });
}

ORR_EXPORT CUresult cuCtxGetCacheConfig(CUfunc_cache* config) {
  if (!orrery_private_context_bound(__func__, -1))
    return CUDA_ERROR_INVALID_CONTEXT;
  return via_runtime(__func__, [&] { return cudaDeviceGetCacheConfig(config); });
}

ORR_EXPORT CUresult cuCtxGetStreamPriorityRange(int* least, int* greatest) {
  if (!orrery_private_context_bound(__func__, -1))
    return CUDA_ERROR_INVALID_CONTEXT;
  return via_runtime(__func__, [&] { return cudaDeviceGetStreamPriorityRange(least, greatest); });
}
