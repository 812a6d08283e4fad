// Transfers whose link figures tests/native/test_links.py derives by hand. No MPI call but the
// ones a mode names (no barrier), so that the links carry only what the mode moves.
// Usage: links MODE BYTES
#include "check.h"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char* mode = argc > 1 ? argv[1] : "";
  const size_t n = argc > 2 ? strtoull(argv[2], nullptr, 10) : 1 << 20;
  char* h;
  CHECK(cudaMallocHost(&h, n));
  if (!strcmp(mode, "h2d")) {  // one synchronous copy from pinned memory to device 0
    char* d;
    CHECK(cudaMalloc(&d, n));
    CHECK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
  } else if (!strcmp(mode, "two-h2d")) {  // to devices 0 and 1 at once, from one pinned buffer
    char *d0, *d1;
    cudaStream_t s0, s1;
    CHECK(cudaSetDevice(0));
    CHECK(cudaMalloc(&d0, n));
    CHECK(cudaStreamCreate(&s0));
    CHECK(cudaSetDevice(1));
    CHECK(cudaMalloc(&d1, n));
    CHECK(cudaStreamCreate(&s1));
    CHECK(cudaSetDevice(0));
    CHECK(cudaMemcpyAsync(d0, h, n, cudaMemcpyHostToDevice, s0));
    CHECK(cudaSetDevice(1));
    CHECK(cudaMemcpyAsync(d1, h, n, cudaMemcpyHostToDevice, s1));
    CHECK(cudaStreamSynchronize(s0));
    CHECK(cudaStreamSynchronize(s1));
  } else if (!strcmp(mode, "send")) {  // rank 0 sends n bytes of device memory to rank 1
    char* d;
    CHECK(cudaMalloc(&d, n));
    if (rank == 0)
      MPI_Send(d, (int)n, MPI_CHAR, 1, 0, MPI_COMM_WORLD);
    else if (rank == 1)
      MPI_Recv(d, (int)n, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else if (!strcmp(mode, "mix")) {  // copies both ways, a device ring exchange, a host allreduce
    char *d, *r;
    int gpus;
    CHECK(cudaGetDeviceCount(&gpus));
    CHECK(cudaSetDevice(rank % gpus));
    CHECK(cudaMalloc(&d, n));
    CHECK(cudaMalloc(&r, n));
    CHECK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
    MPI_Sendrecv(d, (int)n, MPI_CHAR, (rank + 1) % size, 0, r, (int)n, MPI_CHAR, (rank + size - 1) % size, 0,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    double x = rank, sum = 0;
    MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    CHECK(cudaMemcpy(h, r, n, cudaMemcpyDeviceToHost));
  } else if (!strcmp(mode, "abort-mid-copy")) {  // n bytes to device 0 on their way at MPI_Abort
    char *d, *small, *back;
    cudaStream_t s;
    CHECK(cudaMalloc(&d, n));
    CHECK(cudaMalloc(&small, 4096));
    CHECK(cudaMallocHost(&back, 4096));
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK(cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, s));
    CHECK(cudaMemcpy(back, small, 4096, cudaMemcpyDeviceToHost));  // the other way, meanwhile
    MPI_Abort(MPI_COMM_WORLD, 9);
  } else {
    fprintf(stderr, "links: unknown mode '%s'\n", mode);
    return 2;
  }
  MPI_Finalize();
  return 0;
}
