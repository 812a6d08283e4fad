/* MPI wrappers: each rank's simulated time per MPI call, through PMPI.
 *
 * The shim is found before libsimgrid when a rank's program copy resolves its
 * symbols (it is the program's libcudart), and SMPI declares MPI_* weak, so
 * these definitions take the calls and forward them to SMPI's PMPI_*. Besides
 * timing, they apply the machine's per-path protocol (eager threshold,
 * software overheads, gaps between sends) and send blocking host-buffer calls
 * along host routes.
 * Fortran programs reach them too: SMPI's Fortran bindings (mpi_send_ ...) convert their
 * handles and call MPI_Send through libsimgrid's PLT, which resolves in the launcher's global
 * scope, where `orrery run` preloads this library before libsimgrid (orrery/run/launch.py). Two
 * of SMPI's own PMPI functions call a public entry point the same way: PMPI_Sendrecv_replace
 * calls MPI_Sendrecv (forwarded untimed below: its caller times it) and PMPI_Init_thread
 * calls MPI_Init (which only registers the rank, once).
 * Device buffers need no translation: messages sent from folded device memory
 * carry no data (memory.cpp's copy callback). */
#include "core/runtime.hpp"
#include "core/trace.hpp"

#include <map>
#include <unordered_map>

#include <smpi/smpi.h>

#include "mpi/mpi-ext.h"  // the extension rows' declarations, which SMPI's mpi.h lacks

#include <dlfcn.h>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <vector>

using namespace orrery;

static void stand(Rank& r, bool at_process, const Gpu* gpu = nullptr);

namespace {
/* Times one MPI call of the calling rank, which then stands next to its GPU again, and counts
 * the bytes it moves (docs/running.md, results.json: what a call's bytes are). While the call runs the
 * rank is in it: a deadlock names the call, its peer and tag. */
class MpiScope {
 public:
  explicit MpiScope(const char* name, double bytes = 0, int peer = Rank::kNoPeer, int tag = Rank::kNoPeer,
                    HostState kind = HostState::PointToPoint)
      : rank_(rank_deferring(name)), name_(name), t0_(host_now(rank_)), bytes_((uint64_t)bytes),
        outer_(rank_.in_mpi) {
    host_enter(rank_, kind);
    rank_.in_mpi = Rank::MpiCall{name, t0_, bytes_, peer, tag};
    if (trace::on())
      rank_.in_mpi.call = trace::mpi_begin(rank_);
  }
  ~MpiScope() {
    stand(rank_, false);
    if (trace::on())
      trace::mpi_end(rank_, rank_.in_mpi);
    Tally& t = rank_.stats.mpi[name_];
    t.count++;
    t.bytes += bytes_;
    double t1 = host_now(rank_);  // its receive overheads included, not yet waited out
    t.time_s += t1 - t0_;
    rank_.stats.comm.add(t0_, t1);
    rank_.in_mpi = outer_;
    host_leave(rank_);
    mpi_call_left(rank_);
  }
  Rank& rank() { return rank_; }
  void add_bytes(double bytes) {  // a call whose bytes are known once it runs (MPI_Start)
    bytes_ += (uint64_t)bytes;
    rank_.in_mpi.bytes = bytes_;
  }

 private:
  Rank& rank_;
  const char* name_;
  double t0_;
  uint64_t bytes_;
  Rank::MpiCall outer_;
};
}  // namespace

/* Where a rank's messages start and end: each end of every message is pinned
 * at the host its rank stood on when it posted its side (liborrery_smpi.so,
 * interpose/smpi_pins.cpp). So an MPI call stands where the data it moves is:
 * at the rank's process in host memory (its host endpoint) for host buffers,
 * next to its GPU for device memory, and a point-to-point call that moves both
 * kinds (MPI_Sendrecv) stands at each buffer as it posts its side. Whatever
 * else is pending, whenever the peer posts, each point-to-point message takes
 * its buffers' route. A collective stands next to the GPU if any of its
 * buffers is device memory, and its messages all take the route of where it
 * stands: one over buffers of both kinds sends its host data along the GPU's
 * route; each such call is counted and the run's summary warns of them. A call
 * without buffers (a barrier, a wait) stands next to the GPU, and so does a rank
 * between calls, where MPI calls the shim does not wrap run. */
/* The GPU whose memory a buffer is, or null for host memory (and MPI_IN_PLACE). */
static const Gpu* gpu_of(const void* b) {
  const Allocation* a = b == MPI_IN_PLACE ? nullptr : find_allocation(b);
  return a && a->device ? a->gpu : nullptr;
}
static bool is_device(const void* b) { return gpu_of(b) != nullptr; }
static bool is_host_data(const void* b) { return b && b != MPI_IN_PLACE && !is_device(b); }
static bool any_device(std::initializer_list<const void*> buffers) {
  for (const void* b : buffers)
    if (is_device(b))
      return true;
  return false;
}

/* Where rank r stands for a call: at its process (`at_process`, host data), else next to `gpu`, the
 * GPU whose memory the call's device data is in, which need not be the one the rank runs next to
 * (ranks that share a GPU, a rank that changed device): its messages start and end there, so two
 * ranks' buffers on one GPU meet in its memory; without either, next to its own GPU. */
static sg4::Host* place_of(const Rank& r, bool at_process, const Gpu* gpu) {
  return at_process && r.cpu ? r.cpu : gpu ? gpu->message_end : r.device_end;
}
/* Where a call on buffer `b` of rank r stands. */
static sg4::Host* place_of_buffer(const Rank& r, const void* b) {
  const Gpu* gpu = gpu_of(b);
  return place_of(r, !gpu, gpu);
}
static void stand_on(sg4::Host* where) {  // the calling rank
  if (sg4::this_actor::get_host() != where)
    sg4::this_actor::set_host(where);
}
static void stand(Rank& r, bool at_process, const Gpu* gpu) { stand_on(place_of(r, at_process, gpu)); }
/* Where a one-sided message (MPI_Put, MPI_Get, MPI_Accumulate...) starts or ends: at its buffer
 * `b` of the rank whose actor is `pid`, where a call on that buffer would stand (liborrery_smpi.so
 * pins both ends of each, smpi_pins.cpp). */
static sg4::Host* rma_end(const void* b, long pid) {
  const Rank* r = rank_of_actor(pid);
  return r ? place_of_buffer(*r, b) : nullptr;
}
void orrery::install_rma_ends() {
  using Where = sg4::Host* (*)(const void*, long);
  auto on_rma_end = reinterpret_cast<void (*)(Where)>(dlsym(RTLD_DEFAULT, "orrery_smpi_on_rma_end"));
  if (!on_rma_end)
    fatal("liborrery_smpi.so has no orrery_smpi_on_rma_end: it is not this Orrery's");
  on_rma_end(rma_end);
}

/* Stands a rank where one buffer is. */
static void stand_at(Rank& r, const void* b) { stand_on(place_of_buffer(r, b)); }

/* Stands a rank for one MPI call. `per_buffer`: the call stands at each buffer as it posts
 * that buffer's message (point-to-point), so buffers of both kinds in it are not counted. */
static void place(Rank& r, std::initializer_list<const void*> buffers, bool per_buffer = false) {
  bool own_device = any_device(buffers), own_host = false;
  const Gpu* gpu = nullptr;
  for (const void* b : buffers) {
    own_host = own_host || is_host_data(b);
    gpu = gpu ? gpu : gpu_of(b);
  }
  if (own_device && own_host && !per_buffer)
    r.stats.mixed_placements++;
  stand(r, buffers.size() > 0 && !own_device, gpu);
}

