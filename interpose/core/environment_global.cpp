/* In liborrery_smpi.so (preloaded into smpimain by `orrery run`): getenv and its kin for the
 * code that looks symbols up in the process's global scope, where this library comes before
 * libc. That is every library smpimain loaded before the program (libsimgrid and its own
 * dependencies: libgfortran, whose get_environment_variable a Fortran rank calls, libstdc++)
 * and every library the program opens with dlopen. The program's own copy and the libraries
 * it links bind to libcudart.so.13's definitions instead (environment.cpp), which register
 * themselves here when it loads; before that, and in processes without it (a child a rank
 * starts inherits LD_PRELOAD), each call is libc's. */
#include "environment.hpp"  // (this library has no include path of its own)

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#define ORR_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using Functions = orrery::EnvironmentFunctions;

const Functions* g_ranks = nullptr;  // libcudart.so.13's, once it has loaded

const Functions& active() { return g_ranks ? *g_ranks : orrery::libc_environment(); }

}  // namespace

// libcudart.so.13's environment.cpp hands its functions over (they fall back to libc's), and
// takes them back (nullptr) should it unload.
ORR_EXPORT void orrery_environment_register(const Functions* ranks) { g_ranks = ranks; }

ORR_EXPORT char* getenv(const char* name) noexcept { return active().getenv(name); }
ORR_EXPORT char* secure_getenv(const char* name) noexcept { return active().secure_getenv(name); }
ORR_EXPORT int setenv(const char* name, const char* value, int replace) noexcept {
  return active().setenv(name, value, replace);
}
ORR_EXPORT int unsetenv(const char* name) noexcept { return active().unsetenv(name); }
ORR_EXPORT int putenv(char* string) noexcept { return active().putenv(string); }
