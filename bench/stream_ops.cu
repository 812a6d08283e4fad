/* Stream operations and nothing else: each rank launches a kernel and a memset on a stream of its
 * own and waits for them, N times (bench/streams.py). No MPI message after MPI_Init: what the run
 * costs beyond its start-up is the streams' hand-over and the GPU work's activities.
 *
 *     stream_ops N [copy|join]
 *
 * With "copy", the memset is a copy of one float to pinned host memory instead (cudaMemcpyAsync
 * device to host, as the Jacobi example copies its norm). With "join", an event is recorded
 * behind the kernel, a second stream waits for it and runs the second kernel instead of the
 * memset, and the rank waits for that stream (the two streams of an overlapped halo exchange). */
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

__global__ void touch(float* a) { a[threadIdx.x] += 1.0f; }

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int iterations = argc > 1 ? atoi(argv[1]) : 0;
  bool copy = argc > 2 && !strcmp(argv[2], "copy"), join = argc > 2 && !strcmp(argv[2], "join");
  float *a = nullptr, *h = nullptr;
  cudaStream_t s, s2;
  cudaEvent_t e;
  if (cudaMalloc(&a, 1024) != cudaSuccess || cudaMallocHost(&h, sizeof(float)) != cudaSuccess ||
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess ||
      cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking) != cudaSuccess ||
      cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess) {
    fprintf(stderr, "stream_ops: CUDA set-up failed\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  for (int i = 0; i < iterations; i++) {
    touch<<<1, 32, 0, s>>>(a);
    if (join) {
      cudaEventRecord(e, s);
      cudaStreamWaitEvent(s2, e, 0);
      touch<<<1, 32, 0, s2>>>(a);
      cudaStreamSynchronize(s2);
      continue;
    }
    if (copy)
      cudaMemcpyAsync(h, a, sizeof(float), cudaMemcpyDeviceToHost, s);
    else
      cudaMemsetAsync(a, 0, sizeof(float), s);
    cudaStreamSynchronize(s);
  }
  if (cudaGetLastError() != cudaSuccess) {
    fprintf(stderr, "stream_ops: a launch failed\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  cudaEventDestroy(e);
  cudaStreamDestroy(s2);
  cudaStreamDestroy(s);
  cudaFree(a);
  cudaFreeHost(h);
  MPI_Finalize();
  return 0;
}
