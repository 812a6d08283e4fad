/* A program with code SMPI's compilers built (this file, `orrery mpicc`) and code they did not
 * (plain.c, plain cc), passing allocations across: tests/native/test_launcher.py. Each rank prints
 * whose heap each side allocates from, then "crossings survived". */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

const char* heap_of(const void* p);
char* plain_crossings(char* wrapped);

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  char* wrapped = malloc(32);
  printf("wrapped malloc from %s\n", heap_of(wrapped));
  char* plain = plain_crossings(wrapped);
  if (!plain)
    return 1;
  free(plain);
  printf("crossings survived\n");
  MPI_Finalize();
  return 0;
}
