/* The node's GPUs as NVML sees them (nvml_api.def's devices family): every GPU of the calling
 * rank's node, whatever the rank sees of them (NVML ignores CUDA_VISIBLE_DEVICES, so that
 * `--gpu-visibility bound` changes nothing here), numbered by their index in the node, as NVML
 * numbers them in PCI order. Each answer is the one the CUDA runtime gives for the same GPU: its
 * name, UUID (cudaDeviceProp::uuid, "GPU-" and its 16 bytes as 8-4-4-4-12 hex digits), PCI bus id,
 * compute capability, memory (its size; in use: every rank's allocations on it, as
 * cudaMemGetInfo's) and clocks (the machine's gpu.clock_rate and gpu.memory_clock_rate, current
 * and maximum alike: a simulated GPU runs at the clock it is described with). A clock the machine
 * does not describe stops the run naming the key, as cudaDeviceGetAttribute does. */
#include "nvml/nvml.hpp"

#include "cudart/cuda_abi.h"
#include "driver/runtime_bridge.h"

#include <cstdio>
#include <cstring>
#include <string>

using namespace orrery_nvml;

namespace {

// The GPU behind a handle, after the checks every device call makes.
nvmlReturn_t gpu_of(const char* fn, nvmlDevice_t device, const cudaDeviceProp** prop, size_t* used = nullptr) {
  if (nvmlReturn_t e = initialised(fn))
    return e;
  *prop = device ? orrery_private_node_gpu(fn, index_of(device), used) : nullptr;
  return *prop ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

std::string uuid_text(const cudaDeviceProp& p) {
  const unsigned char* b = reinterpret_cast<const unsigned char*>(p.uuid.bytes);
  char text[48];
  snprintf(text, sizeof text, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
           b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return text;
}

// The handle of the node's GPU for which `matches` holds, NVML_ERROR_NOT_FOUND for none.
template <typename Match>
nvmlReturn_t find(const char* fn, nvmlDevice_t* device, Match matches) {
  if (nvmlReturn_t e = initialised(fn))
    return e;
  if (!device)
    return NVML_ERROR_INVALID_ARGUMENT;
  for (int i = 0, n = orrery_private_node_gpu_count(fn); i < n; i++)
    if (matches(*orrery_private_node_gpu(fn, i, nullptr))) {
      *device = handle_of(i);
      return NVML_SUCCESS;
    }
  return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t count(const char* fn, unsigned int* out) {
  if (nvmlReturn_t e = initialised(fn))
    return e;
  if (!out)
    return NVML_ERROR_INVALID_ARGUMENT;
  *out = (unsigned)orrery_private_node_gpu_count(fn);
  return NVML_SUCCESS;
}

nvmlReturn_t by_index(const char* fn, unsigned int index, nvmlDevice_t* device) {
  if (nvmlReturn_t e = initialised(fn))
    return e;
  if (!device || index >= (unsigned)orrery_private_node_gpu_count(fn))
    return NVML_ERROR_INVALID_ARGUMENT;
  *device = handle_of((int)index);
  return NVML_SUCCESS;
}

/* A PCI bus id in any of the forms NVML takes (hexadecimal): domain:bus:device.function,
 * domain:bus:device, bus:device.function; false for none. */
bool parse_bus_id(const char* text, unsigned* domain, unsigned* bus, unsigned* device) {
  unsigned function = 0;
  int end = 0;
  *domain = 0;
  if (sscanf(text, "%x:%x:%x.%x%n", domain, bus, device, &function, &end) == 4 && !text[end])
    return true;
  if (sscanf(text, "%x:%x:%x%n", domain, bus, device, &end) == 3 && !text[end])
    return true;
  *domain = 0;
  return sscanf(text, "%x:%x.%x%n", bus, device, &function, &end) == 3 && !text[end];
}

nvmlReturn_t by_bus_id(const char* fn, const char* id, nvmlDevice_t* device) {
  unsigned domain, bus, dev;
  if (!id || !parse_bus_id(id, &domain, &bus, &dev))
    return initialised(fn) ? initialised(fn) : NVML_ERROR_INVALID_ARGUMENT;
  return find(fn, device, [&](const cudaDeviceProp& p) {
    return (unsigned)p.pciDomainID == domain && (unsigned)p.pciBusID == bus && (unsigned)p.pciDeviceID == dev;
  });
}

// cudaDevAttrClockRate, cudaDevAttrMemoryClockRate (driver_types.h)
constexpr int kClockRate = 13, kMemoryClockRate = 36;

nvmlReturn_t clock(const char* fn, nvmlDevice_t device, nvmlClockType_t type, unsigned int* mhz) {
  const cudaDeviceProp* p;
  if (nvmlReturn_t e = gpu_of(fn, device, &p))
    return e;
  if (!mhz)
    return NVML_ERROR_INVALID_ARGUMENT;
  int attribute;
  switch (type) {
    case NVML_CLOCK_GRAPHICS:
    case NVML_CLOCK_SM: attribute = kClockRate; break;
    case NVML_CLOCK_MEM: attribute = kMemoryClockRate; break;
    case NVML_CLOCK_VIDEO:
      orrery_private_fatal(fn, "NVML_CLOCK_VIDEO: the machine description has no video clock");
    default: return NVML_ERROR_INVALID_ARGUMENT;
  }
  int khz = 0;
  if (const char* missing = orrery_private_node_gpu_attribute(fn, index_of(device), attribute, &khz))
    orrery_private_fatal(fn, missing);
  *mhz = (unsigned)(khz / 1000);
  return NVML_SUCCESS;
}

}  // namespace

ORR_NVML_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* n) { return count("nvmlDeviceGetCount_v2", n); }
ORR_NVML_EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int* n) { return count("nvmlDeviceGetCount", n); }

ORR_NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  return by_index("nvmlDeviceGetHandleByIndex_v2", index, device);
}
ORR_NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device) {
  return by_index("nvmlDeviceGetHandleByIndex", index, device);
}

