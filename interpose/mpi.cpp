/* MPI wrappers: each rank's simulated time per MPI call, through PMPI.
 *
 * The shim is found before libsimgrid when a rank's program copy resolves its
 * symbols (it is the program's libcudart), and SMPI declares MPI_* weak, so
 * these definitions take the calls and forward them to SMPI's PMPI_*. Besides
 * timing, they apply the machine's per-path protocol (eager threshold,
 * software overheads, gaps between sends) and send blocking host-buffer calls
 * along host routes.
 * Device buffers need no translation: messages sent from folded device memory
 * carry no data (memory.cpp's copy callback). */
#include "runtime.hpp"

#include <map>

#include <smpi/smpi.h>

#include <cstdlib>
#include <initializer_list>
#include <vector>

using namespace orrery;

namespace {
class MpiScope {  // times one MPI call of the calling rank
 public:
  explicit MpiScope(const char* name) : rank_(rank_self(name)), name_(name), t0_(now()) {}
  ~MpiScope() {
    Tally& t = rank_.stats.mpi[name_];
    t.count++;
    t.time_s += now() - t0_;
    rank_.stats.comm.add(t0_, now());
  }
  Rank& rank() { return rank_; }

 private:
  Rank& rank_;
  const char* name_;
  double t0_;
};
}  // namespace

/* Where a rank's messages start and end. SimGrid routes a message from the
 * host of its sender to the host of its receiver when the two match, so a rank
 * stands where its data is: at its process in host memory (its host endpoint)
 * while the call at hand moves host buffers only and no pending request moves
 * device memory, and next to its GPU otherwise. Between calls it stands where
 * its pending requests want it. A call that only posts requests (MPI_Isend,
 * MPI_Irecv, non-blocking collectives) returns at once, so the only messages
 * that can start during it are its own: it stands where its own buffers are.
 * A rank with pending requests of both kinds stands next to its GPU between
 * calls and in blocking calls (its host-buffer messages that start then take
 * the GPU's route): each call made with both kinds in play is counted and the
 * run's summary warns of them. */
static bool is_device(const void* b) {
  const Allocation* a = b == MPI_IN_PLACE ? nullptr : find_allocation(b);
  return a && a->device;
}
static bool is_host_data(const void* b) { return b && b != MPI_IN_PLACE && !is_device(b); }
static bool any_device(std::initializer_list<const void*> buffers) {
  for (const void* b : buffers)
    if (is_device(b))
      return true;
  return false;
}

static void stand(Rank& r, bool at_process) {
  sg4::Host* where = at_process && r.cpu ? r.cpu : r.device_end;
  if (sg4::this_actor::get_host() != where)
    sg4::this_actor::set_host(where);
}

static void settle(Rank& r) { stand(r, r.pending_device == 0 && r.pending_host > 0); }

class Placement {  // for the length of one MPI call
 public:
  Placement(Rank& r, std::initializer_list<const void*> buffers, bool posting = false) : rank_(r) {
    bool own_device = any_device(buffers);
    bool host = r.pending_host > 0;
    for (const void* b : buffers)
      host = host || is_host_data(b);
    bool device = own_device || r.pending_device > 0;
    if (device && host)
      r.stats.mixed_placements++;
    if (posting && buffers.size() > 0)
      stand(r, !own_device);
    else
      stand(r, (buffers.size() > 0 || r.pending_host > 0) && !device);
  }
  ~Placement() { settle(rank_); }

 private:
  Rank& rank_;
};

/* A non-blocking request counts as communication from its post until the
 * wait or test that sees it complete. */
