// The test programs' check of a CUDA call: a failure names the call and CUDA's error, and ends
// the program with status 1 (orrery run: "rank N exited with status 1").
#pragma once

#include <cstdio>
#include <cstdlib>

#define CHECK(call)                                                    \
  do {                                                                 \
    cudaError_t e_ = (call);                                           \
    if (e_ != cudaSuccess) {                                           \
      fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorName(e_)); \
      exit(1);                                                         \
    }                                                                  \
  } while (0)
