/* libbench_probe.so: what bench/scale.py needs to know from inside a bare-SMPI run.
 *
 * Preloaded into SMPI's launcher (smpirun -wrapper "env LD_PRELOAD=..."), never into Orrery's
 * runs, it registers SimGrid's public s4u signals and, when the simulation ends, writes to the
 * file named by BENCH_PROBE one line of JSON:
 *   - "messages": network actions that finished (s4u::Link's communication state changes to
 *     FINISHED). In a bare-SMPI run every network action is one MPI message (point-to-point or
 *     inside a collective, loopback included), so this counts the MPI pattern's messages;
 *   - "steps": the simulation's time advances (s4u::Engine::on_time_advance);
 *   - "maps": the launcher's memory maps (lines of /proc/self/maps) at the simulation's end, when
 *     every rank's stack, its copy of the program (SMPI's privatization) and its buffers exist;
 *   - wall-clock instants (CLOCK_REALTIME, seconds) of: this library's load in the launcher
 *     ("loaded"), the platform built ("platform_created") and the simulation's end (SMPI's
 *     launcher runs no s4u::Engine::run, so SimGrid never signals the simulation's start);
 *     bench/scale.py subtracts the instant it started smpirun.
 * The callbacks cost one increment per message, nothing that shows in a timed run. */
#include <simgrid/kernel/resource/Action.hpp>
#include <simgrid/s4u.hpp>

#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace sg4 = simgrid::s4u;
using simgrid::kernel::resource::Action;

namespace {
unsigned long long g_messages = 0, g_steps = 0;
double g_loaded = -1, g_platform = -1;

double wall() {
  timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

long count_maps() {
  FILE* f = std::fopen("/proc/self/maps", "r");
  if (!f)
    return -1;
  long lines = 0;
  char buf[1 << 16];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;)
    for (size_t i = 0; i < n; i++)
      lines += buf[i] == '\n';
  std::fclose(f);
  return lines;
}

void write_probe() {
  const char* path = std::getenv("BENCH_PROBE");
  if (!path)
    return;
  const long maps = count_maps();
  FILE* f = std::fopen(path, "w");
  if (!f)
    return;
  std::fprintf(f,
               "{\"messages\": %llu, \"steps\": %llu, \"maps\": %ld, \"loaded\": %.6f, \"platform_created\": %.6f, "
               "\"simulation_end\": %.6f}\n",
               g_messages, g_steps, maps, g_loaded, g_platform, wall());
  std::fclose(f);
}

__attribute__((constructor)) void install() {
  g_loaded = wall();
  sg4::Engine::on_platform_created_cb([] { g_platform = wall(); });
  sg4::Engine::on_time_advance_cb([](double) { g_steps++; });
  sg4::Engine::on_simulation_end_cb(write_probe);
  sg4::Link::on_communication_state_change_cb([](simgrid::kernel::resource::NetworkAction& a, Action::State) {
    // NetworkAction is declared only (forward.h); it derives from Action alone, at offset 0
    if (reinterpret_cast<Action&>(a).get_state() == Action::State::FINISHED)
      g_messages++;
  });
}
}  // namespace
