/* The report (report.tsv): what each rank did, and how the run ended, for orrery/run/results.py. */
#include "core/report.hpp"

#include "core/links.hpp"
#include "core/outcome.hpp"
#include "core/ranks.hpp"

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace orrery {

/* ---------------- the report ----------------
 * One row per (rank, category, name); orrery/results.py reads it by its header. A run's outcome
 * comes first: a status row (rank, "status", status, code, 0, time), then for a deadlock or a
 * limit reached (--sim-time-limit, --wall-time-limit) one "blocked" row per rank still running
 * (its MPI call, peer and tag as `count` and `bytes` (Rank::kNoPeer, Rank::kAnyPeer), the call's
 * start), and for pending GPU work one "pending"
 * row per operation still queued (its description, the stream: 0 for the legacy default stream,
 * k for the rank's k-th created stream, the device, the time). Last, one "link" row per direction
 * of a platform link that carried anything (links.cpp): rank -1, its name, the transfers that
 * crossed it, the bytes it carried and its busy seconds. A rank's "term" rows are its time up to
 * its end in the terms that partition it (terms.cpp). Its "managed" rows count the managed memory
 * calls it made under --managed resident (cudart/memory.cpp): calls and bytes, no time. */

static std::string describe(const Op& op) {
  switch (op.kind) {
    case Op::Kernel: return "kernel " + op.name;
    case Op::Memset: return "memset of " + std::to_string(op.bytes) + " bytes";
    case Op::Copy: return std::string(copy_kind_name(op.copy)) + " copy of " + std::to_string(op.bytes) + " bytes";
    case Op::Record: return "event record";
    case Op::Wait: return "event wait";
    case Op::HostFn: return "host function";
    case Op::Collective: return op.name;
    case Op::Free: return "stream-ordered free";
  }
  return "?";
}

static int stream_number(const Rank& r, const Stream* s) {
  if (s->legacy)
    return 0;
  int k = 0;
  for (const Stream* o : r.streams) {
    k += !o->legacy;
    if (o == s)
      break;
  }
  return k;
}

void write_report() {
  const std::string& path = run_description().report;
  if (path.empty() || simulation_over())
    return;
  set_simulation_over();
  const Outcome outcome = run_outcome();
  std::string tmp = path + ".part";
  FILE* f = fopen(tmp.c_str(), "w");
  if (!f) {
    fprintf(stderr, "orrery: error: cannot write the report %s\n", tmp.c_str());
    return;
  }
  fputs(kReportHeader, f);  // the schema's report_columns (run_description.json)
  // The run's end: a failing rank's own time may be ahead of the clock (outcome.cpp), and so may a
  // rank's end where it ended without an MPI call to catch it up (a program without MPI returning
  // from main after its last overhead: ranks.cpp, outcome.cpp's end_outside_mpi).
  double at = std::max(now(), outcome.time_s);
  std::vector<Rank*> by_id;
  for (auto& entry : ranks()) {
    by_id.push_back(entry.second.get());
    at = std::max(at, entry.second->stats.end_s);
  }
  fprintf(f, "-1\trun\tmakespan\t0\t0\t%.17g\n", at);
  fprintf(f, "%d\tstatus\t%s\t%d\t0\t%.17g\n", outcome.rank, outcome.status.c_str(), outcome.code,
          outcome.time_s);
  std::sort(by_id.begin(), by_id.end(), [](const Rank* a, const Rank* b) { return a->id < b->id; });
  // an end that stopped every unfinished rank where it stood: each rank's MPI call is said
  const bool stopped_everywhere = outcome.status == "deadlock" || outcome.status == "sim_time_limit" ||
                                  outcome.status == "wall_time_limit";
  for (Rank* r : by_id) {
    if (stopped_everywhere && r->stats.end_s < 0) {
      const Rank::MpiCall& c = r->in_mpi;
      fprintf(f, "%d\tblocked\t%s\t%d\t%d\t%.17g\n", r->id, c.name ? c.name : "", c.peer, c.tag,
              c.name ? c.t0 : at);
    }
    if (outcome.status == "pending_gpu_work" && r->id == outcome.rank)
      for (const Stream* s : r->streams)
        for (const Op& op : s->queue)
          if (is_work(op))
            fprintf(f, "%d\tpending\t%s\t%d\t%d\t%.17g\n", r->id, describe(op).c_str(), stream_number(*r, s),
                    s->device, at);
    // A call, or a wait for the GPU, the run ended in counts until the end.
    if (r->gpu_wait_since >= 0)
      r->stats.gpu_wait_s += at - r->gpu_wait_since;
    if (const Rank::MpiCall& c = r->in_mpi; c.name) {
      Tally& t = r->stats.mpi[c.name];
      t.count++;
      t.bytes += c.bytes;
      t.time_s += at - c.t0;
    }
  }
  for (const Rank* r : by_id) {
    auto rows = [&](const char* cat, const std::map<std::string, Tally>& m) {
      for (auto& [name, t] : m)
        fprintf(f, "%d\t%s\t%s\t%llu\t%llu\t%.17g\n", r->id, cat, name.c_str(), (unsigned long long)t.count,
                (unsigned long long)t.bytes, t.time_s);
    };
    rows("kernel", r->stats.kernels);
    rows("copy", r->stats.copies);
    rows("mpi", r->stats.mpi);
    rows("nccl", r->stats.nccl);
    rows("uncosted", r->stats.uncosted);
    rows("managed", r->stats.managed);
    fprintf(f, "%d\trank\thost_api\t0\t0\t%.17g\n", r->id, r->stats.host_api_s);
    fprintf(f, "%d\trank\tgpu_wait\t0\t0\t%.17g\n", r->id, r->stats.gpu_wait_s);
    double end = r->stats.end_s < 0 ? at : r->stats.end_s;
    fprintf(f, "%d\trank\tend\t0\t0\t%.17g\n", r->id, end);
    const Terms terms = rank_terms(*r, end);
    const std::pair<const char*, double> term_rows[] = {
        {"kernels", terms.kernels},         {"exposed_p2p", terms.p2p},
        {"exposed_collectives", terms.collectives}, {"copies_sync", terms.copies_sync},
        {"host_overheads", terms.host_overheads},   {"host", terms.host}};
    for (auto [name, seconds] : term_rows)
      fprintf(f, "%d\tterm\t%s\t0\t0\t%.17g\n", r->id, name, seconds);
    fprintf(f, "%d\trank\tfinished\t%d\t0\t0\n", r->id, (int)(r->stats.end_s >= 0));
    const Stats& st = r->stats;
    double hidden = st.comm.overlap(st.compute);
    fprintf(f, "%d\tengine\tcompute\t0\t0\t%.17g\n", r->id, st.compute.measure());
    fprintf(f, "%d\tengine\tH2D\t0\t0\t%.17g\n", r->id, st.h2d.measure());
    fprintf(f, "%d\tengine\tD2H\t0\t0\t%.17g\n", r->id, st.d2h.measure());
    fprintf(f, "%d\toverlap\tcommunication\t0\t0\t%.17g\n", r->id, st.comm.measure());
    fprintf(f, "%d\toverlap\thidden\t0\t0\t%.17g\n", r->id, hidden);
    fprintf(f, "%d\tplacement\t%s\t0\t0\t0\n", r->id, r->host->get_cname());
    fprintf(f, "%d\tmixed\tplacements\t%llu\t0\t0\n", r->id, (unsigned long long)st.mixed_placements);
  }
  write_link_rows(f);
  fclose(f);
  rename(tmp.c_str(), path.c_str());
}

}  // namespace orrery
