/* What the driver stand-in (libcuda.so.1) and NVML's (libnvidia-ml.so.1) ask the runtime stand-in
 * (libcudart.so.13), where
 * the run's state lives: the ranks, their GPUs and current device, the memory registry. The
 * functions are defined in runtime_bridge.cpp, built into libcudart.so.13 and exported under its
 * version node ORRERY_PRIVATE, so the two libraries answer from one state (there is no second
 * copy of the core in libcuda.so.1).
 *
 * Each takes the name of the driver call asking (`fn`): it finds the calling rank by it
 * (rank_self) and names it if the call cannot be answered. Devices are numbered as the rank sees
 * them (cudaSetDevice's numbers). Results are CUresult codes. */
#ifndef ORRERY_RUNTIME_BRIDGE_H
#define ORRERY_RUNTIME_BRIDGE_H

#include "cudart/cuda_abi.h"
#include "driver/cuda_driver_abi.h"

#include <stdint.h>

extern "C" {

// Stops the run naming `fn`, as the runtime's refused calls do.
[[noreturn]] void orrery_private_unsupported(const char* fn);
// Stops the run with "fn: what".
[[noreturn]] void orrery_private_fatal(const char* fn, const char* what);

int orrery_private_device_count(const char* fn);
int orrery_private_current_device(const char* fn);
CUresult orrery_private_set_current_device(const char* fn, int device);
// The description of one of the rank's devices; nullptr for a device it does not see.
const cudaDeviceProp* orrery_private_device_prop(const char* fn, int device);
// A cudaDevAttr / CU_DEVICE_ATTRIBUTE value: null once *value is set, else why it has no answer.
const char* orrery_private_device_attribute(const char* fn, int attribute, int device, int* value);
// The rank's runtime last error (cudaGetLastError's), set to `e`; the one before it returned.
cudaError_t orrery_private_swap_last_error(const char* fn, cudaError_t e);
// As cudaDeviceSynchronize: waits for the current device's work.
void orrery_private_synchronize(const char* fn);

// What the runtime knows of a pointer.
struct OrreryPointer {
  int memory_type;     // 0 unknown to CUDA, CU_MEMORYTYPE_HOST (pinned), CU_MEMORYTYPE_DEVICE
  int device;          // its device as the rank sees it (pinned memory: the device current then)
  uintptr_t base;      // the allocation (or mapping) it is in
  size_t size;
  uint64_t buffer_id;  // unique per allocation in the run
  bool mapped;         // a cuMemMap range
  bool managed;        // cudaMallocManaged's (--managed resident): device memory the host reaches too
};
void orrery_private_pointer(const char* fn, const void* p, OrreryPointer* out);

// Primary contexts: the rank's retain count of a device's (-1: no such device; releasing an
// unretained one leaves it at 0 and returns -2), its flags, whether it is active.
int orrery_private_primary_retain(const char* fn, int device, int delta);
CUresult orrery_private_primary_state(const char* fn, int device, unsigned* flags, int* active);
CUresult orrery_private_primary_set_flags(const char* fn, int device, unsigned flags);
// Whether a context is current (-1 asks; 0 makes none current, as cuCtxSetCurrent(NULL); 1 binds).
bool orrery_private_context_bound(const char* fn, int set);

// Contexts of cuCtxCreate's, one per device at most (driver/context.cpp): whether `device` has one
// (kCreatedAsk), it has one now (kCreatedMake) or none (kCreatedDrop); the device whose created
// context is current, while the runtime's current device is that one (kCreatedCurrent; -1: the
// primary context is), or make `device`'s created context current (kCreatedMakeCurrent; -1: its
// primary one). The rank's context stack of cuCtxPushCurrent: push *context (kStackPush), pop it
// into *context (kStackPop; false when empty), remove every *context (kStackRemove).
enum { kCreatedAsk, kCreatedMake, kCreatedDrop, kCreatedCurrent, kCreatedMakeCurrent };
enum { kStackPush, kStackPop, kStackRemove };
int orrery_private_created_context(const char* fn, int op, int device);
bool orrery_private_context_stack(const char* fn, int op, uintptr_t* context);

// Virtual memory management: physical allocations on a device, address reservations, mappings
// (registered with the runtime's pointer registry once accessible, like cudaMalloc's memory).
size_t orrery_private_vmm_granularity(void);
CUresult orrery_private_vmm_create(const char* fn, int device, size_t size, CUmemGenericAllocationHandle* handle);
CUresult orrery_private_vmm_release(const char* fn, CUmemGenericAllocationHandle handle);
CUresult orrery_private_vmm_reserve(const char* fn, size_t size, size_t alignment, CUdeviceptr addr, CUdeviceptr* out);
CUresult orrery_private_vmm_free(const char* fn, CUdeviceptr ptr, size_t size);
CUresult orrery_private_vmm_map(const char* fn, CUdeviceptr ptr, size_t size, size_t offset,
                                CUmemGenericAllocationHandle handle);
CUresult orrery_private_vmm_unmap(const char* fn, CUdeviceptr ptr, size_t size);
CUresult orrery_private_vmm_set_access(const char* fn, CUdeviceptr ptr, size_t size, int device, int flags);
CUresult orrery_private_vmm_retain(const char* fn, const void* addr, CUmemGenericAllocationHandle* handle);
CUresult orrery_private_vmm_properties(const char* fn, CUmemGenericAllocationHandle handle, int* device, size_t* size);

// Modules (cudart/module.cpp): an image loaded for the calling rank's current GPU, as its driver
// would, its PTX compiled with `ptxas_options` (CUDA_ERROR_INVALID_IMAGE, NO_BINARY_FOR_GPU,
// INVALID_PTX, with what went wrong in *log until the next load); unloaded; a kernel of it by
// mangled name (NOT_FOUND), or all of them (with out null, their count; else at most *count of
// them). A function's module. function_check: INVALID_HANDLE unless `function` is a kernel the
// rank may launch (a module's it holds, or one its program registered); with needs_code, it stops
// the run naming `fn` where the kernel's resources are not known (PTX, no ptxas to compile it).
CUresult orrery_private_module_load(const char* fn, const void* image, const char* ptxas_options, CUmodule* out,
                                    const char** log);
CUresult orrery_private_module_unload(const char* fn, CUmodule module);
CUresult orrery_private_module_function(const char* fn, CUmodule module, const char* name, CUfunction* out);
CUresult orrery_private_module_functions(const char* fn, CUmodule module, CUfunction* out, unsigned* count);
CUresult orrery_private_function_module(const char* fn, const void* function, CUmodule* out);
CUresult orrery_private_function_check(const char* fn, const void* function, bool needs_code);
// A module's variable: its device memory and size (NOT_FOUND without one of that name).
CUresult orrery_private_module_global(const char* fn, CUmodule module, const char* name, CUdeviceptr* out,
                                      size_t* bytes);

// NVML's view (libnvidia-ml.so.1, interpose/nvml/): the GPUs of the calling rank's node, all of
// them whatever the rank sees (NVML ignores CUDA_VISIBLE_DEVICES), numbered by their index in the
// node (PCI order, as NVML numbers them). The index-th one's description and its memory in use
// (every rank's allocations on it), nullptr past the last; a cudaDevAttr of it as
// orrery_private_device_attribute answers.
int orrery_private_node_gpu_count(const char* fn);
const cudaDeviceProp* orrery_private_node_gpu(const char* fn, int index, size_t* memory_used);
const char* orrery_private_node_gpu_attribute(const char* fn, int index, int attribute, int* value);
}

#endif
