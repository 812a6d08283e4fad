// Host-side costs of CUDA API calls, the machine's `overheads` section:
//   launch  host time to launch an empty kernel (launches queued back to back)
//   sync    cudaDeviceSynchronize on an idle device
//   memcpy  host time to issue a 4-byte cudaMemcpyAsync from pinned memory
//           (queued back to back; the copies themselves run behind)
//   api_overheads [-i ITERS]
// Prints Orrery's measurement CSV (calibration/README.md), one row per cost.
#include <mpi.h>

#include "cuda_check.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

__global__ void empty_kernel() {}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int iters = 1000;
  for (int i = 1; i + 1 < argc; i++)
    if (!strcmp(argv[i], "-i")) iters = atoi(argv[++i]);
  if (rank == 0) {
    void *h, *d;
    CUDA_CHECK(cudaMallocHost(&h, 4));
    CUDA_CHECK(cudaMalloc(&d, 4));
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    empty_kernel<<<1, 1, 0, s>>>();  // warm up
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());

    double t = MPI_Wtime();
    for (int it = 0; it < iters; it++) empty_kernel<<<1, 1, 0, s>>>();
    const double launch = (MPI_Wtime() - t) / iters;
    CUDA_CHECK(cudaDeviceSynchronize());

    t = MPI_Wtime();
    for (int it = 0; it < iters; it++) CUDA_CHECK(cudaDeviceSynchronize());
    const double sync = (MPI_Wtime() - t) / iters;

    t = MPI_Wtime();
    for (int it = 0; it < iters; it++) CUDA_CHECK(cudaMemcpyAsync(d, h, 4, cudaMemcpyHostToDevice, s));
    const double memcpy_issue = (MPI_Wtime() - t) / iters;
    CUDA_CHECK(cudaDeviceSynchronize());

    printf("benchmark,metric,path,buffers,size_bytes,value,unit,ranks,nodes,notes\n");
    printf("api_overheads,api_time,launch,D,0,%.6f,us,1,1,empty kernel launches back to back\n", 1e6 * launch);
    printf("api_overheads,api_time,sync,D,0,%.6f,us,1,1,cudaDeviceSynchronize on an idle device\n", 1e6 * sync);
    printf("api_overheads,api_time,memcpy,pinned,4,%.6f,us,1,1,cudaMemcpyAsync issue time\n", 1e6 * memcpy_issue);
  }
  MPI_Finalize();
  return 0;
}
