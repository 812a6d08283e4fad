/* Streams and events: creation, ordering, synchronisation and timing. */
#include "core/capture.hpp"
#include "core/runtime.hpp"
#include "core/trace.hpp"
#include "cudart/cuda_api.h"

#include <cstring>

#include <set>

using namespace orrery;

static std::set<Event*>& live_events() {
  static std::set<Event*> e;
  return e;
}

/* Synchronising with or querying a stream that is being captured: CUDA's error, and the capture
 * is invalidated (the Programming Guide's "Prohibited and Unhandled Operations"). */
static cudaError_t not_while_captured(Stream* s) {
  if (!s->capture)
    return cudaSuccess;
  capture_invalidate(s->capture);
  return cudaErrorStreamCaptureUnsupported;
}

static Event* event_of(Rank& r, cudaEvent_t handle, const char* fn) {
  auto* e = reinterpret_cast<Event*>(handle);
  if (!live_events().count(e))
    fatal("%s: invalid event handle %p (rank %d)", fn, (void*)handle, r.id);
  return e;
}

ORR_EXPORT cudaError_t cudaStreamCreateWithPriority(cudaStream_t* s, unsigned int flags, int priority) {
  Rank& r = rank_self("cudaStreamCreateWithPriority");
  if (!s || (flags & ~cudaStreamNonBlocking))
    return r.last_error = cudaErrorInvalidValue;
  // CUDA clamps priorities to the device's range [-5, 0] (greatest = -5).
  priority = priority < -5 ? -5 : priority > 0 ? 0 : priority;
  *s = reinterpret_cast<cudaStream_t>(create_stream(r, flags, priority));
  return cudaSuccess;
}
ORR_EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int flags) {
  return cudaStreamCreateWithPriority(s, flags, 0);
}
ORR_EXPORT cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithPriority(s, 0, 0); }

