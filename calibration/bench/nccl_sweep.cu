// NCCL collective size sweeps, measured as nccl-tests measures them and printed in nccl-tests'
// table, so that one reader (orrery/calibration/measurements.py) takes both:
//   nccl_sweep allreduce|allgather|broadcast|reducescatter|reduce|alltoall
//              [-b MIN] [-e MAX] [-f FACTOR | -i STEP] [-l S1,S2,...] [-g GPUS] [-n ITERS] [-w WARMUP]
//              [-d float|double|half|bfloat16|int8|int32] [-o sum|prod|max|min|avg] [-r ROOT]
//              [-T host|events]
// Sizes (-b, -e, -l; K, M, G suffixes are powers of 1024) are nccl-tests' "size": the buffer of
// allreduce, broadcast and reduce, the gathered (received) buffer of allgather, the scattered
// (sent) buffer of reducescatter, the whole send buffer of alltoall. Where a size is shared among
// the ranks (allgather, reducescatter, alltoall), each rank's share is a whole number of 16-byte
// blocks, as nccl-tests rounds it, and the printed size is what was moved.
//
// Layout: every MPI process drives -g GPUs (its local rank's block of the node's GPUs), all of
// them in one communicator of processes x GPUS ranks. One process alone builds it with
// ncclCommInitAll; several share rank 0's unique id through MPI_Bcast and each initialises its
// GPUs' ranks inside one ncclGroupStart/End. Each iteration is one call per GPU inside a group.
//
// Timing, per size and placement (out-of-place, then in-place), as nccl-tests' default: WARMUP
// iterations, every stream synchronised, a barrier, then ITERS iterations timed on the host
// (MPI_Wtime) up to the synchronisation of every stream, divided by ITERS and averaged over the
// processes. -T events times the same iterations with a CUDA event pair on each GPU's stream
// instead (the slowest GPU's). algbw = size / time; busbw = algbw x 2(n-1)/n (allreduce),
// (n-1)/n (allgather, reducescatter, alltoall) or 1 (broadcast, reduce), as nccl-tests reports
// them (its doc/PERFORMANCE.md). Results are not checked (#wrong is N/A, nccl-tests' -c 0).
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include "cuda_check.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define NCCL_CHECK(call)                                                                        \
  do {                                                                                          \
    ncclResult_t r_ = (call);                                                                   \
    if (r_ != ncclSuccess) {                                                                    \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, ncclGetErrorString(r_)); \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                             \
    }                                                                                           \
  } while (0)

