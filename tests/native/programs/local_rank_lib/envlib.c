/* A plain shared library (no MPI, no CUDA) that a program links: its getenv is resolved in the
 * program's scope, so it sees the calling rank's launcher variables too. */
#include <stdlib.h>

const char* envlib_getenv(const char* name) { return getenv(name); }
