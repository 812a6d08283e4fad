/* CUDA memory: allocation, pointer kinds, copies and memsets.
 *
 * Skeleton mode never runs kernels, so device memory holds nothing anyone
 * reads: allocations of at least `fold_threshold` bytes are "folded" (every
 * block maps the same few physical pages; MPI messages sent from them carry no
 * data). Pinned host buffers are folded the same way unless the run says
 * otherwise. A device-to-host copy
 * writes the fill pattern of the run into its destination when it completes in
 * simulated time, so that data-dependent loops see a deterministic value. */
#include "core/capture.hpp"
#include "core/cubin.hpp"
#include "core/runtime.hpp"
#include "core/trace.hpp"
#include "cudart/cuda_api.h"

#include <smpi/smpi.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>

#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

namespace orrery {

static std::map<uintptr_t, Allocation>& registry() {
  static std::map<uintptr_t, Allocation> r;
  return r;
}

/* find_allocation's last answers to each actor, the latest first, good while no allocation has
 * come or gone (`version`, counted by registry_changed at each insertion and erasure): an
 * allocation answers for any pointer into it, a miss (host memory) for the gap it found. An MPI call
 * asks about each of its buffers several times (mpi.cpp: where it stands, its path, its protocol,
 * where its message ends), and a rank's calls keep to a few allocations, so that 4 in 5 questions
 * of a Jacobi run are answered here; the map holds every rank's allocations, and its walk was 3 %
 * of a 1024-GPU run's samples (bench/README.md). One table for all actors missed half the time:
 * the ranks' questions interleave. */
namespace {
struct RecentLookups {
  static constexpr int kSize = 4;
  struct Entry {
    uintptr_t lo, hi;  // what it answers for: the allocation's range, or the gap a missed pointer is in
    const Allocation* answer;
  };
  uint64_t version = 0;
  int filled = 0;
  Entry entry[kSize] = {};
};
uint64_t g_registry_version = 1;

// Each actor's own (a rank's, a stream's; the maestro's first): the ranks' questions interleave.
RecentLookups& recent_lookups() {
  static std::vector<RecentLookups> by_actor;
  aid_t pid = sg4::Actor::is_maestro() ? 0 : sg4::Actor::self()->get_pid();
  if ((size_t)pid >= by_actor.size())
    by_actor.resize(pid + 1);
  return by_actor[pid];
}
}  // namespace

static void registry_changed() { g_registry_version++; }

// An allocation out of the registry (its memory released or not, by the caller).
static void forget(std::map<uintptr_t, Allocation>::iterator it) {
  registry().erase(it);
  registry_changed();
}

/* The registry's answer for a pointer, with the range it holds for: the allocation's, or, where
 * no allocation holds the pointer, the whole gap between its neighbours (host memory: a rank's
 * heap, SMPI's buffers), so that one answer serves every host pointer of that gap. */
static RecentLookups::Entry lookup(uintptr_t at) {
  auto& reg = registry();
  auto next = reg.upper_bound(at);
  uintptr_t gap_lo = 0;
  if (next != reg.begin()) {
    const Allocation& a = std::prev(next)->second;
    const uintptr_t end = a.base + std::max<size_t>(a.size, 1);
    if (at < end)
      return {a.base, end, &a};
    gap_lo = end;
  }
  return {gap_lo, next == reg.end() ? UINTPTR_MAX : next->first, nullptr};
}

/* Below each actor's last answers, the last answer for each page, in a table shared by all actors
 * (an answer keeps its range: it holds for the pointers in it alone). The maestro asks about every
 * message's send buffer (copy_message_data), all ranks' in turn: several pages per rank, which its
 * own last four answers cannot hold. */
static RecentLookups::Entry by_page(uintptr_t at) {
  struct Slot {
    uint64_t version = 0;
    RecentLookups::Entry entry{};
  };
  constexpr int kBits = 14;
  static std::vector<Slot> table(1 << kBits);
  // Fibonacci hashing of the page number: the ranks' buffers sit at the same offsets of allocations
  // that share their low address bits
  Slot& slot = table[((at >> 12) * 0x9E3779B97F4A7C15ull) >> (64 - kBits)];
  if (slot.version == g_registry_version && at >= slot.entry.lo && at < slot.entry.hi)
    return slot.entry;
  slot.version = g_registry_version;
  slot.entry = lookup(at);
  return slot.entry;
}

const Allocation* find_allocation(const void* p) {
  RecentLookups& r = recent_lookups();
  if (r.version != g_registry_version) {
    r.version = g_registry_version;
    r.filled = 0;
  }
  const uintptr_t at = (uintptr_t)p;
  int i = 0;
  while (i < r.filled && !(at >= r.entry[i].lo && at < r.entry[i].hi))
    i++;
  RecentLookups::Entry found;
  if (i < r.filled) {
    found = r.entry[i];
  } else {
    found = by_page(at);
    i = r.filled < RecentLookups::kSize ? r.filled++ : RecentLookups::kSize - 1;
  }
  for (; i > 0; i--)  // to the front
    r.entry[i] = r.entry[i - 1];
  r.entry[0] = found;
  return found.answer;
}

/* Records an allocation under a serial of its own, so that what is keyed by allocation (the MPI
 * library's CUDA IPC cache, mpi.cpp) tells a reallocation at a freed address from the freed one. */
void register_allocation(const Allocation& a) {
  static uint64_t serials = 0;
  Allocation& held = registry()[a.base] = a;
  registry_changed();
  held.serial = ++serials;
}
void unregister_allocation(uintptr_t base) {
  auto it = registry().find(base);
  if (it != registry().end())
    forget(it);
}

// A stream-ordered allocation's pool (cudaMallocAsync; the API's part is below).
struct MemPool {
  int device = 0;
  bool made_by_program = false;  // cudaMemPoolCreate (the default pools are never destroyed)
  uint64_t release_threshold = 0;
  int reuse[4] = {0, 1, 1, 1};   // the three reuse flags, by attribute (on by default)
  uint64_t used = 0, used_high = 0;
};

/* Folding: a folded allocation reserves its address range and maps one
 * shared block at every block of it, without pre-faulting. Whatever the size, it costs physical
 * memory (and RSS) only for the pages something touches, and all blocks alias the same pages, so
 * that the touched pages of all folded allocations together stay within one block. Each block is
 * a memory map of the process, which vm.max_map_count bounds (docs/running.md). Device memory and
 * pinned host memory fold onto blocks of their own:
 *   - pinned host memory onto `fold_blocksize` (64 MiB): the program's own code writes its host
 *     buffers, and what it writes stays within the block;
 *   - device memory onto a block as large as the largest folded device allocation (at most
 *     `fold_device_blocksize`, 512 GiB), so that each allocation is one map (a Jacobi rank's two
 *     1 GiB arrays: 2 maps, not 34; bench/README.md, "Memory maps"): only the data of MPI messages
 *     from unfolded buffers into device buffers reaches it (the program's code never does, and the
 *     copies move no data), within the largest such allocation. */
struct FoldBlock {
  int fd = -1;
  size_t size = 0;
};

// The shared block of device or pinned host memory, grown to `size` where device memory's may be.
static FoldBlock& fold_block(bool device, size_t size) {
  static FoldBlock blocks[2];
  FoldBlock& b = blocks[device];
  const RunDescription& d = run_description();
  size_t want =
      device ? std::min(std::max(size, b.size), (size_t)d.fold_device_blocksize) : (size_t)d.fold_blocksize;
  if (b.fd < 0)
    b.fd = memfd_create(device ? "orrery-folded-device-memory" : "orrery-folded-host-memory", 0);
  if (b.fd >= 0 && want != b.size && ftruncate(b.fd, (off_t)want) == 0)  // growing keeps the maps made
    b.size = want;
  if (b.fd < 0 || b.size != want)
    fatal("cannot create the shared block that folds %s memory (%s)", device ? "device" : "pinned host",
          strerror(errno));
  return b;
}

static void* fold_map(size_t size, bool device) {
  const FoldBlock& block = fold_block(device, size);
  char* base = (char*)mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED)
    return nullptr;
  for (size_t off = 0; off < size; off += block.size) {
    size_t len = std::min(block.size, size - off);
    if (mmap(base + off, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, block.fd, 0) == MAP_FAILED)
      fatal("cannot map %zu bytes of folded memory (%s): raise vm.max_map_count or the fold block size",
            size, strerror(errno));
  }
  return base;
}

