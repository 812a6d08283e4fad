/* Streams, events and peer access through the driver: the runtime's (cudart/stream_event.cpp,
 * cudart/device.cpp) on the same handles, so that a program mixing the two APIs (nvbandwidth's
 * driver streams running the runtime's kernels) orders its work on one set of streams. */
#include "driver/driver.hpp"

#include "cudart/cuda_api.h"

using namespace orrery_driver;

// CU_STREAM_DEFAULT, CU_STREAM_NON_BLOCKING: cudaStreamDefault, cudaStreamNonBlocking
constexpr unsigned kStreamFlags = 0x1;

ORR_EXPORT CUresult cuStreamCreate(CUstream* stream, unsigned int flags) {
  if (!has_context("cuStreamCreate"))
    return CUDA_ERROR_INVALID_CONTEXT;
  if (!stream || (flags & ~kStreamFlags))
    return CUDA_ERROR_INVALID_VALUE;
  return via_runtime(__func__, [&] { return cudaStreamCreateWithFlags(stream, flags); });
}

ORR_EXPORT CUresult cuStreamCreateWithPriority(CUstream* stream, unsigned int flags, int priority) {
  if (!has_context("cuStreamCreateWithPriority"))
    return CUDA_ERROR_INVALID_CONTEXT;
  if (!stream || (flags & ~kStreamFlags))
    return CUDA_ERROR_INVALID_VALUE;
  return via_runtime(__func__, [&] { return cudaStreamCreateWithPriority(stream, flags, priority); });
}

ORR_EXPORT CUresult cuStreamDestroy_v2(CUstream stream) { return via_runtime(__func__, [&] { return cudaStreamDestroy(stream); }); }
ORR_EXPORT CUresult cuStreamSynchronize(CUstream stream) { return via_runtime(__func__, [&] { return cudaStreamSynchronize(stream); }); }
ORR_EXPORT CUresult cuStreamQuery(CUstream stream) { return via_runtime(__func__, [&] { return cudaStreamQuery(stream); }); }

ORR_EXPORT CUresult cuStreamWaitEvent(CUstream stream, CUevent event, unsigned int flags) {
  return via_runtime(__func__, [&] { return cudaStreamWaitEvent(stream, event, flags); });
}

// The primary context of the stream's device (the legacy and per-thread streams: the current one's).
ORR_EXPORT CUresult cuStreamGetCtx(CUstream stream, CUcontext* ctx) {
  const char* fn = "cuStreamGetCtx";
  if (!ctx)
    return CUDA_ERROR_INVALID_VALUE;
  int device = 0;
  if (CUresult e = via_runtime(__func__, [&] { return cudaStreamGetDevice(stream, &device); }))
    return e;
  *ctx = device_context(fn, device);
  return CUDA_SUCCESS;
}

// CU_EVENT_DEFAULT, BLOCKING_SYNC, DISABLE_TIMING, INTERPROCESS: the runtime's cudaEvent* flags
ORR_EXPORT CUresult cuEventCreate(CUevent* event, unsigned int flags) {
  if (!has_context("cuEventCreate"))
    return CUDA_ERROR_INVALID_CONTEXT;
  if (!event)
    return CUDA_ERROR_INVALID_VALUE;
  return via_runtime(__func__, [&] { return cudaEventCreateWithFlags(event, flags); });
}

ORR_EXPORT CUresult cuEventRecord(CUevent event, CUstream stream) { return via_runtime(__func__, [&] { return cudaEventRecord(event, stream); }); }
ORR_EXPORT CUresult cuEventQuery(CUevent event) { return via_runtime(__func__, [&] { return cudaEventQuery(event); }); }
ORR_EXPORT CUresult cuEventSynchronize(CUevent event) { return via_runtime(__func__, [&] { return cudaEventSynchronize(event); }); }
ORR_EXPORT CUresult cuEventDestroy_v2(CUevent event) { return via_runtime(__func__, [&] { return cudaEventDestroy(event); }); }

ORR_EXPORT CUresult cuEventElapsedTime(float* ms, CUevent start, CUevent end) {
  return via_runtime(__func__, [&] { return cudaEventElapsedTime(ms, start, end); });
}
ORR_EXPORT CUresult cuEventElapsedTime_v2(float* ms, CUevent start, CUevent end) {
  return via_runtime(__func__, [&] { return cudaEventElapsedTime(ms, start, end); });
}

/* Peer access from the current context's device to the peer context's: cudaDeviceEnablePeerAccess
 * (copies between the two then go GPU to GPU, cudart/memory.cpp). */
ORR_EXPORT CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags) {
  if (!has_context("cuCtxEnablePeerAccess"))
    return CUDA_ERROR_INVALID_CONTEXT;
  int device = device_of_context(peer);
  if (device < 0)
    return CUDA_ERROR_INVALID_CONTEXT;
  return via_runtime(__func__, [&] { return cudaDeviceEnablePeerAccess(device, flags); });
}

ORR_EXPORT CUresult cuCtxDisablePeerAccess(CUcontext peer) {
  if (!has_context("cuCtxDisablePeerAccess"))
    return CUDA_ERROR_INVALID_CONTEXT;
  int device = device_of_context(peer);
  if (device < 0)
    return CUDA_ERROR_INVALID_CONTEXT;
  return via_runtime(__func__, [&] { return cudaDeviceDisablePeerAccess(device); });
}
