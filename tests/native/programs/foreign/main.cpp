// An MPI program that calls a prebuilt kernel library (kernels.cu).
#include <mpi.h>

#include <cstdio>

extern "C" int run_kernels();

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  printf("cuda status %d\n", run_kernels());
  MPI_Finalize();
  return 0;
}
