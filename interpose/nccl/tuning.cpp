/* NCCL's tuning model (tuning.hpp), restated from NCCL's source at commit 5067397c:
 * src/graph/tuning.cc (ncclTopoTuneModel: the latency and bandwidth tables per function,
 * algorithm and protocol; ncclTopoGetAlgoTime: the time of one call), src/enqueue.cc
 * (topoGetAlgoInfo: the fastest enabled combination, then the channels for the call's size),
 * src/graph/search.cc (ncclTopoCompute: the channels and per-channel bandwidths each algorithm's
 * graph gets) and src/graph/connect.cc (ncclTopoPostset: the channels a communicator runs).
 *
 * What is approximated, and why:
 *  - NCCL searches its topology graph (PCI tree, NVLink, NICs) for rings, trees and NVLS heads.
 *    Here the search is replayed on a CommShape instead: each GPU has intra_bw of NVLink (or
 *    PCIe) and one NIC of inter_bw (rails); a channel of speed s fits while the links it crosses
 *    have s left. The speed ladder, the order NCCL tries speeds in, its stopping rules, the
 *    channel duplication and pass 2 (raising the speed) follow search.cc. A mesh of NVLinks
 *    without a switch is treated as if its rings could spread over all of a GPU's links.
 *  - The host CPU is taken as Intel-like (not AMD, not POWER): it decides NCCL's LL bandwidth
 *    cap between nodes (llMaxBws row 0) and the network overhead (1 us).
 *  - No CollNet (SHARP): CollNetDirect/CollNetChain are never used, and so NVLS across nodes
 *    is not either (NVLSTree is). NVLS is taken as supported for every datatype and operation.
 *  - Rings are taken to repeat the same GPU order on every channel (graph->sameChannels), the
 *    tree graph to keep the balanced pattern (no 0.85 penalty), the network latency of the
 *    NIC plugin as 0 (IB's), one call per group (numPipeOps = 1).
 *  - Times are computed in double precision; NCCL computes them in float.
 */
#include "nccl/tuning.hpp"

#include "driver/runtime_bridge.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <strings.h>
#include <vector>

namespace orrery::nccl {

namespace {

// ---- NCCL's names (src/init.cc @5067397c: ncclFuncStr, ncclAlgoStr, ncclProtoStr) ----
const char* const kFuncNames[kFuncs] = {"Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce"};
const char* const kAlgoNames[kAlgos] = {"Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT"};
const char* const kProtoNames[kProtos] = {"LL", "LL128", "Simple"};

// ---- NCCL's tuner constants (src/graph/tuning.cc @5067397c, ncclTunerConstantsDefaults) ----
// Base latency per algorithm and protocol, us.
constexpr double kBaseLatency[kAlgos][kProtos] = {
    {6.8, 14.0, 8.4}, {6.6, 14.0, 8.4},  // Tree, Ring
    {0, 0, 0},        {0, 0, 0},         // CollNetDirect, CollNetChain
    {0, 0, 0},        {0, 0, 0},         // NVLS, NVLSTree
    {8.0, 8.0, 8.0}};                    // PAT
// Latency of one step per link class (NVLink, PCI, network), algorithm and protocol, us.
constexpr double kHwLatency[3][kAlgos][kProtos] = {
    {{0.6, 1.25, 4.0}, {0.6, 1.9, 3.4}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 25}, {0, 0, 25}, {0, 0, 4.0}},
    {{1.0, 1.9, 4.0}, {1.0, 2.5, 5.7}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 0}, {0, 0, 0}, {0, 0, 4.0}},
    {{5.0, 8.5, 14}, {2.7, 4.0, 14.0}, {0, 0, 31}, {0, 0, 30}, {0, 0, 18}, {0, 0, 20.9}, {0, 0, 14}}};
