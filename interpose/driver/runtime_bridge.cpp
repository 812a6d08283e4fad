/* The runtime's side of the driver stand-in (runtime_bridge.h): built into libcudart.so.13, where
 * the ranks, GPUs and memory registry live, and exported to libcuda.so.1 under ORRERY_PRIVATE.
 *
 * Virtual memory management lives here too, on the runtime's memory accounting: a physical
 * allocation (cuMemCreate) counts against its GPU's memory as cudaMalloc's does and is a memfd of
 * its size (sparse: it costs host memory only for pages something touches); a reservation
 * (cuMemAddressReserve) is inaccessible address space; a mapping (cuMemMap) maps the memfd there
 * with MAP_SHARED | MAP_FIXED, so that one allocation mapped at two addresses is one memory, and
 * once made accessible (cuMemSetAccess) it is registered with the runtime as device memory of its
 * GPU. Not here: the driver calls themselves (the other files of driver/, in libcuda.so.1). */
#include "driver/runtime_bridge.h"

#include "core/gpus.hpp"
#include "core/runtime.hpp"
#include "core/trace.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

namespace orrery {
namespace {

/* The rank's device number of a GPU (-1: not one it sees). */
int ordinal_of(const Rank& r, const Gpu* g) {
  for (size_t i = 0; i < r.gpus.size(); i++)
    if (r.gpus[i] == g)
      return (int)i;
  return -1;
}

Gpu* device_of(Rank& r, int device) {
  return device >= 0 && device < (int)r.gpus.size() ? r.gpus[device] : nullptr;
}

/* Per rank: each device's primary context (retain count, flags), and whether one is current. */
struct PrimaryContext {
  int retained = 0;
  unsigned flags = 0;
};
struct DriverState {
  std::map<int, PrimaryContext> primary;
  bool unbound = false;  // cuCtxSetCurrent(NULL) made no context current
  std::map<int, bool> created;  // the devices that have a context of cuCtxCreate's
  int created_current = -1;     // the device whose created context is current (while it is current)
  std::vector<uintptr_t> stack;  // cuCtxPushCurrent's contexts below the current one
};
DriverState& state_of(const Rank& r) {
  static std::map<int, DriverState> states;
  return states[r.id];
}

/* ---- virtual memory management ---- */
constexpr size_t kGranularity = 2u << 20;  // what CUDA reports on the H100/H200 for device memory

struct Physical {  // a cuMemCreate allocation
  int owner;       // the rank that created it
  Gpu* gpu;
  size_t size;
  int fd;
  int references;  // cuMemCreate and each cuMemRetainAllocationHandle; cuMemRelease drops one
  int mappings;
};
struct Mapping {
  size_t size;
  CUmemGenericAllocationHandle handle;
  bool accessible;
};
struct Vmm {
  std::map<CUmemGenericAllocationHandle, Physical> physical;
  CUmemGenericAllocationHandle next = 1;
  std::map<uintptr_t, size_t> reservations;  // base -> size
  std::map<uintptr_t, Mapping> mappings;     // base -> mapping
};
Vmm& vmm() {
  static Vmm v;
  return v;
}

Physical* physical_of(const Rank& r, CUmemGenericAllocationHandle h) {
  auto it = vmm().physical.find(h);
  return it != vmm().physical.end() && it->second.owner == r.id ? &it->second : nullptr;
}

/* A physical allocation that nothing holds any more returns its memory to its GPU. */
void collect(CUmemGenericAllocationHandle h) {
  auto it = vmm().physical.find(h);
  if (it == vmm().physical.end() || it->second.references > 0 || it->second.mappings > 0)
    return;
  it->second.gpu->memory_used -= it->second.size;
  close(it->second.fd);
  vmm().physical.erase(it);
}

/* The reservation that holds [p, p + n), or none. */
bool reserved(uintptr_t p, size_t n) {
  auto& res = vmm().reservations;
  auto it = res.upper_bound(p);
  if (it == res.begin())
    return false;
  --it;
  return p >= it->first && n <= it->second && p - it->first <= it->second - n;
}

/* Makes [p, p + n) inaccessible reserved address space again. */
bool unmap_range(uintptr_t p, size_t n) {
  return mmap((void*)p, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) != MAP_FAILED;
}

}  // namespace
}  // namespace orrery

using namespace orrery;

ORR_EXPORT void orrery_private_unsupported(const char* fn) { unsupported(fn); }

ORR_EXPORT void orrery_private_fatal(const char* fn, const char* what) { fatal("%s: %s", fn, what); }

ORR_EXPORT int orrery_private_device_count(const char* fn) { return (int)rank_self(fn).gpus.size(); }

ORR_EXPORT int orrery_private_current_device(const char* fn) { return rank_self(fn).device; }

