/* The GPU engine: ranks, simulated GPUs, streams as SimGrid actors, host-side
 * waits, the run's configuration and the end-of-run report.
 *
 * A stream is a daemon actor on its GPU's host that takes operations from its
 * queue in order, waits for the operations they depend on (events, the legacy
 * default stream's implicit ordering), and executes each as a SimGrid activity:
 * kernels and memsets as executions on the GPU host (ranks and streams sharing
 * a GPU share its speed), copies as transfers between platform hosts (so they
 * cross the platform's PCIe, NVLink or device-memory links). */
#include "core/runtime.hpp"

#include <dlfcn.h>

#include <simgrid/kernel/resource/NetworkModelIntf.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <set>
#include <sstream>
#include <csignal>
#include <fcntl.h>
#include <unistd.h>

namespace orrery {

/* ---------------- the run's description ---------------- */

static bool g_config_loaded = false;  // a fatal error while reading it cannot end the run by the report

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
  g_config_loaded = true;
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

/* ---------------- fatal errors ---------------- */

static int current_rank_id();

void fatal(const char* fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fflush(nullptr);
  const char* err = getenv("ORRERY_ERROR_FILE");
  bool told = false;
  if (err && *err) {
    if (FILE* f = fopen(err, "w")) {
      fprintf(f, "%s\n", msg);
      told = fclose(f) == 0;
    }
  }
  if (told && g_config_loaded)  // orrery run prints it last, with the report's rank and time in results.json
    end_run("orrery_error", current_rank_id(), 0);
  if (told)
    _exit(0);
  fprintf(stderr, "orrery: error: %s\n", msg);
  _exit(70);
}

void unsupported(const char* function) {
  const sg4::Actor* self = sg4::Actor::is_maestro() ? nullptr : sg4::Actor::self();
  fatal("the program called %s, which Orrery does not simulate (actor %s); "
        "see 'Supported CUDA calls' in the README",
        function, self ? self->get_cname() : "?");
}

/* ---------------- GPUs, described by their platform host ---------------- */

static sg4::Host* host_by_name(const std::string& name) {
  sg4::Host* h = sg4::Host::by_name_or_null(name);
  if (!h)
    fatal("the platform has no host '%s'", name.c_str());
  return h;
}

static Gpu* gpu_of_host(sg4::Host* host) {
  static std::map<std::string, std::unique_ptr<Gpu>> gpus;
  auto it = gpus.find(host->get_name());
  if (it != gpus.end())
    return it->second.get();
  // Built completely before it is published: creating SimGrid objects may let
  // other ranks run, and they must not see a half-described GPU.
  auto built = std::make_unique<Gpu>();
  Gpu& g = *built;
  g.host = host;
  const RunDescription& d = run_description();
  const GpuHost& place = gpu_place(host);
  const GpuModel& model = d.gpu;
  g.cpu = host_by_name(place.cpu);
  g.node = (int)place.node;
  g.index = (int)place.index;
  g.speed = host->get_speed();
  g.launch_overhead_s = model.launch_overhead_s;
  g.copy_overhead_s = model.copy_overhead_s;
  g.sync_overhead_s = model.sync_overhead_s;
  g.memset_bandwidth = model.memset_bandwidth;
  g.d2d_bandwidth = model.d2d_bandwidth;
  g.d2d_latency_s = model.d2d_latency_s;
  g.host_memcpy_bandwidth = d.host_memcpy_bandwidth;

  g.copy_model[(int)CopyKind::H2D] = d.copies.H2D;
  g.copy_model[(int)CopyKind::D2H] = d.copies.D2H;
  g.copy_model[(int)CopyKind::D2D] = d.copies.D2D;
  g.copy_model[(int)CopyKind::Peer] = d.copies.peer;
  g.copy_engine = host_by_name(place.copy_engine);
  g.message_end = place.message_end ? host_by_name(*place.message_end) : host;

  int engines = (int)model.copy_engines;
  g.h2d_engine = sg4::Semaphore::create(engines >= 2 ? engines / 2 : 1);
  g.d2h_engine = engines >= 2 ? sg4::Semaphore::create(engines - engines / 2) : g.h2d_engine;

  cudaDeviceProp& p = g.prop;
  snprintf(p.name, sizeof p.name, "%s", model.name.c_str());
  p.totalGlobalMem = (size_t)model.memory_bytes;
  p.sharedMemPerBlock = (size_t)model.shared_per_block;
  p.sharedMemPerBlockOptin = (size_t)model.shared_per_block_optin;
  p.sharedMemPerMultiprocessor = (size_t)model.shared_per_sm;
  p.regsPerBlock = 65536;
  p.regsPerMultiprocessor = 65536;
  p.warpSize = 32;
  p.memPitch = 2147483647;
  p.maxThreadsPerBlock = 1024;
  p.maxThreadsDim[0] = 1024;
  p.maxThreadsDim[1] = 1024;
  p.maxThreadsDim[2] = 64;
  p.maxGridSize[0] = 2147483647;
  p.maxGridSize[1] = 65535;
  p.maxGridSize[2] = 65535;
  p.totalConstMem = 65536;
  p.major = (int)model.cc_major;
  p.minor = (int)model.cc_minor;
  p.textureAlignment = 512;
  p.texturePitchAlignment = 32;
  p.multiProcessorCount = (int)model.sm_count;
  p.canMapHostMemory = 1;
  p.concurrentKernels = 1;
  p.ECCEnabled = 1;
  p.pciBusID = (int)place.pci_bus_id;
  p.asyncEngineCount = engines;
  p.unifiedAddressing = 1;
  p.memoryBusWidth = (int)model.memory_bus_width;
  p.l2CacheSize = (int)model.l2_bytes;
  p.maxThreadsPerMultiProcessor = (int)model.max_threads_per_sm;
  p.maxBlocksPerMultiProcessor = (int)model.max_blocks_per_sm;
  p.streamPrioritiesSupported = 1;
  p.globalL1CacheSupported = 1;
  p.localL1CacheSupported = 1;
  p.managedMemory = 1;
  p.cooperativeLaunch = 1;
  p.memoryPoolsSupported = 1;
  p.gpuDirectRDMASupported = 1;
  p.clusterLaunch = p.major >= 9;
  auto& slot = gpus[host->get_name()];
  if (!slot)
    slot = std::move(built);
  return slot.get();
}

/* ---------------- ranks ---------------- */

static std::map<long, std::unique_ptr<Rank>>& ranks() {
  static std::map<long, std::unique_ptr<Rank>> r;
  return r;
}
static std::set<Stream*>& live_streams() {
  static std::set<Stream*> s;
  return s;
}

double now() { return sg4::Engine::get_clock(); }

/* The mutex condition variables need. Created with the first rank, not in a
 * function-local static: creating it may switch actors, which all run on one
 * OS thread, and a second actor would then re-enter the static's guard. */
static sg4::MutexPtr g_sim_mutex;
static sg4::MutexPtr& sim_mutex() { return g_sim_mutex; }

static void write_report();
static void on_deadlock();
static void install_failure_handlers();

Rank& rank_self(const char* function) {
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
    install_failure_handlers();
    install_message_copy();
    install_message_factors();
    g_sim_mutex = sg4::Mutex::create();
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
    std::map<int64_t, const GpuHost*> of_node;  // by device number
    for (const GpuHost& g : d.gpus)
      if (g.node == gpu_place(r->host).node)
        of_node[g.index] = &g;
    for (auto [index, g] : of_node)
      r->gpus.push_back(gpu_of_host(host_by_name(g->host)));
  }
  r->device = 0;
  r->legacy.assign(r->gpus.size(), nullptr);
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
      rp->stats.end_s = now();
    if (!killed)
      finish_rank(*rp);
  });
  table[self->get_pid()] = std::move(r);
  return *rp;
}

