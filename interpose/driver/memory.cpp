/* What a pointer is, answered from the runtime's memory registry: cudaMalloc'd and cuMemMap'd
 * device memory, cudaMallocHost'd pinned memory, and everything else, which CUDA does not know. */
#include "driver/driver.hpp"

#include "cudart/cuda_api.h"

#include <cstdint>
#include <cstdio>

using namespace orrery_driver;

/* One attribute of a pointer the runtime described as `p` (memory_type 0: unknown to CUDA). */
static CUresult attribute(const char* fn, void* data, CUpointer_attribute attr, CUdeviceptr ptr,
                          const OrreryPointer& p) {
  bool known = p.memory_type != 0;
  switch (attr) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
    case CU_POINTER_ATTRIBUTE_CONTEXT:
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
      if (!known)  // as CUDA: memory it did not allocate or register has none of these
        return CUDA_ERROR_INVALID_VALUE;
      break;
    default: break;
  }
  switch (attr) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: *(unsigned*)data = (unsigned)p.memory_type; break;
    case CU_POINTER_ATTRIBUTE_CONTEXT: *(CUcontext*)data = device_context(fn, p.device); break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: *(CUdeviceptr*)data = ptr; break;  // unified addressing
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      if (p.memory_type != CU_MEMORYTYPE_HOST && !p.managed)  // device memory has no host address
        return CUDA_ERROR_INVALID_VALUE;
      *(void**)data = (void*)(uintptr_t)ptr;
      break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int*)data = p.device; break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *(CUdeviceptr*)data = p.base; break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *(size_t*)data = p.size; break;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID: *(unsigned long long*)data = p.buffer_id; break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED: *(unsigned*)data = p.managed; break;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS: *(unsigned*)data = 1; break;
    case CU_POINTER_ATTRIBUTE_MAPPED: *(unsigned*)data = known; break;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
      *(unsigned*)data = p.memory_type == CU_MEMORYTYPE_DEVICE && !p.mapped;
      break;
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE: *(unsigned*)data = p.memory_type == CU_MEMORYTYPE_DEVICE; break;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
      *(unsigned*)data = known ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE : CU_MEM_ACCESS_FLAGS_PROT_NONE;
      break;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE: *(void**)data = nullptr; break;  // memory pools are refused
    default: {
      char what[80];
      snprintf(what, sizeof what, "pointer attribute %d is not simulated", attr);
      orrery_private_fatal(fn, what);
    }
  }
  return CUDA_SUCCESS;
}

ORR_EXPORT CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attr, CUdeviceptr ptr) {
  const char* fn = "cuPointerGetAttribute";
  if (!data)
    return CUDA_ERROR_INVALID_VALUE;
  OrreryPointer p;
  orrery_private_pointer(fn, (const void*)(uintptr_t)ptr, &p);
  return attribute(fn, data, attr, ptr, p);
}

ORR_EXPORT CUresult cuPointerGetAttributes(unsigned int n, CUpointer_attribute* attrs, void** data, CUdeviceptr ptr) {
  const char* fn = "cuPointerGetAttributes";
  if (!attrs || !data)
    return CUDA_ERROR_INVALID_VALUE;
  OrreryPointer p;
  orrery_private_pointer(fn, (const void*)(uintptr_t)ptr, &p);
  for (unsigned i = 0; i < n; i++) {
    // Unlike cuPointerGetAttribute, memory CUDA does not know is no error here: CUDA answers
    // type 0, no context, ordinal -2 and null addresses; device memory has a null host pointer.
    if (!p.memory_type) {
      switch (attrs[i]) {
        case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: *(unsigned*)data[i] = 0; continue;
        case CU_POINTER_ATTRIBUTE_CONTEXT: *(CUcontext*)data[i] = nullptr; continue;
        case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int*)data[i] = -2; continue;
        case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        case CU_POINTER_ATTRIBUTE_BUFFER_ID: *(unsigned long long*)data[i] = 0; continue;
        case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *(size_t*)data[i] = 0; continue;
        case CU_POINTER_ATTRIBUTE_HOST_POINTER: *(void**)data[i] = nullptr; continue;
        default: break;
      }
    }
    if (attrs[i] == CU_POINTER_ATTRIBUTE_HOST_POINTER && p.memory_type == CU_MEMORYTYPE_DEVICE) {
      *(void**)data[i] = nullptr;
      continue;
    }
    if (attribute(fn, data[i], attrs[i], ptr, p) != CUDA_SUCCESS)
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

ORR_EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr* base, size_t* size, CUdeviceptr dptr) {
  OrreryPointer p;
  orrery_private_pointer("cuMemGetAddressRange_v2", (const void*)(uintptr_t)dptr, &p);
  if (p.memory_type != CU_MEMORYTYPE_DEVICE)  // CUDA: device memory only (CUDA_ERROR_NOT_FOUND)
    return CUDA_ERROR_NOT_FOUND;
  if (base)
    *base = p.base;
  if (size)
    *size = p.size;
  return CUDA_SUCCESS;
}

/* ---- allocation, copies and memsets: the runtime's (cudart/memory.cpp) ----
 * Device memory, pinned host memory, and their copies and memsets are the runtime's, with its
 * paths and times: a driver copy names its ends by pointer (unified addressing), as
 * cudaMemcpyDefault does, or by the direction its name says. */

