/* What environment.cpp (in libcudart.so.13) hands to environment_global.cpp (in the preloaded
 * liborrery_smpi.so): its getenv and kin, for the code that binds to the preloaded library. */
#ifndef ORRERY_ENVIRONMENT_HPP
#define ORRERY_ENVIRONMENT_HPP

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <type_traits>

namespace orrery {

struct EnvironmentFunctions {
  char* (*getenv)(const char*);
  char* (*secure_getenv)(const char*);
  int (*setenv)(const char*, const char*, int);
  int (*unsetenv)(const char*);
  int (*putenv)(char*);
};

// libc's own functions, by libc's handle (RTLD_NEXT would depend on where the library asking was
// loaded: preloaded by `orrery run`, after liborrery_smpi.so, or as a dependency of a program's
// copy). Each library that includes this has its own copy (hidden visibility).
inline const EnvironmentFunctions& libc_environment() {
  static const EnvironmentFunctions functions = [] {
    void* libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    auto resolve = [libc](auto& f, const char* name) {
      void* p = libc ? dlsym(libc, name) : nullptr;
      if (!p) {  // not fatal(): that reads the environment itself
        fprintf(stderr, "orrery: error: libc's %s not found\n", name);
        _exit(70);
      }
      f = reinterpret_cast<std::remove_reference_t<decltype(f)>>(p);
    };
    EnvironmentFunctions f{};
    resolve(f.getenv, "getenv");
    resolve(f.secure_getenv, "secure_getenv");
    resolve(f.setenv, "setenv");
    resolve(f.unsetenv, "unsetenv");
    resolve(f.putenv, "putenv");
    return f;
  }();
  return functions;
}

}  // namespace orrery

// Exported by liborrery_smpi.so: from then on its functions forward to `ranks` (nullptr: libc's).
extern "C" void orrery_environment_register(const orrery::EnvironmentFunctions* ranks);

#endif
