/* libscale: a shared library built by libtool, called by the program. */
#include <mpi.h>

int scaled_rank(int factor) {
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return factor * (rank + 1);
}
