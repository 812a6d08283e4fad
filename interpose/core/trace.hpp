/* The timeline trace (`orrery run --trace`, docs/trace.md): what the run's kept ranks did, as
 * slices on their host threads, CUDA streams and their GPUs' copy engines, and the
 * point-to-point messages between them, written as each event completes to the event file
 * (run description key trace.events) as the rows of run_description.json's trace_rows.
 * orrery/run/trace.py turns the file into trace.json after the run.
 *
 * Only the kept ranks (trace.ranks) and the events that overlap the window (trace.begin_s,
 * trace.end_s) are written, so the file and the shim's memory stay bounded however long the
 * run. Without a trace section every hook is one branch on trace::on().
 *
 * Not here: the timing itself (the hooks are called where streams.cpp, execution.cpp, the CUDA
 * calls and mpi.cpp already time things) and anything after the run (trace.py). */
#ifndef ORRERY_TRACE_HPP
#define ORRERY_TRACE_HPP

#include "core/runtime.hpp"

#include <cstdint>
#include <string>

namespace orrery::trace {

extern bool g_on;  // set once, when the first rank is described
inline bool on() { return g_on; }

void install();  // with the first rank (ranks.cpp): opens the event file if the run asks for one
/* The end of the run, completed or not (outcome.cpp, the simulation's end): the MPI and CUDA
 * calls, waits and stream operations still open become slices up to now marked unfinished,
 * the messages still waiting for their pairing are written, and the file is closed. */
void finish();

/* ---- a rank's host track ---- */
uint64_t mpi_begin(Rank& r);                          // a new MPI call: its number on the rank
void mpi_end(const Rank& r, const Rank::MpiCall& c);  // the call r.in_mpi describes ends now

/* A CUDA call that may take simulated time, from construction to destruction; written if it
 * did. A call inside another (cudaMallocHost's cudaHostAlloc) is part of the outer one. */
class CudaCall {
 public:
  CudaCall(Rank& r, const char* name) : rank_(on() ? &r : nullptr) {
    if (rank_)
      begin(name);
  }
  ~CudaCall() {
    if (rank_)
      end();
  }
  CudaCall(const CudaCall&) = delete;
  CudaCall& operator=(const CudaCall&) = delete;
  // what the call is about (a kernel's name, a copy's kind) and the bytes it moves
  void about(const std::string& detail, uint64_t bytes = 0) {
    if (rank_)
      set(detail, bytes);
  }

 private:
  void begin(const char* name);
  void end();
  void set(const std::string& detail, uint64_t bytes);
  Rank* rank_;
};

/* The host blocked until device work completed (streams.cpp's waits): `s` the stream waited
 * for, or nullptr for every stream of `device`. */
void gpu_wait_begin(Rank& r, const Stream* s, int device);
void gpu_wait_end(Rank& r);

/* ---- streams and copy engines (the stream's actor) ---- */
void op_begin(const Stream* s, const Op& op);            // execute() starts op now
void op_end(const Stream* s, const Op& op, double t0);   // ...and it completed now, its own time from t0
// op could not start from `since` until now: `what` held it (its dependencies, a copy engine)
void held(const Stream* s, const Op& op, const char* what, double since);
/* A copy has its engine from now (the unit it took) until engine_end. */
int engine_begin(const Stream* s, const Op& op, const CopyEngines* engine);
void engine_end(const Stream* s, const Op& op, const CopyEngines* engine, int unit, double t0);

/* ---- point-to-point messages (mpi.cpp) ----
 * Peers are ranks of MPI_COMM_WORLD; `comm` is SMPI's communicator id (what it matches on).
 * A send is numbered among the rank's sends to (peer, tag, comm) when it is posted; a receive,
 * when it completes, among the rank's receives from (source, tag, comm) in the order they were
 * posted: by MPI's non-overtaking rule the k-th of each pair up (docs/trace.md). */
void sent(Rank& r, int peer, int tag, int comm, uint64_t bytes);
/* A receive posted from `source` (Rank::kAnyPeer: any) with `tag` (kAnyPeer: any); `token`
 * names it until it completes (its request, or the call's own for a blocking receive), and
 * `comm` is kept for the caller to translate the source a status gives. */
void recv_posted(Rank& r, const void* token, int source, int tag, int comm, const void* comm_handle);
const void* recv_comm(const Rank& r, const void* token);  // a posted receive's comm_handle, or nullptr
/* The receive `token` completed now with a message from `source` (negative: none, as from
 * MPI_PROC_NULL or a cancelled request) and `tag`. */
void recv_completed(Rank& r, const void* token, int source, int tag);
void recv_dropped(Rank& r, const void* token);  // freed before it completed: it tells nothing
void unpaired(Rank& r);  // a receive the trace cannot number (a matched probe's): pair no more for r

}  // namespace orrery::trace

#endif
