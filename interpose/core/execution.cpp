/* Executing one stream operation as a SimGrid activity: kernels and memsets as executions on
 * the GPU's host (ranks and streams sharing a GPU share its speed), copies as transfers between
 * platform hosts (so they cross the platform's PCIe, NVLink or device-memory links), or as
 * their measured models. */
#include "core/execution.hpp"
#include "core/trace.hpp"

#include <simgrid/kernel/Timer.hpp>

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

static CopyEngines* engines_of(const Gpu& g, CopyKind k) {
  return k == CopyKind::H2D                          ? g.h2d_engine
         : k == CopyKind::D2H || k == CopyKind::Peer ? g.d2h_engine
                                                     : nullptr;
}

/* A copy across its route (H2D, D2H, peer): the bytes its transfer moves and the wait before it.
 * Without a measured model: its own bytes, no wait. With one, alone it takes exactly latency +
 * bytes / bandwidth, still sharing its route's links with other traffic: where the measured
 * bandwidth is below the route's, the copy moves proportionally more bytes (SimGrid 3.32 ignores
 * Comm::set_rate on host-to-host comms), so it holds its share of the links as long as it lasts;
 * the latency beyond the route's is the wait. */
struct Transfer {
  double wait;     // before the transfer
  uint64_t bytes;  // what the transfer moves
};
static Transfer transfer_over(const Segment* seg, sg4::Host* from, sg4::Host* to, uint64_t bytes_) {
  if (!seg)
    return {0, bytes_};
  std::vector<sg4::Link*> links;
  double route_latency = 0;
  from->route_to(to, links, &route_latency);
  double route_bandwidth = INFINITY;
  for (const sg4::Link* l : links)
    route_bandwidth = std::min(route_bandwidth, l->get_bandwidth());
  // a negative latency (a segment whose time grows faster than the size) shortens the data term
  double bytes = (double)bytes_ + std::min(seg->latency_s, 0.0) * seg->bandwidth;
  double moved = seg->bandwidth < route_bandwidth ? bytes * route_bandwidth / seg->bandwidth : bytes;
  double whole = std::floor(moved);  // comms move whole bytes: the fraction's time joins the latency
  double wait = std::max(seg->latency_s - route_latency, 0.0) + (moved - whole) / route_bandwidth;
  if (wait <= kClockPrecision)  // below the simulation's precision, a wait is nothing
    wait = 0;
  return {wait, (uint64_t)whole};
}
static Transfer transfer_of(const Gpu& g, const Op& op) {
  return transfer_over(measured_segment(g, op.copy, op.bytes), op.from, op.to, op.bytes);
}

/* A peer copy staged through host memory (Op::staged): the driver's pipeline moves the data from
 * the source GPU to host memory and from there to the destination GPU, each half sharing its
 * route's links with other traffic and taking the staged model's time (copies.peer_staged) or its
 * route's own. The inward half starts once the first data are in host memory, after the outward
 * half's latency: a small copy pays both latencies, a large one the slower half's rate. The copy
 * ends with the later half. */
static void run_staged_peer(const Gpu& g, const Op& op) {
  const Segment* seg = segment_for(g.staged_peer_model, (double)op.bytes);
  Transfer out = transfer_over(seg, op.from, op.via, op.bytes);
  Transfer in = transfer_over(seg, op.via, op.to, op.bytes);
  std::vector<sg4::Link*> links;
  double out_latency = 0;  // the outward half's: its route's, or its model's where that is longer
  op.from->route_to(op.via, links, &out_latency);
  if (seg)
    out_latency = std::max(seg->latency_s, out_latency);
  const double t0 = now();
  if (out.wait > 0)
    sg4::this_actor::sleep_for(out.wait);
  sg4::CommPtr outward = sg4::Comm::sendto_async(op.from, op.via, out.bytes);
  sg4::this_actor::sleep_until(t0 + out_latency + in.wait);
  sg4::CommPtr inward = sg4::Comm::sendto_async(op.via, op.to, in.bytes);
  outward->wait();
  inward->wait();
}

/* A device-to-device copy's time, work of the GPU sharing it with kernels: its measured model's,
 * or the GPU's device-memory latency and bandwidth. */