// `fold`: folded, as device memory (`device`) or pinned host memory
static void* allocate(size_t size, bool fold, bool device) {
  if (fold)
    return fold_map(size, device);
  void* p = nullptr;
  if (posix_memalign(&p, 256, size ? size : 1))
    return nullptr;
  memset(p, 0, size);
  return p;
}

static void release(const Allocation& a) {
  if (a.folded || a.anonymous)
    munmap((void*)a.base, a.size);
  else
    free((void*)a.base);
}

/* Device memory of `size` bytes on g, counted in its memory in use (and its pool's, for a
 * stream-ordered allocation); null when the device has not that much left. */
static void* allocate_device(Gpu& g, size_t size, MemPool* pool, const char* fn, int rank) {
  if (size > g.prop.totalGlobalMem - g.memory_used)  // not used + size: SIZE_MAX would wrap
    return nullptr;
  bool fold = size >= (size_t)run_description().fold_threshold;
  void* mem = allocate(size, fold, true);
  if (!mem)
    fatal("%s(%zu) on rank %d: the host could not reserve the address space", fn, size, rank);
  Allocation a{(uintptr_t)mem, size, true, fold, &g};
  a.pool = pool;
  register_allocation(a);
  g.memory_used += size;
  if (pool) {
    pool->used += size;
    pool->used_high = std::max(pool->used_high, pool->used);
  }
  return mem;
}

// Gives a device allocation back: to its device's (and pool's) memory, and to the host.
static void free_device(std::map<uintptr_t, Allocation>::iterator it) {
  Allocation& a = it->second;
  a.gpu->memory_used -= a.size;
  if (a.pool)
    a.pool->used -= a.size;
  release(a);
  forget(it);
}

void* allocate_module_memory(Gpu& g, size_t size, const char* fn, int rank) {
  return allocate_device(g, size, nullptr, fn, rank);
}

void free_module_memory(void* p) {
  auto it = registry().find((uintptr_t)p);
  if (it != registry().end())
    free_device(it);
}

/* SMPI copies a message's data when it arrives; one sent from folded memory
 * carries nothing anyone reads, so its copy is skipped (the simulated time of
 * the message is unchanged). Small messages were already copied by SMPI into
 * a buffer of its own when sent, and go through the default path. */
static void copy_message_data(smx_activity_t comm, void* buff, size_t size) {
  const Allocation* a = find_allocation(buff);
  if (a && a->folded)
    return;
  smpi_comm_copy_buffer_callback(reinterpret_cast<simgrid::kernel::activity::CommImpl*>(comm), buff, size);
}

void install_message_copy() { smpi_comm_set_copy_data_callback(&copy_message_data); }

}  // namespace orrery

/* Whether `p` lies in folded memory, whose data nobody reads: liborrery_smpi.so's non-blocking
 * collectives copy no rank's data from it (interpose/mpi/smpi_nbc.cpp), as messages from it carry
 * none (copy_message_data above). */
extern "C" __attribute__((visibility("default"))) int orrery_private_folded(const void* p) {
  const orrery::Allocation* a = orrery::find_allocation(p);
  return a && a->folded;
}

