/* The term breakdown of a rank's time (docs/running.md, "The terms"): its host timeline, each
 * instant in one state (the program's code, a CUDA API overhead, a wait for its GPU, an MPI
 * point-to-point call, a collective), and the split of that timeline into the terms by what its
 * GPU was doing meanwhile. Every instant of [0, end] goes to exactly one term, so the terms add
 * up to the rank's end time.
 *
 * Not here: the per-call and per-kernel tallies (their own accounting, which overlaps: a kernel
 * runs while the host is in MPI), the overlap of communication with computation (report.cpp). */
#include "core/runtime.hpp"

namespace orrery {

namespace {
HostState innermost(const HostTimeline& t) { return t.stack.empty() ? HostState::Code : t.stack.back(); }

// The time since the innermost state began goes to that state.
void close_span(HostTimeline& t) {
  double at = now();
  t.spans[(int)innermost(t)].add(t.since, at);
  t.since = at;
}
}  // namespace

void host_enter(Rank& r, HostState s) {
  HostTimeline& t = r.stats.host;
  close_span(t);
  t.stack.push_back(s);
}

void host_leave(Rank& r) {
  HostTimeline& t = r.stats.host;
  close_span(t);
  if (!t.stack.empty())
    t.stack.pop_back();
}

void host_relabel(Rank& r, HostState s) {
  HostTimeline& t = r.stats.host;
  close_span(t);
  if (!t.stack.empty())
    t.stack.back() = s;
}

/* The split, by precedence: whatever the host was waiting in (its GPU, an MPI call, a
 * collective), an instant its GPU ran one of its kernels is kernel time (the communication or the
 * synchronisation is hidden behind it); otherwise a wait for the GPU goes to what the GPU was
 * doing (an NCCL collective, an NCCL point-to-point transfer, else copies and synchronisation:
 * copies, memsets, or the GPU waiting itself), and an MPI call to its kind. The host's own code
 * and its CUDA API overheads are the host's, whatever the GPU does beside them. */
Terms rank_terms(const Rank& r, double end) {
  HostTimeline t = r.stats.host;  // a copy: the open state is closed at `end`, the rank's stays open
  if (t.since < end)
    t.spans[(int)innermost(t)].add(t.since, end);
  auto span = [&](HostState s) { return t.spans[(int)s].before(end); };
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
  terms.host_overheads = span(HostState::Api).measure();
  terms.host = span(HostState::Code).measure();
  return terms;
}

}  // namespace orrery
