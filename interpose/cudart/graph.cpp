/* CUDA graphs made by stream capture: capturing, instantiating, launching (core/capture.hpp has
 * the mechanism). Graphs built node by node (cudaGraphAddKernelNode and the rest) and graph updates
 * are not simulated: those calls stop the run naming them, as every call without a row does. */
#include "core/capture.hpp"
#include "core/trace.hpp"
#include "cudart/cuda_api.h"

#include <algorithm>
#include <set>
#include <string>

using namespace orrery;

namespace {
std::set<Graph*>& live_graphs() {
  static std::set<Graph*> g;
  return g;
}
std::set<GraphExec*>& live_execs() {
  static std::set<GraphExec*> x;
  return x;
}

Graph* graph_of(cudaGraph_t handle) {
  auto* g = reinterpret_cast<Graph*>(handle);
  return live_graphs().count(g) ? g : nullptr;
}
// The graph a capture of the rank is recording (cudaStreamGetCaptureInfo's graph_out), which may
// be looked at while the capture goes on, not destroyed or instantiated.
Graph* capturing_graph_of(const Rank& r, cudaGraph_t handle) {
  for (Stream* s : r.streams)
    if (s->capture && s->capture->active && reinterpret_cast<Graph*>(handle) == &s->capture->graph)
      return &s->capture->graph;
  return nullptr;
}
// cudaStreamGetCaptureInfo's arrays, valid until the next call on the stream (as CUDA's are)
std::map<const Stream*, std::vector<cudaGraphNode_t>>& dependency_arrays() {
  static std::map<const Stream*, std::vector<cudaGraphNode_t>> a;
  return a;
}
std::map<const Stream*, std::vector<cudaGraphEdgeData>>& edge_arrays() {
  static std::map<const Stream*, std::vector<cudaGraphEdgeData>> a;
  return a;
}
GraphExec* exec_of(cudaGraphExec_t handle) {
  auto* x = reinterpret_cast<GraphExec*>(handle);
  return live_execs().count(x) ? x : nullptr;
}

// cudaGraphInstantiateFlags (driver_types.h)
constexpr unsigned long long kAutoFreeOnLaunch = 1, kUpload = 2, kDeviceLaunch = 4, kUseNodePriority = 8;

cudaError_t instantiate(const char* fn, cudaGraphExec_t* out, cudaGraph_t handle, unsigned long long flags) {
  Rank& r = rank_self(fn);
  Graph* g = graph_of(handle);
  if (!out || !g || (flags & ~(kAutoFreeOnLaunch | kUpload | kDeviceLaunch | kUseNodePriority)))
    return r.last_error = cudaErrorInvalidValue;
  if (flags & kDeviceLaunch)
    unsupported("cudaGraphInstantiate(cudaGraphInstantiateFlagDeviceLaunch): graphs launched from the device");
  if (g->rank != &r)
    fatal("%s: rank %d instantiated a graph of rank %d", fn, r.id, g->rank->id);
  auto* x = new GraphExec;
  x->rank = &r;
  x->graph = *g;  // an executable graph is a snapshot: the graph may be destroyed or captured again
  x->node_priority = flags & kUseNodePriority;
  live_execs().insert(x);
  *out = reinterpret_cast<cudaGraphExec_t>(x);
  return cudaSuccess;
}
}  // namespace

ORR_EXPORT cudaError_t cudaStreamBeginCapture(cudaStream_t stream, int mode) {
  Rank& r = rank_self("cudaStreamBeginCapture");
  if (mode < kCaptureGlobal || mode > kCaptureRelaxed)
    return r.last_error = cudaErrorInvalidValue;
  if (cudaError_t e = capture_begin(resolve_stream(r, stream, "cudaStreamBeginCapture"), mode))
    return r.last_error = e;
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  Rank& r = rank_self("cudaStreamEndCapture");
  if (!graph)
    return r.last_error = cudaErrorInvalidValue;
  Graph* g = nullptr;
  cudaError_t e = capture_end(resolve_stream(r, stream, "cudaStreamEndCapture"), &g);
  if (g)
    live_graphs().insert(g);
  *graph = reinterpret_cast<cudaGraph_t>(g);
  return e ? r.last_error = e : cudaSuccess;
}

