/* A non-blocking reduction whose operation does not commute, its request freed before it completes
 * (MPI_Request_free), then a non-blocking sum whose request may take the freed one's address, and a
 * blocking reduction of the first data: rank 0 prints the sum and what it must be. Built with
 * `orrery mpicc`. */
#include <mpi.h>
#include <stdio.h>

typedef struct {
  int a, b;
} Map;

static void compose(void* in, void* inout, int* len, MPI_Datatype* type) {
  Map* f = in;
  Map* g = inout;
  for (int i = 0; i < *len; i++) {
    Map r = {(f[i].a * g[i].a) % 251, (f[i].a * g[i].b + f[i].b) % 251};
    g[i] = r;
  }
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Op op;
  MPI_Op_create(compose, 0, &op);
  Map x[4] = {{rank + 2, rank}, {rank + 3, 1}, {2, rank}, {5, 5}}, y[4], z[4];
  MPI_Request freed, later;
  MPI_Iallreduce(x, y, 4, MPI_2INT, op, MPI_COMM_WORLD, &freed);
  MPI_Request_free(&freed);
  MPI_Barrier(MPI_COMM_WORLD);
  int mine = rank, sum = -1;
  MPI_Iallreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &later);
  MPI_Wait(&later, MPI_STATUS_IGNORE);
  MPI_Allreduce(x, z, 4, MPI_2INT, op, MPI_COMM_WORLD);
  if (rank == 0)
    printf("sum %d must be %d\n", sum, size * (size - 1) / 2);
  MPI_Op_free(&op);
  MPI_Finalize();
  return 0;
}