ORR_EXPORT cudaError_t cudaStreamDestroy(cudaStream_t handle) {
  Rank& r = rank_self("cudaStreamDestroy");
  if (!handle || handle == cudaStreamLegacy)
    return r.last_error = cudaErrorInvalidResourceHandle;
  Stream* s = resolve_stream(r, handle, "cudaStreamDestroy");
  // As in CUDA: pending work still completes; the worker ends once drained.
  s->destroyed = true;
  wake_worker(s);
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t handle) {
  Rank& r = rank_deferring("cudaStreamSynchronize");
  Stream* s = resolve_stream(r, handle, "cudaStreamSynchronize");
  if (cudaError_t e = not_while_captured(s))
    return r.last_error = e;
  trace::CudaCall call(r, "cudaStreamSynchronize");
  wait_stream(r, s);
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaStreamQuery(cudaStream_t handle) {
  Rank& r = rank_self("cudaStreamQuery");
  Stream* s = resolve_stream(r, handle, "cudaStreamQuery");
  if (cudaError_t e = not_while_captured(s))
    return r.last_error = e;
  return poll_for(r, s, s->enqueued) ? cudaSuccess : cudaErrorNotReady;
}

ORR_EXPORT cudaError_t cudaStreamGetPriority(cudaStream_t handle, int* priority) {
  Rank& r = rank_self("cudaStreamGetPriority");
  *priority = resolve_stream(r, handle, "cudaStreamGetPriority")->priority;
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaStreamGetFlags(cudaStream_t handle, unsigned int* flags) {
  Rank& r = rank_self("cudaStreamGetFlags");
  *flags = resolve_stream(r, handle, "cudaStreamGetFlags")->flags;
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaStreamGetDevice(cudaStream_t handle, int* device) {
  Rank& r = rank_self("cudaStreamGetDevice");
  if (!device)
    return r.last_error = cudaErrorInvalidValue;
  *device = resolve_stream(r, handle, "cudaStreamGetDevice")->device;
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaStreamWaitEvent(cudaStream_t handle, cudaEvent_t event, unsigned int flags) {
  Rank& r = rank_deferring("cudaStreamWaitEvent");
  if (flags)
    return r.last_error = cudaErrorInvalidValue;
  Stream* s = resolve_stream(r, handle, "cudaStreamWaitEvent");
  Event* e = event_of(r, event, "cudaStreamWaitEvent");
  if (s->capture || e->capture)  // a dependency within a capture, or a stream joining it
    return r.last_error = capture_wait(s, e);
  Op op{Op::Wait};
  if (e->stream)
    op.deps.push_back({e->stream, e->seq});
  if (cudaError_t err = enqueue(s, std::move(op)))
    return r.last_error = err;
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaLaunchHostFunc(cudaStream_t handle, cudaHostFn_t fn, void* data) {
  Rank& r = rank_self("cudaLaunchHostFunc");
  if (!fn)
    return r.last_error = cudaErrorInvalidValue;
  Op op{Op::HostFn};
  op.fn = fn;
  op.fn_data = data;
  if (cudaError_t e = enqueue(resolve_stream(r, handle, "cudaLaunchHostFunc"), std::move(op)))
    return r.last_error = e;
  return cudaSuccess;
}

/* cudaStreamAddCallback (deprecated for cudaLaunchHostFunc, still common): a host function whose
 * callback also gets its stream and the stream's status, which is cudaSuccess here (no work of a
 * simulated stream fails). */
namespace {
struct StreamCallback {
  cudaStreamCallback_t callback;
  cudaStream_t stream;
  void* data;
};
void run_stream_callback(void* arg) {
  auto* c = static_cast<StreamCallback*>(arg);
  c->callback(c->stream, cudaSuccess, c->data);
  delete c;
}
}  // namespace

ORR_EXPORT cudaError_t cudaStreamAddCallback(cudaStream_t handle, cudaStreamCallback_t callback, void* data,
                                             unsigned int flags) {
  Rank& r = rank_self("cudaStreamAddCallback");
  if (!callback || flags)
    return r.last_error = cudaErrorInvalidValue;
  Stream* s = resolve_stream(r, handle, "cudaStreamAddCallback");
  if (s->capture)  // CUDA: not allowed in a capture (cudaLaunchHostFunc is)
    return r.last_error = cudaErrorStreamCaptureUnsupported;
  Op op{Op::HostFn};
  op.fn = run_stream_callback;
  op.fn_data = new StreamCallback{callback, handle, data};
  if (cudaError_t e = enqueue(s, std::move(op)))
    return r.last_error = e;
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  Rank& r = rank_self("cudaEventCreateWithFlags");
  if (!event || (flags & ~(cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess)))
    return r.last_error = cudaErrorInvalidValue;
  if ((flags & cudaEventInterprocess) && !(flags & cudaEventDisableTiming))  // CUDA's rule
    return r.last_error = cudaErrorInvalidValue;
  auto* e = new Event;
  e->flags = flags;
  e->owner = r.id;
  live_events().insert(e);
  *event = reinterpret_cast<cudaEvent_t>(e);
  return cudaSuccess;
}
ORR_EXPORT cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, 0); }

ORR_EXPORT cudaError_t cudaEventDestroy(cudaEvent_t event) {
  Rank& r = rank_self("cudaEventDestroy");
  Event* e = event_of(r, event, "cudaEventDestroy");
  // Kept allocated: a record still queued on a stream points to it. An event other ranks opened
  // (CUDA IPC) lives until each has destroyed its handle.
  if (--e->handles == 0)
    live_events().erase(e);
  return cudaSuccess;
}

/* ---- CUDA IPC of events ----
 * As for memory (memory.cpp), every rank is in one process: a handle names the event itself, and
 * an opened event is the same one, so the opener's streams wait for the owner's work in its own
 * streams, and records from either side are the event's records. Only an event made with
 * cudaEventInterprocess (and cudaEventDisableTiming, as CUDA requires) has a handle. */
namespace {

constexpr uint32_t kIpcEventMagic = 0x4f495045;  // "EPIO"

struct IpcEventHandle {
  uint32_t magic;
  int32_t owner;
  Event* event;
};
static_assert(sizeof(IpcEventHandle) <= sizeof(cudaIpcEventHandle_t));

}  // namespace

ORR_EXPORT cudaError_t cudaIpcGetEventHandle(cudaIpcEventHandle_t* handle, cudaEvent_t event) {
  Rank& r = rank_self("cudaIpcGetEventHandle");
  Event* e = event_of(r, event, "cudaIpcGetEventHandle");
  if (!handle || !(e->flags & cudaEventInterprocess))
    return r.last_error = cudaErrorInvalidResourceHandle;
  IpcEventHandle h{kIpcEventMagic, r.id, e};
  memset(handle, 0, sizeof *handle);
  memcpy(handle, &h, sizeof h);
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaIpcOpenEventHandle(cudaEvent_t* event, cudaIpcEventHandle_t handle) {
  Rank& r = rank_self("cudaIpcOpenEventHandle");
  IpcEventHandle h;
  memcpy(&h, &handle, sizeof h);
  if (!event || h.magic != kIpcEventMagic)
    return r.last_error = cudaErrorInvalidValue;
  if (!live_events().count(h.event))
    return r.last_error = cudaErrorInvalidResourceHandle;  // destroyed since
  if (h.owner == r.id)  // a process cannot open its own handle
    return r.last_error = cudaErrorInvalidValue;
  h.event->handles++;
  *event = reinterpret_cast<cudaEvent_t>(h.event);
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t handle) {
  Rank& r = rank_deferring("cudaEventRecord");
  Event* e = event_of(r, event, "cudaEventRecord");
  Stream* s = resolve_stream(r, handle, "cudaEventRecord");
  if (s->capture) {  // the event stands for the stream's captured work so far
    if (s->capture->invalidated)
      return r.last_error = cudaErrorStreamCaptureInvalidated;
    capture_record(e, s);
    return cudaSuccess;
  }
  if (s->legacy)
    if (cudaError_t err = capture_implicit(s))
      return r.last_error = err;
  Op op{Op::Record};
  op.event = e;
  e->stream = s;
  e->seq = s->enqueued + 1;
  e->time = -1;
  e->capture = nullptr;
  e->nodes.clear();
  enqueue(s, std::move(op));  // cannot fail: the stream is not captured, nor legacy with a capture
  return cudaSuccess;
}

// cudaEventRecordExternal only means something in a stream capture (a graph's event record node).
ORR_EXPORT cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t handle, unsigned int flags) {
  if (flags == 0)
    return cudaEventRecord(event, handle);
  Rank& r = rank_self("cudaEventRecordWithFlags");
  if (flags != 1)
    return r.last_error = cudaErrorInvalidValue;
  fatal("cudaEventRecordWithFlags(cudaEventRecordExternal): an external event record node, which Orrery does not "
        "simulate");
}

ORR_EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  Rank& r = rank_deferring("cudaEventSynchronize");
  Event* e = event_of(r, event, "cudaEventSynchronize");
  if (e->capture)
    return r.last_error = cudaErrorCapturedEvent;
  trace::CudaCall call(r, "cudaEventSynchronize");
  if (e->stream)
    wait_for(r, e->stream, e->seq);
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaEventQuery(cudaEvent_t event) {
  Rank& r = rank_self("cudaEventQuery");
  Event* e = event_of(r, event, "cudaEventQuery");
  if (e->capture)
    return r.last_error = cudaErrorCapturedEvent;
  return !e->stream || poll_for(r, e->stream, e->seq) ? cudaSuccess : cudaErrorNotReady;
}

ORR_EXPORT cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  Rank& r = rank_self("cudaEventElapsedTime");
  Event* a = event_of(r, start, "cudaEventElapsedTime");
  Event* b = event_of(r, end, "cudaEventElapsedTime");
  if (!ms)
    return r.last_error = cudaErrorInvalidValue;
  if (a->capture || b->capture)
    return r.last_error = cudaErrorCapturedEvent;
  if (!a->stream || !b->stream || (a->flags | b->flags) & cudaEventDisableTiming)
    return r.last_error = cudaErrorInvalidResourceHandle;
  if (a->stream->completed < a->seq || b->stream->completed < b->seq)
    return r.last_error = cudaErrorNotReady;
  *ms = (float)((b->time - a->time) * 1e3);
  return cudaSuccess;
}

/* nvcc --default-stream per-thread: stream 0 is the per-thread default stream */
ORR_EXPORT cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t s) { return cudaStreamSynchronize(per_thread(s)); }
ORR_EXPORT cudaError_t cudaStreamQuery_ptsz(cudaStream_t s) { return cudaStreamQuery(per_thread(s)); }
ORR_EXPORT cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t s, cudaEvent_t event, unsigned int flags) {
  return cudaStreamWaitEvent(per_thread(s), event, flags);
}
ORR_EXPORT cudaError_t cudaStreamGetPriority_ptsz(cudaStream_t s, int* priority) {
  return cudaStreamGetPriority(per_thread(s), priority);
}
ORR_EXPORT cudaError_t cudaStreamGetFlags_ptsz(cudaStream_t s, unsigned int* flags) {
  return cudaStreamGetFlags(per_thread(s), flags);
}
ORR_EXPORT cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t s, cudaHostFn_t fn, void* data) {
  return cudaLaunchHostFunc(per_thread(s), fn, data);
}
ORR_EXPORT cudaError_t cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t s) {
  return cudaEventRecord(event, per_thread(s));
}
ORR_EXPORT cudaError_t cudaEventRecordWithFlags_ptsz(cudaEvent_t event, cudaStream_t s, unsigned int flags) {
  return cudaEventRecordWithFlags(event, per_thread(s), flags);
}
ORR_EXPORT cudaError_t cudaStreamAddCallback_ptsz(cudaStream_t s, cudaStreamCallback_t callback, void* data,
                                                  unsigned int flags) {
  return cudaStreamAddCallback(per_thread(s), callback, data, flags);
}
ORR_EXPORT cudaError_t cudaStreamGetDevice_ptsz(cudaStream_t s, int* device) {
  return cudaStreamGetDevice(per_thread(s), device);
}
