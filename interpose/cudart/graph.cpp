/* CUDA graphs: made by stream capture or node by node (cudaGraphAdd*Node), instantiated, launched
 * (core/capture.hpp has the mechanism). A node made one by one holds the operation the runtime's
 * call would enqueue (a kernel node a launch's, a memcpy node a copy's, ...), checked as that call
 * checks it; adding it costs no simulated time, and each launch of the graph costs one launch
 * overhead, as a captured graph's does. Its branches (the streams its nodes run on at a launch)
 * are found when it is instantiated: each node continues the branch of its first dependency that
 * no other node continued yet, so that nodes without a path between them overlap as on the GPU.
 * Graph updates other than a kernel node's parameters, event, allocation and conditional nodes
 * stop the run naming the call, as every call without a row does. */
#include "core/capture.hpp"
#include "core/trace.hpp"
#include "cudart/cuda_api.h"

#include <algorithm>
#include <memory>
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
/* A node's handle: where it stands in its graph. A child graph's node stands for every node of the
 * child, copied into the graph between two empty nodes: dependencies on it are on `last`, its
 * own on `first`. Handles live as long as their graph. */
struct NodeRef {
  Graph* graph;
  uint32_t first, last;
  int type;  // cudaGraphNodeType
};
std::map<Graph*, std::vector<std::unique_ptr<NodeRef>>>& node_refs() {
  static std::map<Graph*, std::vector<std::unique_ptr<NodeRef>>> refs;
  return refs;
}
std::set<const NodeRef*>& live_refs() {
  static std::set<const NodeRef*> live;
  return live;
}
cudaGraphNode_t new_ref(Graph* g, uint32_t first, uint32_t last, int type) {
  auto& refs = node_refs()[g];
  refs.push_back(std::make_unique<NodeRef>(NodeRef{g, first, last, type}));
  live_refs().insert(refs.back().get());
  return reinterpret_cast<cudaGraphNode_t>(refs.back().get());
}
NodeRef* ref_of(cudaGraphNode_t handle) {
  auto* ref = reinterpret_cast<NodeRef*>(handle);
  return live_refs().count(ref) ? ref : nullptr;
}
void forget_refs(Graph* g) {
  auto it = node_refs().find(g);
  if (it == node_refs().end())
    return;
  for (auto& ref : it->second)
    live_refs().erase(ref.get());
  node_refs().erase(it);
}

// The type of a captured node, from its operation.
int type_of(const GraphNode& n) {
  if (n.type >= 0)
    return n.type;
  switch (n.op.kind) {
    case Op::Kernel: return cudaGraphNodeTypeKernel;
    case Op::Copy: return cudaGraphNodeTypeMemcpy;
    case Op::Memset: return cudaGraphNodeTypeMemset;
    case Op::HostFn: return cudaGraphNodeTypeHost;
    case Op::Record: return cudaGraphNodeTypeEventRecord;
    default: return cudaGraphNodeTypeEmpty;
  }
}

// A captured graph's nodes get their handles when first asked for (a node by node one's has them).
void ensure_refs(Graph* g) {
  if (g->node_by_node || node_refs()[g].size() == g->nodes.size())
    return;
  forget_refs(g);
  for (uint32_t i = 0; i < g->nodes.size(); i++)
    new_ref(g, i, i, type_of(g->nodes[i]));
}

GraphExec* exec_of(cudaGraphExec_t handle) {
  auto* x = reinterpret_cast<GraphExec*>(handle);
  return live_execs().count(x) ? x : nullptr;
}

// cudaGraphInstantiateFlags (driver_types.h)
constexpr unsigned long long kAutoFreeOnLaunch = 1, kUpload = 2, kDeviceLaunch = 4, kUseNodePriority = 8;

/* A graph made node by node as an executable graph holds it: its nodes in an order where every node
 * comes after those it depends on (`index`: each node's place), each on a branch (above); false
 * where its dependencies make a cycle. */
