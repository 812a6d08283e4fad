// Calls one CUDA runtime function that Orrery refuses (usage: refused NAME), after a call it
// simulates; tests/native/test_exports.py runs it once per REFUSE row of cuda_api.def.
#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
  const char* name = argc > 1 ? argv[1] : "";
  float* d = nullptr;
  cudaMalloc(&d, sizeof(float));
  int location = 0;
  if (!strcmp(name, "cudaMemRangeGetAttribute")) {
    cudaMemRangeGetAttribute(&location, sizeof location, cudaMemRangeAttributeLastPrefetchLocation, d, sizeof(float));
  } else if (!strcmp(name, "cudaMemRangeGetAttributes")) {
    void* data[] = {&location};
    size_t sizes[] = {sizeof location};
    cudaMemRangeAttribute attributes[] = {cudaMemRangeAttributeLastPrefetchLocation};
    cudaMemRangeGetAttributes(data, sizes, attributes, 1, d, sizeof(float));
  } else {
    fprintf(stderr, "refused: no call of %s here\n", name);
    return 2;
  }
  printf("refused: %s returned\n", name);
  return 0;
}
