/* NCCL's collective and point-to-point calls: each checks its arguments as NCCL does, numbers
 * itself within its clique (the k-th collective of every member is one collective; the k-th send
 * from a to b pairs with the k-th receive on b from a) and is submitted to its stream (groups.cpp:
 * now, or at the group's end). Its stream operation (make_op) executes the member's part when the
 * stream reaches it: a collective waits for its last member, whose stream executes it
 * (schedules.cpp); a point-to-point transfer starts once both streams reached it. The data of a
 * reduction is not computed (skeleton mode): its arithmetic is taken as hidden behind its
 * transfers, as NCCL's kernels overlap them. */
#include "nccl/engine.hpp"

namespace orrery::nccl {

namespace {
std::map<int, int> g_next_call;  // per rank: numbers the API calls within a launch, for the report

// The bytes NCCL's tuning counts for a collective: the per-rank buffer, and for AllGather and
// ReduceScatter the whole gathered vector.
size_t tuning_bytes(const Work& w, int nranks) {
  return w.func == kAllGather || w.func == kReduceScatter ? w.bytes * (size_t)nranks : w.bytes;
}

std::string entry_name(const Work& w, const Choice& ch) {
  if (w.kind != Work::Coll)
    return std::string(w.call) + " p2p/Simple";
  return std::string(w.call) + " " + algo_name(ch.algo) + "/" + proto_name(ch.proto);
}

void account(Rank& r, const std::string& name, size_t bytes, double seconds) {
  Tally& t = r.stats.nccl[name];
  t.count++;
  t.bytes += bytes;
  t.time_s += seconds;
}

void run_collective(ncclComm* comm, const Work& w) {
  Clique* c = comm->clique;
  double t0 = now();
  Collective& k = c->collectives[w.seq];
  if (k.arrived == 0) {
    k.work = w;
    k.choice = c->tuner->choose(w.func, tuning_bytes(w, c->nranks));
  } else if (k.work.func != w.func || k.work.bytes != w.bytes || k.work.root != w.root) {
    fatal("%s: rank %d of the NCCL communicator of %s called %s of %zu bytes (root %d) as its collective %llu; "
          "rank %d's was %s of %zu bytes (root %d): a real NCCL would hang or corrupt the data",
          w.call, comm->rank, c->name.c_str(), w.call, w.bytes, w.root, (unsigned long long)w.seq,
          c->members[0] == comm ? 1 : 0, k.work.call, k.work.bytes, k.work.root);
  }
  if (++k.arrived == c->nranks) {
    execute_collective(*c, k.work, k.choice);
    k.done = true;
    c->changed->notify_all();
  } else {
    wait_until(c->changed, [&k] { return k.done; });
  }
  account(*comm->owner, entry_name(w, k.choice), w.bytes, now() - t0);
  if (++k.left == c->nranks)
    c->collectives.erase(w.seq);
}

std::shared_ptr<Part> arrive_part(ncclComm* comm, const Work& w) {
  Clique* c = comm->clique;
  bool send = w.kind == Work::Send;
  int from = send ? comm->rank : w.root, to = send ? w.root : comm->rank;
  auto& pending = c->parts[{from, to}];
  std::shared_ptr<Part>& slot = pending[w.seq];
  if (!slot) {
    slot = std::make_shared<Part>();
    slot->from = from;
    slot->to = to;
    slot->bytes = w.bytes;
  } else if (slot->bytes != w.bytes) {
    fatal("%s: rank %d's %s of %zu bytes pairs with a %s of %zu bytes (NCCL communicator of %s, rank %d to %d, "
          "message %llu)",
          w.call, comm->rank, send ? "send" : "receive", w.bytes, send ? "receive" : "send", slot->bytes,
          c->name.c_str(), from, to, (unsigned long long)w.seq);
  }
  std::shared_ptr<Part> p = slot;
  (send ? p->send_ready : p->recv_ready) = true;
  if (p->send_ready && p->recv_ready) {
    pending.erase(w.seq);
    p->finished = [c, p = p.get()] {
      c->members[p->from]->parts_changed->notify_all();
      if (p->to != p->from)
        c->members[p->to]->parts_changed->notify_all();
    };
    start_part(*c, p);
  }
  return p;
}

void run_works(ncclComm* comm, const std::vector<Work>& works) {
  double t0 = now();
  std::vector<std::pair<const Work*, std::shared_ptr<Part>>> parts;
  for (const Work& w : works)
    if (w.kind != Work::Coll)
      parts.push_back({&w, arrive_part(comm, w)});
  bool collective = false;
  for (const Work& w : works)
    if (w.kind == Work::Coll) {
      run_collective(comm, w);
      collective = true;
    }
  double collectives_end = now();  // then the stream waits for its point-to-point parts alone
  // a call's point-to-point entry: its parts' bytes, until the last of them arrived
  std::map<int, std::pair<const Work*, std::pair<size_t, double>>> calls;
  for (auto& [w, p] : parts) {
    std::shared_ptr<Part> part = p;
    wait_until(comm->parts_changed, [part] { return part->done; });
    auto& [first, tally] = calls.try_emplace(w->call_id, w, std::pair<size_t, double>{0, t0}).first->second;
    if (!(w->kind == Work::Recv && w->func == -1 && std::string(w->call) == "ncclAlltoAll"))
      tally.first += w->bytes;  // an all-to-all's bytes: its send buffer's
    tally.second = std::max(tally.second, part->end_s);
  }
  for (auto& [id, entry] : calls)
    account(*comm->owner, entry_name(*entry.first, {}), entry.second.first, entry.second.second - t0);
  Stats& st = comm->owner->stats;
  st.comm.add(t0, now());
  if (collective)
    st.nccl_collective.add(t0, collectives_end);
  if (!parts.empty())
    st.nccl_p2p.add(collective ? collectives_end : t0, now());
}

Stream* stream_of(Rank& r, ncclComm* comm, cudaStream_t stream, const char* call) {
  Stream* s = stream == nullptr || stream == cudaStreamLegacy ? legacy_stream(r, comm->device)
                                                              : resolve_stream(r, stream, call);
  if (s->device != comm->device)
    fatal("%s: the stream belongs to device %d, the NCCL communicator to device %d (rank %d)", call, s->device,
          comm->device, r.id);
  return s;
}

// The checks every call makes; nullptr when the call must return `*error`.
Rank* checked(ncclComm_t comm, const char* call, ncclResult_t* error) {
  Rank& r = rank_self(call);
  if ((*error = check_comm(comm, call)))
    return nullptr;
  if (comm->owner != &r)
    fatal("%s: rank %d used the NCCL communicator of rank %d", call, r.id, comm->owner->id);
  return &r;
}

// Which collective of its communicator a work is, or which part between its pair.
void number(ncclComm* comm, Work& w) {
  w.seq = w.kind == Work::Coll ? comm->collectives++ : (w.kind == Work::Send ? comm->sends : comm->receives)[w.root]++;
}

// Checks a call's arguments as NCCL does, numbers it (its collective, or its part between the
// pair; w.root is a collective's root or a part's peer) and submits it.
ncclResult_t submit_checked(Work w, size_t count, ncclDataType_t type, ncclComm_t comm, cudaStream_t stream,
                            int call_id) {
  ncclResult_t e;
  Rank* r = checked(comm, w.call, &e);
  if (!r)
    return e;
  if (type_size(type) == 0)
    return set_error(comm, ncclInvalidArgument, "%s: datatype %d is not an NCCL datatype", w.call, (int)type);
  if (w.root < 0 || w.root >= comm->clique->nranks)
    return set_error(comm, ncclInvalidArgument, "%s: %s %d out of range for %d ranks", w.call,
                     w.kind == Work::Coll ? "root" : "peer", w.root, comm->clique->nranks);
  w.bytes = count * type_size(type);
  number(comm, w);
  w.call_id = call_id < 0 ? g_next_call[r->id]++ : call_id;
  return submit(*r, comm, stream_of(*r, comm, stream, w.call), w);
}

ncclResult_t collective(const char* call, int func, size_t count, ncclDataType_t type, int root, ncclComm_t comm,
                        cudaStream_t stream) {
  Work w;
  w.kind = Work::Coll;
  w.call = call;
  w.func = func;
  w.root = root;
  return submit_checked(w, count, type, comm, stream, -1);
}

ncclResult_t point_to_point(const char* call, Work::Kind kind, size_t count, ncclDataType_t type, int peer,
                            ncclComm_t comm, cudaStream_t stream, int call_id) {
  Work w;
  w.kind = kind;
  w.call = call;
  w.func = -1;
  w.root = peer;
  return submit_checked(w, count, type, comm, stream, call_id);
}
}  // namespace

Op make_op(ncclComm* comm, std::vector<Work> works) {
  Op op{Op::Collective};
  op.name = works.size() == 1 ? works[0].call : "NCCL group of " + std::to_string(works.size()) + " operations";
  for (const Work& w : works)
    op.bytes += w.bytes;
  op.run = [comm, works](Stream*) { run_works(comm, works); };
  // Each launch of a graph that captured the operation is another collective (or part) of the
  // communicator: its members' launches pair by these numbers, as their calls do.
  op.relaunch = [comm, works = std::move(works)](Op& again) {
    std::vector<Work> fresh = works;
    std::map<int, int> ids;  // the parts of one ncclAlltoAll share their new call number
    for (Work& w : fresh) {
      number(comm, w);
      auto [it, added] = ids.try_emplace(w.call_id, 0);
      if (added)
        it->second = g_next_call[comm->owner->id]++;
      w.call_id = it->second;
    }
    again.run = [comm, fresh](Stream*) { run_works(comm, fresh); };
  };
  return op;
}

}  // namespace orrery::nccl

