/* Stream operations and nothing else: each rank launches a kernel and a memset on a stream of its
 * own and waits for them, N times (bench/streams.py). No MPI message after MPI_Init: what the run
 * costs beyond its start-up is the streams' hand-over and the GPU work's activities.
 *
 *     stream_ops N [copy]
 *
 * With "copy", the memset is a copy of one float to pinned host memory instead (cudaMemcpyAsync
 * device to host, as the Jacobi example copies its norm). */
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

__global__ void touch(float* a) { a[threadIdx.x] += 1.0f; }

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int iterations = argc > 1 ? atoi(argv[1]) : 0;
  bool copy = argc > 2 && !strcmp(argv[2], "copy");
  float *a = nullptr, *h = nullptr;
  cudaStream_t s;
  if (cudaMalloc(&a, 1024) != cudaSuccess || cudaMallocHost(&h, sizeof(float)) != cudaSuccess ||
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
    fprintf(stderr, "stream_ops: CUDA set-up failed\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  for (int i = 0; i < iterations; i++) {
    touch<<<1, 32, 0, s>>>(a);
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
  cudaStreamDestroy(s);
  cudaFree(a);
  cudaFreeHost(h);
  MPI_Finalize();
  return 0;
}
