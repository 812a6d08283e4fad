/* The timeline trace (trace.hpp): the event file's rows, written through the writers generated
 * from run_description.json's trace_rows, for the kept ranks and the window only. */
#include "core/trace.hpp"

#include "core/ranks.hpp"

#include <cstdio>
#include <list>
#include <map>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace orrery::trace {

bool g_on = false;

namespace {

/* A receive posted and not yet numbered: numbered once it completed and no receive posted
 * before it that could have taken the same message is still open (trace.hpp). */
struct PostedReceive {
  const void* token;
  int source, tag, comm;   // what it matches (Rank::kAnyPeer: any)
  const void* comm_handle;
  bool done = false;
  int from = -1, with_tag = -1;  // what it received
  uint64_t call = 0;
  double time = 0;
};

using Key = std::tuple<int, int, int>;  // (peer, tag, comm)

struct Open {  // a slice begun and not yet written
  const char* name = nullptr;
  double t0 = 0;
  uint64_t bytes = 0;
  std::string detail;
};

struct RankTrace {
  bool kept = false;
  bool paired = true;  // its receives can still be numbered
  uint64_t calls = 0;  // MPI calls so far
  int cuda_depth = 0;
  Open cuda, wait;
  std::map<Key, uint64_t> sent, received;  // messages numbered so far, per (peer, tag, comm)
  std::list<PostedReceive> posted;         // in the order they were posted (stable addresses)
};

struct OpenOp {  // the operation a stream is executing
  const Op* op = nullptr;
  double t0 = 0;
  const CopyEngines* engine = nullptr;
  int unit = -1;
  double engine_t0 = 0;
};

struct State {
  FILE* file = nullptr;
  double begin = 0, end = 0;
  std::vector<RankTrace> ranks;  // by rank id
  std::unordered_map<const Stream*, OpenOp> running;
  std::unordered_map<const Stream*, int> numbers;
  std::unordered_map<const CopyEngines*, std::vector<bool>> units;  // busy copy engines, by unit
  bool finished = false;
};
State g;

RankTrace* of(const Rank& r) {
  if (r.id < 0 || r.id >= (int)g.ranks.size() || !g.ranks[r.id].kept)
    return nullptr;
  return &g.ranks[r.id];
}

bool in_window(double t0, double t1) { return t1 >= g.begin && t0 <= g.end; }

/* As the report numbers streams: 0 for the legacy default stream of a device, k for the
 * rank's k-th created stream. */
int stream_number(const Stream* s) {
  auto it = g.numbers.find(s);
  if (it != g.numbers.end())
    return it->second;
  int k = 0;
  if (!s->legacy)
    for (const Stream* o : s->rank->streams) {
      k += !o->legacy;
      if (o == s)
        break;
    }
  return g.numbers[s] = k;
}

std::string dims(const dim3& d) {
  return std::to_string(d.x) + "x" + std::to_string(d.y) + "x" + std::to_string(d.z);
}

const char* category(const Op& op) {
  switch (op.kind) {
    case Op::Kernel: return "kernel";
    case Op::Copy: return "copy";
    case Op::Memset: return "memset";
    case Op::HostFn: return "host_fn";
    case Op::Collective: return "nccl";
    default: return nullptr;  // records and waits: no slice of their own
  }
}

std::string op_name(const Op& op) {
  switch (op.kind) {
    case Op::Kernel: return op.name;
    case Op::Copy: return copy_kind_name(op.copy);
    case Op::Memset: return "memset";
    case Op::HostFn: return "host function";
    case Op::Record: return "event record";
    case Op::Wait: return "event wait";
    case Op::Collective: return op.name;
    case Op::Free: return "stream-ordered free";
  }
  return "?";
}

void write_op(const Stream* s, const Op& op, double t0, double t1, const char* detail) {
  const char* cat = category(op);
  if (!cat || !in_window(t0, t1))
    return;
  bool kernel = op.kind == Op::Kernel;
  write_trace_op(g.file, s->rank->id, s->device, stream_number(s), cat, op_name(op).c_str(), t0, t1,
                 (int64_t)op.bytes, kernel ? dims(op.grid).c_str() : "", kernel ? dims(op.block).c_str() : "",
                 detail);
}

const char* engine_name(const Gpu& gpu, const CopyEngines* engine) {
  if (gpu.h2d_engine == gpu.d2h_engine)
    return "copy";
  return engine == gpu.h2d_engine ? "H2D" : "D2H";
}

void write_engine(const Stream* s, const Op& op, const CopyEngines* engine, int unit, double t0, double t1) {
  if (!of(*s->rank) || !in_window(t0, t1))
    return;
  write_trace_engine(g.file, s->gpu->node, s->gpu->index, engine_name(*s->gpu, engine), unit,
                     copy_kind_name(op.copy), t0, t1, (int64_t)op.bytes, s->rank->id, s->device, stream_number(s));
}

void write_host(const Rank& r, const char* cat, const Open& o, double t1, const char* detail) {
  if (in_window(o.t0, t1))
    write_trace_host(g.file, r.id, cat, o.name, o.t0, t1, (int64_t)o.bytes, Rank::kNoPeer, Rank::kNoPeer, 0,
                     detail);
}

bool could_match(const PostedReceive& p, const PostedReceive& done) {
  return p.comm == done.comm && (p.source == Rank::kAnyPeer || p.source == done.from) &&
         (p.tag == Rank::kAnyPeer || p.tag == done.with_tag);
}

/* Numbers every completed receive that no open one posted before it could have preceded. One
 * held back until the end (by a receive that never completed) stays unnumbered: no arrow rather
 * than a wrong one. */
void number_receives(const Rank& r, RankTrace& t) {
  std::vector<const PostedReceive*> open;
  for (auto it = t.posted.begin(); it != t.posted.end();) {
    if (!it->done) {
      open.push_back(&*it);
      ++it;
      continue;
    }
    bool held = false;
    for (size_t i = 0; i < open.size() && !held; i++)
      held = could_match(*open[i], *it);
    if (held) {
      ++it;
      continue;
    }
    uint64_t seq = t.received[{it->from, it->with_tag, it->comm}]++;
    if (in_window(it->time, it->time))
      write_trace_recv(g.file, r.id, it->from, it->with_tag, it->comm, (int64_t)seq, (int64_t)it->call, it->time);
    it = t.posted.erase(it);
  }
}

}  // namespace

