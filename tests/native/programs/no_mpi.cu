// A CUDA program without a single MPI call, as the CUDA samples (deviceQuery, ...) are.
// Usage: no_mpi STATUS: one copy to the GPU, then exit(STATUS) (tests/native/test_failures.py).
#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  int status = argc > 1 ? atoi(argv[1]) : 0;
  static char host[1 << 20];
  void* d;
  cudaMalloc(&d, sizeof host);
  cudaMemcpy(d, host, sizeof host, cudaMemcpyHostToDevice);
  printf("copied\n");
  exit(status);
}
