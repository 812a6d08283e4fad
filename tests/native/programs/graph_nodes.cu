// CUDA graphs made node by node (tests/native/test_graph_nodes.py). Usage: graph_nodes MODE ...
//   diamond LAUNCHES BYTES  brief, added first with no dependencies, then busy (A), busy (B, after
//                           A) and an H2D copy of BYTES (C, after A, a 3D-parameters memcpy node),
//                           the edges B -> brief and C -> brief added afterwards, and a memset of
//                           BYTES after brief; launched LAUNCHES times between two events
//   update                  one busy kernel node; launched, its kernel set to brief in the
//                           executable graph, launched again: each launch timed on its own
//   child                   a host node (a counter), then a child graph (busy -> brief), then a
//                           1D D2H copy of 1 MiB; launched twice
//   exec_update             a capture of busy, instantiated and launched; a capture of brief put
//                           into it (cudaGraphExecUpdate) and launched; a capture of two kernels
//                           refused (another topology), then one of a memset (another node type)
//   errors                  CUDA's error for each bad node or graph, one line each
//   array                   a memcpy node of a CUDA array (refused by name)
#include "check.h"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

__global__ void busy(float* x) {}  // costs come from the test's cost file
__global__ void brief(float* x) {}

static int counter = 0;
static void count(void*) { counter++; }

static cudaKernelNodeParams kernel(void (*k)(float*), void** args) {
  cudaKernelNodeParams p = {};
  p.func = (void*)k;
  p.gridDim = dim3(1);
  p.blockDim = dim3(1);
  p.kernelParams = args;
  return p;
}

