// The CUDA driver API against Orrery's libcuda.so.1 (linked with -lcuda, compiled with the real
// cuda.h). Usage: driver_calls MODE [ARG]; tests/native/test_driver.py runs each mode and reads
// its "name value" lines.
//   startup  OSU-style start-up (cuInit, cuDeviceGet, cuDevicePrimaryCtxRetain, cuCtxSetCurrent),
//            the devices as the driver describes them, contexts following cudaSetDevice, and
//            pointer queries on cudaMalloc'd, pageable and cudaMallocHost'd memory
//   entry    cuGetProcAddress and cudaGetDriverEntryPoint(ByVersion) and the functions they return
//   vmm      cuMemCreate, cuMemAddressReserve, cuMemMap, cuMemSetAccess on one GPU, copies and a
//            memset on the mapping, aliasing, out of memory, and the memory given back
//   ranks    each rank makes its own device's primary context current, then all say which is
//   refused NAME  calls one driver function Orrery refuses
// cudaGetDriverEntryPoint is deprecated in CUDA 13, and still what many programs call
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include <cuda.h>
#include <mpi.h>

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#define CU(call)                                                                 \
  do {                                                                           \
    CUresult e_ = (call);                                                        \
    if (e_ != CUDA_SUCCESS) {                                                    \
      const char* n_ = nullptr;                                                  \
      cuGetErrorName(e_, &n_);                                                   \
      fprintf(stderr, "%s failed: %d %s\n", #call, (int)e_, n_ ? n_ : "?");      \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)
#define RT(call)                                                                         \
  do {                                                                                   \
    cudaError_t e_ = (call);                                                             \
    if (e_ != cudaSuccess) {                                                             \
      fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorName(e_));                  \
      exit(1);                                                                           \
    }                                                                                    \
  } while (0)

static void startup() {
  CU(cuInit(0));
  int version = 0, count = 0;
  CU(cuDriverGetVersion(&version));
  CU(cuDeviceGetCount(&count));
  printf("driver_version %d\ncount %d\n", version, count);
  for (int i = 0; i < count; i++) {
    CUdevice dev;
    CU(cuDeviceGet(&dev, i));
    char name[256];
    CU(cuDeviceGetName(name, sizeof name, dev));
    printf("name%d: %s\n", i, name);
    size_t total = 0;
    CU(cuDeviceTotalMem(&total, dev));
    printf("dev%d_total_mem %zu\n", i, total);
    struct {
      const char* key;
      CUdevice_attribute attr;
      bool runtime;  // one the runtime answers too: it must agree
    } attrs[] = {
        {"cc_major", CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, true},
        {"cc_minor", CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, true},
        {"sm_count", CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, true},
        {"pci_bus_id", CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, true},
        {"l2_bytes", CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, true},
        {"unified_addressing", CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, true},
        {"vmm_supported", CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, false},
        {"multicast_supported", CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED, false},
    };
    for (auto& a : attrs) {
      int v = -1, rt = -1;
      CU(cuDeviceGetAttribute(&v, a.attr, dev));
      printf("dev%d_%s %d\n", i, a.key, v);
      if (a.runtime) {
        RT(cudaDeviceGetAttribute(&rt, (cudaDeviceAttr)a.attr, i));
        printf("dev%d_%s_runtime %d\n", i, a.key, rt);
      }
    }
  }
  int bad = 0;
  printf("device_get_past_end %d\n", (int)cuDeviceGet(&bad, count));

  // OSU 7.4's start-up: the primary context of the chosen device, made current
  const int chosen = count - 1;
  CUdevice dev;
  CUcontext ctx = nullptr, current = nullptr, ctx0 = nullptr;
  CU(cuDeviceGet(&dev, chosen));
  CU(cuDevicePrimaryCtxRetain(&ctx, dev));
  unsigned flags = 99;
  int active = -1;
  CU(cuDevicePrimaryCtxGetState(dev, &flags, &active));
  printf("retained_active %d\n", active);
  CU(cuCtxSetCurrent(ctx));
  int rt_device = -1;
  RT(cudaGetDevice(&rt_device));
  printf("runtime_device_after_set_current %d\n", rt_device);
  CU(cuCtxGetCurrent(&current));
  printf("current_is_retained %d\n", (int)(current == ctx));
  CUdevice ctx_dev = -1;
  CU(cuCtxGetDevice(&ctx_dev));
  printf("ctx_device %d\n", (int)ctx_dev);
  // the runtime's cudaSetDevice makes that device's primary context current
  RT(cudaSetDevice(0));
  CU(cuCtxGetCurrent(&current));
  CU(cuDevicePrimaryCtxRetain(&ctx0, 0));
  printf("current_after_cudaSetDevice0_is_primary0 %d\n", (int)(current == ctx0));
  printf("primary0_differs %d\n", (int)(ctx0 != ctx || count == 1));
  CU(cuCtxSetCurrent(nullptr));
  CU(cuCtxGetCurrent(&current));
  printf("current_after_set_null %d\n", (int)(current != nullptr));
  CU(cuCtxSetCurrent(ctx));
  CU(cuCtxSynchronize());
  CU(cuDevicePrimaryCtxRelease(0));
  CU(cuDevicePrimaryCtxRelease(dev));
  CU(cuDevicePrimaryCtxGetState(dev, &flags, &active));
  printf("released_active %d\n", active);
  printf("release_unretained %d\n", (int)cuDevicePrimaryCtxRelease(dev));

  // pointers: device memory of the chosen device, pageable and pinned host memory
  char *d = nullptr, *pinned = nullptr;
  const size_t n = 1 << 20;
  RT(cudaMalloc(&d, n));
  RT(cudaMallocHost(&pinned, 4096));
  char* pageable = (char*)malloc(4096);
  CUdeviceptr p = (CUdeviceptr)(d + 100);
  unsigned type = 0, managed = 7;
  int ordinal = -1;
  CUcontext owner = nullptr;
  CUdeviceptr start = 0, dptr = 0;
  size_t size = 0;
  CU(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p));
  CU(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p));
  CU(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, p));
  CU(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p));
  CU(cuPointerGetAttribute(&dptr, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, p));
  CU(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, p));
  CU(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, p));
  printf("device_type %u\ndevice_ordinal %d\ndevice_context_is_chosen %d\ndevice_managed %u\n", type, ordinal,
         (int)(owner == ctx), managed);
  printf("device_pointer_offset %lld\nrange_start_offset %lld\nrange_size %zu\n", (long long)(dptr - (CUdeviceptr)d),
         (long long)(start - (CUdeviceptr)d), size);
  CUdeviceptr base = 0;
  size_t range = 0;
  CU(cuMemGetAddressRange(&base, &range, p));
  printf("address_range_offset %lld\naddress_range_size %zu\n", (long long)(base - (CUdeviceptr)d), range);
  printf("address_range_of_pinned %d\n", (int)cuMemGetAddressRange(&base, &range, (CUdeviceptr)pinned));
  void* host = nullptr;
  printf("host_pointer_of_device %d\n", (int)cuPointerGetAttribute(&host, CU_POINTER_ATTRIBUTE_HOST_POINTER, p));
  // pageable memory is unknown to CUDA: an error for cuPointerGetAttribute (OSU takes it as host
  // memory), defaults from cuPointerGetAttributes
  printf("pageable_type_error %d\n",
         (int)cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)pageable));
  CUpointer_attribute which[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                 CU_POINTER_ATTRIBUTE_CONTEXT};
  type = 9;
  ordinal = 9;
  owner = ctx;
  void* out[] = {&type, &ordinal, &owner};
  CU(cuPointerGetAttributes(3, which, out, (CUdeviceptr)pageable));
  printf("pageable_attrs_type %u\npageable_attrs_ordinal %d\npageable_attrs_context_null %d\n", type, ordinal,
         (int)(owner == nullptr));
  CU(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(pinned + 10)));
  CU(cuPointerGetAttribute(&host, CU_POINTER_ATTRIBUTE_HOST_POINTER, (CUdeviceptr)(pinned + 10)));
  printf("pinned_type %u\npinned_host_pointer_offset %lld\n", type, (long long)((char*)host - pinned));
  RT(cudaFree(d));
  printf("freed_type_error %d\n", (int)cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p));
  const char *ename = nullptr, *etext = nullptr;
  CU(cuGetErrorName(CUDA_ERROR_INVALID_VALUE, &ename));
  CU(cuGetErrorString(CUDA_ERROR_INVALID_VALUE, &etext));
  printf("error_name: %s\nerror_text: %s\n", ename, etext);
}