bool order_nodes(const Graph& g, Graph& out, std::vector<uint32_t>& index) {
  const size_t n = g.nodes.size();
  std::vector<std::vector<uint32_t>> successors(n);
  std::vector<size_t> waiting(n);
  for (uint32_t i = 0; i < n; i++) {
    waiting[i] = g.nodes[i].deps.size();
    for (uint32_t d : g.nodes[i].deps)
      successors[d].push_back(i);
  }
  std::set<uint32_t> ready;  // the lowest first: the order they were added, where it allows
  for (uint32_t i = 0; i < n; i++)
    if (!waiting[i])
      ready.insert(i);
  std::vector<uint32_t> order;
  while (!ready.empty()) {
    uint32_t i = *ready.begin();
    ready.erase(ready.begin());
    order.push_back(i);
    for (uint32_t s : successors[i])
      if (--waiting[s] == 0)
        ready.insert(s);
  }
  if (order.size() != n)
    return false;
  index.assign(n, 0);
  for (uint32_t k = 0; k < n; k++)
    index[order[k]] = k;
  out.nodes.clear();
  std::vector<int> tail;  // per branch: the last node on it
  for (uint32_t k = 0; k < n; k++) {
    GraphNode node = g.nodes[order[k]];
    for (uint32_t& d : node.deps)
      d = index[d];
    std::sort(node.deps.begin(), node.deps.end());
    node.branch = -1;
    for (uint32_t d : node.deps)
      if (tail[out.nodes[d].branch] == (int)d) {  // d's branch ends at d: continue it
        node.branch = out.nodes[d].branch;
        break;
      }
    if (node.branch < 0) {
      node.branch = (int)tail.size();
      tail.push_back(-1);
    }
    tail[node.branch] = (int)k;
    out.nodes.push_back(std::move(node));
  }
  out.priorities.assign(std::max<size_t>(tail.size(), 1), 0);
  return true;
}

cudaError_t instantiate(const char* fn, cudaGraphExec_t* out, cudaGraph_t handle, unsigned long long flags) {
  Rank& r = rank_self(fn);
  Graph* g = graph_of(handle);
  if (!out || !g || (flags & ~(kAutoFreeOnLaunch | kUpload | kDeviceLaunch | kUseNodePriority)))
    return r.last_error = cudaErrorInvalidValue;
  if (flags & kDeviceLaunch)
    unsupported("cudaGraphInstantiate(cudaGraphInstantiateFlagDeviceLaunch): graphs launched from the device");
  if (g->rank != &r)
    fatal("%s: rank %d instantiated a graph of rank %d", fn, r.id, g->rank->id);
  auto x = std::make_unique<GraphExec>();
  x->rank = &r;
  x->graph = *g;  // an executable graph is a snapshot: the graph may be destroyed or captured again
  if (g->node_by_node && !order_nodes(*g, x->graph, x->index))
    return r.last_error = cudaErrorInvalidValue;  // a cycle
  x->node_priority = flags & kUseNodePriority;
  *out = reinterpret_cast<cudaGraphExec_t>(x.get());
  live_execs().insert(x.release());
  return cudaSuccess;
}

/* ---- graphs made node by node ---- */

Graph* graph_of_rank(Rank& r, const char* fn, cudaGraph_t handle) {
  Graph* g = graph_of(handle);
  if (g && g->rank != &r)
    fatal("%s: rank %d added to a graph of rank %d", fn, r.id, g->rank->id);
  return g;
}

/* Adds `node` to graph `handle` after the nodes `deps` (distinct nodes of that graph), its handle
 * in *out: CUDA's error for bad arguments (the rank's last error too). */
cudaError_t add_node(Rank& r, const char* fn, cudaGraphNode_t* out, cudaGraph_t handle, const cudaGraphNode_t* deps,
                     size_t count, GraphNode node) {
  Graph* g = graph_of_rank(r, fn, handle);
  if (!out || !g || (count && !deps))
    return r.last_error = cudaErrorInvalidValue;
  ensure_refs(g);
  for (size_t i = 0; i < count; i++) {
    NodeRef* d = ref_of(deps[i]);
    if (!d || d->graph != g)
      return r.last_error = cudaErrorInvalidValue;
    if (std::find(node.deps.begin(), node.deps.end(), d->last) != node.deps.end())
      return r.last_error = cudaErrorInvalidValue;  // named twice
    node.deps.push_back(d->last);
  }
  g->node_by_node = true;
  g->nodes.push_back(std::move(node));
  uint32_t at = (uint32_t)g->nodes.size() - 1;
  *out = new_ref(g, at, at, g->nodes.back().type);
  return cudaSuccess;
}

