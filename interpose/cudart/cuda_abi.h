/* The slice of the CUDA runtime ABI (CUDA 13) that Orrery's stand-in libcudart
 * implements, written out so that the shim builds without the CUDA toolkit.
 *
 * Values and layouts mirror /usr/local/cuda/include/driver_types.h of CUDA 13.0;
 * tests/native/test_device.py checks them against a program compiled with the
 * real headers (a wrong offset there shows up as a wrong device property). */
#ifndef ORRERY_CUDA_ABI_H
#define ORRERY_CUDA_ABI_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int cudaError_t;
enum {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInitializationError = 3,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidPitchValue = 12,
  cudaErrorInvalidSymbol = 13,
  cudaErrorInvalidDevicePointer = 17,
  cudaErrorInvalidMemcpyDirection = 21,
  cudaErrorInvalidDeviceFunction = 98,
  cudaErrorNoDevice = 100,
  cudaErrorNoKernelImageForDevice = 209,
  cudaErrorUnsupportedLimit = 215,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorIllegalState = 401,
  cudaErrorNotReady = 600,
  cudaErrorLaunchOutOfResources = 701,
  cudaErrorPeerAccessAlreadyEnabled = 704,
  cudaErrorPeerAccessNotEnabled = 705,
  cudaErrorHostMemoryAlreadyRegistered = 712,
  cudaErrorHostMemoryNotRegistered = 713,
  cudaErrorCooperativeLaunchTooLarge = 720,
  cudaErrorNotSupported = 801,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
  cudaErrorStreamCaptureMerge = 902,
  cudaErrorStreamCaptureUnmatched = 903,
  cudaErrorStreamCaptureUnjoined = 904,
  cudaErrorStreamCaptureIsolation = 905,
  cudaErrorStreamCaptureImplicit = 906,
  cudaErrorCapturedEvent = 907,
  cudaErrorGraphExecUpdateFailure = 910,
  cudaErrorUnknown = 999,
};

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

enum cudaMemoryType {
  cudaMemoryTypeUnregistered = 0,
  cudaMemoryTypeHost = 1,
  cudaMemoryTypeDevice = 2,
  cudaMemoryTypeManaged = 3,
};

struct cudaPointerAttributes {
  enum cudaMemoryType type;
  int device;
  void* devicePointer;
  void* hostPointer;
  long reserved[8];
};

typedef struct dim3 {
  unsigned int x, y, z;
} dim3;

typedef struct CUstream_st* cudaStream_t;
typedef struct CUevent_st* cudaEvent_t;
typedef void* cudaKernel_t;
typedef struct CUgraph_st* cudaGraph_t;
typedef struct CUgraphExec_st* cudaGraphExec_t;
typedef struct CUgraphNode_st* cudaGraphNode_t;
typedef struct cudaGraphEdgeData_st {  // driver_types.h: an edge's ports and type (0: a full dependency)
  unsigned char from_port, to_port, type, reserved[5];
} cudaGraphEdgeData;
typedef void (*cudaHostFn_t)(void* userData);
typedef void (*cudaStreamCallback_t)(cudaStream_t stream, cudaError_t status, void* userData);

