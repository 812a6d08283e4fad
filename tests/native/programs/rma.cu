// One-sided MPI (tests/native/test_rma.py): rank 0 puts n bytes into rank 1's window and gets
// them back, each alone and timed to its MPI_Win_flush, inside one passive-target epoch; rank 1
// waits in a barrier meanwhile.
// Usage: rma host|device|ring N
//   host    the window and rank 0's buffer in host memory (MPI_Win_allocate, malloc)
//   device  both in device memory (MPI_Win_create over cudaMalloc)
//   ring    host memory; every rank puts into the next one's window at once instead
// Prints "put <seconds>" and "get <seconds>" (rank 0), or "put.<rank> <seconds>" (ring).
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const bool device = argc > 1 && !strcmp(argv[1], "device");
  const int n = argc > 2 ? atoi(argv[2]) : 1 << 20;
  char* origin;
  char* base;
  MPI_Win win;
  if (device) {
    int gpus;
    cudaGetDeviceCount(&gpus);
    cudaSetDevice(rank % gpus);  // each rank on its own GPU where the node has one for each
    cudaMalloc((void**)&origin, n);
    cudaMalloc((void**)&base, n);
    MPI_Win_create(base, n, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
  } else {
    origin = (char*)calloc(n, 1);
    MPI_Win_allocate(n, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (argc > 1 && !strcmp(argv[1], "ring")) {
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const int next = (rank + 1) % size;
    MPI_Win_lock(MPI_LOCK_SHARED, next, 0, win);
    const double t = MPI_Wtime();
    MPI_Put(origin, n, MPI_BYTE, next, 0, n, MPI_BYTE, win);
    MPI_Win_flush(next, win);
    printf("put.%d %.17g\n", rank, MPI_Wtime() - t);
    MPI_Win_unlock(next, win);
  } else if (rank == 0) {
    MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win);
    double t = MPI_Wtime();
    MPI_Put(origin, n, MPI_BYTE, 1, 0, n, MPI_BYTE, win);
    MPI_Win_flush(1, win);
    printf("put %.17g\n", MPI_Wtime() - t);
    t = MPI_Wtime();
    MPI_Get(origin, n, MPI_BYTE, 1, 0, n, MPI_BYTE, win);
    MPI_Win_flush(1, win);
    printf("get %.17g\n", MPI_Wtime() - t);
    MPI_Win_unlock(1, win);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Win_free(&win);
  MPI_Finalize();
  return 0;
}
