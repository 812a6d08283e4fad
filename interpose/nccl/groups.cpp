/* NCCL's group semantics, per simulated rank: between ncclGroupStart and the outermost
 * ncclGroupEnd, communicator creation and splits only register (so that one thread may create
 * the communicators of all its GPUs, which would otherwise wait for each other) and collective
 * and point-to-point calls only collect; ncclGroupEnd completes the creations, then launches the
 * collected work: one stream operation per communicator and stream, in the order of their first
 * call, each launch costing the host one kernel launch (NCCL fuses a group's operations on a
 * communicator into one kernel). */
#include "nccl/engine.hpp"

#include <algorithm>

namespace orrery::nccl {

namespace {
struct Launch {
  ncclComm* comm;
  Stream* stream;
  std::vector<Work> works;
};

struct Group {
  int depth = 0;
  std::vector<Clique*> inits;
  std::vector<std::pair<ncclComm*, uint64_t>> splits;
  std::vector<Launch> launches;
};

std::map<int, Group> g_groups;  // by rank id

ncclResult_t launch(Rank& r, ncclComm* comm, Stream* s, std::vector<Work> works) {
  host_overhead(r, comm->gpu->launch_overhead_s);
  const char* call = works[0].call;
  if (cudaError_t e = enqueue(s, make_op(comm, std::move(works))))  // as NCCL's kernel launch fails
    return set_error(comm, ncclUnhandledCudaError, "%s: the launch on its stream failed: CUDA error %d", call, e);
  return ncclSuccess;
}
}  // namespace

bool in_group(Rank& r) { return g_groups[r.id].depth > 0; }

void defer_init(Rank& r, Clique* c, const char* call) { g_groups[r.id].inits.push_back(c); }

void defer_split(Rank& r, ncclComm* comm, uint64_t seq) { g_groups[r.id].splits.push_back({comm, seq}); }

ncclResult_t submit(Rank& r, ncclComm* comm, Stream* s, const Work& w) {
  Group& g = g_groups[r.id];
  if (g.depth == 0)
    return launch(r, comm, s, {w});
  auto it = std::find_if(g.launches.begin(), g.launches.end(),
                         [&](const Launch& l) { return l.comm == comm && l.stream == s; });
  if (it == g.launches.end())
    g.launches.push_back({comm, s, {w}});
  else
    it->works.push_back(w);
  return ncclSuccess;
}

}  // namespace orrery::nccl

using namespace orrery;
using namespace orrery::nccl;

ORR_NCCL_EXPORT ncclResult_t ncclGroupStart(void) {
  Rank& r = rank_self("ncclGroupStart");
  g_groups[r.id].depth++;
  return ncclSuccess;
}

ORR_NCCL_EXPORT ncclResult_t ncclGroupEnd(void) {
  Rank& r = rank_self("ncclGroupEnd");
  Group& g = g_groups[r.id];
  if (g.depth == 0)
    return set_error(nullptr, ncclInvalidUsage, "ncclGroupEnd: not in a group (no ncclGroupStart)");
  if (--g.depth > 0)
    return ncclSuccess;
  Group done = std::move(g);
  g_groups.erase(r.id);
  for (auto& [comm, seq] : done.splits)
    split_finish(r, comm, seq);
  for (Clique* c : done.inits)
    wait_complete(r, c, "ncclGroupEnd");
  ncclResult_t result = ncclSuccess;
  for (Launch& l : done.launches)
    if (ncclResult_t e = launch(r, l.comm, l.stream, std::move(l.works)); e && !result)
      result = e;
  return result;
}