typedef CUresult (*GetCount)(int*);
typedef CUresult (*GetAttr)(void*, CUpointer_attribute, CUdeviceptr);

static void entry() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!lib) {
    fprintf(stderr, "libcuda.so.1 is not loaded\n");
    exit(1);
  }
  void* fp = nullptr;
  CUdriverProcAddressQueryResult status = (CUdriverProcAddressQueryResult)9;
  // the newest version at or before the one asked for
  CU(cuGetProcAddress("cuDeviceTotalMem", &fp, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &status));
  printf("total_mem_13000_is_v2 %d\nstatus_found %d\n", (int)(fp == dlsym(lib, "cuDeviceTotalMem_v2")), (int)status);
  CU(cuGetProcAddress("cuDeviceTotalMem", &fp, 3000, CU_GET_PROC_ADDRESS_DEFAULT, &status));
  printf("total_mem_3000_is_v1 %d\n", (int)(fp == dlsym(lib, "cuDeviceTotalMem")));
  CU(cuGetProcAddress("cuMemcpy", &fp, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &status));
  printf("memcpy_per_thread_is_ptds %d\n", (int)(fp == dlsym(lib, "cuMemcpy_ptds")));
  CU(cuGetProcAddress("cuInit", &fp, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &status));
  printf("init_per_thread_is_init %d\n", (int)(fp == dlsym(lib, "cuInit")));
  fp = (void*)1;
  printf("not_a_call_result %d\n", (int)cuGetProcAddress("cuNotACall", &fp, 13000, 0, &status));
  printf("not_a_call_status %d\nnot_a_call_null %d\n", (int)status, (int)(fp == nullptr));
  printf("too_old_result %d\n", (int)cuGetProcAddress("cuMemMap", &fp, 10000, 0, &status));
  printf("too_old_status %d\n", (int)status);
  // what they return works
  CU(cuGetProcAddress("cuDeviceGetCount", &fp, 13000, 0, &status));
  int count = -1, rt_count = -1;
  CU(((GetCount)fp)(&count));
  RT(cudaGetDeviceCount(&rt_count));
  printf("proc_count %d\nruntime_count %d\n", count, rt_count);
  cudaDriverEntryPointQueryResult q = (cudaDriverEntryPointQueryResult)9;
  fp = nullptr;
  RT(cudaGetDriverEntryPoint("cuDeviceGetCount", &fp, cudaEnableDefault, &q));
  count = -1;
  CU(((GetCount)fp)(&count));
  printf("entry_point_count %d\nentry_point_status %d\nentry_point_is_linked %d\n", count, (int)q,
         (int)(fp == (void*)&cuDeviceGetCount));
  char* d = nullptr;
  RT(cudaMalloc(&d, 4096));
  RT(cudaGetDriverEntryPointByVersion("cuPointerGetAttribute", &fp, 12000, cudaEnableDefault, &q));
  unsigned type = 0;
  CU(((GetAttr)fp)(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)d));
  printf("by_version_type %u\n", type);
  fp = (void*)1;
  RT(cudaGetDriverEntryPoint("cuNotACall", &fp, cudaEnableDefault, &q));
  printf("entry_point_missing_status %d\nentry_point_missing_null %d\n", (int)q, (int)(fp == nullptr));
}

