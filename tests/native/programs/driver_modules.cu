// Modules through the CUDA driver (tests/native/test_driver_modules.py): a program that loads its
// kernels as the CUDA samples' *Drv programs and NVRTC's users do, from a cubin, a fat binary or
// PTX, by path (cuModuleLoad), from memory (cuModuleLoadData, cuModuleLoadDataEx) or as a library
// (cuLibraryLoadFromFile), then launches them with cuLaunchKernel and times them with the
// runtime's events. Prints "name value" lines.
//
//   driver_modules run FILE [file|data|ex|library]   load FILE, query and launch its kernels
//   driver_modules errors DIR                         the driver's errors for bad modules and launches
//   driver_modules threads FILE                       a JIT option Orrery does not give ptxas
//   driver_modules contexts FILE                      a context of cuCtxCreate's, pushed and popped
//   driver_modules second_context                     two created contexts on one GPU

#include <cuda.h>
#include <cuda_runtime.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

#define CU(call)                                                          \
  do {                                                                    \
    CUresult e_ = (call);                                                 \
    if (e_ != CUDA_SUCCESS) {                                             \
      fprintf(stderr, "%s:%d: %s: %d\n", __FILE__, __LINE__, #call, e_); \
      exit(1);                                                            \
    }                                                                     \
  } while (0)

static std::string slurp(const char* path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// The time of `launch` on the default stream, between events around it (ms).
template <typename F>
static float timed(F launch) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  cudaEventRecord(a, 0);
  CUresult e = launch();
  cudaEventRecord(b, 0);
  cudaEventSynchronize(b);
  float ms = -1;
  cudaEventElapsedTime(&ms, a, b);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return e == CUDA_SUCCESS ? ms : -(float)e;
}

static void attributes(const char* tag, CUfunction f) {
  int regs, shared, threads, local, ptx, binary, dynamic;
  CU(cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, f));
  CU(cuFuncGetAttribute(&shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f));
  CU(cuFuncGetAttribute(&threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f));
  CU(cuFuncGetAttribute(&local, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, f));
  CU(cuFuncGetAttribute(&ptx, CU_FUNC_ATTRIBUTE_PTX_VERSION, f));
  CU(cuFuncGetAttribute(&binary, CU_FUNC_ATTRIBUTE_BINARY_VERSION, f));
  CU(cuFuncGetAttribute(&dynamic, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f));
  printf("attr %s %d %d %d %d %d %d %d\n", tag, regs, shared, threads, local, ptx, binary, dynamic);
  int blocks;
  CU(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, f, 256, 0));
  printf("occupancy_%s_256 %d\n", tag, blocks);
  int grid, block;
  CU(cuOccupancyMaxPotentialBlockSize(&grid, &block, f, nullptr, 1024, 0));
  printf("potential %s %d %d\n", tag, grid, block);
}


