/* MPI_Init and MPI_Finalize only: SimGrid's start-up on a platform, the fixed cost that
 * bench/scale.py measures under bare smpirun (no message, so no route is computed). */
#include <mpi.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Finalize();
  return 0;
}