Gpu& current_gpu(Rank& r) { return *r.gpus.at(r.device); }

/* ---------------- streams ---------------- */



static void wait_seq(Stream* s, uint64_t seq) {
  std::unique_lock<sg4::Mutex> lock(*sim_mutex());
  while (s->completed < seq)
    s->done_cv->wait(lock);
}

/* ---------------- interval sets ---------------- */

void IntervalSet::add(double begin, double end) {
  if (end <= begin)
    return;
  if (!spans_.empty() && begin >= spans_.back().first) {
    if (begin <= spans_.back().second) {
      spans_.back().second = std::max(spans_.back().second, end);
      return;
    }
  } else if (!spans_.empty()) {
    sorted_ = false;
  }
  spans_.emplace_back(begin, end);
}

void IntervalSet::normalize() const {
  if (sorted_)
    return;
  std::sort(spans_.begin(), spans_.end());
  std::vector<std::pair<double, double>> merged;
  for (auto& sp : spans_) {
    if (!merged.empty() && sp.first <= merged.back().second)
      merged.back().second = std::max(merged.back().second, sp.second);
    else
      merged.push_back(sp);
  }
  spans_.swap(merged);
  sorted_ = true;
}

double IntervalSet::measure() const {
  normalize();
  double total = 0;
  for (auto& sp : spans_)
    total += sp.second - sp.first;
  return total;
}