using namespace orrery;
using namespace orrery::nccl;

ORR_NCCL_EXPORT ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return collective("ncclAllReduce", kAllReduce, count, datatype, 0, comm, stream);
}

ORR_NCCL_EXPORT ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                           int root, ncclComm_t comm, cudaStream_t stream) {
  return collective("ncclBroadcast", kBroadcast, count, datatype, root, comm, stream);
}

ORR_NCCL_EXPORT ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                                       cudaStream_t stream) {
  return collective("ncclBcast", kBroadcast, count, datatype, root, comm, stream);
}

ORR_NCCL_EXPORT ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return collective("ncclReduce", kReduce, count, datatype, root, comm, stream);
}

ORR_NCCL_EXPORT ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return collective("ncclAllGather", kAllGather, sendcount, datatype, 0, comm, stream);
}

ORR_NCCL_EXPORT ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                               cudaStream_t stream) {
  return collective("ncclReduceScatter", kReduceScatter, recvcount, datatype, 0, comm, stream);
}

// NCCL runs an all-to-all as a group of sends and receives between every pair (itself included).
ORR_NCCL_EXPORT ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                          ncclComm_t comm, cudaStream_t stream) {
  ncclResult_t e;
  Rank* r = checked(comm, "ncclAlltoAll", &e);
  if (!r)
    return e;
  int id = g_next_call[r->id]++;
  ncclGroupStart();
  for (int peer = 0; peer < comm->clique->nranks && e == ncclSuccess; peer++) {
    e = point_to_point("ncclAlltoAll", Work::Send, count, datatype, peer, comm, stream, id);
    if (e == ncclSuccess)
      e = point_to_point("ncclAlltoAll", Work::Recv, count, datatype, peer, comm, stream, id);
  }
  ncclResult_t launched = ncclGroupEnd();
  return e ? e : launched;
}

ORR_NCCL_EXPORT ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                                      ncclComm_t comm, cudaStream_t stream) {
  return point_to_point("ncclSend", Work::Send, count, datatype, peer, comm, stream, -1);
}

ORR_NCCL_EXPORT ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                                      ncclComm_t comm, cudaStream_t stream) {
  return point_to_point("ncclRecv", Work::Recv, count, datatype, peer, comm, stream, -1);
}
