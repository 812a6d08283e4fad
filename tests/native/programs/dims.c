/* MPI_Dims_create's answers, one line each: "dims N NDIMS: D1 D2 ...". Built with `orrery mpicc`.
 * Usage: dims MAX_N MAX_NDIMS  (every N from 1 to MAX_N, every NDIMS from 1 to MAX_NDIMS, no
 * dimension fixed), then "fixed" lines for the calls with dimensions fixed by the caller:
 * 36 ranks as (0, 2, 0) and 24 as (0, 0, 3). Only rank 0 calls. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static void show(const char* what, int n, int ndims, int* dims) {
  int err = MPI_Dims_create(n, ndims, dims);
  printf("%s %d %d:", what, n, ndims);
  for (int i = 0; i < ndims; i++)
    printf(" %d", dims[i]);
  printf(err == MPI_SUCCESS ? "\n" : " error\n");
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0 && argc == 3) {
    const int max_n = atoi(argv[1]), max_ndims = atoi(argv[2]);
    for (int n = 1; n <= max_n; n++)
      for (int ndims = 1; ndims <= max_ndims; ndims++) {
        int dims[8] = {0};
        show("dims", n, ndims, dims);
      }
    int a[3] = {0, 2, 0}, b[3] = {0, 0, 3};
    show("fixed", 36, 3, a);
    show("fixed", 24, 3, b);
  }
  MPI_Finalize();
  return 0;
}