static float timed(cudaGraphExec_t x, int launches, cudaStream_t s) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  CHECK(cudaEventRecord(a, s));
  for (int i = 0; i < launches; i++)
    CHECK(cudaGraphLaunch(x, s));
  CHECK(cudaEventRecord(b, s));
  CHECK(cudaStreamSynchronize(s));
  float ms;
  CHECK(cudaEventElapsedTime(&ms, a, b));
  return ms;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const char* mode = argc > 1 ? argv[1] : "";
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  float* d;
  CHECK(cudaMalloc(&d, 64 << 20));
  void* args[] = {&d};
  cudaGraph_t g;
  CHECK(cudaGraphCreate(&g, 0));
  cudaGraphExec_t x;

  if (!strcmp(mode, "diamond")) {
    int launches = atoi(argv[2]);
    size_t bytes = strtoull(argv[3], nullptr, 10);
    char* h;
    CHECK(cudaMallocHost(&h, bytes));
    cudaGraphNode_t a, b, c, join, set;
    cudaKernelNodeParams kb = kernel(brief, args), kd = kernel(busy, args);
    CHECK(cudaGraphAddKernelNode(&join, g, nullptr, 0, &kb));
    CHECK(cudaGraphAddKernelNode(&a, g, nullptr, 0, &kd));
    CHECK(cudaGraphAddKernelNode(&b, g, &a, 1, &kd));
    cudaMemcpy3DParms p = {};
    p.srcPtr = make_cudaPitchedPtr(h, bytes, bytes, 1);
    p.dstPtr = make_cudaPitchedPtr(d, bytes, bytes, 1);
    p.extent = make_cudaExtent(bytes, 1, 1);
    p.kind = cudaMemcpyHostToDevice;
    CHECK(cudaGraphAddMemcpyNode(&c, g, &a, 1, &p));
    cudaGraphNode_t from[] = {b, c}, to[] = {join, join};
    CHECK(cudaGraphAddDependencies(g, from, to, nullptr, 2));
    cudaMemsetParams m = {};
    m.dst = d;
    m.value = 7;
    m.elementSize = 4;
    m.width = bytes / 4;
    m.height = 1;
    CHECK(cudaGraphAddMemsetNode(&set, g, &join, 1, &m));
    size_t n = 0;
    CHECK(cudaGraphGetNodes(g, nullptr, &n));
    cudaGraphNodeType types[5];
    cudaGraphNode_t nodes[5] = {join, a, b, c, set};
    for (int i = 0; i < 5; i++)
      CHECK(cudaGraphNodeGetType(nodes[i], &types[i]));
    printf("nodes %zu\n", n);
    printf("types %d %d %d %d %d\n", types[0], types[1], types[2], types[3], types[4]);
    CHECK(cudaGraphInstantiate(&x, g, 0));
    printf("elapsed %.9g\n", timed(x, launches, s) * 1e-3);
  } else if (!strcmp(mode, "update")) {
    cudaGraphNode_t k;
    cudaKernelNodeParams kd = kernel(busy, args), kb = kernel(brief, args), got;
    CHECK(cudaGraphAddKernelNode(&k, g, nullptr, 0, &kd));
    CHECK(cudaGraphKernelNodeGetParams(k, &got));
    printf("params_func_is_busy %d grid %u block %u\n", got.func == (void*)busy, got.gridDim.x, got.blockDim.x);
    CHECK(cudaGraphInstantiate(&x, g, 0));
    printf("first %.9g\n", timed(x, 1, s) * 1e-3);
    CHECK(cudaGraphExecKernelNodeSetParams(x, k, &kb));
    printf("updated %.9g\n", timed(x, 1, s) * 1e-3);
    CHECK(cudaGraphKernelNodeSetParams(k, &kb));  // the graph too: a new instance runs brief
    cudaGraphExec_t y;
    CHECK(cudaGraphInstantiate(&y, g, 0));
    printf("reinstantiated %.9g\n", timed(y, 1, s) * 1e-3);
  } else if (!strcmp(mode, "child")) {
    cudaGraph_t child;
    CHECK(cudaGraphCreate(&child, 0));
    cudaGraphNode_t k1, k2, host, sub, copy;
    cudaKernelNodeParams kd = kernel(busy, args), kb = kernel(brief, args);
    CHECK(cudaGraphAddKernelNode(&k1, child, nullptr, 0, &kd));
    CHECK(cudaGraphAddKernelNode(&k2, child, &k1, 1, &kb));
    cudaHostNodeParams hp = {count, nullptr};
    CHECK(cudaGraphAddHostNode(&host, g, nullptr, 0, &hp));
    CHECK(cudaGraphAddChildGraphNode(&sub, g, &host, 1, child));
    char* h;
    CHECK(cudaMallocHost(&h, 1 << 20));
    CHECK(cudaGraphAddMemcpyNode1D(&copy, g, &sub, 1, h, d, 1 << 20, cudaMemcpyDeviceToHost));
    cudaGraphNodeType t;
    CHECK(cudaGraphNodeGetType(sub, &t));
    printf("child_type %d\n", (int)t);
    CHECK(cudaGraphInstantiate(&x, g, 0));
    printf("elapsed %.9g\n", timed(x, 2, s) * 1e-3);
    printf("host_calls %d\n", counter);
  } else if (!strcmp(mode, "exec_update")) {
    auto capture = [&](int kernels, bool memset) {
      cudaGraph_t c;
      CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
      if (memset)
        CHECK(cudaMemsetAsync(d, 0, 4, s));
      for (int i = 0; i < kernels; i++)
        (i == 0 && kernels == 1 && counter++ == 0 ? busy : brief)<<<1, 1, 0, s>>>(d);
      CHECK(cudaStreamEndCapture(s, &c));
      return c;
    };
    CHECK(cudaGraphInstantiate(&x, capture(1, false), 0));
    printf("first %.9g\n", timed(x, 1, s) * 1e-3);
    cudaGraphExecUpdateResultInfo info;
    auto update = [&](const char* name, cudaGraph_t c) {
      cudaError_t e = cudaGraphExecUpdate(x, c, &info);
      printf("%s %d %d\n", name, (int)e, (int)info.result);
    };
    update("update", capture(1, false));
    printf("updated %.9g\n", timed(x, 1, s) * 1e-3);
    update("update_two", capture(2, false));
    update("update_memset", capture(0, true));
    printf("still %.9g\n", timed(x, 1, s) * 1e-3);
  } else if (!strcmp(mode, "errors")) {
    cudaGraphNode_t a, b, other_node;
    cudaKernelNodeParams kd = kernel(busy, args);
    cudaKernelNodeParams big = kd;
    big.blockDim = dim3(2048);
    printf("block_too_big %d\n", (int)cudaGraphAddKernelNode(&a, g, nullptr, 0, &big));
    CHECK(cudaGraphAddKernelNode(&a, g, nullptr, 0, &kd));
    cudaGraph_t other;
    CHECK(cudaGraphCreate(&other, 0));
    CHECK(cudaGraphAddEmptyNode(&other_node, other, nullptr, 0));
    printf("dependency_elsewhere %d\n", (int)cudaGraphAddEmptyNode(&b, g, &other_node, 1));
    cudaGraphNode_t twice[] = {a, a};
    printf("dependency_twice %d\n", (int)cudaGraphAddEmptyNode(&b, g, twice, 2));
    int bogus;
    printf("copy_unknown_device %d\n",
           (int)cudaGraphAddMemcpyNode1D(&b, g, nullptr, 0, &bogus, &bogus, 4, cudaMemcpyDeviceToDevice));
    cudaMemsetParams m = {};
    m.dst = d;
    m.elementSize = 3;
    m.width = 4;
    m.height = 1;
    printf("memset_element_3 %d\n", (int)cudaGraphAddMemsetNode(&b, g, nullptr, 0, &m));
    CHECK(cudaGraphAddEmptyNode(&b, g, &a, 1));
    printf("edge_again %d\n", (int)cudaGraphAddDependencies(g, &a, &b, nullptr, 1));
    printf("cycle_added %d\n", (int)cudaGraphAddDependencies(g, &b, &a, nullptr, 1));
    printf("instantiate_cycle %d\n", (int)cudaGraphInstantiate(&x, g, 0));
  } else if (!strcmp(mode, "array")) {
    cudaGraphNode_t c;
    cudaMemcpy3DParms p = {};
    p.srcArray = (cudaArray_t)d;
    p.dstPtr = make_cudaPitchedPtr(d, 16, 16, 1);
    p.extent = make_cudaExtent(16, 1, 1);
    p.kind = cudaMemcpyDeviceToDevice;
    cudaGraphAddMemcpyNode(&c, g, nullptr, 0, &p);
    printf("not reached\n");
  }
  MPI_Finalize();
  return 0;
}