static void vmm(int device) {
  CU(cuInit(0));
  RT(cudaSetDevice(device));
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  size_t g = 0;
  CU(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  printf("granularity %zu\n", g);
  const size_t size = 4 * g;
  size_t free0 = 0, free1 = 0, total = 0;
  RT(cudaMemGetInfo(&free0, &total));
  CUmemGenericAllocationHandle h = 0, again = 0;
  CU(cuMemCreate(&h, size, &prop, 0));
  RT(cudaMemGetInfo(&free1, &total));
  printf("created_bytes %zu\n", free0 - free1);
  CUdeviceptr ptr = 0;
  CU(cuMemAddressReserve(&ptr, 2 * size, 0, 0, 0));
  printf("reserve_aligned %d\n", (int)(ptr % g == 0));
  CU(cuMemMap(ptr, size, 0, h, 0));
  CU(cuMemMap(ptr + size, size, 0, h, 0));  // the same memory again, right after it
  // mapped but not yet accessible: not device memory the runtime copies to
  unsigned type = 0;
  char* host = nullptr;
  RT(cudaMallocHost(&host, size));
  printf("copy_before_access %d\n", (int)cudaMemcpy((void*)ptr, host, size, cudaMemcpyHostToDevice));
  cudaGetLastError();
  CUmemAccessDesc access = {};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CU(cuMemSetAccess(ptr, 2 * size, &access, 1));
  // the two mappings are one memory (in Orrery device memory is host memory: the host sees it)
  ((volatile char*)ptr)[12345] = 42;
  printf("alias %d\n", (int)((volatile char*)(ptr + size))[12345]);
  CU(cuMemRetainAllocationHandle(&again, (void*)(ptr + size + 10)));
  printf("retained_same_handle %d\n", (int)(again == h));
  CU(cuMemRelease(again));
  int ordinal = -1;
  CUdeviceptr start = 0;
  size_t range = 0;
  CU(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ptr + size + 10));
  CU(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr + size + 10));
  CU(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, ptr + size + 10));
  CU(cuPointerGetAttribute(&range, CU_POINTER_ATTRIBUTE_RANGE_SIZE, ptr + size + 10));
  cudaPointerAttributes rt = {};
  RT(cudaPointerGetAttributes(&rt, (void*)ptr));
  printf("mapped_type %u\nmapped_ordinal %d\nmapped_range_start_offset %lld\nmapped_range_size %zu\n", type, ordinal,
         (long long)(start - ptr), range);
  printf("runtime_type %d\nruntime_device %d\n", (int)rt.type, rt.device);
  // the runtime copies into it, sets it and reads it back as device memory of this GPU
  double t = MPI_Wtime();
  RT(cudaMemcpy((void*)ptr, host, size, cudaMemcpyHostToDevice));
  printf("h2d %.17g\n", MPI_Wtime() - t);
  t = MPI_Wtime();
  RT(cudaMemset((void*)(ptr + size), 0, size));
  RT(cudaDeviceSynchronize());
  printf("memset %.17g\n", MPI_Wtime() - t);
  t = MPI_Wtime();
  RT(cudaMemcpy(host, (void*)(ptr + size), size, cudaMemcpyDeviceToHost));
  printf("d2h %.17g\n", MPI_Wtime() - t);
  printf("cudaFree_of_mapping %d\n", (int)cudaFree((void*)ptr));
  cudaGetLastError();
  // more than the GPU has left: refused as cudaMalloc would be
  size_t left = 0;
  RT(cudaMemGetInfo(&left, &total));
  CUmemGenericAllocationHandle big = 0;
  printf("too_big %d\n", (int)cuMemCreate(&big, (left / g + 1) * g, &prop, 0));
  CU(cuMemCreate(&big, left / g * g, &prop, 0));  // what is left fits
  CU(cuMemRelease(big));
  // released while mapped: the memory stays until the last mapping goes
  CU(cuMemRelease(h));
  RT(cudaMemGetInfo(&free1, &total));
  printf("held_after_release %zu\n", free0 - free1);
  CU(cuMemUnmap(ptr, 2 * size));
  RT(cudaMemGetInfo(&free1, &total));
  printf("held_after_unmap %zu\n", free0 - free1);
  printf("unmapped_type_error %d\n", (int)cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ptr));
  CU(cuMemAddressFree(ptr, 2 * size));
  printf("release_twice %d\n", (int)cuMemRelease(h));
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const char* mode = argc > 1 ? argv[1] : "";
  if (!strcmp(mode, "startup")) {
    startup();
  } else if (!strcmp(mode, "entry")) {
    entry();
  } else if (!strcmp(mode, "vmm")) {
    vmm(argc > 2 ? atoi(argv[2]) : 0);
  } else if (!strcmp(mode, "ranks")) {
    int rank = 0, count = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    CU(cuInit(0));
    CU(cuDeviceGetCount(&count));
    CUcontext ctx = nullptr, current = nullptr;
    CU(cuDevicePrimaryCtxRetain(&ctx, rank % count));
    CU(cuCtxSetCurrent(ctx));
    MPI_Barrier(MPI_COMM_WORLD);  // every rank has set its own before any looks
    CUdevice dev = -1;
    int rt_device = -1;
    CU(cuCtxGetDevice(&dev));
    CU(cuCtxGetCurrent(&current));
    RT(cudaGetDevice(&rt_device));
    printf("rank%d_ctx_device %d\nrank%d_runtime_device %d\nrank%d_current_is_own %d\n", rank, (int)dev, rank,
           rt_device, rank, (int)(current == ctx));
  } else if (!strcmp(mode, "managed")) {  // under --managed resident: what the driver says of it
    CU(cuInit(0));
    char* m = nullptr;
    RT(cudaMallocManaged(&m, 4096));
    unsigned managed = 9, type = 0;
    void* host = nullptr;
    CU(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, (CUdeviceptr)(m + 8)));
    CU(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(m + 8)));
    CU(cuPointerGetAttribute(&host, CU_POINTER_ATTRIBUTE_HOST_POINTER, (CUdeviceptr)(m + 8)));
    printf("managed_is_managed %u\nmanaged_type %u\nmanaged_host_pointer_offset %td\n", managed, type,
           (char*)host - m);
  } else if (!strcmp(mode, "refused")) {
    const char* name = argc > 2 ? argv[2] : "";
    CU(cuInit(0));
    CUdeviceptr p = 0;
    CUmemGenericAllocationHandle mc = 0;
    size_t pitch = 0;
    if (!strcmp(name, "cuMemAllocPitch_v2"))
      cuMemAllocPitch(&p, &pitch, 4096, 4, 4);
    else if (!strcmp(name, "cuMulticastCreate"))
      cuMulticastCreate(&mc, nullptr);
    else if (!strcmp(name, "cuMulticastAddDevice"))
      cuMulticastAddDevice(mc, 0);
    else if (!strcmp(name, "cuMulticastBindMem"))
      cuMulticastBindMem(mc, 0, 0, 0, 0, 0);
    else if (!strcmp(name, "cuMulticastBindAddr"))
      cuMulticastBindAddr(mc, 0, 0, 0, 0);
    else if (!strcmp(name, "cuMulticastUnbind"))
      cuMulticastUnbind(mc, 0, 0, 0);
    else if (!strcmp(name, "cuMulticastGetGranularity"))
      cuMulticastGetGranularity(nullptr, nullptr, CU_MULTICAST_GRANULARITY_MINIMUM);
    else {
      fprintf(stderr, "refused: no call of %s here\n", name);
      return 2;
    }
    printf("refused: %s returned\n", name);
  } else {
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
  }
  MPI_Finalize();
  return 0;
}
