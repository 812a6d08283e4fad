// Managed memory under --managed resident (tests/native/test_managed_memory.py). Usage:
// managed_memory MODE [N]
//   answers:   one rank on a node of 2 GPUs: "name value" lines: memory in use, pointer attributes,
//              errors of bad calls, what the host's code reads back;
//   times N:   one rank: a prefetch's and an attachment's time (with the synchronisation after
//              each), beside the synchronisation alone; a cudaMemcpy of N bytes from managed memory
//              to pinned host memory and one of N bytes back ("name seconds" lines);
//   mpi N:     two ranks: rank 0 sends N bytes its host code wrote into managed memory to rank 1,
//              which receives them into managed memory and checks them; then the same send between
//              cudaMalloc'd buffers; the time of each send on rank 0;
//   oversubscribe: one allocation larger than the device's free memory;
//   other_device:  a prefetch of device 0's managed memory to device 1.
#include "check.h"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <unistd.h>

static void answer(const char* name, cudaError_t e) { printf("%s %s\n", name, cudaGetErrorName(e)); }

static size_t used() {
  size_t free_bytes, total;
  CHECK(cudaMemGetInfo(&free_bytes, &total));
  return total - free_bytes;
}

// The process's resident pages (/proc/self/statm's second field).
static long resident_pages() {
  long size = 0, resident = 0;
  FILE* f = fopen("/proc/self/statm", "r");
  if (!f || fscanf(f, "%ld %ld", &size, &resident) != 2)
    resident = -1;
  if (f)
    fclose(f);
  return resident;
}

static cudaMemLocation on_device(int d) { return {cudaMemLocationTypeDevice, d}; }
static const cudaMemLocation kHost = {cudaMemLocationTypeHost, 0};

static void answers() {
  const size_t n = 1 << 20;
  size_t before = used();
  char* m = nullptr;
  CHECK(cudaMallocManaged(&m, n));
  printf("used %zu\n", used() - before);
  cudaPointerAttributes attr;
  CHECK(cudaPointerGetAttributes(&attr, m + 10));
  printf("type %d\n", (int)attr.type);
  printf("device %d\n", attr.device);
  printf("host_pointer_is_it %d\n", attr.hostPointer == m + 10 && attr.devicePointer == m + 10);

  // the host's own code writes and reads it; a memset's value is there once it has run
  long sum = 0;
  for (size_t i = 0; i < n; i++)
    m[i] = (char)(i % 7);
  for (size_t i = 0; i < n; i++)
    sum += m[i];
  printf("host_sum %ld\n", sum);
  CHECK(cudaMemset(m, 3, 4096));
  CHECK(cudaDeviceSynchronize());
  printf("memset_read %d %d\n", m[0], m[4095] + m[4096]);

  // zeros over 64 MiB the host's code wrote: the bytes around them kept, the whole pages given back
  const size_t big = 64 << 20;
  char* b = nullptr;
  CHECK(cudaMallocManaged(&b, big));
  memset(b, 1, big);
  long before_rss = resident_pages();
  CHECK(cudaMemset(b + 100, 0, big - 200));
  CHECK(cudaDeviceSynchronize());
  printf("zeroed %d %d %d %d %d\n", b[99], b[100], b[big / 2], b[big - 101], b[big - 100]);
  printf("zeroed_mib_given_back %ld\n", (before_rss - resident_pages()) * sysconf(_SC_PAGESIZE) >> 20);
  CHECK(cudaFree(b));

  int* plain = nullptr;
  CHECK(cudaMalloc(&plain, 64));
  void* none = nullptr;
  answer("size_zero", cudaMallocManaged(&none, 0));
  answer("flags_single", cudaMallocManaged(&none, 64, cudaMemAttachSingle));
  answer("attach_host", cudaMallocManaged(&none, 64, cudaMemAttachHost));
  CHECK(cudaFree(none));
  answer("prefetch_device", cudaMemPrefetchAsync(m, n, on_device(0), 0, 0));
  answer("prefetch_host", cudaMemPrefetchAsync(m + 4096, 4096, kHost, 0, 0));
  answer("prefetch_not_managed", cudaMemPrefetchAsync(plain, 64, on_device(0), 0, 0));
  answer("prefetch_beyond", cudaMemPrefetchAsync(m + 1, n, on_device(0), 0, 0));
  answer("prefetch_flags", cudaMemPrefetchAsync(m, n, on_device(0), 1, 0));
  answer("prefetch_no_device", cudaMemPrefetchAsync(m, n, on_device(7), 0, 0));
  answer("prefetch_bad_type", cudaMemPrefetchAsync(m, n, {(cudaMemLocationType)9, 0}, 0, 0));
  answer("advise_read_mostly", cudaMemAdvise(m, n, cudaMemAdviseSetReadMostly, {}));
  answer("advise_preferred", cudaMemAdvise(m, n, cudaMemAdviseSetPreferredLocation, on_device(0)));
  answer("advise_preferred_no_device", cudaMemAdvise(m, n, cudaMemAdviseSetPreferredLocation, on_device(7)));
  answer("advise_bad", cudaMemAdvise(m, n, (cudaMemoryAdvise)0, on_device(0)));
  answer("advise_not_managed", cudaMemAdvise(plain, 64, cudaMemAdviseSetReadMostly, {}));
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  answer("attach_whole", cudaStreamAttachMemAsync(s, m, 0, cudaMemAttachSingle));
  answer("attach_size", cudaStreamAttachMemAsync(s, m, n, cudaMemAttachGlobal));
  answer("attach_part", cudaStreamAttachMemAsync(s, m, n / 2, cudaMemAttachHost));
  answer("attach_flags", cudaStreamAttachMemAsync(s, m, 0, 8));
  CHECK(cudaStreamSynchronize(s));
  // a memset captured into a graph is recorded, not run: it writes nothing at the capture
  cudaGraph_t graph;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  CHECK(cudaMemsetAsync(m + 8192, 7, 16, s));
  CHECK(cudaStreamEndCapture(s, &graph));
  printf("captured_memset %d\n", m[8192]);
  CHECK(cudaGraphDestroy(graph));

  // copies between managed memory and host memory are allowed whichever kind names it
  char* h = (char*)malloc(64);
  answer("copy_as_host", cudaMemcpy(h, m, 64, cudaMemcpyHostToHost));
  printf("copied_as_host %d\n", h[0] + h[6]);  // moved by the host: the memset's 3s
  answer("copy_default", cudaMemcpy(m, h, 64, cudaMemcpyDefault));
  cudaIpcMemHandle_t handle;
  answer("ipc_handle", cudaIpcGetMemHandle(&handle, m));  // CUDA IPC is for cudaMalloc's memory

  // on another device: that device's memory, and the allocation's
  CHECK(cudaSetDevice(1));
  size_t before1 = used();
  char* m1 = nullptr;
  CHECK(cudaMallocManaged(&m1, 3 * 4096));
  CHECK(cudaPointerGetAttributes(&attr, m1));
  printf("device_1 %d %zu\n", attr.device, used() - before1);
  CHECK(cudaFree(m1));
  printf("freed_1 %zu\n", used() - before1);
  CHECK(cudaSetDevice(0));
  CHECK(cudaFree(m));
  CHECK(cudaFree(plain));
  printf("freed %zu\n", used() - before);
  free(h);
}

