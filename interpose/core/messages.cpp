/* What the platform's routes alone do not carry of an MPI message: per-message latency factors
 * (measured message models, rendezvous handshakes, staging fill) and the collectives' measured
 * corrections. */
#include "core/gpus.hpp"
#include "core/links.hpp"

#include <simgrid/kernel/resource/NetworkModelIntf.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>

namespace orrery {

/* ---------------- per-message network factors ----------------
 * What a route alone does not carry, added to each MPI message's latency through
 * SimGrid's latency-factor callback: a measured model of its path (machine key
 * messages.*), else the rendezvous handshake at or above its path's eager
 * threshold and, without GPUDirect RDMA (or above gpudirect.rdma_limit, where the
 * message's ends are its GPUs' staged endpoints), the staging pipeline's fill for a
 * message smaller than a chunk.
 * A message's path follows from where its two ranks stand, each end with its node
 * as the run description lists it: GPU hosts (or their message endpoints, gpus[].
 * message_end) for device buffers, process endpoints (ranks[].cpu) for host buffers.
 * Copies never use those pairs of hosts (H2D/D2H go between a GPU and its socket's
 * memory host, peer copies between copy-engine hosts), so the factors below only
 * ever touch MPI messages. */

namespace {
enum MessagePath { DEVICE_INTRA, DEVICE_INTER, HOST_INTRA, HOST_INTER, MESSAGE_PATHS };

struct MessageEnd {
  int node;
  bool gpu;  // a GPU host (device buffers); else a process endpoint (host buffers)
};

struct MessageModels {
  Piecewise path[MESSAGE_PATHS];
  double overheads[MESSAGE_PATHS] = {};  // send + receive overhead per message, by path
  double eager[2] = {0, 0};      // eager thresholds (bytes): host, device
  std::unordered_map<const sg4::Host*, MessageEnd> ends;
};
MessageModels g_messages;

struct StagingLinks {  // device-buffer messages staged through host memory (gpudirect.rdma = false)
  double chunk = 0, bandwidth = 0, overhead_s = 0;
  std::unordered_set<const sg4::Link*> links;
};
StagingLinks g_staging;

constexpr double kSmpiEnvelope = 16;  // bytes SMPI adds to each message (tests/native/derivations.py)

/* The path of a message between src and dst, or -1 where src and dst are not two
 * message ends (a copy; ranks sharing a GPU, whose messages are loopback copies). */
int message_path(const sg4::Host* src, const sg4::Host* dst) {
  if (src == dst)
    return -1;
  auto a = g_messages.ends.find(src), b = g_messages.ends.find(dst);
  if (a == g_messages.ends.end() || b == g_messages.ends.end())
    return -1;
  bool device = a->second.gpu || b->second.gpu;
  bool intra = a->second.node == b->second.node;
  return device ? (intra ? DEVICE_INTRA : DEVICE_INTER) : (intra ? HOST_INTRA : HOST_INTER);
}
bool is_device_path(int path) { return path == DEVICE_INTRA || path == DEVICE_INTER; }
}  // namespace

void install_message_factors() {
  const sg4::Engine* e = sg4::Engine::get_instance();
  const RunDescription& d = run_description();
  for (const GpuHost& g : d.gpus) {
    g_messages.ends[host_by_name(g.host)] = {(int)g.node, true};
    if (g.message_end)  // a GPU's message endpoint (mpi.intra_node = "nic")
      g_messages.ends[host_by_name(*g.message_end)] = {(int)g.node, true};
    if (g.staged_end)  // its staged endpoint (gpudirect.rdma_limit)
      g_messages.ends[host_by_name(*g.staged_end)] = {(int)g.node, true};
  }
  for (const RankPlace& r : d.ranks)
    g_messages.ends[host_by_name(r.cpu)] = {(int)r.node, false};
  const MessagePaths& m = d.mpi.messages;
  const Piecewise* models[MESSAGE_PATHS] = {&m.device_intra, &m.device_inter, &m.host_intra, &m.host_inter};
  for (int p = 0; p < MESSAGE_PATHS; p++)
    g_messages.path[p] = *models[p];
  // Without GPUDirect RDMA: the staging links between a root complex and its NICs.
  if (d.staging) {
    g_staging.chunk = d.staging->chunk;
    g_staging.bandwidth = d.staging->bandwidth;
    g_staging.overhead_s = d.staging->overhead_s;
    for (const std::string& name : d.staging->links) {
      // full-duplex links are two SimGrid links, NAME_UP and NAME_DOWN
      bool found = false;
      for (const std::string& one : {name, name + "_UP", name + "_DOWN"})
        if (const sg4::Link* l = sg4::Link::by_name_or_null(one)) {
          g_staging.links.insert(l);
          found = true;
        }
      if (!found)
        fatal("the platform has no link %s (run description key staging.links)", name.c_str());
    }
  }
  // send + receive overhead per message of each path, in MessagePath's order
  const MpiOverheads& dev = d.mpi.device;
  const MpiOverheads& host = d.mpi.host;
  g_messages.overheads[DEVICE_INTRA] = dev.send_intra_s + dev.recv_intra_s;
  g_messages.overheads[DEVICE_INTER] = dev.send_s + dev.recv_s;
  g_messages.overheads[HOST_INTRA] = host.send_intra_s + host.recv_intra_s;
  g_messages.overheads[HOST_INTER] = host.send_s + host.recv_s;
  g_messages.eager[0] = d.mpi.eager_host;
  g_messages.eager[1] = d.mpi.eager_device;
  e->get_netzone_root()->get_network_model()->set_lat_factor_cb(
      [](double size, const sg4::Host* src, const sg4::Host* dst, const std::vector<sg4::Link*>& links,
         const std::unordered_set<sg4::NetZone*>&) {
        note_transfer(size, links);  // SimGrid calls this for every transfer it creates, copies too
        int path = message_path(src, dst);
        if (path < 0)
          return 1.0;
        double route_latency = 0, route_bandwidth = INFINITY;
        int staged = 0;
        for (const sg4::Link* l : links) {
          route_latency += l->get_latency();
          route_bandwidth = std::min(route_bandwidth, l->get_bandwidth());
          staged += (int)g_staging.links.count(l);
        }
        if (route_latency <= 0)
          return 1.0;
        bool device = is_device_path(path);
        double payload = std::max(size - kSmpiEnvelope, 0.0);
        if (const Segment* seg = segment_for(g_messages.path[path], payload)) {
          // A lone message takes overheads + the route's latency + size / the route's
          // bandwidth. The measured time beyond the overheads and the route's bandwidth
          // term becomes the route's latency (a latency factor, per message size): the
          // MPI library's protocol time, which pipelines across concurrent messages
          // (osu_bw's window) instead of holding the links, as a bandwidth factor would.
          double wire = seg->latency_s + size / seg->bandwidth - g_messages.overheads[path] - size / route_bandwidth;
          return std::max(wire, 0.0) / route_latency;
        }
        double latency = route_latency, control = route_latency;
        if (staged) {
          // Staging (no GPUDirect RDMA): a staging link's latency is the pipeline's fill for
          // a whole chunk (one copy's overhead + the chunk over PCIe); a message smaller
          // than a chunk fills it with itself only. Control messages are not staged.
          double full = g_staging.overhead_s + g_staging.chunk / g_staging.bandwidth;
          double fill = g_staging.overhead_s + std::min(size, g_staging.chunk) / g_staging.bandwidth;
          latency -= staged * (full - fill);
          control -= staged * full;
        }
        // Rendezvous (at or above the path's eager threshold): the sender's request to
        // send and the receiver's clear to send cross the route before the data.
        if (payload >= g_messages.eager[device])
          latency += 2 * control;
        return latency / route_latency;
      });
}

/* ---------------- collective corrections (machine key collectives.*) ----------------
 * Piecewise like the copy and message models: a segment's latency is the extra time of
 * one step of the collective's algorithm in its size range, times its steps on the
 * communicator (CorrectionSegment.steps, orrery/machines/description.py: step_count). */

static double step_count(const std::string& steps, int ranks) {
  if (steps == "log2")
    return std::max(std::ceil(std::log2((double)ranks)), 1.0);
  if (steps == "linear")
    return std::max(ranks - 1, 1);  // one step per peer
  if (steps == "constant")
    return 1;
  fatal("run description key mpi.collectives: steps \"%s\" is none of constant, log2, linear", steps.c_str());
}

double collective_correction(const char* name, double bytes, bool device, int ranks) {
  struct Correction {
    Piecewise segments;  // a segment's latency is the extra time of one step, with no size term
    std::vector<std::string> steps;  // each segment's step law
  };
  static std::map<std::string, Correction> models;  // by key (lower-case collective name), each made once
  auto model = [&](const std::string& key) -> const Correction& {
    auto it = models.find(key);
    if (it == models.end()) {
      Correction c;
      const auto& all = run_description().mpi.collectives;
      if (auto found = all.find(key); found != all.end())
        for (const CollectiveCorrection& seg : found->second) {
          c.segments.push_back(Segment{seg.up_to, seg.per_step_s, INFINITY});
          c.steps.push_back(seg.steps);
        }
      it = models.emplace(key, c).first;
    }
    return it->second;
  };
  std::string key = name;
  for (char& c : key)
    c = (char)tolower((unsigned char)c);
  const Correction* own = &model(key + (device ? "_device" : "_host"));  // the buffers' kind first
  if (own->segments.empty())
    own = &model(key);
  const Segment* seg = segment_for(own->segments, bytes);
  return seg ? seg->latency_s * step_count(own->steps[seg - own->segments.data()], ranks) : 0.0;
}

}  // namespace orrery
