/* The C half of a pair of twins (pair.f90 is the Fortran one; tests/native/test_mpif90.py
 * compares their results.json): the same calls, in the same order, on the same buffers. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  int rank;
  MPI_Request requests[2];
  double mine[1000], theirs[1000], part[250], total[250];
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int peer = 1 - rank;
  for (int i = 0; i < 1000; i++)
    mine[i] = rank + 1;
  MPI_Irecv(theirs, 1000, MPI_DOUBLE, peer, 3, MPI_COMM_WORLD, &requests[0]);
  MPI_Isend(mine, 1000, MPI_DOUBLE, peer, 3, MPI_COMM_WORLD, &requests[1]);
  MPI_Waitall(2, requests, MPI_STATUSES_IGNORE);
  MPI_Sendrecv_replace(mine, 10, MPI_DOUBLE, peer, 4, peer, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  for (int i = 0; i < 250; i++)
    part[i] = theirs[999] + mine[0];
  MPI_Allreduce(part, total, 250, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, part, 250, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  printf("rank %d received %.1f total %.1f in place %.1f\n", rank, theirs[999], total[249], part[249]);
  MPI_Finalize();
  return 0;
}
