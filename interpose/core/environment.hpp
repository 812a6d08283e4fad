/* What environment.cpp (in libcudart.so.13) hands to environment_global.cpp (in the preloaded
 * liborrery_smpi.so): its getenv and kin, for the code that binds to the preloaded library. */
#ifndef ORRERY_ENVIRONMENT_HPP
#define ORRERY_ENVIRONMENT_HPP

namespace orrery {

struct EnvironmentFunctions {
  char* (*getenv)(const char*);
  char* (*secure_getenv)(const char*);
  int (*setenv)(const char*, const char*, int);
  int (*unsetenv)(const char*);
  int (*putenv)(char*);
};

}  // namespace orrery

// Exported by liborrery_smpi.so: from then on its functions forward to `ranks` (nullptr: libc's).
extern "C" void orrery_environment_register(const orrery::EnvironmentFunctions* ranks);

#endif
