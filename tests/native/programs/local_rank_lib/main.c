/* A C program (no C++ runtime) linking envlib.c's library: every rank prints `WHEN RANK NAME
 * VALUE` for NAME = MV2_COMM_WORLD_LOCAL_RANK as read in a constructor (ctor), before MPI_Init
 * through the library (lib) and through a second copy of it the program opens with dlopen, the
 * path given as its argument (plugin), and after MPI_Init by the program itself (after). */
#include <dlfcn.h>
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>

const char* envlib_getenv(const char* name);

static const char* g_ctor;

__attribute__((constructor)) static void at_load(void) { g_ctor = getenv("MV2_COMM_WORLD_LOCAL_RANK"); }

static const char* shown(const char* v) { return v ? v : "(null)"; }

int main(int argc, char** argv) {
  const char* lib = envlib_getenv("MV2_COMM_WORLD_LOCAL_RANK");
  const char* plugin = "(no plugin)";
  void* handle = argc > 1 ? dlopen(argv[1], RTLD_NOW | RTLD_LOCAL) : NULL;
  if (handle) {
    const char* (*plugin_getenv)(const char*) = (const char* (*)(const char*))dlsym(handle, "envlib_getenv");
    plugin = plugin_getenv ? plugin_getenv("MV2_COMM_WORLD_LOCAL_RANK") : "(no envlib_getenv)";
  }
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  printf("ctor %d MV2_COMM_WORLD_LOCAL_RANK %s\n", rank, shown(g_ctor));
  printf("lib %d MV2_COMM_WORLD_LOCAL_RANK %s\n", rank, shown(lib));
  printf("plugin %d MV2_COMM_WORLD_LOCAL_RANK %s\n", rank, shown(plugin));
  printf("after %d MV2_COMM_WORLD_LOCAL_RANK %s\n", rank, shown(getenv("MV2_COMM_WORLD_LOCAL_RANK")));
  MPI_Finalize();
  return 0;
}
