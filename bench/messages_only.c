/* The bare-SMPI baseline of bench/streams.py: ranks in pairs (0-1, 2-3, ...) exchange one float
 * with MPI_Sendrecv N times, two messages per pair and iteration, nothing else. */
#include <mpi.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, iterations = argc > 1 ? atoi(argv[1]) : 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  float out = (float)rank, in = 0;
  int peer = rank ^ 1;
  for (int i = 0; i < iterations; i++)
    MPI_Sendrecv(&out, 1, MPI_FLOAT, peer, 0, &in, 1, MPI_FLOAT, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Finalize();
  return 0;
}
