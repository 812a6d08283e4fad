/* Streams: each takes its operations in order. A kernel, memset or copy with nothing left to wait
 * for, at the head of a stream that nothing runs, runs as an activity of SimGrid's kernel, and an
 * event's record, a wait already met or a stream-ordered free completes there at once; a head that
 * waits for another stream's operation is taken up there when it completes; the others
 * run in the stream's daemon actor on its GPU's host, which waits for what they depend on (events,
 * the legacy default stream's implicit ordering) and executes them (execution.cpp). And the host's
 * waits for them. */
#include "core/capture.hpp"
#include "core/execution.hpp"
#include "core/outcome.hpp"
#include "core/ranks.hpp"
#include "core/trace.hpp"

#include <dlfcn.h>
#include <simgrid/kernel/Timer.hpp>
#include <simgrid/simix.hpp>
#include <xbt/Extendable.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string>

namespace orrery {

/* ---------------- streams ---------------- */

static std::set<Stream*>& live_streams() {
  static std::set<Stream*> s;
  return s;
}

/* How streams and the actors that wait for them hand over, without SimGrid's mutex and condition
 * variables: every actor runs on the one simulation thread and none is interrupted between two
 * simcalls, so a check of a stream's state followed by a blocking simcall cannot miss the wake-up,
 * which comes from another actor's later step. Each simcall costs its actor a scheduling round, and
 * a lock, a wait, an unlock and a notify around every operation were most of a stream's cost
 * (bench/README.md, "Streams without a mutex"). Each actor that waits blocks on a semaphore of its
 * own (a rank's, a worker's): a worker waiting for work is marked idle and released by the next
 * enqueue only then; an actor waiting for an operation to complete is listed with it among the
 * stream's waiters and released by whoever completes it (its worker, or SimGrid's kernel); a
 * worker waiting for a copy engine is queued on it (release_engine). A worker waits for one of
 * these at a time, so one semaphore serves it. Semaphores, not Actor::suspend:
 * an actor that suspends itself suspends every activity it started too (an MPI_Isend's comm). One
 * release answers one acquire, whichever comes first.
 *
 * The workers are daemons: SimGrid kills them when the last rank ends, by an exception thrown
 * from whatever simcall they are in; they hold nothing then that must be released. */
static void wait_seq(Stream* s, uint64_t seq, sg4::Semaphore& wake) {
  while (s->completed < seq) {
    s->waiters.push_back({&wake, seq});
    wake.acquire();
  }
}

/* Those of a stream's waiters or dependents whose operation it has now completed, taken off its
 * list in the order they began to wait: before any is released or started, since a release is a
 * simcall, in which other actors run and may add themselves to the list. */
template <class Waiting>
static std::vector<Waiting> take_reached(std::vector<Waiting>& list, uint64_t completed) {
  auto waiting = [completed](const Waiting& w) { return w.seq > completed; };
  auto reached = std::stable_partition(list.begin(), list.end(), waiting);
  std::vector<Waiting> taken(reached, list.end());
  list.erase(reached, list.end());
  return taken;
}

static void wake_waiters(Stream* s) {
  for (const Stream::Waiter& w : take_reached(s->waiters, s->completed))
    w.wake->release();
}

static void start_head(Stream* s);

// The operation at the head of the queue has completed: its waiters and pollers learn it, and the
// streams whose head waited for it go on.
static void complete_head(Stream* s) {
  s->queue.pop_front();
  s->completed++;
  wake_waiters(s);
  if (s->pollers > 0)
    s->done_cv->notify_all();
  for (const Stream::Dependent& d : take_reached(s->dependents, s->completed))
    start_head(d.stream);
}

static void stream_worker(Stream* s);

void wake_worker(Stream* s) {
  if (!s->worker) {  // none yet: made for the operation given to it (a destroyed stream's: none)
    if (s->driver == Stream::Driver::Worker)
      s->worker = sg4::Actor::create(s->worker_name, s->gpu->host, [s] { stream_worker(s); });
    return;
  }
  if (s->idle) {
    s->idle = false;
    s->wake->release();
  }
}

/* ---- operations without the stream's actor ----
 * The head of a stream that nothing runs is taken up in the simulation's kernel (maestro),
 * start_head: a head whose dependencies are not met waits among the dependents of the stream it
 * waits for, whose complete_head takes it up again, rather than in the worker's wait_seq; a
 * record, a wait or a free then completes at once (completes_at_once); a kernel, a memset or a
 * copy whose engine is free is an activity started there, which SimGrid completes there too
 * (Activity::complete, for the activities maestro starts), and on_gpu_done does what the worker
 * would have done after it, taking up the stream's next operation. Anything else goes to the
 * worker. The worker's hand-over (its wake-up, the activity's start and wait, its release of the
 * waiters: each a simcall, so a scheduling round of its actor) is what a GPU operation cost
 * beyond its activity (bench/README.md, "Ready kernels and memsets without the stream's actor",
 * "Copies without the stream's actor", "Events and waits without the stream's actor"). */
static const simgrid::xbt::Extension<sg4::Activity, Stream> kStreamOf =
    sg4::Activity::extension_create<Stream>([](void*) {});  // the stream is not the activity's

static void on_gpu_done(const sg4::Activity& a);

/* An execution created in the maestro joins the maestro's list of activities, which SimGrid 3.32
 * scans at each one's end: one entry per busy stream, so at thousands of GPUs the scan cost more
 * than the actor saved. liborrery_smpi.so, preloaded in every run, keeps them out of it as it does
 * SMPI's detached comms (interpose/mpi/smpi_detached.cpp), the copies' comms among them (each
 * s4u::Comm::sendto detaches its comm in the kernel); without it they stay there. */
struct MaestroList {
  void (*take)(const void*) = nullptr;
  void (*drop)(const void*) = nullptr;
  MaestroList() {
    take = reinterpret_cast<void (*)(const void*)>(dlsym(RTLD_DEFAULT, "orrery_maestro_take"));
    drop = reinterpret_cast<void (*)(const void*)>(dlsym(RTLD_DEFAULT, "orrery_maestro_drop"));
    if (!take || !drop)
      take = drop = nullptr;
  }
};
static const MaestroList& maestro_list() {
  static const MaestroList m;
  return m;
}

// Executions go in the maestro's list as they are made; a comm, as it is detached (smpi_detached.cpp
// takes it then, and drops it as it finishes).
static bool in_maestro_list(const sg4::Activity& a) { return dynamic_cast<const sg4::Exec*>(&a) != nullptr; }

// The activity of a stream's head, started in the kernel (start_without_worker): on_gpu_done's.
static void track(Stream* s, sg4::ActivityPtr started) {
  if (maestro_list().take && in_maestro_list(*started))
    maestro_list().take(started->get_impl());
  started->extension_set(kStreamOf, s, false);
  s->on_gpu = std::move(started);
}

static void take_up_head(Stream* s);

// The head of the queue, in a stream that nothing runs: started without the worker, or given to it.
static void start_head(Stream* s) {
  s->driver = Stream::Driver::Gpu;  // until the kernel decides, the stream is not free
  simgrid::kernel::actor::simcall_answered([s] {  // at once if already in maestro
    static bool connected = false;
    if (!connected) {
      sg4::Activity::on_completion_cb(on_gpu_done);
      connected = true;
    }
    take_up_head(s);
  });
}

// start_head's, in the kernel.
static void take_up_head(Stream* s) {
  for (;;) {
    Op& op = s->queue.front();
    if (ahead_of_clock(op.not_before)) {  // enqueued ahead of the clock: taken up again then
      simgrid::kernel::timer::Timer::set(op.not_before, [s] { take_up_head(s); });
      return;
    }
    for (const Dependency& d : op.deps)
      if (d.stream->completed < d.seq) {  // waits, without the worker, until d completes it
        if (s->parked_since < 0)
          s->parked_since = now();
        d.stream->dependents.push_back({s, d.seq});
        return;
      }
    if (s->parked_since >= 0) {
      if (trace::on())
        trace::held(s, op, "dependency wait", s->parked_since);
      s->parked_since = -1;
    }
    if (!completes_at_once(op))
      break;
    execute(s, op);  // no simcall, no time
    complete_head(s);
    if (s->queue.empty()) {
      s->driver = Stream::Driver::None;
      if (s->destroyed)
        wake_worker(s);  // to end
      return;
    }
  }
  s->started_at = now();
  if (!start_without_worker(s, s->queue.front(), track)) {
    s->driver = Stream::Driver::Worker;
    wake_worker(s);
  }
}

/* At a limit's stop (outcome.cpp): the work each stream's GPU is running as an activity of its own
 * (a kernel, a memset, a copy) is accounted as if it ended at the stop, in the rank's figures, terms
 * and trace, as the MPI call a rank is in counts up to the stop. The stop comes at an event of
 * SimGrid's, often such an activity's end, not yet taken in. Work a stream's worker runs (staged
 * copies, collectives, host functions) is not. */
void account_work_in_flight() {
  for (auto& [pid, r] : ranks())
    for (Stream* s : r->streams)
      if (s->driver == Stream::Driver::Gpu && !s->queue.empty() && s->started_at < now())
        finish_without_worker(s, s->queue.front(), s->started_at);
}

static void on_gpu_done(const sg4::Activity& a) {
  Stream* s = a.extension(kStreamOf);
  if (s == nullptr)
    return;
  // Kept until the next completion: SimGrid goes on using this one after its callbacks.
  static auto* completed = new sg4::ActivityPtr;  // never destroyed: not after SimGrid's end
  *completed = std::move(s->on_gpu);
  if (maestro_list().drop && in_maestro_list(a))  // the list's reference: ours keeps it until the next
    maestro_list().drop(a.get_impl());
  finish_without_worker(s, s->queue.front(), s->started_at);
  s->driver = Stream::Driver::None;
  complete_head(s);
  if (!s->queue.empty())
    start_head(s);
  else if (s->destroyed)
    wake_worker(s);  // to end
}

/* ---- copy engines ---- */

void acquire_engine(Stream* s, CopyEngines& engines) {
  if (engines.free > 0) {
    engines.free--;
    return;
  }
  s->engine_granted = false;  // until release_engine gives it one
  engines.waiting.push_back(s);
  while (!s->engine_granted)
    s->wake->acquire();
}

void release_engine(CopyEngines& engines) {
  if (engines.waiting.empty()) {
    engines.free++;
    return;
  }
  Stream* next = engines.waiting.front();  // a worker, blocked in acquire_engine
  engines.waiting.pop_front();
  next->engine_granted = true;
  next->wake->release();
}

static void stream_worker(Stream* s) {
  sg4::Actor::self()->daemonize();
  for (;;) {
    while (s->driver != Stream::Driver::Worker) {
      if (s->destroyed && s->driver == Stream::Driver::None)
        return;
      s->idle = true;  // until wake_worker releases it
      s->wake->acquire();
    }
    while (!s->queue.empty()) {
      Op& op = s->queue.front();
      if (ahead_of_clock(op.not_before))  // enqueued ahead of the clock (its rank's own time)
        sg4::this_actor::sleep_for(op.not_before - now());
      double ready = now();
      for (const Dependency& d : op.deps)
        wait_seq(d.stream, d.seq, *s->wake);
      if (trace::on())
        trace::held(s, op, "dependency wait", ready);
      execute(s, op);
      complete_head(s);
    }
    s->driver = Stream::Driver::None;
  }
}

Stream* create_stream(Rank& r, unsigned flags, int priority, int device) {
  auto* s = new Stream;  // never freed: events and dependencies may outlive the handle
  s->rank = &r;
  s->device = device < 0 ? r.device : device;
  s->gpu = r.gpus.at(s->device);
  s->flags = flags;
  s->priority = priority;
  s->wake = sg4::Semaphore::create(0);
  s->done_cv = sg4::ConditionVariable::create();
  s->worker_name = "stream-r" + std::to_string(r.id) + "-" + std::to_string(r.streams.size());
  r.streams.push_back(s);
  live_streams().insert(s);
  return s;
}

Stream* legacy_stream(Rank& r, int device) {
  Stream*& l = r.legacy.at(device);
  if (!l) {
    l = create_stream(r, 0, 0, device);
    l->legacy = true;
  }
  return l;
}

Stream* per_thread_stream(Rank& r, int device) {
  Stream*& p = r.per_thread.at(device);
  if (!p)  // not non-blocking: it synchronises with the legacy default stream, as in CUDA
    p = create_stream(r, 0, 0, device);
  return p;
}

Stream* resolve_stream(Rank& r, cudaStream_t handle, const char* function) {
  if (handle == nullptr || handle == cudaStreamLegacy)
    return legacy_stream(r, r.device);
  if (handle == cudaStreamPerThread)
    return per_thread_stream(r, r.device);
  auto* s = reinterpret_cast<Stream*>(handle);
  if (!live_streams().count(s) || s->destroyed || s->rank != &r)
    fatal("%s: invalid stream handle %p (rank %d)", function, (void*)handle, r.id);
  return s;
}

void wait_like_legacy(Op& op, Stream* legacy) {
  for (Stream* o : legacy->rank->streams)
    if (o != legacy && o->device == legacy->device && !(o->flags & cudaStreamNonBlocking) && o->completed < o->enqueued)
      op.deps.push_back({o, o->enqueued});
}

cudaError_t enqueue(Stream* s, Op op) {
  Rank& r = *s->rank;
  if (s->capture)
    return capture_node(s, std::move(op));
  if (s->legacy) {
    if (cudaError_t e = capture_implicit(s))
      return e;
    wait_like_legacy(op, s);
  } else if (!(s->flags & cudaStreamNonBlocking)) {
    Stream* l = r.legacy.at(s->device);
    if (l && l->completed < l->enqueued)
      op.deps.push_back({l, l->enqueued});
  }
  if (s->rank->clock > now())
    op.not_before = s->rank->clock;  // enqueued at its rank's own time
  s->queue.push_back(std::move(op));
  s->enqueued++;
  if (s->driver == Stream::Driver::None)
    start_head(s);
  return cudaSuccess;
}

/* ---------------- host-side waits and overheads ---------------- */

/* ---- the host's time ----
 * Each CUDA API overhead (a launch's, a copy's, a synchronisation's) and MPI software overhead is
 * host time that a SimGrid sleep would make the simulation pay for as an activity of its own, with
 * its simcall: per Jacobi iteration eight of them against about four messages. A rank spends them
 * instead on a clock of its own (Rank::clock, host_now), ahead of SimGrid's, and waits the lead out
 * in one sleep only where something needs SimGrid's clock at its time:
 *   - the work it enqueues starts no sooner than it was enqueued (Op::not_before): the kernel
 *     starts its stream's head at that time (a timer), the worker sleeps until then;
 *   - a wait for stream work ends no sooner than the rank's own time (GpuWait, wait_seq: the rank
 *     wakes when the work completes and reads host_now, so no sleep at all if the work outlasts
 *     the lead, as a synchronisation after a launch does);
 *   - SMPI's MPI calls catch the rank up as they enter (liborrery_smpi.so's hook calls
 *     catch_up_calling_rank), so its messages start at its time whichever MPI call it is, wrapped
 *     or not, and MPI_Wtime reads it; the MPI wrappers' own times read host_now;
 *   - every CUDA or NCCL call catches up as it enters (rank_self), but those that only enqueue,
 *     wait or answer from the rank's state (rank_deferring); the host clock (clock_gettime) reads
 *     host_now.
 * The times are those of a sleep per overhead, but for the last bits of sums taken in another
 * order; bench/README.md, "The host's time without a sleep per overhead", says what it saves. */
namespace {
struct HostTimeCounts {
  uint64_t deferred = 0;  // host times spent ahead of the clock
  uint64_t sleeps = 0;    // the sleeps that waited them out
} g_host_time;
}  // namespace

void defer(Rank& r, double seconds) {
  if (seconds <= 0)
    return;
  r.clock = host_now(r) + seconds;
  g_host_time.deferred++;
}

void catch_up(Rank& r) {
  if (!ahead_of_clock(r.clock))
    return;
  g_host_time.sleeps++;
  sg4::this_actor::sleep_for(r.clock - now());
}

/* ORRERY_HOST_TIME=report: one line on standard error at the simulation's end, how many host
 * times the ranks spent ahead of the clock and in how many sleeps they waited them out (with a
 * sleep per overhead, as before, the two would be equal; tests/native/test_timing.py derives both). */
void install_host_time_report() {
  const char* mode = getenv("ORRERY_HOST_TIME");
  if (!mode || !*mode)
    return;
  if (strcmp(mode, "report") != 0)
    fatal("ORRERY_HOST_TIME=%s: expected report (or unset)", mode);
  sg4::Engine::on_simulation_end_cb([] {
    fprintf(stderr, "orrery: host time: %llu overheads spent ahead of the clock, waited out in %llu sleeps\n",
            (unsigned long long)g_host_time.deferred, (unsigned long long)g_host_time.sleeps);
  });
}

void host_overhead(Rank& r, double seconds) {
  if (seconds <= 0)
    return;
  host_enter(r, HostState::Api);  // the host timeline's times are host_now()
  defer(r, seconds);
  host_leave(r);
  r.stats.host_api_s += seconds;
}

namespace {
/* A host wait for its GPU: traced, accounted as gpu_wait and as the GpuWait state of the host's
 * timeline (terms.cpp) from its start to the end of its scope. */
class GpuWait {
 public:
  GpuWait(Rank& r, Stream* s, int device) : rank_(r), t0_(host_now(r)) {
    if (trace::on())
      trace::gpu_wait_begin(r, s, device);
    host_enter(r, HostState::GpuWait);
    r.gpu_wait_since = t0_;  // (a run that ends during the wait counts it to the end: report.cpp)
  }
  ~GpuWait() {
    rank_.gpu_wait_since = -1;
    host_leave(rank_);
    if (trace::on())
      trace::gpu_wait_end(rank_);
    rank_.stats.gpu_wait_s += host_now(rank_) - t0_;
  }
  GpuWait(const GpuWait&) = delete;
  GpuWait& operator=(const GpuWait&) = delete;