namespace {

enum Coll { kAllReduce, kAllGather, kBroadcast, kReduceScatter, kReduce, kAlltoAll };
const char* const kCollNames[] = {"allreduce", "allgather", "broadcast", "reducescatter", "reduce", "alltoall"};

struct Type {
  const char* name;
  ncclDataType_t nccl;
  size_t bytes;
};
const Type kTypes[] = {{"float", ncclFloat32, 4}, {"double", ncclFloat64, 8}, {"half", ncclFloat16, 2},
                       {"bfloat16", ncclBfloat16, 2}, {"int8", ncclInt8, 1},   {"int32", ncclInt32, 4}};

struct Op {
  const char* name;
  ncclRedOp_t nccl;
};
const Op kOps[] = {{"sum", ncclSum}, {"prod", ncclProd}, {"max", ncclMax}, {"min", ncclMin}, {"avg", ncclAvg}};

[[noreturn]] void usage(const char* what, const char* value) {
  fprintf(stderr,
          "nccl_sweep: %s '%s'; usage: nccl_sweep allreduce|allgather|broadcast|reducescatter|reduce|alltoall "
          "[-b MIN] [-e MAX] [-f FACTOR | -i STEP] [-l S1,...] [-g GPUS] [-n ITERS] [-w WARMUP] "
          "[-d TYPE] [-o OP] [-r ROOT] [-T host|events]\n",
          what, value);
  MPI_Finalize();
  exit(2);
}

size_t parse_size(const char* text) {
  char* end = nullptr;
  double v = strtod(text, &end);
  if (end == text || v < 0) usage("bad size", text);
  switch (*end) {
    case 'K': case 'k': v *= 1024.0; end++; break;
    case 'M': case 'm': v *= 1024.0 * 1024.0; end++; break;
    case 'G': case 'g': v *= 1024.0 * 1024.0 * 1024.0; end++; break;
  }
  if (*end) usage("bad size", text);
  return (size_t)v;
}

int parse_int(const char* text, int least) {
  char* end = nullptr;
  long v = strtol(text, &end, 10);
  if (end == text || *end || v < least) usage("bad number", text);
  return (int)v;
}

// Elements per call (the count NCCL is given), bytes sent and received per GPU, and the size
// printed, for a requested size in nccl-tests' terms.
struct Shape {
  size_t count, send_bytes, recv_bytes, size;
};

Shape shape(Coll c, size_t size, size_t elt, int nranks) {
  const size_t elements = size / elt;
  // a rank's share of a divided buffer: whole 16-byte blocks (at least one element's worth)
  const size_t block = 16 / elt ? 16 / elt : 1;
  const size_t share = (elements / nranks) / block * block;
  switch (c) {
    case kAllGather: return {share, share * elt, share * elt * nranks, share * elt * nranks};
    case kReduceScatter: return {share, share * elt * nranks, share * elt, share * elt * nranks};
    case kAlltoAll: return {share, share * elt * nranks, share * elt * nranks, share * elt * nranks};
    default: return {elements, elements * elt, elements * elt, elements * elt};
  }
}

double bus_factor(Coll c, int n) {
  switch (c) {
    case kAllReduce: return 2.0 * (n - 1) / n;
    case kAllGather: case kReduceScatter: case kAlltoAll: return (double)(n - 1) / n;
    default: return 1.0;
  }
}

// nccl-tests' time column: two decimals where they fit in 7 characters, else fewer
std::string cell(double v, int width) {
  char buf[64];
  for (const char* f : {"%*.2f", "%*.1f", "%*.0f"})
    if (snprintf(buf, sizeof buf, f, width, v) <= width) return buf;
  snprintf(buf, sizeof buf, "%*.1e", width, v);
  return buf;
}

struct Gpu {
  int device, rank;
  ncclComm_t comm;
  cudaStream_t stream;
  char *send, *recv;
  cudaEvent_t start, stop;
};

void launch(Coll c, Gpu& g, const Shape& s, const Type& t, const Op& op, int root, bool in_place) {
  const size_t elt = t.bytes;
  // in place: the output inside the input (reducescatter: the rank's block of it) or the input
  // inside the output (allgather), as NCCL defines it
  const char* send = g.send;
  char* recv = g.recv;
  if (in_place) {
    if (c == kAllGather) send = g.recv + (size_t)g.rank * s.count * elt;
    else if (c == kReduceScatter) recv = g.send + (size_t)g.rank * s.count * elt;
    else recv = g.send;
  }
  switch (c) {
    case kAllReduce: NCCL_CHECK(ncclAllReduce(send, recv, s.count, t.nccl, op.nccl, g.comm, g.stream)); break;
    case kAllGather: NCCL_CHECK(ncclAllGather(send, recv, s.count, t.nccl, g.comm, g.stream)); break;
    case kBroadcast: NCCL_CHECK(ncclBroadcast(send, recv, s.count, t.nccl, root, g.comm, g.stream)); break;
    case kReduceScatter:
      NCCL_CHECK(ncclReduceScatter(send, recv, s.count, t.nccl, op.nccl, g.comm, g.stream));
      break;
    case kReduce: NCCL_CHECK(ncclReduce(send, recv, s.count, t.nccl, op.nccl, root, g.comm, g.stream)); break;
    case kAlltoAll: NCCL_CHECK(ncclAlltoAll(send, recv, s.count, t.nccl, g.comm, g.stream)); break;
  }
}

void iterations(Coll c, std::vector<Gpu>& gpus, const Shape& s, const Type& t, const Op& op, int root, bool in_place,
                int n) {
  for (int it = 0; it < n; it++) {
    NCCL_CHECK(ncclGroupStart());
    for (Gpu& g : gpus) launch(c, g, s, t, op, root, in_place);
    NCCL_CHECK(ncclGroupEnd());
  }
}

void synchronize(std::vector<Gpu>& gpus) {
  for (Gpu& g : gpus) CUDA_CHECK(cudaStreamSynchronize(g.stream));
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int proc, procs;
  MPI_Comm_rank(MPI_COMM_WORLD, &proc);
  MPI_Comm_size(MPI_COMM_WORLD, &procs);
  if (argc < 2) usage("missing collective", "");
  int coll = -1;
  for (int c = 0; c < 6; c++)
    if (!strcmp(argv[1], kCollNames[c])) coll = c;
  if (coll < 0) usage("unknown collective", argv[1]);
  const Coll c = (Coll)coll;
  size_t min_size = 32 * 1024 * 1024, max_size = 32 * 1024 * 1024, step = 0;
  double factor = 0;
  int ngpus = 1, iters = 20, warmup = 1, root = 0;
  bool events = false;
  const Type* type = &kTypes[0];
  const Op* op = &kOps[0];
  std::vector<size_t> sizes;  // -l: an explicit list of sizes (Orrery's closed loop runs the measured ones)
  for (int i = 2; i < argc; i++) {
    const char* flag = argv[i];
    if (flag[0] != '-' || !flag[1] || flag[2] || i + 1 >= argc) usage("bad argument", flag);
    const char* v = argv[++i];
    switch (flag[1]) {
      case 'b': min_size = parse_size(v); break;
      case 'e': max_size = parse_size(v); break;
      case 'f': factor = strtod(v, nullptr); if (factor <= 1) usage("a factor above 1 expected, not", v); break;
      case 'i': step = parse_size(v); break;
      case 'g': ngpus = parse_int(v, 1); break;
      case 'n': iters = parse_int(v, 1); break;
      case 'w': warmup = parse_int(v, 0); break;
      case 'r': root = parse_int(v, 0); break;
      case 'T':
        if (strcmp(v, "host") && strcmp(v, "events")) usage("-T takes host or events, not", v);
        events = !strcmp(v, "events");
        break;
      case 'd':
        type = nullptr;
        for (const Type& t : kTypes)
          if (!strcmp(v, t.name)) type = &t;
        if (!type) usage("unknown data type", v);
        break;
      case 'o':
        op = nullptr;
        for (const Op& o : kOps)
          if (!strcmp(v, o.name)) op = &o;
        if (!op) usage("unknown reduction", v);
        break;
      case 'l':
        for (char* tok = strtok(argv[i], ","); tok; tok = strtok(nullptr, ",")) sizes.push_back(parse_size(tok));
        break;
      default: usage("unknown option", flag);
    }
  }
  if (sizes.empty()) {
    if (!factor && !step) factor = 2;  // nccl-tests' -f default is 1 (one size); twice is the usual sweep
    for (size_t b = min_size; b <= max_size; b = step ? b + step : (size_t)(b * factor)) {
      sizes.push_back(b);
      if (!step && (size_t)(b * factor) == b) break;
    }
  }
  const int nranks = procs * ngpus;
  if (root >= nranks) usage("a root below the number of ranks (processes x -g) expected, not", std::to_string(root).c_str());

  // this process's GPUs: its block of -g GPUs after those of the node's lower local ranks
  MPI_Comm node;
  int local = 0, visible = 0;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &local);
  MPI_Comm_free(&node);
  CUDA_CHECK(cudaGetDeviceCount(&visible));
  if ((local + 1) * ngpus > visible) {
    fprintf(stderr, "nccl_sweep: local rank %d needs GPUs %d to %d (-g %d) and sees %d\n", local, local * ngpus,
            (local + 1) * ngpus - 1, ngpus, visible);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  std::vector<Gpu> gpus(ngpus);
  size_t most_send = 0, most_recv = 0;
  for (size_t b : sizes) {
    Shape s = shape(c, b, type->bytes, nranks);
    most_send = s.send_bytes > most_send ? s.send_bytes : most_send;
    most_recv = s.recv_bytes > most_recv ? s.recv_bytes : most_recv;
  }
  for (int i = 0; i < ngpus; i++) {
    Gpu& g = gpus[i];
    g.device = local * ngpus + i;
    g.rank = proc * ngpus + i;
    CUDA_CHECK(cudaSetDevice(g.device));
    CUDA_CHECK(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaMalloc(&g.send, most_send ? most_send : 1));
    CUDA_CHECK(cudaMalloc(&g.recv, most_recv ? most_recv : 1));
    CUDA_CHECK(cudaMemset(g.send, 0, most_send ? most_send : 1));
    CUDA_CHECK(cudaEventCreate(&g.start));
    CUDA_CHECK(cudaEventCreate(&g.stop));
  }
  if (procs == 1) {
    std::vector<ncclComm_t> comms(ngpus);
    std::vector<int> devices(ngpus);
    for (int i = 0; i < ngpus; i++) devices[i] = gpus[i].device;
    NCCL_CHECK(ncclCommInitAll(comms.data(), ngpus, devices.data()));
    for (int i = 0; i < ngpus; i++) gpus[i].comm = comms[i];
  } else {
    ncclUniqueId id;
    if (proc == 0) NCCL_CHECK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    NCCL_CHECK(ncclGroupStart());
    for (Gpu& g : gpus) {
      CUDA_CHECK(cudaSetDevice(g.device));
      NCCL_CHECK(ncclCommInitRank(&g.comm, nranks, id, g.rank));
    }
    NCCL_CHECK(ncclGroupEnd());
  }

  int version = 0;
  NCCL_CHECK(ncclGetVersion(&version));
  if (proc == 0) {
    printf("# nccl-tests-like sweep (Orrery calibration/bench/nccl_sweep), NCCL %d\n", version);
    printf("# Collective test starting: %s\n", kCollNames[c]);
    printf("# nProcs %d nGpus %d nRanks %d sizes %zu warmup iters: %d iters: %d timing: %s\n", procs, ngpus, nranks,
           sizes.size(), warmup, iters, events ? "CUDA events" : "host");
    printf("#\n#%12s  %12s  %8s  %6s  %6s           out-of-place                       in-place\n", "", "", "", "",
           "");
    printf("#%12s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size", "count", "type", "redop",
           "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
    printf("#%12s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)", "(elements)", "", "", "",
           "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  }
  const bool reduces = c == kAllReduce || c == kReduceScatter || c == kReduce;
  const bool rooted = c == kBroadcast || c == kReduce;
  double bus_sum = 0;
  for (size_t b : sizes) {
    const Shape s = shape(c, b, type->bytes, nranks);
    std::string row[2];
    for (int in_place = 0; in_place < 2; in_place++) {
      iterations(c, gpus, s, *type, *op, root, in_place, warmup);
      synchronize(gpus);
      MPI_Barrier(MPI_COMM_WORLD);
      double start = MPI_Wtime();
      if (events)
        for (Gpu& g : gpus) CUDA_CHECK(cudaEventRecord(g.start, g.stream));
      iterations(c, gpus, s, *type, *op, root, in_place, iters);
      if (events)
        for (Gpu& g : gpus) CUDA_CHECK(cudaEventRecord(g.stop, g.stream));
      synchronize(gpus);
      double seconds = (MPI_Wtime() - start) / iters;
      if (events) {
        seconds = 0;
        for (Gpu& g : gpus) {
          float ms = 0;
          CUDA_CHECK(cudaEventElapsedTime(&ms, g.start, g.stop));
          seconds = ms * 1e-3 / iters > seconds ? ms * 1e-3 / iters : seconds;
        }
      }
      double sum = 0;
      MPI_Allreduce(&seconds, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      seconds = sum / procs;
      const double algbw = seconds > 0 ? s.size / seconds / 1e9 : 0;
      const double busbw = algbw * bus_factor(c, nranks);
      if (in_place == 0) bus_sum += busbw;
      char text[128];
      snprintf(text, sizeof text, "  %s  %6.2f  %6.2f  %6s", cell(seconds * 1e6, 7).c_str(), algbw, busbw, "N/A");
      row[in_place] = text;
    }
    if (proc == 0)
      printf(" %12zu  %12zu  %8s  %6s  %6d%s%s\n", s.size, s.count, type->name, reduces ? op->name : "none",
             rooted ? root : -1, row[0].c_str(), row[1].c_str());
  }
  if (proc == 0) {
    printf("# Out of bounds values : 0 OK\n# Avg bus bandwidth    : %g\n#\n", sizes.empty() ? 0.0 : bus_sum / sizes.size());
    printf("# Collective test concluded: %s\n", kCollNames[c]);
  }
  for (Gpu& g : gpus) NCCL_CHECK(ncclCommDestroy(g.comm));
  MPI_Finalize();
  return 0;
}
