// Small 2-rank scenarios whose timeline traces tests/native/test_trace.py derives by hand.
// Usage: trace MODE [H2D_BYTES MESSAGE_BYTES]; each rank uses GPU `rank` of its node and
// nothing takes simulated time before the mode's first call.
//   golden: rank 0 copies H2D_BYTES to its GPU (cudaMemcpy from pinned memory), runs `work`
//           (its cost from the test's cost file) and waits for it, then sends MESSAGE_BYTES of
//           device memory to rank 1 (tag 7), which receives them.
//   pairs:  rank 0 sends A (tag 5), B (tag 5), C (tag 6); rank 1 receives them with wildcard
//           receives posted in that order and waited for in the reverse order, then both call
//           MPI_Allreduce on one double. Rank 1 prints which message each receive got. Then the
//           ranks swap 8 bytes with MPI_Sendrecv_replace (tag 9), and rank 0 sends 16 bytes twice
//           through a persistent request (tag 11) that rank 1 receives through one of its own.
//   comms:  rank 0 sends 4, 8 and 12 bytes with one tag on MPI_COMM_WORLD, a duplicate of it and
//           a split of it; rank 1 receives them on the split, the duplicate, then the world (any
//           source, any tag).
//   abort:  rank 1 launches `work` twice and aborts while the first runs; rank 0 is blocked
//           receiving from it.
//   join:   rank 0 launches `work` on a stream, records an event behind it, makes a second
//           stream wait for the event, launches `work` there and waits for that stream.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

__global__ void work(float* x) {}  // its cost comes from the test's cost file

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const char* mode = argc > 1 ? argv[1] : "";
  const size_t h2d = argc > 2 ? strtoull(argv[2], nullptr, 10) : 1 << 20;
  const size_t message = argc > 3 ? strtoull(argv[3], nullptr, 10) : 1 << 20;
  cudaSetDevice(rank);
  float* d;
  char* h;
  cudaMalloc(&d, h2d > message ? h2d : message);
  cudaMallocHost(&h, h2d);

  if (!strcmp(mode, "golden")) {
    if (rank == 0) {
      cudaMemcpy(d, h, h2d, cudaMemcpyHostToDevice);
      work<<<4, 256>>>(d);
      cudaDeviceSynchronize();
      MPI_Send(d, (int)message, MPI_BYTE, 1, 7, MPI_COMM_WORLD);
    } else {
      MPI_Recv(d, (int)message, MPI_BYTE, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
  } else if (!strcmp(mode, "pairs")) {
    int a[250], b[500], c[750];  // 1000, 2000 and 3000 bytes, each filled with its message's number
    if (rank == 0) {
      for (int& x : a) x = 1;
      for (int& x : b) x = 2;
      for (int& x : c) x = 3;
      MPI_Request rq[2];
      MPI_Isend(a, 250, MPI_INT, 1, 5, MPI_COMM_WORLD, &rq[0]);
      MPI_Isend(b, 500, MPI_INT, 1, 5, MPI_COMM_WORLD, &rq[1]);
      MPI_Send(c, 750, MPI_INT, 1, 6, MPI_COMM_WORLD);
      MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
    } else {
      static int r1[750], r2[750], r3[750];
      MPI_Request rq[3];
      MPI_Irecv(r1, 750, MPI_INT, MPI_ANY_SOURCE, 5, MPI_COMM_WORLD, &rq[0]);
      MPI_Irecv(r2, 750, MPI_INT, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &rq[1]);
      MPI_Irecv(r3, 750, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &rq[2]);
      MPI_Wait(&rq[2], MPI_STATUS_IGNORE);
      MPI_Wait(&rq[1], MPI_STATUS_IGNORE);
      MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
      printf("first receive got %d\nsecond receive got %d\nthird receive got %d\n", r1[0], r2[0], r3[0]);
    }
    double x = rank, sum = 0;
    MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Sendrecv_replace(&x, 1, MPI_DOUBLE, 1 - rank, 9, 1 - rank, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    double pair[2] = {0, 0};
    MPI_Request p;
    if (rank == 0)
      MPI_Send_init(pair, 2, MPI_DOUBLE, 1, 11, MPI_COMM_WORLD, &p);
    else
      MPI_Recv_init(pair, 2, MPI_DOUBLE, 0, 11, MPI_COMM_WORLD, &p);
    for (int i = 0; i < 2; i++) {
      MPI_Start(&p);
      MPI_Wait(&p, MPI_STATUS_IGNORE);
    }
    MPI_Request_free(&p);
  } else if (!strcmp(mode, "comms")) {
    MPI_Comm dup, split;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &split);
    int x[3] = {0, 0, 0};
    if (rank == 0) {
      MPI_Send(x, 1, MPI_INT, 1, 1, MPI_COMM_WORLD);
      MPI_Send(x, 2, MPI_INT, 1, 1, dup);
      MPI_Send(x, 3, MPI_INT, 1, 1, split);
    } else {
      MPI_Recv(x, 3, MPI_INT, 0, 1, split, MPI_STATUS_IGNORE);
      MPI_Recv(x, 3, MPI_INT, 0, 1, dup, MPI_STATUS_IGNORE);
      MPI_Recv(x, 3, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    MPI_Comm_free(&dup);
    MPI_Comm_free(&split);
  } else if (!strcmp(mode, "join")) {
    if (rank == 0) {
      cudaStream_t s1, s2;
      cudaEvent_t e;
      cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking);
      cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking);
      cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
      work<<<1, 1, 0, s1>>>(d);
      cudaEventRecord(e, s1);
      cudaStreamWaitEvent(s2, e, 0);
      work<<<1, 1, 0, s2>>>(d);
      cudaStreamSynchronize(s2);
    }
  } else if (!strcmp(mode, "abort")) {
    if (rank == 1) {
      work<<<1, 1>>>(d);
      work<<<1, 1>>>(d);
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
    int token;
    MPI_Recv(&token, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else {
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
  }
  MPI_Finalize();
  return 0;
}