/* A graph's nodes made one by one (driver_types.h): their parameters. */
typedef struct CUarray_st* cudaArray_t;
struct cudaKernelNodeParams {
  void* func;
  dim3 gridDim;
  dim3 blockDim;
  unsigned int sharedMemBytes;
  void** kernelParams;
  void** extra;
};
struct cudaMemsetParams {
  void* dst;
  size_t pitch;
  unsigned int value;
  unsigned int elementSize;  // 1, 2 or 4
  size_t width;              // in elements
  size_t height;
};
struct cudaHostNodeParams {
  cudaHostFn_t fn;
  void* userData;
};
struct cudaPitchedPtr {
  void* ptr;
  size_t pitch, xsize, ysize;
};
struct cudaExtent {
  size_t width, height, depth;  // width in bytes for linear memory
};
struct cudaPos {
  size_t x, y, z;
};
struct cudaMemcpy3DParms {
  cudaArray_t srcArray;
  struct cudaPos srcPos;
  struct cudaPitchedPtr srcPtr;
  cudaArray_t dstArray;
  struct cudaPos dstPos;
  struct cudaPitchedPtr dstPtr;
  struct cudaExtent extent;
  int kind;  // enum cudaMemcpyKind
};
typedef struct cudaGraphExecUpdateResultInfo_st {
  int result;  // enum cudaGraphExecUpdateResult: 0 success, 2 topology changed, 3 node type changed
  cudaGraphNode_t errorNode;
  cudaGraphNode_t errorFromNode;
} cudaGraphExecUpdateResultInfo;
enum cudaGraphNodeType {
  cudaGraphNodeTypeKernel = 0,
  cudaGraphNodeTypeMemcpy = 1,
  cudaGraphNodeTypeMemset = 2,
  cudaGraphNodeTypeHost = 3,
  cudaGraphNodeTypeGraph = 4,
  cudaGraphNodeTypeEmpty = 5,
  cudaGraphNodeTypeWaitEvent = 6,
  cudaGraphNodeTypeEventRecord = 7,
};

/* cudaLaunchKernelEx's configuration (driver_types.h): an attribute is its id, padded to 8 bytes,
 * then a 64-byte union of values, of which the shim reads the ints and the cluster dimensions. */
typedef struct cudaLaunchAttribute_st {
  int id;
  char pad[4];
  union {
    char pad[64];
    int cooperative;
    int programmaticStreamSerializationAllowed;
    int priority;
    struct {
      unsigned int x, y, z;
    } clusterDim;
  } val;
} cudaLaunchAttribute;
typedef struct cudaLaunchConfig_st {
  dim3 gridDim;
  dim3 blockDim;
  size_t dynamicSmemBytes;
  cudaStream_t stream;
  cudaLaunchAttribute* attrs;
  unsigned int numAttrs;
} cudaLaunchConfig_t;

#define cudaStreamLegacy ((cudaStream_t)0x1)
#define cudaStreamPerThread ((cudaStream_t)0x2)
#define cudaStreamNonBlocking 0x01u
#define cudaEventBlockingSync 0x01u
#define cudaEventDisableTiming 0x02u
#define cudaEventInterprocess 0x04u

typedef struct {
  char bytes[16];
} cudaUUID_t;