/* A non-blocking request counts as communication from its post until the
 * wait or test that sees it complete. */
static void posted(Rank& r, MPI_Request rq) {
  if (rq != MPI_REQUEST_NULL)
    r.requests[(const void*)rq] = host_now(r);
}
static void completed(Rank& r, MPI_Request rq) {
  auto it = r.requests.find((const void*)rq);
  if (it == r.requests.end())
    return;
  r.collective_requests.erase((const void*)rq);
  r.stats.comm.add(it->second, host_now(r));
  r.requests.erase(it);
}

/* A completion call that completes a non-blocking collective's request waits in a collective
 * (the term breakdown, core/terms.cpp), else in point-to-point communication. */
static void completes(Rank& r, const MPI_Request* rqs, int n) {
  for (int i = 0; i < n; i++)
    if (r.collective_requests.count((const void*)rqs[i])) {
      host_relabel(r, HostState::Collective);
      return;
    }
}

static double message_bytes(int count, MPI_Datatype type) {
  int size = 0;
  PMPI_Type_size(type, &size);
  return (double)count * size;
}

static int comm_size(MPI_Comm comm) {
  int n = 1;
  PMPI_Comm_size(comm, &n);
  return n;
}
static int total_count(const int* counts, MPI_Comm comm) {  // a reduce-scatter's whole vector
  int total = 0;
  for (int i = 0, n = comm_size(comm); i < n; i++)
    total += counts[i];
  return total;
}

/* The bytes of a collective's send buffer at this rank (count x type size, summed over its
 * blocks); MPI_IN_PLACE: the block of the receive buffer that stands for it. */
static int comm_rank(MPI_Comm comm) {
  int me = 0;
  PMPI_Comm_rank(comm, &me);
  return me;
}
static double own_block(const void* sbuf, int scount, MPI_Datatype stype, int rcount, MPI_Datatype rtype) {
  return sbuf == MPI_IN_PLACE ? message_bytes(rcount, rtype) : message_bytes(scount, stype);
}
static double own_block_v(const void* sbuf, int scount, MPI_Datatype stype, const int* rcounts,
                          MPI_Datatype rtype, MPI_Comm comm) {
  return sbuf == MPI_IN_PLACE ? message_bytes(rcounts[comm_rank(comm)], rtype) : message_bytes(scount, stype);
}
// away from the root a scatter reads no send buffer: the block the rank receives
static double scatter_bytes(int scount, MPI_Datatype stype, int rcount, MPI_Datatype rtype, int root,
                            MPI_Comm comm) {
  return comm_rank(comm) == root ? comm_size(comm) * message_bytes(scount, stype) : message_bytes(rcount, rtype);
}
static double alltoallv_bytes(const void* sbuf, const int* scounts, MPI_Datatype stype, const int* rcounts,
                              MPI_Datatype rtype, MPI_Comm comm) {
  bool in_place = sbuf == MPI_IN_PLACE;
  return message_bytes(total_count(in_place ? rcounts : scounts, comm), in_place ? rtype : stype);
}

/* A peer or tag as the report names it: a rank of MPI_COMM_WORLD, any, or none. */
static int world_of(int peer, MPI_Comm comm);
static int peer_of(int peer, MPI_Comm comm) {
  if (peer == MPI_ANY_SOURCE)
    return Rank::kAnyPeer;
  int world = peer < 0 ? -1 : world_of(peer, comm);
  return world < 0 ? Rank::kNoPeer : world;
}
static int tag_of(int tag) { return tag == MPI_ANY_TAG ? Rank::kAnyPeer : tag < 0 ? Rank::kNoPeer : tag; }

/* ---- what the trace pairs messages by (core/trace.hpp) ----
 * SMPI matches a message on its communicator's id (SimGrid 3.32's Comm::id(), called here as
 * smpi_pins.cpp calls SMPI's members: the object is the first argument under the Itanium ABI).
 * MPI_COMM_WORLD is SMPI's placeholder for each rank's own world communicator, not an object. */
int smpi_comm_id(const simgrid::smpi::Comm* comm) __asm__("_ZNK7simgrid4smpi4Comm2idEv");
static int comm_id(MPI_Comm comm) { return comm == MPI_COMM_WORLD ? -1 : smpi_comm_id(comm); }
// the source a receive matches, as a rank of MPI_COMM_WORLD (Rank::kAnyPeer: any; negative: none)
static int source_of(int src, MPI_Comm comm) { return src == MPI_ANY_SOURCE ? Rank::kAnyPeer : world_of(src, comm); }
static void traced_send(Rank& r, int dst, int tag, MPI_Comm comm, double bytes) {
  trace::sent(r, world_of(dst, comm), tag, comm_id(comm), (uint64_t)bytes);
}
static void traced_receive(Rank& r, const void* token, int src, int tag, MPI_Comm comm) {
  trace::recv_posted(r, token, source_of(src, comm), tag_of(tag), comm_id(comm), comm);
}
static void traced_completion(Rank& r, const void* token, const MPI_Status& st) {
  if (const void* comm = trace::recv_comm(r, token))
    trace::recv_completed(r, token, st.MPI_SOURCE < 0 ? -1 : world_of(st.MPI_SOURCE, (MPI_Comm)const_cast<void*>(comm)),
                          st.MPI_TAG);
}

/* A blocking collective's measured correction (machine key collectives.*, fitted by
 * orrery calibrate where the point-to-point model misses a collective): the call
 * takes the extra time of its size range on its communicator's size longer, waited out
 * before it returns; a call with a device buffer takes the device correction, others the
 * host one. */
class Correction {
 public:
  Correction(Rank& r, const char* name, double bytes, MPI_Comm comm, std::initializer_list<const void*> buffers)
      : rank_(r), extra_(collective_correction(name, bytes, any_device(buffers), comm_size(comm))) {}
  ~Correction() { defer(rank_, extra_); }  // host time of the call (streams.cpp, "the host's time")

 private:
  Rank& rank_;
  double extra_;
};

#define ORR_MPI(name, params, args)            \
  ORR_EXPORT int MPI_##name params {           \
    MpiScope scope("MPI_" #name, 0, Rank::kNoPeer, Rank::kNoPeer, HostState::Collective); \
    return PMPI_##name args;                   \
  }
#define ORR_MPI_DATA(name, params, args, buffers, bytes) \
  ORR_EXPORT int MPI_##name params {           \
    MpiScope scope("MPI_" #name, bytes, Rank::kNoPeer, Rank::kNoPeer, HostState::Collective); \
    place(scope.rank(), {ORR_UNPAREN buffers}); \
    return PMPI_##name args;                   \
  }