// Bandwidth caps, GB/s, by [GPU generation: Volta, Ampere, Hopper, Blackwell][1, 2, >2 nodes];
// llMaxBws' first index is the GPU on one node, the CPU (0 Intel, 1 AMD) across nodes.
constexpr double kLlMaxBw[4][3] = {{39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {282.0, 90.0, 70.0}};
constexpr double kPerChMaxRingLL128Bw[4][3] = {{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 36.7}, {40, 40, 40}};
constexpr double kPerChMaxTreeLL128Bw[4][3] = {{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 29.0}, {55.6, 31.67, 20.0}};
constexpr double kPerChMaxTreeBw[4][3] = {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {70.0, 42.8, 24.0}};
constexpr double kPerChMaxNvlsTreeBw[4][3] = {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {0, 57.7, 45.5}, {0, 96.0, 80.0}};
constexpr double kNvlsEfficiency[4] = {0, 0, 0.85, 0.74};  // tuning.cc nvlsEfficiency
// Trees' correction of the bandwidth per protocol, for sizes 64 B x 2^i (tuning.cc treeCorrectionFactor).
constexpr double kTreeCorrection[kProtos][24] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9}};
constexpr double kNetOverheadUs = 1.0;  // tuning.cc getNetOverhead, Intel or unknown CPU
constexpr double kPciBw = 12.0;         // src/graph/topo.h PCI_BW, GB/s

// ---- threads and thresholds (src/include/device.h, src/include/comm.h @5067397c) ----
constexpr int kMaxChannels = 64;         // MAXCHANNELS
constexpr int kSimpleMaxThreads = 512;   // NCCL_SIMPLE_MAX_NTHREADS
constexpr int kLlMaxThreads = 512;       // NCCL_LL_MAX_NTHREADS
constexpr int kLl128MaxThreads = 640;    // NCCL_LL128_MAX_NTHREADS
constexpr int kLlThreshold = 8;          // NCCL_LL_THREAD_THRESHOLD
constexpr int kLl128Threshold = 8;       // NCCL_LL128_THREAD_THRESHOLD
constexpr int kSimpleThreshold = 64;     // NCCL_SIMPLE_THREAD_THRESHOLD
constexpr int kMaxNvlsArity = 32;        // NCCL_MAX_NVLS_ARITY
constexpr int kNvlsChannelsSm90 = 16;    // src/transport/nvls.cc NVLS_NCHANNELS_SM90
constexpr int kNvlsChannelsSm100 = 32;   // NVLS_NCHANNELS_SM100 (several nodes)
constexpr int kNvlsChannelsSm100Nvl = 24;  // NVLS_NCHANNELS_SM100_NVL (one node)

// ---- the search's speed ladders, GB/s per channel (src/graph/search.cc @5067397c) ----
const std::vector<double> kSpeedIntra = {40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0};
const std::vector<double> kSpeedInter = {48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0,
                                         7.0,  6.0,  5.0,  4.0,  3.0,  2.4,  1.2,  0.24, 0.12};
const std::vector<double> kSm90SpeedIntra = {60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0};
const std::vector<double> kSm90SpeedInter = {48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5,
                                             15.0, 12.0, 6.0,  3.0,  2.4,  1.2,  0.24, 0.12};
const std::vector<double> kSm100SpeedIntra = {90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0};
const std::vector<double> kSm100SpeedInter = {96.0, 86.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0,
                                              20.0, 17.5, 15.0, 12.0, 6.0,  3.0,  2.4,  1.2,  0.24, 0.12};

int log2i(size_t n) {  // NCCL's log2i: floor(log2(n)), -1 for 0
  int r = -1;
  while (n) {
    n >>= 1;
    r++;
  }
  return r;
}

int generation(int sm) { return sm >= 100 ? 3 : sm >= 90 ? 2 : sm >= 80 ? 1 : 0; }

// One algorithm's graph as ncclTopoCompute leaves it.
struct Graph {
  int nchannels = 0;
  double bw_intra = 0, bw_inter = 0;  // GB/s per channel
};

