/* Initialisation and the devices the rank sees: answered from the runtime's GPUs, so that the
 * driver and the runtime count, name and describe them alike. */
#include "driver/driver.hpp"

#include <cstdio>
#include <cstring>

using namespace orrery_driver;

namespace orrery_driver {

bool valid_device(const char* fn, CUdevice dev) {
  return dev >= 0 && dev < orrery_private_device_count(fn);
}

}  // namespace orrery_driver

ORR_EXPORT CUresult cuInit(unsigned int flags) {
  orrery_private_device_count("cuInit");  // a call from a rank, as every other
  return flags ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

ORR_EXPORT CUresult cuDriverGetVersion(int* version) {
  if (!version)
    return CUDA_ERROR_INVALID_VALUE;
  *version = 13000;  // as cudaDriverGetVersion
  return CUDA_SUCCESS;
}

ORR_EXPORT CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  if (!device)
    return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device("cuDeviceGet", ordinal))
    return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;  // a device is its ordinal, as on a real driver
  return CUDA_SUCCESS;
}

ORR_EXPORT CUresult cuDeviceGetCount(int* count) {
  if (!count)
    return CUDA_ERROR_INVALID_VALUE;
  *count = orrery_private_device_count("cuDeviceGetCount");
  return CUDA_SUCCESS;
}

ORR_EXPORT CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  const cudaDeviceProp* p = orrery_private_device_prop("cuDeviceGetName", dev);
  if (!p)
    return CUDA_ERROR_INVALID_DEVICE;
  if (!name || len <= 0)
    return CUDA_ERROR_INVALID_VALUE;
  snprintf(name, (size_t)len, "%s", p->name);
  return CUDA_SUCCESS;
}

ORR_EXPORT CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attr, CUdevice dev) {
  const char* fn = "cuDeviceGetAttribute";
  if (!value)
    return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(fn, dev))
    return CUDA_ERROR_INVALID_DEVICE;
  switch (attr) {  // the driver's own attributes; the runtime answers those it shares
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: *value = 1; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED: *value = 0; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED: *value = 0; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED: *value = 0; return CUDA_SUCCESS;  // refused: cuMulticast*
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: *value = 0; return CUDA_SUCCESS;  // cuMemPool* refused
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM: *value = 1; return CUDA_SUCCESS;
    default: break;
  }
  if (!orrery_private_device_attribute(fn, attr, dev, value)) {
    char what[96];
    snprintf(what, sizeof what, "attribute %d is not described by Orrery's machine model", attr);
    orrery_private_fatal(fn, what);
  }
  return CUDA_SUCCESS;
}

ORR_EXPORT CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  const cudaDeviceProp* p = orrery_private_device_prop("cuDeviceTotalMem_v2", dev);
  if (!p)
    return CUDA_ERROR_INVALID_DEVICE;
  if (!bytes)
    return CUDA_ERROR_INVALID_VALUE;
  *bytes = p->totalGlobalMem;
  return CUDA_SUCCESS;
}

static CUresult uuid(const char* fn, CUuuid* out, CUdevice dev) {
  const cudaDeviceProp* p = orrery_private_device_prop(fn, dev);
  if (!p)
    return CUDA_ERROR_INVALID_DEVICE;
  if (!out)
    return CUDA_ERROR_INVALID_VALUE;
  static_assert(sizeof out->bytes == sizeof p->uuid.bytes, "CUuuid and cudaUUID_t are one type in CUDA");
  memcpy(out->bytes, p->uuid.bytes, sizeof out->bytes);
  return CUDA_SUCCESS;
}
ORR_EXPORT CUresult cuDeviceGetUuid(CUuuid* out, CUdevice dev) { return uuid("cuDeviceGetUuid", out, dev); }
ORR_EXPORT CUresult cuDeviceGetUuid_v2(CUuuid* out, CUdevice dev) { return uuid("cuDeviceGetUuid_v2", out, dev); }

ORR_EXPORT CUresult cuDeviceGetPCIBusId(char* bus, int len, CUdevice dev) {
  const cudaDeviceProp* p = orrery_private_device_prop("cuDeviceGetPCIBusId", dev);
  if (!p)
    return CUDA_ERROR_INVALID_DEVICE;
  if (!bus || len <= 0)
    return CUDA_ERROR_INVALID_VALUE;
  snprintf(bus, (size_t)len, "%04x:%02x:%02x.0", p->pciDomainID, p->pciBusID, p->pciDeviceID);
  return CUDA_SUCCESS;
}
