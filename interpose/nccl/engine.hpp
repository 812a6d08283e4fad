/* NCCL's stand-in: what its families share. A communicator is one member of a clique (the
 * communicators made from one unique id, or by one split); every member belongs to the
 * simulated rank (SMPI actor) that created it, on the CUDA device current then. A collective is
 * the k-th collective call of every member of its clique: each member's call is an operation of
 * its CUDA stream (core: Op::Collective), and when the last member's stream reaches it, that
 * stream's actor executes the whole collective (schedules.cpp) while the others wait for it.
 * Point-to-point calls pair the k-th send from a to b with the k-th receive on b from a; a pair's
 * transfer starts when both streams have reached it.
 *
 * Its parts: communicators.cpp (ids, creation, splits, queries), groups.cpp (ncclGroupStart/End:
 * what is deferred, how a group launches), collectives.cpp (the calls that enqueue work),
 * schedules.cpp (each algorithm's transfers on the platform), tuning.cpp (NCCL's choice of
 * algorithm, protocol and channels). */
#ifndef ORRERY_NCCL_ENGINE_HPP
#define ORRERY_NCCL_ENGINE_HPP

#include "core/ranks.hpp"
#include "core/runtime.hpp"
#include "nccl/nccl_api.h"
#include "nccl/tuning.hpp"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace orrery::nccl {

struct Clique;

/* One collective call of a member, or one point-to-point part. */
struct Work {
  enum Kind { Coll, Send, Recv } kind = Coll;
  const char* call = "";  // the NCCL function ("ncclAllReduce")
  int func = kAllReduce;  // a collective's tuning function (tuning.hpp), or -1 for ncclAlltoAll
  size_t bytes = 0;       // a collective's count x type size (per rank); a part's message size
  int root = 0;           // a rooted collective's root; a part's peer
  uint64_t seq = 0;       // which collective of the clique, or which part between the pair
  int call_id = 0;        // which API call of its rank (the parts of one ncclAlltoAll share it)
};

}  // namespace orrery::nccl

/* The handle a program holds (ncclComm_t): one member of a clique. */
struct ncclComm {
  orrery::nccl::Clique* clique = nullptr;
  int rank = 0;                   // in the clique
  int device = 0;                 // the CUDA device of its rank
  orrery::Rank* owner = nullptr;  // the simulated rank driving it
  orrery::Gpu* gpu = nullptr;
  uint64_t collectives = 0;                 // collective calls made so far
  std::map<int, uint64_t> sends, receives;  // point-to-point parts so far, per peer
  uint64_t split_calls = 0;
  // notified as each point-to-point part it sends or receives completes: its stream waits there,
  // not on the clique's condition, which an all-to-all's n^2 parts would notify to every member
  // (n^3 wake-ups: 128 GPUs, 16 256 parts a call, took 8 s a call)
  sg4::ConditionVariablePtr parts_changed = sg4::ConditionVariable::create();
  bool finalized = false, destroyed = false;
  std::string last_error;
};

namespace orrery::nccl {

struct Collective {  // one collective of a clique, in flight
  Work work;         // as its first member called it
  Choice choice{};   // NCCL's algorithm, protocol and channels for it
  int arrived = 0, left = 0;
  bool done = false;
};

struct Part {        // one point-to-point transfer, in flight
  int from = 0, to = 0;  // clique ranks
  size_t bytes = 0;
  bool send_ready = false, recv_ready = false, done = false;
  double end_s = 0;
  std::function<void()> finished;  // once done (in the kernel): wakes those waiting for it
};

struct Clique {
  std::string name;  // for messages: "id 3" or "split 1 of id 3"
  int nranks = 0;
  std::vector<ncclComm*> members;  // by rank; nullptr until it joins
  int joined = 0;
  bool complete() const { return joined == nranks; }
  std::unique_ptr<Tuner> tuner;    // made once complete
  int nnodes = 1;
  std::map<uint64_t, Collective> collectives;
  std::map<std::pair<int, int>, std::map<uint64_t, std::shared_ptr<Part>>> parts;  // (from, to) -> seq -> part
  struct Split {
    int arrived = 0;
    std::vector<int> color, key;
    std::vector<ncclComm**> out;
    bool done = false;
  };
  std::map<uint64_t, Split> splits;
  sg4::ConditionVariablePtr changed = sg4::ConditionVariable::create();
};

/* ---- communicators.cpp ---- */
// Joins `comm` (made for the calling rank's current device) to the clique of `id` as `rank`.
ncclResult_t join(ncclComm* comm, Clique* clique, int rank, const char* call);
Clique* clique_of_id(const ncclUniqueId& id, int nranks, const char* call);
// Waits until the clique is complete (every member joined), as NCCL's initialisation does.
void wait_complete(Rank& r, Clique* c, const char* call);
// The clique's tuner and node count, once every member joined.
void finish_clique(Clique* c);
ncclResult_t check_comm(ncclComm_t comm, const char* call);
ncclResult_t set_error(ncclComm_t comm, ncclResult_t result, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
void split_arrive(Rank& r, ncclComm* comm, int color, int key, ncclComm** out, uint64_t seq);
void split_finish(Rank& r, ncclComm* comm, uint64_t seq);
void wait_until(const sg4::ConditionVariablePtr& cv, const std::function<bool()>& ready);

/* ---- groups.cpp ---- */
bool in_group(Rank& r);
// Deferred to the outermost ncclGroupEnd inside a group (its work on its stream: launched there).
void defer_init(Rank& r, Clique* c, const char* call);
void defer_split(Rank& r, ncclComm* comm, uint64_t seq);
// Enqueues `w` for comm on stream now (outside a group) or at the group's end; an error is a
// stream that refused the launch (a capture it would cross, core/capture.hpp).
ncclResult_t submit(Rank& r, ncclComm* comm, Stream* s, const Work& w);

/* ---- collectives.cpp ---- */
// The stream operation of a member's works on one stream (a group's, or one call's).
Op make_op(ncclComm* comm, std::vector<Work> works);

/* ---- schedules.cpp ---- */
// Executes collective `w` of clique `c` with its tuner's choice: every step's transfers between the
// members' GPUs on the platform; returns when the last transfer arrived.
void execute_collective(const Clique& c, const Work& w, const Choice& choice);
/* Starts one point-to-point transfer in the simulation's kernel, without an actor of its own (an
 * all-to-all's n^2 parts each took one, and its stack two memory maps: 256 GPUs passed
 * vm.max_map_count): NCCL's Ring/Simple step latency of its link class beyond its route's (a
 * timer), then its bytes over the route between the GPUs' copy engines, or to itself a copy in its
 * GPU's memory; part.finished() at its end. */
void start_part(const Clique& c, std::shared_ptr<Part> part);
size_t type_size(ncclDataType_t t);

}  // namespace orrery::nccl

#endif
