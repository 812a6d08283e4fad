/* The run's description: run.json, written by `orrery run` and named by ORRERY_RUN, read once
 * by the parser generated from run_description.json (gen_run_description.py), and the lookups
 * of what it lists. */
#include "core/runtime.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

namespace orrery {

/* ---------------- the run's description ---------------- */

static bool g_loaded = false;

bool run_description_loaded() { return g_loaded; }

static RunDescription load_description() {
  const char* path = getenv("ORRERY_RUN");
  if (!path || !*path)
    fatal("no run description (ORRERY_RUN is not set): run programs with `orrery run`");
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  if (!in)
    fatal("cannot read the run description %s (ORRERY_RUN)", path);
  return parse_run_description(text.str(), path);
}

const RunDescription& run_description() {
  static const RunDescription d = load_description();
  g_loaded = true;
  return d;
}

const GpuHost& gpu_place(const sg4::Host* host) {
  static const std::map<std::string, const GpuHost*> by_host = [] {
    std::map<std::string, const GpuHost*> m;
    for (const GpuHost& g : run_description().gpus)
      m[g.host] = &g;
    return m;
  }();
  auto it = by_host.find(host->get_name());
  if (it == by_host.end())
    fatal("the run description has no GPU on platform host %s", host->get_cname());
  return *it->second;
}

/* Built once: each rank asks for its node's GPUs as it starts, where a scan of every GPU per rank
 * (each a lookup by host name) was the square of the ranks (about 10 s at 16 384 GPUs,
 * bench/README.md). */
const std::vector<const GpuHost*>& gpus_of_node(int64_t node) {
  static const std::map<int64_t, std::vector<const GpuHost*>> by_node = [] {
    std::map<int64_t, std::vector<const GpuHost*>> m;
    for (const GpuHost& g : run_description().gpus)
      m[g.node].push_back(&g);
    for (auto& [n, gpus] : m)
      std::sort(gpus.begin(), gpus.end(), [](const GpuHost* a, const GpuHost* b) { return a->index < b->index; });
    return m;
  }();
  static const std::vector<const GpuHost*> none;
  auto it = by_node.find(node);
  return it == by_node.end() ? none : it->second;
}

}  // namespace orrery
