// Memory folding at scale: every rank holds 2 x 4 GiB of device memory and
// 2 x 1 GiB of pinned host memory, and exchanges halo rows from them.
#include <mpi.h>

#include <cstdio>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const size_t gib = size_t(1) << 30;
  const int row = 16384;  // floats per halo row
  float *a, *b, *ha, *hb;
  if (cudaMalloc(&a, 4 * gib) || cudaMalloc(&b, 4 * gib) || cudaMallocHost(&ha, gib) || cudaMallocHost(&hb, gib)) {
    fprintf(stderr, "allocation failed on rank %d\n", rank);
    return 1;
  }
  const int up = (rank + size - 1) % size, down = (rank + 1) % size;
  const size_t last = 4 * gib / sizeof(float) - row;
  for (int it = 0; it < 10; it++) {
    // into the first and the last row of the pinned buffers
    if (cudaMemcpy(ha, a + last, row * sizeof(float), cudaMemcpyDeviceToHost) ||
        cudaMemcpy(hb + gib / sizeof(float) - row, b, row * sizeof(float), cudaMemcpyDeviceToHost)) {
      fprintf(stderr, "halo copy failed on rank %d\n", rank);
      return 1;
    }
    MPI_Sendrecv(a + row, row, MPI_FLOAT, up, 0, a + last, row, MPI_FLOAT, down, 0, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    MPI_Sendrecv(b + last, row, MPI_FLOAT, down, 1, b, row, MPI_FLOAT, up, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  if (rank == 0)
    printf("halo exchanges %d\n", 10);
  MPI_Finalize();
  return 0;
}
