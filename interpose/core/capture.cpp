/* Stream capture and graph launches (core/capture.hpp). The rules are CUDA's (the CUDA
 * Programming Guide, "CUDA Graphs: Creating a Graph Using Stream Capture", and the runtime's
 * cudaStreamBeginCapture and cudaThreadExchangeStreamCaptureMode): what crosses a capture's
 * boundary or waits for captured work returns CUDA's error and invalidates the capture. */
#include "core/capture.hpp"

#include <algorithm>

namespace orrery {

namespace {
std::map<int, int> g_thread_mode;  // by rank id: cudaThreadExchangeStreamCaptureMode's mode

void join(Capture& c, Stream* s, std::vector<uint32_t> tail) {
  s->capture = &c;
  s->branch = (int)c.graph.priorities.size();
  s->capture_tail = std::move(tail);
  c.streams.push_back(s);
  c.graph.priorities.push_back(s->priority);
}

void leave(Capture& c) {
  for (Stream* s : c.streams) {
    s->capture = nullptr;
    s->branch = -1;
    s->capture_tail.clear();
  }
  c.active = false;
}

// Every node that `tail` depends on, itself included.
std::vector<bool> ancestors(const Graph& g, const std::vector<uint32_t>& tail) {
  std::vector<bool> seen(g.nodes.size(), false);
  std::vector<uint32_t> todo = tail;
  while (!todo.empty()) {
    uint32_t n = todo.back();
    todo.pop_back();
    if (seen[n])
      continue;
    seen[n] = true;
    todo.insert(todo.end(), g.nodes[n].deps.begin(), g.nodes[n].deps.end());
  }
  return seen;
}

void merge(std::vector<uint32_t>& into, const std::vector<uint32_t>& more) {
  for (uint32_t n : more)
    if (std::find(into.begin(), into.end(), n) == into.end())
      into.push_back(n);
}

Stream* branch_stream(GraphExec& x, int branch, int priority) {
  Stream*& s = x.streams[{branch, priority}];
  if (!s)  // non-blocking: the legacy stream's ordering reaches the graph through the launch stream
    s = create_stream(*x.rank, cudaStreamNonBlocking, priority, x.graph.device);
  return s;
}
}  // namespace

int& thread_capture_mode(const Rank& r) { return g_thread_mode.try_emplace(r.id, kCaptureGlobal).first->second; }

Capture* active_capture(const Rank& r, int device) {
  for (Stream* s : r.streams)
    if (s->capture && (device < 0 || s->device == device))
      return s->capture;
  return nullptr;
}

bool refuse_unsafe(const Rank& r) {
  if (thread_capture_mode(r) == kCaptureRelaxed)
    return false;
  bool refused = false;
  for (Stream* s : r.streams)
    if (s->capture && s->capture->mode != kCaptureRelaxed) {
      capture_invalidate(s->capture);
      refused = true;
    }
  return refused;
}

Capture* implicit_capture(Stream* legacy) {
  for (Stream* o : legacy->rank->streams)
    if (o->capture && o->device == legacy->device && !(o->flags & cudaStreamNonBlocking))
      return o->capture;
  return nullptr;
}

cudaError_t capture_begin(Stream* s, int mode) {
  if (s->legacy)  // "Capture may not be initiated if stream is cudaStreamLegacy"
    return cudaErrorStreamCaptureUnsupported;
  if (s->capture)
    return cudaErrorIllegalState;
  static unsigned long long next_id = 1;
  auto* c = new Capture;  // never freed: events recorded in it keep pointing to it
  c->id = next_id++;
  c->rank = s->rank;
  c->mode = mode;
  c->graph.rank = s->rank;
  c->graph.device = s->device;
  join(*c, s, {});
  return cudaSuccess;
}

void capture_invalidate(Capture* c) { c->invalidated = true; }

cudaError_t capture_end(Stream* s, Graph** out) {
  *out = nullptr;
  Capture* c = s->capture;
  if (!c)
    return cudaErrorIllegalState;
  if (c->streams[0] != s)
    return cudaErrorStreamCaptureUnmatched;
  if (c->invalidated) {
    leave(*c);
    return cudaErrorStreamCaptureInvalidated;
  }
  // Every stream that joined the capture must have joined the origin again: its last nodes are
  // among those the origin's next operation would depend on.
  std::vector<bool> joined = ancestors(c->graph, s->capture_tail);
  for (Stream* t : c->streams)
    for (uint32_t n : t->capture_tail)
      if (!joined[n]) {
        leave(*c);
        return cudaErrorStreamCaptureUnjoined;
      }
  leave(*c);
  *out = new Graph(std::move(c->graph));
  return cudaSuccess;
}

cudaError_t capture_node(Stream* s, Op op) {
  Capture& c = *s->capture;
  if (c.invalidated)
    return cudaErrorStreamCaptureInvalidated;
  if (!op.deps.empty()) {  // an implicit dependency on work outside the capture
    capture_invalidate(&c);
    return cudaErrorStreamCaptureIsolation;
  }
  GraphNode n;
  n.op = std::move(op);
  n.deps = s->capture_tail;
  n.branch = s->branch;
  c.graph.nodes.push_back(std::move(n));
  s->capture_tail = {(uint32_t)(c.graph.nodes.size() - 1)};
  return cudaSuccess;
}

void capture_record(Event* e, Stream* s) {
  e->stream = nullptr;
  e->seq = 0;
  e->time = -1;
  e->capture = s->capture;
  e->nodes = s->capture_tail;
}

cudaError_t capture_wait(Stream* s, Event* e) {
  Capture* c = e->capture;
  if (!c) {  // an event of work outside the capture: a dependency across its boundary
    if (!e->stream)
      return cudaSuccess;  // never recorded: nothing to wait for, as in CUDA
    capture_invalidate(s->capture);
    return cudaErrorStreamCaptureIsolation;
  }
  if (s->legacy) {  // the legacy stream cannot be captured
    capture_invalidate(c);
    return cudaErrorStreamCaptureImplicit;
  }
  if (!c->active)  // recorded in a capture that has ended
    return cudaErrorCapturedEvent;
  if (c->invalidated)
    return cudaErrorStreamCaptureInvalidated;
  if (s->capture == c) {
    merge(s->capture_tail, e->nodes);
    return cudaSuccess;
  }
  if (s->capture) {  // two captures would become one graph
    capture_invalidate(s->capture);
    capture_invalidate(c);
    return cudaErrorStreamCaptureMerge;
  }
  join(*c, s, e->nodes);  // a fork: the stream's later operations are captured too
  return cudaSuccess;
}

cudaError_t capture_implicit(Stream* legacy) {
  Capture* c = implicit_capture(legacy);
  if (!c)
    return cudaSuccess;
  capture_invalidate(c);
  return cudaErrorStreamCaptureImplicit;
}

cudaError_t graph_launch(GraphExec& x, Stream* s) {
  Rank& r = *x.rank;
  const std::vector<GraphNode>& nodes = x.graph.nodes;
  if (s->capture) {  // launched into a capture: the graph's nodes become the capture's
    Capture& c = *s->capture;
    if (c.invalidated)
      return cudaErrorStreamCaptureInvalidated;
    uint32_t base = (uint32_t)c.graph.nodes.size();
    // The graph's first branch continues the stream's; its others become branches of the capture.
    std::vector<int> branch(x.graph.priorities.size(), s->branch);
    for (size_t b = 1; b < branch.size(); b++) {
      branch[b] = (int)c.graph.priorities.size();
      c.graph.priorities.push_back(x.graph.priorities[b]);
    }
    std::vector<bool> has_successor(nodes.size(), false);
    for (const GraphNode& n : nodes) {
      GraphNode m = n;
      for (uint32_t& d : m.deps) {
        has_successor[d] = true;
        d += base;
      }
      if (n.deps.empty())
        m.deps = s->capture_tail;
      m.branch = branch[n.branch];
      c.graph.nodes.push_back(std::move(m));
    }
    if (!nodes.empty()) {
      s->capture_tail.clear();
      for (uint32_t i = 0; i < nodes.size(); i++)
        if (!has_successor[i])
          s->capture_tail.push_back(base + i);
    }
    return cudaSuccess;
  }
  // Where the launch stands in its stream: the graph's first nodes wait for it, and for the end of
  // the previous launch of the same graph (CUDA orders a graph's launches).
  if (cudaError_t e = enqueue(s, Op{Op::Wait}))
    return e;
  Dependency start{s, s->enqueued};
  std::vector<Dependency> at(nodes.size());
  std::vector<Stream*> used;
  for (size_t i = 0; i < nodes.size(); i++) {
    const GraphNode& n = nodes[i];
    int priority = x.node_priority ? x.graph.priorities[n.branch] : s->priority;
    Stream* b = branch_stream(x, n.branch, priority);
    Op op = n.op;
    if (op.relaunch)
      op.relaunch(op);
    if (op.uncosted)
      r.stats.uncosted[op.name].count++;
    if (n.deps.empty()) {
      op.deps.push_back(start);
      if (x.last)
        op.deps.push_back({x.last, x.last_seq});
    }
    for (uint32_t d : n.deps)
      if (at[d].stream != b)  // on its own stream, it follows every earlier node already
        op.deps.push_back(at[d]);
    enqueue(b, std::move(op));  // a non-blocking stream that is not captured: nothing to refuse
    at[i] = {b, b->enqueued};
    if (std::find(used.begin(), used.end(), b) == used.end())
      used.push_back(b);
  }
  // The launch's end in its stream: later work there waits for every node.
  Op end{Op::Wait};
  for (Stream* b : used)
    end.deps.push_back({b, b->enqueued});
  if (cudaError_t e = enqueue(s, std::move(end)))
    return e;
  x.last = s;
  x.last_seq = s->enqueued;
  return cudaSuccess;
}

void graph_exec_destroy(GraphExec& x) {
  for (auto& [key, s] : x.streams) {  // as cudaStreamDestroy: pending work still completes
    s->destroyed = true;
    wake_worker(s);
  }
}

}  // namespace orrery
