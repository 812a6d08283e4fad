/* Contexts: one primary context per device, current as the runtime's current device is, so that
 * cudaSetDevice and cuCtxSetCurrent are two ways of saying one thing. Other contexts
 * (cuCtxCreate, cuCtxPushCurrent, ...) are refused. */
#include "driver/driver.hpp"

using namespace orrery_driver;

namespace orrery_driver {

static char g_primary[kMaxDevices];  // their addresses are the handles

CUcontext primary_context(const char* fn, int device) {
  if (device >= kMaxDevices)
    orrery_private_fatal(fn, "more devices than the driver stand-in has context handles for (256)");
  return reinterpret_cast<CUcontext>(&g_primary[device]);
}

int device_of_context(CUcontext ctx) {
  const char* c = reinterpret_cast<const char*>(ctx);
  return c >= g_primary && c < g_primary + kMaxDevices ? (int)(c - g_primary) : -1;
}

}  // namespace orrery_driver

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
  const char* fn = "cuCtxGetCurrent";
  if (!pctx)
    return CUDA_ERROR_INVALID_VALUE;
  *pctx = orrery_private_context_bound(fn, -1) ? primary_context(fn, orrery_private_current_device(fn)) : nullptr;
  return CUDA_SUCCESS;
}

ORR_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
  const char* fn = "cuCtxSetCurrent";
  if (!ctx) {
    orrery_private_context_bound(fn, 0);
    return CUDA_SUCCESS;
  }
  int device = device_of_context(ctx);
  if (device < 0 || orrery_private_set_current_device(fn, device) != CUDA_SUCCESS)
    return CUDA_ERROR_INVALID_CONTEXT;
  orrery_private_context_bound(fn, 1);
  return CUDA_SUCCESS;
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
