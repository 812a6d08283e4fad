/* Every collective of MPI on communicators of several sizes and messages of several sizes, each
 * result checked against the values it must hold: what SMPI's collective selectors give a program,
 * whichever algorithm they take. Built with `orrery mpicc`. Usage:
 *   every_collective MAX_BYTES SIZES ELEMENTS
 * SIZES and ELEMENTS are comma-separated lists: for each size n (at most the ranks of the run), the
 * first n ranks split off a communicator, and on it, for each count e of ints whose n blocks fit in
 * MAX_BYTES, run MPI_Allreduce (sum), MPI_Reduce (max, to the last rank), MPI_Bcast (from rank 1),
 * MPI_Alltoall, MPI_Alltoallv, MPI_Allgather, MPI_Allgatherv, MPI_Gather (to rank 0), MPI_Scatter
 * (from rank 0), MPI_Reduce_scatter_block, MPI_Reduce_scatter, MPI_Scan, MPI_Exscan (sums) and
 * MPI_Barrier, of e ints (a block); then the same again, in place (MPI_IN_PLACE) where MPI allows it;
 * then, for an even e, the 6 that gather or scatter data without arithmetic and a barrier with two
 * types: e MPI_INTs on one side, e / 2 pairs of ints (a contiguous type) on the other.
 * Every rank prints "FAIL <collective> n=<n> ints=<e> rank=<r>" for a result that is not what it
 * must be; rank 0 of each communicator prints "checked n=<n> ints=<e> calls=14" once it has checked
 * its own, "checked n=<n> ints=<e> calls=14 in place" for the second round and "checked n=<n>
 * ints=<e> calls=7 two types" for the third. The value rank p sends rank q at
 * index i is (131 p + 17 q + 7 i) mod 251: every sum, maximum and block is known to every rank. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int value(int from, int to, int i) { return (from * 131 + to * 17 + i * 7) % 251; }

static int parse(const char* list, int* out, int max) {
  int k = 0;
  for (const char* p = list; *p && k < max; p++) {
    out[k++] = atoi(p);
    while (p[1] && *p != ',')
      p++;
  }
  return k;
}

static int failed(const char* what, int n, int e, int rank) {
  printf("FAIL %s n=%d ints=%d rank=%d\n", what, n, e, rank);
  return 1;
}

/* the n blocks of e ints rank `to` gets from ranks 0..n-1 (from = -1: of rank `to`'s own data to each) */
static int blocks_ok(const int* got, int n, int e, int to) {
  for (int p = 0; p < n; p++)
    for (int i = 0; i < e; i++)
      if (got[p * e + i] != value(p, to, i))
        return 0;
  return 1;
}

/* One round of the 14 calls on communicator c of n ranks, e ints a block; in place where MPI allows
 * it (MPI_IN_PLACE: the receive buffer holds the rank's own data, at the root for a rooted one). */
