// NVML as a monitoring code asks it (tests/native/test_nvml.py), compiled against NVML's real
// header (the nvidia-nvml-dev-cu12 wheel's) and linked with -lnvidia-ml. Usage: nvml_query MODE.
//   query:   every rank takes device rank % count and allocates rank + 1 MiB on it; after a
//            barrier, rank 0 prints what NVML says of each GPU of its node and how NVML finds the
//            CUDA devices, by UUID and by PCI bus id
//   errors:  NVML's error codes for bad arguments, before nvmlInit and after nvmlShutdown
//   refused: a call the stand-in does not answer (nvmlDeviceGetPowerUsage)
//   dlopen:  NVML opened by name at run time, as NCCL and monitoring libraries open it
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <mpi.h>
#include <nvml.h>

#include <cstdio>
#include <cstring>

static void uuid_text(const cudaUUID_t& u, char* out) {
  const unsigned char* b = (const unsigned char*)u.bytes;
  sprintf(out, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3],
          b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const char* mode = argc > 1 ? argv[1] : "query";
  if (!strcmp(mode, "errors")) {
    unsigned n = 0;
    nvmlDevice_t d;
    printf("count before init %d\n", (int)nvmlDeviceGetCount(&n));
    printf("shutdown before init %d\n", (int)nvmlShutdown());
    printf("init %d %d\n", (int)nvmlInit(), (int)nvmlInit());  // counted: two shutdowns undo it
    printf("shutdown %d\n", (int)nvmlShutdown());
    printf("count %d\n", (int)nvmlDeviceGetCount(&n));
    printf("index past the last %d\n", (int)nvmlDeviceGetHandleByIndex(n, &d));
    printf("unknown uuid %d\n", (int)nvmlDeviceGetHandleByUUID("GPU-00000000-0000-0000-0000-000000000000", &d));
    printf("unknown bus %d\n", (int)nvmlDeviceGetHandleByPciBusId("0000:ff:00.0", &d));
    printf("bad bus %d\n", (int)nvmlDeviceGetHandleByPciBusId("bus 3", &d));
    nvmlDeviceGetHandleByIndex(0, &d);
    char name[4];
    printf("short name %d\n", (int)nvmlDeviceGetName(d, name, sizeof name));
    printf("null memory %d\n", (int)nvmlDeviceGetMemoryInfo(d, nullptr));
    nvmlMemory_v2_t m2 = {};
    m2.version = 1;
    printf("memory v2 of version one %d\n", (int)nvmlDeviceGetMemoryInfo_v2(d, &m2));
    printf("init flags %d\n", (int)nvmlInitWithFlags(0x80));
    printf("strings %s|%s|%s\n", nvmlErrorString(NVML_SUCCESS), nvmlErrorString(NVML_ERROR_NOT_FOUND),
           nvmlErrorString(NVML_ERROR_INSUFFICIENT_SIZE));
    printf("shutdown %d\n", (int)nvmlShutdown());
    printf("after shutdown %d\n", (int)nvmlDeviceGetCount(&n));
  } else if (!strcmp(mode, "dlopen")) {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    auto init = lib ? (nvmlReturn_t(*)(void))dlsym(lib, "nvmlInit_v2") : nullptr;
    auto count = lib ? (nvmlReturn_t(*)(unsigned*))dlsym(lib, "nvmlDeviceGetCount_v2") : nullptr;
    unsigned n = 0;
    if (init && count && init() == NVML_SUCCESS && count(&n) == NVML_SUCCESS)
      printf("dlopen count %u\n", n);
    else
      printf("dlopen failed: %s\n", dlerror());
  } else if (!strcmp(mode, "refused")) {
    nvmlInit();
    nvmlDevice_t d;
    nvmlDeviceGetHandleByIndex(0, &d);
    unsigned milliwatts;
    nvmlDeviceGetPowerUsage(d, &milliwatts);
    printf("not reached\n");
  } else {
    int devices;
    cudaGetDeviceCount(&devices);
    cudaSetDevice(rank % devices);
    void* p;
    cudaMalloc(&p, (size_t)(rank + 1) << 20);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
      if (nvmlInit() != NVML_SUCCESS)
        return 1;
      char text[96];
      nvmlSystemGetDriverVersion(text, sizeof text);
      printf("driver %s\n", text);
      nvmlSystemGetNVMLVersion(text, sizeof text);
      int cuda;
      nvmlSystemGetCudaDriverVersion(&cuda);
      printf("nvml %s cuda %d\n", text, cuda);
      unsigned n;
      nvmlDeviceGetCount(&n);
      printf("count %u cuda %d\n", n, devices);
      for (unsigned i = 0; i < n; i++) {
        nvmlDevice_t d;
        nvmlDeviceGetHandleByIndex(i, &d);
        char name[96], uuid[96];
        nvmlDeviceGetName(d, name, sizeof name);
        nvmlDeviceGetUUID(d, uuid, sizeof uuid);
        nvmlPciInfo_t pci;
        nvmlDeviceGetPciInfo(d, &pci);
        int major, minor;
        nvmlDeviceGetCudaComputeCapability(d, &major, &minor);
        nvmlMemory_t m;
        nvmlDeviceGetMemoryInfo(d, &m);
        nvmlMemory_v2_t m2 = {};
        m2.version = nvmlMemory_v2;
        nvmlDeviceGetMemoryInfo_v2(d, &m2);
        unsigned sm, mem, max_sm, max_mem, index, minor_number;
        nvmlDeviceGetClockInfo(d, NVML_CLOCK_SM, &sm);
        nvmlDeviceGetClockInfo(d, NVML_CLOCK_MEM, &mem);
        nvmlDeviceGetMaxClockInfo(d, NVML_CLOCK_GRAPHICS, &max_sm);
        nvmlDeviceGetMaxClockInfo(d, NVML_CLOCK_MEM, &max_mem);
        nvmlDeviceGetIndex(d, &index);
        nvmlDeviceGetMinorNumber(d, &minor_number);
        printf("gpu %u name %s\n", i, name);
        printf("gpu %u uuid %s\n", i, uuid);
        printf("gpu %u pci %s %s %u %u %u %08x\n", i, pci.busId, pci.busIdLegacy, pci.domain, pci.bus, pci.device,
               pci.pciDeviceId);
        printf("gpu %u cc %d.%d\n", i, major, minor);
        printf("gpu %u memory %llu %llu %llu v2 %llu %llu %llu %llu\n", i, m.total, m.used, m.free, m2.total,
               m2.reserved, m2.used, m2.free);
        printf("gpu %u clocks %u %u %u %u\n", i, sm, mem, max_sm, max_mem);
        printf("gpu %u index %u %u affinity %d\n", i, index, minor_number, (int)nvmlDeviceSetCpuAffinity(d));
      }
      for (int c = 0; c < devices; c++) {  // how NVML finds each CUDA device
        cudaDeviceProp prop;
        cudaGetDeviceProperties(&prop, c);
        char uuid[48], bus[32];
        uuid_text(prop.uuid, uuid);
        cudaDeviceGetPCIBusId(bus, sizeof bus, c);
        nvmlDevice_t by_uuid, by_bus;
        unsigned i_uuid = 99, i_bus = 99;
        if (nvmlDeviceGetHandleByUUID(uuid, &by_uuid) == NVML_SUCCESS)
          nvmlDeviceGetIndex(by_uuid, &i_uuid);
        if (nvmlDeviceGetHandleByPciBusId(bus, &by_bus) == NVML_SUCCESS)
          nvmlDeviceGetIndex(by_bus, &i_bus);
        printf("cuda %d uuid %s bus %s nvml %u %u\n", c, uuid, bus, i_uuid, i_bus);
      }
      nvmlShutdown();
    }
    cudaFree(p);
  }
  MPI_Finalize();
  return 0;
}
