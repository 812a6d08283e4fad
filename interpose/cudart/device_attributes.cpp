/* cudaDeviceGetAttribute's answers (and cuDeviceGetAttribute's, which the driver shares): each
 * from the GPU's properties (gpus.cpp: the machine description and the architecture's limits), a
 * key of the description, or a constant of every GPU Orrery simulates, cited where it is set.
 * An attribute with none of these is not answered: the query stops the run naming it, rather
 * than give a program a value nobody checked. */
#include "core/runtime.hpp"


namespace orrery {

namespace {

struct AttributeName {
  int attr;
  const char* name;
};

const AttributeName kNames[] = {
#define ORR_DEVICE_ATTRIBUTE_NAME(name, value) {name, #name},
    ORR_DEVICE_ATTRIBUTES(ORR_DEVICE_ATTRIBUTE_NAME)
#undef ORR_DEVICE_ATTRIBUTE_NAME
};

constexpr const char* kUndescribed =
    "is not described by Orrery's machine model (docs/supported-calls.md lists the attributes it answers)";

// A key of the description's gpu section, or why the attribute has no answer.
const char* from_key(const std::optional<int64_t>& khz, const char* missing, int* value) {
  if (!khz)
    return missing;
  *value = (int)*khz;
  return nullptr;
}

}  // namespace

const char* device_attribute_name(int attr) {
  for (const AttributeName& row : kNames)
    if (row.attr == attr)
      return row.name;
  return "not an attribute of CUDA 13.0";
}

const char* device_attribute(const Gpu& g, int attr, int* value) {
  const cudaDeviceProp& p = g.prop;
  const GpuModel& model = run_description().gpu;
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
    case cudaDevAttrMaxPitch: *value = (int)p.memPitch; break;
    case cudaDevAttrMaxRegistersPerBlock: *value = p.regsPerBlock; break;
    case cudaDevAttrClockRate:
      return from_key(model.clock_khz, "needs the machine key gpu.clock_rate, which this machine does not set",
                      value);
    case cudaDevAttrTextureAlignment: *value = (int)p.textureAlignment; break;
    // Copies overlap kernels: the copy engines are the platform's own hosts (overlap issue).
    case cudaDevAttrGpuOverlap: *value = 1; break;
    case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; break;
    // A data-centre GPU drives no display, so no watchdog limits its kernels ("Run time limit on
    // kernels: No" in every deviceQuery the built-in machines cite).
    case cudaDevAttrKernelExecTimeout: *value = 0; break;
    case cudaDevAttrIntegrated: *value = p.integrated; break;
    case cudaDevAttrCanMapHostMemory: *value = p.canMapHostMemory; break;
    case cudaDevAttrComputeMode: *value = 0; break;  // cudaComputeModeDefault: ranks may share a GPU
    case cudaDevAttrMaxTexture1DWidth: *value = p.maxTexture1D; break;
    case cudaDevAttrMaxTexture2DWidth: *value = p.maxTexture2D[0]; break;
    case cudaDevAttrMaxTexture2DHeight: *value = p.maxTexture2D[1]; break;
    case cudaDevAttrMaxTexture3DWidth: *value = p.maxTexture3D[0]; break;
    case cudaDevAttrMaxTexture3DHeight: *value = p.maxTexture3D[1]; break;
    case cudaDevAttrMaxTexture3DDepth: *value = p.maxTexture3D[2]; break;
    case cudaDevAttrMaxTexture2DLayeredWidth: *value = p.maxTexture2DLayered[0]; break;
    case cudaDevAttrMaxTexture2DLayeredHeight: *value = p.maxTexture2DLayered[1]; break;
    case cudaDevAttrMaxTexture2DLayeredLayers: *value = p.maxTexture2DLayered[2]; break;
    case cudaDevAttrSurfaceAlignment: *value = (int)p.surfaceAlignment; break;
    case cudaDevAttrConcurrentKernels: *value = p.concurrentKernels; break;
    case cudaDevAttrEccEnabled: *value = p.ECCEnabled; break;
    case cudaDevAttrPciBusId: *value = p.pciBusID; break;
    case cudaDevAttrPciDeviceId: *value = p.pciDeviceID; break;
    case cudaDevAttrTccDriver: *value = p.tccDriver; break;
    case cudaDevAttrMemoryClockRate:
      return from_key(model.memory_clock_khz,
                      "needs the machine key gpu.memory_clock_rate, which this machine does not set", value);
    case cudaDevAttrGlobalMemoryBusWidth: *value = p.memoryBusWidth; break;
    case cudaDevAttrL2CacheSize: *value = p.l2CacheSize; break;
    case cudaDevAttrMaxThreadsPerMultiProcessor: *value = p.maxThreadsPerMultiProcessor; break;
    case cudaDevAttrAsyncEngineCount: *value = p.asyncEngineCount; break;
    case cudaDevAttrUnifiedAddressing: *value = p.unifiedAddressing; break;
    case cudaDevAttrMaxTexture1DLayeredWidth: *value = p.maxTexture1DLayered[0]; break;
    case cudaDevAttrMaxTexture1DLayeredLayers: *value = p.maxTexture1DLayered[1]; break;
    case cudaDevAttrPciDomainId: *value = p.pciDomainID; break;
    case cudaDevAttrTexturePitchAlignment: *value = (int)p.texturePitchAlignment; break;
    case cudaDevAttrComputeCapabilityMajor: *value = p.major; break;
    case cudaDevAttrComputeCapabilityMinor: *value = p.minor; break;
    case cudaDevAttrStreamPrioritiesSupported: *value = p.streamPrioritiesSupported; break;
    case cudaDevAttrGlobalL1CacheSupported: *value = p.globalL1CacheSupported; break;
    case cudaDevAttrLocalL1CacheSupported: *value = p.localL1CacheSupported; break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *value = (int)p.sharedMemPerMultiprocessor; break;
    case cudaDevAttrMaxRegistersPerMultiprocessor: *value = p.regsPerMultiprocessor; break;
    case cudaDevAttrManagedMemory: *value = p.managedMemory; break;
    case cudaDevAttrIsMultiGpuBoard: *value = p.isMultiGpuBoard; break;
    case cudaDevAttrConcurrentManagedAccess: *value = p.concurrentManagedAccess; break;
    case cudaDevAttrComputePreemptionSupported: *value = p.computePreemptionSupported; break;
    case cudaDevAttrCanUseHostPointerForRegisteredMem: *value = p.canUseHostPointerForRegisteredMem; break;
    case cudaDevAttrCooperativeLaunch: *value = p.cooperativeLaunch; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = (int)p.sharedMemPerBlockOptin; break;
    case cudaDevAttrHostRegisterSupported: *value = p.hostRegisterSupported; break;
    case cudaDevAttrMaxBlocksPerMultiprocessor: *value = p.maxBlocksPerMultiProcessor; break;
    case cudaDevAttrReservedSharedMemoryPerBlock: *value = (int)p.reservedSharedMemPerBlock; break;
    case cudaDevAttrMemoryPoolsSupported: *value = p.memoryPoolsSupported; break;
    case cudaDevAttrMemoryPoolSupportedHandleTypes: *value = (int)p.memoryPoolSupportedHandleTypes; break;
    case cudaDevAttrGPUDirectRDMASupported: *value = p.gpuDirectRDMASupported; break;
    case cudaDevAttrClusterLaunch: *value = p.clusterLaunch; break;
    default: return kUndescribed;
  }
  return nullptr;
}

}  // namespace orrery