double IntervalSet::overlap(const IntervalSet& other) const {
  normalize();
  other.normalize();
  double total = 0;
  size_t i = 0, j = 0;
  while (i < spans_.size() && j < other.spans_.size()) {
    double lo = std::max(spans_[i].first, other.spans_[j].first);
    double hi = std::min(spans_[i].second, other.spans_[j].second);
    if (hi > lo)
      total += hi - lo;
    (spans_[i].second < other.spans_[j].second) ? i++ : j++;
  }
  return total;
}

/* ---------------- executing stream operations ---------------- */

/* Kernels of a higher-priority stream take the GPU from lower ones: a
 * kernel's share of its GPU is proportional to 1000^-priority (CUDA: 0 is the
 * lowest priority, -5 the greatest), so equal priorities share equally. */
static double priority_weight(int priority) { return std::pow(1000.0, -priority); }

static void run_on_gpu(Stream* s, double seconds);

const Segment* segment_for(const Piecewise& model, double bytes) {
  for (const Segment& seg : model)
    if (bytes <= seg.up_to)
      return &seg;
  return model.empty() ? nullptr : &model.back();
}

static const Segment* measured_segment(const Gpu& g, CopyKind k, uint64_t bytes) {
  return segment_for(g.copy_model[(int)k], (double)bytes);
}

/* A copy with a measured model: alone, it takes exactly latency + bytes / bandwidth.
 * D2D copies are work of the GPU. The others cross their route, sharing its links
 * with other traffic: where the measured bandwidth is below the route's, the copy
 * moves proportionally more bytes (SimGrid 3.32 ignores Comm::set_rate on
 * host-to-host comms), so it holds its share of the links as long as it lasts. */
static void copy_as_measured(Stream* s, const Op& op, const Segment& seg) {
  if (op.copy == CopyKind::D2D) {
    run_on_gpu(s, seg.latency_s + (double)op.bytes / seg.bandwidth);
    return;
  }
  std::vector<sg4::Link*> links;
  double route_latency = 0;
  op.from->route_to(op.to, links, &route_latency);
  double route_bandwidth = INFINITY;
  for (const sg4::Link* l : links)
    route_bandwidth = std::min(route_bandwidth, l->get_bandwidth());
  // a negative latency (a segment whose time grows faster than the size) shortens the data term
  double bytes = (double)op.bytes + std::min(seg.latency_s, 0.0) * seg.bandwidth;
  double moved = seg.bandwidth < route_bandwidth ? bytes * route_bandwidth / seg.bandwidth : bytes;
  double whole = std::floor(moved);  // comms move whole bytes: the fraction's time joins the latency
  double wait = std::max(seg.latency_s - route_latency, 0.0) + (moved - whole) / route_bandwidth;
  if (wait >= 1e-12)  // below the simulation's precision (surf/precision), a wait is nothing
    sg4::this_actor::sleep_for(wait);
  sg4::Comm::sendto(op.from, op.to, (uint64_t)whole);
}

static void run_on_gpu(Stream* s, double seconds) {
  sg4::ExecPtr exec = sg4::this_actor::exec_init(seconds * s->gpu->speed);
  exec->set_priority(priority_weight(s->priority));
  exec->start();
  exec->wait();
}

