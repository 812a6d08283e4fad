// Collective size sweeps on host or device buffers, after the OSU collective
// benchmarks (osu_allreduce, ...): average latency per call over all ranks.
//   coll_sweep allreduce|allgather|alltoall|bcast|reduce_scatter [H|D] [-m MIN:MAX] [-i ITERS]
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char* coll = argc > 1 ? argv[1] : "allreduce";
  char kind = 'D';
  size_t min_size = 4, max_size = 1u << 20;
  int iters = 20;
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "-m") && i + 1 < argc) sscanf(argv[++i], "%zu:%zu", &min_size, &max_size);
    else if (!strcmp(argv[i], "-i") && i + 1 < argc) iters = atoi(argv[++i]);
    else if ((argv[i][0] == 'H' || argv[i][0] == 'D') && !argv[i][1]) kind = argv[i][0];
  }
  const size_t total = max_size * size;
  char *sbuf, *rbuf;
  if (kind == 'D') {
    cudaMalloc(&sbuf, total);
    cudaMalloc(&rbuf, total);
  } else {
    sbuf = (char*)calloc(total, 1);
    rbuf = (char*)calloc(total, 1);
  }
  if (!rank)
    printf("# OSU MPI%s %s Latency Test (Orrery calibration/bench/coll_sweep), %d ranks\n# Size       Avg Latency(us)\n",
           kind == 'D' ? "-CUDA" : "", coll, size);
  for (size_t bytes = min_size; bytes <= max_size; bytes *= 2) {
    const int count = (int)(bytes / sizeof(float));
    if (count == 0) continue;
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    for (int it = 0; it < iters; it++) {
      if (!strcmp(coll, "allreduce")) MPI_Allreduce(sbuf, rbuf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      else if (!strcmp(coll, "allgather")) MPI_Allgather(sbuf, count, MPI_FLOAT, rbuf, count, MPI_FLOAT, MPI_COMM_WORLD);
      else if (!strcmp(coll, "alltoall")) MPI_Alltoall(sbuf, count, MPI_FLOAT, rbuf, count, MPI_FLOAT, MPI_COMM_WORLD);
      else if (!strcmp(coll, "bcast")) MPI_Bcast(sbuf, count, MPI_FLOAT, 0, MPI_COMM_WORLD);
      else MPI_Reduce_scatter_block(sbuf, rbuf, count / size > 0 ? count / size : 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    double mine = (MPI_Wtime() - start) * 1e6 / iters, avg = 0;
    MPI_Reduce(&mine, &avg, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (!rank) printf("%-10zu%18.2f\n", bytes, avg / size);
  }
  MPI_Finalize();
  return 0;
}