static void check(MPI_Comm c, int n, int e, int in_place) {
  int r;
  MPI_Comm_rank(c, &r);
  int* send = malloc(sizeof(int) * e * n);
  int* got = malloc(sizeof(int) * e * n);
  int* counts = malloc(sizeof(int) * n);
  int* displs = malloc(sizeof(int) * n);
  for (int p = 0; p < n; p++) {
    counts[p] = e;
    displs[p] = p * e;
    for (int i = 0; i < e; i++) /* block p: for rank p; block 0 also this rank's own data */
      send[p * e + i] = value(r, p, i);
  }
  const size_t all = sizeof(int) * e * n, one = sizeof(int) * e;
  const void* own = in_place ? MPI_IN_PLACE : send;
  int bad = 0;
  long sum;

  memset(got, 0, all);
  if (in_place)
    memcpy(got, send, one);
  MPI_Allreduce(own, got, e, MPI_INT, MPI_SUM, c);
  for (int i = 0; i < e && !bad; i++) {
    sum = 0;
    for (int p = 0; p < n; p++)
      sum += value(p, 0, i);
    bad |= got[i] != sum ? failed("allreduce", n, e, r) : 0;
  }
  memset(got, 0, all);
  if (in_place && r == n - 1)
    memcpy(got, send, one);
  MPI_Reduce(in_place && r == n - 1 ? MPI_IN_PLACE : send, got, e, MPI_INT, MPI_MAX, n - 1, c);
  for (int i = 0; i < e && r == n - 1 && !bad; i++) {
    int max = 0;
    for (int p = 0; p < n; p++)
      max = value(p, 0, i) > max ? value(p, 0, i) : max;
    bad |= got[i] != max ? failed("reduce", n, e, r) : 0;
  }
  memcpy(got, send, one);
  MPI_Bcast(got, e, MPI_INT, 1 % n, c);
  for (int i = 0; i < e && !bad; i++)
    bad |= got[i] != value(1 % n, 0, i) ? failed("bcast", n, e, r) : 0;
  for (int v = 0; v < 2; v++) { /* alltoall, alltoallv: block p of rank p's send */
    if (in_place)
      memcpy(got, send, all);
    else
      memset(got, 0, all);
    if (v == 0)
      MPI_Alltoall(own, in_place ? 0 : e, in_place ? MPI_DATATYPE_NULL : MPI_INT, got, e, MPI_INT, c);
    else
      MPI_Alltoallv(own, in_place ? NULL : counts, in_place ? NULL : displs, in_place ? MPI_DATATYPE_NULL : MPI_INT,
                    got, counts, displs, MPI_INT, c);
    bad |= !bad && !blocks_ok(got, n, e, r) ? failed(v ? "alltoallv" : "alltoall", n, e, r) : 0;
  }
  for (int v = 0; v < 2; v++) { /* allgather, allgatherv: every rank's own data in its place */
    memset(got, 0, all);
    if (in_place)
      memcpy(got + r * e, send, one);
    if (v == 0)
      MPI_Allgather(own, in_place ? 0 : e, in_place ? MPI_DATATYPE_NULL : MPI_INT, got, e, MPI_INT, c);
    else
      MPI_Allgatherv(own, in_place ? 0 : e, in_place ? MPI_DATATYPE_NULL : MPI_INT, got, counts, displs, MPI_INT, c);
    bad |= !bad && !blocks_ok(got, n, e, 0) ? failed(v ? "allgatherv" : "allgather", n, e, r) : 0;
  }
  memset(got, 0, all);
  if (in_place && r == 0)
    memcpy(got, send, one);
  MPI_Gather(in_place && r == 0 ? MPI_IN_PLACE : send, e, MPI_INT, got, e, MPI_INT, 0, c);
  bad |= !bad && r == 0 && !blocks_ok(got, n, e, 0) ? failed("gather", n, e, r) : 0;
  memset(got, 0, one);
  if (in_place && r == 0) /* the root keeps its own block where it is: block 0 of its send */
    MPI_Scatter(send, e, MPI_INT, MPI_IN_PLACE, e, MPI_INT, 0, c);
  else
    MPI_Scatter(send, e, MPI_INT, got, e, MPI_INT, 0, c);
  const int* scattered = in_place && r == 0 ? send : got;
  for (int i = 0; i < e && !bad; i++)
    bad |= scattered[i] != value(0, r, i) ? failed("scatter", n, e, r) : 0;
  for (int v = 0; v < 2; v++) { /* block q of the sum over the ranks goes to rank q */
    if (in_place)
      memcpy(got, send, all);
    else
      memset(got, 0, one);
    if (v == 0)
      MPI_Reduce_scatter_block(own, got, e, MPI_INT, MPI_SUM, c);
    else
      MPI_Reduce_scatter(own, got, counts, MPI_INT, MPI_SUM, c);
    for (int i = 0; i < e && !bad; i++) {
      sum = 0;
      for (int p = 0; p < n; p++)
        sum += value(p, r, i);
      bad |= got[i] != sum ? failed(v ? "reduce_scatter" : "reduce_scatter_block", n, e, r) : 0;
    }
  }
  for (int v = 0; v < 2; v++) { /* the sums over ranks 0..r (inclusive), 0..r-1 (exclusive: not rank 0) */
    memset(got, 0, one);
    if (in_place)
      memcpy(got, send, one);
    if (v == 0)
      MPI_Scan(own, got, e, MPI_INT, MPI_SUM, c);
    else
      MPI_Exscan(own, got, e, MPI_INT, MPI_SUM, c);
    for (int i = 0; i < e && !bad && (v == 0 || r > 0); i++) {
      sum = 0;
      for (int p = 0; p < r + (v == 0); p++)
        sum += value(p, 0, i);
      bad |= got[i] != sum ? failed(v ? "exscan" : "scan", n, e, r) : 0;
    }
  }
  MPI_Barrier(c);
  if (r == 0)
    printf("checked n=%d ints=%d calls=14%s\n", n, e, in_place ? " in place" : "");
  free(send);
  free(got);
  free(counts);
  free(displs);
}

