/* The launcher's environment of each rank: the variables mpirun, mpiexec, srun and torchrun set
 * in every process they start (world rank and size, local rank and size, node), answered per
 * rank by getenv, because every simulated rank lives in this one process with one environment.
 *
 * The program's getenv binds to this library's: SMPI dlopens each rank's copy of the program
 * with RTLD_DEEPBIND, so the copy and the libraries it links look symbols up in the program's
 * own dependency list, where libcudart.so.13 (linked last by the wrappers, before libc) comes
 * first; environment-<arch>.map gives these definitions glibc's version names, which the
 * program's references ask for. Code that looks symbols up in the global scope instead (the
 * libraries smpimain loaded first, libgfortran among them; libraries the program dlopens)
 * reaches them through the preloaded liborrery_smpi.so (environment_global.cpp), to which
 * this library hands them when it loads.
 *
 * A launcher overwrites these names, so the simulated values win over the user's own. environ
 * (one array for every rank) lists those whose value every rank shares (the sizes) and none of
 * the others, so that what it shows always agrees with getenv. A rank's setenv, unsetenv or
 * putenv of one of these names changes that rank's getenv only. Outside a rank (the maestro,
 * SimGrid's actors, threads that are no actor) and outside `orrery run` (no ORRERY_RUN) every
 * call is libc's. gethostname answers the rank's node's name the same way, and getopt keeps each
 * rank's place in its argv. docs/running.md, "Device selection by local rank", lists the names. */
#include "core/environment.hpp"
#include "core/runtime.hpp"

#include <dlfcn.h>
#include <getopt.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <string>
#include <vector>