struct cudaDeviceProp {
  char name[256];
  cudaUUID_t uuid;
  char luid[8];
  unsigned int luidDeviceNodeMask;
  size_t totalGlobalMem;
  size_t sharedMemPerBlock;
  int regsPerBlock;
  int warpSize;
  size_t memPitch;
  int maxThreadsPerBlock;
  int maxThreadsDim[3];
  int maxGridSize[3];
  size_t totalConstMem;
  int major;
  int minor;
  size_t textureAlignment;
  size_t texturePitchAlignment;
  int multiProcessorCount;
  int integrated;
  int canMapHostMemory;
  int maxTexture1D;
  int maxTexture1DMipmap;
  int maxTexture2D[2];
  int maxTexture2DMipmap[2];
  int maxTexture2DLinear[3];
  int maxTexture2DGather[2];
  int maxTexture3D[3];
  int maxTexture3DAlt[3];
  int maxTextureCubemap;
  int maxTexture1DLayered[2];
  int maxTexture2DLayered[3];
  int maxTextureCubemapLayered[2];
  int maxSurface1D;
  int maxSurface2D[2];
  int maxSurface3D[3];
  int maxSurface1DLayered[2];
  int maxSurface2DLayered[3];
  int maxSurfaceCubemap;
  int maxSurfaceCubemapLayered[2];
  size_t surfaceAlignment;
  int concurrentKernels;
  int ECCEnabled;
  int pciBusID;
  int pciDeviceID;
  int pciDomainID;
  int tccDriver;
  int asyncEngineCount;
  int unifiedAddressing;
  int memoryBusWidth;
  int l2CacheSize;
  int persistingL2CacheMaxSize;
  int maxThreadsPerMultiProcessor;
  int streamPrioritiesSupported;
  int globalL1CacheSupported;
  int localL1CacheSupported;
  size_t sharedMemPerMultiprocessor;
  int regsPerMultiprocessor;
  int managedMemory;
  int isMultiGpuBoard;
  int multiGpuBoardGroupID;
  int hostNativeAtomicSupported;
  int pageableMemoryAccess;
  int concurrentManagedAccess;
  int computePreemptionSupported;
  int canUseHostPointerForRegisteredMem;
  int cooperativeLaunch;
  size_t sharedMemPerBlockOptin;
  int pageableMemoryAccessUsesHostPageTables;
  int directManagedMemAccessFromHost;
  int maxBlocksPerMultiProcessor;
  int accessPolicyMaxWindowSize;
  size_t reservedSharedMemPerBlock;
  int hostRegisterSupported;
  int sparseCudaArraySupported;
  int hostRegisterReadOnlySupported;
  int timelineSemaphoreInteropSupported;
  int memoryPoolsSupported;
  int gpuDirectRDMASupported;
  unsigned int gpuDirectRDMAFlushWritesOptions;
  int gpuDirectRDMAWritesOrdering;
  unsigned int memoryPoolSupportedHandleTypes;
  int deferredMappingCudaArraySupported;
  int ipcEventSupported;
  int clusterLaunch;
  int unifiedFunctionPointers;
  int deviceNumaConfig;
  int deviceNumaId;
  int mpsEnabled;
  int hostNumaId;
  unsigned int gpuPciDeviceID;
  unsigned int gpuPciSubsystemID;
  int hostNumaMultinodeIpcSupported;
  int reserved[56];
};

/* CUDA IPC's handles (driver_types.h, CUDA 13.0): 64 opaque bytes, passed by value. */
typedef struct cudaIpcMemHandle_st {
  char reserved[64];
} cudaIpcMemHandle_t;
typedef struct cudaIpcEventHandle_st {
  char reserved[64];
} cudaIpcEventHandle_t;
#define cudaIpcMemLazyEnablePeerAccess 0x01

/* Stream-ordered allocation's pools (driver_types.h, CUDA 13.0). */
typedef struct MemPoolHandle* cudaMemPool_t;
struct cudaMemLocation {
  int type;  // cudaMemLocationType, below
  int id;
};
enum cudaMemLocationType {
  cudaMemLocationTypeInvalid = 0,
  cudaMemLocationTypeDevice = 1,  // id: a device ordinal
  cudaMemLocationTypeHost = 2,
  cudaMemLocationTypeHostNuma = 3,  // id: a host NUMA node
  cudaMemLocationTypeHostNumaCurrent = 4,
};

/* Managed memory (driver_types.h, CUDA 13.0): cudaMallocManaged's and cudaStreamAttachMemAsync's
 * associations, cudaMemAdvise's advice. */
#define cudaMemAttachGlobal 0x01
#define cudaMemAttachHost 0x02
#define cudaMemAttachSingle 0x04
enum cudaMemoryAdvise {
  cudaMemAdviseSetReadMostly = 1,
  cudaMemAdviseUnsetReadMostly = 2,
  cudaMemAdviseSetPreferredLocation = 3,
  cudaMemAdviseUnsetPreferredLocation = 4,
  cudaMemAdviseSetAccessedBy = 5,
  cudaMemAdviseUnsetAccessedBy = 6,
};
struct cudaMemPoolProps {
  int allocType;    // cudaMemAllocationType: 1 pinned
  int handleTypes;  // cudaMemAllocationHandleType: 0 none
  struct cudaMemLocation location;
  void* win32SecurityAttributes;
  size_t maxSize;
  unsigned short usage;
  unsigned char reserved[54];
};
enum {
  cudaMemPoolReuseFollowEventDependencies = 1,
  cudaMemPoolReuseAllowOpportunistic = 2,
  cudaMemPoolReuseAllowInternalDependencies = 3,
  cudaMemPoolAttrReleaseThreshold = 4,
  cudaMemPoolAttrReservedMemCurrent = 5,
  cudaMemPoolAttrReservedMemHigh = 6,
  cudaMemPoolAttrUsedMemCurrent = 7,
  cudaMemPoolAttrUsedMemHigh = 8,
};