enum class Pattern { kRing, kTree, kNvls };

// The search replayed on the shape. capacity(s_intra, s_inter) is how many channels of those
// speeds the links hold (what ncclTopoSearchRec would find when given enough time).
class Search {
 public:
  Search(const CommShape& s) : shape_(s) {
    multi_ = s.nnodes > 1;
    local_ = std::max(1, s.max_local_ranks);
    intra_ = s.intra_bw / 1e9;
    inter_ = s.inter_bw / 1e9;
    const bool sm100 = s.sm >= 100, sm90 = s.sm >= 90;
    speeds_ = multi_ ? (sm100 ? &kSm100SpeedInter : sm90 ? &kSm90SpeedInter : &kSpeedInter)
                     : (sm100 ? &kSm100SpeedIntra : sm90 ? &kSm90SpeedIntra : &kSpeedIntra);
    // search.cc ncclTopoSearchInit: maxBw is the best GPU-to-GPU (or GPU-to-NIC) path, totalBw a
    // GPU's NVLink total (or its PCIe link).
    max_bw_ = multi_ ? inter_ : intra_;
    total_bw_ = (multi_ && local_ == 1) ? inter_ : intra_;
  }

  Graph ring() const {
    Graph g = pass1(Pattern::kRing, 1, kMaxChannels / 2);
    dup(g);
    // Pass 2: a faster ring with at least as many channels (every faster speed is tried).
    size_t i = index_at_most(g.bw_inter);
    while (i > 0) {
      double s = (*speeds_)[--i];
      int n = std::min(kMaxChannels / 2, capacity(Pattern::kRing, s, s));
      if (n >= g.nchannels && n * s > g.nchannels * g.bw_intra) g = {n, s, s};
    }
    return g;
  }

  Graph tree(int ring_channels) const {
    Graph g = pass1(Pattern::kTree, ring_channels, ring_channels);
    dup(g);
    // Pass 2: raise the intra-node speed while it stays under twice the inter-node one.
    size_t i = index_at_most(g.bw_intra);
    while (i > 0 && g.bw_intra < 2 * g.bw_inter) {
      double s = (*speeds_)[--i];
      if (capacity(Pattern::kTree, s, g.bw_inter) < g.nchannels) break;
      g.bw_intra = s;
    }
    return g;
  }

  // NVLS needs an NVSwitch and Hopper or later (search.cc), and two GPUs on the node (nvls.cc).
  Graph nvls() const {
    if (!shape_.nvswitch || shape_.sm < 90 || local_ < 2) return {};
    int most = std::min(kMaxNvlsArity, local_);
    Graph g = pass1(Pattern::kNvls, multi_ ? 1 : most, most);
    // Pass 2: raise the inter-node speed, channels fixed, while under twice the intra-node one.
    size_t i = index_at_most(g.bw_inter);
    while (i > 0 && g.bw_inter < 2 * g.bw_intra) {
      double s = (*speeds_)[--i];
      if (capacity(Pattern::kNvls, g.bw_intra, s) < g.nchannels) break;
      g.bw_inter = s;
    }
    return g;
  }

 private:
  int capacity(Pattern p, double s_intra, double s_inter) const {
    const int unlimited = std::numeric_limits<int>::max();
    if (p == Pattern::kNvls) {
      // Every channel pulls s from each GPU's NVLink and twice that from its head's.
      int by_nvlink = (int)std::floor(intra_ / s_intra) - 1;
      int by_nic = !multi_ ? unlimited : inter_ >= s_inter ? local_ : 0;  // one head per NIC
      return std::max(0, std::min(by_nvlink, by_nic));
    }
    if (!multi_) return (int)std::floor(intra_ / s_intra);
    // A channel enters the node through one NIC and leaves through one, and crosses
    // local - 1 NVLink hops, spread over the node's GPUs.
    int by_nic = local_ * (int)std::floor(inter_ / s_inter);
    int by_nvlink = local_ == 1 ? unlimited : (int)std::floor(intra_ * local_ / ((local_ - 1) * s_intra));
    return std::min(by_nic, by_nvlink);
  }

