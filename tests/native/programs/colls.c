/* Collectives whose algorithms liborrery_smpi.so runs in the kernel (interpose/mpi/smpi_colls.cpp),
 * and some it leaves to SMPI, built with `orrery mpicc`. Usage: colls MODE ...
 *   mix SEED CALLS: CALLS collectives drawn from SEED (the same draw on every rank): MPI_Allreduce,
 *          MPI_Reduce, MPI_Bcast, MPI_Barrier and MPI_Allgather (of 1 to 7 elements, some in place) on
 *          MPI_COMM_WORLD and on a split of it into 3 (by rank mod 3),
 *          of 1 to 1000 elements of float, double, int or long long, with MPI_SUM, MPI_PROD,
 *          MPI_MAX or MPI_MIN, any root, some in place, some broadcasts of a strided (non-contiguous)
 *          datatype and some reductions with a user-defined operation that is not commutative.
 *          Before each call every rank sleeps a time of its own (0 to 96 us, simulated), so that
 *          the ranks enter at different times. After each, a line per rank: the call's number, the
 *          time it returned (MPI_Wtime, in hexadecimal floating point, every bit) and a 64-bit FNV-1a
 *          hash of the data it received (a reduction's root, every rank of the others);
 *   deadlock: every rank but the last calls MPI_Allreduce (8 bytes); the last waits in MPI_Recv
 *          for a message from rank 0 that never comes;
 *   self: MPI_Reduce on MPI_COMM_SELF of 1, 4 and 100 doubles (1.5, 2.5, ...), from a send buffer
 *          and in place; each rank prints the last element it got and the sum of all;
 *   in-place-allgather: MPI_Allgather of one double per rank in place (send count 0, send type
 *          MPI_DATATYPE_NULL, as MPI lets them be); each rank prints the simulated seconds it took;
 *   beyond: a reduction of 1000 doubles with MPI_SUM to rank 0 (8000 bytes: Open MPI's binomial
 *          reduce in 1 KiB segments on 72 ranks) and an allreduce of 10 pairs of doubles
 *          (MPI_Type_contiguous: a derived datatype) with a commutative user operation that adds
 *          them (SMPI's predefined operations refuse derived datatypes), then a broadcast of
 *          128 KiB (16384 doubles) from rank 0; each rank prints the hashes of what it got;
 *   pairwise BYTES: MPI_Alltoall and MPI_Alltoallv (the same counts) of BYTES a block, then the same
 *          exchange written out as Open MPI's pairwise one (step s: MPI_Sendrecv to rank + s, from
 *          rank - s), each after a barrier; each rank prints whether every block it got is its
 *          sender's and the simulated seconds each took (hexadecimal floating point). */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "generated.h"


/* a non-commutative operation on doubles: inout = 2 in + inout / 3 (the order of operands shows) */
static void lopsided(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  for (int i = 0; i < *len; i++)
    ((double*)inout)[i] = 2 * ((double*)in)[i] + ((double*)inout)[i] / 3;
}

/* a commutative operation on pairs of doubles: their sums */
static void add_pairs(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  for (int i = 0; i < 2 * *len; i++)
    ((double*)inout)[i] += ((double*)in)[i];
}

static void fill(void* buf, MPI_Datatype type, int count, int rank, int call) {
  for (int i = 0; i < count; i++) {
    int64_t v = (int64_t)((rank * 2654435761u + call * 40503u + i * 97u) % 2001u) - 1000;
    if (type == MPI_DOUBLE)
      ((double*)buf)[i] = v / 7.0;
    else if (type == MPI_FLOAT)
      ((float*)buf)[i] = (float)(v / 7.0);
    else if (type == MPI_INT)
      ((int*)buf)[i] = (int)(v % 4);  /* small: products of many stay in range */
    else
      ((long long*)buf)[i] = v % 4;
  }
}

