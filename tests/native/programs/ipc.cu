// CUDA IPC between the two ranks of a node, each on its own GPU (cudaSetDevice(rank)).
// Usage: ipc MODE [N]; prints "name value" lines (tests/native/test_ipc.py).
//   memory N  rank 0 allocates N bytes and sends rank 1 their handle; rank 1 copies them to its
//             own GPU; the handle's errors; rank 0 frees while rank 1 has it open, then rank 1
//             closes it (rank 0's memory in use at each step)
//   remote    rank 0 sends the handle of an allocation to rank 1, on another node, which opens it
//   event     rank 0 records an interprocess event after busy (100 us) and sends its handle and
//             the time its launch returned; rank 1 makes a stream wait for it, then runs brief
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

__global__ void busy(float*) {}
__global__ void brief(float*) {}

static size_t used() {
  size_t free_b, total_b;
  cudaMemGetInfo(&free_b, &total_b);
  return total_b - free_b;
}

static void error(int rank, const char* what, cudaError_t e) {
  printf("r%d_%s %d\n", rank, what, (int)e);
  cudaGetLastError();
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  cudaSetDevice(rank);
  const char* mode = argc > 1 ? argv[1] : "";
  size_t n = argc > 2 ? strtoull(argv[2], nullptr, 10) : 1 << 20;
  if (!strcmp(mode, "memory")) {
    cudaIpcMemHandle_t h;
    void* buf = nullptr;
    if (rank == 0) {
      cudaMalloc(&buf, n);
      error(rank, "get", cudaIpcGetMemHandle(&h, buf));
      error(rank, "get_inside", cudaIpcGetMemHandle(&h, (char*)buf + 1));  // not an allocation's base
      cudaIpcGetMemHandle(&h, buf);
      MPI_Send(&h, sizeof h, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
      void* own;
      error(rank, "open_own", cudaIpcOpenMemHandle(&own, h, cudaIpcMemLazyEnablePeerAccess));
      MPI_Barrier(MPI_COMM_WORLD);  // 1: rank 1 copied
      error(rank, "free", cudaFree(buf));
      printf("r0_used_after_free %zu\n", used());
      MPI_Barrier(MPI_COMM_WORLD);  // 2
      MPI_Barrier(MPI_COMM_WORLD);  // 3: rank 1 closed
      printf("r0_used_after_close %zu\n", used());
    } else {
      MPI_Recv(&h, sizeof h, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      void* peer;
      error(rank, "open_no_flag", cudaIpcOpenMemHandle(&peer, h, 0));
      error(rank, "open", cudaIpcOpenMemHandle(&peer, h, cudaIpcMemLazyEnablePeerAccess));
      void* local;
      cudaMalloc(&local, n);
      double t0 = MPI_Wtime();
      cudaMemcpy(local, peer, n, cudaMemcpyDeviceToDevice);
      cudaDeviceSynchronize();
      printf("r1_copy %.9e\n", MPI_Wtime() - t0);
      MPI_Barrier(MPI_COMM_WORLD);  // 1
      MPI_Barrier(MPI_COMM_WORLD);  // 2: rank 0 freed
      void* again;
      error(rank, "open_after_free", cudaIpcOpenMemHandle(&again, h, cudaIpcMemLazyEnablePeerAccess));
      error(rank, "close", cudaIpcCloseMemHandle(peer));
      error(rank, "close_again", cudaIpcCloseMemHandle(peer));
      MPI_Barrier(MPI_COMM_WORLD);  // 3
    }
  } else if (!strcmp(mode, "remote")) {
    cudaSetDevice(0);  // one GPU a node
    cudaIpcMemHandle_t h;
    if (rank == 0) {
      void* buf;
      cudaMalloc(&buf, n);
      cudaIpcGetMemHandle(&h, buf);
      MPI_Send(&h, sizeof h, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
    } else {
      MPI_Recv(&h, sizeof h, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      void* peer;
      error(rank, "open_remote", cudaIpcOpenMemHandle(&peer, h, cudaIpcMemLazyEnablePeerAccess));
    }
  } else if (!strcmp(mode, "event")) {
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    float* x;
    cudaMalloc(&x, 1024);
    struct {
      cudaIpcEventHandle_t h;
      double launched;
    } msg;
    if (rank == 0) {
      cudaEvent_t timed, e;
      cudaEventCreate(&timed);
      error(rank, "get_timed", cudaIpcGetEventHandle(&msg.h, timed));  // not interprocess
      error(rank, "create_timed_ipc", cudaEventCreateWithFlags(&e, cudaEventInterprocess));
      cudaEventCreateWithFlags(&e, cudaEventInterprocess | cudaEventDisableTiming);
      busy<<<1, 1, 0, s>>>(x);
      msg.launched = MPI_Wtime();
      cudaEventRecord(e, s);
      cudaIpcGetEventHandle(&msg.h, e);
      MPI_Send(&msg, sizeof msg, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
      MPI_Barrier(MPI_COMM_WORLD);  // rank 1 destroyed its handle: the event is still rank 0's
      error(rank, "query_after_peer_destroy", cudaEventQuery(e));
    } else {
      MPI_Recv(&msg, sizeof msg, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      cudaEvent_t e;
      error(rank, "open", cudaIpcOpenEventHandle(&e, msg.h));
      cudaStreamWaitEvent(s, e, 0);
      brief<<<1, 1, 0, s>>>(x);
      cudaStreamSynchronize(s);
      printf("r1_done_after_launch %.9e\n", MPI_Wtime() - msg.launched);
      cudaEventDestroy(e);
      MPI_Barrier(MPI_COMM_WORLD);
    }
    cudaDeviceSynchronize();
  }
  MPI_Finalize();
  return 0;
}
