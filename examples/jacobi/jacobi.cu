// CUDA-aware MPI 2D Jacobi solver, written for Orrery's demo and tests.
//
// The grid (nx x ny, fixed boundaries on the left/right edges, periodic in y)
// is split into row blocks, one per rank. Every iteration: one Jacobi sweep
// on the GPU, the l2 norm of the update every -nccheck iterations
// (MPI_Allreduce), and a halo exchange of one row with each neighbour by
// MPI_Sendrecv straight from device memory (CUDA-aware MPI). The loop stops
// when the norm falls below the tolerance or after -niter iterations.
// Structure after NVIDIA's multi-gpu-programming-models "mpi" variant.
//
// -norm prints the last l2 norm (meaningful on a real GPU: under Orrery's skeleton mode kernels
// do not run).
//
// With -overlap, the two boundary rows are computed first on a high-priority
// stream, and the halo exchange runs while the interior rows are computed on
// a second stream (as in the "mpi_overlap" variant).
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#define CUDA_CHECK(call)                                                                          \
  do {                                                                                            \
    cudaError_t err_ = (call);                                                                    \
    if (err_ != cudaSuccess) {                                                                    \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(err_)); \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                               \
    }                                                                                             \
  } while (0)

constexpr float kTolerance = 1.0e-8f;
constexpr int kBlockX = 32, kBlockY = 32;

__global__ void initialize_boundaries(float* a_new, float* a, float pi, int offset, int nx, int my_ny, int ny) {
  for (int iy = blockIdx.x * blockDim.x + threadIdx.x; iy < my_ny; iy += blockDim.x * gridDim.x) {
    const float y0 = sinf(2.0f * pi * (offset + iy) / (ny - 1));
    a[(iy + 1) * nx + 0] = y0;
    a[(iy + 1) * nx + (nx - 1)] = y0;
    a_new[(iy + 1) * nx + 0] = y0;
    a_new[(iy + 1) * nx + (nx - 1)] = y0;
  }
}

// The norm is summed as CUB's BlockReduce (BLOCK_REDUCE_WARP_REDUCTIONS) sums it in the measured
// code's "make cub" build: within each warp by shuffles, then the warps' sums, then one atomic
// add per block. (A shared-memory atomic per thread ran 2.7 to 2.8 times slower on an H200:
// calibration/data/h200-cuda-aware/jacobi.txt.)
__global__ void jacobi_kernel(float* a_new, const float* a, float* l2_norm, int iy_start, int iy_end, int nx,
                              bool calculate_norm) {
  int iy = blockIdx.y * blockDim.y + threadIdx.y + iy_start;
  int ix = blockIdx.x * blockDim.x + threadIdx.x + 1;
  __shared__ float block_norm;
  const int tid = threadIdx.y * blockDim.x + threadIdx.x;
  if (tid == 0) block_norm = 0.0f;
  __syncthreads();
  float residue2 = 0.0f;
  if (iy < iy_end && ix < nx - 1) {
    const float v = 0.25f * (a[iy * nx + ix + 1] + a[iy * nx + ix - 1] + a[(iy + 1) * nx + ix] + a[(iy - 1) * nx + ix]);
    a_new[iy * nx + ix] = v;
    residue2 = (v - a[iy * nx + ix]) * (v - a[iy * nx + ix]);
  }
  if (calculate_norm) {  // the same for every thread of the block: all of them reach the shuffles
    for (int offset = 16; offset > 0; offset /= 2) residue2 += __shfl_down_sync(0xffffffffu, residue2, offset);
    if (tid % 32 == 0) atomicAdd(&block_norm, residue2);
    __syncthreads();
    if (tid == 0) atomicAdd(l2_norm, block_norm);
  }
}

static bool arg_flag(int argc, char** argv, const char* name) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], name)) return true;
  return false;
}