namespace orrery {
namespace {


/* ---------------- where each rank is ---------------- */

struct Placement {
  int rank = 0, size = 0;
  int local_rank = 0, local_size = 0;  // among the ranks of its node, in rank order
  int node = 0, nodes = 0;             // its node's number among the job's nodes, from 0
  std::string tasks_per_node;          // Slurm's form: 3(x2),1
};

std::vector<Placement> place_ranks(const std::vector<RankPlace>& ranks) {
  std::map<int64_t, int> per_node;  // ranks of each node (std::map: by node number)
  for (const RankPlace& r : ranks)
    per_node[r.node]++;
  std::map<int64_t, int> ordinal, seen;
  std::string tasks;
  for (auto it = per_node.begin(); it != per_node.end();) {
    auto run = it;
    int repeat = 0;
    for (; run != per_node.end() && run->second == it->second; ++run)
      ordinal[run->first] = (int)ordinal.size(), repeat++;
    tasks += (tasks.empty() ? "" : ",") + std::to_string(it->second) +
             (repeat > 1 ? "(x" + std::to_string(repeat) + ")" : "");
    it = run;
  }
  std::vector<Placement> out;
  for (const RankPlace& r : ranks)
    out.push_back(Placement{(int)out.size(), (int)ranks.size(), seen[r.node]++, per_node[r.node],
                            ordinal[r.node], (int)per_node.size(), tasks});
  return out;
}

/* ---------------- the names ---------------- */

std::string world_rank(const Placement& p) { return std::to_string(p.rank); }
std::string world_size(const Placement& p) { return std::to_string(p.size); }
std::string local_rank(const Placement& p) { return std::to_string(p.local_rank); }
std::string local_size(const Placement& p) { return std::to_string(p.local_size); }
std::string node(const Placement& p) { return std::to_string(p.node); }
std::string nodes(const Placement& p) { return std::to_string(p.nodes); }
std::string tasks_per_node(const Placement& p) { return p.tasks_per_node; }

struct Variable {
  const char* name;
  std::string (*value)(const Placement&);
};

// What each launcher sets, as its documentation names it (docs/running.md lists the sources).
// Open MPI's node rank counts across every job on the node (one job here) and its universe is
// the job's slots (the simulated machine's ranks).
const Variable kVariables[] = {
    {"OMPI_COMM_WORLD_RANK", world_rank},   {"OMPI_COMM_WORLD_SIZE", world_size},
    {"OMPI_COMM_WORLD_LOCAL_RANK", local_rank}, {"OMPI_COMM_WORLD_LOCAL_SIZE", local_size},
    {"OMPI_COMM_WORLD_NODE_RANK", local_rank}, {"OMPI_UNIVERSE_SIZE", world_size},
    // MPICH's and Intel MPI's Hydra; Cray PMI and HPE PALS
    {"PMI_RANK", world_rank},               {"PMI_SIZE", world_size},
    {"MPI_LOCALRANKID", local_rank},        {"MPI_LOCALNRANKS", local_size},
    {"PMI_LOCAL_RANK", local_rank},         {"PMI_LOCAL_SIZE", local_size},
    {"PALS_RANKID", world_rank},            {"PALS_LOCAL_RANKID", local_rank},
    {"PALS_NODEID", node},
    // MVAPICH
    {"MV2_COMM_WORLD_RANK", world_rank},    {"MV2_COMM_WORLD_SIZE", world_size},
    {"MV2_COMM_WORLD_LOCAL_RANK", local_rank}, {"MV2_COMM_WORLD_LOCAL_SIZE", local_size},
    // Slurm's srun
    {"SLURM_PROCID", world_rank},           {"SLURM_NTASKS", world_size},
    {"SLURM_NPROCS", world_size},           {"SLURM_STEP_NUM_TASKS", world_size},
    {"SLURM_LOCALID", local_rank},          {"SLURM_NODEID", node},
    {"SLURM_NNODES", nodes},                {"SLURM_JOB_NUM_NODES", nodes},
    {"SLURM_STEP_NUM_NODES", nodes},        {"SLURM_TASKS_PER_NODE", tasks_per_node},
    {"SLURM_STEP_TASKS_PER_NODE", tasks_per_node},
    // torchrun (one worker group per node, one role)
    {"RANK", world_rank},                   {"WORLD_SIZE", world_size},
    {"LOCAL_RANK", local_rank},             {"LOCAL_WORLD_SIZE", local_size},
    {"GROUP_RANK", node},                   {"GROUP_WORLD_SIZE", nodes},
    {"ROLE_RANK", world_rank},              {"ROLE_WORLD_SIZE", world_size},
};

const Variable* variable(const char* name) {
  for (const Variable& v : kVariables)
    if (!strcmp(v.name, name))
      return &v;
  return nullptr;
}

/* ---------------- each rank's view ---------------- */

// Under `orrery run`; elsewhere (a wrapper-built binary run by configure) nothing is answered.
bool simulated() {
  const char* run = libc_environment().getenv("ORRERY_RUN");
  return run && *run;
}

const std::vector<Placement>& placements() {
  static const std::vector<Placement> p = place_ranks(run_description().ranks);
  return p;
}

/* The rank whose code calls: an MPI rank's actor (SMPI names it by its rank) or its stream's
 * (a host function); -1 for the maestro, SimGrid's other actors and threads that are no actor. */
int calling_rank() {
  if (sg4::Actor::is_maestro())
    return -1;
  const char* name = sg4::Actor::self()->get_cname();
  char* end = nullptr;
  long id = strtol(name, &end, 10);
  if (end == name || *end) {
    int stream_rank = -1;
    id = sscanf(name, "stream-r%d-", &stream_rank) == 1 ? stream_rank : -1;
  }
  return id >= 0 && id < (long)placements().size() ? (int)id : -1;
}

std::deque<std::string>& kept() {  // every value handed out, never freed (as glibc's setenv)
  static std::deque<std::string> k;
  return k;
}

const char* keep(std::string value) { return kept().emplace_back(std::move(value)).c_str(); }

/* The calling rank's value of a launcher name (nullptr: unset), which the rank may change; or
 * nullptr for another name or outside a rank. */
const char** rank_slot(const char* name) {
  const Variable* v = variable(name);
  if (!v || !simulated())
    return nullptr;
  int r = calling_rank();
  if (r < 0)
    return nullptr;
  // by rank, then name: filled as the rank asks (16384 ranks x every name would be megabytes)
  static std::map<int, std::map<std::string, const char*>> views;
  auto [it, created] = views[r].try_emplace(v->name, nullptr);
  if (created)
    it->second = keep(v->value(placements()[r]));
  return &it->second;
}

/* ---------------- the functions ---------------- */

char* rank_getenv(const char* name) {
  if (const char** slot = rank_slot(name))
    return const_cast<char*>(*slot);
  return libc_environment().getenv(name);
}

char* rank_secure_getenv(const char* name) {
  if (const char** slot = rank_slot(name))
    return const_cast<char*>(*slot);
  return libc_environment().secure_getenv(name);
}

int rank_setenv(const char* name, const char* value, int replace) {
  const char** slot = name ? rank_slot(name) : nullptr;  // libc answers EINVAL for a null name
  if (!slot)
    return libc_environment().setenv(name, value, replace);
  if (replace || !*slot)
    *slot = keep(value);
  return 0;
}

int rank_unsetenv(const char* name) {
  const char** slot = rank_slot(name);
  if (!slot)
    return libc_environment().unsetenv(name);
  *slot = nullptr;
  return 0;
}

// NAME=VALUE sets, NAME alone unsets (glibc's extension); the rank's copy, not the string itself
int rank_putenv(char* string) {
  const char* eq = strchr(string, '=');
  std::string name = eq ? std::string(string, eq - string) : std::string(string);
  const char** slot = rank_slot(name.c_str());
  if (!slot)
    return libc_environment().putenv(string);
  *slot = eq ? keep(eq + 1) : nullptr;
  return 0;
}

/* Each rank's host name: that of its node, as the platform names it (n0, n1, ...), since every
 * rank lives on this one host. Programs find the ranks sharing a node by their host names
 * (nccl-tests' local rank, from a hash of gethostname), and pick their GPU from it. */
int node_hostname(char* name, size_t len) {
  static const auto libc = reinterpret_cast<int (*)(char*, size_t)>(
      dlsym(dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD), "gethostname"));
  int r = simulated() ? calling_rank() : -1;
  if (r < 0)
    return libc(name, len);
  std::string host = "n" + std::to_string(placements()[r].node);
  if (host.size() >= len) {  // as glibc: truncated, ENAMETOOLONG
    if (len)
      memcpy(name, host.data(), len);
    errno = ENAMETOOLONG;
    return -1;
  }
  memcpy(name, host.c_str(), host.size() + 1);
  return 0;
}

/* getopt's place in argv (optind) is one variable of libc for every rank: the second rank to parse
 * its options would find the first's parse finished and see none (nccl-tests' ranks 1.. would
 * keep their defaults). Each rank keeps its own between its calls, starting at 0, which makes
 * glibc's getopt start afresh; a value the program itself stored in optind since the last call
 * (optind = 1 to parse again) is the program's. SMPI's smpi_getopt does the same for code
 * compiled by smpicc. A rank parses its options in one go (getopt never yields to another
 * actor), so glibc's own state between calls (a group of short options) stays the rank's. */
template <class Call>
int rank_getopt(Call call) {
  int r = simulated() ? calling_rank() : -1;
  if (r < 0)
    return call();
  static std::map<int, int> next;  // each rank's optind after its last call
  static int left = -1;            // what the last call left in optind
  auto [it, created] = next.try_emplace(r, 0);
  if (optind == left || left < 0)
    optind = it->second;
  int c = call();
  it->second = left = optind;
  return c;
}

template <class F>
F libc_getopt(const char* name) {
  void* libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
  return reinterpret_cast<F>(libc ? dlsym(libc, name) : nullptr);
}

int rank_getopt_short(int argc, char* const* argv, const char* options) {
  static const auto f = libc_getopt<int (*)(int, char* const*, const char*)>("getopt");
  return rank_getopt([&] { return f(argc, argv, options); });
}

using GetoptLong = int (*)(int, char* const*, const char*, const struct option*, int*);

int rank_getopt_long(int argc, char* const* argv, const char* options, const struct option* longs, int* index) {
  static const auto f = libc_getopt<GetoptLong>("getopt_long");
  return rank_getopt([&] { return f(argc, argv, options, longs, index); });
}

int rank_getopt_long_only(int argc, char* const* argv, const char* options, const struct option* longs,
                          int* index) {
  static const auto f = libc_getopt<GetoptLong>("getopt_long_only");
  return rank_getopt([&] { return f(argc, argv, options, longs, index); });
}

const EnvironmentFunctions kRankFunctions{rank_getenv, rank_secure_getenv, rank_setenv, rank_unsetenv,
                                          rank_putenv};

decltype(&orrery_environment_register) global_register() {
  using Register = decltype(&orrery_environment_register);
  return reinterpret_cast<Register>(dlsym(RTLD_DEFAULT, "orrery_environment_register"));
}

/* Once, when the program's first copy loads this library, before any of its code runs:
 * environ gets the values every rank shares and loses the others (a user's own, or the values
 * of the job Orrery itself runs in, would disagree with the ranks' getenv), and the preloaded
 * liborrery_smpi.so (environment_global.cpp) starts answering with these functions. */
__attribute__((constructor)) void install_rank_environment() {
  if (!simulated() || placements().empty())
    return;
  for (const Variable& v : kVariables) {
    std::string first = v.value(placements().front());
    bool shared = true;
    for (const Placement& p : placements())
      shared = shared && v.value(p) == first;
    if (shared)
      libc_environment().setenv(v.name, first.c_str(), 1);
    else
      libc_environment().unsetenv(v.name);
  }
  if (auto hand_over = global_register())
    hand_over(&kRankFunctions);
}

// Should the last program copy unload this library, the preloaded one must not call into it.
__attribute__((destructor)) void uninstall_rank_environment() {
  if (auto hand_over = global_register())
    hand_over(nullptr);
}

}  // namespace