ORR_EXPORT CUresult orrery_private_set_current_device(const char* fn, int device) {
  Rank& r = rank_self(fn);
  if (!device_of(r, device))
    return CUDA_ERROR_INVALID_DEVICE;
  r.device = device;
  return CUDA_SUCCESS;
}

ORR_EXPORT const cudaDeviceProp* orrery_private_device_prop(const char* fn, int device) {
  Gpu* g = device_of(rank_self(fn), device);
  return g ? &g->prop : nullptr;
}

/* The index-th GPU of the calling rank's node (NVML's numbering: its index in the node), nullptr
 * past the last. */
static const std::vector<const GpuHost*>& node_gpus(const char* fn) {
  return gpus_of_node(rank_self(fn).gpus.at(0)->node);
}
static Gpu* node_gpu(const char* fn, int index) {
  const auto& gpus = node_gpus(fn);
  return index >= 0 && index < (int)gpus.size() ? gpu_of_host(host_by_name(gpus[index]->host)) : nullptr;
}

ORR_EXPORT int orrery_private_node_gpu_count(const char* fn) { return (int)node_gpus(fn).size(); }

ORR_EXPORT const cudaDeviceProp* orrery_private_node_gpu(const char* fn, int index, size_t* memory_used) {
  Gpu* g = node_gpu(fn, index);
  if (g && memory_used)
    *memory_used = g->memory_used;
  return g ? &g->prop : nullptr;
}

ORR_EXPORT const char* orrery_private_node_gpu_attribute(const char* fn, int index, int attribute, int* value) {
  Gpu* g = node_gpu(fn, index);
  return g ? device_attribute(*g, attribute, value) : "is asked of a GPU the node does not have";
}

ORR_EXPORT const char* orrery_private_device_attribute(const char* fn, int attribute, int device, int* value) {
  Gpu* g = device_of(rank_self(fn), device);
  return g ? device_attribute(*g, attribute, value) : "is asked of a device the rank does not see";
}

ORR_EXPORT cudaError_t orrery_private_swap_last_error(const char* fn, cudaError_t e) {
  Rank& r = rank_self(fn);
  cudaError_t before = r.last_error;
  r.last_error = e;
  return before;
}

ORR_EXPORT void orrery_private_synchronize(const char* fn) {
  Rank& r = rank_self(fn);
  trace::CudaCall call(r, fn);
  wait_device(r, r.device);
}

ORR_EXPORT void orrery_private_pointer(const char* fn, const void* p, OrreryPointer* out) {
  Rank& r = rank_self(fn);
  *out = OrreryPointer{};
  const Allocation* a = find_allocation(p);
  int device = a ? ordinal_of(r, a->gpu) : -1;
  if (!a || (a->device && device < 0))  // memory of a device the rank cannot see is not its own
    return;
  out->memory_type = a->device ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
  out->device = device >= 0 ? device : r.device;
  out->base = a->base;
  out->size = a->size;
  out->buffer_id = a->base;  // one allocation per base address at a time
  out->mapped = a->mapped;
  out->managed = a->managed;
}

ORR_EXPORT int orrery_private_primary_retain(const char* fn, int device, int delta) {
  Rank& r = rank_self(fn);
  if (!device_of(r, device))
    return -1;
  PrimaryContext& c = state_of(r).primary[device];
  if (c.retained + delta < 0)
    return -2;
  return c.retained += delta;
}

ORR_EXPORT CUresult orrery_private_primary_state(const char* fn, int device, unsigned* flags, int* active) {
  Rank& r = rank_self(fn);
  if (!device_of(r, device))
    return CUDA_ERROR_INVALID_DEVICE;
  const PrimaryContext& c = state_of(r).primary[device];
  *flags = c.flags;
  *active = c.retained > 0;
  return CUDA_SUCCESS;
}

ORR_EXPORT CUresult orrery_private_primary_set_flags(const char* fn, int device, unsigned flags) {
  Rank& r = rank_self(fn);
  if (!device_of(r, device))
    return CUDA_ERROR_INVALID_DEVICE;
  state_of(r).primary[device].flags = flags;
  return CUDA_SUCCESS;
}

ORR_EXPORT bool orrery_private_context_bound(const char* fn, int set) {
  DriverState& s = state_of(rank_self(fn));
  if (set >= 0)
    s.unbound = set == 0;
  return !s.unbound;
}

ORR_EXPORT int orrery_private_created_context(const char* fn, int op, int device) {
  Rank& r = rank_self(fn);
  DriverState& s = state_of(r);
  switch (op) {
    case kCreatedAsk: return device_of(r, device) && s.created[device];
    case kCreatedMake:
    case kCreatedDrop:
      s.created[device] = op == kCreatedMake;
      if (op == kCreatedDrop && s.created_current == device)
        s.created_current = -1;
      return 1;
    case kCreatedCurrent: return s.created_current == r.device ? s.created_current : -1;
    default: s.created_current = device; return 1;  // kCreatedMakeCurrent
  }
}

