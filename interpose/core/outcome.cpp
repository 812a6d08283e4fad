/* How the run ended (outcome.hpp): the first failure of the program, and the handlers that
 * catch a rank's exit, a crash and a deadlock. */
#include "core/outcome.hpp"

#include "core/fatal.hpp"
#include "core/ranks.hpp"
#include "core/report.hpp"
#include "core/trace.hpp"

#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/syscall.h>
#include <ctime>
#include <string>
#include <unistd.h>
#include <vector>

namespace orrery {

/* ---------------- how the run ended ----------------
 * A run completes, or ends on the first failure of the program the shim sees: MPI_Abort
 * (mpi.cpp), a rank's exit() while the simulation runs, a crash (a fatal signal), GPU work still
 * pending when a rank ends, a deadlock (SimGrid's on_deadlock), or one of Orrery's own errors
 * (fatal). The report says which, for which rank and when. */

namespace {
Outcome g_outcome;
bool g_outcome_set = false;
bool g_simulation_over = false;  // the report is written: what exits after it is SimGrid's normal end
std::string g_crash_path;        // where a crash's status row goes before anything else is tried
}  // namespace

// When a failure ends the run: the failing rank's own time, where it is ahead of the clock by host
// time not yet waited out (streams.cpp, "the host's time"), else the clock.
static double failure_time() {
  const Rank* r = calling_rank();
  return r ? host_now(*r) : now();
}

static void record(const char* status, int rank, int code) {
  if (g_outcome_set)
    return;  // the first failure is the one that ended the run
  g_outcome_set = true;
  g_outcome = Outcome{status, rank, code, failure_time()};
}

Outcome run_outcome() {
  if (g_outcome_set)
    return g_outcome;
  Outcome o;
  o.time_s = now();
  return o;
}

bool simulation_over() { return g_simulation_over; }
void set_simulation_over() { g_simulation_over = true; }

void end_run(const char* status, int rank, int code) {
  record(status, rank, code);
  trace::finish();  // the trace up to the failure: what the user wants to see of it
  fflush(nullptr);
  write_report();
  // Without a report (not run by orrery run) the process's status is all there is to tell.
  _exit(run_description().report.empty() ? (!strcmp(status, "exited") || !strcmp(status, "aborted") ? code : 1) : 0);
}

// SimGrid has listed the blocked actors (its kernel's view); the report names each rank's MPI call.
void on_deadlock() { end_run("deadlock", -1, 0); }

/* Work that takes the GPU time; event records and waits alone complete as soon as their stream
 * runs, which a rank ending at once may not have let it do. */
bool is_work(const Op& op) {
  return op.kind == Op::Kernel || op.kind == Op::Memset || op.kind == Op::HostFn || op.kind == Op::Collective ||
         (op.kind == Op::Copy && op.bytes > 0);
}

/* A rank that ends (its main returned) with work still queued on one of its streams: on a real
 * GPU the process's exit would drop that work; here it is a failure, named in the report. */
void finish_rank(const Rank& r) {
  if (g_simulation_over)
    return;
  for (const Stream* s : r.streams)
    for (const Op& op : s->queue)
      if (is_work(op))
        end_run("pending_gpu_work", r.id, 0);
}

/* A program that never called MPI_Init is no member of an MPI job, and mpirun takes its exit(0)
 * for its normal end: so is it here, as if it had returned from main, at the rank's own time (its
 * last overheads included, which the clock may not have reached: a cudaFree's synchronisation). */
void end_outside_mpi(Rank& r, int status) {
  if (status == 0 && !r.mpi_initialized && r.stats.end_s < 0)
    r.stats.end_s = host_now(r);
}

/* exit() called by a rank during the simulation ends the whole process (every rank is an actor
 * in it), before SimGrid's own exit handler turns it into an abort and loses the status. */
static void on_process_exit(int status, void*) {
  if (g_simulation_over || run_description().report.empty())
    return;
  int rank = current_rank_id();
  if (rank < 0)
    return;  // SimGrid's own exit: orrery run reports the missing report
  for (auto& [pid, r] : ranks())
    if (r->id == rank)
      end_outside_mpi(*r, status);
  auto finished = [](int id) {
    for (auto& [pid, r] : ranks())
      if (r->id == id)
        return r->stats.end_s >= 0;
    return false;  // not started yet
  };
  bool others_running = false;
  for (int id = 0; id < (int)run_description().ranks.size(); id++)
    others_running = others_running || (id != rank && !finished(id));
  if (status != 0 || !finished(rank))  // exit(0) between MPI_Init and MPI_Finalize is a failure too
    end_run("exited", rank, status);
  if (others_running)
    // After MPI_Finalize a rank's exit(0) would let the others go on in a real job; here it
    // ends them all: Orrery's limit, not the program's failure.
    end_run("exit_after_finalize", rank, 0);
  end_run("completed", -1, 0);  // the last rank's exit(0) after its work: a normal end
}

static void write_crash_row(int rank, int sig) {
  // Only async-signal-safe calls: the crash may have left malloc or stdio half-way.
  char row[160];
  int n = snprintf(row, sizeof row, "%d\tstatus\tcrashed\t%d\t0\t%.17g\n", rank, sig, failure_time());
  int fd = open(g_crash_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    ssize_t ignored = write(fd, row, (size_t)n);
    (void)ignored;
    close(fd);
  }
}

static void on_fatal_signal(int sig, siginfo_t*, void*) {
  if (g_simulation_over || run_description().report.empty()) {
    signal(sig, SIG_DFL);
    raise(sig);
    return;
  }
  int rank = current_rank_id();
  write_crash_row(rank, sig);
  // The report too, which may fail where the crash left the heap broken: then the crash's
  // row (above) is what orrery run reads, and the alarm ends a report that cannot finish.
  signal(SIGALRM, SIG_DFL);
  alarm(10);
  if (rank < 0)
    end_run("orrery_crashed", -1, sig);  // in SimGrid or the shim, outside any rank's code
  end_run("crashed", rank, sig);
}

/* ---------------- the run's limits ----------------
 * orrery run --sim-time-limit T stops the run at the first of SimGrid's steps past T simulated
 * seconds (run description sim_time_limit_s); --wall-time-limit at the first step past a wall-clock
 * deadline (ORRERY_WALL_DEADLINE: CLOCK_MONOTONIC seconds, the clock of Python's time.monotonic).
 * Both are checked as SimGrid's clock advances, adding no actor or timer of the simulation's own
 * (a deadlock is still one: a timer would keep the simulation going to it) and nothing where no
 * limit is set. A run stuck where the clock never advances (the program's own code looping without
 * a CUDA or MPI call that waits) is orrery run's to stop, a few seconds past the deadline. */
namespace {
double g_wall_deadline = INFINITY;
uint64_t g_steps = 0;

double monotonic_now() {  // the kernel's clock: the program's clock_gettime reads simulated time here
  timespec ts{};
  syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void check_limits(double) {
  const char* reached = nullptr;
  if (now() > run_description().sim_time_limit_s)
    reached = "sim_time_limit";
  // one system call every 64 steps: a few microseconds of a second's thousands of steps
  else if ((++g_steps & 63) == 0 && monotonic_now() > g_wall_deadline)
    reached = "wall_time_limit";
  if (!reached)
    return;
  account_work_in_flight();  // as the MPI call a rank is in counts up to the stop
  end_run(reached, -1, 0);
}
}  // namespace

void install_limits() {
  if (const char* deadline = getenv("ORRERY_WALL_DEADLINE"); deadline && *deadline) {
    char* end = nullptr;
    g_wall_deadline = strtod(deadline, &end);
    if (end == deadline || *end || !(g_wall_deadline > 0))
      fatal("ORRERY_WALL_DEADLINE is '%s', not a CLOCK_MONOTONIC time in seconds (orrery run sets it)", deadline);
  }
  if (!std::isinf(run_description().sim_time_limit_s) || !std::isinf(g_wall_deadline))
    sg4::Engine::on_time_advance_cb(check_limits);
}

void install_failure_handlers() {
  g_crash_path = run_description().report + ".crash";
  ::on_exit(on_process_exit, nullptr);
  // SimGrid's own handler only prints and re-raises; the shim's names the rank. The stack
  // SimGrid sets for signals (SIGSTKSZ) is too small to write the report on.
  static std::vector<char> signal_stack(1 << 16);
  stack_t st{};
  st.ss_sp = signal_stack.data();
  st.ss_size = signal_stack.size();
  sigaltstack(&st, nullptr);
  struct sigaction sa{};
  sa.sa_sigaction = on_fatal_signal;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT})
    sigaction(sig, &sa, nullptr);
}

}  // namespace orrery
