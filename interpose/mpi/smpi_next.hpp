/* liborrery_smpi.so's stand-ins call the libsimgrid function each replaces: found past this
 * library in the loader's order (dlsym RTLD_NEXT), or the run stops naming it. */
#pragma once

#include <dlfcn.h>
#include <cstdio>
#include <cstdlib>

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

}  // namespace orrery_smpi
