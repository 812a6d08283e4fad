/* Orrery's own errors (fatal.hpp): the message goes to ORRERY_ERROR_FILE, which `orrery run`
 * prints last, or to stderr without one. */
#include "core/fatal.hpp"

#include "core/ranks.hpp"
#include "core/runtime.hpp"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <unistd.h>

namespace orrery {

/* ---------------- fatal errors ---------------- */

namespace {
// The thread every simulated actor runs on (SimGrid's contexts share the launcher's main thread,
// which loads this library). A program's own threads (OpenMP's, std::thread) are others.
const std::thread::id g_simulation_thread = std::this_thread::get_id();
std::atomic<bool> g_stopping{false};
std::atomic<std::thread::id> g_stopper;
}  // namespace

bool on_simulation_thread() { return std::this_thread::get_id() == g_simulation_thread; }

void fatal(const char* fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  // One stop per run: threads of the program calling CUDA at once (an OpenMP region) would each
  // truncate the error file and end the run beside the others. The first says why; the others
  // wait for it to end the process.
  if (g_stopping.exchange(true)) {
    if (g_stopper.load() == std::this_thread::get_id())
      _exit(70);  // an error while stopping
    for (;;)
      pause();
  }
  g_stopper = std::this_thread::get_id();
  const bool simulating = on_simulation_thread();
  fflush(nullptr);
  const char* err = getenv("ORRERY_ERROR_FILE");
  bool told = false;
  if (err && *err) {
    if (FILE* f = fopen(err, "w")) {
      fprintf(f, "%s\n", msg);
      told = fclose(f) == 0;
    }
  }
  // orrery run prints it last, with the report's rank and time in results.json; from a thread of
  // the program's own, which no actor is, the simulation's state is not its to read: no report
  if (told && simulating && run_description_loaded())
    end_run("orrery_error", current_rank_id(), 0);
  if (told)
    _exit(0);
  fprintf(stderr, "orrery: error: %s\n", msg);
  _exit(70);
}

void unsupported(const char* function) {
  const sg4::Actor* self = sg4::Actor::is_maestro() ? nullptr : sg4::Actor::self();
  fatal("the program called %s, which Orrery does not simulate (actor %s); "
        "docs/supported-calls.md lists the calls it does",
        function, self ? self->get_cname() : "?");
}

}  // namespace orrery

void orrery_private_refuse(const char* function, const char* reason) {
  using namespace orrery;
  // Described as a rank first, as its first CUDA or MPI call would have it, so that the report
  // names the rank even when this is the program's first call; a process `orrery run` did not
  // start has no run description to describe it from.
  const char* description = getenv("ORRERY_RUN");
  if (description && *description && !sg4::Actor::is_maestro())
    rank_self(function);
  const sg4::Actor* self = sg4::Actor::is_maestro() ? nullptr : sg4::Actor::self();
  fatal("the program called %s, which Orrery does not simulate (actor %s): %s", function,
        self ? self->get_cname() : "?", reason);
}
