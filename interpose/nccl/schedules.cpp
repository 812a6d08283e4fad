/* Each NCCL algorithm as transfers on the platform. A schedule is a list of transfers between the
 * members' GPUs, each with the transfers it waits for (the data it forwards or reduces) and a
 * lane: the transfers of one lane run one after another, like the steps of one NCCL channel
 * worker, and lanes run at once. A transfer first waits for its dependencies, then for the
 * step's latency beyond its route's own (NCCL's per-step hardware latency of the algorithm and
 * protocol on its link class, tuning.cpp; NVLS's on NVLink is nccl.step_latency_nvls), then moves
 * its bytes as the protocol puts them on the wire (LL: 8 bytes of flags per 8 of data; LL128: 8
 * per 120; Simple: none), divided by the link class's efficiency (machine keys nccl.efficiency.*,
 * nvls_efficiency), between the GPUs' copy-engine hosts (the GPU's side of its links; no MPI
 * message factors apply there), so that they contend with every other transfer on those links.
 * A collective starts with its base latency (nccl.base_latency.*, once) and ends when its last
 * transfer arrived.
 *
 * What is approximated (docs/nccl.md says more): channels are not simulated one by one (the
 * platform's link between a GPU and its NVSwitch, or its NIC, is the sum of NCCL's channels on
 * it), a pipeline streams each hop's data on as its first chunk lands, Tree is NCCL's chain within a node
 * under its double binary tree between nodes (NVLSTree's rails run the same trees), NVLS is the
 * load it puts on each GPU's NVLink (its reduction and multicast in the switch are not hosts of
 * the platform), and reductions cost no time of their own. */
#include "nccl/engine.hpp"

#include "core/comm_then.hpp"

#include <simgrid/kernel/Timer.hpp>
#include <simgrid/simix.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>

