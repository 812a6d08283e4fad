/* What the driver calls' files share (libcuda.so.1): contexts as handles, and the runtime's
 * answers (runtime_bridge.h). The driver stand-in keeps no state of its own. */
#ifndef ORRERY_DRIVER_HPP
#define ORRERY_DRIVER_HPP

#include "driver/driver_api.h"
#include "driver/runtime_bridge.h"

namespace orrery_driver {

/* A device's primary context, as a handle: the address of its slot in a table of this library
 * (programs only compare and pass contexts). The rank's device numbers index it. */
constexpr int kMaxDevices = 256;
CUcontext primary_context(const char* fn, int device);
int device_of_context(CUcontext ctx);  // -1: no context (a primary one or one of cuCtxCreate's)
// The device's context for what lives on it (its memory, its streams): the one cuCtxCreate made
// there, else its primary context.
CUcontext device_context(const char* fn, int device);
bool valid_device(const char* fn, CUdevice dev);

/* A runtime call's error as the driver's: CUDA numbers most of them alike (invalid value, out of
 * memory, invalid device, handle, not ready, peer access, capture); the runtime's own argument
 * errors (pitch, symbol, memcpy direction, device pointer) are the driver's invalid value. */
inline CUresult from_runtime(cudaError_t e) {
  switch (e) {
    case cudaErrorInvalidConfiguration:
    case cudaErrorInvalidPitchValue:
    case cudaErrorInvalidSymbol:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidMemcpyDirection:
    case cudaErrorInvalidDeviceFunction: return CUDA_ERROR_INVALID_VALUE;
    default: return (CUresult)e;
  }
}

/* Calls the runtime's `call` for the driver call `fn`: its error is the driver's to return, and not
 * the runtime's last error (cudaGetLastError), which the driver's calls leave as they found it (a
 * cuCtxEnablePeerAccess already enabled must not make the program's next cudaGetLastError fail). */
template <typename Call>
CUresult via_runtime(const char* fn, Call call) {
  cudaError_t before = orrery_private_swap_last_error(fn, cudaSuccess);
  cudaError_t e = call();
  orrery_private_swap_last_error(fn, before);
  return from_runtime(e);
}

/* The driver's calls that move memory or order work are the runtime's (cudart/memory.cpp,
 * stream_event.cpp) on the same memory, streams and events: CUstream and CUevent are the runtime's
 * handles, as in CUDA. A driver call without a current context (cuCtxSetCurrent(NULL)) fails. */
inline bool has_context(const char* fn) { return orrery_private_context_bound(fn, -1); }

}  // namespace orrery_driver

#endif
