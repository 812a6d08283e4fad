/* NCCL's tuning model: which algorithm, protocol and number of channels NCCL picks for one
 * collective call, and the time its model predicts (tuning.cpp). This is how the real NCCL
 * chooses, with its default constants, whatever the calibrated machine says about the time the
 * choice then takes; the simulated execution of the choice is elsewhere (the other files of interpose/nccl).
 * Point-to-point calls (Send/Recv, AllToAll) are not tuned. */
#ifndef ORRERY_NCCL_TUNING_HPP
#define ORRERY_NCCL_TUNING_HPP

#include <cstddef>

namespace orrery::nccl {

enum Func { kBroadcast, kReduce, kAllGather, kReduceScatter, kAllReduce, kFuncs };  // NCCL's ncclFunc_t order
enum Algo { kTree, kRing, kCollNetDirect, kCollNetChain, kNvls, kNvlsTree, kPat, kAlgos };  // NCCL's order
enum Proto { kLL, kLL128, kSimple, kProtos };
enum Hw { kHwNvlink, kHwPci, kHwNet };

// As NCCL prints them: "Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT".
const char* algo_name(int algo);
const char* proto_name(int proto);  // "LL", "LL128", "Simple"
const char* func_name(int func);    // "Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce"

struct CommShape {          // what NCCL's topology search finds, from the platform
  int nranks = 1, nnodes = 1;
  int max_local_ranks = 1;  // most GPUs of the communicator on one node
  int sm = 90;              // compute capability x 10 of the GPUs
  bool intra_nvlink = true; // the GPUs of a node are joined by NVLink (else PCIe)
  bool nvswitch = false;    // through an NVSwitch (NVLS needs it, and sm >= 90)
  double intra_bw = 0;      // bytes/s: one GPU's NVLink (or PCIe) bandwidth, one direction
  double inter_bw = 0;      // bytes/s: one GPU's share of its node's NIC bandwidth, one direction
};

struct Choice { int algo, proto, nchannels; double model_time_s; };

class Tuner {
 public:
  // Reads NCCL_ALGO, NCCL_PROTO, NCCL_MIN_NCHANNELS, NCCL_MAX_NCHANNELS from the environment (NCCL's
  // syntax, e.g. NCCL_ALGO="allreduce:tree;ring" or "^NVLS"); a bad value is fatal(...) naming the
  // variable, its value and what is expected (core/fatal.hpp).
  explicit Tuner(const CommShape& shape);
  // bytes as NCCL's tuning counts them: count x type size, x nranks for AllGather and ReduceScatter.
  Choice choose(int func, size_t bytes) const;
  // NCCL's per-step (hw) latency of algo/proto on a link class, in seconds (tuning.cc hwLatencies)
  double step_latency_s(int algo, int proto, int hw) const;
  // channels NCCL would run algo with, before the per-call reduction for small sizes
  int max_channels(int algo) const;

 private:
  CommShape shape_;
  // NCCL's tables (comm->bandwidths in GB/s of algorithm bandwidth, comm->latencies in us); a
  // bandwidth of 0 marks a combination NCCL does not use or the user disabled.
  double bandwidth_[kFuncs][kAlgos][kProtos] = {};
  double latency_us_[kFuncs][kAlgos][kProtos] = {};
  int graph_channels_[kAlgos] = {};  // the search's channels per algorithm (what bandwidth_ counts)
  int comm_channels_ = 1;            // comm->nChannels: Ring/Tree/PAT channels at run time
  int nvls_channels_ = 0;            // comm->nvlsChannels
  int ring_simple_threads_ = 512;    // comm->maxThreads[Ring][Simple]
};

}  // namespace orrery::nccl

#endif