/* The 6 collectives that gather or scatter data without arithmetic, and a barrier, with e MPI_INTs
 * on one side and e / 2 pairs of ints (a contiguous type) on the other: the same type signature,
 * which is all MPI asks of the two sides. e is even. Not MPI_Bcast, nor a single element of e ints:
 * SMPI's segmented algorithms cut each rank's buffer into segments by its own type, as Open MPI's
 * do, and a root's 1 KiB segments of ints then meet one message of a 40 KB element (a deadlock or
 * a truncation, which a real Open MPI would meet as well). */
static void check_two_types(MPI_Comm c, int n, int e) {
  int r;
  MPI_Comm_rank(c, &r);
  MPI_Datatype pair;
  MPI_Type_contiguous(2, MPI_INT, &pair);
  MPI_Type_commit(&pair);
  const int h = e / 2; /* pairs a block */
  int* send = malloc(sizeof(int) * e * n);
  int* got = malloc(sizeof(int) * e * n);
  int *counts = malloc(sizeof(int) * n), *displs = malloc(sizeof(int) * n);
  int *halves = malloc(sizeof(int) * n), *places = malloc(sizeof(int) * n);
  for (int p = 0; p < n; p++) {
    counts[p] = e;
    displs[p] = p * e;
    halves[p] = h;
    places[p] = p * h; /* in pairs */
    for (int i = 0; i < e; i++)
      send[p * e + i] = value(r, p, i);
  }
  const size_t all = sizeof(int) * e * n, one = sizeof(int) * e;
  int bad = 0;

  memset(got, 0, all);
  MPI_Alltoall(send, e, MPI_INT, got, h, pair, c);
  bad |= !bad && !blocks_ok(got, n, e, r) ? failed("alltoall (two types)", n, e, r) : 0;
  memset(got, 0, all);
  MPI_Alltoallv(send, counts, displs, MPI_INT, got, halves, places, pair, c);
  bad |= !bad && !blocks_ok(got, n, e, r) ? failed("alltoallv (two types)", n, e, r) : 0;
  memset(got, 0, all);
  MPI_Allgather(send, e, MPI_INT, got, h, pair, c);
  bad |= !bad && !blocks_ok(got, n, e, 0) ? failed("allgather (two types)", n, e, r) : 0;
  memset(got, 0, all);
  MPI_Allgatherv(send, e, MPI_INT, got, halves, places, pair, c);
  bad |= !bad && !blocks_ok(got, n, e, 0) ? failed("allgatherv (two types)", n, e, r) : 0;
  memset(got, 0, all);
  MPI_Gather(send, e, MPI_INT, got, h, pair, 0, c);
  bad |= !bad && r == 0 && !blocks_ok(got, n, e, 0) ? failed("gather (two types)", n, e, r) : 0;
  memset(got, 0, one);
  MPI_Scatter(send, h, pair, got, e, MPI_INT, 0, c);
  for (int i = 0; i < e && !bad; i++)
    bad |= got[i] != value(0, r, i) ? failed("scatter (two types)", n, e, r) : 0;
  MPI_Barrier(c);
  if (r == 0)
    printf("checked n=%d ints=%d calls=7 two types\n", n, e);
  MPI_Type_free(&pair);
  free(send);
  free(got);
  free(counts);
  free(displs);
  free(halves);
  free(places);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int world, rank;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (argc < 4) {
    if (rank == 0)
      fprintf(stderr, "usage: every_collective MAX_BYTES SIZES ELEMENTS\n");
    MPI_Finalize();
    return 2;
  }
  const long max_bytes = atol(argv[1]);
  int sizes[64], elements[64];
  const int ns = parse(argv[2], sizes, 64), ne = parse(argv[3], elements, 64);
  for (int s = 0; s < ns && sizes[s] <= world; s++) {
    MPI_Comm c;
    MPI_Comm_split(MPI_COMM_WORLD, rank < sizes[s] ? 0 : MPI_UNDEFINED, rank, &c);
    if (c == MPI_COMM_NULL)
      continue;
    for (int k = 0; k < ne; k++)
      if ((long)sizeof(int) * elements[k] * sizes[s] <= max_bytes) {
        for (int in_place = 0; in_place < 2; in_place++)
          check(c, sizes[s], elements[k], in_place);
        if (elements[k] % 2 == 0)
          check_two_types(c, sizes[s], elements[k]);
      }
    MPI_Comm_free(&c);
  }
  MPI_Finalize();
  return 0;
}