#define ORR_UNPAREN(...) __VA_ARGS__
#define ORR_MPI_COLL(name, params, args, buffers, size, bytes) \
  ORR_EXPORT int MPI_##name params {           \
    MpiScope scope("MPI_" #name, bytes, Rank::kNoPeer, Rank::kNoPeer, HostState::Collective); \
    place(scope.rank(), {ORR_UNPAREN buffers}); \
    Correction fix(scope.rank(), #name, message_bytes size, comm, {ORR_UNPAREN buffers}); \
    return PMPI_##name args;                   \
  }
#define ORR_MPI_POST(name, params, args, buffers, bytes) \
  ORR_EXPORT int MPI_##name params {           \
    MpiScope scope("MPI_" #name, bytes, Rank::kNoPeer, Rank::kNoPeer, HostState::Collective); \
    place(scope.rank(), {ORR_UNPAREN buffers}); \
    int rc = PMPI_##name args;                 \
    posted(scope.rank(), *rq); \
    if (*rq != MPI_REQUEST_NULL) scope.rank().collective_requests.insert((const void*)*rq); \
    return rc;                                 \
  }
#define ORR_MPI_ONE_SIDED(name, params, args, bytes) \
  ORR_EXPORT int MPI_##name params {           \
    MpiScope scope("MPI_" #name, bytes, Rank::kNoPeer, Rank::kNoPeer, HostState::PointToPoint); \
    return PMPI_##name args;                   \
  }
#define ORR_MPI_ONE_SIDED_POST(name, params, args, bytes) \
  ORR_EXPORT int MPI_##name params {           \
    MpiScope scope("MPI_" #name, bytes, Rank::kNoPeer, Rank::kNoPeer, HostState::PointToPoint); \
    int rc = PMPI_##name args;                 \
    posted(scope.rank(), *rq);                 \
    return rc;                                 \
  }
// the rows written out below: declared here with the row's signature, checked against SMPI's mpi.h
// (the extension rows against mpi-ext.h)
#define ORR_MPI_OWN(symbol, ret, params, args, family, policy) extern "C" ret symbol params;
#include "mpi/mpi_api.def"
#undef ORR_MPI
#undef ORR_MPI_DATA
#undef ORR_MPI_COLL
#undef ORR_MPI_POST
#undef ORR_MPI_ONE_SIDED
#undef ORR_MPI_ONE_SIDED_POST
#undef ORR_MPI_OWN

/* ---- point-to-point, with the machine's protocol for the buffer's path ----
 * SMPI sends every message eagerly up to the largest eager threshold (run.py
 * sets it); a message at or above its own path's threshold is sent
 * synchronously (rendezvous: the sender waits for the receiver). The software
 * overheads of the path are simulated time inside the call. */

static MpiPath& path_of(Rank& r, const void* buf) {
  const Allocation* a = find_allocation(buf);
  return a && a->device ? r.mpi_device : r.mpi_host;
}

/* Whether a peer (a rank of comm) shares this rank's node: messages within a node have
 * their own per-message overheads (mpi.*_overhead_*_intra). A receive from any source
 * is charged as one between nodes. */
static int node_of(int world_rank) {
  const std::vector<RankPlace>& ranks = run_description().ranks;
  return world_rank >= 0 && world_rank < (int)ranks.size() ? (int)ranks[world_rank].node : -1;
}
/* A rank of comm as a rank of MPI_COMM_WORLD; negative for MPI_ANY_SOURCE, MPI_PROC_NULL. */
static int world_of(int peer, MPI_Comm comm) {
  if (peer < 0 || comm == MPI_COMM_WORLD)
    return peer;
  int inter = 0, world = MPI_UNDEFINED;
  MPI_Group group, everyone;
  PMPI_Comm_test_inter(comm, &inter);
  inter ? PMPI_Comm_remote_group(comm, &group) : PMPI_Comm_group(comm, &group);
  PMPI_Comm_group(MPI_COMM_WORLD, &everyone);
  PMPI_Group_translate_ranks(group, 1, &peer, everyone, &world);
  PMPI_Group_free(&group);
  PMPI_Group_free(&everyone);
  return world == MPI_UNDEFINED ? -1 : world;
}
static bool within_node(const Rank& r, int world_peer) {
  int here = node_of(r.id);
  return here >= 0 && world_peer >= 0 && node_of(world_peer) == here;
}

static bool rendezvous(const MpiPath& p, double bytes) {
  return bytes >= p.eager_threshold;
}

/* The path's gap (machine key gaps.*, LogGP's g and G): after a send of s bytes starts,
 * the rank's next send on the path starts no sooner than gap(s) later; the caller waits
 * until then, as a LogP sender stalls. */
static void pace(Rank& r, MpiPath& p, bool intra, double bytes) {
  double& next = intra ? p.next_intra : p.next_inter;
  if (host_now(r) < next)
    defer(r, next - host_now(r));
  const Segment* seg = segment_for(intra ? p.gap_intra : p.gap_inter, bytes);
  double at = host_now(r);
  next = seg ? at + seg->latency_s + bytes / seg->bandwidth : at;
}

/* ---- what CUDA-aware libraries do for device buffers beyond a lone message's protocol ----
 * (docs/simulation.md, "Device buffers: costs a lone message does not show"; each machine key is
 * off by default.) */

/* mpi.device_sync: before the library reads a send's device buffer it waits for the device's work,
 * as its copy on the legacy default stream would (the rank's blocking streams and the legacy one)
 * or as a cudaDeviceSynchronize; host time of the send call, with the synchronisation's overhead. */
static void device_sync(Rank& r, const void* buf) {
  static const DeviceSync mode = run_description().mpi.device_sync;
  const Gpu* gpu = gpu_of(buf);
  if (mode == DeviceSync::None || !gpu)
    return;
  int device = r.device;  // the buffer's device as the rank numbers its devices
  for (size_t i = 0; i < r.gpus.size(); i++)
    if (r.gpus[i] == gpu)
      device = (int)i;
  wait_device_streams(r, device, mode == DeviceSync::Legacy);
}

/* mpi.ipc_setup: a rendezvous of a device buffer within a node moves by CUDA IPC, whose handle of
 * the sender's allocation the peer opens once and caches (UCX's cuda_ipc remote cache, Open MPI's
 * rgpusm); a freed and reallocated buffer is another allocation (its serial), so it misses again.
 * Charged in the send call, before the message is posted, so the data waits for it. */
static void ipc_setup(Rank& r, const void* buf, double bytes, int to_world) {
  static const double setup = run_description().mpi.ipc_setup_s;
  const Allocation* a = find_allocation(buf);
  if (setup <= 0 || !a || !a->device || to_world < 0 || !rendezvous(r.mpi_device, bytes))
    return;
  if (r.ipc_opened.insert({a->serial, to_world}).second)
    defer(r, setup);
}

/* gpudirect.rdma_limit: a device-buffer message to or from a known rank of another node larger than
 * the limit is staged through host memory: its end is the GPU's staged endpoint, whose route to the
 * NIC crosses the staging pipeline. No limit (infinite): GPUDirect RDMA for every size (or none at all). */
static sg4::Host* staged_end(Rank& r, const void* buf, double bytes, int peer_world) {
  static const RunDescription& d = run_description();
  const Gpu* gpu = gpu_of(buf);
  if (!gpu || !gpu->staged_end || !d.staging || peer_world < 0 || within_node(r, peer_world) ||
      bytes <= d.staging->rdma_limit)
    return nullptr;
  return gpu->staged_end;
}

/* Stands a rank where one point-to-point message's buffer is: stand_at, or its GPU's staged
 * endpoint for a message staged above gpudirect.rdma_limit. */
static void stand_for_message(Rank& r, const void* buf, double bytes, int peer_world) {
  if (sg4::Host* staged = staged_end(r, buf, bytes, peer_world)) {
    if (sg4::this_actor::get_host() != staged)
      sg4::this_actor::set_host(staged);
    return;
  }
  stand_at(r, buf);
}

/* A send's software overhead and gap on its path, charged before it is posted, after what the
 * library does for a device buffer first (device_sync, ipc_setup). The software overheads are host
 * time of the call, spent on the rank's own clock (defer) and waited out as its next MPI call
 * enters SMPI (core/streams.cpp, "the host's time"): a receive's overhead and the next send's are
 * one sleep. */
static void before_send(Rank& r, const void* buf, double bytes, int to_world) {
  MpiPath& p = path_of(r, buf);
  bool intra = within_node(r, to_world);
  device_sync(r, buf);
  defer(r, p.send(intra));
  if (intra)
    ipc_setup(r, buf, bytes, to_world);
  pace(r, p, intra, bytes);
}

/* A send's mode: standard and ready sends are eager below their path's eager threshold and
 * synchronous (rendezvous) at or above it; synchronous ones always; buffered ones never wait
 * for the receiver (SMPI copies them out). */
enum class SendMode { Standard, Synchronous, Buffered };

static SendMode mode_for(Rank& r, const void* buf, int count, MPI_Datatype dt, SendMode mode) {
  if (mode == SendMode::Standard && rendezvous(path_of(r, buf), message_bytes(count, dt)))
    return SendMode::Synchronous;
  return mode;
}

/* Posts a send from where its buffer is. */
static int post_send(Rank& r, const void* buf, int count, MPI_Datatype dt, int dst, int tag, MPI_Comm comm,
                     MPI_Request* rq, SendMode mode = SendMode::Standard) {
  stand_for_message(r, buf, message_bytes(count, dt), world_of(dst, comm));
  if (trace::on())
    traced_send(r, dst, tag, comm, message_bytes(count, dt));
  switch (mode_for(r, buf, count, dt, mode)) {
    case SendMode::Synchronous: return PMPI_Issend(buf, count, dt, dst, tag, comm, rq);
    case SendMode::Buffered: return PMPI_Ibsend(buf, count, dt, dst, tag, comm, rq);
    default: return PMPI_Isend(buf, count, dt, dst, tag, comm, rq);
  }
}

/* A receive's software overhead on its path, from a peer (a rank of MPI_COMM_WORLD; negative:
 * any source, charged as one between nodes). */
static void receive_overhead(Rank& r, const void* buf, int from_world) {
  defer(r, path_of(r, buf).recv(within_node(r, from_world)));
}

/* Posts a receive where its buffer is. */
static int post_recv(Rank& r, void* buf, int count, MPI_Datatype dt, int src, int tag, MPI_Comm comm,
                     MPI_Request* rq) {
  stand_for_message(r, buf, message_bytes(count, dt), world_of(src, comm));
  return PMPI_Irecv(buf, count, dt, src, tag, comm, rq);
}

static int blocking_send(const char* name, const void* buf, int count, MPI_Datatype dt, int dst, int tag,
                         MPI_Comm comm, SendMode mode) {
  MpiScope scope(name, message_bytes(count, dt), peer_of(dst, comm), tag_of(tag));
  place(scope.rank(), {buf}, true);
  before_send(scope.rank(), buf, message_bytes(count, dt), world_of(dst, comm));
  stand_for_message(scope.rank(), buf, message_bytes(count, dt), world_of(dst, comm));
  if (trace::on())
    traced_send(scope.rank(), dst, tag, comm, message_bytes(count, dt));
  switch (mode_for(scope.rank(), buf, count, dt, mode)) {
    case SendMode::Synchronous: return PMPI_Ssend(buf, count, dt, dst, tag, comm);
    case SendMode::Buffered: return PMPI_Bsend(buf, count, dt, dst, tag, comm);
    default: return PMPI_Send(buf, count, dt, dst, tag, comm);
  }
}
static int nonblocking_send(const char* name, const void* buf, int count, MPI_Datatype dt, int dst, int tag,
                            MPI_Comm comm, MPI_Request* rq, SendMode mode) {
  MpiScope scope(name, message_bytes(count, dt), peer_of(dst, comm), tag_of(tag));
  place(scope.rank(), {buf}, true);
  before_send(scope.rank(), buf, message_bytes(count, dt), world_of(dst, comm));
  int rc = post_send(scope.rank(), buf, count, dt, dst, tag, comm, rq, mode);
  posted(scope.rank(), *rq);
  return rc;
}

#define ORR_SEND(name, mode)                                                                            \
  ORR_EXPORT int MPI_##name(const void* buf, int count, MPI_Datatype dt, int dst, int tag, MPI_Comm comm) { \
    return blocking_send("MPI_" #name, buf, count, dt, dst, tag, comm, SendMode::mode);                    \
  }
// a send that makes a request: `make` is nonblocking_send or persistent_send (below)
#define ORR_SEND_REQUEST(name, make, mode)                                                              \
  ORR_EXPORT int MPI_##name(const void* buf, int count, MPI_Datatype dt, int dst, int tag, MPI_Comm comm,  \
                            MPI_Request* rq) {                                                           \
    return make("MPI_" #name, buf, count, dt, dst, tag, comm, rq, SendMode::mode);                         \
  }
ORR_SEND(Send, Standard)
ORR_SEND(Rsend, Standard)
ORR_SEND(Ssend, Synchronous)
ORR_SEND(Bsend, Buffered)
ORR_SEND_REQUEST(Isend, nonblocking_send, Standard)
ORR_SEND_REQUEST(Irsend, nonblocking_send, Standard)
ORR_SEND_REQUEST(Issend, nonblocking_send, Synchronous)
ORR_SEND_REQUEST(Ibsend, nonblocking_send, Buffered)

ORR_EXPORT int MPI_Recv(void* buf, int count, MPI_Datatype dt, int src, int tag, MPI_Comm comm, MPI_Status* st) {
  MpiScope scope("MPI_Recv", message_bytes(count, dt), peer_of(src, comm), tag_of(tag));
  place(scope.rank(), {buf}, true);
  stand_for_message(scope.rank(), buf, message_bytes(count, dt), world_of(src, comm));
  MPI_Status own;
  MPI_Status* status = st == MPI_STATUS_IGNORE ? &own : st;
  if (trace::on())
    traced_receive(scope.rank(), &scope, src, tag, comm);
  int rc = PMPI_Recv(buf, count, dt, src, tag, comm, status);
  if (trace::on())
    traced_completion(scope.rank(), &scope, *status);
  receive_overhead(scope.rank(), buf, world_of(status->MPI_SOURCE, comm));
  return rc;
}

ORR_EXPORT int MPI_Irecv(void* buf, int count, MPI_Datatype dt, int src, int tag, MPI_Comm comm, MPI_Request* rq) {
  MpiScope scope("MPI_Irecv", message_bytes(count, dt), peer_of(src, comm), tag_of(tag));
  place(scope.rank(), {buf}, true);
  receive_overhead(scope.rank(), buf, world_of(src, comm));  // charged when posted
  int rc = post_recv(scope.rank(), buf, count, dt, src, tag, comm, rq);
  posted(scope.rank(), *rq);
  if (trace::on())
    traced_receive(scope.rank(), *rq, src, tag, comm);
  return rc;
}

ORR_EXPORT int MPI_Sendrecv(const void* sbuf, int scount, MPI_Datatype stype, int dst, int stag, void* rbuf, int rcount,
                            MPI_Datatype rtype, int src, int rtag, MPI_Comm comm, MPI_Status* st) {
  if (rank_deferring("MPI_Sendrecv").in_mpi.name)  // PMPI_Sendrecv_replace's, inside its own scope
    return PMPI_Sendrecv(sbuf, scount, stype, dst, stag, rbuf, rcount, rtype, src, rtag, comm, st);
  // both messages: the one sent and the one received; a deadlock names the receive's peer
  MpiScope scope("MPI_Sendrecv", message_bytes(scount, stype) + message_bytes(rcount, rtype), peer_of(src, comm),
                 tag_of(rtag));
  place(scope.rank(), {sbuf, rbuf}, true);
  int to = world_of(dst, comm);
  before_send(scope.rank(), sbuf, message_bytes(scount, stype), to);
  MPI_Request rq[2];
  MPI_Status sts[2];
  if (trace::on())
    traced_receive(scope.rank(), &rq[0], src, rtag, comm);
  post_recv(scope.rank(), rbuf, rcount, rtype, src, rtag, comm, &rq[0]);
  post_send(scope.rank(), sbuf, scount, stype, dst, stag, comm, &rq[1]);
  int rc = PMPI_Waitall(2, rq, sts);
  if (trace::on())
    traced_completion(scope.rank(), &rq[0], sts[0]);
  if (st != MPI_STATUS_IGNORE)
    *st = sts[0];
  receive_overhead(scope.rank(), rbuf, world_of(sts[0].MPI_SOURCE, comm));
  return rc;
}

/* Sendrecv_replace and the matched receives, as their generated rows would be, told to the trace.
 * A matched probe (MPI_Mprobe, which SMPI alone handles) took its message from a communicator
 * the shim does not see: the trace pairs no more messages to its rank (docs/trace.md). */
ORR_EXPORT int MPI_Sendrecv_replace(void* buf, int count, MPI_Datatype dt, int dst, int stag, int src, int rtag,
                                    MPI_Comm comm, MPI_Status* st) {
  MpiScope scope("MPI_Sendrecv_replace", 2 * message_bytes(count, dt));
  place(scope.rank(), {buf});
  if (!trace::on())
    return PMPI_Sendrecv_replace(buf, count, dt, dst, stag, src, rtag, comm, st);
  MPI_Status own;
  MPI_Status* status = st == MPI_STATUS_IGNORE ? &own : st;
  traced_send(scope.rank(), dst, stag, comm, message_bytes(count, dt));
  traced_receive(scope.rank(), &scope, src, rtag, comm);
  int rc = PMPI_Sendrecv_replace(buf, count, dt, dst, stag, src, rtag, comm, status);
  traced_completion(scope.rank(), &scope, *status);
  return rc;
}
ORR_EXPORT int MPI_Mrecv(void* buf, int count, MPI_Datatype dt, MPI_Message* msg, MPI_Status* st) {
  MpiScope scope("MPI_Mrecv", message_bytes(count, dt));
  place(scope.rank(), {buf});
  if (trace::on())
    trace::unpaired(scope.rank());
  return PMPI_Mrecv(buf, count, dt, msg, st);
}
ORR_EXPORT int MPI_Imrecv(void* buf, int count, MPI_Datatype dt, MPI_Message* msg, MPI_Request* rq) {
  MpiScope scope("MPI_Imrecv", message_bytes(count, dt));
  place(scope.rank(), {buf});
  if (trace::on())
    trace::unpaired(scope.rank());
  int rc = PMPI_Imrecv(buf, count, dt, msg, rq);
  posted(scope.rank(), *rq);
  return rc;
}

/* Persistent requests: each MPI_Start posts the request as MPI_Isend or MPI_Irecv would,
 * overheads, gap and pinned end included. Its send mode is fixed when it is made. */
static int persistent_send(const char* name, const void* buf, int count, MPI_Datatype dt, int dst, int tag,
                           MPI_Comm comm, MPI_Request* rq, SendMode mode) {
  MpiScope scope(name);
  Rank& r = scope.rank();
  int rc = MPI_SUCCESS;
  switch (mode_for(r, buf, count, dt, mode)) {
    case SendMode::Synchronous: rc = PMPI_Ssend_init(buf, count, dt, dst, tag, comm, rq); break;
    case SendMode::Buffered: rc = PMPI_Bsend_init(buf, count, dt, dst, tag, comm, rq); break;
    default: rc = PMPI_Send_init(buf, count, dt, dst, tag, comm, rq);
  }
  if (rc == MPI_SUCCESS)
    r.persistent[(const void*)*rq] = Rank::Persistent{buf, message_bytes(count, dt), world_of(dst, comm), true, tag,
                                                      trace::on() ? comm_id(comm) : 0, comm};
  return rc;
}
ORR_SEND_REQUEST(Send_init, persistent_send, Standard)
ORR_SEND_REQUEST(Rsend_init, persistent_send, Standard)
ORR_SEND_REQUEST(Ssend_init, persistent_send, Synchronous)
ORR_SEND_REQUEST(Bsend_init, persistent_send, Buffered)
ORR_EXPORT int MPI_Recv_init(void* buf, int count, MPI_Datatype dt, int src, int tag, MPI_Comm comm,
                             MPI_Request* rq) {
  MpiScope scope("MPI_Recv_init");
  int rc = PMPI_Recv_init(buf, count, dt, src, tag, comm, rq);
  if (rc == MPI_SUCCESS)
    scope.rank().persistent[(const void*)*rq] = Rank::Persistent{
        buf, message_bytes(count, dt), world_of(src, comm), false, tag_of(tag), trace::on() ? comm_id(comm) : 0, comm};
  return rc;
}

/* ---- requests a status query found complete ----
 * SMPI answers MPI_Request_get_status with flag 1 for every request but a generalized one,
 * complete or not (3.32, as 4.1: Request::get_status reports complete when an iprobe of the
 * request's source finds no other message): a program that polls it would go on as if its message
 * were in. The shim answers it with SMPI's MPI_Test instead, which takes one poll (the machine's
 * poll time, as an MPI_Test: a real MPI progresses its requests in either call) and finishes a
 * request it finds complete: its status read, a receive's data in place, its handle freed. The
 * program still holds that handle, which its wait must answer, so the shim holds a reference of
 * its own on the request (SMPI's Request::ref, as SMPI's MPI_Wait does: the object stays, and no
 * new request gets its handle) and keeps its status until a completion call of the program takes
 * it: MPI_Wait, MPI_Test, their all, any and some forms and MPI_Request_free answer for it from
 * what was kept, without SMPI, and give the reference back; MPI_Start of a persistent one drops
 * it. Called as smpi_pins.cpp calls SMPI's members (the object is the first argument). */
void smpi_request_ref(MPI_Request self) __asm__("_ZN7simgrid4smpi7Request3refEv");
void smpi_request_unref(MPI_Request* rq) __asm__("_ZN7simgrid4smpi7Request5unrefEPPS1_");
static std::unordered_map<MPI_Request, MPI_Status> g_settled;  // SMPI's request objects: one table for all ranks

static bool settled(MPI_Request rq) { return rq != MPI_REQUEST_NULL && g_settled.count(rq); }
static bool persistent(const Rank& r, MPI_Request rq) { return r.persistent.count((const void*)rq) > 0; }
static MPI_Status* status_at(MPI_Status* sts, int i) { return sts == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &sts[i]; }

/* Answers a completion call for a settled request: its status, the shim's reference back (which
 * frees a request that is not persistent) and its handle MPI_REQUEST_NULL, or, for a persistent
 * request, inactive and kept. */
static void take(Rank& r, MPI_Request* rq, MPI_Status* st) {
  auto it = g_settled.find(*rq);
  if (st != MPI_STATUS_IGNORE)
    *st = it->second;
  MPI_Request own = *rq;
  g_settled.erase(it);
  smpi_request_unref(&own);
  if (!persistent(r, *rq))
    *rq = MPI_REQUEST_NULL;
}

/* The settled requests of an array, which an array call hands to SMPI as MPI_REQUEST_NULL (SMPI
 * skips them) and answers itself (put_back). */
class SettledIn {
 public:
  SettledIn(MPI_Request* rqs, int n) : rqs_(rqs) {
    for (int i = 0; i < n; i++)
      if (settled(rqs[i])) {
        at_.push_back({i, rqs[i]});
        rqs[i] = MPI_REQUEST_NULL;
      }
  }
  bool any() const { return !at_.empty(); }
  // each settled request's handle back in the array; answered by `take` where `answered`
  void put_back(Rank& r, MPI_Status* sts, bool answered) {
    for (auto [i, rq] : at_) {
      rqs_[i] = rq;
      if (answered)
        take(r, &rqs_[i], status_at(sts, i));
    }
  }
  // settled requests answered after the `*outcount` a some-call's SMPI part completed
  void append(Rank& r, int* outcount, int* indices, MPI_Status* sts) {
    if (*outcount == MPI_UNDEFINED)
      *outcount = 0;
    for (auto [i, rq] : at_) {
      rqs_[i] = rq;
      indices[*outcount] = i;
      take(r, &rqs_[i], status_at(sts, *outcount));
      (*outcount)++;
    }
  }

 private:
  MPI_Request* rqs_;
  std::vector<std::pair<int, MPI_Request>> at_;
};

ORR_EXPORT int MPI_Request_get_status(MPI_Request rq, int* flag, MPI_Status* st) {
  MpiScope scope("MPI_Request_get_status");
  Rank& r = scope.rank();
  place(r, {});
  if (auto kept = g_settled.find(rq); kept != g_settled.end()) {
    *flag = 1;
    if (st != MPI_STATUS_IGNORE)
      *st = kept->second;
    return MPI_SUCCESS;
  }
  if (rq == MPI_REQUEST_NULL || (persistent(r, rq) && !r.requests.count((const void*)rq))) {
    MPI_Request none = MPI_REQUEST_NULL;  // null or inactive: complete, with an empty status
    return PMPI_Test(&none, flag, st);
  }
  completes(r, &rq, 1);
  MPI_Status own;
  smpi_request_ref(rq);
  MPI_Request probe = rq;
  int rc = PMPI_Test(&probe, flag, &own);
  if (!*flag) {
    smpi_request_unref(&probe);
    return rc;
  }
  g_settled[rq] = own;
  if (st != MPI_STATUS_IGNORE)
    *st = own;
  completed(r, rq);
  if (trace::on())
    traced_completion(r, rq, own);
  return rc;
}

static int start(Rank& r, MPI_Request* rq) {
  if (settled(*rq))
    take(r, rq, MPI_STATUS_IGNORE);  // its completion not taken (an erroneous program): dropped
  auto it = r.persistent.find((const void*)*rq);
  if (it == r.persistent.end())
    return PMPI_Start(rq);  // not made by the shim's *_init wrappers: SMPI's alone
  const Rank::Persistent& p = it->second;
  if (p.send)
    before_send(r, p.buf, p.bytes, p.peer_world);
  else
    receive_overhead(r, p.buf, p.peer_world);
  stand_for_message(r, p.buf, p.bytes, p.peer_world);
  if (trace::on() && p.send)
    trace::sent(r, p.peer_world, p.tag, p.comm, (uint64_t)p.bytes);
  else if (trace::on())
    trace::recv_posted(r, *rq, p.peer_world == MPI_ANY_SOURCE ? Rank::kAnyPeer : p.peer_world, p.tag, p.comm,
                       p.comm_handle);
  int rc = PMPI_Start(rq);
  posted(r, *rq);
  return rc;
}
/* The bytes a start moves: its persistent request's message (0 for one the shim did not make). */
static double started_bytes(const Rank& r, const MPI_Request* rq) {
  auto it = r.persistent.find((const void*)*rq);
  return it == r.persistent.end() ? 0 : it->second.bytes;
}
ORR_EXPORT int MPI_Start(MPI_Request* rq) {
  MpiScope scope("MPI_Start");
  scope.add_bytes(started_bytes(scope.rank(), rq));
  place(scope.rank(), {}, true);  // start() stands at the request's buffer
  return start(scope.rank(), rq);
}
ORR_EXPORT int MPI_Startall(int n, MPI_Request rqs[]) {
  MpiScope scope("MPI_Startall");
  for (int i = 0; i < n; i++)
    scope.add_bytes(started_bytes(scope.rank(), &rqs[i]));
  place(scope.rank(), {}, true);
  int rc = MPI_SUCCESS;
  for (int i = 0; i < n && rc == MPI_SUCCESS; i++)
    rc = start(scope.rank(), &rqs[i]);
  return rc;
}
ORR_EXPORT int MPI_Request_free(MPI_Request* rq) {
  MpiScope scope("MPI_Request_free");
  MPI_Request handle = *rq;
  if (settled(handle)) {
    take(scope.rank(), rq, MPI_STATUS_IGNORE);
    if (*rq == MPI_REQUEST_NULL)
      return MPI_SUCCESS;  // freed by giving the shim's reference back
  }
  int rc = PMPI_Request_free(rq);
  completed(scope.rank(), handle);
  if (trace::on())
    trace::recv_dropped(scope.rank(), handle);
  scope.rank().persistent.erase((const void*)handle);
  return rc;
}

ORR_EXPORT int MPI_Wait(MPI_Request* rq, MPI_Status* st) {
  MpiScope scope("MPI_Wait");
  place(scope.rank(), {});
  if (settled(*rq)) {
    take(scope.rank(), rq, st);
    return MPI_SUCCESS;
  }
  completes(scope.rank(), rq, 1);
  MPI_Request handle = *rq;
  MPI_Status own;
  MPI_Status* status = st == MPI_STATUS_IGNORE && trace::on() ? &own : st;
  int rc = PMPI_Wait(rq, status);
  completed(scope.rank(), handle);
  if (trace::on())
    traced_completion(scope.rank(), handle, *status);
  return rc;
}

ORR_EXPORT int MPI_Waitall(int n, MPI_Request rqs[], MPI_Status sts[]) {
  MpiScope scope("MPI_Waitall");
  place(scope.rank(), {});
  completes(scope.rank(), rqs, n);
  SettledIn settled_in(rqs, n);
  std::vector<MPI_Request> handles(rqs, rqs + n);
  std::vector<MPI_Status> own(trace::on() && sts == MPI_STATUSES_IGNORE ? n : 0);
  MPI_Status* statuses = own.empty() ? sts : own.data();
  int rc = PMPI_Waitall(n, rqs, statuses);
  settled_in.put_back(scope.rank(), statuses, true);
  for (MPI_Request h : handles)
    completed(scope.rank(), h);
  if (trace::on())
    for (int i = 0; i < n; i++)
      traced_completion(scope.rank(), handles[i], statuses[i]);
  return rc;
}

/* An any-call answers for the first settled request, which is complete, without SMPI. */
static int any_call(const char* name, int n, MPI_Request rqs[], int* index, int* flag, MPI_Status* st) {
  MpiScope scope(name);
  Rank& r = scope.rank();
  place(r, {});
  for (int i = 0; i < n; i++)
    if (settled(rqs[i])) {
      *index = i;
      if (flag)
        *flag = 1;
      take(r, &rqs[i], st);
      return MPI_SUCCESS;
    }
  completes(r, rqs, n);
  std::vector<MPI_Request> handles(rqs, rqs + n);
  MPI_Status own;
  MPI_Status* status = st == MPI_STATUS_IGNORE && trace::on() ? &own : st;
  int rc = flag ? PMPI_Testany(n, rqs, index, flag, status) : PMPI_Waitany(n, rqs, index, status);
  if (*index != MPI_UNDEFINED && (!flag || *flag)) {
    completed(r, handles[*index]);
    if (trace::on())
      traced_completion(r, handles[*index], *status);
  }
  return rc;
}
ORR_EXPORT int MPI_Waitany(int n, MPI_Request rqs[], int* index, MPI_Status* st) {
  return any_call("MPI_Waitany", n, rqs, index, nullptr, st);
}
ORR_EXPORT int MPI_Testany(int n, MPI_Request rqs[], int* index, int* flag, MPI_Status* st) {
  return any_call("MPI_Testany", n, rqs, index, flag, st);
}

/* A some-call with settled requests answers them and does not block: SMPI tests the others
 * (MPI_Testsome) and the settled ones follow the ones it completed. */
static int some_call(const char* name, bool wait, int n, MPI_Request rqs[], int* outcount, int* indices,
                     MPI_Status sts[]) {
  MpiScope scope(name);
  Rank& r = scope.rank();
  place(r, {});
  completes(r, rqs, n);
  SettledIn settled_in(rqs, n);
  std::vector<MPI_Request> handles(rqs, rqs + n);
  std::vector<MPI_Status> own(trace::on() && sts == MPI_STATUSES_IGNORE ? n : 0);
  MPI_Status* statuses = own.empty() ? sts : own.data();
  int rc = wait && !settled_in.any() ? PMPI_Waitsome(n, rqs, outcount, indices, statuses)
                                     : PMPI_Testsome(n, rqs, outcount, indices, statuses);
  const int by_smpi = *outcount == MPI_UNDEFINED ? 0 : *outcount;
  if (settled_in.any())
    settled_in.append(r, outcount, indices, statuses);
  for (int k = 0; k < by_smpi; k++) {
    completed(r, handles[indices[k]]);
    if (trace::on())
      traced_completion(r, handles[indices[k]], statuses[k]);
  }
  return rc;
}
ORR_EXPORT int MPI_Waitsome(int n, MPI_Request rqs[], int* outcount, int* indices, MPI_Status sts[]) {
  return some_call("MPI_Waitsome", true, n, rqs, outcount, indices, sts);
}
ORR_EXPORT int MPI_Testsome(int n, MPI_Request rqs[], int* outcount, int* indices, MPI_Status sts[]) {
  return some_call("MPI_Testsome", false, n, rqs, outcount, indices, sts);
}

/* ---- polls ----
 * One MPI_Test or MPI_Iprobe call, or one round of a blocking MPI_Probe, takes the
 * machine's poll time (mpi.poll_time): a polled completion or message is seen at the first
 * poll after it (the run description's mpi.poll_time_s). orrery run gives SMPI that time for its
 * tests too (smpi/test, not growing), which
 * SMPI sleeps in each test of a pending request (MPI_Test; each of MPI_Testall's). SMPI's own
 * probe time is off (smpi/iprobe:0): it computes it on the rank's host, which the GPU's
 * kernels share, so the shim sleeps it here instead. */
static void poll_once(Rank& r) {
  static const double poll = run_description().mpi.poll_time_s;
  defer(r, poll);
}

ORR_EXPORT int MPI_Iprobe(int src, int tag, MPI_Comm comm, int* flag, MPI_Status* st) {
  MpiScope scope("MPI_Iprobe");
  place(scope.rank(), {});
  poll_once(scope.rank());
  return PMPI_Iprobe(src, tag, comm, flag, st);
}

ORR_EXPORT int MPI_Probe(int src, int tag, MPI_Comm comm, MPI_Status* st) {
  MpiScope scope("MPI_Probe");
  place(scope.rank(), {});
  int flag = 0, rc = MPI_SUCCESS;
  while (!flag && rc == MPI_SUCCESS) {
    poll_once(scope.rank());
    rc = PMPI_Iprobe(src, tag, comm, &flag, st);
  }
  return rc;
}

ORR_EXPORT int MPI_Test(MPI_Request* rq, int* flag, MPI_Status* st) {
  MpiScope scope("MPI_Test");
  place(scope.rank(), {});
  completes(scope.rank(), rq, 1);
  if (settled(*rq)) {
    *flag = 1;
    take(scope.rank(), rq, st);
    return MPI_SUCCESS;
  }
  MPI_Request handle = *rq;
  MPI_Status own;
  MPI_Status* status = st == MPI_STATUS_IGNORE && trace::on() ? &own : st;
  int rc = PMPI_Test(rq, flag, status);
  if (*flag)
    completed(scope.rank(), handle);
  if (*flag && trace::on())
    traced_completion(scope.rank(), handle, *status);
  return rc;
}

ORR_EXPORT int MPI_Testall(int n, MPI_Request* rqs, int* flag, MPI_Status* sts) {
  MpiScope scope("MPI_Testall");
  place(scope.rank(), {});
  completes(scope.rank(), rqs, n);
  SettledIn settled_in(rqs, n);
  std::vector<MPI_Request> handles(rqs, rqs + n);
  std::vector<MPI_Status> own(trace::on() && sts == MPI_STATUSES_IGNORE ? n : 0);
  MPI_Status* statuses = own.empty() ? sts : own.data();
  int rc = PMPI_Testall(n, rqs, flag, statuses);
  settled_in.put_back(scope.rank(), statuses, *flag);
  if (*flag)
    for (MPI_Request h : handles)
      completed(scope.rank(), h);
  if (*flag && trace::on())
    for (int i = 0; i < n; i++)
      traced_completion(scope.rank(), handles[i], statuses[i]);
  return rc;
}

ORR_EXPORT int MPI_Init(int* argc, char*** argv) {
  int rc = PMPI_Init(argc, argv);
  rank_self("MPI_Init").mpi_initialized = true;
  return rc;
}

/* ---- shared-memory windows ----
 * SMPI's MPI_Win_allocate_shared (3.32) has the communicator's first rank allocate its own size
 * times the ranks, whatever the others asked for, and gives every rank's window the segment's
 * start as its base: MPI_Win_shared_query then answers that start for every rank, so a rank that
 * reads a neighbour's part reads the first rank's. The shim lays the segment out as MPI does,
 * each rank's part after the one before (its own size, its own displacement unit), makes each
 * rank's window over its part (MPI_Win_create: all ranks are one process, whose memory they all
 * see), and answers MPI_Win_shared_query from that layout. The segment is freed with the last of
 * its windows. */
namespace {
struct SharedSegment {
  char* memory = nullptr;
  int windows = 0;  // not yet freed
};
struct SharedWindow {
  SharedSegment* segment;
  std::vector<MPI_Aint> offset, size, disp_unit;  // by rank of the window's communicator
};
std::unordered_map<MPI_Win, SharedWindow> g_shared_windows;  // each rank's window
}  // namespace

ORR_EXPORT int MPI_Win_allocate_shared(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void* base,
                                       MPI_Win* win) {
  MpiScope scope("MPI_Win_allocate_shared", (double)size, Rank::kNoPeer, Rank::kNoPeer, HostState::Collective);
  const int n = comm_size(comm), me = comm_rank(comm);
  if (size < 0 || disp_unit <= 0)
    return PMPI_Win_allocate_shared(size, disp_unit, info, comm, base, win);  // SMPI's error
  std::vector<MPI_Aint> parts(2 * (size_t)n);
  const MPI_Aint mine[2] = {size, disp_unit};
  place(scope.rank(), {mine});  // host memory: the layout's messages take host routes
  int rc = PMPI_Allgather(mine, 2, MPI_AINT, parts.data(), 2, MPI_AINT, comm);
  if (rc != MPI_SUCCESS)
    return rc;
  SharedWindow w{nullptr, {}, {}, {}};
  MPI_Aint total = 0;
  for (int i = 0; i < n; i++) {
    w.offset.push_back(total);
    w.size.push_back(parts[2 * i]);
    w.disp_unit.push_back(parts[2 * i + 1]);
    total += parts[2 * i];
  }
  if (me == 0)
    w.segment = new SharedSegment{static_cast<char*>(calloc((size_t)std::max<MPI_Aint>(total, 1), 1)), n};
  rc = PMPI_Bcast(&w.segment, sizeof w.segment, MPI_BYTE, 0, comm);
  if (rc != MPI_SUCCESS)
    return rc;
  char* mine_at = w.segment->memory + w.offset[me];
  rc = PMPI_Win_create(mine_at, size, disp_unit, info, comm, win);
  if (rc != MPI_SUCCESS)
    return rc;
  *static_cast<void**>(base) = mine_at;
  g_shared_windows.emplace(*win, std::move(w));
  return rc;
}

ORR_EXPORT int MPI_Win_shared_query(MPI_Win win, int rank, MPI_Aint* size, int* disp_unit, void* base) {
  MpiScope scope("MPI_Win_shared_query");
  auto it = g_shared_windows.find(win);
  if (it == g_shared_windows.end())
    return PMPI_Win_shared_query(win, rank, size, disp_unit, base);  // no window of the shim's
  const SharedWindow& w = it->second;
  const int ranks = (int)w.size.size();
  if (rank == MPI_PROC_NULL)  // the lowest rank whose part is not empty
    for (rank = 0; rank < ranks - 1 && w.size[rank] == 0; rank++) {
    }
  if (rank < 0 || rank >= ranks)
    return MPI_ERR_RANK;
  *size = w.size[rank];
  *disp_unit = (int)w.disp_unit[rank];
  *static_cast<void**>(base) = w.segment->memory + w.offset[rank];
  return MPI_SUCCESS;
}

/* The window leaves the table before SMPI frees it: other ranks run during the free (it is
 * collective), and may make windows of their own, which can take the freed window's handle. */
ORR_EXPORT int MPI_Win_free(MPI_Win* win) {
  MpiScope scope("MPI_Win_free", 0, Rank::kNoPeer, Rank::kNoPeer, HostState::Collective);
  auto it = win ? g_shared_windows.find(*win) : g_shared_windows.end();
  if (it == g_shared_windows.end())
    return PMPI_Win_free(win);
  const MPI_Win handle = *win;
  SharedWindow w = std::move(it->second);
  g_shared_windows.erase(it);
  int rc = PMPI_Win_free(win);
  if (rc != MPI_SUCCESS) {
    g_shared_windows.emplace(handle, std::move(w));
    return rc;
  }
  if (--w.segment->windows == 0) {
    free(w.segment->memory);
    delete w.segment;
  }
  return rc;
}

/* ---- thread support ----
 * SMPI provides MPI_THREAD_SINGLE whatever a program requires, answers MPI_Query_thread the same,
 * and MPI_Is_thread_main true for the actor of pid 1 alone, false on every other rank (3.32). A
 * rank's MPI calls all come from its main thread, its actor, as MPI_THREAD_FUNNELED has them, and
 * CUDA + MPI programs commonly require FUNNELED and stop when it is not provided. The shim provides
 * what is required up to FUNNELED, as a library whose progress is not thread-safe would; a program
 * that requires more gets FUNNELED and decides, as on such a library. An MPI or CUDA call from
 * another thread stops the run naming it (core/ranks.cpp). */
ORR_EXPORT int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  int rc = PMPI_Init_thread(argc, argv, required, provided);
  Rank& r = rank_self("MPI_Init_thread");
  r.mpi_initialized = true;
  r.mpi_thread_level = std::clamp(required, MPI_THREAD_SINGLE, MPI_THREAD_FUNNELED);
  if (provided)
    *provided = r.mpi_thread_level;
  return rc;
}