static int run(const char* path, const char* how) {
  CUmodule m;
  CUlibrary lib = nullptr;
  std::string image = slurp(path);
  if (!strcmp(how, "file")) {
    CU(cuModuleLoad(&m, path));
  } else if (!strcmp(how, "data")) {
    CU(cuModuleLoadData(&m, image.c_str()));
  } else if (!strcmp(how, "ex")) {  // as the CUDA samples' JIT: logs, their sizes, at most 32 registers
    char info[256], error[256];
    CUjit_option options[] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, CU_JIT_ERROR_LOG_BUFFER,
                              CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_MAX_REGISTERS};
    void* values[] = {info, (void*)(size_t)sizeof info, error, (void*)(size_t)sizeof error, (void*)(size_t)32};
    CU(cuModuleLoadDataEx(&m, image.c_str(), 5, options, values));
    printf("ex_logs %zu %zu\n", (size_t)values[1], (size_t)values[3]);
  } else {
    CU(cuLibraryLoadFromFile(&lib, path, nullptr, nullptr, 0, nullptr, nullptr, 0));
    CU(cuLibraryGetModule(&m, lib));
  }
  unsigned count;
  CU(cuModuleGetFunctionCount(&count, m));
  printf("functions %u\n", count);
  CUfunction all[8];
  CU(cuModuleEnumerateFunctions(all, count, m));
  for (unsigned i = 0; i < count; i++) {
    const char* name;
    CU(cuFuncGetName(&name, all[i]));
    printf("function %s\n", name);
  }
  CUfunction first = nullptr;  // at most as many as asked for
  CU(cuModuleEnumerateFunctions(&first, 1, m));
  printf("first_is_first %d\n", first == all[0]);
  CUfunction busy, brief, scaled;
  if (lib) {  // a library's kernels, and their functions in the current context
    CUkernel k;
    CU(cuLibraryGetKernel(&k, lib, "busy"));
    CU(cuKernelGetFunction(&busy, k));
    CU(cuLibraryGetKernel(&k, lib, "brief"));
    CU(cuKernelGetFunction(&brief, k));
    int regs;
    CU(cuKernelGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, k, 0));
    printf("kernel_brief_regs %d\n", regs);
  } else {
    CU(cuModuleGetFunction(&busy, m, "busy"));
    CU(cuModuleGetFunction(&brief, m, "brief"));
  }
  CU(cuModuleGetFunction(&scaled, m, "_Z6scaledIdEvPT_S0_"));
  CUmodule owner;
  CU(cuFuncGetModule(&owner, busy));
  printf("owner_is_module %d\n", owner == m);
  printf("missing %d\n", (int)cuModuleGetFunction(&busy, m, "missing"));
  attributes("busy", busy);
  attributes("brief", brief);
  // brief's variables: device memory of their size (their initial values, which a copy to the
  // host would not show in skeleton mode)
  CUdeviceptr coefficients, counter;
  size_t bytes = 0, counter_bytes = 0;
  CU(cuModuleGetGlobal(&coefficients, &bytes, m, "coefficients"));
  unsigned type = 0;
  CU(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, coefficients));
  printf("coefficients %zu %u\n", bytes, type);
  CU(cuModuleGetGlobal(&counter, &counter_bytes, m, "counter"));
  CUdeviceptr again;
  CU(cuModuleGetGlobal(&again, nullptr, m, "counter"));
  printf("counter %zu %d\n", counter_bytes, again == counter);
  printf("global_missing %d\n", (int)cuModuleGetGlobal(&again, &bytes, m, "missing"));
  size_t free_before, free_after, total;
  CU(cuMemGetInfo(&free_before, &total));

  const int n = 1 << 20;
  CUdeviceptr x;
  CU(cuMemAlloc(&x, n * sizeof(float)));
  int count_arg = n;
  void* params[] = {&x, &count_arg};
  printf("busy_ms %.6f\n", timed([&] { return cuLaunchKernel(busy, n / 256, 1, 1, 256, 1, 1, 0, 0, params, nullptr); }));
  // brief's parameters as one buffer (cuLaunchKernel's `extra`, as vectorAddDrv passes them)
  size_t size = sizeof x;
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &x, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
  printf("brief_ms %.6f\n", timed([&] { return cuLaunchKernel(brief, 4, 1, 1, 256, 1, 1, 0, 0, nullptr, extra); }));
  double a = 2;
  void* scaled_params[] = {&x, &a};
  printf("scaled_ms %.6f\n",
         timed([&] { return cuLaunchKernel(scaled, 10, 1, 1, 100, 1, 1, 0, 0, scaled_params, nullptr); }));
  // past brief's launch bounds (256 threads): CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
  printf("brief_512 %d\n", (int)cuLaunchKernel(brief, 1, 1, 1, 512, 1, 1, 0, 0, nullptr, extra));
  printf("both_params %d\n", (int)cuLaunchKernel(busy, 1, 1, 1, 1, 1, 1, 0, 0, params, extra));
  // on a runtime stream (simpleDrvRuntime): ordered there
  cudaStream_t s;
  cudaStreamCreate(&s);
  CU(cuLaunchKernel(busy, 1, 1, 1, 32, 1, 1, 0, (CUstream)s, params, nullptr));
  printf("stream_query %d\n", (int)cuStreamQuery((CUstream)s));
  CU(cuStreamSynchronize((CUstream)s));
  printf("runtime_last_error %d\n", (int)cudaGetLastError());
  CU(cuMemFree(x));
  if (lib) {
    CU(cuLibraryUnload(lib));
  } else {
    CU(cuModuleUnload(m));
  }
  CU(cuMemGetInfo(&free_after, &total));  // the variables' memory, given back with their module
  printf("globals_freed %zu\n", free_after - free_before);
  printf("unload_again %d\n", (int)cuModuleUnload(m));
  printf("launch_unloaded %d\n", (int)cuLaunchKernel(busy, 1, 1, 1, 1, 1, 1, 0, 0, params, nullptr));
  return 0;
}

