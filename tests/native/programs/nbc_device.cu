// Non-blocking collectives on device buffers (interpose/mpi/smpi_nbc.cpp). Usage: nbc_device FORM
// BYTES: after a barrier, an allreduce of BYTES bytes of floats from one device buffer into another
// (cudaMalloc'd: folded from fold_threshold, 1 MiB, on), MPI_Allreduce (FORM "blocking") or
// MPI_Iallreduce waited for at once ("waited"); each rank prints the simulated time it entered and
// the time it returned (hexadecimal floating point, every bit).
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  if (argc != 3) {
    fprintf(stderr, "usage: nbc_device blocking|waited BYTES\n");
    return 2;
  }
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const size_t bytes = strtoull(argv[2], nullptr, 10);
  const int count = (int)(bytes / sizeof(float));
  float *in, *out;
  if (cudaMalloc(&in, bytes) || cudaMalloc(&out, bytes) || cudaMemset(in, 0, bytes)) {
    fprintf(stderr, "allocation failed on rank %d\n", rank);
    return 1;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const double entered = MPI_Wtime();
  if (!strcmp(argv[1], "blocking")) {
    MPI_Allreduce(in, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  } else {
    MPI_Request rq;
    MPI_Iallreduce(in, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &rq);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
  }
  printf("rank %d entered=%a returned=%a\n", rank, entered, MPI_Wtime());
  MPI_Finalize();
  return 0;
}
