/* NCCL's communicators: unique ids, creation (by id, for several devices at once, by split),
 * their queries and end; versions and error strings; NCCL's memory and reduction operators.
 * A unique id is a number the stand-in hands out (no socket, no address in it): ranks pass it on
 * however they like (MPI_Bcast, a file), and every ncclCommInitRank given the same id joins the
 * same clique. */
#include "cudart/cuda_api.h"
#include "nccl/engine.hpp"

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <unordered_set>

namespace orrery::nccl {

namespace {
constexpr char kIdMagic[] = "orrery-nccl-id";
uint64_t g_next_id = 1;
std::map<uint64_t, std::unique_ptr<Clique>> g_id_cliques;
std::vector<std::unique_ptr<Clique>> g_split_cliques;
std::vector<std::unique_ptr<ncclComm>> g_comms;  // never freed: a destroyed handle stays recognisable
std::unordered_set<const ncclComm*> g_handles;    // the same, for the check every call makes

ncclComm* new_comm();

ncclComm* new_comm(Rank& r) {
  ncclComm* c = new_comm();
  c->owner = &r;
  c->device = r.device;
  c->gpu = &current_gpu(r);
  return c;
}

ncclComm* new_comm() {
  g_comms.push_back(std::make_unique<ncclComm>());
  g_handles.insert(g_comms.back().get());
  return g_comms.back().get();
}

bool known(const ncclComm* c) { return g_handles.count(c) > 0; }
}  // namespace

void wait_until(const sg4::ConditionVariablePtr& cv, const std::function<bool()>& ready) {
  std::unique_lock<sg4::Mutex> lock(*sim_mutex());
  while (!ready())
    cv->wait(lock);
}

ncclResult_t set_error(ncclComm_t comm, ncclResult_t result, const char* fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (comm && known(comm))
    comm->last_error = line;
  fprintf(stderr, "orrery: NCCL: %s\n", line);  // NCCL's WARN: the program sees the result
  return result;
}

ncclResult_t check_comm(ncclComm_t comm, const char* call) {
  if (!comm)
    return set_error(nullptr, ncclInvalidArgument, "%s: comm is NULL", call);
  if (!known(comm))
    return set_error(nullptr, ncclInvalidArgument, "%s: %p is not a communicator", call, (void*)comm);
  if (comm->destroyed)
    return set_error(comm, ncclInvalidUsage, "%s: the communicator was destroyed", call);
  return ncclSuccess;
}

Clique* clique_of_id(const ncclUniqueId& id, int nranks, const char* call) {
  uint64_t number = 0;
  if (memcmp(id.internal, kIdMagic, sizeof kIdMagic) != 0)
    return nullptr;
  memcpy(&number, id.internal + sizeof kIdMagic, sizeof number);
  std::unique_ptr<Clique>& c = g_id_cliques[number];
  if (!c) {
    // A clique's condition variable is made by a simcall, in which the other ranks run: one may
    // look the same id up meanwhile. The first clique made is the id's; a later one is dropped
    // (two ranks calling at the same simulated time once made one each and joined their own).
    auto made = std::make_unique<Clique>();
    if (!c) {
      made->name = "id " + std::to_string(number);
      made->nranks = nranks;
      made->members.assign(nranks, nullptr);
      c = std::move(made);
    }
  }
  return c.get();
}

ncclResult_t join(ncclComm* comm, Clique* c, int rank, const char* call) {
  if (rank < 0 || rank >= c->nranks)
    return set_error(nullptr, ncclInvalidArgument, "%s: rank %d out of range for %d ranks", call, rank, c->nranks);
  if (c->members[rank])
    return set_error(nullptr, ncclInvalidUsage, "%s: rank %d of the communicator of %s joined twice", call, rank,
                     c->name.c_str());
  comm->clique = c;
  comm->rank = rank;
  c->members[rank] = comm;
  if (++c->joined == c->nranks)
    finish_clique(c);
  c->changed->notify_all();
  return ncclSuccess;
}

void wait_complete(Rank& r, Clique* c, const char* call) {
  if (c->complete())
    return;
  // a rank that never joins leaves the others here: SimGrid's deadlock report names this call
  Rank::MpiCall saved = r.in_mpi;
  r.in_mpi.name = call;
  r.in_mpi.t0 = now();
  HostSpan creating(r, HostState::Collective);  // a communicator's creation is collective
  wait_until(c->changed, [c] { return c->complete(); });
  r.in_mpi = saved;
}

void finish_clique(Clique* c) {
  CommShape shape;
  shape.nranks = c->nranks;
  std::map<int, int> per_node;
  for (const ncclComm* m : c->members)
    per_node[m->gpu->node]++;
  shape.nnodes = (int)per_node.size();
  for (auto& [node, n] : per_node)
    shape.max_local_ranks = std::max(shape.max_local_ranks, n);
  const cudaDeviceProp& p = c->members[0]->gpu->prop;
  shape.sm = p.major * 10 + p.minor;
  const NcclModel& model = run_description().nccl;
  shape.intra_nvlink = model.intra_nvlink;
  shape.nvswitch = model.nvswitch;
  shape.intra_bw = model.intra_bandwidth;
  shape.inter_bw = model.inter_bandwidth;
  c->nnodes = shape.nnodes;
  c->tuner = std::make_unique<Tuner>(shape);
}

/* ---- splits: every member of the parent calls ncclCommSplit (its k-th split); the last one in
 * makes the new cliques, by color, ranked by key then by parent rank ---- */
void split_arrive(Rank& r, ncclComm* comm, int color, int key, ncclComm** out, uint64_t seq) {
  Clique* parent = comm->clique;
  Clique::Split& s = parent->splits[seq];
  if (s.color.empty()) {
    s.color.assign(parent->nranks, NCCL_SPLIT_NOCOLOR);
    s.key.assign(parent->nranks, 0);
    s.out.assign(parent->nranks, nullptr);
  }
  s.color[comm->rank] = color;
  s.key[comm->rank] = key;
  s.out[comm->rank] = out;
  *out = nullptr;
  if (++s.arrived < parent->nranks)
    return;
  std::map<int, std::vector<std::pair<int, int>>> by_color;  // color -> (key, parent rank)
  for (int i = 0; i < parent->nranks; i++)
    if (s.color[i] != NCCL_SPLIT_NOCOLOR)
      by_color[s.color[i]].push_back({s.key[i], i});
  for (auto& [col, ranks] : by_color) {
    std::sort(ranks.begin(), ranks.end());
    g_split_cliques.push_back(std::make_unique<Clique>());  // made, then added: no rank runs between
    Clique* c = g_split_cliques.back().get();
    c->name = "split " + std::to_string(seq) + " (color " + std::to_string(col) + ") of " + parent->name;
    c->nranks = (int)ranks.size();
    c->members.assign(c->nranks, nullptr);
    for (int k = 0; k < c->nranks; k++) {
      const ncclComm* old = parent->members[ranks[k].second];
      ncclComm* m = new_comm();
      m->owner = old->owner;
      m->device = old->device;
      m->gpu = old->gpu;
      *s.out[ranks[k].second] = m;
      join(m, c, k, "ncclCommSplit");
    }
  }
  s.done = true;
  parent->changed->notify_all();
}

void split_finish(Rank& r, ncclComm* comm, uint64_t seq) {
  Clique* parent = comm->clique;
  Clique::Split& s = parent->splits[seq];
  if (s.done)
    return;
  Rank::MpiCall saved = r.in_mpi;
  r.in_mpi.name = "ncclCommSplit";
  r.in_mpi.t0 = now();
  HostSpan splitting(r, HostState::Collective);
  wait_until(parent->changed, [&s] { return s.done; });
  r.in_mpi = saved;
}

size_t type_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
  }
}