static int errors(const std::string& dir) {
  CUmodule m;
  printf("missing_file %d\n", (int)cuModuleLoad(&m, (dir + "/absent.cubin").c_str()));
  printf("not_an_image %d\n", (int)cuModuleLoadData(&m, "this is neither PTX nor a cubin"));
  printf("sm80_cubin %d\n", (int)cuModuleLoad(&m, (dir + "/sm80.cubin").c_str()));
  const char* name = "";
  cuGetErrorName(CUDA_ERROR_NO_BINARY_FOR_GPU, &name);
  printf("no_binary_name %s\n", name);
  printf("sm100_ptx %d\n", (int)cuModuleLoad(&m, (dir + "/sm100.ptx").c_str()));
  char log[512] = "";
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* values[] = {log, (void*)(size_t)sizeof log};
  std::string bad = slurp((dir + "/bad.ptx").c_str());
  printf("bad_ptx %d\n", (int)cuModuleLoadDataEx(&m, bad.c_str(), 2, options, values));
  printf("bad_ptx_log_bytes %zu\n", (size_t)values[1]);
  printf("bad_ptx_log %s\n", strchr(log, '\n') ? std::string(log, strchr(log, '\n')).c_str() : log);
  // NVRTC asks the driver it loads for one of NVIDIA's private tables, and goes on without it
  const void* table = &table;
  CUuuid id = {{'n', 'o', 't', ' ', 'a', ' ', 't', 'a', 'b', 'l', 'e', 0, 0, 0, 0, 0}};
  CUresult e = cuGetExportTable(&table, &id);
  printf("export_table %d %d\n", (int)e, table == nullptr);
  CU(cuCtxSetCurrent(nullptr));
  printf("no_context %d\n", (int)cuModuleLoad(&m, (dir + "/sm90.cubin").c_str()));
  return 0;
}

// CU_JIT_THREADS_PER_BLOCK: the threads the compiler should target, which ptxas takes no option for
static int threads(const char* path) {
  std::string ptx = slurp(path);
  CUmodule m;
  CUjit_option options[] = {CU_JIT_THREADS_PER_BLOCK};
  void* values[] = {(void*)(size_t)128};
  printf("loaded %d\n", (int)cuModuleLoadDataEx(&m, ptx.c_str(), 1, options, values));
  return 0;
}

static void print_context(const char* tag, CUcontext expected) {
  CUcontext c = nullptr;
  CU(cuCtxGetCurrent(&c));
  printf("%s %d\n", tag, c == expected);
}

