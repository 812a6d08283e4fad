/* The term breakdown of a rank's time (docs/running.md, "The terms"): its host timeline, each
 * instant in one state (the program's code, a CUDA API overhead, a wait for its GPU, an MPI
 * point-to-point call, a collective), and the split of that timeline into the terms by what its
 * GPU was doing meanwhile. Every instant of [0, end] goes to exactly one term, so the terms add
 * up to the rank's end time.
 *
 * Not here: the per-call and per-kernel tallies (their own accounting, which overlaps: a kernel
 * runs while the host is in MPI), the overlap of communication with computation (report.cpp). */
#include "core/runtime.hpp"

#include <algorithm>

namespace orrery {

namespace {
HostState innermost(const HostTimeline& t) { return t.stack.empty() ? HostState::Code : t.stack.back(); }

// The states the split looks into (what the GPU did meanwhile); the others are summed only.
bool waiting(HostState s) {
  return s == HostState::GpuWait || s == HostState::PointToPoint || s == HostState::Collective;
}

void record(HostTimeline& t, HostState s, double from, double to) {
  if (to <= from)
    return;
  t.seconds[(int)s] += to - from;
  if (waiting(s))
    t.spans[(int)s].add(from, to);
}

// The time since the innermost state began goes to that state, up to the rank's end: what a
// rank does after MPI_Finalize is past its end (idle, for the terms).
void close_span(Rank& r) {
  HostTimeline& t = r.stats.host;
  double at = host_now(r);  // the rank's own time (streams.cpp, "the host's time")
  record(t, innermost(t), t.since, r.stats.end_s >= 0 ? std::min(at, r.stats.end_s) : at);
  t.since = at;
}
}  // namespace

void host_enter(Rank& r, HostState s) {
  close_span(r);
  r.stats.host.stack.push_back(s);
}

void host_leave(Rank& r) {
  close_span(r);
  if (!r.stats.host.stack.empty())
    r.stats.host.stack.pop_back();
}

void host_relabel(Rank& r, HostState s) {
  close_span(r);
  if (!r.stats.host.stack.empty())
    r.stats.host.stack.back() = s;
}

/* The split, by precedence: whatever the host was waiting in (its GPU, an MPI call, a
 * collective), an instant its GPU ran one of its kernels is kernel time (the communication or the
 * synchronisation is hidden behind it); otherwise a wait for the GPU goes to what the GPU was
 * doing (an NCCL collective, an NCCL point-to-point transfer, else copies and synchronisation:
 * copies, memsets, or the GPU waiting itself), and an MPI call to its kind. The host's own code
 * and its CUDA API overheads are the host's, whatever the GPU does beside them. */
Terms rank_terms(const Rank& r, double end) {
  const HostTimeline& t = r.stats.host;
  const HostState open = innermost(t);  // the state the rank is in at its end: until then
  auto seconds = [&](HostState s) { return t.seconds[(int)s] + (s == open ? std::max(end - t.since, 0.0) : 0); };
  auto span = [&](HostState s) {
    IntervalSet set = t.spans[(int)s];
    if (s == open && end > t.since)
      set.add(t.since, end);
    return set;
  };
  const Stats& st = r.stats;
  IntervalSet wait = span(HostState::GpuWait), p2p = span(HostState::PointToPoint);
  IntervalSet coll = span(HostState::Collective);
  Terms terms;
  terms.kernels = wait.overlap(st.kernel) + p2p.overlap(st.kernel) + coll.overlap(st.kernel);
  IntervalSet wait_rest = wait.minus(st.kernel);
  terms.collectives = coll.minus(st.kernel).measure() + wait_rest.overlap(st.nccl_collective);
  wait_rest = wait_rest.minus(st.nccl_collective);
  terms.p2p = p2p.minus(st.kernel).measure() + wait_rest.overlap(st.nccl_p2p);
  terms.copies_sync = wait_rest.minus(st.nccl_p2p).measure();
  terms.host_overheads = seconds(HostState::Api);
  terms.host = seconds(HostState::Code);
  return terms;
}

}  // namespace orrery
