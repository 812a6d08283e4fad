/* liborrery_smpi.so's stand-ins call the libsimgrid function each replaces: found past this
 * library in the loader's order (dlsym RTLD_NEXT), or the run stops naming it. */
#pragma once

#include <dlfcn.h>
#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace orrery_smpi {

template <typename F>
F next(const char* symbol) {
  void* f = dlsym(RTLD_NEXT, symbol);
  if (!f) {
    fprintf(stderr, "orrery: libsimgrid has no %s: Orrery needs SimGrid 3.32\n", symbol);
    abort();
  }
  return (F)f;
}

/* What a variable of the environment asks of a stand-in: unset or empty, Orrery's way; "simgrid",
 * SimGrid's own; "report", Orrery's way and a line of counts at the exit. Any other value stops
 * smpimain as it loads (`orrery run` checks the same values before it starts). */
enum class Mode { Orrery, Simgrid, Report };

inline Mode mode_from_environment(const char* variable) {
  const char* v = getenv(variable);
  if (!v || !*v)
    return Mode::Orrery;
  if (strcmp(v, "simgrid") == 0)
    return Mode::Simgrid;
  if (strcmp(v, "report") == 0)
    return Mode::Report;
  fprintf(stderr, "orrery: environment variable %s: got '%s', expected 'simgrid' or 'report'\n", variable, v);
  _exit(2);
}

}  // namespace orrery_smpi