 private:
  Rank& rank_;
  double t0_;
};
}  // namespace

void wait_for(Rank& r, Stream* s, uint64_t seq) {
  {
    GpuWait waiting(r, s, s->device);
    wait_seq(s, seq, *r.wake);
  }
  host_overhead(r, r.gpus.at(s->device)->sync_overhead_s);
}

void wait_stream(Rank& r, Stream* s) { wait_for(r, s, s->enqueued); }

bool poll_for(Rank& r, Stream* s, uint64_t seq) {
  catch_up(r);  // the poll reads the stream's state at the rank's time
  if (s->completed >= seq)
    return true;
  // Answering "not ready" at once would leave the simulated clock where it is: a loop such as
  // nccl-tests' testStreamSynchronize (cudaStreamQuery until cudaSuccess) would spin forever,
  // since the stream's actor only runs when the rank's actor waits.
  GpuWait waiting(r, s, s->device);
  std::unique_lock<sg4::Mutex> lock(*sim_mutex());
  double poll = r.gpus.at(s->device)->sync_overhead_s;
  s->pollers++;  // the worker notifies done_cv only while someone polls
  if (poll > 0)
    s->done_cv->wait_for(lock, poll);
  else
    s->done_cv->wait(lock);  // no spin time given: until the stream's next completion
  s->pollers--;
  // The stream's state as the spin ends, read before the unlock (a simcall, in which other actors
  // run): the operations completed at this instant included, since the simulation's kernel
  // completes those without the worker (on_gpu_done) before any actor runs.
  bool done = s->completed >= seq;
  lock.unlock();
  return done;
}

void wait_device(Rank& r, int device) { wait_device_streams(r, device, false); }

void wait_device_streams(Rank& r, int device, bool blocking_only) {
  {
    GpuWait waiting(r, nullptr, device);
    for (Stream* s : r.streams)
      if (s->device == device && !(blocking_only && (s->flags & cudaStreamNonBlocking)))
        wait_seq(s, s->enqueued, *r.wake);
  }
  host_overhead(r, r.gpus.at(device)->sync_overhead_s);
}

}  // namespace orrery
