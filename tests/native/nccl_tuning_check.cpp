/* Prints NCCL's tuning choice (interpose/nccl/tuning.cpp) for a communicator's shape and call
 * sizes, for tests/native/test_nccl_tuning.py, without the rest of the shim:
 *   nccl_tuning_check NRANKS NNODES LOCAL SM NVLINK NVSWITCH INTRA_BW INTER_BW FUNC BYTES...
 * FUNC is NCCL's function name; one line per size: FUNC BYTES ALGO PROTO CHANNELS TIME_S, after
 * a line "channels RING TREE NVLS" (max_channels). Bad environment values stop it as the shim
 * does: "orrery: error: ..." on stderr, exit 70. */
#include "nccl/tuning.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

extern "C" [[noreturn]] void orrery_private_fatal(const char* fn, const char* what) {
  fprintf(stderr, "orrery: error: %s: %s\n", fn, what);
  exit(70);
}

int main(int argc, char** argv) {
  using namespace orrery::nccl;
  if (argc < 11) {
    fprintf(stderr, "usage: %s NRANKS NNODES LOCAL SM NVLINK NVSWITCH INTRA_BW INTER_BW FUNC BYTES...\n", argv[0]);
    return 2;
  }
  CommShape s;
  s.nranks = atoi(argv[1]);
  s.nnodes = atoi(argv[2]);
  s.max_local_ranks = atoi(argv[3]);
  s.sm = atoi(argv[4]);
  s.intra_nvlink = atoi(argv[5]) != 0;
  s.nvswitch = atoi(argv[6]) != 0;
  s.intra_bw = atof(argv[7]);
  s.inter_bw = atof(argv[8]);
  int func = 0;
  while (func < kFuncs && strcmp(func_name(func), argv[9]) != 0) func++;
  if (func == kFuncs) {
    fprintf(stderr, "unknown function %s\n", argv[9]);
    return 2;
  }
  Tuner t(s);
  printf("channels %d %d %d\n", t.max_channels(kRing), t.max_channels(kTree), t.max_channels(kNvls));
  for (int i = 10; i < argc; i++) {
    size_t bytes = strtoull(argv[i], nullptr, 0);
    Choice c = t.choose(func, bytes);
    printf("%s %zu %s %s %d %.17g\n", func_name(func), bytes, algo_name(c.algo), proto_name(c.proto), c.nchannels,
           c.model_time_s);
  }
  return 0;
}
