// Point-to-point microbenchmarks after the OSU Micro-Benchmarks (osu_latency,
// osu_bw, osu_bibw), host (H) or device (D) buffers, OSU-compatible output.
//   osu_p2p latency|bw|bibw [-d cuda] [H|D H|D] [-m MIN:MAX | -l S1,S2,...] [-i ITERS] [-x WARMUP]
// Runs unchanged on a real cluster with a CUDA-aware MPI (2 ranks).
#include <mpi.h>

#include "cuda_check.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

static const int kWindow = 64;  // OSU's default window for bw and bibw

static void* alloc(char kind, size_t bytes) {
  void* p = nullptr;
  if (kind == 'D') {
    CUDA_CHECK(cudaMalloc(&p, bytes));
  } else {
    p = malloc(bytes);
    memset(p, 0, bytes);
  }
  return p;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  use_local_gpu();
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 2) {
    if (!rank) fprintf(stderr, "osu_p2p needs exactly 2 ranks\n");
    MPI_Finalize();
    return 1;
  }
  const char* test = argc > 1 ? argv[1] : "latency";
  char sbuf_kind = 'H', rbuf_kind = 'H';
  size_t min_size = 1, max_size = 4u << 20;
  int iters = 100, warmup = 10;
  std::vector<size_t> sizes;  // -l: an explicit list of message sizes instead of powers of two
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "-l") && i + 1 < argc) {
      for (char* tok = strtok(argv[++i], ","); tok; tok = strtok(nullptr, ",")) sizes.push_back(strtoull(tok, 0, 10));
      continue;
    }
    if (!strcmp(argv[i], "-d")) { i++; continue; }
    if (!strcmp(argv[i], "-m") && i + 1 < argc) { sscanf(argv[++i], "%zu:%zu", &min_size, &max_size); continue; }
    if (!strcmp(argv[i], "-i") && i + 1 < argc) { iters = atoi(argv[++i]); continue; }
    if (!strcmp(argv[i], "-x") && i + 1 < argc) { warmup = atoi(argv[++i]); continue; }
    if ((argv[i][0] == 'H' || argv[i][0] == 'D') && !argv[i][1] && i + 1 < argc) {
      sbuf_kind = argv[i][0];
      rbuf_kind = argv[++i][0];
    }
  }
  if (sizes.empty())
    for (size_t b = min_size; b <= max_size; b *= 2) sizes.push_back(b);
  max_size = 0;
  for (size_t b : sizes) max_size = b > max_size ? b : max_size;
  const bool latency = !strcmp(test, "latency"), bibw = !strcmp(test, "bibw");
  const int window = latency ? 1 : kWindow;
  char mine = rank == 0 ? sbuf_kind : rbuf_kind;
  // one send and one receive buffer, every message of a window in them, as OSU does
  char* sbuf = (char*)alloc(mine, max_size);
  char* rbuf = (char*)alloc(mine, max_size);
  if (!rank) {
    printf("# OSU MPI%s %s Test (Orrery calibration/bench/osu_p2p)\n", (sbuf_kind == 'D' || rbuf_kind == 'D') ? "-CUDA" : "",
           latency ? "Latency" : bibw ? "Bi-Directional Bandwidth" : "Bandwidth");
    printf("# Send Buffer on %s and Receive Buffer on %s\n", sbuf_kind == 'D' ? "DEVICE (D)" : "HOST (H)",
           rbuf_kind == 'D' ? "DEVICE (D)" : "HOST (H)");
    printf("# Size      %s\n", latency ? "Latency (us)" : "Bandwidth (MB/s)");
  }
  MPI_Request rq[2 * kWindow];
  for (size_t bytes : sizes) {
    const int n = (int)bytes;
    double start = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int it = 0; it < iters + warmup; it++) {
      if (it == warmup) start = MPI_Wtime();
      if (latency) {
        if (!rank) {
          MPI_Send(sbuf, n, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
          MPI_Recv(rbuf, n, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
          MPI_Recv(rbuf, n, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          MPI_Send(sbuf, n, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
        }
      } else if (!bibw) {  // rank 0 sends a window, rank 1 acknowledges it
        if (!rank) {
          for (int w = 0; w < window; w++) MPI_Isend(sbuf, n, MPI_CHAR, 1, 100, MPI_COMM_WORLD, &rq[w]);
          MPI_Waitall(window, rq, MPI_STATUSES_IGNORE);
          MPI_Recv(rbuf, 4, MPI_CHAR, 1, 101, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
          for (int w = 0; w < window; w++) MPI_Irecv(rbuf, n, MPI_CHAR, 0, 100, MPI_COMM_WORLD, &rq[w]);
          MPI_Waitall(window, rq, MPI_STATUSES_IGNORE);
          MPI_Send(sbuf, 4, MPI_CHAR, 0, 101, MPI_COMM_WORLD);
        }
      } else {  // both directions at once
        const int peer = 1 - rank;
        for (int w = 0; w < window; w++) MPI_Irecv(rbuf, n, MPI_CHAR, peer, 10, MPI_COMM_WORLD, &rq[w]);
        for (int w = 0; w < window; w++)
          MPI_Isend(sbuf, n, MPI_CHAR, peer, 10, MPI_COMM_WORLD, &rq[window + w]);
        MPI_Waitall(2 * window, rq, MPI_STATUSES_IGNORE);
      }
    }
    const double elapsed = MPI_Wtime() - start;
    if (!rank) {
      if (latency)
        printf("%-10zu%18.2f\n", bytes, elapsed * 1e6 / (2.0 * iters));
      else
        printf("%-10zu%18.2f\n", bytes, bytes / 1e6 * iters * window * (bibw ? 2 : 1) / elapsed);
      fflush(stdout);
    }
  }
  MPI_Finalize();
  return 0;
}