void install() {
  const std::optional<Trace>& t = run_description().trace;
  if (!t)
    return;
  g.file = fopen(t->events.c_str(), "w");
  if (!g.file)
    fatal("cannot write the trace's event file %s (run description key trace.events)", t->events.c_str());
  static std::vector<char> buffer(1 << 20);  // rows are small and many: write them in large blocks
  setvbuf(g.file, buffer.data(), _IOFBF, buffer.size());
  g.begin = t->begin_s;
  g.end = t->end_s;
  g.ranks.resize(run_description().ranks.size());
  for (RankTrace& r : g.ranks)
    r.kept = t->ranks.empty();
  for (int64_t id : t->ranks)
    if (id >= 0 && id < (int64_t)g.ranks.size())
      g.ranks[id].kept = true;
  sg4::Engine::on_simulation_end_cb(finish);
  g_on = true;
}

void finish() {
  if (!g_on || g.finished)
    return;
  g.finished = true;
  double t = now();
  for (auto& [pid, rank] : ranks()) {
    const Rank& r = *rank;
    RankTrace* rt = of(r);
    if (!rt)
      continue;
    if (const Rank::MpiCall& c = r.in_mpi; c.name && in_window(c.t0, t))
      write_trace_host(g.file, r.id, "mpi", c.name, c.t0, t, (int64_t)c.bytes, c.peer, c.tag, (int64_t)c.call,
                       "unfinished");
    if (rt->cuda_depth > 0)
      write_host(r, "cuda", rt->cuda, t, "unfinished");
    if (rt->wait.name)
      write_host(r, "wait", rt->wait, t, "unfinished");
  }
  for (auto& [s, open] : g.running) {
    if (!open.op || !of(*s->rank))
      continue;
    write_op(s, *open.op, open.t0, t, "unfinished");
    if (open.engine)
      write_engine(s, *open.op, open.engine, open.unit, open.engine_t0, t);
  }
  fclose(g.file);
  g.file = nullptr;
  g_on = false;
}

/* ---------------- host tracks ---------------- */

uint64_t mpi_begin(Rank& r) {
  RankTrace* t = of(r);
  return t ? ++t->calls : 0;
}

void mpi_end(const Rank& r, const Rank::MpiCall& c) {
  double t1 = host_now(r);
  if (of(r) && in_window(c.t0, t1))
    write_trace_host(g.file, r.id, "mpi", c.name, c.t0, t1, (int64_t)c.bytes, c.peer, c.tag, (int64_t)c.call, "");
}

void CudaCall::begin(const char* name) {
  RankTrace* t = of(*rank_);
  if (!t || t->cuda_depth++ > 0)
    return;
  t->cuda = Open{name, host_now(*rank_), 0, {}};
}

void CudaCall::set(const std::string& detail, uint64_t bytes) {
  if (RankTrace* t = of(*rank_); t && t->cuda_depth == 1) {
    t->cuda.detail = detail;
    t->cuda.bytes = bytes;
  }
}

void CudaCall::end() {
  RankTrace* t = of(*rank_);
  if (!t || --t->cuda_depth > 0)
    return;
  double t1 = host_now(*rank_);
  if (t1 > t->cuda.t0)  // a call that took no simulated time has nothing to show
    write_host(*rank_, "cuda", t->cuda, t1, t->cuda.detail.c_str());
}