static ncclResult_t init_rank(ncclComm_t* out, int nranks, const ncclUniqueId& id, int rank, const char* call) {
  Rank& r = rank_self(call);
  if (!out)
    return set_error(nullptr, ncclInvalidArgument, "%s: comm is NULL", call);
  if (nranks < 1)
    return set_error(nullptr, ncclInvalidArgument, "%s: nranks %d is not positive", call, nranks);
  Clique* c = clique_of_id(id, nranks, call);
  if (!c)
    return set_error(nullptr, ncclInvalidArgument, "%s: the unique id was not made by ncclGetUniqueId", call);
  if (c->nranks != nranks)
    return set_error(nullptr, ncclInvalidArgument, "%s: nranks %d, but the communicator of %s has %d", call, nranks,
                     c->name.c_str(), c->nranks);
  ncclComm* comm = new_comm(r);
  if (ncclResult_t e = join(comm, c, rank, call))
    return e;
  *out = comm;
  if (in_group(r))
    defer_init(r, c, call);
  else
    wait_complete(r, c, call);
  return ncclSuccess;
}

}  // namespace orrery::nccl

using namespace orrery;
using namespace orrery::nccl;

ORR_NCCL_EXPORT ncclResult_t ncclGetVersion(int* version) {
  if (!version)
    return set_error(nullptr, ncclInvalidArgument, "ncclGetVersion: version is NULL");
  *version = 23007;  // the API modelled: NCCL 2.30.7's (nccl_abi.h)
  return ncclSuccess;
}

