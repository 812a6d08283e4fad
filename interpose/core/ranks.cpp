/* The ranks: every MPI rank is a SimGrid actor, described on its first CUDA or MPI call
 * (rank_self) from its host and the run description. */
#include "core/ranks.hpp"

#include "core/gpus.hpp"
#include "core/links.hpp"
#include "core/outcome.hpp"
#include "core/report.hpp"
#include "core/trace.hpp"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

namespace orrery {

/* ---------------- ranks ---------------- */

std::map<long, std::unique_ptr<Rank>>& ranks() {
  static std::map<long, std::unique_ptr<Rank>> r;
  return r;
}

double now() { return sg4::Engine::get_clock(); }

/* The mutex condition variables need. Created with the first rank, not in a
 * function-local static: creating it may switch actors, which all run on one
 * OS thread, and a second actor would then re-enter the static's guard. */
static sg4::MutexPtr g_sim_mutex;
sg4::MutexPtr& sim_mutex() { return g_sim_mutex; }

static Rank& rank_created(const char* function);

/* The ranks by actor id, for the lookup at every call (the map above keeps them in rank order
 * for the report); nullptr for the actors that are no rank (streams). Built as the library loads,
 * not at its first use: that use can be the host clock's (host_clock.cpp) in a program's static
 * initialisation, called by the allocator while glibc's atexit holds its lock to grow its list
 * (NVRTC registers dozens of destructors), and registering this vector's destructor there waited
 * for that lock for ever. */
static std::vector<Rank*> g_by_pid;
static std::vector<Rank*>& by_pid() { return g_by_pid; }

Rank* rank_of_actor(long pid) {
  const std::vector<Rank*>& v = by_pid();
  return pid >= 0 && (size_t)pid < v.size() ? v[pid] : nullptr;
}

Rank* calling_rank() { return sg4::Actor::is_maestro() ? nullptr : rank_of_actor(sg4::Actor::self()->get_pid()); }

/* mpi.progress = in_calls: liborrery_smpi.so's progress points (smpi_colls.cpp), where an MPI call
 * of the rank enters past its host time, and its end, where its outermost call returns. */
static void (*g_progress_point)() = nullptr;
static void (*g_progress_end)() = nullptr;

/* The program's own host code costs no simulated time, so a loop that waits for time to pass in
 * it (a busy-wait on MPI_Wtime or the host clock, a computation repeated until the clock says it
 * took long enough: the OSU Micro-Benchmarks' non-blocking tests time their dummy compute so)
 * would run for ever at one simulated instant, the run hanging with no error. Ten million MPI
 * calls in a row with the rank's time unchanged (every MPI call that waits, tests or probes
 * advances it, by its message or the machine's poll time; those that post do not, but no program
 * posts ten million messages in one instant), or a hundred million reads of the host's clock
 * (a program may time many small pieces of host code with it, between two CUDA or MPI calls), or
 * as many of both together, stop the run, named: about 5 s of such a loop. */
constexpr uint64_t kStillCalls = 10'000'000, kStillReads = 100'000'000;

void note_still(Rank& r, bool clock_read) {
  const double t = host_now(r);
  if (t != r.still_at) {
    r.still_at = t;
    r.still_calls = r.still_reads = 0;
  }
  (clock_read ? r.still_reads : r.still_calls)++;
  if (r.still_calls * (kStillReads / kStillCalls) + r.still_reads >= kStillReads)
    fatal("rank %d made %llu MPI calls (MPI_Wtime among them) and %llu reads of the host's clock in a row at "
          "simulated time %.9g s with no simulated time passing: it waits for time to pass in its own host "
          "code (a busy-wait on the clock, or a computation repeated until the clock says it took long enough, "
          "as the OSU Micro-Benchmarks' non-blocking tests time their dummy compute), which costs no simulated "
          "time in Orrery, so the loop would never end",
          r.id, (unsigned long long)r.still_calls, (unsigned long long)r.still_reads, t);
}

// As every MPI call of a rank enters SMPI (liborrery_smpi.so, smpi_timers.cpp): its messages and
// its MPI_Wtime are at its own time, and, inside a call the shim wraps, it is a progress point.
static void catch_up_calling_rank() {
  if (Rank* r = calling_rank()) {
    catch_up(*r);
    note_still(*r, false);
    if (g_progress_point && r->in_mpi.name)  // (not SMPI's sleeps, nor MPI_Wtime, which the shim does not wrap)
      g_progress_point();
  }
}

void mpi_call_left(const Rank& r) {
  if (g_progress_end && !r.in_mpi.name)
    g_progress_end();
}

Rank& rank_self(const char* function) {
  Rank& r = rank_deferring(function);
  catch_up(r);
  return r;
}

Rank& rank_deferring(const char* function) {
  Rank* r = on_simulation_thread() ? calling_rank() : nullptr;
  return r ? *r : rank_created(function);  // (rank_created says why an actor is no rank)
}

static Rank& rank_created(const char* function) {
  if (!on_simulation_thread())
    fatal("%s called outside of any simulated rank, from a thread of the program's own (OpenMP's, "
          "std::thread's): Orrery simulates each rank's CUDA calls from the thread that runs its MPI",
          function);
  sg4::Actor* self = sg4::Actor::is_maestro() ? nullptr : sg4::Actor::self();
  if (!self)
    fatal("%s called outside of any simulated rank", function);
  auto& table = ranks();
  auto it = table.find(self->get_pid());
  if (it != table.end())
    return *it->second;

  char* end = nullptr;
  long id = strtol(self->get_cname(), &end, 10);
  if (end == self->get_cname() || *end)
    fatal("%s called from actor '%s', which is not an MPI rank (CUDA calls from host callbacks "
          "are not allowed, as on a real GPU)",
          function, self->get_cname());
  static bool hooked = false;  // once per simulation, not once per rank
  if (!hooked) {
    hooked = true;
    // every message's ends are pinned where its rank posted it (interpose/smpi_pins.cpp)
    if (!dlsym(RTLD_DEFAULT, "orrery_smpi_pins"))
      fatal("liborrery_smpi.so is not loaded: MPI messages would take routes from wherever their ranks "
            "stand when they match; run programs with `orrery run`, which preloads it into SMPI");
    sg4::Engine::on_simulation_end_cb(write_report);
    sg4::Engine::on_deadlock_cb(on_deadlock);
    check_no_foreign_runtime();
    install_failure_handlers();
    install_limits();
    install_message_copy();
    install_rma_ends();
    install_link_accounting();
    install_message_factors();  // (its network-factor callback tells the accounting of each transfer)
    trace::install();
    install_host_time_report();
    g_sim_mutex = sg4::Mutex::create();
    using OnMpiEntry = void (*)(void (*)());
    if (auto on_mpi_entry = reinterpret_cast<OnMpiEntry>(dlsym(RTLD_DEFAULT, "orrery_smpi_on_mpi_entry")))
      on_mpi_entry(catch_up_calling_rank);
    else
      fatal("liborrery_smpi.so has no orrery_smpi_on_mpi_entry: it is not this Orrery's");
    if (run_description().mpi.progress == Progress::InCalls) {
      using Mode = void (*)(int);
      auto mode = reinterpret_cast<Mode>(dlsym(RTLD_DEFAULT, "orrery_smpi_progress"));
      g_progress_point = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "orrery_smpi_progress_point"));
      g_progress_end = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "orrery_smpi_progress_end"));
      if (!mode || !g_progress_point || !g_progress_end)
        fatal("liborrery_smpi.so has no orrery_smpi_progress: it is not this Orrery's");
      mode(1);
    }
  }
  auto r = std::make_unique<Rank>();
  r->id = (int)id;
  r->host = self->get_host();
  // As on a cluster: a rank sees the GPUs of its node and starts on device 0,
  // or, bound (CUDA_VISIBLE_DEVICES per rank), only the GPU it runs next to.
  const RunDescription& d = run_description();
  if (d.gpu_visibility == GpuVisibility::Bound) {
    r->gpus.push_back(gpu_of_host(r->host));
  } else {
    for (const GpuHost* g : gpus_of_node(gpu_place(r->host).node))  // by device number
      r->gpus.push_back(gpu_of_host(host_by_name(g->host)));
  }
  r->device = 0;
  r->legacy.assign(r->gpus.size(), nullptr);
  r->per_thread.assign(r->gpus.size(), nullptr);
  r->cpu = r->id < (int)d.ranks.size() ? host_by_name(d.ranks[r->id].cpu) : nullptr;
  const std::optional<std::string>& endpoint = gpu_place(r->host).message_end;
  r->device_end = endpoint ? host_by_name(*endpoint) : r->host;
  auto mpi_path = [&](const MpiOverheads& o, const MessagePaths& gaps, bool device) {
    return MpiPath{device ? d.mpi.eager_device : d.mpi.eager_host, o.send_s, o.recv_s, o.send_intra_s,
                   o.recv_intra_s, device ? gaps.device_inter : gaps.host_inter,
                   device ? gaps.device_intra : gaps.host_intra};
  };
  r->mpi_host = mpi_path(d.mpi.host, d.mpi.gaps, false);
  r->mpi_device = mpi_path(d.mpi.device, d.mpi.gaps, true);
  Rank* rp = r.get();
  sg4::this_actor::on_exit([rp](bool killed) {
    if (rp->stats.end_s < 0)
      rp->stats.end_s = host_now(*rp);
    if (!killed)
      finish_rank(*rp);
  });
  table[self->get_pid()] = std::move(r);
  std::vector<Rank*>& index = by_pid();
  if ((size_t)self->get_pid() >= index.size())
    index.resize(self->get_pid() + 1, nullptr);
  index[self->get_pid()] = rp;
  return *rp;
}

/* The rank whose code is running: the calling rank, or the rank whose stream runs (a host
 * function); -1 outside any (SimGrid itself). */
int current_rank_id() {
  if (ranks().empty() || sg4::Actor::is_maestro())
    return -1;
  const sg4::Actor* self = sg4::Actor::self();
  auto it = ranks().find(self->get_pid());
  if (it != ranks().end())
    return it->second->id;
  int id = -1;
  return sscanf(self->get_cname(), "stream-r%d-", &id) == 1 ? id : -1;
}

}  // namespace orrery