ORR_EXPORT cudaError_t cudaStreamIsCapturing(cudaStream_t stream, int* status) {
  Rank& r = rank_self("cudaStreamIsCapturing");
  if (!status)
    return r.last_error = cudaErrorInvalidValue;
  Stream* s = resolve_stream(r, stream, "cudaStreamIsCapturing");
  if (s->legacy && implicit_capture(s))  // CUDA's answer on the legacy stream beside a capture
    return r.last_error = cudaErrorStreamCaptureImplicit;
  const Capture* c = s->capture;
  *status = !c ? 0 : c->invalidated ? 2 : 1;  // cudaStreamCaptureStatusNone, Invalidated, Active
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream, int* status, unsigned long long* id,
                                                cudaGraph_t* graph, const cudaGraphNode_t** dependencies,
                                                const cudaGraphEdgeData** edges, size_t* count) {
  Rank& r = rank_self("cudaStreamGetCaptureInfo");
  if (!status || (edges && !dependencies))
    return r.last_error = cudaErrorInvalidValue;
  Stream* s = resolve_stream(r, stream, "cudaStreamGetCaptureInfo");
  if (s->legacy && implicit_capture(s))
    return r.last_error = cudaErrorStreamCaptureImplicit;
  Capture* c = s->capture;
  *status = !c ? 0 : c->invalidated ? 2 : 1;
  if (*status != 1)  // the rest is valid only for an active capture
    return cudaSuccess;
  if (id)
    *id = c->id;
  if (graph)
    *graph = reinterpret_cast<cudaGraph_t>(&c->graph);
  std::vector<cudaGraphNode_t>& nodes = dependency_arrays()[s];
  nodes.clear();
  for (uint32_t n : s->capture_tail)
    nodes.push_back(reinterpret_cast<cudaGraphNode_t>(&c->graph.nodes[n]));
  if (dependencies)
    *dependencies = nodes.data();
  if (edges) {  // every edge of a captured graph is a full dependency: its data all zeros
    std::vector<cudaGraphEdgeData>& data = edge_arrays()[s];
    data.assign(nodes.size(), cudaGraphEdgeData{});
    *edges = data.data();
  }
  if (count)
    *count = nodes.size();
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaThreadExchangeStreamCaptureMode(int* mode) {
  Rank& r = rank_self("cudaThreadExchangeStreamCaptureMode");
  if (!mode || *mode < kCaptureGlobal || *mode > kCaptureRelaxed)
    return r.last_error = cudaErrorInvalidValue;
  std::swap(thread_capture_mode(r), *mode);
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaGraphGetNodes(cudaGraph_t handle, cudaGraphNode_t* nodes, size_t* count) {
  Rank& r = rank_self("cudaGraphGetNodes");
  Graph* g = handle ? graph_of(handle) : nullptr;
  if (!g && handle)
    g = capturing_graph_of(r, handle);
  if (!g || !count)
    return r.last_error = cudaErrorInvalidValue;
  if (nodes) {  // handles to look at, not to use: the calls that take a node are not simulated
    for (size_t i = 0; i < *count; i++)
      nodes[i] = i < g->nodes.size() ? reinterpret_cast<cudaGraphNode_t>(&g->nodes[i]) : nullptr;
    *count = std::min(*count, g->nodes.size());
  } else {
    *count = g->nodes.size();
  }
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaGraphDestroy(cudaGraph_t handle) {
  Rank& r = rank_self("cudaGraphDestroy");
  Graph* g = graph_of(handle);
  if (!g)
    return r.last_error = cudaErrorInvalidValue;
  live_graphs().erase(g);
  delete g;
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags) {
  return instantiate("cudaGraphInstantiate", exec, graph, flags);
}

ORR_EXPORT cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t* exec, cudaGraph_t graph,
                                                     unsigned long long flags) {
  return instantiate("cudaGraphInstantiateWithFlags", exec, graph, flags);
}

ORR_EXPORT cudaError_t cudaGraphUpload(cudaGraphExec_t handle, cudaStream_t stream) {
  Rank& r = rank_self("cudaGraphUpload");
  if (!exec_of(handle))
    return r.last_error = cudaErrorInvalidValue;
  resolve_stream(r, stream, "cudaGraphUpload");  // the upload takes no modelled time
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaGraphLaunch(cudaGraphExec_t handle, cudaStream_t stream) {
  Rank& r = rank_self("cudaGraphLaunch");
  GraphExec* x = exec_of(handle);
  if (!x)
    return r.last_error = cudaErrorInvalidValue;
  if (x->rank != &r)
    fatal("cudaGraphLaunch: rank %d launched a graph of rank %d", r.id, x->rank->id);
  Stream* s = resolve_stream(r, stream, "cudaGraphLaunch");
  trace::CudaCall call(r, "cudaGraphLaunch");
  call.about(std::to_string(x->graph.nodes.size()) + " nodes");
  // One launch's host time for the whole graph: its nodes' own launches were paid at the capture.
  host_overhead(r, r.gpus.at(x->graph.device)->launch_overhead_s);
  if (cudaError_t e = graph_launch(*x, s))
    return r.last_error = e;
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaGraphExecDestroy(cudaGraphExec_t handle) {
  Rank& r = rank_self("cudaGraphExecDestroy");
  GraphExec* x = exec_of(handle);
  if (!x)
    return r.last_error = cudaErrorInvalidValue;
  graph_exec_destroy(*x);  // its launches still complete: their streams hold copies of its nodes
  live_execs().erase(x);
  delete x;
  return cudaSuccess;
}

/* nvcc --default-stream per-thread: stream 0 is the per-thread default stream */
ORR_EXPORT cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t s, int mode) {
  return cudaStreamBeginCapture(per_thread(s), mode);
}
ORR_EXPORT cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t s, cudaGraph_t* graph) {
  return cudaStreamEndCapture(per_thread(s), graph);
}
ORR_EXPORT cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t s, int* status) {
  return cudaStreamIsCapturing(per_thread(s), status);
}
ORR_EXPORT cudaError_t cudaStreamGetCaptureInfo_ptsz(cudaStream_t s, int* status, unsigned long long* id,
                                                     cudaGraph_t* graph, const cudaGraphNode_t** dependencies,
                                                     const cudaGraphEdgeData** edges, size_t* count) {
  return cudaStreamGetCaptureInfo(per_thread(s), status, id, graph, dependencies, edges, count);
}
ORR_EXPORT cudaError_t cudaGraphUpload_ptsz(cudaGraphExec_t x, cudaStream_t s) { return cudaGraphUpload(x, per_thread(s)); }
ORR_EXPORT cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t x, cudaStream_t s) { return cudaGraphLaunch(x, per_thread(s)); }
