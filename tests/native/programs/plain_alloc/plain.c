/* Code SMPI's compilers did not build (compiled by plain cc, as a Makefile's $(CXX), nvcc's host
 * code or a library is): its malloc and free are references of SMPI's copy of the program itself,
 * not SMPI's macros. tests/native/test_launcher.py. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whose heap p is in: mimalloc's, where orrery run preloaded it, else glibc's. */
const char* heap_of(const void* p) {
  _Bool (*in_mimalloc)(const void*) = (_Bool (*)(const void*))dlsym(RTLD_DEFAULT, "mi_is_in_heap_region");
  return in_mimalloc && in_mimalloc(p) ? "mimalloc" : "glibc";
}

/* Frees what other code allocated and allocates what other code frees. */
char* plain_crossings(char* wrapped) {
  free(wrapped); /* malloc'd by code SMPI's compiler built */
  free(strdup("glibc's own")); /* allocated inside glibc */
  char* line = NULL;
  size_t n = 0;
  FILE* f = fopen("/proc/self/status", "r");
  if (!f || getline(&line, &n, f) < 0)
    return NULL;
  free(line);
  rewind(f);
  char* word = NULL; /* fscanf's %ms, as nccl-tests' ncclTestGetHostHash reads the boot id */
  if (fscanf(f, "%ms", &word) != 1)
    return NULL;
  free(word);
  fclose(f);
  char* mine = malloc(64);
  char* grown = realloc(malloc(8), 4096);
  printf("plain malloc from %s, realloc from %s\n", heap_of(mine), heap_of(grown));
  free(grown);
  return mine; /* the caller frees it */
}