static void execute(Stream* s, Op& op) {
  Stats& st = s->rank->stats;
  double t0 = now();
  switch (op.kind) {
    case Op::Kernel: {
      run_on_gpu(s, op.seconds);
      Tally& t = st.kernels[op.name];
      t.count++;
      t.time_s += now() - t0;
      st.compute.add(t0, now());
      break;
    }
    case Op::Memset: {
      run_on_gpu(s, op.seconds);
      Tally& t = st.copies["memset"];
      t.count++;
      t.bytes += op.bytes;
      t.time_s += now() - t0;
      st.compute.add(t0, now());
      break;
    }
    case Op::Copy: {
      sg4::SemaphorePtr engine = op.copy == CopyKind::H2D ? s->gpu->h2d_engine
                                 : op.copy == CopyKind::D2H || op.copy == CopyKind::Peer ? s->gpu->d2h_engine
                                                                                         : nullptr;
      if (engine) {
        engine->acquire();
        t0 = now();  // the copy's own time starts when its engine is free
      }
      if (op.copy == CopyKind::H2H) {
        sg4::this_actor::sleep_for((double)op.bytes / s->gpu->host_memcpy_bandwidth);
        if (op.fill_dst && op.h2h_src)
          for (uint64_t r = 0; r < op.fill_rows; r++)
            memmove((char*)op.fill_dst + r * op.fill_pitch, (const char*)op.h2h_src + r * op.fill_width,
                    op.fill_width);
      } else if (op.bytes == 0) {
        // nothing moves: the copy completes at once
      } else if (const Segment* seg = measured_segment(*s->gpu, op.copy, op.bytes)) {
        copy_as_measured(s, op, *seg);
        if (op.copy == CopyKind::D2D)
          st.compute.add(t0, now());
      } else if (op.copy == CopyKind::D2D) {
        // Device memory to device memory: work of the GPU, sharing it with kernels.
        run_on_gpu(s, s->gpu->d2d_latency_s + (double)op.bytes / s->gpu->d2d_bandwidth);
        st.compute.add(t0, now());
      } else {
        sg4::Comm::sendto(op.from, op.to, op.bytes);
      }
      if (engine)
        engine->release();
      if (op.copy == CopyKind::D2H && op.fill_dst)
        apply_d2h_fill(op.fill_dst, op.fill_width, op.fill_pitch, op.fill_rows);
      if (op.copy == CopyKind::H2D)
        st.h2d.add(t0, now());
      else if (op.copy == CopyKind::D2H || op.copy == CopyKind::Peer)
        st.d2h.add(t0, now());
      Tally& t = st.copies[copy_kind_name(op.copy)];
      t.count++;
      t.bytes += op.bytes;
      t.time_s += now() - t0;
      break;
    }
    case Op::Record:
      if (op.event->stream == s && op.event->seq == s->completed + 1)
        op.event->time = now();
      break;
    case Op::Wait:
      break;
    case Op::HostFn:
      op.fn(op.fn_data);
      break;
  }
}

static void stream_worker(Stream* s) {
  sg4::Actor::self()->daemonize();
  for (;;) {
    {
      std::unique_lock<sg4::Mutex> lock(*sim_mutex());
      while (s->queue.empty()) {
        if (s->destroyed)
          return;
        s->work_cv->wait(lock);
      }
    }
    Op& op = s->queue.front();  // deque: references survive push_back
    for (const Dependency& d : op.deps)
      wait_seq(d.stream, d.seq);
    execute(s, op);
    s->queue.pop_front();
    s->completed++;
    s->done_cv->notify_all();
  }
}

Stream* create_stream(Rank& r, unsigned flags, int priority) {
  auto* s = new Stream;  // never freed: events and dependencies may outlive the handle
  s->rank = &r;
  s->device = r.device;
  s->gpu = &current_gpu(r);
  s->flags = flags;
  s->priority = priority;
  s->work_cv = sg4::ConditionVariable::create();
  s->done_cv = sg4::ConditionVariable::create();
  std::string name = "stream-r" + std::to_string(r.id) + "-" + std::to_string(r.streams.size());
  s->worker = sg4::Actor::create(name, s->gpu->host, [s] { stream_worker(s); });
  r.streams.push_back(s);
  live_streams().insert(s);
  return s;
}

