// What a benchmark such as nccl-tests asks of the host: its clocks (std::chrono, clock_gettime,
// gettimeofday) around device work, a loop polling cudaStreamQuery or cudaEventQuery until the
// work is done, and its host name. Modes:
//   clocks        each clock read after a 100 us kernel and its synchronisation
//   poll-stream   cudaStreamQuery in a loop around a 100 us kernel (nccl-tests' testStreamSynchronize)
//   poll-event    the same with cudaEventQuery on an event recorded after the kernel
//   poll-two      two streams of two devices, 100 us and 20 us kernels, polled in turn until both are done
//   hostname      each rank's gethostname
//   getopt ARGS   each rank's getopt_long of its options (-x VALUE, --name VALUE)
//   statics       each rank counts its calls in a template's static variable (its own copy's)
#include <cuda_runtime.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <getopt.h>

#include <chrono>

template <class T>
int& calls() {  // g++ makes this static a GNU unique symbol, one for every loaded copy
  static int n = 0;
  return n;
}

// A runtime whose "not ready" never lets the simulated clock move would spin for ever: give up.
static const long kMaxPolls = 10000000;

#define CHECK(x)                                                               \
  do {                                                                         \
    cudaError_t e_ = (x);                                                      \
    if (e_ != cudaSuccess) {                                                   \
      fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
      return 1;                                                                \
    }                                                                          \
  } while (0)

__global__ void busy(float* d) { d[0] += 1; }
__global__ void brief(float* d) { d[0] += 2; }

static double steady() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static double clock_of(clockid_t id) {
  struct timespec t;
  clock_gettime(id, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const char* mode = argc > 1 ? argv[1] : "clocks";
  float* d;
  CHECK(cudaMalloc(&d, 64));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CHECK(cudaDeviceSynchronize());
  double c0 = steady();
  if (!strcmp(mode, "clocks")) {
    busy<<<1, 1, 0, s>>>(d);
    CHECK(cudaStreamSynchronize(s));
    struct timeval tv;
    gettimeofday(&tv, nullptr);
    printf("wtime %.9f\n", MPI_Wtime());
    printf("steady %.9f\n", steady());
    printf("monotonic %.9f\n", clock_of(CLOCK_MONOTONIC));
    printf("realtime %.9f\n", clock_of(CLOCK_REALTIME));
    printf("gettimeofday %.6f\n", tv.tv_sec + tv.tv_usec * 1e-6);
    // CPU time is the simulator's own, not simulated: it stays below a second for this program,
    // whose simulated time the test makes longer than that
    printf("cputime_below_1s %d\n", clock_of(CLOCK_PROCESS_CPUTIME_ID) < 1.0);
  } else if (!strcmp(mode, "poll-stream") || !strcmp(mode, "poll-event")) {
    cudaEvent_t e;
    CHECK(cudaEventCreate(&e));
    busy<<<1, 1, 0, s>>>(d);
    CHECK(cudaEventRecord(e, s));
    double launched = steady() - c0;
    long polls = 0;
    for (; polls < kMaxPolls;) {
      cudaError_t q = !strcmp(mode, "poll-stream") ? cudaStreamQuery(s) : cudaEventQuery(e);
      if (q == cudaSuccess)
        break;
      if (q != cudaErrorNotReady)
        CHECK(q);
      polls++;
    }
    printf("launched %.9f\n", launched);
    printf("done %.9f\n", steady() - c0);
    printf("polls %ld\n", polls);
  } else if (!strcmp(mode, "poll-two")) {
    cudaStream_t t;
    CHECK(cudaSetDevice(1));
    float* d1;
    CHECK(cudaMalloc(&d1, 64));
    CHECK(cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking));
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaSetDevice(0));
    c0 = steady();
    busy<<<1, 1, 0, s>>>(d);
    CHECK(cudaSetDevice(1));
    brief<<<1, 1, 0, t>>>(d1);
    cudaStream_t streams[2] = {s, t};
    double done[2] = {-1, -1};
    long polls = 0;
    for (int remaining = 2; remaining && polls < kMaxPolls; polls++)
      for (int i = 0; i < 2; i++)
        if (done[i] < 0 && cudaStreamQuery(streams[i]) == cudaSuccess) {
          done[i] = steady() - c0;
          remaining--;
        }
    printf("done0 %.9f\n", done[0]);
    printf("done1 %.9f\n", done[1]);
  } else if (!strcmp(mode, "hostname")) {
    char name[64], small[2];
    gethostname(name, sizeof name);
    int rc = gethostname(small, sizeof small);
    printf("rank %d host %s small_rc %d\n", rank, name, rc);
  } else if (!strcmp(mode, "getopt")) {
    const struct option longs[] = {{"name", required_argument, nullptr, 'n'}, {nullptr, 0, nullptr, 0}};
    const char *x = "-", *name = "-";
    for (int c; (c = getopt_long(argc - 1, argv + 1, "x:", longs, nullptr)) != -1;)
      c == 'x' ? x = optarg : c == 'n' ? name = optarg : 0;
    printf("rank %d x %s name %s\n", rank, x, name);
  } else if (!strcmp(mode, "statics")) {
    calls<int>()++;
    MPI_Barrier(MPI_COMM_WORLD);  // every rank has counted
    printf("rank %d calls %d\n", rank, calls<int>());
  }
  MPI_Finalize();
  return 0;
}
