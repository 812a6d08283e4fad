// The C++ part: MPI across the ranks, each rank launching rank + 1 kernels on its own GPU.
// Prints "name value" lines (rank 0 only), among them whether MPI is CUDA-aware (mpi-ext.h's
// query, where CMake found the header; -1: no query to ask).
#include <mpi.h>
#ifdef HAVE_MPI_EXT_H
#include <mpi-ext.h>
#endif

#include <cstdio>
#include <vector>

extern "C" int rank_weight(int rank);
extern "C" int scale_on_device(double* host, int n, int launches);

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<double> x(1024, 1.0);
  int failed = scale_on_device(x.data(), static_cast<int>(x.size()), rank + 1);
  int weight = rank_weight(rank), total = 0, failures = 0;
  MPI_Reduce(&weight, &total, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  MPI_Reduce(&failed, &failures, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    std::printf("ranks %d\n", size);
    std::printf("weights %d\n", total);
    std::printf("failures %d\n", failures);
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
    std::printf("cuda_aware %d\n", MPIX_Query_cuda_support());
#else
    std::printf("cuda_aware %d\n", -1);
#endif
  }
  MPI_Finalize();
  return 0;
}
