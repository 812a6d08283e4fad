/* Executing one stream operation as a SimGrid activity: kernels and memsets as executions on
 * the GPU's host (ranks and streams sharing a GPU share its speed), copies as transfers between
 * platform hosts (so they cross the platform's PCIe, NVLink or device-memory links), or as
 * their measured models. */
#include "core/execution.hpp"
#include "core/trace.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace orrery {

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

static sg4::ExecPtr gpu_work(Stream* s, double seconds) {
  sg4::ExecPtr exec = sg4::Exec::init();
  exec->set_flops_amount(seconds * s->gpu->speed);
  exec->set_host(s->gpu->host);
  exec->set_priority(priority_weight(s->priority));
  return exec;
}

static void run_on_gpu(Stream* s, double seconds) {
  sg4::ExecPtr exec = gpu_work(s, seconds);
  exec->start();
  exec->wait();
}

bool runs_on_gpu_alone(const Op& op) {
  if (op.kind != Op::Kernel && op.kind != Op::Memset)
    return false;
  for (const Dependency& d : op.deps)
    if (d.stream->completed < d.seq)
      return false;
  return true;
}

sg4::ExecPtr gpu_execution(Stream* s, const Op& op) {
  if (trace::on())
    trace::op_begin(s, op);
  return gpu_work(s, op.seconds);
}

/* A kernel's or a memset's accounting, once it has run from t0 to now. */
static void account_gpu_work(Stream* s, const Op& op, double t0) {
  Stats& st = s->rank->stats;
  if (op.kind == Op::Kernel) {
    Tally& t = st.kernels[op.name];
    t.count++;
    t.time_s += now() - t0;
    st.compute.add(t0, now());
    st.kernel.add(t0, now());
  } else {
    Tally& t = st.copies["memset"];
    t.count++;
    t.bytes += op.bytes;
    t.time_s += now() - t0;
    st.compute.add(t0, now());
  }
}

void finish_on_gpu(Stream* s, const Op& op, double t0) {
  account_gpu_work(s, op, t0);
  if (trace::on())
    trace::op_end(s, op, t0);
}

void execute(Stream* s, Op& op) {
  Stats& st = s->rank->stats;
  double t0 = now();
  if (trace::on())
    trace::op_begin(s, op);
  switch (op.kind) {
    case Op::Kernel:
    case Op::Memset:
      run_on_gpu(s, op.seconds);
      account_gpu_work(s, op, t0);
      break;
    case Op::Copy: {
      sg4::SemaphorePtr engine = op.copy == CopyKind::H2D ? s->gpu->h2d_engine
                                 : op.copy == CopyKind::D2H || op.copy == CopyKind::Peer ? s->gpu->d2h_engine
                                                                                         : nullptr;
      int unit = -1;
      if (engine) {
        engine->acquire();
        if (trace::on()) {
          trace::held(s, op, "copy engine wait", t0);
          unit = trace::engine_begin(s, op, engine.get());
        }
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
      if (engine) {
        engine->release();
        if (trace::on())
          trace::engine_end(s, op, engine.get(), unit, t0);
      }
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
    case Op::Collective:
      op.run(s);
      break;
    case Op::Free:
      free_in_stream_order(op.free_base);
      break;
  }
  if (trace::on())
    trace::op_end(s, op, t0);
}

}  // namespace orrery
