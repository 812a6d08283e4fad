/* Open MPI's CUDA-aware checks as a C program built with `orrery mpicc` makes them: the
 * compile-time macros of mpi-ext.h (included here before mpi.h, which the header allows) and
 * the run-time queries, once MPI is initialised. Each rank prints one line. */
#include <mpi-ext.h>
#include <mpi.h>

#include <stdio.h>

#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
#define CUDA_AWARE_AT_COMPILE_TIME 1
#else
#define CUDA_AWARE_AT_COMPILE_TIME 0
#endif

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  printf("checks of rank %d: ext %d cuda ext %d compile %d query %d rocm compile %d query %d\n", rank,
         OMPI_HAVE_MPI_EXT, OMPI_HAVE_MPI_EXT_CUDA, CUDA_AWARE_AT_COMPILE_TIME, MPIX_Query_cuda_support(),
         MPIX_ROCM_AWARE_SUPPORT, MPIX_Query_rocm_support());
  MPI_Finalize();
  return 0;
}