namespace orrery {

void apply_d2h_fill(void* dst, uint64_t width, uint64_t pitch, uint64_t rows) {
  const RunDescription& c = run_description();
  if (c.d2h_fill == FillPolicy::Keep)
    return;
  // 0x7f in every byte is a large positive float (3.4e38), double (1.4e306) and
  // integer: "not converged yet" for every residual test, never NaN.
  int byte = c.d2h_fill == FillPolicy::Zero ? 0 : 0x7f;
  const Allocation* a = find_allocation(dst);
  if (a && a->folded && !a->device && rows == 1) {
    // Every block of folded pinned memory maps the same pages: writing one block's
    // worth from dst reaches every byte of the buffer.
    memset(dst, byte, std::min<uint64_t>(width, c.fold_blocksize));
    return;
  }
  for (uint64_t r = 0; r < rows; r++)
    memset((char*)dst + r * pitch, byte, width);
}

/* ---- classification of a copy ---- */

struct Side {
  bool device;
  Gpu* gpu;
};

static Side side_of(Rank& r, const void* p) {
  const Allocation* a = find_allocation(p);
  if (a && a->device)
    return {true, a->gpu};
  return {false, &current_gpu(r)};
}

static cudaError_t classify(Rank& r, const void* dst, const void* src, int kind, Side& d, Side& s, CopyKind& k) {
  d = side_of(r, dst);
  s = side_of(r, src);
  switch (kind) {
    case cudaMemcpyHostToHost: d.device = s.device = false; break;
    case cudaMemcpyHostToDevice: s.device = false; d.device = true; break;
    case cudaMemcpyDeviceToHost: s.device = true; d.device = false; break;
    case cudaMemcpyDeviceToDevice: s.device = d.device = true; break;
    case cudaMemcpyDefault: break;
    default: return cudaErrorInvalidMemcpyDirection;
  }
  if (!s.device && !d.device)
    k = CopyKind::H2H;
  else if (!s.device)
    k = CopyKind::H2D;
  else if (!d.device)
    k = CopyKind::D2H;
  else
    k = s.gpu == d.gpu ? CopyKind::D2D : CopyKind::Peer;
  return cudaSuccess;
}

/* ---- checking a call's pointers, before anything is charged or touched ----
 * The real runtime knows every allocation it made and refuses a device-side range that is not
 * inside one of them (cudaErrorInvalidValue). Pageable host memory is unknown to CUDA too: any
 * pointer that is neither null nor CUDA's is taken as host memory (unified addressing), and the
 * shim checks only that it can be read (a source) or written (a destination), so that a bad
 * host pointer is an error returned instead of a crash of the whole simulation (the shim writes
 * D2H copies' fill pattern and moves H2H copies' data). */

/* The device number of `g` as rank r sees it (a bound rank sees one device, 0); -1: not its own. */
static int ordinal_of(const Rank& r, const Gpu* g) {
  for (size_t i = 0; i < r.gpus.size(); i++)
    if (r.gpus[i] == g)
      return (int)i;
  return -1;
}

static bool inside(const Allocation& a, const void* p, size_t n) {
  uintptr_t b = (uintptr_t)p;
  return b >= a.base && n <= a.size && b - a.base <= a.size - n;
}

/* The bytes that `rows` rows of `width` bytes, `pitch` apart, span; false if that overflows. */
static bool extent_of(size_t width, size_t pitch, size_t rows, size_t& extent) {
  return !__builtin_mul_overflow(rows - 1, pitch, &extent) && !__builtin_add_overflow(extent, width, &extent);
}

/* Whether this process can read (and, with `write`, also write) every page of [p, p + n), n > 0.
 * process_vm_readv/writev report a fault as an error where a plain access raises SIGSEGV: one
 * byte of each page is read, and written back unchanged. Where a seccomp policy forbids them,
 * only the mapping is checked (msync fails on unmapped pages). */
static bool host_accessible(const void* p, size_t n, bool write) {
  static const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  const uintptr_t begin = (uintptr_t)p, end = begin + n;
  constexpr size_t kBatch = 256;  // iovecs per call, below IOV_MAX
  char bytes[kBatch];
  iovec remote[kBatch];
  for (uintptr_t a = begin; a < end && a >= begin;) {
    size_t k = 0;
    for (; k < kBatch && a < end && a >= begin; k++) {
      remote[k] = {(void*)a, 1};
      a = (a & ~(page - 1)) + page;  // 0 past the last page: ends both loops
    }
    iovec local{bytes, k};
    ssize_t got = process_vm_readv(getpid(), &local, 1, remote, k, 0);
    if (got < 0 && (errno == ENOSYS || errno == EPERM)) {
      uintptr_t first = begin & ~(page - 1);
      return msync((void*)first, end - first, MS_ASYNC) == 0;
    }
    if (got != (ssize_t)k || (write && process_vm_writev(getpid(), &local, 1, remote, k, 0) != (ssize_t)k))
      return false;
  }
  return true;
}

/* Whether a device allocation begins inside [p, p + n) (p itself is in none). */
static bool reaches_device_memory(const void* p, size_t n) {
  auto& reg = registry();
  for (auto it = reg.lower_bound((uintptr_t)p); it != reg.end() && it->first - (uintptr_t)p < n; ++it)
    if (it->second.device)
      return true;
  return false;
}

/* One side of a copy: `extent` bytes from `p`, on the device (named so by the copy's kind, or
 * found so for cudaMemcpyDefault) or on the host, written to when `write`. With `device` >= 0 it
 * must be memory of that device of the rank (peer copies). */
static cudaError_t check_side(const Rank& r, const void* p, size_t extent, const Side& side, bool write,
                              int device = -1) {
  if (!p || extent > UINTPTR_MAX - (uintptr_t)p)
    return cudaErrorInvalidValue;
  const Allocation* a = find_allocation(p);
  if (device >= 0 && !(a && a->device && a->gpu == r.gpus[device]))
    return cudaErrorInvalidValue;
  if (side.device) {
    // Device memory of one of the rank's GPUs, or pinned host memory, which CUDA maps into the
    // devices' address space (unified addressing).
    if (!a || (a->device && ordinal_of(r, a->gpu) < 0))
      return cudaErrorInvalidValue;
    return inside(*a, p, extent) ? cudaSuccess : cudaErrorInvalidValue;
  }
  if (a)  // pinned host memory or managed memory, or device memory where the kind names the host
    return (!a->device || a->managed) && inside(*a, p, extent) ? cudaSuccess : cudaErrorInvalidValue;
  if (reaches_device_memory(p, extent))
    return cudaErrorInvalidValue;
  return host_accessible(p, extent, write) ? cudaSuccess : cudaErrorInvalidValue;
}

static bool pinned(const void* p) {
  const Allocation* a = find_allocation(p);
  return a && !a->device;
}

// What each rank opened of other ranks' memory by CUDA IPC (cudaIpcOpenMemHandle, below):
// (rank, base) -> opens not yet closed.
static std::map<std::pair<int, uintptr_t>, int>& ipc_opened() {
  static std::map<std::pair<int, uintptr_t>, int> opened;
  return opened;
}

/* Whether a peer copy between two device allocations of rank r goes GPU to GPU (NVLink, or PCIe
 * peer to peer): the rank enabled peer access between their devices, either way
 * (cudaDeviceEnablePeerAccess), or one side is memory it reaches as a peer already (opened by
 * CUDA IPC, whose cudaIpcMemLazyEnablePeerAccess enables it; mapped by the driver with its
 * access set). Otherwise the driver stages the copy through host memory: on an HGX H100,
 * p2pBandwidthLatencyTest's "P2P=Disabled" pairs move 37 GB/s against 376 GB/s enabled
 * (device_bandwidth.csv, NVIDIA/nccl#1264). */
static bool peer_to_peer(const Rank& r, const void* dst, const void* src) {
  const Allocation* d = find_allocation(dst);
  const Allocation* s = find_allocation(src);
  for (const Allocation* a : {d, s})
    if (a->mapped || ipc_opened().count({r.id, a->base}))
      return true;
  int dd = ordinal_of(r, d->gpu), sd = ordinal_of(r, s->gpu);
  return r.peer_access.count({dd, sd}) || r.peer_access.count({sd, dd});
}

/* The operation of a (possibly 2D) copy, once its pointers are checked (CUDA's error for bad
 * ones): what a copy enqueues, and what a graph's memcpy node holds. */
cudaError_t copy_op(Rank& r, void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                    int kind, Op& op, int dst_device, int src_device) {
  Side d, s;
  CopyKind k;
  if (cudaError_t e = classify(r, dst, src, kind, d, s, k))
    return e;
  if (width > dpitch || width > spitch)
    return cudaErrorInvalidPitchValue;
  if (width && height) {  // a copy of nothing succeeds whatever its pointers, as in CUDA
    size_t dst_extent, src_extent;
    if (!extent_of(width, dpitch, height, dst_extent) || !extent_of(width, spitch, height, src_extent))
      return cudaErrorInvalidValue;
    if (cudaError_t e = check_side(r, dst, dst_extent, d, true, dst_device))
      return e;
    if (cudaError_t e = check_side(r, src, src_extent, s, false, src_device))
      return e;
  }
  op = Op{Op::Copy};
  op.copy = k;
  op.bytes = (uint64_t)width * height;
  op.fill_width = width;
  op.fill_pitch = dpitch;
  op.fill_rows = height;
  switch (k) {
    case CopyKind::H2D: op.from = d.gpu->cpu; op.to = d.gpu->host; break;
    case CopyKind::D2H: op.from = s.gpu->host; op.to = s.gpu->cpu; op.fill_dst = dst; break;
    case CopyKind::D2D: op.from = s.gpu->host; op.to = d.gpu->host; break;
    case CopyKind::Peer:
      if (width && height && !peer_to_peer(r, dst, src)) {
        op.staged = true;  // through the source's host memory, as the driver stages it
        op.from = s.gpu->host;
        op.via = s.gpu->cpu;
        op.to = d.gpu->host;
      } else {
        op.from = s.gpu->copy_engine;
        op.to = d.gpu->copy_engine;
      }
      break;
    case CopyKind::H2H:
      op.fill_dst = dst;
      op.h2h_src = src;
      if (spitch != width)
        unsupported("cudaMemcpy2D host-to-host with a source pitch");
      break;
  }
  return cudaSuccess;
}

/* Enqueue a (possibly 2D) copy on `stream`; with `sync` the host waits for it. The copy is
 * also serialised with the legacy-ordered work of the devices in `also` (cudaMemcpyPeer):
 * it waits for what is pending there, and what comes later there waits for it. */
static cudaError_t copy(const char* fn, void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                        size_t height, int kind, cudaStream_t stream, bool sync, std::initializer_list<int> also = {},
                        int dst_device = -1, int src_device = -1) {
  Rank& r = rank_deferring(fn);  // enqueues, and waits (no sooner than the rank's own time)
  Op op{Op::Copy};
  if (cudaError_t e = copy_op(r, dst, dpitch, src, spitch, width, height, kind, op, dst_device, src_device))
    return r.last_error = e;
  const CopyKind k = op.copy;
  Stream* st = resolve_stream(r, stream, fn);
  // CUDA's API synchronisation behaviour: copies from or to pageable host memory return
  // only once the data has moved; a synchronous copy waits too, unless it goes from
  // device memory to device memory (cudaMemcpy D2D, cudaMemcpyPeer), which performs
  // no host-side synchronisation (measured on an H200: calibration/data/h200-harness).
  bool pageable = (k == CopyKind::H2D && !pinned(src)) || (k == CopyKind::D2H && !pinned(dst)) || k == CopyKind::H2H;
  bool device_to_device = k == CopyKind::D2D || k == CopyKind::Peer;
  bool host_waits = (sync && !device_to_device) || pageable;
  // A synchronous copy in a capture is refused: the host cannot wait for a copy that does not run.
  // An asynchronous one from or to pageable memory is captured (a memcpy node, which NVIDIA's
  // simpleCudaGraphs records into a stack variable): its host waits for it at each launch's
  // synchronisation, not now.
  const bool captured = st->capture;
  if (captured && sync) {
    capture_invalidate(st->capture);
    return r.last_error = cudaErrorStreamCaptureUnsupported;
  }
  host_waits = host_waits && !captured;
  trace::CudaCall call(r, fn);
  call.about(copy_kind_name(k), (uint64_t)width * height);
  host_overhead(r, current_gpu(r).copy_overhead_s);
  std::vector<Stream*> others;
  for (int device : also) {
    Stream* l = legacy_stream(r, device);
    if (l == st || std::find(others.begin(), others.end(), l) != others.end())
      continue;
    others.push_back(l);
    if (l->completed < l->enqueued)
      op.deps.push_back({l, l->enqueued});
    wait_like_legacy(op, l);
  }
  if (cudaError_t e = enqueue(st, std::move(op)))
    return r.last_error = e;
  for (Stream* l : others) {
    Op after{Op::Wait};
    after.deps.push_back({st, st->enqueued});
    if (cudaError_t e = enqueue(l, std::move(after)))
      return r.last_error = e;
  }
  if (host_waits)
    wait_stream(r, st);
  return cudaSuccess;
}

/* Writes `value` over [p, p + bytes) of managed memory. Zeros over whole pages give the pages back
 * instead (they read as zeros when next touched): a cleared array of gigabytes costs the host
 * nothing until the program's code writes it. */
static void fill_managed(void* p, int value, size_t bytes) {
  static const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  uintptr_t begin = (uintptr_t)p, end = begin + bytes;
  uintptr_t first = (begin + page - 1) & ~(page - 1), last = end & ~(page - 1);
  if ((unsigned char)value != 0 || last <= first || madvise((void*)first, last - first, MADV_DONTNEED) != 0) {
    memset(p, value, bytes);
    return;
  }
  memset(p, 0, first - begin);
  memset((void*)last, 0, end - last);
}

/* The operation of a memset of `bytes` from `p`, device memory of the rank's, which a graph's memset
 * node holds too (it writes nothing, as a captured memset does not). */
cudaError_t memset_op(Rank& r, void* p, size_t bytes, Op& op) {
  const Allocation* a = find_allocation(p);
  if (!a || !a->device || ordinal_of(r, a->gpu) < 0 || !inside(*a, p, bytes))
    return cudaErrorInvalidValue;
  op = Op{Op::Memset};
  op.bytes = bytes;
  op.seconds = (double)bytes / a->gpu->memset_bandwidth;
  return cudaSuccess;
}

static cudaError_t memset_device(const char* fn, void* p, int value, size_t bytes, cudaStream_t stream) {
  Rank& r = rank_deferring(fn);  // only enqueues
  Op op{Op::Memset};
  if (cudaError_t e = memset_op(r, p, bytes, op))
    return r.last_error = e;
  const Allocation* a = find_allocation(p);
  Stream* st = resolve_stream(r, stream, fn);
  trace::CudaCall call(r, fn);
  call.about("memset", bytes);
  host_overhead(r, current_gpu(r).copy_overhead_s);
  const bool captured = st->capture;  // recorded into a graph, not run: it writes nothing now
  if (cudaError_t e = enqueue(st, std::move(op)))
    return r.last_error = e;
  if (a->managed && !captured)  // the host's code reads managed memory: it finds the value (at once,
    fill_managed(p, value, bytes);  // not in stream order)
  return cudaSuccess;
}

}  // namespace orrery

