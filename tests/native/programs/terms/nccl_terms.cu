// A program of known steps for tests/native/test_terms.py, the term breakdown: every MPI rank
// drives a GPU of its own (one node) and runs the steps of argv[1], one letter each, in order
// (every rank the same, so that collectives match); argv[2] is the bytes of the copies and
// messages. Linked with -lnccl (the nccl_ prefix: tests/conftest.py's build) for its NCCL steps.
//   K  the kernel `busy` on the stream, then a synchronisation of the device
//   k  the kernel `busy` on the stream, left running
//   b  the kernel `brief` on the stream, left running
//   C  a synchronous host-to-device copy (pinned memory)
//   h  an asynchronous host-to-device copy on the stream
//   d  an asynchronous device-to-host copy on the stream
//   m  an asynchronous memset on the stream
//   S  cudaStreamSynchronize(stream)
//   D  cudaDeviceSynchronize()
//   q  cudaStreamQuery(stream) until the stream is done
//   P  MPI_Sendrecv of device buffers with the next rank and the previous one
//   I  MPI_Isend, MPI_Irecv, MPI_Waitall, the same exchange
//   B  MPI_Bcast of a device buffer from rank 0
//   A  MPI_Allreduce of 8 bytes of host memory
//   a  MPI_Iallreduce of 8 bytes of host memory, then MPI_Wait
//   R  MPI_Barrier
//   N  ncclAllReduce of the bytes on the stream (the communicator made at the first N or O)
//   O  ncclSend to the next rank and ncclRecv from the previous one, in a group, on the stream
// Finally a device synchronisation, then MPI_Finalize.
#include <mpi.h>
#include <nccl.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>

__global__ void busy() {}
__global__ void brief() {}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int devices = 1;
  cudaGetDeviceCount(&devices);
  cudaSetDevice(rank % devices);  // one node: its local rank, with no MPI call of its own time
  const char* steps = argv[1];
  const size_t n = strtoull(argv[2], nullptr, 10);
  char *host, *dev, *out, *in;
  cudaMallocHost(&host, n);
  cudaMalloc(&dev, n);
  cudaMalloc(&out, n);
  cudaMalloc(&in, n);
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  ncclComm_t comm = nullptr;
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  double value = 1, sum = 0;
  for (const char* s = steps; *s; s++) {
    if ((*s == 'N' || *s == 'O') && !comm) {
      ncclUniqueId id;
      if (rank == 0) ncclGetUniqueId(&id);
      MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
      ncclCommInitRank(&comm, size, id, rank);
    }
    MPI_Request rq[2];
    switch (*s) {
      case 'K': busy<<<1, 1, 0, stream>>>(); cudaDeviceSynchronize(); break;
      case 'k': busy<<<1, 1, 0, stream>>>(); break;
      case 'b': brief<<<1, 1, 0, stream>>>(); break;
      case 'C': cudaMemcpy(dev, host, n, cudaMemcpyHostToDevice); break;
      case 'h': cudaMemcpyAsync(dev, host, n, cudaMemcpyHostToDevice, stream); break;
      case 'd': cudaMemcpyAsync(host, dev, n, cudaMemcpyDeviceToHost, stream); break;
      case 'm': cudaMemsetAsync(dev, 0, n, stream); break;
      case 'S': cudaStreamSynchronize(stream); break;
      case 'D': cudaDeviceSynchronize(); break;
      case 'q': while (cudaStreamQuery(stream) == cudaErrorNotReady) {} break;
      case 'P':
        MPI_Sendrecv(out, (int)n, MPI_BYTE, next, 0, in, (int)n, MPI_BYTE, prev, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        break;
      case 'I':
        MPI_Irecv(in, (int)n, MPI_BYTE, prev, 1, MPI_COMM_WORLD, &rq[0]);
        MPI_Isend(out, (int)n, MPI_BYTE, next, 1, MPI_COMM_WORLD, &rq[1]);
        MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
        break;
      case 'B': MPI_Bcast(dev, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD); break;
      case 'A': MPI_Allreduce(&value, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); break;
      case 'a':
        MPI_Iallreduce(&value, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &rq[0]);
        MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
        break;
      case 'R': MPI_Barrier(MPI_COMM_WORLD); break;
      case 'N': ncclAllReduce(out, in, n / 4, ncclFloat, ncclSum, comm, stream); break;
      case 'O':
        ncclGroupStart();
        ncclSend(out, n, ncclChar, next, comm, stream);
        ncclRecv(in, n, ncclChar, prev, comm, stream);
        ncclGroupEnd();
        break;
      default: fprintf(stderr, "unknown step %c\n", *s); MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  cudaDeviceSynchronize();
  if (comm) ncclCommDestroy(comm);
  MPI_Finalize();
  return 0;
}
