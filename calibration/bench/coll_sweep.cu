// Collective size sweeps on host or device buffers, after the OSU collective
// benchmarks (osu_allreduce, ...): average latency per call over all ranks.
//   coll_sweep allreduce|allgather|alltoall|bcast|reduce_scatter [H|D] [-m MIN:MAX | -l S1,...] [-i ITERS]
// Sizes are per message as OSU counts them: the buffer of allreduce and bcast, each
// rank's block for allgather and alltoall, the whole vector of reduce_scatter (shared
// among the ranks as osu_reduce_scatter does: MPI_Reduce_scatter, one element each to
// the first ranks when there are fewer elements than ranks).
#include <mpi.h>

#include "cuda_check.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  use_local_gpu();
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char* coll = argc > 1 ? argv[1] : "allreduce";
  char kind = 'D';
  size_t min_size = 4, max_size = 1u << 20;
  int iters = 20;
  std::vector<size_t> sizes;  // -l: an explicit list of sizes instead of powers of two
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "-l") && i + 1 < argc)
      for (char* tok = strtok(argv[++i], ","); tok; tok = strtok(nullptr, ",")) sizes.push_back(strtoull(tok, 0, 10));
    else if (!strcmp(argv[i], "-m") && i + 1 < argc) sscanf(argv[++i], "%zu:%zu", &min_size, &max_size);
    else if (!strcmp(argv[i], "-i") && i + 1 < argc) iters = atoi(argv[++i]);
    else if ((argv[i][0] == 'H' || argv[i][0] == 'D') && !argv[i][1]) kind = argv[i][0];
  }
  if (sizes.empty())
    for (size_t b = min_size; b <= max_size; b *= 2) sizes.push_back(b);
  max_size = 0;
  for (size_t b : sizes) max_size = b > max_size ? b : max_size;
  const size_t total = (max_size < 4 ? 4 : max_size) * size;
  char *sbuf, *rbuf;
  if (kind == 'D') {
    CUDA_CHECK(cudaMalloc(&sbuf, total));
    CUDA_CHECK(cudaMalloc(&rbuf, total));
  } else {
    sbuf = (char*)calloc(total, 1);
    rbuf = (char*)calloc(total, 1);
  }
  if (!rank)
    printf("# OSU MPI%s %s Latency Test (Orrery calibration/bench/coll_sweep), %d ranks\n# Size       Avg Latency(us)\n",
           kind == 'D' ? "-CUDA" : "", coll, size);
  for (size_t bytes : sizes) {
    // whole floats; a message smaller than one float is sent as bytes
    const bool as_bytes = bytes < sizeof(float);
    const int count = as_bytes ? (int)bytes : (int)(bytes / sizeof(float));
    MPI_Datatype type = as_bytes ? MPI_BYTE : MPI_FLOAT;
    std::vector<int> shares(size);  // reduce_scatter: each rank's part of the vector, as OSU's
    for (int r = 0; r < size; r++)
      shares[r] = count < size ? (r < count ? 1 : 0) : count / size + (r < count % size ? 1 : 0);
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    for (int it = 0; it < iters; it++) {
      if (!strcmp(coll, "allreduce")) MPI_Allreduce(sbuf, rbuf, count, type, as_bytes ? MPI_BOR : MPI_SUM, MPI_COMM_WORLD);
      else if (!strcmp(coll, "allgather")) MPI_Allgather(sbuf, count, type, rbuf, count, type, MPI_COMM_WORLD);
      else if (!strcmp(coll, "alltoall")) MPI_Alltoall(sbuf, count, type, rbuf, count, type, MPI_COMM_WORLD);
      else if (!strcmp(coll, "bcast")) MPI_Bcast(sbuf, count, type, 0, MPI_COMM_WORLD);
      else MPI_Reduce_scatter(sbuf, rbuf, shares.data(), type, as_bytes ? MPI_BOR : MPI_SUM, MPI_COMM_WORLD);
    }
    double mine = (MPI_Wtime() - start) * 1e6 / iters, avg = 0;
    MPI_Reduce(&mine, &avg, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (!rank) printf("%-10zu%18.2f\n", bytes, avg / size);
  }
  MPI_Finalize();
  return 0;
}
