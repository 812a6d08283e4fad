// A CUDA program without a single MPI call, as the CUDA samples (deviceQuery, ...) are.
// Usage: no_mpi STATUS | no_mpi return: one copy to the GPU and a free, then exit(STATUS), or a
// return from main (tests/native/test_failures.py).
#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char** argv) {
  bool ret = argc > 1 && !strcmp(argv[1], "return");
  int status = argc > 1 && !ret ? atoi(argv[1]) : 0;
  static char host[1 << 20];
  void* d;
  cudaMalloc(&d, sizeof host);
  cudaMemcpy(d, host, sizeof host, cudaMemcpyHostToDevice);
  cudaFree(d);
  printf("copied\n");
  if (ret)
    return 0;
  exit(status);
}