Stream* legacy_stream(Rank& r, int device) {
  Stream*& l = r.legacy.at(device);
  if (!l) {
    int current = r.device;
    r.device = device;  // a stream belongs to the device current at its creation
    l = create_stream(r, 0, 0);
    r.device = current;
    l->legacy = true;
  }
  return l;
}

Stream* resolve_stream(Rank& r, cudaStream_t handle, const char* function) {
  if (handle == nullptr || handle == cudaStreamLegacy)
    return legacy_stream(r, r.device);
  if (handle == cudaStreamPerThread)
    unsupported("cudaStreamPerThread (per-thread default stream)");
  auto* s = reinterpret_cast<Stream*>(handle);
  if (!live_streams().count(s) || s->destroyed || s->rank != &r)
    fatal("%s: invalid stream handle %p (rank %d)", function, (void*)handle, r.id);
  return s;
}

void wait_like_legacy(Op& op, Stream* legacy) {
  for (Stream* o : legacy->rank->streams)
    if (o != legacy && o->device == legacy->device && !(o->flags & cudaStreamNonBlocking) && o->completed < o->enqueued)
      op.deps.push_back({o, o->enqueued});
}

void enqueue(Stream* s, Op op) {
  Rank& r = *s->rank;
  if (s->legacy) {
    wait_like_legacy(op, s);
  } else if (!(s->flags & cudaStreamNonBlocking)) {
    Stream* l = r.legacy.at(s->device);
    if (l && l->completed < l->enqueued)
      op.deps.push_back({l, l->enqueued});
  }
  s->queue.push_back(std::move(op));
  s->enqueued++;
  s->work_cv->notify_all();
}

/* ---------------- host-side waits and overheads ---------------- */

void host_overhead(Rank& r, double seconds) {
  if (seconds <= 0)
    return;
  sg4::this_actor::sleep_for(seconds);
  r.stats.host_api_s += seconds;
}

void wait_for(Rank& r, Stream* s, uint64_t seq) {
  double t0 = now();
  wait_seq(s, seq);
  r.stats.gpu_wait_s += now() - t0;
  host_overhead(r, r.gpus.at(s->device)->sync_overhead_s);
}

void wait_stream(Rank& r, Stream* s) { wait_for(r, s, s->enqueued); }

void wait_device(Rank& r, int device) {
  double t0 = now();
  for (Stream* s : r.streams)
    if (s->device == device)
      wait_seq(s, s->enqueued);
  r.stats.gpu_wait_s += now() - t0;
  host_overhead(r, r.gpus.at(device)->sync_overhead_s);
}

/* ---------------- per-message network factors ----------------
 * What a route alone does not carry, added to each MPI message's latency through
 * SimGrid's latency-factor callback: a measured model of its path (machine key
 * messages.*), else the rendezvous handshake at or above its path's eager
 * threshold and, without GPUDirect RDMA, the staging pipeline's fill for a
 * message smaller than a chunk.
 * A message's path follows from where its two ranks stand (orrery/platform.py):
 * GPU hosts n{N}-gpu{G} (or their message endpoints n{N}-gpu{G}-mpi) for device
 * buffers, process endpoints n{N}-cpu{L} for host buffers. Copies never use those
 * pairs of hosts (H2D/D2H go between a GPU and its node's CPU host n{N}-cpu, peer
 * copies between copy-engine hosts), so the factors below only ever touch MPI
 * messages. */

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

struct Staging {  // device-buffer messages staged through host memory (gpudirect.rdma = false)
  double chunk = 0, bandwidth = 0, overhead_s = 0;
  std::unordered_set<const sg4::Link*> links;
};
Staging g_staging;

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
  if (g_messages.ends.empty())
    return;
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
 * Piecewise like the copy and message models: a segment's latency is the extra time
 * of a call in its size range. */