static int arg_int(int argc, char** argv, const char* name, int fallback) {
  for (int i = 1; i + 1 < argc; i++)
    if (!strcmp(argv[i], name)) return atoi(argv[i + 1]);
  return fallback;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int niter = arg_int(argc, argv, "-niter", 1000);
  const int nccheck = arg_int(argc, argv, "-nccheck", 1);
  const int nx = arg_int(argc, argv, "-nx", 16384);
  const int ny = arg_int(argc, argv, "-ny", 16384);
  const bool overlap = arg_flag(argc, argv, "-overlap");

  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
  int local_rank;
  MPI_Comm_rank(local, &local_rank);
  int num_devices;
  CUDA_CHECK(cudaGetDeviceCount(&num_devices));
  CUDA_CHECK(cudaSetDevice(local_rank % num_devices));

  // Rows 1..ny-2 are interior; the first (ny-2) % size ranks take one more row.
  const int interior = ny - 2;
  const int chunk_low = interior / size, extra = interior % size;
  const int chunk = rank < extra ? chunk_low + 1 : chunk_low;
  const int offset = rank * chunk_low + (rank < extra ? rank : extra);
  const size_t bytes = (size_t)nx * (chunk + 2) * sizeof(float);

  float *a, *a_new, *l2_norm_d, *l2_norm_h;
  CUDA_CHECK(cudaMalloc(&a, bytes));
  CUDA_CHECK(cudaMalloc(&a_new, bytes));
  CUDA_CHECK(cudaMemset(a, 0, bytes));
  CUDA_CHECK(cudaMemset(a_new, 0, bytes));
  initialize_boundaries<<<(chunk + 127) / 128, 128>>>(a_new, a, 3.14159265358979323846f, offset, nx, chunk, ny);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  CUDA_CHECK(cudaMalloc(&l2_norm_d, sizeof(float)));
  CUDA_CHECK(cudaMallocHost(&l2_norm_h, sizeof(float)));
  cudaStream_t stream, boundary_stream;
  int least_priority, greatest_priority;
  CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least_priority, &greatest_priority));
  CUDA_CHECK(cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking, least_priority));
  CUDA_CHECK(cudaStreamCreateWithPriority(&boundary_stream, cudaStreamNonBlocking, greatest_priority));

  const int top = rank > 0 ? rank - 1 : size - 1;
  const int bottom = (rank + 1) % size;
  const int iy_start = 1, iy_end = chunk + 1;
  const dim3 block(kBlockX, kBlockY, 1);
  const dim3 grid((nx + kBlockX - 1) / kBlockX, (chunk + kBlockY - 1) / kBlockY, 1);
  // -overlap: one row per boundary launch, the other rows in the interior launch
  const dim3 row_block(1024, 1, 1), row_grid((nx + 1023) / 1024, 1, 1);
  const dim3 interior_grid((nx + kBlockX - 1) / kBlockX, (chunk - 2 + kBlockY - 1) / kBlockY, 1);

  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  int iter = 0;
  float l2_norm = 1.0f;
  while (l2_norm > kTolerance && iter < niter) {
    const bool calculate_norm = (iter % nccheck) == 0;
    if (calculate_norm) CUDA_CHECK(cudaMemsetAsync(l2_norm_d, 0, sizeof(float), stream));
    if (overlap) {
      CUDA_CHECK(cudaStreamSynchronize(stream));  // the norm is reset before any row adds to it
      jacobi_kernel<<<row_grid, row_block, 0, boundary_stream>>>(a_new, a, l2_norm_d, iy_start, iy_start + 1, nx,
                                                                  calculate_norm);
      jacobi_kernel<<<row_grid, row_block, 0, boundary_stream>>>(a_new, a, l2_norm_d, iy_end - 1, iy_end, nx,
                                                                  calculate_norm);
      jacobi_kernel<<<interior_grid, block, 0, stream>>>(a_new, a, l2_norm_d, iy_start + 1, iy_end - 1, nx,
                                                          calculate_norm);
      CUDA_CHECK(cudaGetLastError());
      CUDA_CHECK(cudaStreamSynchronize(boundary_stream));  // boundary rows ready: exchange them
    } else {
      jacobi_kernel<<<grid, block, 0, stream>>>(a_new, a, l2_norm_d, iy_start, iy_end, nx, calculate_norm);
      CUDA_CHECK(cudaGetLastError());
      if (calculate_norm)
        CUDA_CHECK(cudaMemcpyAsync(l2_norm_h, l2_norm_d, sizeof(float), cudaMemcpyDeviceToHost, stream));
      CUDA_CHECK(cudaStreamSynchronize(stream));
    }

    MPI_Sendrecv(a_new + iy_start * nx, nx, MPI_FLOAT, top, 0, a_new + iy_end * nx, nx, MPI_FLOAT, bottom, 0,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Sendrecv(a_new + (iy_end - 1) * nx, nx, MPI_FLOAT, bottom, 0, a_new, nx, MPI_FLOAT, top, 0,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (overlap) {  // the interior ran during the exchange; its norm comes last
      if (calculate_norm)
        CUDA_CHECK(cudaMemcpyAsync(l2_norm_h, l2_norm_d, sizeof(float), cudaMemcpyDeviceToHost, stream));
      CUDA_CHECK(cudaStreamSynchronize(stream));
    }
    if (calculate_norm) {
      MPI_Allreduce(l2_norm_h, &l2_norm, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      l2_norm = std::sqrt(l2_norm);
    }
    std::swap(a, a_new);
    iter++;
  }
  const double elapsed = MPI_Wtime() - start;
  if (rank == 0) {
    printf("Jacobi relaxation: %d x %d grid on %d ranks%s\n", nx, ny, size, overlap ? ", overlapped" : "");
    printf("iterations: %d\n", iter);
    printf("time: %.9f s (%.3f ms per iteration)\n", elapsed, 1e3 * elapsed / iter);
    if (arg_flag(argc, argv, "-norm")) printf("l2 norm: %.6e\n", l2_norm);  // a real GPU's result to compare
  }
  CUDA_CHECK(cudaStreamDestroy(boundary_stream));
  CUDA_CHECK(cudaStreamDestroy(stream));
  CUDA_CHECK(cudaFreeHost(l2_norm_h));
  CUDA_CHECK(cudaFree(l2_norm_d));
  CUDA_CHECK(cudaFree(a_new));
  CUDA_CHECK(cudaFree(a));
  MPI_Comm_free(&local);
  MPI_Finalize();
  return 0;
}
