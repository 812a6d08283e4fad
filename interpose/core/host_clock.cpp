/* The host clock of each rank: clock_gettime and gettimeofday read the simulated time, as
 * MPI_Wtime does, so that a program timing its own work with the host's clock (nccl-tests'
 * timer, std::chrono::steady_clock, gettimeofday) reports simulated seconds, not the seconds the
 * simulator took. SMPI does the same only for code compiled by smpicc, whose forced header turns
 * the calls into smpi_clock_gettime; code compiled by nvcc or the plain compiler, and libstdc++'s
 * std::chrono, call libc's functions, which these stand in for.
 *
 * The program's copy binds to these definitions as to environment.cpp's (SMPI dlopens it with
 * RTLD_DEEPBIND; libcudart.so.13 comes before libc in its dependencies), under glibc's version
 * names (environment-<arch>.map); libstdc++ and the other libraries loaded before it bind to them
 * in the global scope, where `orrery run` preloads libcudart.so.13 before libc.
 *
 * Every clock that counts wall time (realtime, monotonic and their raw, coarse, boot and TAI
 * forms) reads seconds since the simulation started, for both clocks alike, as SMPI's
 * smpi_clock_gettime answers; reading costs no simulated time (as MPI_Wtime with smpi/wtime:0).
 * CPU-time clocks (CLOCK_PROCESS_CPUTIME_ID, CLOCK_THREAD_CPUTIME_ID, a thread's or process's
 * clock id) stay libc's: SimGrid's own timers use them. Outside a simulated actor (the maestro,
 * threads that are no actor, a process a rank starts) and outside `orrery run` every call is
 * libc's. */
#include "core/environment.hpp"
#include "core/runtime.hpp"

#include <dlfcn.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>

namespace orrery {
namespace {

template <class F>
F libc_function(const char* name) {
  void* libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
  void* p = libc ? dlsym(libc, name) : nullptr;
  if (!p) {  // not fatal(): that reads the clock itself
    fprintf(stderr, "orrery: error: libc's %s not found\n", name);
    _exit(70);
  }
  return reinterpret_cast<F>(p);
}

using ClockGettime = int (*)(clockid_t, struct timespec*);
using Gettimeofday = int (*)(struct timeval*, void*);

ClockGettime libc_clock_gettime() {
  static const ClockGettime f = libc_function<ClockGettime>("clock_gettime");
  return f;
}

Gettimeofday libc_gettimeofday() {
  static const Gettimeofday f = libc_function<Gettimeofday>("gettimeofday");
  return f;
}

// Whether the caller is a simulated actor of an `orrery run` (a rank, its streams' host functions).
bool simulated_caller() {
  static const bool run = [] {
    const char* v = libc_environment().getenv("ORRERY_RUN");
    return v && *v;
  }();
  return run && !sg4::Actor::is_maestro();
}

// What a simulated caller's clock reads: its rank's own time (streams.cpp, "the host's time"), or
// SimGrid's for a stream's host function.
double simulated_now() {
  Rank* r = calling_rank();
  if (!r)
    return sg4::Engine::get_clock();
  note_still(*r, true);
  return host_now(*r);
}

bool wall_clock(clockid_t id) {
  switch (id) {
    case CLOCK_REALTIME: case CLOCK_MONOTONIC: case CLOCK_MONOTONIC_RAW: case CLOCK_REALTIME_COARSE:
    case CLOCK_MONOTONIC_COARSE: case CLOCK_BOOTTIME: case CLOCK_TAI:
      return true;
    default:
      return false;
  }
}

}  // namespace
}  // namespace orrery

ORR_EXPORT int clock_gettime(clockid_t id, struct timespec* tp) noexcept {
  if (!tp || !orrery::wall_clock(id) || !orrery::simulated_caller())
    return orrery::libc_clock_gettime()(id, tp);
  long long ns = std::llround(orrery::simulated_now() * 1e9);  // to the nearest nanosecond
  tp->tv_sec = (time_t)(ns / 1000000000);
  tp->tv_nsec = (long)(ns % 1000000000);
  return 0;
}

ORR_EXPORT int gettimeofday(struct timeval* __restrict tv, void* __restrict tz) noexcept {
  if (!tv || !orrery::simulated_caller())
    return orrery::libc_gettimeofday()(tv, tz);
  int rc = tz ? orrery::libc_gettimeofday()(nullptr, tz) : 0;  // the (obsolete) time zone stays libc's
  long long us = std::llround(orrery::simulated_now() * 1e6);
  tv->tv_sec = (time_t)(us / 1000000);
  tv->tv_usec = (suseconds_t)(us % 1000000);
  return rc;
}