double collective_correction(const char* name, double bytes, bool device) {
  static std::map<std::string, Piecewise> models;  // by key (lower-case collective name), each made once
  auto model = [&](const std::string& key) -> const Piecewise& {
    auto it = models.find(key);
    if (it == models.end()) {
      Piecewise segments;  // a correction's segment: its latency is the extra time, with no size term
      const auto& all = run_description().mpi.collectives;
      if (auto found = all.find(key); found != all.end())
        for (const CollectiveCorrection& c : found->second)
          segments.push_back(Segment{c.up_to, c.extra_s, INFINITY});
      it = models.emplace(key, segments).first;
    }
    return it->second;
  };
  std::string key = name;
  for (char& c : key)
    c = (char)tolower((unsigned char)c);
  const Piecewise& own = model(key + (device ? "_device" : "_host"));  // the buffers' kind first
  const Segment* seg = segment_for(own.empty() ? model(key) : own, bytes);
  return seg ? seg->latency_s : 0.0;
}

const char* copy_kind_name(CopyKind k) {
  switch (k) {
    case CopyKind::H2H: return "H2H";
    case CopyKind::H2D: return "H2D";
    case CopyKind::D2H: return "D2H";
    case CopyKind::D2D: return "D2D";
    case CopyKind::Peer: return "peer";
  }
  return "?";
}

/* ---------------- how the run ended ----------------
 * A run completes, or ends on the first failure of the program the shim sees: MPI_Abort
 * (mpi.cpp), a rank's exit() while the simulation runs, a crash (a fatal signal), GPU work still
 * pending when a rank ends, a deadlock (SimGrid's on_deadlock), or one of Orrery's own errors
 * (fatal). The report says which, for which rank and when. */

namespace {
struct Outcome {
  std::string status = "completed";
  int rank = -1;  // the rank concerned; -1: none
  int code = 0;   // exit status, MPI_Abort's error code, or signal
  double time_s = -1;
};
Outcome g_outcome;
bool g_outcome_set = false;
bool g_simulation_over = false;  // the report is written: what exits after it is SimGrid's normal end
std::string g_crash_path;        // where a crash's status row goes before anything else is tried
}  // namespace

/* The rank whose code is running: the calling rank, or the rank whose stream runs (a host
 * function); -1 outside any (SimGrid itself). */
static int current_rank_id() {
  if (ranks().empty() || sg4::Actor::is_maestro())
    return -1;
  const sg4::Actor* self = sg4::Actor::self();
  auto it = ranks().find(self->get_pid());
  if (it != ranks().end())
    return it->second->id;
  int id = -1;
  return sscanf(self->get_cname(), "stream-r%d-", &id) == 1 ? id : -1;
}

static void record(const char* status, int rank, int code) {
  if (g_outcome_set)
    return;  // the first failure is the one that ended the run
  g_outcome_set = true;
  g_outcome = Outcome{status, rank, code, now()};
}

void end_run(const char* status, int rank, int code) {
  record(status, rank, code);
  fflush(nullptr);
  write_report();
  // Without a report (not run by orrery run) the process's status is all there is to tell.
  _exit(run_description().report.empty() ? (!strcmp(status, "exited") || !strcmp(status, "aborted") ? code : 1) : 0);
}

// SimGrid has listed the blocked actors (its kernel's view); the report names each rank's MPI call.
static void on_deadlock() { end_run("deadlock", -1, 0); }

/* Work that takes the GPU time; event records and waits alone complete as soon as their stream
 * runs, which a rank ending at once may not have let it do. */
static bool is_work(const Op& op) {
  return op.kind == Op::Kernel || op.kind == Op::Memset || op.kind == Op::HostFn ||
         (op.kind == Op::Copy && op.bytes > 0);
}

/* A rank that ends (its main returned) with work still queued on one of its streams: on a real
 * GPU the process's exit would drop that work; here it is a failure, named in the report. */
void finish_rank(const Rank& r) {
  if (g_simulation_over)
    return;
  for (const Stream* s : r.streams)
    for (const Op& op : s->queue)
      if (is_work(op))
        end_run("pending_gpu_work", r.id, 0);
}

/* exit() called by a rank during the simulation ends the whole process (every rank is an actor
 * in it), before SimGrid's own exit handler turns it into an abort and loses the status. */
