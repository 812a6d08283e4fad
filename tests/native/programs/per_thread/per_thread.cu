// Built with nvcc's --default-stream per-thread (tests/native/test_per_thread.py): stream 0 of
// this file's calls is the per-thread default stream, which its CUDA calls reach through their
// _ptsz and _ptds entry points. One mode per run (argv[1]); prints "name value" lines (seconds).
//   beside-blocking  busy on a blocking stream, then brief on stream 0: brief does not wait
//   with-legacy      busy on stream 0, then brief on the legacy stream: brief waits for it
//   h2d BYTES        a synchronous H2D copy (cudaMemcpy_ptds) of BYTES from pinned memory
//   graph            busy captured on stream 0 (the legacy stream could not be), launched twice
#include "../check.h"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

__global__ void busy(float* x) {}  // costs come from the test's cost file
__global__ void brief(float* x) {}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const char* mode = argc > 1 ? argv[1] : "";
  const size_t n = argc > 2 ? strtoull(argv[2], nullptr, 10) : 4;
  float *d, *h;
  CHECK(cudaMalloc(&d, n));
  CHECK(cudaMallocHost(&h, n));
  cudaStream_t blocking;
  CHECK(cudaStreamCreate(&blocking));
  CHECK(cudaDeviceSynchronize());
  const double t0 = MPI_Wtime();
  if (!strcmp(mode, "beside-blocking")) {
    busy<<<1, 1, 0, blocking>>>(d);
    brief<<<1, 1>>>(d);
    CHECK(cudaStreamSynchronize(0));
    printf("brief_done %.17g\n", MPI_Wtime() - t0);
    CHECK(cudaDeviceSynchronize());
    printf("all_done %.17g\n", MPI_Wtime() - t0);
  } else if (!strcmp(mode, "with-legacy")) {
    busy<<<1, 1>>>(d);
    brief<<<1, 1, 0, cudaStreamLegacy>>>(d);
    CHECK(cudaStreamSynchronize(cudaStreamLegacy));
    printf("elapsed %.17g\n", MPI_Wtime() - t0);
  } else if (!strcmp(mode, "h2d")) {
    CHECK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
    printf("elapsed %.17g\n", MPI_Wtime() - t0);
  } else if (!strcmp(mode, "graph")) {
    cudaGraph_t g;
    cudaGraphExec_t x;
    CHECK(cudaStreamBeginCapture(0, cudaStreamCaptureModeGlobal));
    busy<<<1, 1>>>(d);
    CHECK(cudaStreamEndCapture(0, &g));
    CHECK(cudaGraphInstantiate(&x, g, 0));
    const double t1 = MPI_Wtime();
    CHECK(cudaGraphLaunch(x, 0));
    CHECK(cudaGraphLaunch(x, 0));
    CHECK(cudaStreamSynchronize(0));
    printf("elapsed %.17g\n", MPI_Wtime() - t1);
  } else {
    fprintf(stderr, "per_thread: unknown mode '%s'\n", mode);
    return 2;
  }
  MPI_Finalize();
  return 0;
}