ORR_EXPORT bool orrery_private_context_stack(const char* fn, int op, uintptr_t* context) {
  std::vector<uintptr_t>& stack = state_of(rank_self(fn)).stack;
  if (op == kStackPush) {
    stack.push_back(*context);
  } else if (op == kStackPop) {
    if (stack.empty())
      return false;
    *context = stack.back();
    stack.pop_back();
  } else {  // kStackRemove
    stack.erase(std::remove(stack.begin(), stack.end(), *context), stack.end());
  }
  return true;
}

ORR_EXPORT size_t orrery_private_vmm_granularity(void) { return kGranularity; }

ORR_EXPORT CUresult orrery_private_vmm_create(const char* fn, int device, size_t size,
                                              CUmemGenericAllocationHandle* handle) {
  Rank& r = rank_self(fn);
  Gpu* g = device_of(r, device);
  if (!g)
    return CUDA_ERROR_INVALID_DEVICE;
  if (size == 0 || size % kGranularity)
    return CUDA_ERROR_INVALID_VALUE;
  if (size > g->prop.totalGlobalMem - g->memory_used)  // as cudaMalloc: not used + size, which could wrap
    return CUDA_ERROR_OUT_OF_MEMORY;
  int fd = memfd_create("orrery-vmm", 0);
  if (fd < 0 || ftruncate(fd, (off_t)size) != 0)
    fatal("%s(%zu) on rank %d: cannot create its memory (%s)", fn, size, r.id, strerror(errno));
  g->memory_used += size;
  CUmemGenericAllocationHandle h = vmm().next++;
  vmm().physical[h] = Physical{r.id, g, size, fd, 1, 0};
  *handle = h;
  return CUDA_SUCCESS;
}

ORR_EXPORT CUresult orrery_private_vmm_release(const char* fn, CUmemGenericAllocationHandle handle) {
  Physical* ph = physical_of(rank_self(fn), handle);
  if (!ph || ph->references == 0)
    return CUDA_ERROR_INVALID_VALUE;
  ph->references--;
  collect(handle);  // its memory returns once its last mapping is unmapped
  return CUDA_SUCCESS;
}