void gpu_wait_begin(Rank& r, const Stream* s, int device) {
  RankTrace* t = of(r);
  if (!t)
    return;
  std::string what = s ? (s->legacy ? "default stream" : "stream " + std::to_string(stream_number(s))) +
                             " (device " + std::to_string(device) + ")"
                       : "every stream of device " + std::to_string(device);
  t->wait = Open{"wait for GPU", host_now(r), 0, what};
}

void gpu_wait_end(Rank& r) {
  RankTrace* t = of(r);
  if (!t || !t->wait.name)
    return;
  double t1 = host_now(r);
  if (t1 > t->wait.t0)
    write_host(r, "wait", t->wait, t1, t->wait.detail.c_str());
  t->wait.name = nullptr;
}

/* ---------------- streams and copy engines ---------------- */

void op_begin(const Stream* s, const Op& op) {
  if (category(op))
    g.running[s] = OpenOp{&op, now()};
}

void op_end(const Stream* s, const Op& op, double t0) {
  g.running.erase(s);
  if (!of(*s->rank))
    return;
  if (op.kind == Op::Record) {
    if (op.event->stream == s && op.event->seq == s->completed + 1 && in_window(now(), now()))
      write_trace_mark(g.file, s->rank->id, s->device, stream_number(s), "event record", now());
    return;
  }
  write_op(s, op, t0, now(), "");
}

void held(const Stream* s, const Op& op, const char* what, double since) {
  if (!of(*s->rank) || now() <= since || !in_window(since, now()))
    return;
  std::string detail = op_name(op);
  write_trace_op(g.file, s->rank->id, s->device, stream_number(s), "wait", what, since, now(), 0, "", "",
                 detail.c_str());
}

int engine_begin(const Stream* s, const Op& op, const CopyEngines* engine) {
  // Every rank's copies take units, kept or not: the kept ones then show the unit they had.
  std::vector<bool>& busy = g.units[engine];
  size_t unit = 0;
  while (unit < busy.size() && busy[unit])
    unit++;
  if (unit == busy.size())
    busy.push_back(false);
  busy[unit] = true;
  auto it = g.running.find(s);
  if (it != g.running.end()) {
    it->second.engine = engine;
    it->second.unit = (int)unit;
    it->second.engine_t0 = now();
  }
  return (int)unit;
}

void engine_end(const Stream* s, const Op& op, const CopyEngines* engine, int unit, double t0) {
  g.units[engine][unit] = false;
  auto it = g.running.find(s);
  if (it != g.running.end())
    it->second.engine = nullptr;
  write_engine(s, op, engine, unit, t0, now());
}

/* ---------------- messages ---------------- */

void sent(Rank& r, int peer, int tag, int comm, uint64_t bytes) {
  RankTrace* t = of(r);
  if (!t || peer < 0)
    return;
  uint64_t seq = t->sent[{peer, tag, comm}]++;
  double at = host_now(r);
  if (in_window(at, at))
    write_trace_send(g.file, r.id, peer, tag, comm, (int64_t)seq, (int64_t)r.in_mpi.call, (int64_t)bytes, at);
}

void recv_posted(Rank& r, const void* token, int source, int tag, int comm, const void* comm_handle) {
  RankTrace* t = of(r);
  if (!t || !t->paired || (source < 0 && source != Rank::kAnyPeer))  // MPI_PROC_NULL: no message
    return;
  t->posted.push_back(PostedReceive{token, source, tag, comm, comm_handle});
}

static PostedReceive* open_receive(const Rank& r, const void* token) {
  if (r.id < 0 || r.id >= (int)g.ranks.size() || !g.ranks[r.id].kept)
    return nullptr;
  for (PostedReceive& p : g.ranks[r.id].posted)
    if (p.token == token && !p.done)  // a persistent request's token comes back with each start
      return &p;
  return nullptr;
}

const void* recv_comm(const Rank& r, const void* token) {
  const PostedReceive* p = open_receive(r, token);
  return p ? p->comm_handle : nullptr;
}

void recv_completed(Rank& r, const void* token, int source, int tag) {
  PostedReceive* p = open_receive(r, token);
  if (!p)
    return;
  RankTrace& t = *of(r);
  if (source < 0) {
    recv_dropped(r, token);
    return;
  }
  p->done = true;
  p->from = source;
  p->with_tag = tag;
  p->call = r.in_mpi.call;
  p->time = host_now(r);
  number_receives(r, t);
}

void unpaired(Rank& r) {
  if (RankTrace* t = of(r)) {
    t->paired = false;
    t->posted.clear();
  }
}

void recv_dropped(Rank& r, const void* token) {
  PostedReceive* p = open_receive(r, token);
  if (!p)
    return;
  RankTrace& t = *of(r);
  for (auto it = t.posted.begin(); it != t.posted.end(); ++it)
    if (&*it == p) {
      t.posted.erase(it);
      break;
    }
  number_receives(r, t);
}

}  // namespace orrery::trace
