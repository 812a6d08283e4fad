// Small CUDA + MPI scenarios whose simulated times tests derive by hand.
// Usage: timing MODE [BYTES]; prints "name value" lines (times in seconds).
#include "check.h"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

__global__ void busy(float* x) {}   // costs come from the test's cost file
__global__ void brief(float* x) {}
__global__ void scaled(float* x) {}

static int callback_runs = 0;
static void on_host(void* counter) { ++*(int*)counter; }

/* For the modes that move host and device buffers at once: a device receive buffer and host
 * send and receive buffers of n bytes. */
struct Mixed {
  float* r;
  char* hs;
  char* hr;
};
static Mixed mixed_buffers(size_t n) {
  Mixed m;
  if (cudaMalloc(&m.r, n) != cudaSuccess) {
    fprintf(stderr, "cudaMalloc of %zu bytes failed\n", n);
    exit(1);
  }
  m.hs = (char*)malloc(n);
  m.hr = (char*)malloc(n);
  return m;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  // as MPI + CUDA programs do: each rank of a node on its own GPU (local rank mod the GPUs it sees)
  MPI_Comm node;
  int local, gpus;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &local);
  CHECK(cudaGetDeviceCount(&gpus));
  CHECK(cudaSetDevice(local % gpus));
  const char* mode = argc > 1 ? argv[1] : "";
  if (!strcmp(mode, "send-recv-device0")) {  // send-recv with every rank's buffers on device 0
    CHECK(cudaSetDevice(0));
    mode = "send-recv";
  }
  const size_t n = argc > 2 ? strtoull(argv[2], nullptr, 10) : 1 << 20;
  float *d, *h;
  CHECK(cudaMalloc(&d, n * (strcmp(mode, "collectives") ? 1 : size)));
  CHECK(cudaMallocHost(&h, n));
  cudaStream_t s1, s2;
  CHECK(cudaStreamCreate(&s1));
  CHECK(cudaStreamCreate(&s2));
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();

  if (!strcmp(mode, "h2d")) {  // one synchronous H2D copy from pinned memory
    CHECK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
    printf("elapsed %.17g\n", MPI_Wtime() - t0);
  } else if (!strcmp(mode, "copy-kinds")) {  // one synchronous copy of each kind, one after the other
    float* d2;
    CHECK(cudaMalloc(&d2, n));
    double t = MPI_Wtime();
    CHECK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
    printf("h2d %.17g\n", MPI_Wtime() - t);
    t = MPI_Wtime();
    CHECK(cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost));
    printf("d2h %.17g\n", MPI_Wtime() - t);
    t = MPI_Wtime();
    CHECK(cudaMemcpy(d2, d, n, cudaMemcpyDeviceToDevice));
    CHECK(cudaDeviceSynchronize());
    printf("d2d %.17g\n", MPI_Wtime() - t);
  } else if (!strcmp(mode, "peer") || !strcmp(mode, "peer-staged") || !strcmp(mode, "peer-enabled-by-1")) {
    // one synchronous peer copy from GPU 0 to GPU 1: with peer access enabled from GPU 0 (peer) or
    // from GPU 1 (peer-enabled-by-1), or without (peer-staged: the driver stages it in host memory)
    float* p1;
    CHECK(cudaSetDevice(1));
    CHECK(cudaMalloc(&p1, n));
    if (!strcmp(mode, "peer-enabled-by-1"))
      CHECK(cudaDeviceEnablePeerAccess(0, 0));
    CHECK(cudaSetDevice(0));
    if (!strcmp(mode, "peer"))
      CHECK(cudaDeviceEnablePeerAccess(1, 0));
    const double t = MPI_Wtime();
    CHECK(cudaMemcpyPeer(p1, 1, d, 0, n));
    CHECK(cudaDeviceSynchronize());
    printf("peer %.17g\n", MPI_Wtime() - t);
  } else if (!strcmp(mode, "peer-serialised")) {  // busy on GPU 1, a peer copy from GPU 0, brief on GPU 1
    float* p1;
    CHECK(cudaSetDevice(1));
    CHECK(cudaMalloc(&p1, n));
    busy<<<1, 1>>>(p1);
    CHECK(cudaSetDevice(0));
    CHECK(cudaDeviceEnablePeerAccess(1, 0));
    CHECK(cudaMemcpyPeer(p1, 1, d, 0, n));
    printf("issued %.17g\n", MPI_Wtime() - t0);
    CHECK(cudaSetDevice(1));
    brief<<<1, 1>>>(p1);
    CHECK(cudaDeviceSynchronize());
    printf("elapsed %.17g\n", MPI_Wtime() - t0);
    if (cudaMemcpyPeer(p1, 7, d, 0, n) != cudaErrorInvalidDevice)
      return 2;
  } else if (!strcmp(mode, "spin-wtime")) {  // waits for 1 ms to pass in its own host code
    const double t = MPI_Wtime();
    while (MPI_Wtime() - t < 1e-3) {
    }
  } else if (!strcmp(mode, "spin-clock")) {  // the same on the host's clock
    timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do
      clock_gettime(CLOCK_MONOTONIC, &b);
    while ((double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec) < 1e-3);
  } else if (!strcmp(mode, "one-stream")) {  // busy then brief in one stream
    busy<<<1, 1, 0, s1>>>(d);
    brief<<<1, 1, 0, s1>>>(d);
    CHECK(cudaStreamSynchronize(s1));
    printf("elapsed %.17g\n", MPI_Wtime() - t0);
  } else if (!strcmp(mode, "two-streams")) {  // busy in s1, brief in s2: brief finishes first
    busy<<<1, 1, 0, s1>>>(d);
    brief<<<1, 1, 0, s2>>>(d);
    CHECK(cudaStreamSynchronize(s2));
    printf("brief_done %.17g\n", MPI_Wtime() - t0);
    CHECK(cudaStreamSynchronize(s1));
    printf("busy_done %.17g\n", MPI_Wtime() - t0);
  } else if (!strcmp(mode, "isend-gpu-wait") || !strcmp(mode, "isend-wait")) {
    // rank 0 sends n bytes of pinned memory to rank 1 with MPI_Isend and, in isend-gpu-wait,
    // waits for a busy kernel before MPI_Wait: the transfer goes on while its sender waits for
    // its GPU, so rank 1 receives it when it would have without the kernel
    MPI_Request rq;
    if (rank == 0) {
      MPI_Isend(h, (int)n, MPI_BYTE, 1, 7, MPI_COMM_WORLD, &rq);
      if (!strcmp(mode, "isend-gpu-wait")) {
        busy<<<1, 1, 0, s1>>>(d);
        CHECK(cudaStreamSynchronize(s1));
      }
      MPI_Wait(&rq, MPI_STATUS_IGNORE);
      printf("sender done %.17g\n", MPI_Wtime() - t0);
    } else if (rank == 1) {
      MPI_Recv(h, (int)n, MPI_BYTE, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      printf("received %.17g\n", MPI_Wtime() - t0);
    }
  } else if (!strcmp(mode, "kernel-copy")) {  // busy in s1 overlaps an H2D copy in s2
    busy<<<1, 1, 0, s1>>>(d);
    CHECK(cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, s2));
    CHECK(cudaDeviceSynchronize());
    printf("elapsed %.17g\n", MPI_Wtime() - t0);
  } else if (!strcmp(mode, "scaled")) {  // alpha + beta * (grid x block threads)
    scaled<<<dim3(40, 2, 1), dim3(128, 2, 1)>>>(d);
    CHECK(cudaDeviceSynchronize());
    printf("elapsed %.17g\n", MPI_Wtime() - t0);
  } else if (!strcmp(mode, "launch-ex")) {
    // cudaLaunchKernelEx on s1 with a priority and a 1x1x1 cluster: the time it returns after
    // ("returned"), scaled's time for the configuration's threads ("elapsed"); then busy with
    // programmatic dependent launch, which stops the run
    cudaLaunchAttribute attrs[2];
    attrs[0].id = cudaLaunchAttributePriority;
    attrs[0].val.priority = 0;
    attrs[1].id = cudaLaunchAttributeClusterDimension;
    attrs[1].val.clusterDim.x = attrs[1].val.clusterDim.y = attrs[1].val.clusterDim.z = 1;
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(40, 2, 1);
    config.blockDim = dim3(128, 2, 1);
    config.stream = s1;
    config.attrs = attrs;
    config.numAttrs = 2;
    CHECK(cudaLaunchKernelEx(&config, scaled, d));
    printf("returned %.17g\n", MPI_Wtime() - t0);
    CHECK(cudaStreamSynchronize(s1));
    printf("elapsed %.17g\n", MPI_Wtime() - t0);
    fflush(stdout);
    attrs[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[0].val.programmaticStreamSerializationAllowed = 1;
    config.numAttrs = 1;
    cudaLaunchKernelEx(&config, busy, d);
  } else if (!strcmp(mode, "events")) {  // elapsed time between two events around busy
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    CHECK(cudaEventRecord(a, s1));
    printf("query_idle %d\n", (int)cudaEventQuery(a));
    busy<<<1, 1, 0, s1>>>(d);
    CHECK(cudaEventRecord(b, s1));
    printf("query_before %d\n", (int)cudaEventQuery(b));
    CHECK(cudaEventSynchronize(b));
    float ms = -1;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    printf("event_ms %.9g\n", ms);
    printf("query_after %d\n", (int)cudaEventQuery(b));
    printf("elapsed %.17g\n", MPI_Wtime() - t0);
  } else if (!strcmp(mode, "legacy")) {  // the legacy default stream waits for blocking s1
    busy<<<1, 1, 0, s1>>>(d);
    brief<<<1, 1>>>(d);  // stream 0
    CHECK(cudaStreamSynchronize(0));
    printf("elapsed %.17g\n", MPI_Wtime() - t0);
  } else if (!strcmp(mode, "destroy")) {  // streams destroyed with work pending, then the rank ends
    busy<<<1, 1, 0, s1>>>(d);
    CHECK(cudaStreamDestroy(s1));  // its work still completes
    CHECK(cudaStreamDestroy(s2));  // idle: its worker ends as the rank does
    CHECK(cudaDeviceSynchronize());
    printf("elapsed %.17g\n", MPI_Wtime() - t0);
  } else if (!strcmp(mode, "per-thread-handle")) {  // cudaStreamPerThread: a blocking stream of its own
    busy<<<1, 1, 0, s1>>>(d);
    brief<<<1, 1, 0, cudaStreamPerThread>>>(d);
    CHECK(cudaStreamSynchronize(cudaStreamPerThread));
    printf("brief_done %.17g\n", MPI_Wtime() - t0);
    unsigned flags = 1;
    CHECK(cudaStreamGetFlags(cudaStreamPerThread, &flags));
    printf("flags %u\n", flags);
    CHECK(cudaDeviceSynchronize());
  } else if (!strcmp(mode, "legacy-nonblocking")) {  // ... but not for a non-blocking stream
    cudaStream_t nb;
    CHECK(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking));
    busy<<<1, 1, 0, nb>>>(d);
    brief<<<1, 1>>>(d);  // stream 0
    CHECK(cudaStreamSynchronize(0));
    printf("elapsed %.17g\n", MPI_Wtime() - t0);
    CHECK(cudaStreamSynchronize(nb));  // busy must not be left running at the end
  } else if (!strcmp(mode, "h2d-two-gpus")) {  // one copy to each of two GPUs at once
    const int a = atoi(argv[3]), b = atoi(argv[4]);
    float *da, *db;
    cudaStream_t sa, sb;
    CHECK(cudaSetDevice(a));
    CHECK(cudaMalloc(&da, n));
    CHECK(cudaStreamCreate(&sa));
    CHECK(cudaSetDevice(b));
    CHECK(cudaMalloc(&db, n));
    CHECK(cudaStreamCreate(&sb));
    const double t1 = MPI_Wtime();
    CHECK(cudaSetDevice(a));
    CHECK(cudaMemcpyAsync(da, h, n, cudaMemcpyHostToDevice, sa));
    CHECK(cudaSetDevice(b));
    CHECK(cudaMemcpyAsync(db, h, n, cudaMemcpyHostToDevice, sb));
    CHECK(cudaStreamSynchronize(sa));
    CHECK(cudaStreamSynchronize(sb));
    printf("elapsed %.17g\n", MPI_Wtime() - t1);
  } else if (!strcmp(mode, "sendrecv-far")) {  // rank r <-> rank r + size/2: one node to the other
    const int peer = (rank + size / 2) % size;
    float* r;
    CHECK(cudaMalloc(&r, n));
    MPI_Sendrecv(d, 1, MPI_BYTE, peer, 0, r, 1, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    const double t1 = MPI_Wtime();
    MPI_Sendrecv(d, (int)n, MPI_BYTE, peer, 0, r, (int)n, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    printf("rank %d elapsed %.17g\n", rank, MPI_Wtime() - t1);
  } else if (!strcmp(mode, "send-recv")) {  // rank 0 sends n bytes to rank 1, which waits already
    float* r;
    CHECK(cudaMalloc(&r, n));
    MPI_Sendrecv(d, 1, MPI_BYTE, rank ^ 1, 0, r, 1, MPI_BYTE, rank ^ 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    const double t1 = MPI_Wtime();
    if (rank == 0)
      MPI_Send(d, (int)n, MPI_BYTE, 1, 5, MPI_COMM_WORLD);
    else
      MPI_Recv(r, (int)n, MPI_BYTE, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    printf("rank %d elapsed %.17g\n", rank, MPI_Wtime() - t1);
  } else if (!strcmp(mode, "ipc-cache")) {
    // rank 0 sends n bytes to rank 1 four times: from d, from d again, from a buffer allocated
    // after d is freed, from that one again; each after a 1-byte exchange that leaves both ranks
    // at the same time (below any eager threshold, so the MPI library takes no CUDA IPC for it)
    float *r, *tiny, *tr;
    CHECK(cudaMalloc(&r, n));
    CHECK(cudaMalloc(&tiny, 1));
    CHECK(cudaMalloc(&tr, 1));
    float* from = d;
    for (int i = 0; i < 4; i++) {
      if (i == 2) {
        CHECK(cudaFree(d));
        CHECK(cudaMalloc(&from, n));
      }
      MPI_Sendrecv(tiny, 1, MPI_BYTE, rank ^ 1, 0, tr, 1, MPI_BYTE, rank ^ 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      const double t1 = MPI_Wtime();
      if (rank == 0)
        MPI_Send(from, (int)n, MPI_BYTE, 1, 5, MPI_COMM_WORLD);
      else
        MPI_Recv(r, (int)n, MPI_BYTE, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      printf("rank %d message %d %.17g\n", rank, i, MPI_Wtime() - t1);
    }
    d = from;
  } else if (!strcmp(mode, "send-after-kernel")) {
    // rank 0 launches busy on d and at once sends d (n bytes) to rank 1: first with busy on a
    // blocking stream (s1), then on a cudaStreamNonBlocking one; each after a 1-byte exchange
    // that leaves both ranks at the same time
    float *r, *tiny, *tr;
    CHECK(cudaMalloc(&r, n));
    CHECK(cudaMalloc(&tiny, 1));
    CHECK(cudaMalloc(&tr, 1));
    cudaStream_t nb;
    CHECK(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking));
    const cudaStream_t streams[2] = {s1, nb};
    const char* names[2] = {"blocking", "nonblocking"};
    for (int i = 0; i < 2; i++) {
      MPI_Sendrecv(tiny, 1, MPI_BYTE, rank ^ 1, 0, tr, 1, MPI_BYTE, rank ^ 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      const double t1 = MPI_Wtime();
      if (rank == 0) {
        busy<<<1, 1, 0, streams[i]>>>(d);
        MPI_Send(d, (int)n, MPI_BYTE, 1, 5, MPI_COMM_WORLD);
      } else {
        MPI_Recv(r, (int)n, MPI_BYTE, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      }
      printf("rank %d %s %.17g\n", rank, names[i], MPI_Wtime() - t1);
      CHECK(cudaStreamSynchronize(streams[i]));
    }
  } else if (!strcmp(mode, "polls")) {
    // rank 1 polls for host messages of n bytes from rank 0: with MPI_Test, then with MPI_Probe
    // and MPI_Iprobe for a message rank 0 sends once it has rank 1's empty "go" message
    char* h = (char*)malloc(n);
    MPI_Sendrecv(h, 1, MPI_BYTE, rank ^ 1, 0, h + 1, 1, MPI_BYTE, rank ^ 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    const double t1 = MPI_Wtime();
    if (rank == 0) {
      MPI_Send(h, (int)n, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
      for (int tag = 2; tag <= 3; tag++) {
        MPI_Recv(h, 0, MPI_BYTE, 1, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(h, (int)n, MPI_BYTE, 1, tag, MPI_COMM_WORLD);
      }
    } else {
      MPI_Request rq;
      int flag = 0, polls = 0;
      MPI_Irecv(h, (int)n, MPI_BYTE, 0, 1, MPI_COMM_WORLD, &rq);
      while (!flag) {
        MPI_Test(&rq, &flag, MPI_STATUS_IGNORE);
        polls++;
      }
      printf("test elapsed %.17g\ntest polls %d\n", MPI_Wtime() - t1, polls);
      const double t2 = MPI_Wtime();
      MPI_Send(h, 0, MPI_BYTE, 0, 9, MPI_COMM_WORLD);
      MPI_Status st;
      MPI_Probe(0, 2, MPI_COMM_WORLD, &st);
      int count;
      MPI_Get_count(&st, MPI_BYTE, &count);
      printf("probe elapsed %.17g\nprobe count %d\n", MPI_Wtime() - t2, count);
      MPI_Recv(h, (int)n, MPI_BYTE, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      const double t3 = MPI_Wtime();
      MPI_Send(h, 0, MPI_BYTE, 0, 9, MPI_COMM_WORLD);
      flag = polls = 0;
      while (!flag) {
        MPI_Iprobe(0, 3, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        polls++;
      }
      printf("iprobe elapsed %.17g\niprobe polls %d\n", MPI_Wtime() - t3, polls);
      MPI_Recv(h, (int)n, MPI_BYTE, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
  } else if (!strcmp(mode, "request-status")) {
    // rank 1 polls its receives of rank 0's host messages with MPI_Request_get_status, which
    // leaves them for its waits: MPI_Wait, MPI_Waitall, a persistent receive's MPI_Wait,
    // MPI_Waitsome and MPI_Testany then MPI_Waitany (tag 9: rank 1's empty "go" messages)
    char* h = (char*)malloc(n);
    MPI_Sendrecv(h, 1, MPI_BYTE, rank ^ 1, 0, h + 1, 1, MPI_BYTE, rank ^ 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    const double t1 = MPI_Wtime();
    if (rank == 0) {
      MPI_Send(h, (int)n, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
      MPI_Send(h, (int)n, MPI_BYTE, 1, 2, MPI_COMM_WORLD);
      const int tags[] = {3, 4, 4, 5, 6};
      const size_t sizes[] = {n, n, n / 2, n, n};
      for (int i = 0; i < 5; i++) {
        MPI_Recv(h, 0, MPI_BYTE, 1, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(h, (int)sizes[i], MPI_BYTE, 1, tags[i], MPI_COMM_WORLD);
      }
    } else {
      auto poll = [](MPI_Request rq, MPI_Status* st) {
        int flag = 0, polls = 0;
        while (!flag) {
          MPI_Request_get_status(rq, &flag, st);
          polls++;
        }
        return polls;
      };
      auto show = [](const char* name, const MPI_Status& st) {
        int count;
        MPI_Get_count(&st, MPI_BYTE, &count);
        printf("%s source %d\n%s tag %d\n%s count %d\n", name, st.MPI_SOURCE, name, st.MPI_TAG, name, count);
      };
      MPI_Status st;
      MPI_Request rq;
      MPI_Irecv(h, (int)n, MPI_BYTE, 0, 1, MPI_COMM_WORLD, &rq);
      printf("status polls %d\n", poll(rq, &st));
      printf("status elapsed %.17g\n", MPI_Wtime() - t1);
      show("status", st);
      int flag = 0;
      MPI_Request_get_status(rq, &flag, MPI_STATUS_IGNORE);  // still complete, at no cost
      printf("again flag %d\nagain elapsed %.17g\n", flag, MPI_Wtime() - t1);
      MPI_Wait(&rq, &st);
      show("wait", st);
      printf("wait null %d\nwait elapsed %.17g\n", rq == MPI_REQUEST_NULL, MPI_Wtime() - t1);

      MPI_Request two[2];  // tag 2 is in (sent after tag 1), tag 3 follows a "go"
      MPI_Irecv(h, (int)n, MPI_BYTE, 0, 2, MPI_COMM_WORLD, &two[0]);
      MPI_Irecv(h, (int)n, MPI_BYTE, 0, 3, MPI_COMM_WORLD, &two[1]);
      printf("waitall polls %d\n", poll(two[0], MPI_STATUS_IGNORE));
      const double t2 = MPI_Wtime();
      MPI_Send(h, 0, MPI_BYTE, 0, 9, MPI_COMM_WORLD);
      MPI_Status sts[2];
      MPI_Waitall(2, two, sts);
      printf("waitall elapsed %.17g\nwaitall null %d\n", MPI_Wtime() - t2,
             two[0] == MPI_REQUEST_NULL && two[1] == MPI_REQUEST_NULL);
      show("waitall 0", sts[0]);
      show("waitall 1", sts[1]);

      MPI_Request p;  // a persistent receive, twice
      MPI_Recv_init(h, (int)n, MPI_BYTE, 0, 4, MPI_COMM_WORLD, &p);
      for (int i = 0; i < 2; i++) {
        MPI_Start(&p);
        const double t3 = MPI_Wtime();
        MPI_Send(h, 0, MPI_BYTE, 0, 9, MPI_COMM_WORLD);
        printf("persistent %d polls %d\n", i, poll(p, MPI_STATUS_IGNORE));
        printf("persistent %d elapsed %.17g\n", i, MPI_Wtime() - t3);
        MPI_Wait(&p, &st);
        show(i ? "persistent 1" : "persistent 0", st);
        printf("persistent %d kept %d\n", i, p != MPI_REQUEST_NULL);
      }
      MPI_Request_get_status(p, &flag, &st);  // inactive: complete, an empty status
      printf("inactive flag %d\n", flag);
      show("inactive", st);
      MPI_Request_free(&p);
      printf("freed null %d\n", p == MPI_REQUEST_NULL);

      MPI_Irecv(h, (int)n, MPI_BYTE, 0, 5, MPI_COMM_WORLD, &two[0]);
      MPI_Irecv(h, (int)n, MPI_BYTE, 0, 6, MPI_COMM_WORLD, &two[1]);
      MPI_Send(h, 0, MPI_BYTE, 0, 9, MPI_COMM_WORLD);
      printf("waitsome polls %d\n", poll(two[0], MPI_STATUS_IGNORE));
      const double t4 = MPI_Wtime();
      int out = 0, index[2];
      MPI_Waitsome(2, two, &out, index, sts);  // tag 5 is in, tag 6 not yet sent: no wait
      printf("waitsome out %d\nwaitsome index %d\nwaitsome elapsed %.17g\n", out, index[0], MPI_Wtime() - t4);
      show("waitsome", sts[0]);
      MPI_Testany(2, two, &index[0], &flag, &st);
      printf("testany flag %d\n", flag);
      MPI_Send(h, 0, MPI_BYTE, 0, 9, MPI_COMM_WORLD);
      MPI_Waitany(2, two, &index[0], &st);
      printf("waitany index %d\n", index[0]);
      show("waitany", st);
    }
  } else if (!strcmp(mode, "sendrecv-host")) {  // the same exchange from pageable host memory
    const int peer = (rank + size / 2) % size;
    char* hs = (char*)malloc(n);
    char* hr = (char*)malloc(n);
    memset(hs, 1, n);
    MPI_Sendrecv(hs, 1, MPI_BYTE, peer, 0, hr, 1, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    const double t1 = MPI_Wtime();
    MPI_Sendrecv(hs, (int)n, MPI_BYTE, peer, 0, hr, (int)n, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    printf("rank %d elapsed %.17g\n", rank, MPI_Wtime() - t1);
    printf("rank %d data %d\n", rank, (int)hr[n - 1]);  // host data really moves
    // the same with non-blocking calls
    MPI_Request rq[2];
    const double t2 = MPI_Wtime();
    MPI_Irecv(hr, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &rq[0]);
    MPI_Isend(hs, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &rq[1]);
    MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
    printf("rank %d nonblocking %.17g\n", rank, MPI_Wtime() - t2);
    free(hs);
    free(hr);
  } else if (!strcmp(mode, "mixed")) {  // host and device buffers in play at once
    const int peer = rank ^ 1;
    auto [r, hs, hr] = mixed_buffers(n);
    MPI_Request rq[4];  // point-to-point requests of both kinds pending together
    MPI_Irecv(hr, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &rq[0]);
    MPI_Isend(hs, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &rq[1]);
    MPI_Irecv(r, (int)n, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &rq[2]);
    MPI_Isend(d, (int)n, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &rq[3]);
    MPI_Waitall(4, rq, MPI_STATUSES_IGNORE);
    MPI_Sendrecv(hs, (int)n, MPI_BYTE, peer, 3, hr, (int)n, MPI_BYTE, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Sendrecv(d, (int)n, MPI_BYTE, peer, 4, r, (int)n, MPI_BYTE, peer, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Sendrecv(hs, (int)n, MPI_BYTE, peer, 5, r, (int)n, MPI_BYTE, peer, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    // a non-blocking collective on host buffers pending during a device exchange, then a
    // collective from a host to a device buffer
    MPI_Request c;
    MPI_Iallreduce(hs, hr, (int)n / 4, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &c);
    MPI_Sendrecv(d, (int)n, MPI_BYTE, peer, 6, r, (int)n, MPI_BYTE, peer, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Wait(&c, MPI_STATUS_IGNORE);
    MPI_Allreduce(hs, r, (int)n / 4, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    free(hs);
    free(hr);
    printf("rank %d done\n", rank);
  } else if (!strcmp(mode, "mixed-post")) {  // with a device receive pending, rank 0 sends host data
    // to rank 1, whose receive is posted already: the message starts as rank 0 posts it
    const int peer = 1 - rank;
    auto [r, hs, hr] = mixed_buffers(n);
    char go = 1;
    MPI_Request rq[2];
    if (rank == 0) {
      MPI_Irecv(r, (int)n, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &rq[0]);  // device memory, pending
      MPI_Recv(&go, 1, MPI_BYTE, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);  // rank 1's receive is posted
      printf("rank 0 sent %.17g\n", MPI_Wtime());
      MPI_Isend(hs, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &rq[1]);
      MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
    } else if (rank == 1) {
      MPI_Irecv(hr, (int)n, MPI_BYTE, 0, 1, MPI_COMM_WORLD, &rq[0]);
      MPI_Send(&go, 1, MPI_BYTE, 0, 3, MPI_COMM_WORLD);
      MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
      printf("rank %d arrived %.17g\n", rank, MPI_Wtime());
      MPI_Send(d, (int)n, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
    }
    free(hs);
    free(hr);
  } else if (!strcmp(mode, "mixed-wait")) {  // rank 0 waits on a host and a device receive at once;
    // rank 1 sends into them once both are posted, the host message first
    const int peer = 1 - rank;
    auto [r, hs, hr] = mixed_buffers(n);
    char go = 1;
    if (rank == 0) {
      MPI_Request rq[2];
      MPI_Irecv(hr, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &rq[0]);
      MPI_Irecv(r, (int)n, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &rq[1]);
      MPI_Send(&go, 1, MPI_BYTE, peer, 3, MPI_COMM_WORLD);
      MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
    } else if (rank == 1) {
      MPI_Recv(&go, 1, MPI_BYTE, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      // at or above the eager thresholds each send is synchronous: it returns as its message arrives
      const double t0 = MPI_Wtime();
      MPI_Send(hs, (int)n, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
      const double t1 = MPI_Wtime();
      MPI_Send(d, (int)n, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
      printf("rank 1 host %.17g\n", t1 - t0);
      printf("rank 1 device %.17g\n", MPI_Wtime() - t1);
    }
    free(hs);
    free(hr);
  } else if (!strcmp(mode, "mixed-persistent")) {  // mixed-wait with persistent requests, twice
    const int peer = 1 - rank;
    auto [r, hs, hr] = mixed_buffers(n);
    char go = 1;
    MPI_Request rq[2];
    if (rank == 0) {
      MPI_Recv_init(hr, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &rq[0]);
      MPI_Recv_init(r, (int)n, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &rq[1]);
    } else if (rank == 1) {
      MPI_Send_init(hs, (int)n, MPI_BYTE, 0, 1, MPI_COMM_WORLD, &rq[0]);
      MPI_Ssend_init(d, (int)n, MPI_BYTE, 0, 2, MPI_COMM_WORLD, &rq[1]);
    }
    for (int round = 0; round < 2 && rank < 2; round++) {
      if (rank == 0) {
        MPI_Startall(2, rq);
        MPI_Send(&go, 1, MPI_BYTE, peer, 3, MPI_COMM_WORLD);
        MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
      } else {
        MPI_Recv(&go, 1, MPI_BYTE, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        const double t0 = MPI_Wtime();
        MPI_Start(&rq[0]);
        MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
        const double t1 = MPI_Wtime();
        MPI_Start(&rq[1]);
        MPI_Wait(&rq[1], MPI_STATUS_IGNORE);
        printf("rank 1 host %d %.17g\n", round, t1 - t0);
        printf("rank 1 device %d %.17g\n", round, MPI_Wtime() - t1);
      }
    }
    if (rank < 2) {
      MPI_Request_free(&rq[0]);
      MPI_Request_free(&rq[1]);
    }
    free(hs);
    free(hr);
  } else if (!strcmp(mode, "collective-late")) {  // rank 1 enters host-buffer broadcasts from rank 0
    // once rank 0 has moved on to device memory: a non-blocking one of n bytes, then a blocking
    // one of 4 KiB, whose eager message rank 0 sends before it leaves the call
    float* r;
    CHECK(cudaMalloc(&r, n));
    char* h = (char*)malloc(n);
    const int small = 4096;
    if (rank == 0) {
      MPI_Request rq;
      MPI_Ibcast(h, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD, &rq);
      MPI_Send(d, 1, MPI_BYTE, 1, 1, MPI_COMM_WORLD);  // from device memory: rank 1 may start
      MPI_Wait(&rq, MPI_STATUS_IGNORE);
      MPI_Bcast(h, small, MPI_BYTE, 0, MPI_COMM_WORLD);
      MPI_Send(d, 1, MPI_BYTE, 1, 2, MPI_COMM_WORLD);
      MPI_Barrier(MPI_COMM_WORLD);
    } else if (rank == 1) {
      MPI_Request rq;
      MPI_Recv(r, 1, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      const double t0 = MPI_Wtime();
      MPI_Ibcast(h, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD, &rq);
      MPI_Wait(&rq, MPI_STATUS_IGNORE);
      printf("rank 1 ibcast %.17g\n", MPI_Wtime() - t0);
      MPI_Recv(r, 1, MPI_BYTE, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      const double t1 = MPI_Wtime();
      MPI_Bcast(h, small, MPI_BYTE, 0, MPI_COMM_WORLD);
      printf("rank 1 bcast %.17g\n", MPI_Wtime() - t1);
      MPI_Barrier(MPI_COMM_WORLD);
    }
    free(h);
  } else if (!strcmp(mode, "send-modes")) {  // rank 1 sends host data to rank 0's posted receives:
    // a ready send, then a buffered one
    auto [r, hs, hr] = mixed_buffers(n);
    char* hr2 = (char*)malloc(n);
    char go = 1;
    if (rank == 0) {
      MPI_Request rq[2];
      MPI_Irecv(hr, (int)n, MPI_BYTE, 1, 1, MPI_COMM_WORLD, &rq[0]);
      MPI_Irecv(hr2, (int)n, MPI_BYTE, 1, 2, MPI_COMM_WORLD, &rq[1]);
      MPI_Send(&go, 1, MPI_BYTE, 1, 3, MPI_COMM_WORLD);
      MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
      printf("rank 0 rsend arrived %.17g\n", MPI_Wtime());
      MPI_Wait(&rq[1], MPI_STATUS_IGNORE);
      printf("rank 0 bsend arrived %.17g\n", MPI_Wtime());
    } else if (rank == 1) {
      MPI_Recv(&go, 1, MPI_BYTE, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      printf("rank 1 rsend sent %.17g\n", MPI_Wtime());
      MPI_Rsend(hs, (int)n, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
      printf("rank 1 rsend returned %.17g\n", MPI_Wtime());
      int space = (int)n + MPI_BSEND_OVERHEAD;
      char* attached = (char*)malloc(space);
      MPI_Buffer_attach(attached, space);
      printf("rank 1 bsend sent %.17g\n", MPI_Wtime());
      MPI_Bsend(hs, (int)n, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
      printf("rank 1 bsend returned %.17g\n", MPI_Wtime());
      MPI_Buffer_detach(&attached, &space);
      free(attached);
    }
    free(hs);
    free(hr);
    free(hr2);
  } else if (!strcmp(mode, "sendrecv")) {  // device buffers between rank pairs (0,1), (2,3), ...
    const int peer = rank ^ 1;
    float* r;
    CHECK(cudaMalloc(&r, n));
    // A first exchange leaves both ranks at the same simulated time (a barrier
    // releases its ranks one latency apart); the second one is measured.
    MPI_Sendrecv(d, (int)n, MPI_BYTE, peer, 0, r, (int)n, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    const double t1 = MPI_Wtime();
    MPI_Sendrecv(d, (int)n, MPI_BYTE, peer, 0, r, (int)n, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    printf("rank %d elapsed %.17g\n", rank, MPI_Wtime() - t1);
  } else if (!strcmp(mode, "isend")) {  // the same exchange with non-blocking calls
    const int peer = rank ^ 1;
    float* r;
    CHECK(cudaMalloc(&r, n));
    MPI_Sendrecv(d, (int)n, MPI_BYTE, peer, 0, r, (int)n, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    const double t1 = MPI_Wtime();
    MPI_Request rq[2];
    MPI_Irecv(r, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &rq[0]);
    MPI_Isend(d, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &rq[1]);
    MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
    printf("rank %d elapsed %.17g\n", rank, MPI_Wtime() - t1);
  } else if (!strcmp(mode, "window")) {  // rank 0 sends a window of 8 messages to rank 1, as osu_bw
    const int window = 8;
    float* r;
    CHECK(cudaMalloc(&r, n));
    MPI_Sendrecv(d, 1, MPI_BYTE, rank ^ 1, 0, r, 1, MPI_BYTE, rank ^ 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Request rq[window];
    double first = 0;
    for (int w = 0; w < window; w++) {
      if (rank == 0)
        MPI_Isend(d, (int)n, MPI_BYTE, 1, 7, MPI_COMM_WORLD, &rq[w]);
      else
        MPI_Irecv(r, (int)n, MPI_BYTE, 0, 7, MPI_COMM_WORLD, &rq[w]);
      if (w == 0)
        first = MPI_Wtime();
    }
    printf("rank %d spacing %.17g\n", rank, MPI_Wtime() - first);  // from the first call's return to the last's
    MPI_Waitall(window, rq, MPI_STATUSES_IGNORE);
  } else if (!strcmp(mode, "collectives")) {  // collectives on device buffers
    float* r;
    CHECK(cudaMalloc(&r, n * size));
    const int count = (int)(n / sizeof(float));
    MPI_Sendrecv(d, 1, MPI_BYTE, rank ^ 1, 0, r, 1, MPI_BYTE, rank ^ 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    double t1 = MPI_Wtime();
    MPI_Bcast(d, count, MPI_FLOAT, 0, MPI_COMM_WORLD);
    printf("rank %d bcast %.17g\n", rank, MPI_Wtime() - t1);
    // level with the pair again: the root's eager broadcast returned before its peer's arrived
    MPI_Sendrecv(d, 1, MPI_BYTE, rank ^ 1, 0, r, 1, MPI_BYTE, rank ^ 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    t1 = MPI_Wtime();
    MPI_Allreduce(d, r, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d allreduce %.17g\n", rank, MPI_Wtime() - t1);
    MPI_Allgather(d, count, MPI_FLOAT, r, count, MPI_FLOAT, MPI_COMM_WORLD);
    MPI_Alltoall(r, count, MPI_FLOAT, d, count, MPI_FLOAT, MPI_COMM_WORLD);
    MPI_Reduce_scatter_block(r, d, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Request rq;
    MPI_Iallreduce(d, r, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &rq);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
    printf("rank %d done\n", rank);
  } else if (!strcmp(mode, "api")) {  // one timed segment per API
    float *d1, *p2;
    CHECK(cudaMalloc(&d1, n));
    CHECK(cudaSetDevice(1));
    CHECK(cudaMalloc(&p2, n));
    CHECK(cudaSetDevice(0));
    CHECK(cudaDeviceEnablePeerAccess(1, 0));
    double t = MPI_Wtime();
#define SEGMENT(name)                                   \
  printf(name " %.17g\n", MPI_Wtime() - t);             \
  t = MPI_Wtime()
    CHECK(cudaMemcpyPeer(p2, 1, d, 0, n));
    printf("peer_return %.17g\n", MPI_Wtime() - t);  // device to device: no host-side synchronisation
    CHECK(cudaDeviceSynchronize());
    SEGMENT("peer");
    CHECK(cudaMemcpy(d1, d, n, cudaMemcpyDeviceToDevice));
    printf("d2d_return %.17g\n", MPI_Wtime() - t);
    CHECK(cudaDeviceSynchronize());
    SEGMENT("d2d");
    CHECK(cudaMemcpy(d, h, n, cudaMemcpyDefault));  // inferred: pinned host -> device
    SEGMENT("default_h2d");
    CHECK(cudaMemcpy2D(d, 4096, h, 2048, 1024, n / 4096, cudaMemcpyHostToDevice));
    SEGMENT("h2d_2d");
    CHECK(cudaMemset(d, 0, n));
    CHECK(cudaDeviceSynchronize());
    SEGMENT("memset");
    void* args[] = {&d};
    CHECK(cudaLaunchKernel((const void*)busy, dim3(1), dim3(1), args, 0, s1));
    printf("query_busy %d\n", (int)cudaStreamQuery(s1));
    CHECK(cudaStreamSynchronize(s1));
    printf("query_idle %d\n", (int)cudaStreamQuery(s1));
    SEGMENT("launch_api");
    brief<<<0, 1>>>(d);  // invalid configuration: nothing runs
    printf("peek %d\n", (int)cudaPeekAtLastError());
    printf("get %d\n", (int)cudaGetLastError());
    printf("after %d\n", (int)cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    SEGMENT("invalid_launch");
    cudaStream_t hi;
    int lo_prio, hi_prio, got;
    CHECK(cudaDeviceGetStreamPriorityRange(&lo_prio, &hi_prio));
    CHECK(cudaStreamCreateWithPriority(&hi, cudaStreamNonBlocking, hi_prio - 3));
    CHECK(cudaStreamGetPriority(hi, &got));
    printf("priority %d %d %d\n", lo_prio, hi_prio, got);
#undef SEGMENT
  } else if (!strcmp(mode, "copy-same") || !strcmp(mode, "copy-opposite")) {
    // two copies in two streams: the same direction queue for one copy engine
    float* d1;
    CHECK(cudaMalloc(&d1, n));
    CHECK(cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, s1));
    if (!strcmp(mode, "copy-same"))
      CHECK(cudaMemcpyAsync(d1, h, n, cudaMemcpyHostToDevice, s2));
    else
      CHECK(cudaMemcpyAsync(h, d1, n, cudaMemcpyDeviceToHost, s2));
    CHECK(cudaStreamSynchronize(s1));
    printf("first %.17g\n", MPI_Wtime() - t0);
    CHECK(cudaStreamSynchronize(s2));
    printf("second %.17g\n", MPI_Wtime() - t0);
  } else if (!strcmp(mode, "event-join")) {  // s2 waits for busy in s1 through an event
    cudaEvent_t e;
    CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    busy<<<1, 1, 0, s1>>>(d);
    CHECK(cudaEventRecord(e, s1));
    CHECK(cudaStreamWaitEvent(s2, e, 0));
    brief<<<1, 1, 0, s2>>>(d);
    CHECK(cudaStreamSynchronize(s2));
    printf("elapsed %.17g\n", MPI_Wtime() - t0);
  } else if (!strcmp(mode, "callback")) {  // a host function runs in stream order
    busy<<<1, 1, 0, s1>>>(d);
    CHECK(cudaLaunchHostFunc(s1, on_host, &callback_runs));
    brief<<<1, 1, 0, s1>>>(d);
    printf("runs_before %d\n", callback_runs);
    CHECK(cudaStreamSynchronize(s1));
    printf("runs_after %d\n", callback_runs);
    printf("elapsed %.17g\n", MPI_Wtime() - t0);
  } else if (!strcmp(mode, "priority")) {  // brief on a high-priority stream overtakes busy
    cudaStream_t lo, hi;
    CHECK(cudaStreamCreateWithPriority(&lo, cudaStreamNonBlocking, 0));
    CHECK(cudaStreamCreateWithPriority(&hi, cudaStreamNonBlocking, -1));
    busy<<<1, 1, 0, lo>>>(d);
    brief<<<1, 1, 0, hi>>>(d);
    CHECK(cudaStreamSynchronize(hi));
    printf("brief_done %.17g\n", MPI_Wtime() - t0);
    CHECK(cudaStreamSynchronize(lo));
    printf("busy_done %.17g\n", MPI_Wtime() - t0);
  } else if (!strcmp(mode, "iallreduce-kernel") || !strcmp(mode, "iallreduce")) {
    // a non-blocking allreduce of device buffers, with or without a kernel running beside it
    float* r;
    CHECK(cudaMalloc(&r, n));
    MPI_Sendrecv(d, 1, MPI_BYTE, rank ^ 1, 0, r, 1, MPI_BYTE, rank ^ 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    const double t1 = MPI_Wtime();
    if (!strcmp(mode, "iallreduce-kernel")) busy<<<1, 1, 0, s1>>>(d);
    MPI_Request rq;
    MPI_Iallreduce(d, r, (int)(n / sizeof(float)), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &rq);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
    CHECK(cudaStreamSynchronize(s1));
    printf("rank %d elapsed %.17g\n", rank, MPI_Wtime() - t1);
  } else if (!strcmp(mode, "isend-kernel")) {  // a message between nodes while busy runs
    const int peer = rank ^ 1;
    float* r;
    CHECK(cudaMalloc(&r, n));
    MPI_Sendrecv(d, 1, MPI_BYTE, peer, 0, r, 1, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    const double t1 = MPI_Wtime();
    busy<<<1, 1, 0, s1>>>(d);
    MPI_Request rq[2];
    MPI_Irecv(r, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &rq[0]);
    MPI_Isend(d, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &rq[1]);
    MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
    CHECK(cudaStreamSynchronize(s1));
    printf("rank %d elapsed %.17g\n", rank, MPI_Wtime() - t1);
  } else if (!strcmp(mode, "fill")) {  // what a D2H copy leaves in host memory
    float small_h[4];
    double dbl;
    int* di;
    CHECK(cudaMalloc(&di, sizeof(double)));
    CHECK(cudaMemcpy(small_h, d, sizeof small_h, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(&dbl, di, sizeof dbl, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost));
    printf("float %.9g\ndouble %.17g\npinned_last %.9g\n", small_h[3], dbl, h[n / sizeof(float) - 1]);
    // A residual loop that only a "not converged" value keeps going.
    int it = 0;
    float norm = 1;
    while (norm > 1e-6f && it < 25) {
      CHECK(cudaMemcpy(&norm, d, sizeof norm, cudaMemcpyDeviceToHost));
      it++;
    }
    printf("iterations %d\n", it);
  } else if (!strncmp(mode, "ahead", 5)) {
    // Rank 0's launch overhead (ahead-launch, ahead-ireduce-launch), then an MPI call the shim does
    // not wrap, MPI_Igather (ahead, ahead-launch), or MPI_Ireduce, which liborrery_smpi.so runs in
    // the kernel (ahead-ireduce, ahead-ireduce-launch): rank 1, the root, waits in it for rank 0's
    // message, which leaves no sooner than the launch returned. Then rank 0's host clock and
    // MPI_Wtime read right after a launch.
    if (rank == 0 && strstr(mode, "launch"))
      brief<<<1, 1, 0, s1>>>(d);
    float v = 1, sum = 0, all[2];
    MPI_Request rq;
    if (strstr(mode, "ireduce"))
      MPI_Ireduce(&v, &sum, 1, MPI_FLOAT, MPI_SUM, 1, MPI_COMM_WORLD, &rq);
    else
      MPI_Igather(&v, 1, MPI_FLOAT, all, 1, MPI_FLOAT, 1, MPI_COMM_WORLD, &rq);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
    if (rank == 1)
      printf("reduced %.17g\n", MPI_Wtime() - t0);
    if (rank == 0) {
      CHECK(cudaStreamSynchronize(s1));
      const double t1 = MPI_Wtime();
      brief<<<1, 1, 0, s1>>>(d);
      timespec ts;
      clock_gettime(CLOCK_MONOTONIC, &ts);
      printf("clock %.17g\n", (double)ts.tv_sec + ts.tv_nsec * 1e-9 - t1);
      printf("wtime %.17g\n", MPI_Wtime() - t1);
      CHECK(cudaStreamSynchronize(s1));
    }
  } else if (!strcmp(mode, "halo")) {  // a Jacobi iteration's calls, N times (BYTES: N), in a ring
    const int up = (rank + size - 1) % size, down = (rank + 1) % size;
    float *norm_d, *norm_h, *halo;
    CHECK(cudaMalloc(&norm_d, sizeof(float)));
    CHECK(cudaMallocHost(&norm_h, sizeof(float)));  // pinned, as Jacobi's: its copy does not wait
    CHECK(cudaMalloc(&halo, 4 * 1024 * sizeof(float)));
    float sum = 0;
    for (size_t it = 0; it < n; it++) {
      CHECK(cudaMemsetAsync(norm_d, 0, sizeof(float), s1));
      busy<<<1, 1, 0, s1>>>(d);
      CHECK(cudaGetLastError());
      CHECK(cudaMemcpyAsync(norm_h, norm_d, sizeof(float), cudaMemcpyDeviceToHost, s1));
      CHECK(cudaStreamSynchronize(s1));
      MPI_Sendrecv(halo, 1024, MPI_FLOAT, up, 0, halo + 1024, 1024, MPI_FLOAT, down, 0, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE);
      MPI_Sendrecv(halo + 2048, 1024, MPI_FLOAT, down, 0, halo + 3072, 1024, MPI_FLOAT, up, 0, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE);
      MPI_Allreduce(norm_h, &sum, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    printf("rank %d elapsed %.17g\n", rank, MPI_Wtime() - t0);
  } else if (!strcmp(mode, "unsupported")) {
    void* p;
    size_t pitch;
    cudaMallocPitch(&p, &pitch, 64, 64);
  } else if (!strcmp(mode, "exit")) {
    MPI_Finalize();
    return 7;
  } else {
    fprintf(stderr, "unknown mode '%s'\n", mode);
    return 2;
  }
  MPI_Finalize();
  return 0;
}