ORR_EXPORT CUresult orrery_private_vmm_reserve(const char* fn, size_t size, size_t alignment, CUdeviceptr addr,
                                               CUdeviceptr* out) {
  rank_self(fn);
  if (size == 0 || size % kGranularity || (alignment & (alignment - 1)))
    return CUDA_ERROR_INVALID_VALUE;
  size_t align = alignment > kGranularity ? alignment : kGranularity;
  // Over-reserve and trim, for the alignment; `addr` is a hint, as in CUDA.
  size_t span = size + align;
  char* p = (char*)mmap((void*)addr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return CUDA_ERROR_OUT_OF_MEMORY;
  uintptr_t base = ((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1);
  if (base > (uintptr_t)p)
    munmap(p, base - (uintptr_t)p);
  if ((uintptr_t)p + span > base + size)
    munmap((void*)(base + size), (uintptr_t)p + span - (base + size));
  vmm().reservations[base] = size;
  *out = base;
  return CUDA_SUCCESS;
}

ORR_EXPORT CUresult orrery_private_vmm_free(const char* fn, CUdeviceptr ptr, size_t size) {
  rank_self(fn);
  auto it = vmm().reservations.find(ptr);
  if (it == vmm().reservations.end() || it->second != size)
    return CUDA_ERROR_INVALID_VALUE;
  auto m = vmm().mappings.lower_bound(ptr);
  if (m != vmm().mappings.end() && m->first < ptr + size)  // still mapped: CUDA refuses too
    return CUDA_ERROR_INVALID_VALUE;
  munmap((void*)ptr, size);
  vmm().reservations.erase(it);
  return CUDA_SUCCESS;
}

ORR_EXPORT CUresult orrery_private_vmm_map(const char* fn, CUdeviceptr ptr, size_t size, size_t offset,
                                           CUmemGenericAllocationHandle handle) {
  Rank& r = rank_self(fn);
  Physical* ph = physical_of(r, handle);
  if (!ph || ph->references == 0)
    return CUDA_ERROR_INVALID_HANDLE;
  if (size == 0 || ptr % kGranularity || size % kGranularity || offset % kGranularity || offset > ph->size ||
      size > ph->size - offset || !reserved(ptr, size))
    return CUDA_ERROR_INVALID_VALUE;
  auto next = vmm().mappings.lower_bound(ptr);
  bool overlaps = (next != vmm().mappings.end() && next->first < ptr + size) ||
                  (next != vmm().mappings.begin() && std::prev(next)->first + std::prev(next)->second.size > ptr);
  if (overlaps)
    return CUDA_ERROR_INVALID_VALUE;  // CUDA_ERROR_ALREADY_MAPPED would name it; the program fails either way
  if (mmap((void*)ptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, ph->fd, (off_t)offset) == MAP_FAILED)
    fatal("%s: cannot map %zu bytes at %#llx (%s)", fn, size, (unsigned long long)ptr, strerror(errno));
  vmm().mappings[ptr] = Mapping{size, handle, false};
  ph->mappings++;
  return CUDA_SUCCESS;
}

// The mappings that make up [ptr, ptr + size) exactly, one after the other: [first, last), or
// (end, end) when the range is not whole mappings.
static std::pair<std::map<uintptr_t, Mapping>::iterator, std::map<uintptr_t, Mapping>::iterator> whole_mappings(
    uintptr_t ptr, size_t size) {
  auto& maps = vmm().mappings;
  auto first = maps.find(ptr);
  uintptr_t at = ptr;
  auto it = first;
  for (; it != maps.end() && at < ptr + size; ++it) {
    if (it->first != at)
      return {maps.end(), maps.end()};
    at += it->second.size;
  }
  if (first == maps.end() || at != ptr + size)
    return {maps.end(), maps.end()};
  return {first, it};
}

ORR_EXPORT CUresult orrery_private_vmm_unmap(const char* fn, CUdeviceptr ptr, size_t size) {
  Rank& r = rank_self(fn);
  auto& maps = vmm().mappings;
  auto [first, it] = whole_mappings(ptr, size);
  if (first == maps.end() || !physical_of(r, first->second.handle))
    return CUDA_ERROR_INVALID_VALUE;
  // CUDA unmaps only once the device is done with the range, as cudaFree does.
  trace::CudaCall call(r, fn);
  wait_device(r, r.device);
  for (auto m = first; m != it;) {
    if (m->second.accessible)
      unregister_allocation(m->first);
    if (!unmap_range(m->first, m->second.size))
      fatal("%s: cannot unmap %zu bytes at %#lx (%s)", fn, m->second.size, (unsigned long)m->first, strerror(errno));
    CUmemGenericAllocationHandle h = m->second.handle;
    vmm().physical.at(h).mappings--;
    m = maps.erase(m);
    collect(h);
  }
  return CUDA_SUCCESS;
}

ORR_EXPORT CUresult orrery_private_vmm_set_access(const char* fn, CUdeviceptr ptr, size_t size, int device,
                                                  int flags) {
  Rank& r = rank_self(fn);
  if (!device_of(r, device))
    return CUDA_ERROR_INVALID_DEVICE;
  auto [first, it] = whole_mappings(ptr, size);
  if (first == vmm().mappings.end())
    return CUDA_ERROR_INVALID_VALUE;
  for (auto m = first; m != it; ++m) {
    const Physical& ph = vmm().physical.at(m->second.handle);
    if (device_of(r, device) != ph.gpu)
      // Peer access to another GPU's mapping: copies would need to know which GPU reads it.
      orrery_private_fatal(fn, "access from a device other than the memory's own is not simulated");
    bool accessible = flags != CU_MEM_ACCESS_FLAGS_PROT_NONE;
    if (accessible && !m->second.accessible) {
      bool fold = m->second.size >= (size_t)run_description().fold_threshold;
      Allocation a{m->first, m->second.size, true, fold, ph.gpu};
      a.mapped = true;
      register_allocation(a);
    } else if (!accessible && m->second.accessible) {
      unregister_allocation(m->first);
    }
    m->second.accessible = accessible;
  }
  return CUDA_SUCCESS;
}

ORR_EXPORT CUresult orrery_private_vmm_retain(const char* fn, const void* addr, CUmemGenericAllocationHandle* handle) {
  Rank& r = rank_self(fn);
  auto& maps = vmm().mappings;
  auto it = maps.upper_bound((uintptr_t)addr);
  if (it == maps.begin())
    return CUDA_ERROR_INVALID_VALUE;
  --it;
  if ((uintptr_t)addr - it->first >= it->second.size)
    return CUDA_ERROR_INVALID_VALUE;
  Physical* ph = physical_of(r, it->second.handle);
  if (!ph)
    return CUDA_ERROR_INVALID_VALUE;
  ph->references++;
  *handle = it->second.handle;
  return CUDA_SUCCESS;
}

ORR_EXPORT CUresult orrery_private_vmm_properties(const char* fn, CUmemGenericAllocationHandle handle, int* device,
                                                  size_t* size) {
  Rank& r = rank_self(fn);
  Physical* ph = physical_of(r, handle);
  if (!ph)
    return CUDA_ERROR_INVALID_HANDLE;
  *device = ordinal_of(r, ph->gpu);
  *size = ph->size;
  return CUDA_SUCCESS;
}