  size_t index_at_most(double bw) const {
    size_t i = 0;
    while (i + 1 < speeds_->size() && (*speeds_)[i] > bw) i++;
    return i;
  }

  // Pass 1 of ncclTopoCompute: from the fastest speed the paths allow, down while no solution is
  // perfect (maxChannels found) or fills totalBw, and the next speed is over 0.49 of the best's.
  Graph pass1(Pattern p, int min_channels, int max_channels) const {
    double total = total_bw_;
    // "algo other than RING do not need to close to the starting NET": trees and NVLS count
    // ndevs / (ndevs - 1) of the bandwidth when choosing where to start.
    if (p != Pattern::kRing && local_ > 1) total *= local_ * 1.0 / (local_ - 1);
    size_t i = 0;
    while (i + 1 < speeds_->size() && ((*speeds_)[i] > max_bw_ || (*speeds_)[i] * min_channels > total)) i++;
    Graph best;
    for (;;) {
      double s = (*speeds_)[i];
      int n = std::min(max_channels, capacity(p, s, s));
      bool better = false;
      if (n >= min_channels) {
        if (p == Pattern::kNvls)  // more heads first, then more bandwidth (ncclTopoCompareGraphs)
          better = n > best.nchannels || n * s > best.nchannels * best.bw_inter;
        else
          better = n * s > best.nchannels * best.bw_intra;
      }
      if (better) best = {n, s, s};
      if (best.nchannels == max_channels) break;
      if (best.nchannels * best.bw_inter >= total_bw_) break;
      if (i + 1 >= speeds_->size()) break;
      if (best.nchannels != 0 && (*speeds_)[i + 1] / best.bw_inter <= .49) break;
      i++;
    }
    if (best.nchannels == 0) best = {1, 0.1, 0.1};  // NCCL's fallback: one slow channel
    return best;
  }

  // ncclTopoDupChannels: fast channels are split in two (except NVLS, and not on Hopper when
  // slower than 50 GB/s with more than 4 channels).
  void dup(Graph& g) const {
    if (g.bw_intra < 25.0) return;
    if (shape_.sm > 80 && g.bw_intra < 50.0 && g.nchannels > 4) return;
    int doubled = std::min(g.nchannels * 2, kMaxChannels / 2);
    int split = (doubled + g.nchannels - 1) / g.nchannels;
    g.bw_intra /= split;
    g.bw_inter /= split;
    g.nchannels = doubled;
  }

  const CommShape& shape_;
  bool multi_;
  int local_;
  double intra_, inter_, max_bw_, total_bw_;
  const std::vector<double>* speeds_;
};

[[noreturn]] void bad_env(const char* variable, const char* value, const std::string& what) {
  std::string where = std::string(variable) + "=\"" + value + "\"";
  orrery_private_fatal(where.c_str(), what.c_str());
}

std::string names(const char* const* list, int n) {
  std::string s;
  for (int i = 0; i < n; i++) s += (i ? ", " : "") + std::string(list[i]);
  return s;
}