static void on_process_exit(int status, void*) {
  if (g_simulation_over || run_description().report.empty())
    return;
  int rank = current_rank_id();
  if (rank < 0)
    return;  // SimGrid's own exit: orrery run reports the missing report
  auto finished = [](int id) {
    for (auto& [pid, r] : ranks())
      if (r->id == id)
        return r->stats.end_s >= 0;
    return false;  // not started yet
  };
  bool others_running = false;
  for (int id = 0; id < (int)run_description().ranks.size(); id++)
    others_running = others_running || (id != rank && !finished(id));
  if (status != 0 || !finished(rank))  // exit(0) before MPI_Finalize is a failure too
    end_run("exited", rank, status);
  if (others_running)
    // After MPI_Finalize a rank's exit(0) would let the others go on in a real job; here it
    // ends them all: Orrery's limit, not the program's failure.
    end_run("exit_after_finalize", rank, 0);
  end_run("completed", -1, 0);  // the last rank's exit(0) after its work: a normal end
}

static void write_crash_row(int rank, int sig) {
  // Only async-signal-safe calls: the crash may have left malloc or stdio half-way.
  char row[160];
  int n = snprintf(row, sizeof row, "%d\tstatus\tcrashed\t%d\t0\t%.17g\n", rank, sig, now());
  int fd = open(g_crash_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    ssize_t ignored = write(fd, row, (size_t)n);
    (void)ignored;
    close(fd);
  }
}

static void on_fatal_signal(int sig, siginfo_t*, void*) {
  if (g_simulation_over || run_description().report.empty()) {
    signal(sig, SIG_DFL);
    raise(sig);
    return;
  }
  int rank = current_rank_id();
  write_crash_row(rank, sig);
  // The report too, which may fail where the crash left the heap broken: then the crash's
  // row (above) is what orrery run reads, and the alarm ends a report that cannot finish.
  signal(SIGALRM, SIG_DFL);
  alarm(10);
  if (rank < 0)
    end_run("orrery_crashed", -1, sig);  // in SimGrid or the shim, outside any rank's code
  end_run("crashed", rank, sig);
}

static void install_failure_handlers() {
  g_crash_path = run_description().report + ".crash";
  ::on_exit(on_process_exit, nullptr);
  // SimGrid's own handler only prints and re-raises; the shim's names the rank. The stack
  // SimGrid sets for signals (SIGSTKSZ) is too small to write the report on.
  static std::vector<char> signal_stack(1 << 16);
  stack_t st{};
  st.ss_sp = signal_stack.data();
  st.ss_size = signal_stack.size();
  sigaltstack(&st, nullptr);
  struct sigaction sa{};
  sa.sa_sigaction = on_fatal_signal;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT})
    sigaction(sig, &sa, nullptr);
}

/* ---------------- the report ----------------
 * One row per (rank, category, name); orrery/results.py reads it by its header. A run's outcome
 * comes first: a status row (rank, "status", status, code, 0, time), then for a deadlock one
 * "blocked" row per rank still running (its MPI call, peer and tag as `count` and `bytes`
 * (Rank::kNoPeer, Rank::kAnyPeer), the call's start), and for pending GPU work one "pending"
 * row per operation still queued (its description, the stream: 0 for the legacy default stream,
 * k for the rank's k-th created stream, the device, the time). */

static std::string describe(const Op& op) {
  switch (op.kind) {
    case Op::Kernel: return "kernel " + op.name;
    case Op::Memset: return "memset of " + std::to_string(op.bytes) + " bytes";
    case Op::Copy: return std::string(copy_kind_name(op.copy)) + " copy of " + std::to_string(op.bytes) + " bytes";
    case Op::Record: return "event record";
    case Op::Wait: return "event wait";
    case Op::HostFn: return "host function";
  }
  return "?";
}

static int stream_number(const Rank& r, const Stream* s) {
  if (s->legacy)
    return 0;
  int k = 0;
  for (const Stream* o : r.streams) {
    k += !o->legacy;
    if (o == s)
      break;
  }
  return k;
}

