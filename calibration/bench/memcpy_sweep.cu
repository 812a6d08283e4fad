// cudaMemcpy size sweep, after CUDA's bandwidthTest (--mode=shmoo) and
// p2pBandwidthLatencyTest: pinned host memory, synchronous copies. Copies between
// device buffers do not block the host, so those sweeps end with a synchronisation.
//   memcpy_sweep h2d|d2h|d2d|peer [-m MIN:MAX | -l S1,S2,...] [-i ITERS]
// Bandwidth is bytes / time (D2D counted once, unlike bandwidthTest's 2x).
#include <mpi.h>

#include "cuda_check.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const char* kind = argc > 1 ? argv[1] : "h2d";
  size_t min_size = 1024, max_size = 64u << 20;
  int iters = 20;
  std::vector<size_t> sizes;  // -l: an explicit list of sizes instead of powers of two
  for (int i = 2; i + 1 < argc; i++) {
    if (!strcmp(argv[i], "-l"))
      for (char* tok = strtok(argv[++i], ","); tok; tok = strtok(nullptr, ",")) sizes.push_back(strtoull(tok, 0, 10));
    else if (!strcmp(argv[i], "-m")) sscanf(argv[++i], "%zu:%zu", &min_size, &max_size);
    else if (!strcmp(argv[i], "-i")) iters = atoi(argv[++i]);
  }
  if (sizes.empty())
    for (size_t b = min_size; b <= max_size; b *= 2) sizes.push_back(b);
  max_size = 0;
  for (size_t b : sizes) max_size = b > max_size ? b : max_size;
  if (rank == 0) {
    void *h, *d, *d2 = nullptr;
    CUDA_CHECK(cudaMallocHost(&h, max_size));
    CUDA_CHECK(cudaMalloc(&d, max_size));
    const bool peer = !strcmp(kind, "peer");
    if (peer || !strcmp(kind, "d2d")) {
      if (peer) CUDA_CHECK(cudaSetDevice(1));
      CUDA_CHECK(cudaMalloc(&d2, max_size));
      CUDA_CHECK(cudaSetDevice(0));
    }
    if (peer) {  // GPU to GPU where the two can: without peer access the driver stages the copies
      int can = 0;  // through host memory (p2pBandwidthLatencyTest's P2P=Disabled)
      CUDA_CHECK(cudaDeviceCanAccessPeer(&can, 0, 1));
      if (can) CUDA_CHECK(cudaDeviceEnablePeerAccess(1, 0));
    }
    printf("# memcpy %s sweep (Orrery calibration/bench/memcpy_sweep)\n# Size      Bandwidth (GB/s)\n", kind);
    for (size_t bytes : sizes) {
      CUDA_CHECK(cudaDeviceSynchronize());
      double start = MPI_Wtime();
      for (int it = 0; it < iters; it++) {
        if (!strcmp(kind, "h2d")) CUDA_CHECK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
        else if (!strcmp(kind, "d2h")) CUDA_CHECK(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
        else if (!strcmp(kind, "d2d")) CUDA_CHECK(cudaMemcpy(d2, d, bytes, cudaMemcpyDeviceToDevice));
        else CUDA_CHECK(cudaMemcpyPeer(d2, 1, d, 0, bytes));
      }
      // D2D and peer copies return before they finish (no host-side synchronisation):
      // the sweep times them up to the last one's end
      if (!strcmp(kind, "d2d") || peer) CUDA_CHECK(cudaDeviceSynchronize());
      double elapsed = MPI_Wtime() - start;
      printf("%-10zu%18.3f\n", bytes, bytes * (double)iters / elapsed / 1e9);
    }
  }
  MPI_Finalize();
  return 0;
}