// NCCL's parseList (tuning.cc): "[^]a,b" for every function, then "func:[^]a,b" entries separated
// by ';' (only the first may lack a prefix); names are case-insensitive; '^' enables all but those.
void parse_list(const char* variable, const char* value, const char* const* elems, int nelems, const char* kind,
                int* list /* [kFuncs][nelems] */) {
  const std::string expected = std::string("expected ") + kind + "s among " + names(elems, nelems) +
                               ", optionally after '^' (all but those) and a function prefix among " +
                               names(kFuncNames, kFuncs) + " (e.g. \"allreduce:tree,ring;broadcast:ring\")";
  std::string text = value;
  size_t start = 0;
  bool first = true;
  while (start <= text.size()) {
    size_t end = text.find(';', start);
    if (end == std::string::npos) end = text.size();
    std::string entry = text.substr(start, end - start);
    start = end + 1;
    if (entry.empty()) {  // strtok_r skips empty tokens
      if (end == text.size()) break;
      continue;
    }
    std::string prefix, elements = entry;
    size_t colon = entry.find(':');
    if (colon != std::string::npos) {
      prefix = entry.substr(0, colon);
      elements = entry.substr(colon + 1);
      size_t second = elements.find(':');
      if (second != std::string::npos) elements = elements.substr(0, second);
    } else if (!first) {
      bad_env(variable, value, "every entry but the first must start with a function prefix (\"" + entry + "\"); " +
                                   expected);
    }
    first = false;
    int set = 1;
    if (!elements.empty() && elements[0] == '^') {
      set = 0;
      elements = elements.substr(1);
    }
    bool found_prefix = false;
    for (int f = 0; f < kFuncs; f++) {
      if (!prefix.empty() && strcasecmp(prefix.c_str(), kFuncNames[f]) != 0) continue;
      found_prefix = true;
      for (int e = 0; e < nelems; e++) list[f * nelems + e] = 1 - set;
      size_t p = 0;
      while (p <= elements.size()) {
        size_t q = elements.find(',', p);
        if (q == std::string::npos) q = elements.size();
        std::string name = elements.substr(p, q - p);
        p = q + 1;
        if (name.empty()) {
          if (q == elements.size()) break;
          continue;
        }
        int e = 0;
        while (e < nelems && strcasecmp(name.c_str(), elems[e]) != 0) e++;
        if (e == nelems) bad_env(variable, value, "unknown " + std::string(kind) + " \"" + name + "\"; " + expected);
        list[f * nelems + e] = set;
      }
    }
    if (!found_prefix) bad_env(variable, value, "unknown function prefix \"" + prefix + "\"; " + expected);
  }
}

// NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS (connect.cc): an integer; -2 (NCCL's "unset") if absent.
long channels_env(const char* variable) {
  const char* value = getenv(variable);
  if (!value || !*value) return -2;
  errno = 0;
  char* end = nullptr;
  long v = strtol(value, &end, 0);
  if (errno != 0 || end == value || *end != '\0' || v < INT_MIN || v > INT_MAX)
    bad_env(variable, value, "expected an integer number of channels");
  return v;
}

}  // namespace

const char* algo_name(int algo) { return algo >= 0 && algo < kAlgos ? kAlgoNames[algo] : "?"; }
const char* proto_name(int proto) { return proto >= 0 && proto < kProtos ? kProtoNames[proto] : "?"; }
const char* func_name(int func) { return func >= 0 && func < kFuncs ? kFuncNames[func] : "?"; }