using namespace orrery;

ORR_EXPORT cudaError_t cudaMalloc(void** p, size_t size) {
  Rank& r = rank_self("cudaMalloc");
  Gpu& g = current_gpu(r);
  if (!p)
    return r.last_error = cudaErrorInvalidValue;
  if (refuse_unsafe(r))  // CUDA's example of a potentially unsafe call during a capture
    return r.last_error = cudaErrorStreamCaptureUnsupported;
  *p = allocate_device(g, size, nullptr, "cudaMalloc", r.id);
  return *p ? cudaSuccess : r.last_error = cudaErrorMemoryAllocation;
}

ORR_EXPORT cudaError_t cudaFree(void* p) {
  Rank& r = rank_self("cudaFree");
  if (!p)
    return cudaSuccess;
  auto it = registry().find((uintptr_t)p);
  if (it == registry().end() || !it->second.device || it->second.mapped || it->second.free_pending ||
      it->second.freed_by_owner)
    return r.last_error = cudaErrorInvalidValue;
  // cudaFree synchronises the device, as the real runtime does.
  trace::CudaCall call(r, "cudaFree");
  wait_device(r, r.device);
  if (it->second.ipc_opens) {  // other ranks still map it (CUDA IPC): it goes at their last close
    it->second.freed_by_owner = true;
    return cudaSuccess;
  }
  free_device(it);  // (what cudaMallocAsync allocated too)
  return cudaSuccess;
}

/* ---- Stream-ordered allocation: cudaMallocAsync, cudaFreeAsync and their pools ----
 *
 * An allocation is made when it is asked for (what a stream's later work sees is the same) and
 * given back when its stream reaches the free (Op::Free), as the pool gives it back to the work
 * that follows. A pool keeps no memory of its own past a free: its release threshold is kept and
 * read back, and its reserved memory is its memory in use. Neither costs simulated time, as
 * cudaMalloc does not. */
namespace orrery {

namespace {

MemPool* default_pool(Rank& r, int device) {
  static std::map<std::pair<int, int>, MemPool> pools;  // per (rank, device): a rank is a process
  MemPool& p = pools[{r.id, device}];
  p.device = device;
  return &p;
}

std::map<std::pair<int, int>, MemPool*>& current_pools() {  // cudaDeviceSetMemPool's, per (rank, device)
  static std::map<std::pair<int, int>, MemPool*> current;
  return current;
}

MemPool* current_pool(Rank& r, int device) {
  auto it = current_pools().find({r.id, device});
  return it != current_pools().end() ? it->second : default_pool(r, device);
}

bool valid_device(Rank& r, int device) { return device >= 0 && device < (int)r.gpus.size(); }

cudaError_t malloc_async(const char* fn, void** p, size_t size, MemPool* pool, cudaStream_t stream) {
  Rank& r = rank_self(fn);
  if (!p || !pool)
    return r.last_error = cudaErrorInvalidValue;
  Stream* st = resolve_stream(r, stream, fn);
  if (st->capture)
    fatal("%s in a stream capture (a graph's memory allocation node), which Orrery does not simulate", fn);
  *p = allocate_device(*r.gpus[pool->device], size, pool, fn, r.id);
  return *p ? cudaSuccess : r.last_error = cudaErrorMemoryAllocation;
}

cudaError_t free_async(const char* fn, void* p, cudaStream_t stream) {
  Rank& r = rank_self(fn);
  if (!p)
    return cudaSuccess;
  auto it = registry().find((uintptr_t)p);
  if (it == registry().end() || !it->second.pool || it->second.free_pending)
    return r.last_error = cudaErrorInvalidValue;
  Stream* st = resolve_stream(r, stream, fn);
  if (st->capture)
    fatal("%s in a stream capture (a graph's memory free node), which Orrery does not simulate", fn);
  Op op{Op::Free};
  op.free_base = (uintptr_t)p;
  if (cudaError_t e = enqueue(st, std::move(op)))
    return r.last_error = e;
  it->second.free_pending = true;
  return cudaSuccess;
}

}  // namespace

void free_in_stream_order(uintptr_t base) {
  auto it = registry().find(base);
  if (it != registry().end())
    free_device(it);
}

}  // namespace orrery

// cudaHostAlloc's flags: Portable, Mapped, WriteCombined (driver_types.h); all memory is mapped
// under unified addressing, and write-combining changes no copy's time here.
constexpr unsigned kHostAllocFlags = 0x1 | 0x2 | 0x4;