static int type_size(MPI_Datatype type) {
  int size;
  MPI_Type_size(type, &size);
  return size;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char* mode = argc > 1 ? argv[1] : "";
  if (!strcmp(mode, "deadlock")) {
    double x = rank, sum = 0;
    if (rank < size - 1)
      MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    else
      MPI_Recv(&x, 1, MPI_DOUBLE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    printf("rank %d after\n", rank);
  } else if (!strcmp(mode, "in-place-allgather")) {
    static double all[1024];
    all[rank] = rank;
    const double t0 = MPI_Wtime();
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, 1, MPI_DOUBLE, MPI_COMM_WORLD);
    printf("rank %d allgather %.17g\n", rank, MPI_Wtime() - t0);
  } else if (!strcmp(mode, "self")) {
    static double in[100], out[100];
    const int counts[] = {1, 4, 100};
    for (int c = 0; c < 3; c++) {
      const int n = counts[c];
      double sum = 0;
      for (int i = 0; i < n; i++)
        in[i] = i + 1.5;
      memset(out, 0, sizeof out);
      MPI_Reduce(in, out, n, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_SELF);
      for (int i = 0; i < n; i++)
        sum += out[i];
      printf("rank %d reduce %d last %g sum %g\n", rank, n, out[n - 1], sum);
      MPI_Reduce(MPI_IN_PLACE, in, n, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_SELF);
      printf("rank %d in-place %d last %g\n", rank, n, in[n - 1]);
    }
  } else if (!strcmp(mode, "beyond")) {
    static double in[1000], out[1000];
    fill(in, MPI_DOUBLE, 1000, rank, 0);
    MPI_Reduce(in, out, 1000, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    printf("rank %d reduce %016llx\n", rank, (unsigned long long)fnv1a(out, rank == 0 ? sizeof out : 0));
    MPI_Datatype pair;
    MPI_Type_contiguous(2, MPI_DOUBLE, &pair);
    MPI_Type_commit(&pair);
    MPI_Op add;
    MPI_Op_create(add_pairs, 1, &add);
    MPI_Allreduce(in, out, 10, pair, add, MPI_COMM_WORLD);
    printf("rank %d allreduce %016llx\n", rank, (unsigned long long)fnv1a(out, 20 * sizeof(double)));
    MPI_Op_free(&add);
    MPI_Type_free(&pair);
    static double big[16384];
    if (rank == 0)
      fill(big, MPI_DOUBLE, 16384, 0, 1);
    MPI_Bcast(big, 16384, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    printf("rank %d bcast %016llx\n", rank, (unsigned long long)fnv1a(big, sizeof big));
  } else if (!strcmp(mode, "pairwise") && argc > 2) {
    const int block = atoi(argv[2]);
    char* out = malloc((size_t)block * size);
    char* in = malloc((size_t)block * size);
    int* counts = malloc(sizeof(int) * size);
    int* displs = malloc(sizeof(int) * size);
    for (int i = 0; i < size; i++) {
      counts[i] = block;
      displs[i] = i * block;
      for (int j = 0; j < block; j++) /* to rank i: its block */
        out[(size_t)i * block + j] = (char)(rank * 31 + i * 7 + j);
    }
    const char* names[] = {"alltoall", "alltoallv", "by-hand"};
    for (int k = 0; k < 3; k++) {
      memset(in, 0, (size_t)block * size);
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      if (k == 0) {
        MPI_Alltoall(out, block, MPI_BYTE, in, block, MPI_BYTE, MPI_COMM_WORLD);
      } else if (k == 1) {
        MPI_Alltoallv(out, counts, displs, MPI_BYTE, in, counts, displs, MPI_BYTE, MPI_COMM_WORLD);
      } else {
        memcpy(in + (size_t)rank * block, out + (size_t)rank * block, block);
        for (int s = 1; s < size; s++) {
          const int to = (rank + s) % size, from = (rank - s + size) % size;
          MPI_Sendrecv(out + (size_t)to * block, block, MPI_BYTE, to, 0, in + (size_t)from * block, block, MPI_BYTE,
                       from, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
      }
      const double took = MPI_Wtime() - t0;
      int ok = 1;
      for (int i = 0; i < size; i++) /* from rank i: its block for this rank */
        for (int j = 0; j < block; j++)
          ok &= in[(size_t)i * block + j] == (char)(i * 31 + rank * 7 + j);
      printf("rank %d %s ok %d took %a\n", rank, names[k], ok, took);
    }
    free(out);
    free(in);
    free(counts);
    free(displs);
  } else if (!strcmp(mode, "mix") && argc > 3) {
    state = strtoull(argv[2], NULL, 10);
    const int calls = atoi(argv[3]);
    MPI_Comm third;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 3, rank, &third);
    MPI_Op op_lopsided;
    MPI_Op_create(lopsided, 0, &op_lopsided);
    MPI_Datatype strided; /* every other double */
    MPI_Type_vector(1000, 1, 2, MPI_DOUBLE, &strided);
    MPI_Type_commit(&strided);
    const MPI_Datatype types[] = {MPI_FLOAT, MPI_DOUBLE, MPI_INT, MPI_LONG_LONG};
    const MPI_Op ops[] = {MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN};
    const int counts[] = {1, 2, 3, 7, 64, 200, 1000};
    static unsigned char in[16000], out[16000];
    for (int call = 0; call < calls; call++) {
      const int kind = (int)draw(7);  /* 0, 1 allreduce; 2, 3 reduce; 4 bcast; 5 barrier; 6 allgather */
      MPI_Comm comm = draw(3) ? MPI_COMM_WORLD : third;
      int crank, csize;
      MPI_Comm_rank(comm, &crank);
      MPI_Comm_size(comm, &csize);
      MPI_Datatype type = types[draw(4)];
      MPI_Op op = ops[draw(4)];
      int count = counts[draw(7)];
      const int root = (int)draw((uint64_t)csize);
      const int variant = (int)draw(4); /* 0: in place; 1: the user's operation (doubles) or strided broadcast */
      if (variant == 1 && kind < 4) {
        type = MPI_DOUBLE;
        op = op_lopsided;
      }
      usleep((useconds_t)((rank * 7919u + call * 104729u) % 97u));
      fill(in, type, count, rank, call);
      memcpy(out, in, (size_t)count * type_size(type));
      size_t got = 0;
      if (kind < 2) {
        MPI_Allreduce(variant == 0 ? MPI_IN_PLACE : in, out, count, type, op, comm);
        got = (size_t)count * type_size(type);
      } else if (kind < 4) {
        const int in_place = variant == 0 && crank == root;
        MPI_Reduce(in_place ? MPI_IN_PLACE : in, out, count, type, op, root, comm);
        got = crank == root ? (size_t)count * type_size(type) : 0;
      } else if (kind == 5) {
        MPI_Barrier(comm);
      } else if (kind == 6) {
        count = counts[draw(4)];
        const size_t block = (size_t)count * type_size(type);
        fill(in, type, count, rank, call);
        memset(out, 0, sizeof out);
        if (variant == 0) { /* in place: the rank's own block already in its slot */
          memcpy(out + crank * block, in, block);
          MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, out, count, type, comm);
        } else {
          MPI_Allgather(in, count, type, out, count, type, comm);
        }
        got = block * (size_t)csize;
      } else if (variant == 1) {
        if (crank != root)
          memset(in, 0, sizeof in);
        MPI_Bcast(in, 1, strided, root, comm);
        memcpy(out, in, sizeof in);
        got = 16000;
      } else {
        if (crank != root)
          memset(out, 0, (size_t)count * type_size(type));
        MPI_Bcast(out, count, type, root, comm);
        got = (size_t)count * type_size(type);
      }
      printf("call %d rank %d t %a data %016llx\n", call, rank, MPI_Wtime(), (unsigned long long)fnv1a(out, got));
    }
    MPI_Type_free(&strided);
    MPI_Op_free(&op_lopsided);
    MPI_Comm_free(&third);
  }
  MPI_Finalize();
  return 0;
}