/* cudaFuncGetAttributes' answer (driver_types.h, CUDA 13.0). */
struct cudaFuncAttributes {
  size_t sharedSizeBytes;
  size_t constSizeBytes;
  size_t localSizeBytes;
  int maxThreadsPerBlock;
  int numRegs;
  int ptxVersion;
  int binaryVersion;
  int cacheModeCA;
  int maxDynamicSharedSizeBytes;
  int preferredShmemCarveout;
  int clusterDimMustBeSet;
  int requiredClusterWidth;
  int requiredClusterHeight;
  int requiredClusterDepth;
  int clusterSchedulingPolicyPreference;
  int nonPortableClusterSizeAllowed;
  int reserved[16];
};

/* cudaFuncAttribute values cudaFuncSetAttribute takes (driver_types.h, CUDA 13.0). */
enum {
  cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
  cudaFuncAttributePreferredSharedMemoryCarveout = 9,
  cudaFuncAttributeClusterDimMustBeSet = 10,
  cudaFuncAttributeRequiredClusterWidth = 11,
  cudaFuncAttributeRequiredClusterHeight = 12,
  cudaFuncAttributeRequiredClusterDepth = 13,
  cudaFuncAttributeNonPortableClusterSizeAllowed = 14,
  cudaFuncAttributeClusterSchedulingPolicyPreference = 15,
};

/* cudaDeviceAttr (driver_types.h, CUDA 13.0, its reserved values left out), listed once: the
 * enum below and the names cudart/device_attributes.cpp reports (which it also answers). */
