/* What a pointer is, answered from the runtime's memory registry: cudaMalloc'd and cuMemMap'd
 * device memory, cudaMallocHost'd pinned memory, and everything else, which CUDA does not know. */
#include "driver/driver.hpp"

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
    case CU_POINTER_ATTRIBUTE_CONTEXT: *(CUcontext*)data = primary_context(fn, p.device); break;
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
