// A CUDA-aware MPI program's checks as NVIDIA's multi-gpu-programming-models (mpi/jacobi.cpp)
// makes them, built with `orrery nvcc`: mpi-ext.h after mpi.h, the compile-time guard around the
// run-time query, the program's own MPI_CALL macro (after SMPI's is undefined: docs/building.md),
// and device buffers passed to MPI only when the query says CUDA-aware. The ranks pass one buffer
// each along a ring; each prints its answers and which buffers it passed.
#include <mpi.h>
#include <mpi-ext.h>

#include <cstdio>
#include <cstdlib>

#undef MPI_CALL  // SMPI's smpi.h defines one
#define MPI_CALL(call)                                                           \
  {                                                                              \
    int mpi_status = call;                                                       \
    if (MPI_SUCCESS != mpi_status) {                                             \
      std::fprintf(stderr, "MPI error %d: %s at %s:%d\n", mpi_status, #call,     \
                   __FILE__, __LINE__);                                          \
      std::exit(1);                                                              \
    }                                                                            \
  }

constexpr int N = 4096;  // doubles each rank sends

int main(int argc, char** argv) {
  MPI_CALL(MPI_Init(&argc, &argv));
  int rank, size;
  MPI_CALL(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  MPI_CALL(MPI_Comm_size(MPI_COMM_WORLD, &size));
  int compile_time = 0, query = -1;
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  compile_time = 1;
  query = MPIX_Query_cuda_support();
#endif
  double *send, *recv;
  const bool device = query == 1;
  if (device) {
    cudaMalloc(&send, N * sizeof(double));
    cudaMalloc(&recv, N * sizeof(double));
  } else {
    send = static_cast<double*>(std::calloc(N, sizeof(double)));
    recv = static_cast<double*>(std::calloc(N, sizeof(double)));
  }
  int next = (rank + 1) % size, previous = (rank + size - 1) % size;  // a ring
  MPI_CALL(MPI_Sendrecv(send, N, MPI_DOUBLE, next, 0, recv, N, MPI_DOUBLE, previous, 0, MPI_COMM_WORLD,
                        MPI_STATUS_IGNORE));
  std::printf("checks of rank %d: compile %d query %d rocm %d buffers %s\n", rank, compile_time, query,
              MPIX_Query_rocm_support(), device ? "device" : "host");
  MPI_CALL(MPI_Finalize());
  return 0;
}
