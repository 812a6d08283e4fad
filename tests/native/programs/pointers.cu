// Wrong pointers, sizes and devices handed to the CUDA memory calls, beside valid edge cases.
// Usage: pointers MODE. Each call prints one line
//   case NAME RETURNED PEEK LAST SECONDS
// with the error it returned, what cudaPeekAtLastError and then cudaGetLastError said after
// it, and the simulated time the call took (MPI_Wtime around it; MPI_Wtime costs nothing).
#include "check.h"

#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#define CASE(name, call)                                                                            \
  do {                                                                                              \
    const double t_ = MPI_Wtime();                                                                  \
    const cudaError_t e_ = (call);                                                                  \
    const double dt_ = MPI_Wtime() - t_;                                                            \
    const cudaError_t peek_ = cudaPeekAtLastError();                                                \
    const cudaError_t last_ = cudaGetLastError();                                                   \
    printf("case %s %s %s %s %.17g\n", name, cudaGetErrorName(e_), cudaGetErrorName(peek_),         \
           cudaGetErrorName(last_), dt_);                                                           \
  } while (0)

static const size_t KiB = 1024, MiB = 1024 * 1024;
static void* const bogus = (void*)0x1234;
static void* const bogus2 = (void*)0x5678;

// Whether the first `n` bytes at `p` all still hold `byte`: a rejected copy touched nothing.
static int untouched(const void* p, size_t n, unsigned char byte) {
  for (size_t i = 0; i < n; i++)
    if (((const unsigned char*)p)[i] != byte)
      return 0;
  return 1;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const char* mode = argc > 1 ? argv[1] : "";
  char *d4k, *d1m, *pinned;
  CHECK(cudaMalloc(&d4k, 4 * KiB));
  CHECK(cudaMalloc(&d1m, MiB));
  CHECK(cudaMallocHost(&pinned, MiB));
  char* pageable = (char*)malloc(MiB);
  memset(pinned, 0x11, MiB);
  memset(pageable, 0x22, MiB);
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));

  if (!strcmp(mode, "copy")) {  // one-dimensional copies with a bad side
    CASE("h2d_to_bogus", cudaMemcpy(bogus, pinned, 4 * KiB, cudaMemcpyHostToDevice));
    CASE("h2d_to_null", cudaMemcpy(nullptr, pinned, 4 * KiB, cudaMemcpyHostToDevice));
    CASE("h2d_from_null", cudaMemcpy(d4k, nullptr, 4 * KiB, cudaMemcpyHostToDevice));
    CASE("h2d_from_bogus", cudaMemcpy(d4k, bogus, 4 * KiB, cudaMemcpyHostToDevice));
    CASE("h2d_1mib_into_4kib", cudaMemcpy(d4k, pinned, MiB, cudaMemcpyHostToDevice));
    CASE("h2d_interior_past_end", cudaMemcpy(d4k + 4000, pinned, 100, cudaMemcpyHostToDevice));
    CASE("h2d_from_device", cudaMemcpy(d1m, d4k, 4 * KiB, cudaMemcpyHostToDevice));
    CASE("h2d_to_pageable", cudaMemcpy(pageable, pinned, 4 * KiB, cudaMemcpyHostToDevice));
    CASE("d2h_from_bogus", cudaMemcpy(pinned, bogus, 4 * KiB, cudaMemcpyDeviceToHost));
    CASE("d2h_to_bogus", cudaMemcpy(bogus, d4k, 4 * KiB, cudaMemcpyDeviceToHost));
    CASE("d2h_to_null", cudaMemcpy(nullptr, d4k, 4 * KiB, cudaMemcpyDeviceToHost));
    CASE("d2h_8kib_from_4kib", cudaMemcpy(pinned, d4k, 8 * KiB, cudaMemcpyDeviceToHost));
    CASE("d2h_past_pinned_end", cudaMemcpy(pinned + MiB - 100, d4k, 4 * KiB, cudaMemcpyDeviceToHost));
    CASE("d2h_to_read_only", cudaMemcpy((void*)"a string literal", d4k, 16, cudaMemcpyDeviceToHost));
    CASE("d2d_from_pageable", cudaMemcpy(d4k, pageable, 4 * KiB, cudaMemcpyDeviceToDevice));
    CASE("d2d_past_end", cudaMemcpy(d1m, d4k + 1, 4 * KiB, cudaMemcpyDeviceToDevice));
    CASE("default_two_bogus", cudaMemcpy(bogus, bogus2, 4 * KiB, cudaMemcpyDefault));
    CASE("default_device_past_end", cudaMemcpy(pinned, d4k, 4 * KiB + 1, cudaMemcpyDefault));
    CASE("h2h_to_bogus", cudaMemcpy(bogus, pageable, 4 * KiB, cudaMemcpyHostToHost));
    CASE("async_h2d_to_bogus", cudaMemcpyAsync(bogus, pinned, 4 * KiB, cudaMemcpyHostToDevice, s));
    CASE("async_d2h_past_end", cudaMemcpyAsync(pinned, d4k, 4 * KiB + 1, cudaMemcpyDeviceToHost, s));
    CHECK(cudaDeviceSynchronize());
    printf("pinned_untouched %d\n", untouched(pinned, MiB, 0x11));
    printf("pageable_untouched %d\n", untouched(pageable, MiB, 0x22));
  } else if (!strcmp(mode, "copy2d")) {  // pitched copies: the rows' extent must fit
    // 5 rows of 1 KiB at a 1 KiB pitch need 5 KiB: one row more than d4k holds.
    CASE("2d_rows_past_end", cudaMemcpy2D(d4k, KiB, pinned, KiB, KiB, 5, cudaMemcpyHostToDevice));
    CASE("2d_width_over_pitch", cudaMemcpy2D(d4k, 512, pinned, KiB, KiB, 2, cudaMemcpyHostToDevice));
    CASE("2d_to_bogus", cudaMemcpy2D(bogus, KiB, pinned, KiB, KiB, 2, cudaMemcpyHostToDevice));
    CASE("2d_async_from_bogus",
         cudaMemcpy2DAsync(pinned, KiB, bogus, KiB, KiB, 2, cudaMemcpyDeviceToHost, s));
    // The last row ends at d4k's last byte (3 x 1200 + 496 = 4096): the padding after it is never touched.
    CASE("2d_last_row_at_end", cudaMemcpy2D(d4k, 1200, pinned, 496, 496, 4, cudaMemcpyHostToDevice));
    CASE("2d_last_row_one_past", cudaMemcpy2D(d4k, 1200, pinned, 497, 497, 4, cudaMemcpyHostToDevice));
    CHECK(cudaDeviceSynchronize());
  } else if (!strcmp(mode, "memset")) {
    CASE("memset_past_end", cudaMemset(d4k, 0, 4 * KiB + 1));
    CASE("memset_interior_past_end", cudaMemset(d4k + 4000, 0, 97));
    CASE("memset_bogus", cudaMemset(bogus, 0, 16));
    CASE("memset_pageable", cudaMemset(pageable, 0, 16));
    CASE("memset_async_past_end", cudaMemsetAsync(d1m + MiB - 8, 0, 9, s));
    CASE("memset_interior_to_end", cudaMemset(d4k + 4000, 0, 96));
    CHECK(cudaDeviceSynchronize());
  } else if (!strcmp(mode, "peer")) {  // two GPUs: d4k and d1m on device 0, p1 on device 1
    char* p1;
    CHECK(cudaSetDevice(1));
    CHECK(cudaMalloc(&p1, 4 * KiB));
    CHECK(cudaSetDevice(0));
    CASE("peer_to_bogus", cudaMemcpyPeer(bogus, 1, d4k, 0, 4 * KiB));
    CASE("peer_past_end", cudaMemcpyPeer(p1, 1, d1m, 0, 4 * KiB + 1));
    CASE("peer_wrong_device", cudaMemcpyPeer(p1, 0, d4k, 0, 4 * KiB));
    CASE("peer_from_pinned", cudaMemcpyPeer(p1, 1, pinned, 0, 4 * KiB));
    CASE("peer_bad_ordinal", cudaMemcpyPeer(p1, 7, d4k, 0, 4 * KiB));
    CASE("peer_async_bad_ordinal", cudaMemcpyPeerAsync(p1, 1, d4k, -1, 4 * KiB, s));
    CASE("peer_async_past_end", cudaMemcpyPeerAsync(p1, 1, d4k + 1, 0, 4 * KiB, s));
    CASE("peer_valid", cudaMemcpyPeer(p1, 1, d4k, 0, 4 * KiB));
    CHECK(cudaDeviceSynchronize());
  } else if (!strcmp(mode, "alloc")) {
    size_t free_b = 0, total_b = 0;
    CHECK(cudaMemGetInfo(&free_b, &total_b));
    void* p = bogus;
    CASE("malloc_size_max", cudaMalloc(&p, SIZE_MAX));
    printf("size_max_pointer %p\n", p);
    CASE("malloc_free_plus_one", cudaMalloc(&p, free_b + 1));
    CASE("malloc_half_of_size_max", cudaMalloc(&p, SIZE_MAX / 2 + 1));
    CASE("memgetinfo_null_free", cudaMemGetInfo(nullptr, &total_b));
    CASE("memgetinfo_null_total", cudaMemGetInfo(&free_b, nullptr));
    CASE("free_interior", cudaFree(d4k + 16));
    CASE("free_bogus", cudaFree(bogus));
    CASE("free_pinned", cudaFree(pinned));
    CASE("freehost_device", cudaFreeHost(d4k));
    CASE("free_d4k", cudaFree(d4k));
    CASE("free_d4k_again", cudaFree(d4k));
    CASE("copy_to_freed", cudaMemcpy(d4k, pinned, 16, cudaMemcpyHostToDevice));
    size_t after = 0;
    CHECK(cudaMemGetInfo(&after, &total_b));
    printf("freed_bytes %zu\n", after - free_b);
  } else if (!strcmp(mode, "freehost")) {  // a pinned buffer freed while a copy still fills it
    CHECK(cudaMemcpyAsync(pinned, d1m, MiB, cudaMemcpyDeviceToHost, s));
    CASE("freehost_while_copying", cudaFreeHost(pinned));
    CHECK(cudaDeviceSynchronize());
  } else if (!strcmp(mode, "edges")) {  // valid calls at the limits, each beside its twin one byte over
    CASE("h2d_ending_at_end", cudaMemcpy(d4k + 4 * KiB - 100, pinned, 100, cudaMemcpyHostToDevice));
    CASE("h2d_ending_one_past", cudaMemcpy(d4k + 4 * KiB - 100, pinned, 101, cudaMemcpyHostToDevice));
    CASE("d2h_interior_to_end", cudaMemcpy(pinned, d1m + MiB - KiB, KiB, cudaMemcpyDeviceToHost));
    CASE("d2h_interior_one_past", cudaMemcpy(pinned, d1m + MiB - KiB + 1, KiB, cudaMemcpyDeviceToHost));
    CASE("h2d_zero_bytes", cudaMemcpy(d4k, pinned, 0, cudaMemcpyHostToDevice));
    CASE("h2d_zero_bytes_at_end", cudaMemcpy(d4k + 4 * KiB, pinned, 0, cudaMemcpyHostToDevice));
    CASE("h2d_zero_bytes_null", cudaMemcpy(nullptr, nullptr, 0, cudaMemcpyHostToDevice));
    CASE("h2d_one_byte_at_end", cudaMemcpy(d4k + 4 * KiB, pinned, 1, cudaMemcpyHostToDevice));
    CASE("d2h_to_pageable", cudaMemcpy(pageable, d4k, 4 * KiB, cudaMemcpyDeviceToHost));
    CASE("h2d_from_pageable", cudaMemcpy(d1m, pageable, MiB, cudaMemcpyHostToDevice));
    CASE("h2d_from_pageable_past_end", cudaMemcpy(d1m, pageable, MiB + 1, cudaMemcpyHostToDevice));
    CASE("default_pinned_to_device_end", cudaMemcpy(d1m + MiB - 8, pinned + MiB - 8, 8, cudaMemcpyDefault));
    CASE("default_pinned_one_past", cudaMemcpy(d1m + MiB - 8, pinned + MiB - 8, 9, cudaMemcpyDefault));
    CASE("d2d_whole", cudaMemcpy(d1m, d4k, 4 * KiB, cudaMemcpyDeviceToDevice));
    CASE("d2d_whole_one_past", cudaMemcpy(d1m, d4k, 4 * KiB + 1, cudaMemcpyDeviceToDevice));
    CASE("memset_whole", cudaMemset(d4k, 0, 4 * KiB));
    CASE("memset_whole_one_past", cudaMemset(d4k, 0, 4 * KiB + 1));
    CHECK(cudaDeviceSynchronize());
  } else if (!strcmp(mode, "attributes")) {  // what each rank is told about its pointers
    int count = -1, device = -1;
    CHECK(cudaGetDeviceCount(&count));
    CHECK(cudaGetDevice(&device));
    cudaPointerAttributes a;
    CHECK(cudaPointerGetAttributes(&a, d4k + 100));
    printf("rank%d count %d current %d device_ptr %d %d\n", rank, count, device, (int)a.type, a.device);
    CHECK(cudaPointerGetAttributes(&a, pinned));
    printf("rank%d pinned_ptr %d %d\n", rank, (int)a.type, a.device);
    CHECK(cudaPointerGetAttributes(&a, pageable));
    printf("rank%d pageable_ptr %d %d\n", rank, (int)a.type, a.hostPointer == pageable);
    if (count > 1) {  // pinned memory belongs to the device current when it was allocated
      char* pinned1;
      CHECK(cudaSetDevice(1));
      CHECK(cudaMallocHost(&pinned1, KiB));
      CHECK(cudaSetDevice(0));
      CHECK(cudaPointerGetAttributes(&a, pinned1));
      printf("rank%d pinned_on_1 %d %d\n", rank, (int)a.type, a.device);
    }
  }
  MPI_Finalize();
  return 0;
}