namespace orrery::nccl {

namespace {

struct Transfer {
  int from = 0, to = 0;    // clique ranks
  double bytes = 0;        // data bytes
  int lane = 0;
  std::vector<int> deps;   // transfers it waits for
  double efficiency = -1;  // -1: the link class's
  // A pipelined transfer streams what it forwards: it starts `fill` seconds after its upstream
  // started (the first chunk's arrival), and ends no earlier than the transfers of `after`.
  int follows = -1;
  double fill = 0;
  std::vector<int> after;
};

struct Schedule {
  std::vector<Transfer> transfers;
  int lanes = 0;
  int add(int from, int to, double bytes, int lane, std::vector<int> deps = {}) {
    transfers.push_back({from, to, bytes, lane, std::move(deps), -1});
    lanes = std::max(lanes, lane + 1);
    return (int)transfers.size() - 1;
  }
};

double wire_factor(int proto) {
  switch (proto) {
    case kLL: return 2.0;            // 8-byte flag per 8-byte datum
    case kLL128: return 128.0 / 120.0;  // 8-byte flag per 120 bytes
    default: return 1.0;
  }
}

// The data one pipeline step of a channel carries, by protocol (NCCL's default buffer of the
// protocol over its NCCL_STEPS = 8 slots: Simple 4 MiB, LL 512 KiB of 16-byte lines holding 8
// data bytes, LL128 640 threads x 120 x 8 bytes; src/include/device.h, commit 5067397c).
double step_data(int proto) {
  switch (proto) {
    case kLL: return 524288.0 / 8 / 2;
    case kLL128: return 120.0 * 640 * 8 * 8 / 8 * 120 / 128;
    default: return 4194304.0 / 8;
  }
}

/* A route between two hosts, looked up once: its latency and its bottleneck bandwidth. */
struct Route {
  double latency = 0, bandwidth = INFINITY;
};
const Route& route(sg4::Host* a, sg4::Host* b) {
  static std::map<std::pair<sg4::Host*, sg4::Host*>, Route> cache;
  auto [it, fresh] = cache.try_emplace({a, b});
  if (fresh) {
    std::vector<sg4::Link*> links;
    a->route_to(b, links, &it->second.latency);
    for (const sg4::Link* l : links)
      it->second.bandwidth = std::min(it->second.bandwidth, l->get_bandwidth());
  }
  return it->second;
}
double route_latency(sg4::Host* a, sg4::Host* b) { return route(a, b).latency; }

/* How long after a pipelined transfer starts its first chunk has arrived downstream: the route's
 * latency and one chunk at the route's bandwidth. LL and LL128 forward each line as it lands
 * (their flags say it is there): their chunk is one line's data, 8 bytes (LL) or 120 (LL128);
 * Simple forwards a channel's step. */
double first_chunk(const Gpu& a, const Gpu& b, double bytes, const Choice& ch) {
  const Route& r = route(a.copy_engine, b.copy_engine);
  double chunk = ch.proto == kLL ? 8.0 : ch.proto == kLL128 ? 120.0 : step_data(ch.proto);
  return r.latency + std::min(chunk, bytes) * wire_factor(ch.proto) / r.bandwidth;
}

std::string key(int algo, int proto) {
  std::string a = algo == kNvlsTree ? "nvls_tree" : algo_name(algo);
  std::string k = a + "_" + proto_name(proto);
  std::transform(k.begin(), k.end(), k.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return k;
}

double base_latency(int algo, int proto) {
  const NcclModel& m = run_description().nccl;
  auto it = m.base_latency_s.find(key(algo, proto));
  if (it == m.base_latency_s.end())
    fatal("NCCL: the machine has no nccl.base_latency for %s/%s (key %s)", algo_name(algo), proto_name(proto),
          key(algo, proto).c_str());
  return it->second;
}


/* The step latency a transfer waits: NCCL's hwLatencies of the algorithm and protocol on the link
 * class (the tuner's), but NVLS's on NVLink (NVLS and NVLSTree within a node), which is the
 * machine's nccl.step_latency_nvls (by default NCCL's 25 us). */
double step_latency(const Clique& c, int algo, int proto, int hw) {
  if ((algo == kNvls || algo == kNvlsTree) && hw == kHwNvlink)
    return run_description().nccl.nvls_step_latency_s;
  return c.tuner->step_latency_s(algo, proto, hw);
}

int hw_between(const Gpu& a, const Gpu& b) {
  if (a.node != b.node)
    return kHwNet;
  return run_description().nccl.intra_nvlink ? kHwNvlink : kHwPci;
}

double efficiency_of(int hw) {
  const NcclModel& m = run_description().nccl;
  const char* name = hw == kHwNet ? "net" : hw == kHwPci ? "pcie" : "nvlink";
  auto it = m.efficiency.find(name);
  return it == m.efficiency.end() ? 1.0 : it->second;
}

/* `then` after `delay` (none within the clock's precision), in the simulation's kernel. */
void after(double delay, std::function<void()> then) {
  if (delay > kClockPrecision)
    simgrid::kernel::timer::Timer::set(now() + delay, std::move(then));
  else
    then();
}

using kernel_comms::comm_then;  // core/comm_then.hpp

/* Runs a schedule in the simulation's kernel, without an actor per lane (a collective of n GPUs
 * has up to 2n lanes per tree or ring, and an actor's stack takes two memory maps): each lane
 * takes its transfers in order, a transfer once the transfers it depends on are done (and, where
 * it streams, once its upstream started and its first chunk landed, `fill` after), then NCCL's
 * step latency beyond its route's (a timer), then its bytes (a comm), then, where it streams, the
 * end of its upstream. Returns, in the calling actor, once every lane is done. */
class Runner {
 public:
  Runner(const Clique& c, const Schedule& sched, int algo, int proto)
      : c_(c), sched_(sched), algo_(algo), proto_(proto), state_(sched.transfers.size()), lanes_(sched.lanes) {
    for (int i = 0; i < (int)sched.transfers.size(); i++)
      lanes_[sched.transfers[i].lane].transfers.push_back(i);
  }

  void run() {
    sg4::ConditionVariablePtr finished = sg4::ConditionVariable::create();
    finished_ = finished;
    simgrid::kernel::actor::simcall_answered([this] {
      for (int l = 0; l < (int)lanes_.size(); l++)
        if (!lanes_[l].transfers.empty()) {
          left_++;
          advance(l);
        }
    });
    wait_until(finished, [this] { return left_ == 0; });
  }

 private:
  struct State {
    bool started = false, done = false;
    double start_s = 0;
    std::vector<int> waiting;  // lanes to take up again when this transfer starts or is done
  };
  struct Lane {
    std::vector<int> transfers;
    size_t next = 0;
    int phase = 0;  // of its current transfer: 0 its dependencies, 1 its upstream's start, 2 in flight, 3 its after
  };

  void wait_for(int transfer, int lane) { state_[transfer].waiting.push_back(lane); }

  void wake(int transfer) {
    std::vector<int> lanes = std::move(state_[transfer].waiting);
    state_[transfer].waiting.clear();
    for (int l : lanes)
      advance(l);
  }

  // Takes lane l's current transfer as far as it can go now.
  void advance(int l) {
    Lane& lane = lanes_[l];
    if (lane.next == lane.transfers.size())
      return;
    int i = lane.transfers[lane.next];
    const Transfer& t = sched_.transfers[i];
    if (lane.phase == 0) {
      for (int d : t.deps)
        if (!state_[d].done)
          return wait_for(d, l);
      lane.phase = 1;
    }
    if (lane.phase == 1) {
      if (int up = t.follows; up >= 0 && !state_[up].started)
        return wait_for(up, l);
      lane.phase = 2;
      double at = t.follows >= 0 ? state_[t.follows].start_s + t.fill : now();
      after(ahead_of_clock(at) ? at - now() : 0, [this, l, i] { send(l, i); });
      return;
    }
    if (lane.phase == 3) {
      for (int d : t.after)
        if (!state_[d].done)
          return wait_for(d, l);
      state_[i].started = state_[i].done = true;
      lane.next++;
      lane.phase = 0;
      wake(i);
      if (lane.next == lane.transfers.size()) {
        if (--left_ == 0)
          finished_->notify_all();
        return;
      }
      advance(l);
    }
  }

  // Transfer i of lane l, its upstream's first chunk landed: its step latency, then its bytes.
  void send(int l, int i) {
    const Transfer& t = sched_.transfers[i];
    const Gpu& a = *c_.members[t.from]->gpu;
    const Gpu& b = *c_.members[t.to]->gpu;
    int hw = hw_between(a, b);
    double lat = step_latency(c_, algo_, proto_, hw);
    auto arrived = [this, l] {
      lanes_[l].phase = 3;
      advance(l);
    };
    if (&a == &b) {  // to itself: a copy in the GPU's memory
      after(lat + t.bytes / a.d2d_bandwidth, arrived);
      return;
    }
    after(lat - route_latency(a.copy_engine, b.copy_engine), [this, i, &t, &a, &b, hw, arrived] {
      state_[i].started = true;
      state_[i].start_s = now();
      wake(i);
      double eff = t.efficiency > 0 ? t.efficiency : efficiency_of(hw);
      double moved = std::ceil(t.bytes * wire_factor(proto_) / eff);
      if (moved > 0)
        comm_then(sg4::Comm::sendto_async(a.copy_engine, b.copy_engine, (uint64_t)moved), arrived);
      else
        arrived();
    });
  }

  const Clique& c_;
  const Schedule& sched_;
  int algo_, proto_;
  std::vector<State> state_;
  std::vector<Lane> lanes_;
  int left_ = 0;
  sg4::ConditionVariablePtr finished_;
};

void run(const Clique& c, const Schedule& sched, int algo, int proto) {
  Runner(c, sched, algo, proto).run();
}

/* The rings NCCL's channels form: within one node a single ring in clique order is enough (the
 * platform's link between a GPU and its NVSwitch carries every channel); between nodes each
 * channel's ring leaves a node through another GPU, and so another rail's NIC, as NCCL's rings
 * do: ring r enters node k at its local GPU (r - k) mod local GPUs and leaves it from the GPU
 * before that one, which the next node's ring enters through, on the same rail. */
std::vector<std::vector<int>> ring_orders(const Clique& c, int nchannels) {
  std::vector<int> all(c.nranks);
  for (int i = 0; i < c.nranks; i++)
    all[i] = i;
  if (c.nnodes == 1)
    return {all};
  std::map<int, std::vector<int>> by_node;
  for (int i = 0; i < c.nranks; i++)
    by_node[c.members[i]->gpu->node].push_back(i);
  size_t local = 0;
  for (auto& [node, ms] : by_node)
    local = std::max(local, ms.size());
  int rings = std::max(1, std::min(nchannels, (int)local));
  std::vector<std::vector<int>> orders(rings);
  for (int r = 0; r < rings; r++) {
    int k = 0;
    for (auto& [node, ms] : by_node) {
      int m = (int)ms.size();
      int first = ((r - k) % m + m) % m;
      for (int j = 0; j < m; j++)
        orders[r].push_back(ms[(first + j) % m]);
      k++;
    }
  }
  return orders;
}

/* Rings: `steps` steps, each member sending `chunk` bytes (shared by the rings) to the next of
 * each ring, each step after the data it forwards arrived. */
void ring(Schedule& s, const Clique& c, int nchannels, int steps, double chunk) {
  auto orders = ring_orders(c, nchannels);
  int n = c.nranks;
  for (size_t r = 0; r < orders.size(); r++) {
    const std::vector<int>& o = orders[r];
    std::vector<int> prev(n, -1);
    for (int step = 0; step < steps; step++) {
      std::vector<int> now(n);
      for (int p = 0; p < n; p++) {
        std::vector<int> deps;
        if (prev[(p + n - 1) % n] >= 0)
          deps.push_back(prev[(p + n - 1) % n]);
        now[p] = s.add(o[p], o[(p + 1) % n], chunk / orders.size(), (int)r * n + p, deps);
      }
      prev = now;
    }
  }
}

/* A pipeline along a chain (positions 0..n-1 of `order`): each hop streams the whole share on to
 * the next as it arrives, its lanes from `lane0` on. */
void chain(Schedule& s, const Clique& c, const std::vector<int>& order, double bytes, const Choice& ch, int lane0) {
  int prev = -1;
  for (size_t p = 0; p + 1 < order.size(); p++) {
    int t = s.add(order[p], order[p + 1], bytes, lane0 + (int)p);
    if (prev >= 0) {
      Transfer& tr = s.transfers[t];
      const Transfer& up = s.transfers[prev];
      tr.follows = prev;
      tr.fill = first_chunk(*c.members[up.from]->gpu, *c.members[up.to]->gpu, bytes, ch);
      tr.after = {prev};
    }
    prev = t;
  }
}

/* An allreduce up and down a tree: the data streamed up to the root, reduced on the way, and
 * streamed back down from it. Each edge is a pipeline: it starts once the first chunk of what it
 * forwards has landed, and ends no earlier than that. `members` are clique ranks and `parent` is
 * indexed by position in it (-1 at the root). The member at position i has its up edge on lane
 * lane0 + i and its down edge on lane lane0 + m + i. */
void stream_tree(Schedule& s, const Clique& c, const std::vector<int>& members, const std::vector<int>& parent,
                 double bytes, const Choice& ch, int lane0) {
  int m = (int)members.size();
  std::vector<std::vector<int>> children(m);
  int root = -1;
  for (int i = 0; i < m; i++)
    parent[i] < 0 ? (void)(root = i) : children[parent[i]].push_back(i);
  std::vector<int> order;  // positions, children before parents
  std::function<void(int)> post = [&](int v) {
    for (int k : children[v])
      post(k);
    order.push_back(v);
  };
  post(root);
  auto streams = [&](int t, const std::vector<int>& upstream) {
    if (upstream.empty())
      return;
    Transfer& tr = s.transfers[t];
    const Transfer& up = s.transfers[upstream[0]];
    tr.follows = upstream[0];
    tr.fill = first_chunk(*c.members[up.from]->gpu, *c.members[up.to]->gpu, bytes, ch);
    tr.after = upstream;
  };
  std::vector<int> up(m, -1), down(m, -1);
  for (int v : order) {
    if (v == root)
      continue;
    up[v] = s.add(members[v], members[parent[v]], bytes, lane0 + v);
    std::vector<int> from_children;
    for (int k : children[v])
      from_children.push_back(up[k]);
    streams(up[v], from_children);
  }
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    int v = *it;
    for (int k : children[v]) {
      down[k] = s.add(members[v], members[k], bytes, lane0 + m + k);
      std::vector<int> upstream;
      if (v == root)
        for (int r : children[root])
          upstream.push_back(up[r]);
      else
        upstream.push_back(down[v]);
      streams(down[k], upstream);
    }
  }
}

/* NCCL's double binary tree over m positions (its trees between nodes), as parents by position
 * (-1 at the root). The first is an in-order binary tree rooted at position 0, whose leaves are
 * the odd positions: 0 has one child, the largest power of two below m; a position p whose lowest
 * set bit is h (h > 1) has children p - h/2 and p + h/2, the latter, where it is m or more,
 * replaced by the first of p + h/4, p + h/8, ... below m. The second is the first mirrored (p to
 * m - 1 - p) where m is even, shifted by one (p to p + 1 mod m) where it is odd: a position is
 * inside one of the trees and a leaf of the other (but position 0, for an odd m), so that, each
 * tree carrying half the data, every member's links carry about as much. */
std::array<std::vector<int>, 2> double_binary_tree(int m) {
  std::vector<int> first(m, -1);
  if (m > 1) {
    int top = 1;
    while (top * 2 < m)
      top *= 2;
    first[top] = 0;
    std::vector<int> todo = {top};
    while (!todo.empty()) {
      int p = todo.back();
      todo.pop_back();
      int h = (p & -p) / 2;
      if (h == 0)
        continue;  // odd: a leaf
      first[p - h] = p;
      todo.push_back(p - h);
      while (p + h >= m && h > 1)
        h /= 2;
      if (p + h < m) {
        first[p + h] = p;
        todo.push_back(p + h);
      }
    }
  }
  std::vector<int> second(m, -1);
  auto image = [m](int p) { return m % 2 == 0 ? m - 1 - p : (p + 1) % m; };
  for (int p = 0; p < m; p++)
    if (first[p] >= 0)
      second[image(p)] = image(first[p]);
  return {first, second};
}

/* NCCL's tree for an allreduce: within each node a chain of its members (the first is the
 * node's head), the heads under NCCL's double binary tree of the nodes, half the data on each
 * tree (the chains carry both halves); within one node, one chain. */
void tree_allreduce(Schedule& s, const Clique& c, double bytes, const Choice& ch) {
  int n = c.nranks;
  std::vector<int> chains(n, -1);
  std::map<int, std::vector<int>> by_node;
  for (int i = 0; i < n; i++)
    by_node[c.members[i]->gpu->node].push_back(i);
  std::vector<int> heads;
  for (auto& [node, ms] : by_node) {
    heads.push_back(ms[0]);
    for (size_t l = 1; l < ms.size(); l++)
      chains[ms[l]] = ms[l - 1];
  }
  std::vector<int> all(n);
  for (int i = 0; i < n; i++)
    all[i] = i;
  if (heads.size() == 1) {
    stream_tree(s, c, all, chains, bytes, ch, 0);
    return;
  }
  int lane = 0;
  for (const std::vector<int>& between : double_binary_tree((int)heads.size())) {
    std::vector<int> parent = chains;
    for (size_t q = 0; q < heads.size(); q++)
      if (between[q] >= 0)
        parent[heads[q]] = heads[between[q]];
    stream_tree(s, c, all, parent, bytes / 2, ch, lane);
    lane += 2 * n;
  }
}

/* NVLS within a node: each GPU's NVLink carries, in each direction, what the switch's reduction
 * and multicast need of it (an allreduce: the buffer in, its reduced share out, then its share in
 * and the buffer out, pipelined: S (1 + 1/n) each way); as one transfer per GPU to the next,
 * which loads every link as much. */
void nvls_allreduce(Schedule& s, const std::vector<int>& members, double bytes, double efficiency, int lane0) {
  int n = (int)members.size();
  for (int i = 0; i < n; i++) {
    int t = s.add(members[i], members[(i + 1) % n], bytes * (1.0 + 1.0 / n), lane0 + i);
    s.transfers[t].efficiency = efficiency;
  }
}
}  // namespace

void execute_collective(const Clique& c, const Work& w, const Choice& ch) {
  int n = c.nranks;
  double wait = base_latency(ch.algo, ch.proto);
  if (wait > 0)
    sg4::this_actor::sleep_for(wait);
  if (n == 1)
    return;  // a communicator of one: NCCL copies the buffer locally at most
  double S = (double)w.bytes;
  double nvls_eff = run_description().nccl.nvls_efficiency;
  Schedule s;
  switch (ch.algo) {
    case kRing:
      if (w.func == kAllReduce)
        ring(s, c, ch.nchannels, 2 * (n - 1), S / n);
      else if (w.func == kAllGather || w.func == kReduceScatter)
        ring(s, c, ch.nchannels, n - 1, S);
      else {
        // a chain along each ring: a broadcast from the root, a reduce to it
        auto orders = ring_orders(c, ch.nchannels);
        for (size_t r = 0; r < orders.size(); r++) {
          const std::vector<int>& o = orders[r];
          int at = (int)(std::find(o.begin(), o.end(), w.root) - o.begin());
          std::vector<int> order;
          for (int p = 0; p < n; p++)
            order.push_back(o[(at + (w.func == kBroadcast ? p : p + 1)) % n]);
          double share = S / orders.size();
          chain(s, c, order, share, ch, (int)r * n);
        }
      }
      break;
    case kTree:
      tree_allreduce(s, c, S, ch);
      break;
    case kNvls:
    case kNvlsTree: {
      std::map<int, std::vector<int>> by_node;
      for (int i = 0; i < n; i++)
        by_node[c.members[i]->gpu->node].push_back(i);
      if (w.func == kAllReduce) {
        int lane = 0;
        for (auto& [node, ms] : by_node) {
          nvls_allreduce(s, ms, S, nvls_eff, lane);
          lane += (int)ms.size();
        }
        if (by_node.size() > 1) {
          // between nodes, each GPU's share (S / local GPUs) reduced with the same GPU of the
          // other nodes, on its rail: up and down NCCL's double binary tree over them, half the
          // share on each tree
          size_t local = by_node.begin()->second.size();
          for (size_t l = 0; l < local; l++) {
            std::vector<int> rail;
            for (auto& [node, ms] : by_node)
              if (l < ms.size())
                rail.push_back(ms[l]);
            int m = (int)rail.size();
            for (const std::vector<int>& parent : double_binary_tree(m)) {
              stream_tree(s, c, rail, parent, S / local / 2, ch, lane);
              lane += 2 * m;
            }
          }
        }
      } else {
        // allgather, reduce-scatter: every GPU's share to (or from) every other, through the switch
        int lane = 0;
        for (int i = 0; i < n; i++)
          for (int j = 0; j < n; j++)
            if (i != j) {
              int t = s.add(i, j, S, lane++);
              s.transfers[t].efficiency = nvls_eff;
            }
      }
      break;
    }
    case kPat: {
      bool power_of_two = (n & (n - 1)) == 0;
      if (!power_of_two) {
        ring(s, c, ch.nchannels, n - 1, S);
        break;
      }
      // recursive doubling (allgather) or halving (reduce-scatter): log2 n steps
      std::vector<int> prev(n, -1);
      int steps = 0;
      while ((1 << steps) < n)
        steps++;
      for (int k = 0; k < steps; k++) {
        std::vector<int> cur(n);
        double blocks = w.func == kAllGather ? (double)(1 << k) : (double)(n >> (k + 1));
        for (int i = 0; i < n; i++) {
          int peer = i ^ (1 << k);
          std::vector<int> deps;
          if (prev[peer] >= 0)
            deps.push_back(prev[peer]);
          cur[i] = s.add(i, peer, blocks * S, i, deps);
        }
        prev = cur;
      }
      break;
    }
    default:
      fatal("%s: NCCL's tuning chose %s, which needs network offload (SHARP) that the machine does not have",
            w.call, algo_name(ch.algo));
  }
  run(c, s, ch.algo, ch.proto);
}

void start_part(const Clique& c, std::shared_ptr<Part> part) {
  simgrid::kernel::actor::simcall_answered([&c, part] {
    auto done = [part] {
      part->done = true;
      part->end_s = now();
      part->finished();
    };
    const Gpu& a = *c.members[part->from]->gpu;
    const Gpu& b = *c.members[part->to]->gpu;
    if (&a == &b) {  // to itself: a copy in the GPU's memory
      after(a.d2d_latency_s + (double)part->bytes / a.d2d_bandwidth, done);
      return;
    }
    int hw = hw_between(a, b);
    double wait = c.tuner->step_latency_s(kRing, kSimple, hw) - route_latency(a.copy_engine, b.copy_engine);
    double moved = std::ceil((double)part->bytes / efficiency_of(hw));
    after(wait, [done, from = a.copy_engine, to = b.copy_engine, moved] {
      if (moved > 0)
        comm_then(sg4::Comm::sendto_async(from, to, (uint64_t)moved), done);
      else
        done();
    });
  });
}

}  // namespace orrery::nccl
