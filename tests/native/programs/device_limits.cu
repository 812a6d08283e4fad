// Device limits, PCI addresses, stream callbacks and event records with flags.
// Usage: device_limits MODE; prints "name value" lines (tests/native/test_device_limits.py).
//   limits      cudaDeviceGetLimit's defaults, a limit set and read back, an unknown limit
//   l2fetch     cudaDeviceGetLimit(cudaLimitMaxL2FetchGranularity) unset (stops the run)
//   persisting  cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize) (stops the run)
//   pci         each device's PCI address and the device it names back
//   callback    busy on a stream of device 1, then cudaStreamAddCallback: when it ran, its arguments
//   record      cudaEventRecordWithFlags with no flag, and with a flag it does not know
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <ctime>

__global__ void busy(float*) {}

static double seconds() {  // the simulated clock, as the program's own code reads it
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

struct Seen {
  double at = -1;
  cudaStream_t stream = nullptr;
  int status = -1;
};

static void CUDART_CB callback(cudaStream_t stream, cudaError_t status, void* data) {
  Seen* seen = (Seen*)data;
  seen->at = seconds();
  seen->stream = stream;
  seen->status = (int)status;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const char* mode = argc > 1 ? argv[1] : "";
  if (!strcmp(mode, "limits")) {
    const char* names[] = {"stack", "printf_fifo", "malloc_heap", "sync_depth", "pending_launches", "", "persisting_l2"};
    for (int limit : {0, 1, 2, 3, 4, 6}) {
      size_t v = 0;
      cudaDeviceGetLimit(&v, (cudaLimit)limit);
      printf("%s %zu\n", names[limit], v);
    }
    printf("set_stack %d\n", (int)cudaDeviceSetLimit(cudaLimitStackSize, 4096));
    size_t v = 0;
    cudaDeviceGetLimit(&v, cudaLimitStackSize);
    printf("stack_after_set %zu\n", v);
    cudaSetDevice(1);  // limits are per device
    cudaDeviceGetLimit(&v, cudaLimitStackSize);
    printf("stack_other_device %zu\n", v);
    printf("unknown_limit %d\n", (int)cudaDeviceSetLimit((cudaLimit)7, 1));
    cudaGetLastError();
  } else if (!strcmp(mode, "l2fetch")) {
    size_t v;
    cudaDeviceGetLimit(&v, cudaLimitMaxL2FetchGranularity);
    printf("not reached\n");
  } else if (!strcmp(mode, "persisting")) {
    cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 1 << 20);
    printf("not reached\n");
  } else if (!strcmp(mode, "pci")) {
    int n = 0;
    cudaGetDeviceCount(&n);
    for (int d = 0; d < n; d++) {
      char bus[32];
      int back = -1;
      cudaDeviceGetPCIBusId(bus, sizeof bus, d);
      cudaDeviceGetByPCIBusId(&back, bus);
      printf("bus%d %s\nback%d %d\n", d, bus, d, back);
    }
    int dev = -1;
    printf("unknown_bus %d\n", (int)cudaDeviceGetByPCIBusId(&dev, "0000:ff:1f.0"));
    printf("malformed_bus %d\n", (int)cudaDeviceGetByPCIBusId(&dev, "GPU0"));
    cudaGetLastError();
  } else if (!strcmp(mode, "callback")) {
    cudaSetDevice(1);
    cudaStream_t s;
    cudaStreamCreate(&s);
    int device = -1;
    cudaStreamGetDevice(s, &device);
    printf("stream_device %d\n", device);
    float* x;
    cudaMalloc(&x, 64);
    Seen seen;
    double t0 = seconds();
    busy<<<1, 1, 0, s>>>(x);
    printf("add %d\n", (int)cudaStreamAddCallback(s, callback, &seen, 0));
    printf("add_flags %d\n", (int)cudaStreamAddCallback(s, callback, &seen, 1));
    cudaGetLastError();
    cudaStreamSynchronize(s);
    printf("ran_after %.9e\n", seen.at - t0);
    printf("its_stream %d\nits_status %d\n", (int)(seen.stream == s), seen.status);
  } else if (!strcmp(mode, "record")) {
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    float* x;
    cudaMalloc(&x, 64);
    printf("record_a %d\n", (int)cudaEventRecordWithFlags(a, 0, 0));
    busy<<<1, 1>>>(x);
    printf("record_b %d\n", (int)cudaEventRecordWithFlags(b, 0, cudaEventRecordDefault));
    printf("record_bad %d\n", (int)cudaEventRecordWithFlags(b, 0, 4));
    cudaGetLastError();
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    printf("elapsed_ms %.9e\n", (double)ms);
  }
  MPI_Finalize();
  return 0;
}
