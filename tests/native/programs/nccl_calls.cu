// NCCL calls for tests/native/test_nccl.py, built against NCCL's real header (the nvidia-nccl-cu13
// wheel's, .venv/nccl/include) and linked with -lnccl. One mode per run (argv[1]):
//   coll FUNC BYTES [REPEAT]  every MPI rank drives the GPU of its local rank: a communicator
//                             made from a unique id broadcast by MPI, FUNC (allreduce, allgather,
//                             broadcast, reduce, reducescatter, alltoall) of BYTES per rank,
//                             REPEAT times on one stream, then a synchronisation
//   single NGPUS BYTES        one rank drives NGPUS GPUs (ncclCommInitAll), one allreduce per
//                             GPU in a group, as nccl-tests' -g does
//   ring BYTES                each rank sends BYTES to the next and receives from the previous,
//                             in a group
//   ordered BYTES             a kernel, then an allreduce on the same stream: the allreduce waits
//   split                     ncclCommSplit by parity; prints each rank's new rank and count
//   together                  the unique id broadcast, a barrier, then every rank's
//                             ncclCommInitRankConfig in a group at the same simulated time
//                             (nccl-tests' order); prints each rank's rank and count
//   graph WHAT BYTES REPEAT   WHAT (allreduce, or ring as above) of BYTES captured in a CUDA
//                             graph, the graph launched REPEAT times, then WHAT called once more
#include <mpi.h>
#include <nccl.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CHECK(call)                                                                     \
  do {                                                                                  \
    ncclResult_t r_ = (call);                                                           \
    if (r_ != ncclSuccess) {                                                            \
      fprintf(stderr, "%s failed: %s\n", #call, ncclGetErrorString(r_));                \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                     \
    }                                                                                   \
  } while (0)

__global__ void busy() {}

static ncclComm_t world_comm(int rank, int size) {
  ncclUniqueId id;
  if (rank == 0)
    CHECK(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm;
  CHECK(ncclCommInitRank(&comm, size, id, rank));
  return comm;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
  int local_rank;
  MPI_Comm_rank(local, &local_rank);
  const char* mode = argv[1];
  if (!strcmp(mode, "single")) {
    int n = atoi(argv[2]);
    size_t bytes = strtoull(argv[3], nullptr, 10);
    std::vector<ncclComm_t> comms(n);
    std::vector<cudaStream_t> streams(n);
    std::vector<float*> bufs(n);
    CHECK(ncclCommInitAll(comms.data(), n, nullptr));
    for (int i = 0; i < n; i++) {
      cudaSetDevice(i);
      cudaStreamCreate(&streams[i]);
      cudaMalloc(&bufs[i], bytes);
    }
    CHECK(ncclGroupStart());
    for (int i = 0; i < n; i++)
      CHECK(ncclAllReduce(bufs[i], bufs[i], bytes / 4, ncclFloat, ncclSum, comms[i], streams[i]));
    CHECK(ncclGroupEnd());
    for (int i = 0; i < n; i++) {
      cudaSetDevice(i);
      cudaStreamSynchronize(streams[i]);
      int dev, count, r;
      ncclCommCuDevice(comms[i], &dev);
      ncclCommCount(comms[i], &count);
      ncclCommUserRank(comms[i], &r);
      printf("comm %d: device %d rank %d of %d\n", i, dev, r, count);
      ncclCommDestroy(comms[i]);
    }
    MPI_Finalize();
    return 0;
  }
  cudaSetDevice(local_rank);
  if (!strcmp(mode, "together")) {
    ncclUniqueId id;
    if (rank == 0)
      CHECK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    ncclComm_t comm;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    CHECK(ncclGroupStart());
    CHECK(ncclCommInitRankConfig(&comm, size, id, rank, &config));
    CHECK(ncclGroupEnd());
    int r, n;
    CHECK(ncclCommUserRank(comm, &r));
    CHECK(ncclCommCount(comm, &n));
    printf("rank %d: rank %d of %d\n", rank, r, n);
    ncclCommDestroy(comm);
    MPI_Finalize();
    return 0;
  }
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  ncclComm_t comm = world_comm(rank, size);
  if (!strcmp(mode, "coll")) {
    const char* func = argv[2];
    size_t bytes = strtoull(argv[3], nullptr, 10);
    int repeat = argc > 4 ? atoi(argv[4]) : 1;
    char *send, *recv;
    cudaMalloc(&send, bytes * size);
    cudaMalloc(&recv, bytes * size);
    for (int k = 0; k < repeat; k++) {
      if (!strcmp(func, "allreduce"))
        CHECK(ncclAllReduce(send, recv, bytes, ncclUint8, ncclSum, comm, stream));
      else if (!strcmp(func, "allgather"))
        CHECK(ncclAllGather(send, recv, bytes, ncclUint8, comm, stream));
      else if (!strcmp(func, "reducescatter"))
        CHECK(ncclReduceScatter(send, recv, bytes, ncclUint8, ncclSum, comm, stream));
      else if (!strcmp(func, "broadcast"))
        CHECK(ncclBroadcast(send, recv, bytes, ncclUint8, 0, comm, stream));
      else if (!strcmp(func, "reduce"))
        CHECK(ncclReduce(send, recv, bytes, ncclUint8, ncclSum, 0, comm, stream));
      else if (!strcmp(func, "alltoall"))
        CHECK(ncclAlltoAll(send, recv, bytes / size, ncclUint8, comm, stream));
    }
    cudaStreamSynchronize(stream);
  } else if (!strcmp(mode, "ring")) {
    size_t bytes = strtoull(argv[2], nullptr, 10);
    char *send, *recv;
    cudaMalloc(&send, bytes);
    cudaMalloc(&recv, bytes);
    CHECK(ncclGroupStart());
    CHECK(ncclSend(send, bytes, ncclUint8, (rank + 1) % size, comm, stream));
    CHECK(ncclRecv(recv, bytes, ncclUint8, (rank + size - 1) % size, comm, stream));
    CHECK(ncclGroupEnd());
    cudaStreamSynchronize(stream);
  } else if (!strcmp(mode, "ordered")) {
    size_t bytes = strtoull(argv[2], nullptr, 10);
    float* buf;
    cudaMalloc(&buf, bytes);
    busy<<<1, 1, 0, stream>>>();
    CHECK(ncclAllReduce(buf, buf, bytes / 4, ncclFloat, ncclSum, comm, stream));
    cudaStreamSynchronize(stream);
  } else if (!strcmp(mode, "graph")) {
    const char* what = argv[2];
    size_t bytes = strtoull(argv[3], nullptr, 10);
    int repeat = atoi(argv[4]);
    char *send, *recv;
    cudaMalloc(&send, bytes);
    cudaMalloc(&recv, bytes);
    auto call = [&] {
      if (!strcmp(what, "allreduce")) {
        CHECK(ncclAllReduce(send, recv, bytes, ncclUint8, ncclSum, comm, stream));
      } else {
        CHECK(ncclGroupStart());
        CHECK(ncclSend(send, bytes, ncclUint8, (rank + 1) % size, comm, stream));
        CHECK(ncclRecv(recv, bytes, ncclUint8, (rank + size - 1) % size, comm, stream));
        CHECK(ncclGroupEnd());
      }
    };
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal);
    call();
    if (cudaStreamEndCapture(stream, &graph) != cudaSuccess || cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess)
      MPI_Abort(MPI_COMM_WORLD, 1);
    for (int k = 0; k < repeat; k++)
      cudaGraphLaunch(exec, stream);
    call();
    cudaStreamSynchronize(stream);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  } else if (!strcmp(mode, "split")) {
    ncclComm_t half;
    CHECK(ncclCommSplit(comm, rank % 2, rank, &half, nullptr));
    int r, n;
    ncclCommUserRank(half, &r);
    ncclCommCount(half, &n);
    printf("rank %d: rank %d of %d in color %d\n", rank, r, n, rank % 2);
  }
  ncclCommDestroy(comm);
  MPI_Finalize();
  return 0;
}