ORR_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytes) {
  if (!has_context("cuMemAlloc_v2"))
    return CUDA_ERROR_INVALID_CONTEXT;
  if (!dptr || bytes == 0)  // the driver refuses an empty allocation, unlike cudaMalloc
    return CUDA_ERROR_INVALID_VALUE;
  void* p = nullptr;
  CUresult e = via_runtime(__func__, [&] { return cudaMalloc(&p, bytes); });
  *dptr = (CUdeviceptr)(uintptr_t)p;
  return e;
}

ORR_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
  if (!has_context("cuMemFree_v2"))
    return CUDA_ERROR_INVALID_CONTEXT;
  return via_runtime(__func__, [&] { return cudaFree((void*)(uintptr_t)dptr); });
}

// CU_MEMHOSTALLOC_PORTABLE, DEVICEMAP, WRITECOMBINED: cudaHostAlloc's flags, bit for bit
ORR_EXPORT CUresult cuMemHostAlloc(void** pp, size_t bytes, unsigned int flags) {
  if (!has_context("cuMemHostAlloc"))
    return CUDA_ERROR_INVALID_CONTEXT;
  if (!pp || bytes == 0)
    return CUDA_ERROR_INVALID_VALUE;
  return via_runtime(__func__, [&] { return cudaHostAlloc(pp, bytes, flags); });
}

ORR_EXPORT CUresult cuMemAllocHost_v2(void** pp, size_t bytes) {
  if (!has_context("cuMemAllocHost_v2"))
    return CUDA_ERROR_INVALID_CONTEXT;
  if (!pp || bytes == 0)
    return CUDA_ERROR_INVALID_VALUE;
  return via_runtime(__func__, [&] { return cudaMallocHost(pp, bytes); });
}

ORR_EXPORT CUresult cuMemFreeHost(void* p) { return via_runtime(__func__, [&] { return cudaFreeHost(p); }); }

ORR_EXPORT CUresult cuMemGetInfo_v2(size_t* free, size_t* total) {
  if (!has_context("cuMemGetInfo_v2"))
    return CUDA_ERROR_INVALID_CONTEXT;
  return via_runtime(__func__, [&] { return cudaMemGetInfo(free, total); });
}

static void* at(CUdeviceptr p) { return (void*)(uintptr_t)p; }

ORR_EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
  return via_runtime(__func__, [&] { return cudaMemcpy(at(dst), at(src), bytes, cudaMemcpyDefault); });
}
ORR_EXPORT CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  return via_runtime(__func__, [&] { return cudaMemcpyAsync(at(dst), at(src), bytes, cudaMemcpyDefault, stream); });
}
ORR_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t bytes) {
  return via_runtime(__func__, [&] { return cudaMemcpy(at(dst), src, bytes, cudaMemcpyHostToDevice); });
}
ORR_EXPORT CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t bytes) {
  return via_runtime(__func__, [&] { return cudaMemcpy(dst, at(src), bytes, cudaMemcpyDeviceToHost); });
}
ORR_EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
  return via_runtime(__func__, [&] { return cudaMemcpy(at(dst), at(src), bytes, cudaMemcpyDeviceToDevice); });
}
ORR_EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t bytes, CUstream stream) {
  return via_runtime(__func__, [&] { return cudaMemcpyAsync(at(dst), src, bytes, cudaMemcpyHostToDevice, stream); });
}
ORR_EXPORT CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  return via_runtime(__func__, [&] { return cudaMemcpyAsync(dst, at(src), bytes, cudaMemcpyDeviceToHost, stream); });
}

/* A memset of `count` elements of `size` bytes each holding `value`: the runtime's memset of their
 * bytes, whose device memory nothing reads (skeleton mode). Managed memory, which the host's code
 * reads, takes a value only where every byte of the element is one byte repeated; another
 * pattern there stops the run naming the call. */
static CUresult memset_elements(const char* fn, CUdeviceptr dst, unsigned value, int size, size_t count,
                                CUstream stream, bool async) {
  const unsigned char byte = (unsigned char)value;
  bool repeated = true;
  for (int i = 1; i < size; i++)
    repeated = repeated && (unsigned char)(value >> (8 * i)) == byte;
  if (!repeated) {
    OrreryPointer p;
    orrery_private_pointer(fn, at(dst), &p);
    if (p.managed)
      orrery_private_fatal(fn, "a pattern of unequal bytes into managed memory, which the host's code reads: "
                               "only a byte repeated is simulated there");
  }
  size_t bytes = count * (size_t)size;
  return via_runtime(fn, [&] { return async ? cudaMemsetAsync(at(dst), byte, bytes, stream) : cudaMemset(at(dst), byte, bytes); });
}

ORR_EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, size_t n) {
  return memset_elements("cuMemsetD8_v2", dst, value, 1, n, nullptr, false);
}
ORR_EXPORT CUresult cuMemsetD32_v2(CUdeviceptr dst, unsigned int value, size_t n) {
  return memset_elements("cuMemsetD32_v2", dst, value, 4, n, nullptr, false);
}
ORR_EXPORT CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t n, CUstream stream) {
  return memset_elements("cuMemsetD8Async", dst, value, 1, n, stream, true);
}
ORR_EXPORT CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int value, size_t n, CUstream stream) {
  return memset_elements("cuMemsetD32Async", dst, value, 4, n, stream, true);
}
