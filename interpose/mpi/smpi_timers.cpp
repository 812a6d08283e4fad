/* liborrery_smpi.so: SMPI's per-call CPU timer, read only where its reading is used.
 *
 * SMPI times the program's own computation between two MPI calls: smpi_bench_end, at the entry
 * of every MPI call, stops a per-rank timer of the thread's CPU time that smpi_bench_begin, at
 * the call's return, started (SimGrid 3.32, src/smpi/internals/smpi_bench.cpp). Each is a
 * clock_gettime(CLOCK_THREAD_CPUTIME_ID), a system call that the vDSO does not answer: two per
 * MPI call, whose readings SMPI uses for three things only:
 *   - smpi/simulate-computation, which injects the time read as the rank's computation
 *     (`orrery run` turns it off: the shim costs the host's work itself);
 *   - smpi/display-timing, which prints their total at the end;
 *   - the SMPI_SAMPLE_* loops of a program written for SMPI, which time the loop's first
 *     iterations with the same timer and inject their mean for the rest.
 * With the first two off, and until a rank enters a sampled loop, every reading is thrown away:
 * the stand-ins below then leave the timer as it is (never started, it reads 0, which SMPI adds
 * to a total nobody prints). The first SMPI_SAMPLE loop of any rank (ActorExt::set_sampling(1),
 * which SMPI calls before it starts the loop's timer) hands the timers back to SimGrid for the
 * rest of the run, for every rank: the loop's readings are SimGrid's own from its first iteration
 * (tests/native/test_timers.py); another rank's first stop after that reads a timer never started,
 * which again only goes to the unprinted total. Readings outside the ranks (in the maestro) are
 * always SimGrid's. In a 64-rank halo exchange the readings were 7 % of smpimain's `perf` samples
 * (bench/README.md).
 *
 * ORRERY_SMPI_TIMERS=simgrid keeps SimGrid's timers throughout; =report writes at the exit one
 * line on standard error: how many readings were left out and how many were SimGrid's. */
#include "mpi/smpi_next.hpp"

#include <simgrid/s4u/Actor.hpp>
#include <xbt/config.hpp>
#include <xbt/xbt_os_time.h>

#include <cstdint>
#include <cstdio>

#define EXPORTED __attribute__((visibility("default")))

#define SET_SAMPLING "_ZN7simgrid4smpi8ActorExt12set_samplingEi"

namespace {

using orrery_smpi::Mode;

using TimerCall = void (*)(xbt_os_timer_t);

struct Timers {
  Mode mode = orrery_smpi::mode_from_environment("ORRERY_SMPI_TIMERS");
  TimerCall start = orrery_smpi::next<TimerCall>("xbt_os_threadtimer_start");
  TimerCall stop = orrery_smpi::next<TimerCall>("xbt_os_threadtimer_stop");
  // -1: not decided yet (SimGrid's configuration is read at a rank's first reading, once
  // parsed); 0: the ranks' readings left out; 1: SimGrid's
  int simgrid = mode == Mode::Simgrid ? 1 : -1;
  uint64_t left_out = 0, read = 0;

  bool use_simgrid() {
    if (simgrid < 0)
      simgrid = simgrid::config::get_value<bool>("smpi/simulate-computation") ||
                simgrid::config::get_value<bool>("smpi/display-timing");
    return simgrid;
  }

  // A reading outside the ranks (SimGrid 4's smpi/host-speed:auto benchmark, as the options are
  // parsed) is always SimGrid's.
  void call(TimerCall Timers::*which, xbt_os_timer_t timer) {
    if (simgrid != 1 && !simgrid::s4u::Actor::is_maestro() && !use_simgrid()) {
      left_out++;
      return;
    }
    read++;
    (this->*which)(timer);
  }

  void sampling() { simgrid = 1; }

  void report() const {
    if (mode == Mode::Report)
      fprintf(stderr, "orrery: SMPI's CPU timers: %llu readings left out, %llu SimGrid's\n",
              (unsigned long long)left_out, (unsigned long long)read);
  }
};

Timers& timers() {
  static Timers* t = new Timers;  // never destroyed: ranks may still call MPI during the exit
  return *t;
}

// The environment is read as the library loads: a wrong value stops smpimain before it starts.
__attribute__((constructor)) void read_environment() { timers(); }
__attribute__((destructor)) void report_at_exit() { timers().report(); }

}  // namespace

/* The stop is also where every MPI call of a rank enters SMPI (smpi_bench_end, from the
 * SmpiBenchGuard of each MPI call that communicates, waits, tests, probes or reads MPI_Wtime, and
 * from SMPI's sleeps): the shim (libcudart.so.13) hooks it there to wait out the host time its
 * rank is ahead by (interpose/core/streams.cpp, "the host's time"), so that whatever the call
 * starts or reads is at the rank's own time, whether the shim wraps the call or not. */
static void (*g_on_mpi_entry)() = nullptr;
extern "C" EXPORTED void orrery_smpi_on_mpi_entry(void (*hook)()) { g_on_mpi_entry = hook; }

// libsimgrid calls these, and ActorExt::set_sampling, through its PLT: the preloaded ones bind.
extern "C" EXPORTED void xbt_os_threadtimer_start(xbt_os_timer_t timer) {
  timers().call(&Timers::start, timer);
}
extern "C" EXPORTED void xbt_os_threadtimer_stop(xbt_os_timer_t timer) {
  if (g_on_mpi_entry)
    g_on_mpi_entry();
  timers().call(&Timers::stop, timer);
}

// void simgrid::smpi::ActorExt::set_sampling(int)
EXPORTED void actor_set_sampling(void* self, int sampling) __asm__(SET_SAMPLING);
void actor_set_sampling(void* self, int sampling) {
  using SetSampling = void (*)(void*, int);
  static const SetSampling real = orrery_smpi::next<SetSampling>(SET_SAMPLING);
  if (sampling)
    timers().sampling();
  real(self, sampling);
}