// A kernel or memset node runs on the graph's device: one made while another device is current
// (a graph spanning devices) is not simulated.
void check_device(Rank& r, const char* fn, cudaGraph_t handle) {
  Graph* g = graph_of(handle);
  if (g && g->device != r.device)
    fatal("%s: a node on device %d of a graph made on device %d (a graph spanning devices), which Orrery does "
          "not simulate",
          fn, r.device, g->device);
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
  if (nodes) {
    ensure_refs(g);
    const auto& refs = node_refs()[g];
    size_t k = 0;
    for (size_t i = 0; i < refs.size() && k < *count; i++)
      nodes[k++] = reinterpret_cast<cudaGraphNode_t>(refs[i].get());
    for (size_t i = k; i < *count; i++)
      nodes[i] = nullptr;
    *count = k;
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
  forget_refs(g);
  delete g;
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaGraphCreate(cudaGraph_t* out, unsigned int flags) {
  Rank& r = rank_self("cudaGraphCreate");
  if (!out || flags)
    return r.last_error = cudaErrorInvalidValue;
  auto* g = new Graph;
  g->rank = &r;
  g->device = r.device;
  g->node_by_node = true;
  live_graphs().insert(g);
  *out = reinterpret_cast<cudaGraph_t>(g);
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaGraphAddKernelNode(cudaGraphNode_t* out, cudaGraph_t graph, const cudaGraphNode_t* deps,
                                              size_t count, const cudaKernelNodeParams* params) {
  const char* fn = "cudaGraphAddKernelNode";
  Rank& r = rank_self(fn);
  if (!params || !params->func)
    return r.last_error = cudaErrorInvalidValue;
  check_device(r, fn, graph);
  GraphNode node;
  if (cudaError_t e = kernel_op(r, fn, params->func, params->gridDim, params->blockDim, params->sharedMemBytes, node.op))
    return r.last_error = e;
  node.type = cudaGraphNodeTypeKernel;
  node.kernel = *params;
  return add_node(r, fn, out, graph, deps, count, std::move(node));
}

static cudaError_t add_copy(const char* fn, cudaGraphNode_t* out, cudaGraph_t graph, const cudaGraphNode_t* deps,
                            size_t count, void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                            size_t height, int kind) {
  Rank& r = rank_self(fn);
  GraphNode node;
  if (cudaError_t e = copy_op(r, dst, dpitch, src, spitch, width, height, kind, node.op))
    return r.last_error = e;
  node.type = cudaGraphNodeTypeMemcpy;
  return add_node(r, fn, out, graph, deps, count, std::move(node));
}

/* A copy between linear memories: 1D (height 1) or 2D (rows `pitch` apart); CUDA arrays and copies
 * of several 2D slices (depth above 1) stop the run naming the call. */
ORR_EXPORT cudaError_t cudaGraphAddMemcpyNode(cudaGraphNode_t* out, cudaGraph_t graph, const cudaGraphNode_t* deps,
                                              size_t count, const cudaMemcpy3DParms* p) {
  const char* fn = "cudaGraphAddMemcpyNode";
  if (!p)
    return rank_self(fn).last_error = cudaErrorInvalidValue;
  if (p->srcArray || p->dstArray)
    unsupported("cudaGraphAddMemcpyNode of a CUDA array");
  if (p->extent.depth > 1 || p->srcPos.z || p->dstPos.z)
    unsupported("cudaGraphAddMemcpyNode of several 2D slices (a 3D copy)");
  char* dst = (char*)p->dstPtr.ptr + p->dstPos.y * p->dstPtr.pitch + p->dstPos.x;
  const char* src = (const char*)p->srcPtr.ptr + p->srcPos.y * p->srcPtr.pitch + p->srcPos.x;
  size_t height = p->extent.depth ? p->extent.height : 0;
  return add_copy(fn, out, graph, deps, count, dst, p->dstPtr.pitch, src, p->srcPtr.pitch, p->extent.width, height,
                  p->kind);
}

ORR_EXPORT cudaError_t cudaGraphAddMemcpyNode1D(cudaGraphNode_t* out, cudaGraph_t graph, const cudaGraphNode_t* deps,
                                                size_t count, void* dst, const void* src, size_t bytes, int kind) {
  return add_copy("cudaGraphAddMemcpyNode1D", out, graph, deps, count, dst, bytes, src, bytes, bytes, 1, kind);
}

/* Rows of elements of 1, 2 or 4 bytes, `pitch` apart: the device's memset time for their bytes.
 * Device memory holds nothing anyone reads (skeleton mode); into managed memory, which the host's
 * code reads, the node writes nothing, as a captured memset does not. */
ORR_EXPORT cudaError_t cudaGraphAddMemsetNode(cudaGraphNode_t* out, cudaGraph_t graph, const cudaGraphNode_t* deps,
                                              size_t count, const cudaMemsetParams* p) {
  const char* fn = "cudaGraphAddMemsetNode";
  Rank& r = rank_self(fn);
  if (!p || (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4) || !p->width || !p->height)
    return r.last_error = cudaErrorInvalidValue;
  const size_t row = p->width * p->elementSize;
  if (p->height > 1 && p->pitch < row)
    return r.last_error = cudaErrorInvalidValue;
  check_device(r, fn, graph);
  GraphNode node;
  const size_t extent = (p->height - 1) * p->pitch + row;  // the bytes the rows span
  if (cudaError_t e = memset_op(r, p->dst, extent, node.op))
    return r.last_error = e;
  node.op.seconds *= (double)(row * p->height) / (double)extent;  // the rows' bytes, not the gaps'
  node.op.bytes = row * p->height;
  node.type = cudaGraphNodeTypeMemset;
  return add_node(r, fn, out, graph, deps, count, std::move(node));
}

ORR_EXPORT cudaError_t cudaGraphAddHostNode(cudaGraphNode_t* out, cudaGraph_t graph, const cudaGraphNode_t* deps,
                                            size_t count, const cudaHostNodeParams* p) {
  const char* fn = "cudaGraphAddHostNode";
  Rank& r = rank_self(fn);
  if (!p || !p->fn)
    return r.last_error = cudaErrorInvalidValue;
  GraphNode node;
  node.op = Op{Op::HostFn};
  node.op.fn = p->fn;
  node.op.fn_data = p->userData;
  node.type = cudaGraphNodeTypeHost;
  return add_node(r, fn, out, graph, deps, count, std::move(node));
}

ORR_EXPORT cudaError_t cudaGraphAddEmptyNode(cudaGraphNode_t* out, cudaGraph_t graph, const cudaGraphNode_t* deps,
                                             size_t count) {
  const char* fn = "cudaGraphAddEmptyNode";
  Rank& r = rank_self(fn);
  GraphNode node;
  node.type = cudaGraphNodeTypeEmpty;
  return add_node(r, fn, out, graph, deps, count, std::move(node));
}

/* The child's nodes, copied into the graph between an empty node after `deps` (their start) and
 * one after the child's last nodes (their end): the handle stands for both. */
ORR_EXPORT cudaError_t cudaGraphAddChildGraphNode(cudaGraphNode_t* out, cudaGraph_t graph, const cudaGraphNode_t* deps,
                                                  size_t count, cudaGraph_t child_handle) {
  const char* fn = "cudaGraphAddChildGraphNode";
  Rank& r = rank_self(fn);
  Graph* g = graph_of_rank(r, fn, graph);
  Graph* child = graph_of_rank(r, fn, child_handle);
  if (!out || !g || !child || child == g)
    return r.last_error = cudaErrorInvalidValue;
  if (child->device != g->device)
    fatal("%s: a child graph of device %d in a graph of device %d, which Orrery does not simulate", fn, child->device,
          g->device);
  GraphNode start;
  start.type = cudaGraphNodeTypeEmpty;
  cudaGraphNode_t start_handle;
  if (cudaError_t e = add_node(r, fn, &start_handle, graph, deps, count, std::move(start)))
    return e;
  const uint32_t first = ref_of(start_handle)->first, base = (uint32_t)g->nodes.size();
  std::vector<bool> has_successor(child->nodes.size(), false);
  for (const GraphNode& n : child->nodes)
    for (uint32_t d : n.deps)
      has_successor[d] = true;
  for (const GraphNode& n : child->nodes) {
    GraphNode m = n;
    for (uint32_t& d : m.deps)
      d += base;
    if (m.deps.empty())
      m.deps.push_back(first);
    m.type = type_of(n);
    g->nodes.push_back(std::move(m));
  }
  GraphNode end;
  end.type = cudaGraphNodeTypeEmpty;
  for (uint32_t i = 0; i < child->nodes.size(); i++)
    if (!has_successor[i])
      end.deps.push_back(base + i);
  if (end.deps.empty())
    end.deps.push_back(first);
  g->nodes.push_back(std::move(end));
  *out = new_ref(g, first, (uint32_t)g->nodes.size() - 1, cudaGraphNodeTypeGraph);
  return cudaSuccess;
}

/* Edges from[i] -> to[i]: full dependencies only (edge data of type 0 on the default ports); a
 * programmatic one stops the run naming the call. */
ORR_EXPORT cudaError_t cudaGraphAddDependencies(cudaGraph_t graph, const cudaGraphNode_t* from,
                                                const cudaGraphNode_t* to, const cudaGraphEdgeData* edges,
                                                size_t count) {
  const char* fn = "cudaGraphAddDependencies";
  Rank& r = rank_self(fn);
  Graph* g = graph_of_rank(r, fn, graph);
  if (!g || (count && (!from || !to)))
    return r.last_error = cudaErrorInvalidValue;
  ensure_refs(g);
  for (size_t i = 0; i < count; i++) {
    if (edges && (edges[i].type || edges[i].from_port || edges[i].to_port))
      unsupported("cudaGraphAddDependencies with a programmatic edge (edge data)");
    NodeRef* a = ref_of(from[i]);
    NodeRef* b = ref_of(to[i]);
    if (!a || !b || a->graph != g || b->graph != g || a == b)
      return r.last_error = cudaErrorInvalidValue;
    std::vector<uint32_t>& d = g->nodes[b->first].deps;
    if (std::find(d.begin(), d.end(), a->last) != d.end())
      return r.last_error = cudaErrorInvalidValue;  // already an edge
    d.push_back(a->last);
  }
  g->node_by_node = true;  // (a captured graph's nodes may now depend on later ones)
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, int* type) {
  Rank& r = rank_self("cudaGraphNodeGetType");
  NodeRef* ref = ref_of(node);
  if (!ref || !type)
    return r.last_error = cudaErrorInvalidValue;
  *type = ref->type;
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaGraphKernelNodeGetParams(cudaGraphNode_t node, cudaKernelNodeParams* params) {
  Rank& r = rank_self("cudaGraphKernelNodeGetParams");
  NodeRef* ref = ref_of(node);
  if (!ref || !params || ref->type != cudaGraphNodeTypeKernel)
    return r.last_error = cudaErrorInvalidValue;
  const GraphNode& n = ref->graph->nodes[ref->first];
  if (n.type < 0)  // a captured kernel: its launch's parameters are not kept
    unsupported("cudaGraphKernelNodeGetParams of a captured kernel node");
  *params = n.kernel;
  return cudaSuccess;
}

// A kernel node's new parameters, checked as its launch would be.
static cudaError_t set_kernel(const char* fn, GraphNode& n, const cudaKernelNodeParams* params) {
  Rank& r = rank_self(fn);
  if (!params || !params->func)
    return r.last_error = cudaErrorInvalidValue;
  Op op{Op::Kernel};
  if (cudaError_t e = kernel_op(r, fn, params->func, params->gridDim, params->blockDim, params->sharedMemBytes, op))
    return r.last_error = e;
  n.op = std::move(op);
  n.kernel = *params;
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaGraphKernelNodeSetParams(cudaGraphNode_t node, const cudaKernelNodeParams* params) {
  const char* fn = "cudaGraphKernelNodeSetParams";
  NodeRef* ref = ref_of(node);
  if (!ref || ref->type != cudaGraphNodeTypeKernel)
    return rank_self(fn).last_error = cudaErrorInvalidValue;
  return set_kernel(fn, ref->graph->nodes[ref->first], params);
}

/* The node's kernel in an executable graph made from the node's graph: the graph's later launches
 * run it with these parameters (those already launched keep theirs). */
ORR_EXPORT cudaError_t cudaGraphExecKernelNodeSetParams(cudaGraphExec_t exec, cudaGraphNode_t node,
                                                        const cudaKernelNodeParams* params) {
  const char* fn = "cudaGraphExecKernelNodeSetParams";
  GraphExec* x = exec_of(exec);
  NodeRef* ref = ref_of(node);
  if (!x || !ref || ref->type != cudaGraphNodeTypeKernel || ref->first >= x->graph.nodes.size())
    return rank_self(fn).last_error = cudaErrorInvalidValue;
  uint32_t at = x->index.empty() ? ref->first : x->index[ref->first];
  return set_kernel(fn, x->graph.nodes[at], params);
}

/* An executable graph given the nodes' parameters of another graph of the same shape (as many
 * nodes, of the same types, with the same dependencies: a capture of the same calls with other
 * arguments, the same graph with nodes' parameters set): its later launches run them. Another
 * shape fails with cudaErrorGraphExecUpdateFailure and says which way (topology or node type),
 * as CUDA does; CUDA's finer limits on what a node may change (a copy's memory kinds, a kernel's
 * device) are not checked. */
ORR_EXPORT cudaError_t cudaGraphExecUpdate(cudaGraphExec_t exec, cudaGraph_t graph,
                                           cudaGraphExecUpdateResultInfo* info) {
  const char* fn = "cudaGraphExecUpdate";
  Rank& r = rank_self(fn);
  GraphExec* x = exec_of(exec);
  Graph* g = graph_of_rank(r, fn, graph);
  if (!x || !g || !info)
    return r.last_error = cudaErrorInvalidValue;
  Graph shaped = *g;
  std::vector<uint32_t> index;
  if (g->node_by_node && !order_nodes(*g, shaped, index))
    return r.last_error = cudaErrorInvalidValue;  // a cycle
  *info = cudaGraphExecUpdateResultInfo{0, nullptr, nullptr};
  const std::vector<GraphNode>& now = x->graph.nodes;
  int result = 0;  // cudaGraphExecUpdateSuccess
  if (shaped.nodes.size() != now.size())
    result = 2;  // cudaGraphExecUpdateErrorTopologyChanged
  for (size_t i = 0; !result && i < now.size(); i++) {
    std::vector<uint32_t> a = now[i].deps, b = shaped.nodes[i].deps;
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    if (a != b)
      result = 2;
    else if (type_of(now[i]) != type_of(shaped.nodes[i]))
      result = 3;  // cudaGraphExecUpdateErrorNodeTypeChanged
  }
  if (result) {
    info->result = result;
    return r.last_error = cudaErrorGraphExecUpdateFailure;
  }
  for (size_t i = 0; i < now.size(); i++) {  // the parameters; the branches stay
    x->graph.nodes[i].op = shaped.nodes[i].op;
    x->graph.nodes[i].kernel = shaped.nodes[i].kernel;
  }
  x->index = index;  // (the nodes of `graph` now name this graph's)
  return cudaSuccess;
}

ORR_EXPORT cudaError_t cudaGraphClone(cudaGraph_t* out, cudaGraph_t original) {
  Rank& r = rank_self("cudaGraphClone");
  Graph* g = graph_of(original);
  if (!out || !g)
    return r.last_error = cudaErrorInvalidValue;
  ensure_refs(g);
  auto* copy = new Graph(*g);
  live_graphs().insert(copy);
  for (const auto& ref : node_refs()[g])  // the clone's nodes have handles of their own
    new_ref(copy, ref->first, ref->last, ref->type);
  *out = reinterpret_cast<cudaGraph_t>(copy);
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
