/* A plain shared library (no MPI, no CUDA) that a program links, or opens with dlopen: linked,
 * its getenv resolves in the program's scope (libcudart.so.13's); opened, in the process's
 * global scope (the preloaded liborrery_smpi.so's). Either way it sees the calling rank's
 * launcher variables. */
#include <stdlib.h>

const char* envlib_getenv(const char* name) { return getenv(name); }
