/* Virtual memory management: the driver calls' arguments checked and decoded here, the memory
 * itself kept by the runtime (runtime_bridge.cpp), where cudaMalloc's is. Device memory only,
 * without export handles; multicast objects are refused by name (driver_api.def). */
#include "driver/driver.hpp"

using namespace orrery_driver;

/* The device a pinned device-memory allocation of `prop` is on, or -1 for anything else. */
static int device_of_prop(const char* fn, const CUmemAllocationProp* prop) {
  if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
    return -1;
  return valid_device(fn, prop->location.id) ? prop->location.id : -1;
}

ORR_EXPORT CUresult cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                                  CUmemAllocationGranularity_flags option) {
  if (!granularity || device_of_prop("cuMemGetAllocationGranularity", prop) < 0 ||
      (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM && option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
    return CUDA_ERROR_INVALID_VALUE;
  *granularity = orrery_private_vmm_granularity();
  return CUDA_SUCCESS;
}

ORR_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                                unsigned long long flags) {
  const char* fn = "cuMemCreate";
  if (prop && prop->type == CU_MEM_ALLOCATION_TYPE_PINNED && prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
    orrery_private_fatal(fn, "only device memory is simulated (CUmemAllocationProp.location.type must be "
                             "CU_MEM_LOCATION_TYPE_DEVICE)");
  if (prop && prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_NONE)
    orrery_private_fatal(fn, "shareable handles (requestedHandleTypes) are not simulated");
  int device = device_of_prop(fn, prop);
  if (!handle || device < 0 || flags)
    return CUDA_ERROR_INVALID_VALUE;
  return orrery_private_vmm_create(fn, device, size, handle);
}

ORR_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  return orrery_private_vmm_release("cuMemRelease", handle);
}

ORR_EXPORT CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                        unsigned long long flags) {
  if (!ptr || flags)
    return CUDA_ERROR_INVALID_VALUE;
  return orrery_private_vmm_reserve("cuMemAddressReserve", size, alignment, addr, ptr);
}

ORR_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  return orrery_private_vmm_free("cuMemAddressFree", ptr, size);
}

ORR_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                             unsigned long long flags) {
  if (flags)
    return CUDA_ERROR_INVALID_VALUE;
  return orrery_private_vmm_map("cuMemMap", ptr, size, offset, handle);
}

ORR_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) { return orrery_private_vmm_unmap("cuMemUnmap", ptr, size); }

ORR_EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count) {
  const char* fn = "cuMemSetAccess";
  if (!desc || !count)
    return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; i++) {
    const CUmemAccessDesc& d = desc[i];
    if (d.location.type != CU_MEM_LOCATION_TYPE_DEVICE)
      orrery_private_fatal(fn, "access from the host (CU_MEM_LOCATION_TYPE_HOST) is not simulated");
    if (d.flags != CU_MEM_ACCESS_FLAGS_PROT_NONE && d.flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
        d.flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
      return CUDA_ERROR_INVALID_VALUE;
    if (CUresult e = orrery_private_vmm_set_access(fn, ptr, size, d.location.id, d.flags))
      return e;
  }
  return CUDA_SUCCESS;
}

ORR_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
  if (!handle)
    return CUDA_ERROR_INVALID_VALUE;
  return orrery_private_vmm_retain("cuMemRetainAllocationHandle", addr, handle);
}

ORR_EXPORT CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp* prop,
                                                           CUmemGenericAllocationHandle handle) {
  if (!prop)
    return CUDA_ERROR_INVALID_VALUE;
  int device = 0;
  size_t size = 0;
  if (CUresult e = orrery_private_vmm_properties("cuMemGetAllocationPropertiesFromHandle", handle, &device, &size))
    return e;
  *prop = CUmemAllocationProp{};
  prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop->requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
  prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop->location.id = device;
  return CUDA_SUCCESS;
}