ORR_EXPORT cudaError_t cudaHostAlloc(void** p, size_t size, unsigned int flags) {
  Rank& r = rank_self("cudaHostAlloc");
  if (!p || (flags & ~kHostAllocFlags))
    return r.last_error = cudaErrorInvalidValue;
  bool fold = run_description().fold_pinned && size >= (size_t)run_description().fold_threshold;
  void* mem = allocate(size, fold, false);
  if (!mem)
    return r.last_error = cudaErrorMemoryAllocation;
  // The device current now: the one cudaPointerGetAttributes reports for it.
  Allocation a{(uintptr_t)mem, size, false, fold, &current_gpu(r)};
  a.flags = flags;
  register_allocation(a);
  *p = mem;
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaMallocHost(void** p, size_t size) { return cudaHostAlloc(p, size, 0); }

/* The copies still to fill or read pinned host memory complete before it stops being pinned
 * (cudaFreeHost, cudaHostUnregister), or they would write into memory no longer the runtime's:
 * the real runtime synchronises there too. */
static void wait_for_host_range(Rank& r, const Allocation& a, const char* fn) {
  trace::CudaCall call(r, fn);
  for (Stream* st : r.streams) {
    uint64_t last = 0, seq = st->completed;
    for (const Op& op : st->queue) {
      ++seq;
      for (const void* q : {(const void*)op.fill_dst, op.h2h_src})
        if (q && (uintptr_t)q - a.base < std::max<size_t>(a.size, 1))
          last = seq;
    }
    if (last)
      wait_for(r, st, last);
  }
}

// cudaHostRegister's flags: Portable, Mapped, IoMemory, ReadOnly (driver_types.h).
constexpr unsigned kHostRegisterPortable = 0x1, kHostRegisterMapped = 0x2, kHostRegisterIoMemory = 0x4,
                   kHostRegisterReadOnly = 0x8;

/* Pins the program's own memory: copies from and to it take the pinned paths, as from
 * cudaHostAlloc's, and it keeps its contents (it is never folded). */
ORR_EXPORT cudaError_t cudaHostRegister(void* p, size_t size, unsigned int flags) {
  Rank& r = rank_self("cudaHostRegister");
  if (!p || !size ||
      (flags & ~(kHostRegisterPortable | kHostRegisterMapped | kHostRegisterIoMemory | kHostRegisterReadOnly)))
    return r.last_error = cudaErrorInvalidValue;
  if (flags & kHostRegisterIoMemory)
    fatal("cudaHostRegister with cudaHostRegisterIoMemory (a device's I/O memory), which Orrery does not "
          "simulate");
  uintptr_t base = (uintptr_t)p;
  auto& reg = registry();
  auto next = reg.lower_bound(base);  // the first allocation at or above it
  if (find_allocation(p) || (next != reg.end() && next->second.base < base + size))
    return r.last_error = cudaErrorHostMemoryAlreadyRegistered;
  Allocation a{base, size, false, false, &current_gpu(r)};
  a.registered = true;
  a.flags = flags;
  register_allocation(a);
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaHostUnregister(void* p) {
  Rank& r = rank_self("cudaHostUnregister");
  auto it = registry().find((uintptr_t)p);
  if (!p || it == registry().end() || !it->second.registered)
    return r.last_error = cudaErrorHostMemoryNotRegistered;
  wait_for_host_range(r, it->second, "cudaHostUnregister");
  forget(it);
  return cudaSuccess;
}

/* Under unified addressing a pinned buffer's device address is its host address, for memory of
 * cudaHostAlloc and, as cudaDevAttrCanUseHostPointerForRegisteredMem says, of cudaHostRegister. */
ORR_EXPORT cudaError_t cudaHostGetDevicePointer(void** device_ptr, void* host, unsigned int flags) {
  Rank& r = rank_self("cudaHostGetDevicePointer");
  const Allocation* a = find_allocation(host);
  if (!device_ptr || flags || !a || a->device)
    return r.last_error = cudaErrorInvalidValue;
  *device_ptr = host;
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaHostGetFlags(unsigned int* flags, void* host) {
  Rank& r = rank_self("cudaHostGetFlags");
  const Allocation* a = find_allocation(host);
  if (!flags || !a || a->device)
    return r.last_error = cudaErrorInvalidValue;
  *flags = a->flags;
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaFreeHost(void* p) {
  Rank& r = rank_self("cudaFreeHost");
  if (!p)
    return cudaSuccess;
  auto it = registry().find((uintptr_t)p);
  if (it == registry().end() || it->second.device || it->second.registered)
    return r.last_error = cudaErrorInvalidValue;
  wait_for_host_range(r, it->second, "cudaFreeHost");
  release(it->second);
  forget(it);
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total) {
  Rank& r = rank_self("cudaMemGetInfo");
  if (!free_bytes || !total)
    return r.last_error = cudaErrorInvalidValue;
  Gpu& g = current_gpu(r);
  *total = g.prop.totalGlobalMem;
  *free_bytes = g.prop.totalGlobalMem - g.memory_used;
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attr, const void* p) {
  Rank& r = rank_self("cudaPointerGetAttributes");
  if (!attr)
    return r.last_error = cudaErrorInvalidValue;
  memset(attr, 0, sizeof *attr);
  const Allocation* a = find_allocation(p);
  // Device numbers as the rank sees them: with bound GPUs, its one device is 0 whatever its
  // index on the node. Memory of a device the rank cannot see is not its own.
  int device = a ? ordinal_of(r, a->gpu) : -1;
  attr->device = device >= 0 ? device : r.device;
  if (!a || (a->device && device < 0)) {
    attr->type = cudaMemoryTypeUnregistered;
    attr->hostPointer = (void*)p;  // CUDA does not check unregistered memory: the pointer given
  } else if (a->managed) {  // its host and device addresses are the same
    attr->type = cudaMemoryTypeManaged;
    attr->devicePointer = (void*)p;
    attr->hostPointer = (void*)p;
  } else if (a->device) {
    attr->type = cudaMemoryTypeDevice;
    attr->devicePointer = (void*)p;
  } else {
    attr->type = cudaMemoryTypeHost;
    attr->devicePointer = (void*)p;
    attr->hostPointer = (void*)p;
  }
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, int kind) {
  return copy("cudaMemcpy", dst, n, src, n, n, 1, kind, nullptr, true);
}
ORR_EXPORT cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, int kind, cudaStream_t s) {
  return copy("cudaMemcpyAsync", dst, n, src, n, n, 1, kind, s, false);
}
ORR_EXPORT cudaError_t cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                                    size_t height, int kind) {
  return copy("cudaMemcpy2D", dst, dpitch, src, spitch, width, height, kind, nullptr, true);
}
ORR_EXPORT cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                                         size_t height, int kind, cudaStream_t s) {
  return copy("cudaMemcpy2DAsync", dst, dpitch, src, spitch, width, height, kind, s, false);
}
// nvcc --default-stream per-thread: on the per-thread default stream, under the calls' own names
ORR_EXPORT cudaError_t cudaMemcpy_ptds(void* dst, const void* src, size_t n, int kind) {
  return copy("cudaMemcpy", dst, n, src, n, n, 1, kind, cudaStreamPerThread, true);
}
ORR_EXPORT cudaError_t cudaMemcpyAsync_ptsz(void* dst, const void* src, size_t n, int kind, cudaStream_t s) {
  return copy("cudaMemcpyAsync", dst, n, src, n, n, 1, kind, per_thread(s), false);
}
ORR_EXPORT cudaError_t cudaMemcpy2D_ptds(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                                         size_t height, int kind) {
  return copy("cudaMemcpy2D", dst, dpitch, src, spitch, width, height, kind, cudaStreamPerThread, true);
}
ORR_EXPORT cudaError_t cudaMemcpy2DAsync_ptsz(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                                              size_t height, int kind, cudaStream_t s) {
  return copy("cudaMemcpy2DAsync", dst, dpitch, src, spitch, width, height, kind, per_thread(s), false);
}
/* ---- __device__ and __constant__ variables ----
 * A variable lives in the module CUDA loads on each device a process uses: its instance on a
 * device is made there, device memory of the variable's size counted in the device's memory in
 * use, at the first call that names it on that device (the real runtime loads the module when
 * the context starts; the instances are never freed, as a module's are not before the process
 * ends). Each rank's copy of the program registers its own variables (its own host shadows), so
 * ranks sharing a GPU have an instance each, as processes do. The copies to and from a variable
 * are copies to and from its instance: the same paths, times and synchronisation as cudaMemcpy's
 * and cudaMemcpyAsync's. */
namespace {
struct Symbol {
  size_t size = 0;
  std::map<const Gpu*, void*> instances;
};
std::map<const void*, Symbol>& symbols() {
  static std::map<const void*, Symbol> s;
  return s;
}
}  // namespace

void orrery::register_symbol(const void* host_var, size_t size) { symbols()[host_var] = Symbol{size, {}}; }

/* The instance of `symbol` on the rank's current device, and its size: cudaErrorInvalidSymbol for
 * a pointer that is no registered variable (a device pointer, a plain host variable). */
static cudaError_t symbol_instance(Rank& r, const void* symbol, const char* fn, char*& instance, size_t& size) {
  auto it = symbols().find(symbol);
  if (it == symbols().end())
    return cudaErrorInvalidSymbol;
  Gpu& g = current_gpu(r);
  void*& mem = it->second.instances[&g];
  if (!mem && !(mem = allocate_device(g, it->second.size, nullptr, fn, r.id)))
    return cudaErrorMemoryAllocation;
  instance = (char*)mem;
  size = it->second.size;
  return cudaSuccess;
}

/* A copy of `count` bytes between host or device memory `other` and a variable's instance, at
 * `offset` into it (to_symbol: into the variable). Its direction must name the variable's side as
 * device memory: HostToDevice or DeviceToDevice into it, DeviceToHost or DeviceToDevice out of
 * it, or Default. */
static cudaError_t copy_symbol(const char* fn, bool to_symbol, const void* symbol, void* other, size_t count,
                               size_t offset, int kind, cudaStream_t stream, bool sync) {
  Rank& r = rank_deferring(fn);  // as copy(): the asynchronous forms do not wait out the rank's lead
  char* instance;
  size_t size;
  if (cudaError_t e = symbol_instance(r, symbol, fn, instance, size))
    return r.last_error = e;
  bool direction = kind == cudaMemcpyDeviceToDevice || kind == cudaMemcpyDefault ||
                   kind == (to_symbol ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost);
  if (!direction)
    return r.last_error = cudaErrorInvalidMemcpyDirection;
  if (offset > size || count > size - offset)
    return r.last_error = cudaErrorInvalidValue;
  if (to_symbol)
    return copy(fn, instance + offset, count, other, count, count, 1, kind, stream, sync);
  return copy(fn, other, count, instance + offset, count, count, 1, kind, stream, sync);
}

ORR_EXPORT cudaError_t cudaGetSymbolAddress(void** dev_ptr, const void* symbol) {
  Rank& r = rank_self("cudaGetSymbolAddress");
  char* instance;
  size_t size;
  if (!dev_ptr)
    return r.last_error = cudaErrorInvalidValue;
  if (cudaError_t e = symbol_instance(r, symbol, "cudaGetSymbolAddress", instance, size))
    return r.last_error = e;
  *dev_ptr = instance;
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaGetSymbolSize(size_t* size, const void* symbol) {
  Rank& r = rank_self("cudaGetSymbolSize");
  auto it = symbols().find(symbol);
  if (!size)
    return r.last_error = cudaErrorInvalidValue;
  if (it == symbols().end())
    return r.last_error = cudaErrorInvalidSymbol;
  *size = it->second.size;
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaMemcpyToSymbol(const void* symbol, const void* src, size_t count, size_t offset,
                                          int kind) {
  return copy_symbol("cudaMemcpyToSymbol", true, symbol, (void*)src, count, offset, kind, nullptr, true);
}
ORR_EXPORT cudaError_t cudaMemcpyFromSymbol(void* dst, const void* symbol, size_t count, size_t offset, int kind) {
  return copy_symbol("cudaMemcpyFromSymbol", false, symbol, dst, count, offset, kind, nullptr, true);
}
ORR_EXPORT cudaError_t cudaMemcpyToSymbolAsync(const void* symbol, const void* src, size_t count, size_t offset,
                                               int kind, cudaStream_t stream) {
  return copy_symbol("cudaMemcpyToSymbolAsync", true, symbol, (void*)src, count, offset, kind, stream, false);
}
ORR_EXPORT cudaError_t cudaMemcpyFromSymbolAsync(void* dst, const void* symbol, size_t count, size_t offset,
                                                 int kind, cudaStream_t stream) {
  return copy_symbol("cudaMemcpyFromSymbolAsync", false, symbol, dst, count, offset, kind, stream, false);
}
// nvcc --default-stream per-thread: on the per-thread default stream, under the calls' own names
ORR_EXPORT cudaError_t cudaMemcpyToSymbol_ptds(const void* symbol, const void* src, size_t count, size_t offset,
                                               int kind) {
  return copy_symbol("cudaMemcpyToSymbol", true, symbol, (void*)src, count, offset, kind, cudaStreamPerThread, true);
}
ORR_EXPORT cudaError_t cudaMemcpyFromSymbol_ptds(void* dst, const void* symbol, size_t count, size_t offset,
                                                 int kind) {
  return copy_symbol("cudaMemcpyFromSymbol", false, symbol, dst, count, offset, kind, cudaStreamPerThread, true);
}
ORR_EXPORT cudaError_t cudaMemcpyToSymbolAsync_ptsz(const void* symbol, const void* src, size_t count,
                                                    size_t offset, int kind, cudaStream_t stream) {
  return copy_symbol("cudaMemcpyToSymbolAsync", true, symbol, (void*)src, count, offset, kind, per_thread(stream),
                     false);
}
ORR_EXPORT cudaError_t cudaMemcpyFromSymbolAsync_ptsz(void* dst, const void* symbol, size_t count, size_t offset,
                                                      int kind, cudaStream_t stream) {
  return copy_symbol("cudaMemcpyFromSymbolAsync", false, symbol, dst, count, offset, kind, per_thread(stream),
                     false);
}

ORR_EXPORT cudaError_t cudaMemcpyPeer(void* dst, int dst_dev, const void* src, int src_dev, size_t n) {
  // CUDA: serialised with all pending and future work of the current, source and
  // destination devices (cudaMemcpyPeerAsync is not)
  Rank& r = rank_self("cudaMemcpyPeer");
  for (int device : {dst_dev, src_dev})
    if (device < 0 || device >= (int)r.gpus.size())
      return r.last_error = cudaErrorInvalidDevice;
  return copy("cudaMemcpyPeer", dst, n, src, n, n, 1, cudaMemcpyDeviceToDevice, nullptr, true, {src_dev, dst_dev},
              dst_dev, src_dev);
}
ORR_EXPORT cudaError_t cudaMemcpyPeerAsync(void* dst, int dst_dev, const void* src, int src_dev, size_t n,
                                           cudaStream_t s) {
  Rank& r = rank_self("cudaMemcpyPeerAsync");
  for (int device : {dst_dev, src_dev})
    if (device < 0 || device >= (int)r.gpus.size())
      return r.last_error = cudaErrorInvalidDevice;
  return copy("cudaMemcpyPeerAsync", dst, n, src, n, n, 1, cudaMemcpyDeviceToDevice, s, false, {}, dst_dev, src_dev);
}
ORR_EXPORT cudaError_t cudaMemset(void* p, int value, size_t n) {
  return memset_device("cudaMemset", p, value, n, nullptr);
}
ORR_EXPORT cudaError_t cudaMemsetAsync(void* p, int value, size_t n, cudaStream_t s) {
  return memset_device("cudaMemsetAsync", p, value, n, s);
}
ORR_EXPORT cudaError_t cudaMemset_ptds(void* p, int value, size_t n) {
  return memset_device("cudaMemset", p, value, n, cudaStreamPerThread);
}
ORR_EXPORT cudaError_t cudaMemsetAsync_ptsz(void* p, int value, size_t n, cudaStream_t s) {
  return memset_device("cudaMemsetAsync", p, value, n, per_thread(s));
}

/* ---- Stream-ordered allocation (MemPool, above) ---- */

ORR_EXPORT cudaError_t cudaMallocAsync(void** p, size_t size, cudaStream_t stream) {
  Rank& r = rank_self("cudaMallocAsync");
  return malloc_async("cudaMallocAsync", p, size, current_pool(r, r.device), stream);
}

ORR_EXPORT cudaError_t cudaMallocAsync_ptsz(void** p, size_t size, cudaStream_t stream) {
  Rank& r = rank_self("cudaMallocAsync");
  return malloc_async("cudaMallocAsync", p, size, current_pool(r, r.device), per_thread(stream));
}

ORR_EXPORT cudaError_t cudaMallocFromPoolAsync(void** p, size_t size, cudaMemPool_t pool, cudaStream_t stream) {
  return malloc_async("cudaMallocFromPoolAsync", p, size, (MemPool*)pool, stream);
}

ORR_EXPORT cudaError_t cudaMallocFromPoolAsync_ptsz(void** p, size_t size, cudaMemPool_t pool,
                                                    cudaStream_t stream) {
  return malloc_async("cudaMallocFromPoolAsync", p, size, (MemPool*)pool, per_thread(stream));
}

ORR_EXPORT cudaError_t cudaFreeAsync(void* p, cudaStream_t stream) { return free_async("cudaFreeAsync", p, stream); }

ORR_EXPORT cudaError_t cudaFreeAsync_ptsz(void* p, cudaStream_t stream) {
  return free_async("cudaFreeAsync", p, per_thread(stream));
}

ORR_EXPORT cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device) {
  Rank& r = rank_self("cudaDeviceGetDefaultMemPool");
  if (!pool)
    return r.last_error = cudaErrorInvalidValue;
  if (!valid_device(r, device))
    return r.last_error = cudaErrorInvalidDevice;
  *pool = (cudaMemPool_t)default_pool(r, device);
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaDeviceGetMemPool(cudaMemPool_t* pool, int device) {
  Rank& r = rank_self("cudaDeviceGetMemPool");
  if (!pool)
    return r.last_error = cudaErrorInvalidValue;
  if (!valid_device(r, device))
    return r.last_error = cudaErrorInvalidDevice;
  *pool = (cudaMemPool_t)current_pool(r, device);
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaDeviceSetMemPool(int device, cudaMemPool_t pool) {
  Rank& r = rank_self("cudaDeviceSetMemPool");
  if (!valid_device(r, device))
    return r.last_error = cudaErrorInvalidDevice;
  if (!pool || ((MemPool*)pool)->device != device)  // a pool of another device
    return r.last_error = cudaErrorInvalidValue;
  current_pools()[{r.id, device}] = (MemPool*)pool;
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaMemPoolCreate(cudaMemPool_t* pool, const cudaMemPoolProps* props) {
  Rank& r = rank_self("cudaMemPoolCreate");
  if (!pool || !props || props->allocType != 1 /* pinned */ || props->location.type != 1 /* a device */)
    return r.last_error = cudaErrorInvalidValue;
  if (!valid_device(r, props->location.id))
    return r.last_error = cudaErrorInvalidDevice;
  if (props->handleTypes != 0)
    fatal("cudaMemPoolCreate with shareable handle types (%d): pools shared between processes are not simulated",
          props->handleTypes);
  MemPool* p = new MemPool;  // the program destroys it (cudaMemPoolDestroy), or it lasts the run
  p->device = props->location.id;
  p->made_by_program = true;
  *pool = (cudaMemPool_t)p;
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaMemPoolDestroy(cudaMemPool_t pool) {
  Rank& r = rank_self("cudaMemPoolDestroy");
  MemPool* p = (MemPool*)pool;
  if (!p || !p->made_by_program)  // a device's default pool cannot be destroyed
    return r.last_error = cudaErrorInvalidValue;
  for (auto& [key, current] : current_pools())
    if (current == p)
      current = default_pool(r, key.second);
  if (p->used)  // allocations still out: CUDA keeps the pool until they are freed
    return cudaSuccess;
  delete p;
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, int attr, void* value) {
  Rank& r = rank_self("cudaMemPoolSetAttribute");
  MemPool* p = (MemPool*)pool;
  if (!p || !value)
    return r.last_error = cudaErrorInvalidValue;
  if (attr >= cudaMemPoolReuseFollowEventDependencies && attr <= cudaMemPoolReuseAllowInternalDependencies)
    p->reuse[attr] = *(int*)value;
  else if (attr == cudaMemPoolAttrReleaseThreshold)
    p->release_threshold = *(uint64_t*)value;
  else if ((attr == cudaMemPoolAttrReservedMemHigh || attr == cudaMemPoolAttrUsedMemHigh) && *(uint64_t*)value == 0)
    p->used_high = p->used;  // the high-water marks may only be reset
  else
    return r.last_error = cudaErrorInvalidValue;
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, int attr, void* value) {
  Rank& r = rank_self("cudaMemPoolGetAttribute");
  MemPool* p = (MemPool*)pool;
  if (!p || !value)
    return r.last_error = cudaErrorInvalidValue;
  if (attr >= cudaMemPoolReuseFollowEventDependencies && attr <= cudaMemPoolReuseAllowInternalDependencies)
    *(int*)value = p->reuse[attr];
  else if (attr == cudaMemPoolAttrReleaseThreshold)
    *(uint64_t*)value = p->release_threshold;
  else if (attr == cudaMemPoolAttrReservedMemCurrent || attr == cudaMemPoolAttrUsedMemCurrent)
    *(uint64_t*)value = p->used;  // the pool keeps no memory past a free: reserved is what is in use
  else if (attr == cudaMemPoolAttrReservedMemHigh || attr == cudaMemPoolAttrUsedMemHigh)
    *(uint64_t*)value = p->used_high;
  else
    return r.last_error = cudaErrorInvalidValue;
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaMemPoolTrimTo(cudaMemPool_t pool, size_t) {
  Rank& r = rank_self("cudaMemPoolTrimTo");
  if (!pool)
    return r.last_error = cudaErrorInvalidValue;
  return cudaSuccess;  // it keeps nothing to trim
}

/* ---- CUDA IPC of device memory ----
 * Every rank is in one process here, so a handle names the allocation itself (its base, size and
 * serial: a freed and reallocated address is another allocation) and opening it gives the same
 * address: what another rank does with it is done on the owner's GPU, a copy to its own GPU being a
 * peer copy on the platform's route between them. Handles work within a node, as CUDA's do. */

namespace {

constexpr uint32_t kIpcMemMagic = 0x4f495043;  // "CPIO"

struct IpcMemHandle {
  uint32_t magic;
  int32_t owner;
  uint64_t base, size, serial;
};
static_assert(sizeof(IpcMemHandle) <= sizeof(cudaIpcMemHandle_t));

}  // namespace

ORR_EXPORT cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t* handle, void* p) {
  Rank& r = rank_self("cudaIpcGetMemHandle");
  auto it = registry().find((uintptr_t)p);  // the base of a cudaMalloc allocation (not managed memory's)
  if (!handle || it == registry().end() || !it->second.device || it->second.mapped || it->second.pool ||
      it->second.managed || it->second.freed_by_owner)
    return r.last_error = cudaErrorInvalidValue;
  IpcMemHandle h{kIpcMemMagic, r.id, it->second.base, it->second.size, it->second.serial};
  memset(handle, 0, sizeof *handle);
  memcpy(handle, &h, sizeof h);
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaIpcOpenMemHandle(void** p, cudaIpcMemHandle_t handle, unsigned int flags) {
  Rank& r = rank_self("cudaIpcOpenMemHandle");
  IpcMemHandle h;
  memcpy(&h, &handle, sizeof h);
  if (!p || flags != cudaIpcMemLazyEnablePeerAccess || h.magic != kIpcMemMagic)
    return r.last_error = cudaErrorInvalidValue;
  auto it = registry().find((uintptr_t)h.base);
  if (it == registry().end() || it->second.serial != h.serial || it->second.freed_by_owner)
    return r.last_error = cudaErrorInvalidResourceHandle;  // freed since the handle was made
  if (h.owner == r.id)  // a process cannot open its own handle
    return r.last_error = cudaErrorInvalidValue;
  if (it->second.gpu->node != current_gpu(r).node)  // another node's memory
    return r.last_error = cudaErrorInvalidResourceHandle;
  it->second.ipc_opens++;
  ipc_opened()[{r.id, (uintptr_t)h.base}]++;
  *p = (void*)h.base;
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaIpcCloseMemHandle(void* p) {
  Rank& r = rank_self("cudaIpcCloseMemHandle");
  auto opened = ipc_opened().find({r.id, (uintptr_t)p});
  if (opened == ipc_opened().end())
    return r.last_error = cudaErrorInvalidValue;
  if (--opened->second == 0)
    ipc_opened().erase(opened);
  auto it = registry().find((uintptr_t)p);
  if (it != registry().end() && --it->second.ipc_opens == 0 && it->second.freed_by_owner)
    free_device(it);
  return cudaSuccess;
}

/* ---- Managed memory: cudaMallocManaged, its prefetches, advice and stream attachments ----
 *
 * The pages of managed memory move between host and device memory when one side touches what the
 * other holds (on demand, in batches of faults) or when the program prefetches them. Skeleton mode
 * sees neither side's accesses (kernels do not run; the host's loads and stores are not calls), so
 * it cannot say what moves when. By default (`--managed refuse`) the first allocation stops the run
 * naming it. Under `--managed resident` an allocation is memory of the device current when it was
 * made, and stays there:
 *   - copies, memsets and MPI messages from or to it take device memory's paths and times, and
 *     cudaMemGetInfo counts it from the allocation on;
 *   - the host's own code reads and writes it as real memory, never folded (a memset writes its
 *     value there too, at the call: zeros over whole pages give them back, see fill_managed);
 *   - prefetches, advice and stream attachments are checked as CUDA checks them and move nothing;
 *     a prefetch to another device stops the run, since the memory would leave its device;
 *   - an allocation beyond its device's free memory stops the run: CUDA would oversubscribe the
 *     device, evicting pages to the host as others are touched.
 * A __managed__ variable is such an allocation too, made where the host's code first reaches it
 * (__cudaInitModule, cudart/launch.cpp) and holding the initial value of the device code's variable.
 * What the run would pay for migrations is not in its times; the report's "managed" rows (results.json
 * ranks[].managed) count what was allocated, prefetched and advised, and the summary says so. */

namespace orrery {
namespace {

/* Stops the run unless managed memory is taken as resident; `what` names what asked for it. */
void require_resident(const Rank& r, const std::string& what) {
  if (run_description().managed == ManagedPolicy::Resident)
    return;
  fatal("%s on rank %d: managed memory moves between host and device as either side touches it, which skeleton "
        "mode cannot see; `orrery run --managed resident` takes it as memory that stays on the device it was "
        "allocated on, its migrations not simulated (docs/skeleton-mode.md, \"Managed memory\")",
        what.c_str(), r.id);
}

void count_managed(Rank& r, const char* fn, size_t bytes) {
  Tally& t = r.stats.managed[fn];
  t.count++;
  t.bytes += bytes;
}

/* The managed allocation of the rank that holds [p, p + n) (n = 0: p), or null. */
const Allocation* managed_range(const Rank& r, const void* p, size_t n) {
  const Allocation* a = p ? find_allocation(p) : nullptr;
  if (!a || !a->managed || ordinal_of(r, a->gpu) < 0 || !inside(*a, p, n))
    return nullptr;
  return a;
}

/* A location of a prefetch or of advice: cudaErrorInvalidDevice for a device the rank does not
 * have, cudaErrorInvalidValue for a type that is none of CUDA's. */
cudaError_t check_location(const Rank& r, const cudaMemLocation& loc) {
  switch (loc.type) {
    case cudaMemLocationTypeDevice:
      return loc.id >= 0 && loc.id < (int)r.gpus.size() ? cudaSuccess : cudaErrorInvalidDevice;
    case cudaMemLocationTypeHost:
    case cudaMemLocationTypeHostNumaCurrent: return cudaSuccess;  // the id is ignored
    case cudaMemLocationTypeHostNuma: return loc.id >= 0 ? cudaSuccess : cudaErrorInvalidValue;
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t prefetch(const char* fn, const void* p, size_t count, cudaMemLocation loc, unsigned flags,
                     cudaStream_t stream) {
  Rank& r = rank_deferring(fn);  // enqueues nothing: what the stream runs does not change
  const Allocation* a = managed_range(r, p, count);
  if (!a || flags)  // flags: "for future use, must be zero now"
    return r.last_error = cudaErrorInvalidValue;
  if (cudaError_t e = check_location(r, loc))
    return r.last_error = e;
  resolve_stream(r, stream, fn);  // a stream the rank does not have stops the run, as for a copy
  if (loc.type == cudaMemLocationTypeDevice && r.gpus[loc.id] != a->gpu)
    fatal("%s on rank %d: a prefetch of managed memory of device %d to device %d; under --managed resident it "
          "stays on the device it was allocated on, and migrations between devices are not simulated",
          fn, r.id, ordinal_of(r, a->gpu), loc.id);
  count_managed(r, "cudaMemPrefetchAsync", count);
  return cudaSuccess;
}

cudaError_t attach(const char* fn, cudaStream_t stream, void* p, size_t length, unsigned flags) {
  Rank& r = rank_deferring(fn);
  const Allocation* a = managed_range(r, p, 0);
  // the whole allocation (length 0 or its size, from its start), to one of the three associations
  if (!a || (length && ((uintptr_t)p != a->base || length != a->size)) ||
      (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost && flags != cudaMemAttachSingle))
    return r.last_error = cudaErrorInvalidValue;
  resolve_stream(r, stream, fn);
  count_managed(r, "cudaStreamAttachMemAsync", a->size);
  return cudaSuccess;
}

/* `size` bytes of managed memory on the rank's current device, counted under `what` (the report's
 * row: "cudaMallocManaged", "__managed__"). */
void* allocate_managed(Rank& r, size_t size, unsigned flags, const char* what) {
  Gpu& g = current_gpu(r);
  if (size > g.prop.totalGlobalMem - g.memory_used)
    fatal("%s(%zu) on rank %d: device %d has %zu bytes free; CUDA would oversubscribe it, evicting managed "
          "pages to the host as others are touched, which --managed resident does not simulate",
          what, size, r.id, r.device, (size_t)(g.prop.totalGlobalMem - g.memory_used));
  // Pages the program's code never touches cost the host nothing (zero pages, on demand).
  void* mem = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mem == MAP_FAILED)
    fatal("%s(%zu) on rank %d: the host could not reserve the memory (%s)", what, size, r.id, strerror(errno));
  Allocation a{(uintptr_t)mem, size, true, false, &g};
  a.managed = a.anonymous = true;
  a.flags = flags;
  register_allocation(a);
  g.memory_used += size;
  count_managed(r, what, size);
  return mem;
}

}  // namespace

void* managed_variable(const void* fatbin, const char* name, size_t size) {
  Rank& r = rank_self("__managed__ variable");
  require_resident(r, std::string("__managed__ variable ") + name);
  const cudaDeviceProp& p = current_gpu(r).prop;
  std::vector<unsigned char> initial;
  std::string why;
  if (!read_variable(fatbin, p.major, p.minor, name, size, initial, why))
    fatal("__managed__ variable %s on rank %d: its initial value cannot be read: %s", name, r.id, why.c_str());
  void* mem = allocate_managed(r, size, cudaMemAttachGlobal, "__managed__");
  memcpy(mem, initial.data(), size);
  return mem;
}

}  // namespace orrery

ORR_EXPORT cudaError_t cudaMallocManaged(void** p, size_t size, unsigned int flags) {
  Rank& r = rank_self("cudaMallocManaged");
  require_resident(r, "the program called cudaMallocManaged");
  if (!p || !size || (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost))
    return r.last_error = cudaErrorInvalidValue;
  if (refuse_unsafe(r))  // as cudaMalloc
    return r.last_error = cudaErrorStreamCaptureUnsupported;
  *p = allocate_managed(r, size, flags, "cudaMallocManaged");
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaMemPrefetchAsync(const void* p, size_t count, cudaMemLocation location, unsigned int flags,
                                            cudaStream_t stream) {
  return prefetch("cudaMemPrefetchAsync", p, count, location, flags, stream);
}
ORR_EXPORT cudaError_t cudaMemPrefetchAsync_ptsz(const void* p, size_t count, cudaMemLocation location,
                                                 unsigned int flags, cudaStream_t stream) {
  return prefetch("cudaMemPrefetchAsync", p, count, location, flags, per_thread(stream));
}

ORR_EXPORT cudaError_t cudaMemAdvise(const void* p, size_t count, int advice, cudaMemLocation location) {
  Rank& r = rank_deferring("cudaMemAdvise");  // no time, no wait
  if (!managed_range(r, p, count) || advice < cudaMemAdviseSetReadMostly || advice > cudaMemAdviseUnsetAccessedBy)
    return r.last_error = cudaErrorInvalidValue;
  // the read-mostly advice and the unsetting of a preferred location name no location
  bool located = advice == cudaMemAdviseSetPreferredLocation || advice == cudaMemAdviseSetAccessedBy ||
                 advice == cudaMemAdviseUnsetAccessedBy;
  if (located)
    if (cudaError_t e = check_location(r, location))
      return r.last_error = e;
  count_managed(r, "cudaMemAdvise", count);
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaStreamAttachMemAsync(cudaStream_t stream, void* p, size_t length, unsigned int flags) {
  return attach("cudaStreamAttachMemAsync", stream, p, length, flags);
}
ORR_EXPORT cudaError_t cudaStreamAttachMemAsync_ptsz(cudaStream_t stream, void* p, size_t length,
                                                     unsigned int flags) {
  return attach("cudaStreamAttachMemAsync", per_thread(stream), p, length, flags);
}
