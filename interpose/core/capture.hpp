/* Stream capture and CUDA graphs (capture.cpp): what cudart/graph.cpp and the stream and event
 * calls share. docs/simulation.md ("CUDA graphs") says what is modelled and what is not.
 *
 * A capture records the operations enqueued on its streams as the nodes of a graph instead of
 * running them; an event recorded in a captured stream stands for that stream's last nodes, and
 * a stream that waits for such an event joins the capture (a fork). A graph launch enqueues every
 * node again, on one stream of the executable graph per captured stream (a branch), so that the
 * nodes of different branches overlap as on the GPU and each node waits for the nodes it
 * depended on in the capture. */
#ifndef ORRERY_CAPTURE_HPP
#define ORRERY_CAPTURE_HPP

#include "core/runtime.hpp"

#pragma GCC visibility push(default)
namespace orrery {

// cudaStreamCaptureMode (driver_types.h)
enum CaptureMode { kCaptureGlobal = 0, kCaptureThreadLocal = 1, kCaptureRelaxed = 2 };

struct GraphNode {
  Op op{Op::Wait};             // the operation as enqueued (its host-side cost paid at the capture)
  std::vector<uint32_t> deps;  // the nodes it waits for, all earlier in `nodes` (once instantiated)
  int branch = 0;              // the captured stream it came from (0: where the capture began)
  int type = -1;               // a node made one by one: its cudaGraphNodeType (-1: captured)
  cudaKernelNodeParams kernel{};  // a kernel node made one by one: its parameters as given
};

struct Graph {
  Rank* rank = nullptr;
  int device = 0;                // the device of the stream the capture began on
  std::vector<GraphNode> nodes;  // in the order they were captured (a topological order)
  std::vector<int> priorities;   // per branch: the priority of the stream captured into it (or of
                                 // the graph's stream, for a graph launched into the capture)
  // Made node by node (cudaGraphAdd*Node): its nodes are in the order they were added, their
  // dependencies anywhere, and its branches are found when it is instantiated (graph.cpp).
  bool node_by_node = false;
};

struct Capture {
  Rank* rank = nullptr;
  unsigned long long id = 0;     // unique over the process (cudaStreamGetCaptureInfo's)
  int mode = kCaptureGlobal;
  bool active = true;            // until cudaStreamEndCapture (kept after it: events point to it)
  bool invalidated = false;      // an operation that cannot be captured ended it in error
  std::vector<Stream*> streams;  // the streams captured, streams[0] the origin (each has its branch)
  Graph graph;
};

struct GraphExec {
  Rank* rank = nullptr;
  Graph graph;
  bool node_priority = false;    // cudaGraphInstantiateFlagUseNodePriority
  std::map<std::pair<int, int>, Stream*> streams;  // (branch, priority) -> the stream it runs on
  Stream* last = nullptr;        // the previous launch's stream and the operation that ends it
  uint64_t last_seq = 0;
  std::vector<uint32_t> index;   // a graph made node by node: each of its nodes' place in `graph`
};

cudaError_t capture_begin(Stream* s, int mode);
// Ends the capture begun on `s`: its graph (new), or the error CUDA returns (then *out is nullptr).
cudaError_t capture_end(Stream* s, Graph** out);
// enqueue's path for a captured stream: `op` becomes the stream's next node.
cudaError_t capture_node(Stream* s, Op op);
// cudaEventRecord on a captured stream, cudaStreamWaitEvent with a captured event or on a captured
// stream (the fork and join of branches).
void capture_record(Event* e, Stream* s);
cudaError_t capture_wait(Stream* s, Event* e);
// Ends a capture in error: later operations and cudaStreamEndCapture report it.
void capture_invalidate(Capture* c);
// Work enqueued on the legacy default stream while a blocking stream of its device is captured:
// CUDA's cudaErrorStreamCaptureImplicit (the capture is invalidated), else cudaSuccess.
cudaError_t capture_implicit(Stream* legacy);
// A capture of the rank on `device` (any device: -1) still going on, or nullptr.
Capture* active_capture(const Rank& r, int device = -1);
// Whether the rank's "potentially unsafe" calls (cudaMalloc) are prohibited now: it has a
// capture begun in a mode other than relaxed, and its own mode is not relaxed. Those captures are
// then invalidated, as CUDA does.
bool refuse_unsafe(const Rank& r);
int& thread_capture_mode(const Rank& r);  // cudaThreadExchangeStreamCaptureMode's, per rank
// The capture the legacy stream `legacy` would join implicitly: one of a blocking stream of its
// device (cudaErrorStreamCaptureImplicit for the call), or nullptr.
Capture* implicit_capture(Stream* legacy);

/* The operations the runtime's calls enqueue, built without enqueueing them (a graph's nodes made
 * node by node hold them): CUDA's error where the call's arguments are bad. */
cudaError_t kernel_op(Rank& r, const char* fn, const void* stub, dim3 grid, dim3 block, size_t shmem, Op& op);
cudaError_t copy_op(Rank& r, void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                    int kind, Op& op, int dst_device = -1, int src_device = -1);
cudaError_t memset_op(Rank& r, void* p, size_t bytes, Op& op);

cudaError_t graph_launch(GraphExec& x, Stream* s);
void graph_exec_destroy(GraphExec& x);

}  // namespace orrery
#pragma GCC visibility pop

#endif