ORR_EXPORT int MPI_Query_thread(int* provided) {
  if (!provided)
    return MPI_ERR_ARG;
  *provided = rank_deferring("MPI_Query_thread").mpi_thread_level;
  return MPI_SUCCESS;
}

ORR_EXPORT int MPI_Is_thread_main(int* flag) {
  if (!flag)
    return MPI_ERR_ARG;
  rank_deferring("MPI_Is_thread_main");  // a rank's actor, its main thread: from any other, the run stops
  *flag = 1;
  return MPI_SUCCESS;
}

/* SMPI names the simulated host a rank stands on, and every rank of Orrery's platform stands at a
 * host of its own (its GPU's): no two ranks would share a processor name, and a program that finds
 * the ranks of its node by it (a local rank from the names every rank gathers) would put every
 * rank on its node's first GPU. The name is the node's, as gethostname answers it
 * (core/environment.cpp). */
ORR_EXPORT int MPI_Get_processor_name(char* name, int* resultlen) {
  if (!name || !resultlen)
    return MPI_ERR_ARG;
  rank_deferring("MPI_Get_processor_name");
  if (rank_gethostname(name, MPI_MAX_PROCESSOR_NAME) != 0)
    return MPI_ERR_OTHER;
  *resultlen = (int)strlen(name);
  return MPI_SUCCESS;
}

