/* The launcher variables each rank sees (interpose/core/environment.cpp). Usage:
 *   local_rank print NAME...: every rank prints `WHEN RANK NAME VALUE` for each NAME as getenv
 *     answered it in a static constructor (ctor), before MPI_Init (before, with C++'s
 *     std::getenv), after it (after, with secure_getenv) and in a host function run by its
 *     stream (hostfn); VALUE is (null) for an unset name.
 *   local_rank select: picks its device as OSU's benchmarks do, from OMPI_COMM_WORLD_LOCAL_RANK
 *     before MPI_Init, then allocates (rank + 1) MiB there and copies them from the host; prints
 *     `device RANK DEVICE USED_BYTES` (cudaGetDevice, the device's used memory after the copy).
 *   local_rank setenv: rank 1 sets LOCAL_RANK=42, rank 2 unsets SLURM_LOCALID and puts
 *     PMI_RANK=7, rank 0 sets RANK=9 without overwriting; then every rank prints
 *     `after RANK NAME VALUE` for those four names.
 *   local_rank environ: every rank prints `environ RANK NAME=VALUE` for each launcher name
 *     environ lists; rank 0 then runs `printenv` in a child process and prints
 *     `child NAME=VALUE` for each NAME it lists. */
#include <cuda_runtime.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {
std::vector<std::string> g_ctor;  // what the static constructor saw, printed once the rank is known
const char* kCtorNames[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "WORLD_SIZE"};

struct AtLoad {
  AtLoad() {
    for (const char* n : kCtorNames) {
      const char* v = getenv(n);
      g_ctor.push_back(std::string(n) + " " + (v ? v : "(null)"));
    }
  }
} g_at_load;

std::string shown(const char* v) { return v ? v : "(null)"; }

struct HostFnArgs {
  std::vector<std::string>* names;
  std::vector<std::string> seen;
};

void CUDART_CB read_in_host_fn(void* p) {
  auto* a = static_cast<HostFnArgs*>(p);
  for (const std::string& n : *a->names)
    a->seen.push_back(shown(getenv(n.c_str())));
}
}  // namespace

extern char** environ;

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  std::vector<std::string> names(argv + (argc > 1 ? 2 : 1), argv + argc);
  std::vector<std::string> before;
  for (const std::string& n : names)
    before.push_back(shown(std::getenv(n.c_str())));
  int device = -1;
  if (mode == "select") {  // as osu_util's set_device_memory / init_accel pick theirs
    int count = 0;
    cudaGetDeviceCount(&count);
    const char* local = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    cudaSetDevice(local ? atoi(local) % count : 0);
  }
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (mode == "print") {
    for (const std::string& line : g_ctor)
      printf("ctor %d %s\n", rank, line.c_str());
    HostFnArgs args{&names, {}};
    cudaLaunchHostFunc(0, read_in_host_fn, &args);
    cudaDeviceSynchronize();
    for (size_t i = 0; i < names.size(); i++) {
      printf("before %d %s %s\n", rank, names[i].c_str(), before[i].c_str());
      printf("after %d %s %s\n", rank, names[i].c_str(), shown(secure_getenv(names[i].c_str())).c_str());
      printf("hostfn %d %s %s\n", rank, names[i].c_str(), args.seen[i].c_str());
    }
  } else if (mode == "select") {
    cudaGetDevice(&device);
    size_t bytes = (size_t)(rank + 1) << 20;
    void* d = nullptr;
    cudaMalloc(&d, bytes);
    std::vector<char> h(bytes, 1);
    cudaMemcpy(d, h.data(), bytes, cudaMemcpyHostToDevice);
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    printf("device %d %d %zu\n", rank, device, total_b - free_b);
    cudaFree(d);
  } else if (mode == "setenv") {
    if (rank == 1)
      setenv("LOCAL_RANK", "42", 1);
    if (rank == 2) {
      unsetenv("SLURM_LOCALID");
      static char put[] = "PMI_RANK=7";
      putenv(put);
    }
    if (rank == 0)
      setenv("RANK", "9", 0);
    MPI_Barrier(MPI_COMM_WORLD);
    for (const char* n : {"LOCAL_RANK", "SLURM_LOCALID", "PMI_RANK", "RANK"})
      printf("after %d %s %s\n", rank, n, shown(getenv(n)).c_str());
  } else if (mode == "environ") {
    for (char** e = environ; *e; e++)
      for (const std::string& n : names)
        if (!strncmp(*e, n.c_str(), n.size()) && (*e)[n.size()] == '=')
          printf("environ %d %s\n", rank, *e);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
      if (FILE* child = popen("printenv", "r")) {
        char line[4096];
        while (fgets(line, sizeof line, child))
          for (const std::string& n : names)
            if (!strncmp(line, n.c_str(), n.size()) && line[n.size()] == '=')
              printf("child %s", line);
        pclose(child);
      }
    }
  }
  MPI_Finalize();
  return 0;
}