static void times(size_t n) {
  char *m, *h;
  cudaStream_t s;
  CHECK(cudaMallocManaged(&m, n));
  CHECK(cudaMallocHost(&h, n));
  CHECK(cudaStreamCreate(&s));
  double t = MPI_Wtime();
  CHECK(cudaStreamSynchronize(s));
  printf("sync %.17g\n", MPI_Wtime() - t);
  t = MPI_Wtime();
  CHECK(cudaMemPrefetchAsync(m, n, on_device(0), 0, s));
  CHECK(cudaStreamSynchronize(s));
  printf("prefetch_sync %.17g\n", MPI_Wtime() - t);
  t = MPI_Wtime();
  CHECK(cudaMemPrefetchAsync(m, n, kHost, 0, s));
  CHECK(cudaStreamSynchronize(s));
  printf("prefetch_host_sync %.17g\n", MPI_Wtime() - t);
  t = MPI_Wtime();
  CHECK(cudaStreamAttachMemAsync(s, m));
  CHECK(cudaStreamSynchronize(s));
  printf("attach_sync %.17g\n", MPI_Wtime() - t);
  t = MPI_Wtime();
  CHECK(cudaMemcpy(h, m, n, cudaMemcpyDefault));
  printf("to_host %.17g\n", MPI_Wtime() - t);
  t = MPI_Wtime();
  CHECK(cudaMemcpy(m, h, n, cudaMemcpyDefault));
  printf("to_managed %.17g\n", MPI_Wtime() - t);
}

static void mpi(size_t n) {
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  unsigned char *m, *d;
  CHECK(cudaMallocManaged(&m, n));
  CHECK(cudaMalloc(&d, n));
  if (rank == 0)
    for (size_t i = 0; i < n; i++)
      m[i] = (unsigned char)(i * 31 + 7);
  double times[2];
  unsigned char* buffers[2] = {m, d};
  for (int k = 0; k < 2; k++) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t = MPI_Wtime();
    if (rank == 0)
      MPI_Send(buffers[k], (int)n, MPI_BYTE, 1, k, MPI_COMM_WORLD);
    else
      MPI_Recv(buffers[k], (int)n, MPI_BYTE, 0, k, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    times[k] = MPI_Wtime() - t;
  }
  if (rank == 1) {
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++)
      wrong += m[i] != (unsigned char)(i * 31 + 7);
    printf("received_wrong %zu\n", wrong);
  } else {
    printf("send_managed %.17g\nsend_device %.17g\n", times[0], times[1]);
  }
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const char* mode = argc > 1 ? argv[1] : "";
  size_t n = argc > 2 ? strtoul(argv[2], nullptr, 10) : 4096;
  if (!strcmp(mode, "answers")) {
    answers();
  } else if (!strcmp(mode, "times")) {
    times(n);
  } else if (!strcmp(mode, "mpi")) {
    mpi(n);
  } else if (!strcmp(mode, "oversubscribe")) {
    size_t free_bytes, total;
    CHECK(cudaMemGetInfo(&free_bytes, &total));
    void* p;
    answer("oversubscribe", cudaMallocManaged(&p, free_bytes + 1));
  } else if (!strcmp(mode, "other_device")) {
    void* p;
    CHECK(cudaMallocManaged(&p, 4096));
    answer("other_device", cudaMemPrefetchAsync(p, 4096, on_device(1), 0, 0));
  } else {
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
  }
  MPI_Finalize();
  return 0;
}