static double d2d_seconds(const Gpu& g, const Op& op) {
  if (const Segment* seg = measured_segment(g, op.copy, op.bytes))
    return seg->latency_s + (double)op.bytes / seg->bandwidth;
  return g.d2d_latency_s + (double)op.bytes / g.d2d_bandwidth;
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

/* A copy's accounting once it has run from t0 (its engine's, if it took one) to now. */
static void finish_copy(Stream* s, const Op& op, CopyEngines* engine, int unit, double t0) {
  Stats& st = s->rank->stats;
  if (engine) {
    release_engine(*engine);
    if (trace::on())
      trace::engine_end(s, op, engine, unit, t0);
  }
  if (op.copy == CopyKind::D2D && op.bytes > 0)
    st.compute.add(t0, now());
  if (op.copy == CopyKind::D2H && op.fill_dst)
    apply_d2h_fill(op.fill_dst, op.fill_width, op.fill_pitch, op.fill_rows);
  if (op.copy == CopyKind::H2D)
    st.h2d.add(t0, now());
  else if (op.copy == CopyKind::D2H || op.copy == CopyKind::Peer)
    st.d2h.add(t0, now());
  Tally& t = st.copies[op.staged ? "peer_staged" : copy_kind_name(op.copy)];
  t.count++;
  t.bytes += op.bytes;
  t.time_s += now() - t0;
}

bool completes_at_once(const Op& op) {
  return op.kind == Op::Record || op.kind == Op::Wait || op.kind == Op::Free;
}

bool start_without_worker(Stream* s, const Op& op, void (*started)(Stream*, sg4::ActivityPtr)) {
  if (op.kind == Op::Kernel || op.kind == Op::Memset) {
    if (trace::on())
      trace::op_begin(s, op);
    started(s, gpu_work(s, op.seconds)->start());
    return true;
  }
  if (op.kind != Op::Copy || op.bytes == 0 || op.copy == CopyKind::H2H || op.staged)
    return false;  // a host function, a collective...; a copy that moves nothing, sleeps or is staged
  if (op.copy == CopyKind::D2D) {
    if (trace::on())
      trace::op_begin(s, op);
    started(s, gpu_work(s, d2d_seconds(*s->gpu, op))->start());
    return true;
  }
  CopyEngines* engine = engines_of(*s->gpu, op.copy);
  if (engine->free == 0)
    return false;  // the worker waits for one
  Transfer x = transfer_of(*s->gpu, op);
  acquire_engine(s, *engine);  // one is free: taken at once
  if (trace::on()) {
    trace::op_begin(s, op);
    s->engine_unit = trace::engine_begin(s, op, engine);
  }
  if (x.wait > 0)  // the queue's head stays in place until it completes
    simgrid::kernel::timer::Timer::set(now() + x.wait, [s, &op, x, started] {
      started(s, sg4::Comm::sendto_async(op.from, op.to, x.bytes));
    });
  else
    started(s, sg4::Comm::sendto_async(op.from, op.to, x.bytes));
  return true;
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

void finish_without_worker(Stream* s, const Op& op, double t0) {
  if (op.kind == Op::Copy)
    finish_copy(s, op, engines_of(*s->gpu, op.copy), s->engine_unit, t0);
  else
    account_gpu_work(s, op, t0);
  if (trace::on())
    trace::op_end(s, op, t0);
}

void execute(Stream* s, Op& op) {
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
      CopyEngines* engine = engines_of(*s->gpu, op.copy);
      int unit = -1;
      if (engine) {
        acquire_engine(s, *engine);
        if (trace::on()) {
          trace::held(s, op, "copy engine wait", t0);
          unit = trace::engine_begin(s, op, engine);
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
      } else if (op.copy == CopyKind::D2D) {
        run_on_gpu(s, d2d_seconds(*s->gpu, op));
      } else if (op.staged) {
        run_staged_peer(*s->gpu, op);
      } else {
        Transfer x = transfer_of(*s->gpu, op);
        if (x.wait > 0)
          sg4::this_actor::sleep_for(x.wait);
        sg4::Comm::sendto(op.from, op.to, x.bytes);
      }
      finish_copy(s, op, engine, unit, t0);
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