/* SMPI groups MPI_COMM_TYPE_SHARED by simulated host, and every rank runs on
 * its own GPU's host: group by node instead, as on the real machine. */
ORR_EXPORT int MPI_Comm_split_type(MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm* out) {
  if (type != MPI_COMM_TYPE_SHARED)
    return PMPI_Comm_split_type(comm, type, key, info, out);
  Rank& r = rank_self("MPI_Comm_split_type");
  return PMPI_Comm_split(comm, (int)gpu_place(r.host).node, key, out);
}

/* MPI_Abort ends the whole job at once, as mpirun does, and the error code becomes the run's exit
 * status (SMPI's own ignores the code and leaves the run to end in a deadlock). */
ORR_EXPORT int MPI_Abort(MPI_Comm, int errorcode) {
  end_run("aborted", rank_self("MPI_Abort").id, errorcode);
}

/* exit() in a C or C++ file built by smpicc/smpicxx (orrery mpicc/mpicxx): SMPI's smpi_helpers.h
 * makes it smpi_exit, which ends only the calling rank and keeps its status for the end. Here,
 * as under mpirun, a non-zero status or an exit before MPI_Finalize ends the job with it; an
 * exit(0) after MPI_Finalize, or from a program that never called MPI_Init, ends the rank, as
 * returning from main would. (exit() in CUDA files,
 * which nvcc builds, ends the process: outcome.cpp's exit handler.) */
ORR_EXPORT void smpi_exit(int status) {
  Rank& r = rank_self("exit");
  end_outside_mpi(r, status);
  if (status != 0 || r.stats.end_s < 0)
    end_run("exited", r.id, status);
  finish_rank(r);
  sg4::this_actor::exit();
}

ORR_EXPORT int MPI_Finalize(void) {
  Rank& r = rank_self("MPI_Finalize");
  r.stats.end_s = now();
  return PMPI_Finalize();
}

/* ---- Open MPI's extensions (mpi-ext.h) ----
 * SMPI has neither the header nor the calls; a CUDA-aware program asks them before it passes
 * device buffers to MPI. The answers are the header's own macros, so that the compile-time and
 * the run-time checks agree: CUDA-aware, since MPI calls on device buffers are simulated along
 * the machine's GPU paths (GPUDirect RDMA, or staged through host memory, as it says); ROCm
 * is not simulated. No SMPI call, no simulated time, nothing in results.json. */
ORR_EXPORT int MPIX_Query_cuda_support(void) { return MPIX_CUDA_AWARE_SUPPORT; }
ORR_EXPORT int MPIX_Query_rocm_support(void) { return MPIX_ROCM_AWARE_SUPPORT; }