ORR_NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) {
  const char* fn = "nvmlDeviceGetHandleByUUID";
  if (!uuid)
    return initialised(fn) ? initialised(fn) : NVML_ERROR_INVALID_ARGUMENT;
  return find(fn, device, [&](const cudaDeviceProp& p) { return strcasecmp(uuid_text(p).c_str(), uuid) == 0; });
}

ORR_NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char* id, nvmlDevice_t* device) {
  return by_bus_id("nvmlDeviceGetHandleByPciBusId_v2", id, device);
}
ORR_NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char* id, nvmlDevice_t* device) {
  return by_bus_id("nvmlDeviceGetHandleByPciBusId", id, device);
}

// A GPU's index in its node: NVML's index, and its minor number (/dev/nvidiaN), a node's GPUs
// being numbered in PCI order.
static nvmlReturn_t index_answer(const char* fn, nvmlDevice_t device, unsigned int* out) {
  const cudaDeviceProp* p;
  if (nvmlReturn_t e = gpu_of(fn, device, &p))
    return e;
  if (!out)
    return NVML_ERROR_INVALID_ARGUMENT;
  *out = (unsigned)index_of(device);
  return NVML_SUCCESS;
}
ORR_NVML_EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int* index) {
  return index_answer("nvmlDeviceGetIndex", device, index);
}
ORR_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int* minor) {
  return index_answer("nvmlDeviceGetMinorNumber", device, minor);
}

ORR_NVML_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  const cudaDeviceProp* p;
  if (nvmlReturn_t e = gpu_of("nvmlDeviceGetName", device, &p))
    return e;
  return copy_string(p->name, name, length);
}

ORR_NVML_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  const cudaDeviceProp* p;
  if (nvmlReturn_t e = gpu_of("nvmlDeviceGetUUID", device, &p))
    return e;
  return copy_string(uuid_text(*p).c_str(), uuid, length);
}

ORR_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  const cudaDeviceProp* p;
  if (nvmlReturn_t e = gpu_of("nvmlDeviceGetPciInfo_v3", device, &p))
    return e;
  if (!pci)
    return NVML_ERROR_INVALID_ARGUMENT;
  *pci = nvmlPciInfo_t{};
  pci->domain = (unsigned)p->pciDomainID;
  pci->bus = (unsigned)p->pciBusID;
  pci->device = (unsigned)p->pciDeviceID;
  snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.0", pci->domain, pci->bus, pci->device);
  snprintf(pci->busId, sizeof pci->busId, "%08X:%02X:%02X.0", pci->domain, pci->bus, pci->device);
  // the vendor (NVIDIA, 0x10de) in the low half; no machine describes the device id: 0
  pci->pciDeviceId = 0x10de;
  return NVML_SUCCESS;
}

ORR_NVML_EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int* major, int* minor) {
  const cudaDeviceProp* p;
  if (nvmlReturn_t e = gpu_of("nvmlDeviceGetCudaComputeCapability", device, &p))
    return e;
  if (!major || !minor)
    return NVML_ERROR_INVALID_ARGUMENT;
  *major = p->major;
  *minor = p->minor;
  return NVML_SUCCESS;
}

// A GPU's memory: its size and what every rank's allocations on it use (nothing is reserved: the
// simulated GPU's memory is all the program's).
static nvmlReturn_t memory_of(const char* fn, nvmlDevice_t device, const void* out, size_t* total, size_t* used) {
  const cudaDeviceProp* p;
  if (nvmlReturn_t e = gpu_of(fn, device, &p, used))
    return e;
  if (!out)
    return NVML_ERROR_INVALID_ARGUMENT;
  *total = p->totalGlobalMem;
  return NVML_SUCCESS;
}

ORR_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  size_t total = 0, used = 0;
  if (nvmlReturn_t e = memory_of("nvmlDeviceGetMemoryInfo", device, memory, &total, &used))
    return e;
  *memory = nvmlMemory_t{total, total - used, used};
  return NVML_SUCCESS;
}

ORR_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  size_t total = 0, used = 0;
  if (nvmlReturn_t e = memory_of("nvmlDeviceGetMemoryInfo_v2", device, memory, &total, &used))
    return e;
  if (memory->version != ORRERY_NVML_MEMORY_V2)
    return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  *memory = nvmlMemory_v2_t{ORRERY_NVML_MEMORY_V2, total, 0, total - used, used};
  return NVML_SUCCESS;
}

ORR_NVML_EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type, unsigned int* mhz) {
  return clock("nvmlDeviceGetClockInfo", device, type, mhz);
}
ORR_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, nvmlClockType_t type, unsigned int* mhz) {
  return clock("nvmlDeviceGetMaxClockInfo", device, type, mhz);
}

/* Binding the calling thread to the GPU's CPUs: a rank already runs where its placement puts it
 * (its socket's CPU endpoint, docs/running.md); the simulated host's time does not depend on it. */
ORR_NVML_EXPORT nvmlReturn_t nvmlDeviceSetCpuAffinity(nvmlDevice_t device) {
  const cudaDeviceProp* p;
  return gpu_of("nvmlDeviceSetCpuAffinity", device, &p);
}
ORR_NVML_EXPORT nvmlReturn_t nvmlDeviceClearCpuAffinity(nvmlDevice_t device) {
  const cudaDeviceProp* p;
  return gpu_of("nvmlDeviceClearCpuAffinity", device, &p);
}