Tuner::Tuner(const CommShape& shape) : shape_(shape) {
  // The environment is read whatever the size, so that a bad value stops even a one-rank run.
  int proto_enable[kFuncs * kProtos], algo_enable[kFuncs * kAlgos];
  for (int f = 0; f < kFuncs; f++) {
    for (int p = 0; p < kProtos; p++) proto_enable[f * kProtos + p] = p == kLL128 ? 2 : 1;  // 2: NCCL decides
    for (int a = 0; a < kAlgos; a++) algo_enable[f * kAlgos + a] = 1;
  }
  if (const char* s = getenv("NCCL_PROTO")) parse_list("NCCL_PROTO", s, kProtoNames, kProtos, "protocol", proto_enable);
  if (const char* s = getenv("NCCL_ALGO")) parse_list("NCCL_ALGO", s, kAlgoNames, kAlgos, "algorithm", algo_enable);
  long min_env = channels_env("NCCL_MIN_NCHANNELS"), max_env = channels_env("NCCL_MAX_NCHANNELS");
  // connect.cc ncclMinNchannels / ncclMaxNchannels: clamped to [0, 64] and [1, 64].
  int min_channels = min_env == -2 ? 0 : (int)std::clamp<long>(min_env, 0, kMaxChannels);
  int max_channels = max_env == -2 ? kMaxChannels : (int)std::clamp<long>(max_env, 1, kMaxChannels);

  const int nranks = shape.nranks, nnodes = std::max(1, shape.nnodes);
  if (nranks <= 1) return;  // tuning.cc returns before the tables for one rank

  Search search(shape);
  Graph graphs[kAlgos];
  graphs[kRing] = search.ring();
  graphs[kTree] = search.tree(graphs[kRing].nchannels);
  graphs[kPat] = graphs[kTree];                   // init.cc: PAT uses the tree graph
  graphs[kNvls] = graphs[kNvlsTree] = search.nvls();  // and both NVLS algorithms the NVLS graph
  for (int a = 0; a < kAlgos; a++) graph_channels_[a] = graphs[a].nchannels;

  // Channels at run time (connect.cc ncclTopoPostset): the ring's channels doubled, doubled again
  // between nodes on Hopper when the ring is fast and short of 16, then NCCL_MAX/MIN_NCHANNELS.
  int nc = std::min(kMaxChannels, graphs[kRing].nchannels * 2);
  if (shape.sm >= 90 && nnodes > 1 && graphs[kRing].bw_intra > 45.0 && nc < 16) nc *= 2;
  nc = std::min(max_channels, nc);
  nc = std::max(nc, min_channels);
  comm_channels_ = nc;
  if (graphs[kNvls].nchannels > 0)  // nvls.cc ncclNvlsTuning (NCCL_NVLS_NCHANNELS is not read)
    nvls_channels_ = shape.sm >= 100 ? (nnodes > 1 ? kNvlsChannelsSm100 : kNvlsChannelsSm100Nvl) : kNvlsChannelsSm90;
  ring_simple_threads_ = graphs[kRing].bw_intra * graphs[kRing].nchannels <= kPciBw ? 256 : kSimpleMaxThreads;

  // ---- ncclTopoTuneModel ----
  const int gen = generation(shape.sm);
  const int idx2 = nnodes <= 2 ? nnodes - 1 : 2;
  const double ll_max_bw = kLlMaxBw[nnodes == 1 ? gen : 0][idx2];
  const double ppn = (double)nranks / nnodes;
  const int intra_hw = shape.intra_nvlink ? kHwNvlink : kHwPci;
  const int hw = nnodes == 1 ? intra_hw : kHwNet;
  const bool pat_enable = shape.sm >= 60 && nnodes == nranks;  // tuning.cc ncclPatEnable, host network
  for (int f = 0; f < kFuncs; f++) {
    const int nsteps = f == kAllReduce ? 2 * (nranks - 1) : (f == kReduceScatter || f == kAllGather) ? nranks - 1 : nranks;
    for (int a = 0; a < kAlgos; a++) {
      if ((f == kBroadcast || f == kReduce) && a != kRing) continue;
      if ((f == kReduceScatter || f == kAllGather) && a != kPat && a != kRing && a != kNvls && a != kCollNetDirect)
        continue;
      if (f == kAllReduce && a == kPat) continue;
      const Graph& g = graphs[a];
      for (int p = 0; p < kProtos; p++) {
        if ((a == kNvls || a == kNvlsTree) && p != kSimple) continue;
        if ((f == kReduceScatter || f == kAllGather) && a == kPat && (p != kSimple || !pat_enable)) continue;
        double bw = nnodes <= 2 ? g.bw_intra : g.bw_inter;
        if (a == kNvls || a == kNvlsTree) {
          if (g.nchannels < 2) continue;
          double intra = g.bw_intra * kNvlsEfficiency[gen] * (g.nchannels - 1) / g.nchannels;
          intra *= f == kAllReduce ? 2.0 : (ppn - 1) / ppn;
          double inter = g.bw_inter * ((nnodes <= 2 && a == kNvlsTree) ? 2 : 1);
          bw = std::min(intra, inter);
          if (a == kNvlsTree) bw = std::min(bw, kPerChMaxNvlsTreeBw[gen][idx2]);
        }
        double bus = g.nchannels * bw;
        if (a == kRing && p == kLL) bus = std::min(ll_max_bw, bus * .5);
        if (a == kRing && p == kLL128) bus = std::min(bus * 0.92, g.nchannels * kPerChMaxRingLL128Bw[gen][idx2]);
        if (a == kTree && f == kAllReduce) bus = std::min(bus * .92, g.nchannels * kPerChMaxTreeBw[gen][idx2]);
        if (a == kTree && p == kLL) bus = std::min(bus * 1.0 / 3.8, ll_max_bw);
        if (a == kTree && p == kLL128)
          bus = std::min(bus * (nnodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0), g.nchannels * kPerChMaxTreeLL128Bw[gen][idx2]);
        if (a == kPat) bus *= .75;
        if (a == kCollNetDirect || a == kCollNetChain) bus = 0;  // no CollNet
        // NVLS for AllGather/ReduceScatter across nodes needs CollNet.
        if (a == kNvls && (f == kAllGather || f == kReduceScatter) && nnodes > 1) bus = 0;
        // Bus bandwidth to algorithm bandwidth.
        if (!(a != kRing && (f == kAllGather || f == kReduceScatter)))
          bus *= (a == kRing || a == kNvls || a == kNvlsTree) ? (1.0 * nranks) / nsteps : .5;
        bandwidth_[f][a][p] = bus;

        double lat = kBaseLatency[a][p];
        double intra_lat = kHwLatency[intra_hw][a][p];
        double inter_lat = ppn == 1 ? kHwLatency[kHwNet][kTree][p] : kHwLatency[kHwNet][a][p];  // + latencyInter, 0
        if (a == kRing) {
          if (f == kReduce || f == kBroadcast) {
            lat += kHwLatency[hw][a][p];  // sameChannels
          } else {
            double net_overhead = nnodes > 1 ? kNetOverheadUs * (p == kSimple ? 3 : 1) : 0.0;
            intra_lat = std::max(intra_lat, net_overhead);
            int inter_steps = nnodes == 1 ? 0 : f == kAllReduce ? 2 * (nnodes - 1) : nnodes - 1;
            lat += (nsteps - inter_steps) * intra_lat + inter_steps * inter_lat;
          }
        } else if (a == kTree) {
          if (f == kAllReduce) lat += 2 * ((nranks / nnodes - 1) * intra_lat + log2i(nnodes) * inter_lat);
        } else if (a == kNvls) {
          lat = intra_lat + (nnodes > 1 ? inter_lat : 0);
        } else if (a == kNvlsTree) {
          lat += intra_lat + 2 * log2i(nnodes) * inter_lat;
        } else if (a == kPat) {
          if (f == kAllGather || f == kReduceScatter) lat += log2i(nnodes) * (inter_lat / 3.5) + nranks * 2.8;
        }
        latency_us_[f][a][p] = lat;
      }
    }
  }

  // Enabling: LL128 only where NCCL turns it on by itself (Hopper and later: paths up to PXN
  // between GPU and NIC and NVLink within the node; on older GPUs the same here), unless set.
  const bool ll128_auto = shape.sm >= 70 && (shape.intra_nvlink || shape.max_local_ranks <= 1);
  for (int f = 0; f < kFuncs; f++) {
    for (int a = 0; a < kAlgos; a++) {
      bool disable = !algo_enable[f * kAlgos + a];
      if (nnodes == 1 && a == kNvlsTree) disable = true;
      if (a == kCollNetDirect || a == kCollNetChain || (a == kNvls && nnodes > 1)) disable = true;
      // enqueue.cc updateCollCostTable: NVLS for other than AllReduce up to 32 GPUs of a node.
      if ((a == kNvls || a == kNvlsTree) && f != kAllReduce && shape.max_local_ranks > kMaxNvlsArity) disable = true;
      for (int p = 0; p < kProtos; p++) {
        int enable = proto_enable[f * kProtos + p];
        if (enable == 2) enable = ll128_auto;
        if (!enable || disable) bandwidth_[f][a][p] = 0;
      }
    }
  }
}

