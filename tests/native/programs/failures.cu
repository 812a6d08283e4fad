// A program that fails in the ways a real MPI + CUDA job fails, or runs for ever (the limits of
// `orrery run`). Usage: failures MODE; run with 2 ranks (ring: 3 or more).
// Before failing, rank 1 (or every rank) runs `busy` (its cost from the test's cost file) and
// waits for it, so the failure happens at a simulated time the tests derive by hand. Every
// rank prints "rank R before" first: the tests check it reaches stdout.
#include <mpi.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

__global__ void busy(float* x) {}

static void work(float* d) {  // launch busy and wait for it
  busy<<<1, 1>>>(d);
  cudaDeviceSynchronize();
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char* mode = argc > 1 ? argv[1] : "";
  float* d;
  cudaMalloc(&d, 1 << 20);
  printf("rank %d before\n", rank);  // no newline flush forced: Orrery must flush it
  int token = 0;

  if (!strcmp(mode, "deadlock2")) {  // both ranks receive first; rank 1 after busy
    if (rank == 1)
      work(d);
    MPI_Recv(&token, 1, MPI_INT, 1 - rank, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Send(&token, 1, MPI_INT, 1 - rank, 0, MPI_COMM_WORLD);
  } else if (!strcmp(mode, "ring")) {  // each rank sends synchronously to the next, then receives
    if (rank == size - 1)
      work(d);
    MPI_Ssend(&token, 1, MPI_INT, (rank + 1) % size, 0, MPI_COMM_WORLD);
    MPI_Recv(&token, 1, MPI_INT, (rank + size - 1) % size, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else if (!strcmp(mode, "abort7")) {  // rank 1 aborts after busy; rank 0 waits for it
    if (rank == 1) {
      work(d);
      MPI_Abort(MPI_COMM_WORLD, 7);
    }
    MPI_Recv(&token, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else if (!strcmp(mode, "exit5") || !strcmp(mode, "exit3")) {  // rank 1 exits after busy
    if (rank == 1) {
      work(d);
      exit(mode[4] - '0');
    }
    MPI_Recv(&token, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else if (!strcmp(mode, "segv")) {  // rank 1 dereferences a null pointer after busy
    if (rank == 1) {
      work(d);
      *(volatile int*)nullptr = 1;
    }
    MPI_Recv(&token, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else if (!strcmp(mode, "pending-kernel")) {  // rank 1 finalizes with busy still running
    if (rank == 1)
      busy<<<1, 1>>>(d);
  } else if (!strcmp(mode, "pending-memset")) {  // ... a memset queued behind busy
    if (rank == 1) {
      busy<<<1, 1>>>(d);
      cudaMemsetAsync(d, 0, 1 << 20, 0);
    }
  } else if (!strcmp(mode, "pending-async-copy")) {  // ... an H2D copy on a stream of its own
    if (rank == 1) {
      cudaStream_t s;
      cudaStreamCreate(&s);
      float* h;
      cudaMallocHost(&h, 1 << 20);
      busy<<<1, 1, 0, s>>>(d);
      cudaMemcpyAsync(d, h, 1 << 20, cudaMemcpyHostToDevice, s);
    }
  } else if (!strcmp(mode, "forever-gpu")) {  // every rank runs busy and waits for it, for ever
    for (;;)
      work(d);
  } else if (!strcmp(mode, "forever-mpi")) {  // the last rank runs busy, then all reduce, for ever
    for (;;) {
      if (rank == size - 1)
        work(d);
      MPI_Allreduce(MPI_IN_PLACE, &token, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    }
  } else if (!strcmp(mode, "spin")) {  // rank 0 loops in its own code: SimGrid's clock stands still
    fflush(stdout);
    for (volatile unsigned long n = 0;; n++)
      ;
  } else {
    fprintf(stderr, "unknown mode '%s'\n", mode);
    return 2;
  }
  printf("rank %d after\n", rank);
  MPI_Finalize();
  return 0;
}