int rank_gethostname(char* name, size_t len) { return node_hostname(name, len); }
}  // namespace orrery

ORR_EXPORT char* getenv(const char* name) noexcept { return orrery::rank_getenv(name); }
ORR_EXPORT char* secure_getenv(const char* name) noexcept { return orrery::rank_secure_getenv(name); }
ORR_EXPORT int setenv(const char* name, const char* value, int replace) noexcept {
  return orrery::rank_setenv(name, value, replace);
}
ORR_EXPORT int unsetenv(const char* name) noexcept { return orrery::rank_unsetenv(name); }
ORR_EXPORT int putenv(char* string) noexcept { return orrery::rank_putenv(string); }
ORR_EXPORT int gethostname(char* name, size_t len) noexcept { return orrery::rank_gethostname(name, len); }
ORR_EXPORT int getopt(int argc, char* const* argv, const char* options) noexcept {
  return orrery::rank_getopt_short(argc, argv, options);
}
ORR_EXPORT int getopt_long(int argc, char* const* argv, const char* options, const struct option* longs,
                           int* index) noexcept {
  return orrery::rank_getopt_long(argc, argv, options, longs, index);
}
ORR_EXPORT int getopt_long_only(int argc, char* const* argv, const char* options, const struct option* longs,
                                int* index) noexcept {
  return orrery::rank_getopt_long_only(argc, argv, options, longs, index);
}