#define ORR_DEVICE_ATTRIBUTES(X) \
  X(cudaDevAttrMaxThreadsPerBlock, 1) \
  X(cudaDevAttrMaxBlockDimX, 2) \
  X(cudaDevAttrMaxBlockDimY, 3) \
  X(cudaDevAttrMaxBlockDimZ, 4) \
  X(cudaDevAttrMaxGridDimX, 5) \
  X(cudaDevAttrMaxGridDimY, 6) \
  X(cudaDevAttrMaxGridDimZ, 7) \
  X(cudaDevAttrMaxSharedMemoryPerBlock, 8) \
  X(cudaDevAttrTotalConstantMemory, 9) \
  X(cudaDevAttrWarpSize, 10) \
  X(cudaDevAttrMaxPitch, 11) \
  X(cudaDevAttrMaxRegistersPerBlock, 12) \
  X(cudaDevAttrClockRate, 13) \
  X(cudaDevAttrTextureAlignment, 14) \
  X(cudaDevAttrGpuOverlap, 15) \
  X(cudaDevAttrMultiProcessorCount, 16) \
  X(cudaDevAttrKernelExecTimeout, 17) \
  X(cudaDevAttrIntegrated, 18) \
  X(cudaDevAttrCanMapHostMemory, 19) \
  X(cudaDevAttrComputeMode, 20) \
  X(cudaDevAttrMaxTexture1DWidth, 21) \
  X(cudaDevAttrMaxTexture2DWidth, 22) \
  X(cudaDevAttrMaxTexture2DHeight, 23) \
  X(cudaDevAttrMaxTexture3DWidth, 24) \
  X(cudaDevAttrMaxTexture3DHeight, 25) \
  X(cudaDevAttrMaxTexture3DDepth, 26) \
  X(cudaDevAttrMaxTexture2DLayeredWidth, 27) \
  X(cudaDevAttrMaxTexture2DLayeredHeight, 28) \
  X(cudaDevAttrMaxTexture2DLayeredLayers, 29) \
  X(cudaDevAttrSurfaceAlignment, 30) \
  X(cudaDevAttrConcurrentKernels, 31) \
  X(cudaDevAttrEccEnabled, 32) \
  X(cudaDevAttrPciBusId, 33) \
  X(cudaDevAttrPciDeviceId, 34) \
  X(cudaDevAttrTccDriver, 35) \
  X(cudaDevAttrMemoryClockRate, 36) \
  X(cudaDevAttrGlobalMemoryBusWidth, 37) \
  X(cudaDevAttrL2CacheSize, 38) \
  X(cudaDevAttrMaxThreadsPerMultiProcessor, 39) \
  X(cudaDevAttrAsyncEngineCount, 40) \
  X(cudaDevAttrUnifiedAddressing, 41) \
  X(cudaDevAttrMaxTexture1DLayeredWidth, 42) \
  X(cudaDevAttrMaxTexture1DLayeredLayers, 43) \
  X(cudaDevAttrMaxTexture2DGatherWidth, 45) \
  X(cudaDevAttrMaxTexture2DGatherHeight, 46) \
  X(cudaDevAttrMaxTexture3DWidthAlt, 47) \
  X(cudaDevAttrMaxTexture3DHeightAlt, 48) \
  X(cudaDevAttrMaxTexture3DDepthAlt, 49) \
  X(cudaDevAttrPciDomainId, 50) \
  X(cudaDevAttrTexturePitchAlignment, 51) \
  X(cudaDevAttrMaxTextureCubemapWidth, 52) \
  X(cudaDevAttrMaxTextureCubemapLayeredWidth, 53) \
  X(cudaDevAttrMaxTextureCubemapLayeredLayers, 54) \
  X(cudaDevAttrMaxSurface1DWidth, 55) \
  X(cudaDevAttrMaxSurface2DWidth, 56) \
  X(cudaDevAttrMaxSurface2DHeight, 57) \
  X(cudaDevAttrMaxSurface3DWidth, 58) \
  X(cudaDevAttrMaxSurface3DHeight, 59) \
  X(cudaDevAttrMaxSurface3DDepth, 60) \
  X(cudaDevAttrMaxSurface1DLayeredWidth, 61) \
  X(cudaDevAttrMaxSurface1DLayeredLayers, 62) \
  X(cudaDevAttrMaxSurface2DLayeredWidth, 63) \
  X(cudaDevAttrMaxSurface2DLayeredHeight, 64) \
  X(cudaDevAttrMaxSurface2DLayeredLayers, 65) \
  X(cudaDevAttrMaxSurfaceCubemapWidth, 66) \
  X(cudaDevAttrMaxSurfaceCubemapLayeredWidth, 67) \
  X(cudaDevAttrMaxSurfaceCubemapLayeredLayers, 68) \
  X(cudaDevAttrMaxTexture1DLinearWidth, 69) \
  X(cudaDevAttrMaxTexture2DLinearWidth, 70) \
  X(cudaDevAttrMaxTexture2DLinearHeight, 71) \
  X(cudaDevAttrMaxTexture2DLinearPitch, 72) \
  X(cudaDevAttrMaxTexture2DMipmappedWidth, 73) \
  X(cudaDevAttrMaxTexture2DMipmappedHeight, 74) \
  X(cudaDevAttrComputeCapabilityMajor, 75) \
  X(cudaDevAttrComputeCapabilityMinor, 76) \
  X(cudaDevAttrMaxTexture1DMipmappedWidth, 77) \
  X(cudaDevAttrStreamPrioritiesSupported, 78) \
  X(cudaDevAttrGlobalL1CacheSupported, 79) \
  X(cudaDevAttrLocalL1CacheSupported, 80) \
  X(cudaDevAttrMaxSharedMemoryPerMultiprocessor, 81) \
  X(cudaDevAttrMaxRegistersPerMultiprocessor, 82) \
  X(cudaDevAttrManagedMemory, 83) \
  X(cudaDevAttrIsMultiGpuBoard, 84) \
  X(cudaDevAttrMultiGpuBoardGroupID, 85) \
  X(cudaDevAttrHostNativeAtomicSupported, 86) \
  X(cudaDevAttrSingleToDoublePrecisionPerfRatio, 87) \
  X(cudaDevAttrPageableMemoryAccess, 88) \
  X(cudaDevAttrConcurrentManagedAccess, 89) \
  X(cudaDevAttrComputePreemptionSupported, 90) \
  X(cudaDevAttrCanUseHostPointerForRegisteredMem, 91) \
  X(cudaDevAttrCooperativeLaunch, 95) \
  X(cudaDevAttrMaxSharedMemoryPerBlockOptin, 97) \
  X(cudaDevAttrCanFlushRemoteWrites, 98) \
  X(cudaDevAttrHostRegisterSupported, 99) \
  X(cudaDevAttrPageableMemoryAccessUsesHostPageTables, 100) \
  X(cudaDevAttrDirectManagedMemAccessFromHost, 101) \
  X(cudaDevAttrMaxBlocksPerMultiprocessor, 106) \
  X(cudaDevAttrMaxPersistingL2CacheSize, 108) \
  X(cudaDevAttrMaxAccessPolicyWindowSize, 109) \
  X(cudaDevAttrReservedSharedMemoryPerBlock, 111) \
  X(cudaDevAttrSparseCudaArraySupported, 112) \
  X(cudaDevAttrHostRegisterReadOnlySupported, 113) \
  X(cudaDevAttrTimelineSemaphoreInteropSupported, 114) \
  X(cudaDevAttrMemoryPoolsSupported, 115) \
  X(cudaDevAttrGPUDirectRDMASupported, 116) \
  X(cudaDevAttrGPUDirectRDMAFlushWritesOptions, 117) \
  X(cudaDevAttrGPUDirectRDMAWritesOrdering, 118) \
  X(cudaDevAttrMemoryPoolSupportedHandleTypes, 119) \
  X(cudaDevAttrClusterLaunch, 120) \
  X(cudaDevAttrDeferredMappingCudaArraySupported, 121) \
  X(cudaDevAttrIpcEventSupport, 125) \
  X(cudaDevAttrMemSyncDomainCount, 126) \
  X(cudaDevAttrNumaConfig, 130) \
  X(cudaDevAttrNumaId, 131) \
  X(cudaDevAttrMpsEnabled, 133) \
  X(cudaDevAttrHostNumaId, 134) \
  X(cudaDevAttrD3D12CigSupported, 135) \
  X(cudaDevAttrVulkanCigSupported, 138) \
  X(cudaDevAttrGpuPciDeviceId, 139) \
  X(cudaDevAttrGpuPciSubsystemId, 140) \
  X(cudaDevAttrHostNumaMemoryPoolsSupported, 142) \
  X(cudaDevAttrHostNumaMultinodeIpcSupported, 143) \
  X(cudaDevAttrHostMemoryPoolsSupported, 144) \
  X(cudaDevAttrOnlyPartialHostNativeAtomicSupported, 147)

enum {
#define ORR_DEVICE_ATTRIBUTE_VALUE(name, value) name = value,
  ORR_DEVICE_ATTRIBUTES(ORR_DEVICE_ATTRIBUTE_VALUE)
#undef ORR_DEVICE_ATTRIBUTE_VALUE
};

#ifdef __cplusplus
}
#endif
#endif
