// Stop on the first failing CUDA call, naming it: a benchmark that went on after a
// failed allocation or copy would print timings of nothing.
#pragma once
#include <mpi.h>

#include <cstdio>

#define CUDA_CHECK(call)                                                                          \
  do {                                                                                            \
    cudaError_t err_ = (call);                                                                    \
    if (err_ != cudaSuccess) {                                                                    \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(err_)); \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                               \
    }                                                                                             \
  } while (0)

/* Each rank of a node on its own GPU (local rank mod the GPUs it sees), as the OSU benchmarks
 * choose theirs from the launcher's local rank (MV2_COMM_WORLD_LOCAL_RANK and the like): under
 * plain mpirun every rank starts on device 0, and two ranks' buffers would share one GPU. */
static inline void use_local_gpu() {
  MPI_Comm node;
  int local = 0, gpus = 1;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &local);
  MPI_Comm_free(&node);
  CUDA_CHECK(cudaGetDeviceCount(&gpus));
  CUDA_CHECK(cudaSetDevice(local % gpus));
}