static void write_report() {
  const std::string& path = run_description().report;
  if (path.empty() || g_simulation_over)
    return;
  g_simulation_over = true;
  if (!g_outcome_set)
    g_outcome.time_s = now();
  std::string tmp = path + ".part";
  FILE* f = fopen(tmp.c_str(), "w");
  if (!f) {
    fprintf(stderr, "orrery: error: cannot write the report %s\n", tmp.c_str());
    return;
  }
  fprintf(f, "rank\tcategory\tname\tcount\tbytes\ttime_s\n");
  fprintf(f, "-1\trun\tmakespan\t0\t0\t%.17g\n", now());
  fprintf(f, "%d\tstatus\t%s\t%d\t0\t%.17g\n", g_outcome.rank, g_outcome.status.c_str(), g_outcome.code,
          g_outcome.time_s);
  std::vector<Rank*> by_id;
  for (auto& entry : ranks())
    by_id.push_back(entry.second.get());
  std::sort(by_id.begin(), by_id.end(), [](const Rank* a, const Rank* b) { return a->id < b->id; });
  for (Rank* r : by_id) {
    if (g_outcome.status == "deadlock" && r->stats.end_s < 0) {
      const Rank::MpiCall& c = r->in_mpi;
      fprintf(f, "%d\tblocked\t%s\t%d\t%d\t%.17g\n", r->id, c.name ? c.name : "", c.peer, c.tag,
              c.name ? c.t0 : now());
    }
    if (g_outcome.status == "pending_gpu_work" && r->id == g_outcome.rank)
      for (const Stream* s : r->streams)
        for (const Op& op : s->queue)
          if (is_work(op))
            fprintf(f, "%d\tpending\t%s\t%d\t%d\t%.17g\n", r->id, describe(op).c_str(), stream_number(*r, s),
                    s->device, now());
    // A call the run ended in counts until the end.
    if (const Rank::MpiCall& c = r->in_mpi; c.name) {
      Tally& t = r->stats.mpi[c.name];
      t.count++;
      t.bytes += c.bytes;
      t.time_s += now() - c.t0;
    }
  }
  for (const Rank* r : by_id) {
    auto rows = [&](const char* cat, const std::map<std::string, Tally>& m) {
      for (auto& [name, t] : m)
        fprintf(f, "%d\t%s\t%s\t%llu\t%llu\t%.17g\n", r->id, cat, name.c_str(), (unsigned long long)t.count,
                (unsigned long long)t.bytes, t.time_s);
    };
    rows("kernel", r->stats.kernels);
    rows("copy", r->stats.copies);
    rows("mpi", r->stats.mpi);
    rows("uncosted", r->stats.uncosted);
    fprintf(f, "%d\trank\thost_api\t0\t0\t%.17g\n", r->id, r->stats.host_api_s);
    fprintf(f, "%d\trank\tgpu_wait\t0\t0\t%.17g\n", r->id, r->stats.gpu_wait_s);
    fprintf(f, "%d\trank\tend\t0\t0\t%.17g\n", r->id, r->stats.end_s < 0 ? now() : r->stats.end_s);
    fprintf(f, "%d\trank\tfinished\t%d\t0\t0\n", r->id, (int)(r->stats.end_s >= 0));
    const Stats& st = r->stats;
    double hidden = st.comm.overlap(st.compute);
    fprintf(f, "%d\tengine\tcompute\t0\t0\t%.17g\n", r->id, st.compute.measure());
    fprintf(f, "%d\tengine\tH2D\t0\t0\t%.17g\n", r->id, st.h2d.measure());
    fprintf(f, "%d\tengine\tD2H\t0\t0\t%.17g\n", r->id, st.d2h.measure());
    fprintf(f, "%d\toverlap\tcommunication\t0\t0\t%.17g\n", r->id, st.comm.measure());
    fprintf(f, "%d\toverlap\thidden\t0\t0\t%.17g\n", r->id, hidden);
    fprintf(f, "%d\tplacement\t%s\t0\t0\t0\n", r->id, r->host->get_cname());
    fprintf(f, "%d\tmixed\tplacements\t%llu\t0\t0\n", r->id, (unsigned long long)st.mixed_placements);
  }
  fclose(f);
  rename(tmp.c_str(), path.c_str());
}

}  // namespace orrery
