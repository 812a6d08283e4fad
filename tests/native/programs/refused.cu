// Calls one CUDA runtime function that Orrery refuses (usage: refused NAME), after a call it
// simulates; tests/native/test_exports.py runs it once per REFUSE row of cuda_api.def.
#include <cstdio>
#include <cstring>

__device__ float symbol;

int main(int argc, char** argv) {
  const char* name = argc > 1 ? argv[1] : "";
  float* d = nullptr;
  float h = 1;
  cudaMalloc(&d, sizeof(float));
  if (!strcmp(name, "cudaMallocManaged")) {
    cudaMallocManaged(&d, sizeof(float));
  } else if (!strcmp(name, "cudaMemcpyToSymbol")) {
    cudaMemcpyToSymbol(symbol, &h, sizeof(float));
  } else if (!strcmp(name, "cudaMemcpyFromSymbol")) {
    cudaMemcpyFromSymbol(&h, symbol, sizeof(float));
  } else {
    fprintf(stderr, "refused: no call of %s here\n", name);
    return 2;
  }
  printf("refused: %s returned\n", name);
  return 0;
}
