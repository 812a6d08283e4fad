/* The Jacobi example's MPI calls without CUDA: the bare-SMPI baseline of
 * bench/scale.py. Same halo rows (host buffers), same norm allreduce. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int arg_int(int argc, char** argv, const char* name, int fallback) {
  for (int i = 1; i + 1 < argc; i++)
    if (!strcmp(argv[i], name)) return atoi(argv[i + 1]);
  return fallback;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int niter = arg_int(argc, argv, "-niter", 1000);
  const int nx = arg_int(argc, argv, "-nx", 16384);
  float* halo = calloc(4 * (size_t)nx, sizeof(float));
  const int top = rank > 0 ? rank - 1 : size - 1, bottom = (rank + 1) % size;
  MPI_Barrier(MPI_COMM_WORLD);
  double start = MPI_Wtime();
  float norm = 1, local = 1;
  for (int iter = 0; iter < niter; iter++) {
    MPI_Sendrecv(halo, nx, MPI_FLOAT, top, 0, halo + nx, nx, MPI_FLOAT, bottom, 0, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    MPI_Sendrecv(halo + 2 * nx, nx, MPI_FLOAT, bottom, 0, halo + 3 * nx, nx, MPI_FLOAT, top, 0, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    MPI_Allreduce(&local, &norm, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  }
  if (rank == 0) printf("iterations: %d\ntime: %f s\n", niter, MPI_Wtime() - start);
  free(halo);
  MPI_Finalize();
  return 0;
}