Choice Tuner::choose(int func, size_t bytes) const {
  if (func < 0 || func >= kFuncs) orrery_private_fatal("orrery::nccl::Tuner::choose", "not a tuned NCCL function");
  if (shape_.nranks <= 1) return {kRing, kSimple, 1, 0.0};  // enqueue.cc: one rank, Ring/Simple, no time
  const double inf = std::numeric_limits<double>::infinity();
  double best = inf;
  int algo = -1, proto = -1;
  const int log_size = log2i(bytes >> 6);
  for (int a = 0; a < kAlgos; a++) {
    for (int p = 0; p < kProtos; p++) {
      double bw = bandwidth_[func][a][p];
      if (bw == 0) continue;
      double lat = latency_us_[func][a][p];
      if (a == kTree && func == kAllReduce && log_size >= 0 && log_size < 23) bw *= kTreeCorrection[p][log_size];
      if (a == kNvlsTree && func == kAllReduce && log_size >= 0 && log_size < 24 && shape_.sm >= 100)
        bw *= kTreeCorrection[p][log_size];
      if (a == kRing && p == kSimple && shape_.nnodes > 1 && func == kAllReduce &&
          bytes / ((size_t)comm_channels_ * shape_.nranks) >= 64)
        lat *= shape_.sm < 80 ? 1.9 : 1.4;  // the ring's plateau
      double t = lat + bytes / (1000 * bw);  // us
      if (t < best) {
        best = t;
        algo = a;
        proto = p;
      }
    }
  }
  if (algo < 0) {
    const char* a = getenv("NCCL_ALGO");
    const char* p = getenv("NCCL_PROTO");
    std::string what = std::string("no algorithm/protocol is left for ") + kFuncNames[func] +
                       (a ? std::string(" (NCCL_ALGO=\"") + a + "\")" : std::string()) +
                       (p ? std::string(" (NCCL_PROTO=\"") + p + "\")" : std::string()) +
                       "; expected the variables to leave one that NCCL runs here";
    orrery_private_fatal("NCCL", what.c_str());
  }

  // topoGetAlgoInfo: fewer channels while the call is small for their threads.
  int nc;
  if (algo == kNvls || algo == kNvlsTree) {
    nc = nvls_channels_;
  } else {
    nc = comm_channels_;
    int threads = proto == kLL ? kLlMaxThreads : proto == kLL128 ? kLl128MaxThreads
                  : algo == kRing ? ring_simple_threads_ : algo == kTree ? kSimpleMaxThreads : 0;  // PAT: unset
    long threshold = proto == kLL ? kLlThreshold * (algo == kRing ? shape_.nranks : 1)
                     : proto == kLL128 ? kLl128Threshold : kSimpleThreshold;
    while (bytes < (size_t)nc * threads * threshold && nc >= 2) nc--;
  }
  return {algo, proto, nc, best * 1e-6};
}

double Tuner::step_latency_s(int algo, int proto, int hw) const {
  if (algo < 0 || algo >= kAlgos || proto < 0 || proto >= kProtos || hw < kHwNvlink || hw > kHwNet) return 0;
  return kHwLatency[hw][algo][proto] * 1e-6;
}

int Tuner::max_channels(int algo) const {
  if (shape_.nranks <= 1) return 1;
  if (algo == kNvls || algo == kNvlsTree) return nvls_channels_;
  if (algo == kRing || algo == kTree || algo == kPat) return comm_channels_;
  return 0;  // CollNet
}

}  // namespace orrery::nccl
