/* The program the test's autotools project builds: each rank prints what configure found and
 * what it computes under MPI, with a library built by libtool and kernels compiled by $(NVCC). */
#include "config.h"

#include <mpi.h>
#include <stdio.h>

int scaled_rank(int factor);
int launch_kernels(int times);

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int device = launch_kernels(rank + 2);
  int scaled = scaled_rank(10), total = 0;
  MPI_Allreduce(&scaled, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  printf("rank %d of %d: device %d scaled %d total %d configure %s sms %d\n", rank, size, device, scaled,
         total, WORLD_SEEN_BY_CONFIGURE, SM_COUNT_SEEN_BY_CONFIGURE);
  MPI_Finalize();
  return 0;
}