ORR_NCCL_EXPORT const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    case ncclTimeout: return "NCCL operation timed out";
    default: return "unknown result code";
  }
}

ORR_NCCL_EXPORT const char* ncclGetLastError(ncclComm_t comm) {
  return comm && known(comm) ? comm->last_error.c_str() : "";
}

ORR_NCCL_EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  rank_self("ncclGetUniqueId");
  if (!uniqueId)
    return set_error(nullptr, ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  memset(uniqueId->internal, 0, sizeof uniqueId->internal);
  memcpy(uniqueId->internal, kIdMagic, sizeof kIdMagic);
  uint64_t number = g_next_id++;
  memcpy(uniqueId->internal + sizeof kIdMagic, &number, sizeof number);
  return ncclSuccess;
}

ORR_NCCL_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return init_rank(comm, nranks, commId, rank, "ncclCommInitRank");
}

ORR_NCCL_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                                    ncclConfig_t* config) {
  if (config && config->magic != NCCL_API_MAGIC)
    return set_error(nullptr, ncclInvalidArgument,
                     "ncclCommInitRankConfig: config was not initialised with NCCL_CONFIG_INITIALIZER");
  // every field of the config is a hint to NCCL's implementation (CTAs, net, blocking): a
  // non-blocking communicator is ready at once here, which ncclCommGetAsyncError then says
  return init_rank(comm, nranks, commId, rank, "ncclCommInitRankConfig");
}

ORR_NCCL_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist) {
  Rank& r = rank_self("ncclCommInitAll");
  if (!comm || ndev < 1)
    return set_error(nullptr, ncclInvalidArgument, "ncclCommInitAll: comm is NULL or ndev %d is not positive", ndev);
  ncclUniqueId id;
  ncclGetUniqueId(&id);
  Clique* c = clique_of_id(id, ndev, "ncclCommInitAll");
  int current = r.device;
  for (int i = 0; i < ndev; i++) {
    int dev = devlist ? devlist[i] : i;
    if (dev < 0 || dev >= (int)r.gpus.size()) {
      r.device = current;
      return set_error(nullptr, ncclInvalidArgument, "ncclCommInitAll: device %d: the node has %zu GPUs", dev,
                       r.gpus.size());
    }
    r.device = dev;
    comm[i] = new_comm(r);
    join(comm[i], c, i, "ncclCommInitAll");
  }
  r.device = current;
  return ncclSuccess;
}

