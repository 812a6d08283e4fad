// CUDA graphs made by stream capture, for tests/native/test_graphs.py. One mode per run (argv[1]);
// it prints "name value" lines (times in seconds, from the launches to the synchronisation).
//   replay N BYTES  a capture of busy, a memset and a pinned H2D copy of BYTES on one stream,
//                   launched N times
//   fork BYTES      a capture that forks a second stream: busy on one branch, an H2D copy of BYTES
//                   on the other, joined again; launched once
//   nested          a graph of busy launched into the capture of another graph, then brief
//   empty           a capture of nothing, launched
//   uncosted N      a capture of a kernel without a cost, launched N times
//   errors          what each prohibited operation returns: one line per case with CUDA's code
#include "check.h"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

__global__ void busy(float* x) {}  // costs come from the test's cost file
__global__ void brief(float* x) {}
__global__ void plain(float* x) {}  // no cost: the default time

static cudaGraphExec_t instantiate(cudaGraph_t g) {
  cudaGraphExec_t x;
  CHECK(cudaGraphInstantiate(&x, g, 0));
  return x;
}

static size_t node_count(cudaGraph_t g) {
  size_t n = 0;
  CHECK(cudaGraphGetNodes(g, nullptr, &n));
  return n;
}

// The errors mode: each case on fresh streams, its code printed as CUDA returned it.
static void errors(float* d, float* h) {
  cudaStream_t s1, s2;
  CHECK(cudaStreamCreate(&s1));
  CHECK(cudaStreamCreate(&s2));
  cudaEvent_t e;
  CHECK(cudaEventCreate(&e));
  cudaGraph_t g;
  cudaStreamCaptureStatus status;

  CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
  CHECK(cudaStreamIsCapturing(s1, &status));
  printf("status_capturing %d\n", (int)status);
  printf("sync_in_capture %d\n", cudaStreamSynchronize(s1));
  CHECK(cudaStreamIsCapturing(s1, &status));
  printf("status_invalidated %d\n", (int)status);
  printf("end_invalidated %d\n", cudaStreamEndCapture(s1, &g));
  printf("graph_after_invalidated %d\n", g == nullptr);
  CHECK(cudaStreamIsCapturing(s1, &status));
  printf("status_after_end %d\n", (int)status);

  printf("end_not_capturing %d\n", cudaStreamEndCapture(s1, &g));
  printf("begin_legacy %d\n", cudaStreamBeginCapture(cudaStreamLegacy, cudaStreamCaptureModeGlobal));

  CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));  // a fork left unjoined
  CHECK(cudaEventRecord(e, s1));
  CHECK(cudaStreamWaitEvent(s2, e, 0));
  busy<<<1, 1, 0, s2>>>(d);
  printf("end_unjoined %d\n", cudaStreamEndCapture(s1, &g));
  CHECK(cudaStreamIsCapturing(s2, &status));
  printf("status_forked_after_end %d\n", (int)status);

  busy<<<1, 1, 0, s2>>>(d);  // an event of work outside the capture
  CHECK(cudaEventRecord(e, s2));
  CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
  printf("wait_external %d\n", cudaStreamWaitEvent(s1, e, 0));
  printf("end_external %d\n", cudaStreamEndCapture(s1, &g));
  CHECK(cudaDeviceSynchronize());

  CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));  // the legacy stream, implicitly
  brief<<<1, 1>>>(d);
  printf("legacy_launch %d\n", cudaGetLastError());
  printf("end_implicit %d\n", cudaStreamEndCapture(s1, &g));

  CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));  // a captured event queried
  CHECK(cudaEventRecord(e, s1));
  printf("query_captured_event %d\n", cudaEventQuery(e));
  printf("end_after_query %d\n", cudaStreamEndCapture(s1, &g));
  printf("nodes_after_query %zu\n", node_count(g));
  printf("sync_event_after_end %d\n", cudaEventSynchronize(e));
  CHECK(cudaGraphDestroy(g));

  CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));  // copies the host waits for
  printf("sync_copy_in_capture %d\n", cudaMemcpy(d, h, 4, cudaMemcpyHostToDevice));  // legacy stream
  printf("end_after_sync_copy %d\n", cudaStreamEndCapture(s1, &g));
  char pageable[4];
  CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
  printf("pageable_copy_in_capture %d\n", cudaMemcpyAsync(d, pageable, 4, cudaMemcpyHostToDevice, s1));
  printf("end_after_pageable_copy %d\n", cudaStreamEndCapture(s1, &g));

  float* p = nullptr;
  CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));  // a potentially unsafe call
  printf("malloc_global %d\n", cudaMalloc(&p, 256));
  printf("end_after_malloc %d\n", cudaStreamEndCapture(s1, &g));
  CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeRelaxed));
  printf("malloc_relaxed %d\n", cudaMalloc(&p, 256));
  printf("end_relaxed %d\n", cudaStreamEndCapture(s1, &g));
  CHECK(cudaGraphDestroy(g));
  CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));  // the thread's mode relaxed
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
  printf("exchanged_mode %d\n", (int)mode);
  printf("malloc_thread_relaxed %d\n", cudaMalloc(&p, 256));
  CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
  printf("end_thread_relaxed %d\n", cudaStreamEndCapture(s1, &g));
  CHECK(cudaGraphDestroy(g));

  cudaStream_t s3;  // two captures joined by an event: a merge
  CHECK(cudaStreamCreate(&s3));
  CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
  CHECK(cudaStreamBeginCapture(s3, cudaStreamCaptureModeGlobal));
  CHECK(cudaEventRecord(e, s1));
  printf("wait_other_capture %d\n", cudaStreamWaitEvent(s3, e, 0));
  printf("end_merged %d\n", cudaStreamEndCapture(s1, &g));
  printf("end_merged_other %d\n", cudaStreamEndCapture(s3, &g));

  CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));  // ended from a forked stream
  CHECK(cudaEventRecord(e, s1));
  CHECK(cudaStreamWaitEvent(s2, e, 0));
  printf("end_from_fork %d\n", cudaStreamEndCapture(s2, &g));
  brief<<<1, 1, 0, s2>>>(d);
  CHECK(cudaEventRecord(e, s2));
  CHECK(cudaStreamWaitEvent(s1, e, 0));
  busy<<<1, 1, 0, s1>>>(d);
  printf("end_joined %d\n", cudaStreamEndCapture(s1, &g));
  printf("nodes_joined %zu\n", node_count(g));
  printf("device_sync_after %d\n", cudaDeviceSynchronize());

  CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));  // what a capture says of itself
  busy<<<1, 1, 0, s1>>>(d);
  CHECK(cudaEventRecord(e, s1));
  CHECK(cudaStreamWaitEvent(s2, e, 0));
  brief<<<1, 1, 0, s2>>>(d);
  brief<<<1, 1, 0, s2>>>(d);
  unsigned long long id1 = 0, id2 = 0;
  cudaGraph_t capturing = nullptr;
  const cudaGraphNode_t* deps = nullptr;
  const cudaGraphEdgeData* edges = nullptr;
  size_t ndeps = 99;
  CHECK(cudaStreamGetCaptureInfo(s1, &status, &id1, &capturing, &deps, &edges, &ndeps));
  printf("info_status %d\n", (int)status);
  printf("info_deps %zu\n", ndeps);
  printf("info_edge_zero %d\n", edges[0].from_port == 0 && edges[0].to_port == 0 && edges[0].type == 0);
  printf("info_graph_nodes %zu\n", node_count(capturing));
  CHECK(cudaStreamGetCaptureInfo(s2, &status, &id2, nullptr, nullptr, nullptr, &ndeps));
  printf("info_same_id %d\n", id1 != 0 && id1 == id2);
  printf("info_legacy %d\n", cudaStreamGetCaptureInfo(cudaStreamLegacy, &status, nullptr, nullptr, nullptr, nullptr, nullptr));
  printf("capturing_legacy %d\n", cudaStreamIsCapturing(cudaStreamLegacy, &status));
  CHECK(cudaEventRecord(e, s2));
  CHECK(cudaStreamWaitEvent(s1, e, 0));
  CHECK(cudaStreamGetCaptureInfo(s1, &status, nullptr, nullptr, &deps, nullptr, &ndeps));
  printf("info_deps_joined %zu\n", ndeps);  // busy and the second brief
  printf("end_after_info %d\n", cudaStreamEndCapture(s1, &g));  // the queries invalidated nothing
  CHECK(cudaStreamGetCaptureInfo(s1, &status, &id2, nullptr, nullptr, nullptr, nullptr));
  printf("info_status_after %d\n", (int)status);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const char* mode = argc > 1 ? argv[1] : "";
  const size_t bytes = argc > 3 ? strtoull(argv[3], nullptr, 10) : argc > 2 ? strtoull(argv[2], nullptr, 10) : 4;
  float *d, *h;
  CHECK(cudaMalloc(&d, bytes));
  CHECK(cudaMallocHost(&h, bytes));
  cudaStream_t s, t;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking));
  cudaEvent_t forked, joined;
  CHECK(cudaEventCreateWithFlags(&forked, cudaEventDisableTiming));
  CHECK(cudaEventCreateWithFlags(&joined, cudaEventDisableTiming));
  cudaGraph_t g;
  cudaGraphExec_t x;
  int launches = 1;

  if (!strcmp(mode, "replay")) {
    launches = atoi(argv[2]);
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    busy<<<1, 1, 0, s>>>(d);
    CHECK(cudaMemsetAsync(d, 0, bytes, s));
    CHECK(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, s));
    CHECK(cudaStreamEndCapture(s, &g));
  } else if (!strcmp(mode, "fork")) {
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CHECK(cudaEventRecord(forked, s));
    CHECK(cudaStreamWaitEvent(t, forked, 0));
    busy<<<1, 1, 0, s>>>(d);
    CHECK(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, t));
    CHECK(cudaEventRecord(joined, t));
    CHECK(cudaStreamWaitEvent(s, joined, 0));
    CHECK(cudaStreamEndCapture(s, &g));
  } else if (!strcmp(mode, "nested")) {
    cudaGraph_t inner;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    busy<<<1, 1, 0, s>>>(d);
    CHECK(cudaStreamEndCapture(s, &inner));
    cudaGraphExec_t inner_exec = instantiate(inner);
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CHECK(cudaGraphLaunch(inner_exec, s));
    brief<<<1, 1, 0, s>>>(d);
    CHECK(cudaStreamEndCapture(s, &g));
  } else if (!strcmp(mode, "empty")) {
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CHECK(cudaStreamEndCapture(s, &g));
  } else if (!strcmp(mode, "uncosted")) {
    launches = atoi(argv[2]);
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    plain<<<1, 1, 0, s>>>(d);
    CHECK(cudaStreamEndCapture(s, &g));
  } else if (!strcmp(mode, "errors")) {
    errors(d, h);
    MPI_Finalize();
    return 0;
  } else {
    fprintf(stderr, "graphs: unknown mode '%s'\n", mode);
    return 2;
  }
  printf("nodes %zu\n", node_count(g));
  x = instantiate(g);
  CHECK(cudaGraphDestroy(g));  // the executable graph does not need it
  CHECK(cudaDeviceSynchronize());
  const double t0 = MPI_Wtime();
  for (int i = 0; i < launches; i++)
    CHECK(cudaGraphLaunch(x, s));
  printf("issued %.17g\n", MPI_Wtime() - t0);
  CHECK(cudaStreamSynchronize(s));
  printf("elapsed %.17g\n", MPI_Wtime() - t0);
  CHECK(cudaGraphExecDestroy(x));
  MPI_Finalize();
  return 0;
}