static void posted(Rank& r, MPI_Request rq, std::initializer_list<const void*> buffers) {
  if (rq == MPI_REQUEST_NULL)
    return;
  bool device = any_device(buffers);
  r.requests[(const void*)rq] = Rank::Pending{now(), device};
  (device ? r.pending_device : r.pending_host)++;
}
static void completed(Rank& r, MPI_Request rq) {
  auto it = r.requests.find((const void*)rq);
  if (it == r.requests.end())
    return;
  r.stats.comm.add(it->second.posted, now());
  (it->second.device ? r.pending_device : r.pending_host)--;
  r.requests.erase(it);
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

/* A blocking collective's measured correction (machine key collectives.*, fitted by
 * orrery calibrate where the point-to-point model misses a collective): the call
 * takes the extra time of its size range longer, waited out before it returns; a
 * call with a device buffer takes the device correction, others the host one. */
class Correction {
 public:
  Correction(const char* name, double bytes, std::initializer_list<const void*> buffers)
      : extra_(collective_correction(name, bytes, any_device(buffers))) {}
  ~Correction() {
    if (extra_ > 0)
      sg4::this_actor::sleep_for(extra_);
  }

 private:
  double extra_;
};

#define ORR_MPI(name, params, args)            \
  ORR_EXPORT int MPI_##name params {           \
    MpiScope scope("MPI_" #name);              \
    return PMPI_##name args;                   \
  }
#define ORR_MPI_DATA(name, params, args, buffers) \
  ORR_EXPORT int MPI_##name params {           \
    MpiScope scope("MPI_" #name);              \
    Placement at(scope.rank(), {ORR_UNPAREN buffers}); \
    return PMPI_##name args;                   \
  }
#define ORR_UNPAREN(...) __VA_ARGS__
#define ORR_MPI_COLL(name, params, args, buffers, size) \
  ORR_EXPORT int MPI_##name params {           \
    MpiScope scope("MPI_" #name);              \
    Placement at(scope.rank(), {ORR_UNPAREN buffers}); \
    Correction fix(#name, message_bytes size, {ORR_UNPAREN buffers}); \
    return PMPI_##name args;                   \
  }
#define ORR_MPI_POST(name, params, args, buffers) \
  ORR_EXPORT int MPI_##name params {           \
    MpiScope scope("MPI_" #name);              \
    Placement at(scope.rank(), {ORR_UNPAREN buffers}, true); \
    int rc = PMPI_##name args;                 \
    posted(scope.rank(), *rq, {ORR_UNPAREN buffers}); \
    return rc;                                 \
  }
#include "mpi_api.def"
#undef ORR_MPI
#undef ORR_MPI_DATA
#undef ORR_MPI_COLL
#undef ORR_MPI_POST

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
  static const std::map<int, int> nodes = [] {  // from the run's configuration: "n{node}-cpu{local}"
    std::map<int, int> m;
    for (const auto& [rank, host] : config().rank_cpu) {
      int node = -1;
      if (sscanf(host.c_str(), "n%d-", &node) == 1)
        m[rank] = node;
    }
    return m;
  }();
  auto it = nodes.find(world_rank);
  return it == nodes.end() ? -1 : it->second;
}
static bool within_node(const Rank& r, int peer, MPI_Comm comm) {
  if (peer < 0)  // MPI_ANY_SOURCE, MPI_PROC_NULL
    return false;
  int world = peer;
  if (comm != MPI_COMM_WORLD) {
    int inter = 0;
    MPI_Group group, everyone;
    PMPI_Comm_test_inter(comm, &inter);
    inter ? PMPI_Comm_remote_group(comm, &group) : PMPI_Comm_group(comm, &group);
    PMPI_Comm_group(MPI_COMM_WORLD, &everyone);
    PMPI_Group_translate_ranks(group, 1, &peer, everyone, &world);
    PMPI_Group_free(&group);
    PMPI_Group_free(&everyone);
  }
  int here = node_of(r.id);
  return here >= 0 && world >= 0 && node_of(world) == here;
}

static bool rendezvous(const MpiPath& p, int count, MPI_Datatype dt) {
  return message_bytes(count, dt) >= p.eager_threshold;
}

static void software(double seconds) {
  if (seconds > 0)
    sg4::this_actor::sleep_for(seconds);
}

/* The path's gap (machine key gaps.*, LogGP's g and G): after a send of s bytes starts,
 * the rank's next send on the path starts no sooner than gap(s) later; the caller waits
 * until then, as a LogP sender stalls. */
static void pace(MpiPath& p, bool intra, int count, MPI_Datatype dt) {
  double& next = intra ? p.next_intra : p.next_inter;
  if (now() < next)
    sg4::this_actor::sleep_for(next - now());
  double bytes = message_bytes(count, dt);
  const Segment* seg = segment_for(intra ? p.gap_intra : p.gap_inter, bytes);
  next = seg ? now() + seg->latency_s + bytes / seg->bandwidth : now();
}

ORR_EXPORT int MPI_Send(const void* buf, int count, MPI_Datatype dt, int dst, int tag, MPI_Comm comm) {
  MpiScope scope("MPI_Send");
  Placement at(scope.rank(), {buf});
  MpiPath& p = path_of(scope.rank(), buf);
  bool intra = within_node(scope.rank(), dst, comm);
  software(p.send(intra));
  pace(p, intra, count, dt);
  return rendezvous(p, count, dt) ? PMPI_Ssend(buf, count, dt, dst, tag, comm) : PMPI_Send(buf, count, dt, dst, tag, comm);
}

ORR_EXPORT int MPI_Isend(const void* buf, int count, MPI_Datatype dt, int dst, int tag, MPI_Comm comm,
                         MPI_Request* rq) {
  MpiScope scope("MPI_Isend");
  Placement at(scope.rank(), {buf}, true);
  MpiPath& p = path_of(scope.rank(), buf);
  bool intra = within_node(scope.rank(), dst, comm);
  software(p.send(intra));
  pace(p, intra, count, dt);
  int rc = rendezvous(p, count, dt) ? PMPI_Issend(buf, count, dt, dst, tag, comm, rq)
                                    : PMPI_Isend(buf, count, dt, dst, tag, comm, rq);
  posted(scope.rank(), *rq, {buf});
  return rc;
}

ORR_EXPORT int MPI_Recv(void* buf, int count, MPI_Datatype dt, int src, int tag, MPI_Comm comm, MPI_Status* st) {
  MpiScope scope("MPI_Recv");
  Placement at(scope.rank(), {buf});
  MPI_Status own;
  MPI_Status* status = st == MPI_STATUS_IGNORE ? &own : st;
  int rc = PMPI_Recv(buf, count, dt, src, tag, comm, status);
  software(path_of(scope.rank(), buf).recv(within_node(scope.rank(), status->MPI_SOURCE, comm)));
  return rc;
}

ORR_EXPORT int MPI_Irecv(void* buf, int count, MPI_Datatype dt, int src, int tag, MPI_Comm comm, MPI_Request* rq) {
  MpiScope scope("MPI_Irecv");
  Placement at(scope.rank(), {buf}, true);
  software(path_of(scope.rank(), buf).recv(within_node(scope.rank(), src, comm)));  // charged when posted
  int rc = PMPI_Irecv(buf, count, dt, src, tag, comm, rq);
  posted(scope.rank(), *rq, {buf});
  return rc;
}

ORR_EXPORT int MPI_Sendrecv(const void* sbuf, int scount, MPI_Datatype stype, int dst, int stag, void* rbuf, int rcount,
                            MPI_Datatype rtype, int src, int rtag, MPI_Comm comm, MPI_Status* st) {
  MpiScope scope("MPI_Sendrecv");
  Placement at(scope.rank(), {sbuf, rbuf});
  MpiPath& out = path_of(scope.rank(), sbuf);
  bool intra = within_node(scope.rank(), dst, comm);
  software(out.send(intra));
  pace(out, intra, scount, stype);
  MPI_Request rq[2];
  MPI_Status sts[2];
  PMPI_Irecv(rbuf, rcount, rtype, src, rtag, comm, &rq[0]);
  if (rendezvous(out, scount, stype))
    PMPI_Issend(sbuf, scount, stype, dst, stag, comm, &rq[1]);
  else
    PMPI_Isend(sbuf, scount, stype, dst, stag, comm, &rq[1]);
  int rc = PMPI_Waitall(2, rq, sts);
  if (st != MPI_STATUS_IGNORE)
    *st = sts[0];
  software(path_of(scope.rank(), rbuf).recv(within_node(scope.rank(), sts[0].MPI_SOURCE, comm)));
  return rc;
}

ORR_EXPORT int MPI_Wait(MPI_Request* rq, MPI_Status* st) {
  MpiScope scope("MPI_Wait");
  Placement at(scope.rank(), {});
  MPI_Request handle = *rq;
  int rc = PMPI_Wait(rq, st);
  completed(scope.rank(), handle);
  return rc;
}

ORR_EXPORT int MPI_Waitall(int n, MPI_Request rqs[], MPI_Status sts[]) {
  MpiScope scope("MPI_Waitall");
  Placement at(scope.rank(), {});
  std::vector<MPI_Request> handles(rqs, rqs + n);
  int rc = PMPI_Waitall(n, rqs, sts);
  for (MPI_Request h : handles)
    completed(scope.rank(), h);
  return rc;
}

ORR_EXPORT int MPI_Waitany(int n, MPI_Request rqs[], int* index, MPI_Status* st) {
  MpiScope scope("MPI_Waitany");
  Placement at(scope.rank(), {});
  std::vector<MPI_Request> handles(rqs, rqs + n);
  int rc = PMPI_Waitany(n, rqs, index, st);
  if (*index != MPI_UNDEFINED)
    completed(scope.rank(), handles[*index]);
  return rc;
}

ORR_EXPORT int MPI_Test(MPI_Request* rq, int* flag, MPI_Status* st) {
  MpiScope scope("MPI_Test");
  Placement at(scope.rank(), {});
  MPI_Request handle = *rq;
  int rc = PMPI_Test(rq, flag, st);
  if (*flag)
    completed(scope.rank(), handle);
  return rc;
}

ORR_EXPORT int MPI_Testall(int n, MPI_Request* rqs, int* flag, MPI_Status* sts) {
  MpiScope scope("MPI_Testall");
  Placement at(scope.rank(), {});
  std::vector<MPI_Request> handles(rqs, rqs + n);
  int rc = PMPI_Testall(n, rqs, flag, sts);
  if (*flag)
    for (MPI_Request h : handles)
      completed(scope.rank(), h);
  return rc;
}

ORR_EXPORT int MPI_Init(int* argc, char*** argv) {
  int rc = PMPI_Init(argc, argv);
  rank_self("MPI_Init");
  return rc;
}

ORR_EXPORT int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  int rc = PMPI_Init_thread(argc, argv, required, provided);
  rank_self("MPI_Init_thread");
  return rc;
}

/* SMPI groups MPI_COMM_TYPE_SHARED by simulated host, and every rank runs on
 * its own GPU's host: group by node instead, as on the real machine. */
ORR_EXPORT int MPI_Comm_split_type(MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm* out) {
  if (type != MPI_COMM_TYPE_SHARED)
    return PMPI_Comm_split_type(comm, type, key, info, out);
  Rank& r = rank_self("MPI_Comm_split_type");
  const char* node = r.host->get_property("orrery:node");
  return PMPI_Comm_split(comm, node ? atoi(node) : 0, key, out);
}

ORR_EXPORT int MPI_Finalize(void) {
  Rank& r = rank_self("MPI_Finalize");
  r.stats.end_s = now();
  return PMPI_Finalize();
}