// A context of cuCtxCreate's: current once made, on top of the primary one main made current; the
// context of its memory and streams; pushed under and popped from; destroyed back to the primary.
static int contexts(const char* path) {
  CUcontext primary, created, popped;
  CU(cuCtxGetCurrent(&primary));
  CU(cuCtxCreate(&created, nullptr, 0, 0));
  printf("created_differs %d\n", created != primary);
  print_context("created_current", created);
  CUdevice dev = -1;
  CU(cuCtxGetDevice(&dev));
  printf("created_device %d\n", dev);
  CUmodule m;
  CU(cuModuleLoad(&m, path));
  CUfunction busy;
  CU(cuModuleGetFunction(&busy, m, "busy"));
  CUdeviceptr x;
  CU(cuMemAlloc(&x, 1 << 20));
  CUcontext owner = nullptr;
  CU(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, x));
  printf("memory_context_is_created %d\n", owner == created);
  CUstream s;
  CU(cuStreamCreate(&s, 0));
  CU(cuStreamGetCtx(s, &owner));
  printf("stream_context_is_created %d\n", owner == created);
  int n = 1 << 18;
  void* params[] = {&x, &n};
  const double launched = MPI_Wtime();
  CU(cuLaunchKernel(busy, n / 256, 1, 1, 256, 1, 1, 0, s, params, nullptr));
  // the context's device's limits, cache preference and stream priorities are the runtime's
  CU(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 16 << 20));
  size_t heap = 0, runtime_heap = 0;
  CU(cuCtxGetLimit(&heap, CU_LIMIT_MALLOC_HEAP_SIZE));
  cudaDeviceGetLimit(&runtime_heap, cudaLimitMallocHeapSize);
  printf("heap %zu %d\n", heap, heap == runtime_heap);
  CU(cuCtxSetCacheConfig(CU_FUNC_CACHE_PREFER_SHARED));
  CUfunc_cache cache;
  cudaFuncCache runtime_cache;
  CU(cuCtxGetCacheConfig(&cache));
  cudaDeviceGetCacheConfig(&runtime_cache);
  printf("cache %d %d\n", (int)cache, (int)runtime_cache);
  int least, greatest, runtime_least, runtime_greatest;
  CU(cuCtxGetStreamPriorityRange(&least, &greatest));
  cudaDeviceGetStreamPriorityRange(&runtime_least, &runtime_greatest);
  printf("priorities_are_runtime_s %d\n", least == runtime_least && greatest == runtime_greatest);
  CU(cuCtxPushCurrent(primary));
  print_context("pushed_primary_current", primary);
  CU(cuCtxPopCurrent(&popped));
  printf("popped_primary %d\n", popped == primary);
  print_context("created_current_again", created);
  CU(cuStreamDestroy(s));
  CU(cuModuleUnload(m));
  CU(cuCtxDestroy(created));  // waits for its work, the kernel above (and frees its memory, x)
  printf("destroyed_after %.9f\n", MPI_Wtime() - launched);
  print_context("primary_current_after_destroy", primary);
  printf("destroy_again %d\n", (int)cuCtxDestroy(created));
  printf("destroy_primary %d\n", (int)cuCtxDestroy(primary));
  CU(cuCtxPopCurrent(&popped));
  print_context("none_after_pop", nullptr);
  printf("pop_empty %d\n", (int)cuCtxPopCurrent(&popped));
  return 0;
}

static int second_context() {
  CUcontext a, b;
  CU(cuCtxCreate(&a, nullptr, 0, 0));
  printf("first %d\n", 0);
  cuCtxCreate(&b, nullptr, 0, 0);
  printf("second %d\n", 0);
  return 0;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  CU(cuInit(0));
  CUcontext ctx;
  CU(cuDevicePrimaryCtxRetain(&ctx, 0));
  CU(cuCtxSetCurrent(ctx));
  int rc = 2;
  if (argc == 4 && !strcmp(argv[1], "run"))
    rc = run(argv[2], argv[3]);
  else if (argc == 3 && !strcmp(argv[1], "errors"))
    rc = errors(argv[2]);
  else if (argc == 3 && !strcmp(argv[1], "threads"))
    rc = threads(argv[2]);
  else if (argc == 3 && !strcmp(argv[1], "contexts"))
    rc = contexts(argv[2]);
  else if (argc == 2 && !strcmp(argv[1], "second_context"))
    rc = second_context();
  else
    fprintf(stderr, "usage: driver_modules run FILE file|data|ex|library | errors DIR | threads FILE | contexts FILE | "
                    "second_context\n");
  MPI_Finalize();
  return rc;
}