ORR_NCCL_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                                           ncclConfig_t* config) {
  Rank& r = rank_self("ncclCommSplit");
  if (ncclResult_t e = check_comm(comm, "ncclCommSplit"))
    return e;
  if (!newcomm)
    return set_error(comm, ncclInvalidArgument, "ncclCommSplit: newcomm is NULL");
  if (color < 0 && color != NCCL_SPLIT_NOCOLOR)
    return set_error(comm, ncclInvalidArgument, "ncclCommSplit: color %d is negative", color);
  uint64_t seq = comm->split_calls++;
  split_arrive(r, comm, color, key, newcomm, seq);
  if (in_group(r))
    defer_split(r, comm, seq);
  else
    split_finish(r, comm, seq);
  return ncclSuccess;
}

ORR_NCCL_EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  if (ncclResult_t e = check_comm(comm, "ncclCommFinalize"))
    return e;
  comm->finalized = true;
  return ncclSuccess;
}

ORR_NCCL_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm)
    return ncclSuccess;  // NCCL accepts a NULL communicator here
  if (ncclResult_t e = check_comm(comm, "ncclCommDestroy"))
    return e;
  comm->destroyed = true;
  return ncclSuccess;
}

ORR_NCCL_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (!comm)
    return ncclSuccess;
  if (ncclResult_t e = check_comm(comm, "ncclCommAbort"))
    return e;
  comm->destroyed = true;
  return ncclSuccess;
}

ORR_NCCL_EXPORT ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  if (ncclResult_t e = check_comm(comm, "ncclCommCount"))
    return e;
  if (!count)
    return set_error(comm, ncclInvalidArgument, "ncclCommCount: count is NULL");
  *count = comm->clique->nranks;
  return ncclSuccess;
}

ORR_NCCL_EXPORT ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  if (ncclResult_t e = check_comm(comm, "ncclCommCuDevice"))
    return e;
  if (!device)
    return set_error(comm, ncclInvalidArgument, "ncclCommCuDevice: device is NULL");
  *device = comm->device;
  return ncclSuccess;
}

ORR_NCCL_EXPORT ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  if (ncclResult_t e = check_comm(comm, "ncclCommUserRank"))
    return e;
  if (!rank)
    return set_error(comm, ncclInvalidArgument, "ncclCommUserRank: rank is NULL");
  *rank = comm->rank;
  return ncclSuccess;
}

ORR_NCCL_EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  if (ncclResult_t e = check_comm(comm, "ncclCommGetAsyncError"))
    return e;
  if (!asyncError)
    return set_error(comm, ncclInvalidArgument, "ncclCommGetAsyncError: asyncError is NULL");
  *asyncError = ncclSuccess;  // a simulated network never fails; a failed program ends the run
  return ncclSuccess;
}

ORR_NCCL_EXPORT ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  rank_self("ncclMemAlloc");
  if (!ptr)
    return set_error(nullptr, ncclInvalidArgument, "ncclMemAlloc: ptr is NULL");
  return cudaMalloc(ptr, size) == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError;
}

ORR_NCCL_EXPORT ncclResult_t ncclMemFree(void* ptr) {
  rank_self("ncclMemFree");
  return cudaFree(ptr) == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError;
}

ORR_NCCL_EXPORT ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                                      ncclScalarResidence_t residence, ncclComm_t comm) {
  if (ncclResult_t e = check_comm(comm, "ncclRedOpCreatePreMulSum"))
    return e;
  if (!op || type_size(datatype) == 0)
    return set_error(comm, ncclInvalidArgument, "ncclRedOpCreatePreMulSum: op is NULL or datatype %d unknown",
                     (int)datatype);
  // a reduction's arithmetic is not simulated (it runs within the transfers' time): any operator
  // is a sum for the clock; the handle only has to be distinct from the built-in ones
  *op = (ncclRedOp_t)ncclNumOps;
  return ncclSuccess;
}

ORR_NCCL_EXPORT ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  if (ncclResult_t e = check_comm(comm, "ncclRedOpDestroy"))
    return e;
  if ((int)op < (int)ncclNumOps)
    return set_error(comm, ncclInvalidArgument, "ncclRedOpDestroy: %d is a built-in operator", (int)op);
  return ncclSuccess;
}
