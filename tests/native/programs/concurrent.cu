// Operations that start at the same simulated instant, for the physics invariants
// (tests/native/test_invariants.py). Usage: concurrent MODE BYTES [ACTIVE]
// Each rank binds to GPU (local rank mod the GPUs it sees). The first ACTIVE ranks
// (all if absent) take part; the others only join the barriers. Prints
// "NAME.RANK seconds" lines, each timed with MPI_Wtime from an instant every rank
// starts at.
#include "check.h"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <ctime>

extern "C" int smpi_nanosleep(const struct timespec* tp, struct timespec* t);  // SimGrid's, simulated

__global__ void gate(char* x) {}  // its cost (test's cost file) releases the copies waiting on it
__global__ void work(char* x) {}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size, local;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &local);
  const char* mode = argc > 1 ? argv[1] : "";
  const size_t n = argc > 2 ? strtoull(argv[2], nullptr, 10) : 1 << 20;
  const int active = argc > 3 ? atoi(argv[3]) : size;
  const bool on = rank < active;
  int gpus = 0;
  CHECK(cudaGetDeviceCount(&gpus));
  CHECK(cudaSetDevice(local % gpus));
  char *d, *h;
  CHECK(cudaMalloc(&d, n));
  CHECK(cudaMallocHost(&h, n));
  // Ranks leave a barrier at different instants (SMPI's barrier is messages from a root): every
  // rank sleeps (simulated time) until one instant after the last has left it
  MPI_Barrier(MPI_COMM_WORLD);
  double last = MPI_Wtime();
  MPI_Allreduce(MPI_IN_PLACE, &last, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  const long long wait_ns = llround((last + 50e-6 - MPI_Wtime()) * 1e9);
  const struct timespec pause = {(time_t)(wait_ns / 1000000000), (long)(wait_ns % 1000000000)};
  smpi_nanosleep(&pause, nullptr);
  const double t0 = MPI_Wtime();
  printf("start.%d %.17g\n", rank, t0);

  if (!strcmp(mode, "h2d") || !strcmp(mode, "d2h")) {  // one blocking copy per active rank
    if (on) {
      const bool up = !strcmp(mode, "h2d");
      CHECK(cudaMemcpy(up ? d : h, up ? h : d, n, up ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost));
      printf("%s.%d %.17g\n", mode, rank, MPI_Wtime() - t0);
    }
  } else if (!strcmp(mode, "peer-fan") || !strcmp(mode, "h2d-fan")) {
    // rank 0: one copy to each of ACTIVE GPUs, from its GPU's memory (peer: GPUs 1..ACTIVE) or
    // from one pinned buffer (h2d: GPUs 0..ACTIVE-1), in streams that all wait for one event, so
    // the copies start at the same instant; each timed by its own events
    if (rank == 0) {
      const bool peer = !strcmp(mode, "peer-fan");
      const int k = argc > 3 ? atoi(argv[3]) : peer ? gpus - 1 : gpus;
      const int first = peer ? 1 : 0;
      cudaStream_t s[16], gs;
      cudaEvent_t go, a[16], b[16];
      char* p[16];
      CHECK(cudaSetDevice(0));
      CHECK(cudaEventCreate(&go));
      CHECK(cudaStreamCreate(&gs));
      gate<<<1, 1, 0, gs>>>(d);
      CHECK(cudaEventRecord(go, gs));
      for (int g = first; g < first + k; g++) {
        CHECK(cudaSetDevice(g));
        CHECK(cudaMalloc(&p[g], n));
        CHECK(cudaSetDevice(peer ? 0 : g));  // a peer copy is work of the source GPU's stream
        if (peer)
          CHECK(cudaDeviceEnablePeerAccess(g, 0));  // GPU to GPU, not staged through host memory
        CHECK(cudaStreamCreateWithFlags(&s[g], cudaStreamNonBlocking));
        CHECK(cudaEventCreate(&a[g]));
        CHECK(cudaEventCreate(&b[g]));
        CHECK(cudaStreamWaitEvent(s[g], go, 0));
        CHECK(cudaEventRecord(a[g], s[g]));
        if (peer)
          CHECK(cudaMemcpyPeerAsync(p[g], g, d, 0, n, s[g]));
        else
          CHECK(cudaMemcpyAsync(p[g], h, n, cudaMemcpyHostToDevice, s[g]));
        CHECK(cudaEventRecord(b[g], s[g]));
      }
      for (int g = 0; g < gpus; g++) {
        CHECK(cudaSetDevice(g));
        CHECK(cudaDeviceSynchronize());
      }
      for (int g = first; g < first + k; g++) {
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, a[g], b[g]));
        printf("%s.%d %.9g\n", peer ? "peer" : "h2d", g, ms * 1e-3);
      }
    }
  } else if (!strcmp(mode, "send-device") || !strcmp(mode, "send-host")) {
    // the first ACTIVE/2 ranks each send n bytes to the rank size/2 further on (the other node
    // when there are two), all at once; each receiver times its receive
    char* buf = !strcmp(mode, "send-host") ? (char*)malloc(n) : d;
    const int half = size / 2, pairs = active / 2;
    if (rank < pairs)
      MPI_Send(buf, (int)n, MPI_BYTE, rank + half, 0, MPI_COMM_WORLD);
    else if (rank >= half && rank - half < pairs) {
      MPI_Recv(buf, (int)n, MPI_BYTE, rank - half, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      printf("recv.%d %.17g\n", rank, MPI_Wtime() - t0);
    }
  } else if (!strcmp(mode, "h2d-and-host-send")) {
    // rank 0: an H2D copy to its GPU and a host-buffer message to rank size/2, at once
    char* msg = (char*)malloc(n);
    if (rank == 0) {
      cudaStream_t s;
      cudaEvent_t a, b;
      CHECK(cudaStreamCreate(&s));
      CHECK(cudaEventCreate(&a));
      CHECK(cudaEventCreate(&b));
      CHECK(cudaEventRecord(a, s));
      CHECK(cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, s));
      CHECK(cudaEventRecord(b, s));
      if (active > 1)
        MPI_Send(msg, (int)n, MPI_BYTE, size / 2, 0, MPI_COMM_WORLD);
      CHECK(cudaStreamSynchronize(s));
      float ms = 0;
      CHECK(cudaEventElapsedTime(&ms, a, b));
      printf("copy.0 %.9g\n", ms * 1e-3);
    } else if (rank == size / 2 && active > 1) {
      MPI_Recv(msg, (int)n, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      printf("recv.%d %.17g\n", rank, MPI_Wtime() - t0);
    }
  } else if (!strcmp(mode, "allreduce")) {  // every rank, device buffers
    MPI_Allreduce(MPI_IN_PLACE, d, (int)(n / sizeof(float)), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    printf("allreduce.%d %.17g\n", rank, MPI_Wtime() - t0);
  } else if (!strcmp(mode, "events")) {
    // the same work timed by the GPU's events and by the host's clock around its synchronisation
    cudaStream_t s;
    cudaEvent_t a, b;
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    const double w0 = MPI_Wtime();
    CHECK(cudaEventRecord(a, s));
    CHECK(cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, s));
    work<<<1, 1, 0, s>>>(d);
    CHECK(cudaMemcpyAsync(h, d, n, cudaMemcpyDeviceToHost, s));
    CHECK(cudaEventRecord(b, s));
    CHECK(cudaEventSynchronize(b));
    const double w1 = MPI_Wtime();
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    printf("event.%d %.9g\nwtime.%d %.17g\n", rank, ms * 1e-3, rank, w1 - w0);
  } else {
    fprintf(stderr, "concurrent: unknown mode '%s'\n", mode);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
