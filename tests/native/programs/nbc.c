/* Non-blocking collectives against their blocking forms (interpose/mpi/smpi_nbc.cpp), built with
 * `orrery mpicc`. Usage: nbc MODE ...
 *   mix SEED CALLS FORM [KINDS]: CALLS collectives drawn from SEED (the same draw on every rank):
 *          allreduce, reduce, bcast, barrier and allgather (KINDS, if given, keeps those of its
 *          letters: a, r, b, B, g; a call of another kind is drawn but not made), on MPI_COMM_WORLD
 *          and on a split of it into 3 by rank mod 3 (KINDS with W: on MPI_COMM_WORLD only), of 1 to 1000 elements (an allgather 1 to 7 a rank) of int, long long, float
 *          or double holding small integers (so that every order of a sum gives the same bits),
 *          with MPI_SUM, MPI_MAX or MPI_MIN, any root, some in place. Before each call every rank
 *          sleeps a time of its own (0 to 96 us, simulated), so that the ranks enter at different
 *          times. FORM "blocking" makes the blocking calls; "wait" the non-blocking ones, each
 *          waited for at once with MPI_Wait; "test" the same, completed by MPI_Test in a loop (each
 *          a poll); "waitall" each with a ring exchange of one int (MPI_Irecv from the left,
 *          MPI_Isend to the right) completed by one MPI_Waitall. After each call, a line per
 *          rank: the call's number, the time it returned (MPI_Wtime, hexadecimal floating point,
 *          every bit) and a 64-bit FNV-1a hash of the data it received;
 *   overlap FORM BYTES T: after a barrier, each rank prints the time (hexadecimal floating point)
 *          it enters an allreduce of BYTES bytes (doubles), the time it returns, and the time it
 *          is through; FORM "blocking": MPI_Allreduce, then a sleep of T microseconds; FORM
 *          "overlapped": MPI_Iallreduce, the sleep, then MPI_Wait (returning, through: the same);
 *          FORM "polled": MPI_Iallreduce, then the sleep and an MPI_Test, again until it completes
 *          (returning, through: where the last returned), and the rank prints how many it made;
 *   freed: MPI_Ibcast of 64 ints from rank 0 whose request every rank but the root frees at once,
 *          then MPI_Barrier, then MPI_Ibcast of 64 ints from rank 1, waited for; each rank prints
 *          the second's first and last element;
 *   reduce FORM COUNT: after a barrier, MPI_Reduce (FORM "blocking") or MPI_Ireduce waited for at
 *          once ("waited") of COUNT ints (rank + i) with MPI_SUM to rank 0; each rank prints the
 *          simulated time it took (hexadecimal floating point), the root whether every sum is right;
 *   inplace COUNT: in place, MPI_Iallreduce, MPI_Iscan and MPI_Iexscan of COUNT doubles and
 *          MPI_Ireduce_scatter_block of COUNT a rank, with MPI_MAX, then MPI_Ialltoall of COUNT a
 *          rank, then MPI_Ialltoallv and MPI_Ialltoallw of COUNT a rank with PAD doubles between
 *          the blocks, each waited for at once; rank r's element i is (31 r + 7 i) mod 97 - 40; each
 *          rank prints, per call, how many elements differ from the maximum over the ranks the call
 *          combines (the alltoalls': from the element its sender had in its place);
 *   testany: an MPI_Iallreduce of one double completed by MPI_Testany over it and a null request,
 *          polled in a loop, then another completed by MPI_Testsome over the same; each rank prints,
 *          for each, the index or count it got, how many polls it took, the simulated time from the
 *          post to the completion (hexadecimal floating point) and the sum;
 *   deadlock: every rank but the last calls MPI_Iallreduce (8 bytes) and waits for it; the last
 *          waits in MPI_Recv for a message from rank 0 that never comes;
 *   fallback: MPI_Iallreduce of 131072 doubles (1 MiB), waited for; each
 *          rank prints the sum's first and last element. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "generated.h"


enum Form { BLOCKING, WAIT, TEST, WAITALL };

/* completes `rq` as FORM asks; with WAITALL, together with a ring exchange posted now */
static void complete(enum Form form, MPI_Request rq, int rank, int size) {
  if (form == WAIT) {
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
  } else if (form == TEST) {
    int done = 0;
    while (!done)
      MPI_Test(&rq, &done, MPI_STATUS_IGNORE);
  } else {
    int out = rank, in = -1;
    MPI_Request all[3];
    all[0] = rq;
    MPI_Irecv(&in, 1, MPI_INT, (rank + size - 1) % size, 5, MPI_COMM_WORLD, &all[1]);
    MPI_Isend(&out, 1, MPI_INT, (rank + 1) % size, 5, MPI_COMM_WORLD, &all[2]);
    MPI_Waitall(3, all, MPI_STATUSES_IGNORE);
    if (in != (rank + size - 1) % size || all[0] != MPI_REQUEST_NULL) {
      fprintf(stderr, "rank %d: ring got %d, request %s\n", rank, in, all[0] == MPI_REQUEST_NULL ? "null" : "live");
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
}

static int mix(unsigned seed, int calls, enum Form form, const char* kinds) {
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm split;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 3, rank, &split);
  const MPI_Datatype types[] = {MPI_INT, MPI_LONG_LONG, MPI_FLOAT, MPI_DOUBLE};
  const size_t sizes[] = {sizeof(int), sizeof(long long), sizeof(float), sizeof(double)};
  const MPI_Op ops[] = {MPI_SUM, MPI_MAX, MPI_MIN};
  char* send = malloc(8 * 1000 * 128);
  char* recv = malloc(8 * 1000 * 128);
  state = seed;
  for (int call = 0; call < calls; call++) {
    const int kind = (int)draw(5), t = (int)draw(4), o = (int)draw(3), on_split = (int)draw(2), in_place = !draw(4);
    MPI_Comm comm = on_split && !strchr(kinds, 'W') ? split : MPI_COMM_WORLD;
    int crank, csize;
    MPI_Comm_rank(comm, &crank);
    MPI_Comm_size(comm, &csize);
    const int count = kind == 4 ? 1 + (int)draw(7) : 1 + (int)draw(1000);
    const int root = (int)draw((uint64_t)csize);
    for (int i = 0; i < count * csize; i++) { /* small integers: every order of a sum is exact */
      const int v = (int)((rank * 31 + i * 7 + call) % 97) - 40;
      if (t == 0) ((int*)send)[i] = v, ((int*)recv)[i] = -v;
      if (t == 1) ((long long*)send)[i] = v, ((long long*)recv)[i] = -v;
      if (t == 2) ((float*)send)[i] = (float)v, ((float*)recv)[i] = (float)-v;
      if (t == 3) ((double*)send)[i] = v, ((double*)recv)[i] = -v;
    }
    if (!strchr(kinds, "arbBg"[kind]))
      continue;
    usleep((useconds_t)((rank * 7919u + call * 104729u) % 97u));
    const MPI_Datatype type = types[t];
    const size_t bytes = (size_t)count * sizes[t];
    MPI_Request rq = MPI_REQUEST_NULL;
    MPI_Request* r = form == BLOCKING ? NULL : &rq;
    size_t got = bytes; /* what the hash covers */
    const void* sbuf = in_place ? MPI_IN_PLACE : send;
    if (kind == 0) {
      if (in_place) memcpy(recv, send, bytes);
      r ? MPI_Iallreduce(sbuf, recv, count, type, ops[o], comm, r) : MPI_Allreduce(sbuf, recv, count, type, ops[o], comm);
    } else if (kind == 1) {
      const void* s = in_place && crank == root ? MPI_IN_PLACE : send;
      if (s == MPI_IN_PLACE) memcpy(recv, send, bytes);
      r ? MPI_Ireduce(s, recv, count, type, ops[o], root, comm, r) : MPI_Reduce(s, recv, count, type, ops[o], root, comm);
      if (crank != root) got = 0;
    } else if (kind == 2) {
      if (crank == root) memcpy(recv, send, bytes);
      r ? MPI_Ibcast(recv, count, type, root, comm, r) : MPI_Bcast(recv, count, type, root, comm);
    } else if (kind == 3) {
      r ? MPI_Ibarrier(comm, r) : MPI_Barrier(comm);
      got = 0;
    } else {
      if (in_place) memcpy(recv + (size_t)crank * bytes, send, bytes);
      r ? MPI_Iallgather(sbuf, count, type, recv, count, type, comm, r)
        : MPI_Allgather(sbuf, count, type, recv, count, type, comm);
      got = bytes * (size_t)csize;
    }
    if (r)
      complete(form, rq, rank, size);
    printf("call %d rank %d t=%a hash=%016llx\n", call, rank, MPI_Wtime(),
           (unsigned long long)fnv1a(recv, got));
  }
  free(send);
  free(recv);
  MPI_Comm_free(&split);
  return 0;
}

enum OverlapForm { ALONE, OVERLAPPED, POLLED };

static int overlap(enum OverlapForm form, int bytes, int microseconds) {
  int rank, polls = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int count = bytes / 8;
  double* in = malloc(sizeof(double) * (size_t)(count ? count : 1));
  double* out = malloc(sizeof(double) * (size_t)(count ? count : 1));
  for (int i = 0; i < count; i++)
    in[i] = rank + i;
  MPI_Barrier(MPI_COMM_WORLD);
  const double entered = MPI_Wtime();
  double returned;
  if (form == ALONE) {
    MPI_Allreduce(in, out, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    returned = MPI_Wtime();
    usleep((useconds_t)microseconds);
  } else {
    MPI_Request rq;
    MPI_Iallreduce(in, out, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &rq);
    if (form == OVERLAPPED) {
      usleep((useconds_t)microseconds);
      MPI_Wait(&rq, MPI_STATUS_IGNORE);
    } else {
      for (int flag = 0; !flag; polls++) {
        usleep((useconds_t)microseconds);
        MPI_Test(&rq, &flag, MPI_STATUS_IGNORE);
      }
    }
    returned = MPI_Wtime();
  }
  const double through = MPI_Wtime();
  int size;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const double first = (double)size * (size - 1) / 2; /* the sum of the ranks' first elements */
  printf("rank %d entered=%a returned=%a through=%a right=%d", rank, entered, returned, through,
         count == 0 || out[0] == first);
  if (form == POLLED)
    printf(" polls=%d", polls);
  printf("\n");
  free(in);
  free(out);
  return 0;
}

static int freed(void) {
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int first[64], second[64];
  for (int i = 0; i < 64; i++)
    first[i] = second[i] = rank == 0 ? 1000 + i : (rank == 1 ? 2000 + i : -1);
  MPI_Request rq;
  MPI_Ibcast(first, 64, MPI_INT, 0, MPI_COMM_WORLD, &rq);
  if (rank != 0)
    MPI_Request_free(&rq);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0)
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
  MPI_Ibcast(second, 64, MPI_INT, 1, MPI_COMM_WORLD, &rq);
  MPI_Wait(&rq, MPI_STATUS_IGNORE);
  printf("rank %d second %d %d\n", rank, second[0], second[63]);
  return 0;
}

static int reduce(int waited, int count) {
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int* in = malloc(sizeof(int) * (size_t)count);
  int* out = malloc(sizeof(int) * (size_t)count);
  for (int i = 0; i < count; i++)
    in[i] = rank + i;
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  if (waited) {
    MPI_Request rq;
    MPI_Ireduce(in, out, count, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD, &rq);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
  } else {
    MPI_Reduce(in, out, count, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  }
  const double took = MPI_Wtime() - t0;
  int right = 1;
  for (int i = 0; rank == 0 && i < count; i++)
    right &= out[i] == size * (size - 1) / 2 + size * i;
  printf("rank %d took=%a right=%d\n", rank, took, right);
  free(in);
  free(out);
  return 0;
}

static double element(int rank, long i) { return (double)((rank * 31 + i * 7) % 97) - 40; }

// rank r's elements from `first` after a maximum over ranks lo..hi - 1: how many differ
static long wrong(const double* x, long first, long count, int lo, int hi) {
  long bad = 0;
  for (long i = 0; i < count; i++) {
    double m = -1e300;
    for (int k = lo; k < hi; k++)
      m = element(k, first + i) > m ? element(k, first + i) : m;
    bad += x[i] != m;
  }
  return bad;
}

static int inplace(long count) {
  enum { PAD = 3 };  // doubles between the blocks of the v and w forms
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  double* x = malloc(sizeof(double) * (size_t)(count + PAD) * size);
  int* counts = malloc(sizeof(int) * (size_t)size);
  int* displs = malloc(sizeof(int) * (size_t)size);
  int* bytes = malloc(sizeof(int) * (size_t)size);
  MPI_Datatype* types = malloc(sizeof(MPI_Datatype) * (size_t)size);
  for (int j = 0; j < size; j++) {
    counts[j] = (int)count;
    displs[j] = j * (int)(count + PAD);
    bytes[j] = displs[j] * (int)sizeof(double);
    types[j] = MPI_DOUBLE;
  }
  MPI_Request rq;
  const char* names[] = {"allreduce", "scan", "exscan", "reduce_scatter_block", "alltoall", "alltoallv", "alltoallw"};
  for (int call = 0; call < 7; call++) {
    const long stride = call >= 5 ? count + PAD : count;  // between the blocks of the alltoalls
    const long n = call >= 3 ? stride * size : count;
    for (long i = 0; i < n; i++)
      x[i] = element(rank, i);
    if (call == 0)
      MPI_Iallreduce(MPI_IN_PLACE, x, (int)count, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &rq);
    else if (call == 1)
      MPI_Iscan(MPI_IN_PLACE, x, (int)count, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &rq);
    else if (call == 2)
      MPI_Iexscan(MPI_IN_PLACE, x, (int)count, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &rq);
    else if (call == 3)
      MPI_Ireduce_scatter_block(MPI_IN_PLACE, x, (int)count, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &rq);
    else if (call == 4)
      MPI_Ialltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, x, (int)count, MPI_DOUBLE, MPI_COMM_WORLD, &rq);
    else if (call == 5)
      MPI_Ialltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, x, counts, displs, MPI_DOUBLE, MPI_COMM_WORLD, &rq);
    else
      MPI_Ialltoallw(MPI_IN_PLACE, NULL, NULL, NULL, x, counts, bytes, types, MPI_COMM_WORLD, &rq);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
    long bad = 0;
    if (call == 0)
      bad = wrong(x, 0, count, 0, size);
    else if (call == 1)
      bad = wrong(x, 0, count, 0, rank + 1);
    else if (call == 2)
      bad = rank ? wrong(x, 0, count, 0, rank) : 0;  // rank 0's is undefined
    else if (call == 3)
      bad = wrong(x, rank * count, count, 0, size);
    else  // block j is rank j's block `rank`; the pads between them are this rank's own
      for (int j = 0; j < size; j++) {
        bad += wrong(x + j * stride, rank * stride, count, j, j + 1);
        for (long i = count; i < stride; i++)
          bad += x[j * stride + i] != element(rank, j * stride + i);
      }
    printf("rank %d %s wrong %ld\n", rank, names[call], bad);
  }
  free(types);
  free(bytes);
  free(displs);
  free(counts);
  free(x);
  return 0;
}

static int testany(void) {
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  double x = rank + 1, y = 0, z = 0;
  MPI_Request rq[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  int index = -1, flag = 0, any_polls = 0, count = 0, some_polls = 0, indices[2];
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  MPI_Iallreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &rq[0]);
  while (!flag) {
    MPI_Testany(2, rq, &index, &flag, MPI_STATUS_IGNORE);
    any_polls++;
  }
  const double any_time = MPI_Wtime() - t0;
  MPI_Barrier(MPI_COMM_WORLD);
  t0 = MPI_Wtime();
  MPI_Iallreduce(&x, &z, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &rq[0]);
  while (count == 0) {
    MPI_Testsome(2, rq, &count, indices, MPI_STATUSES_IGNORE);
    some_polls++;
  }
  const double some_time = MPI_Wtime() - t0;
  printf("rank %d testany %d %d %a %g testsome %d %d %a %g\n", rank, index, any_polls, any_time, y, count, some_polls,
         some_time, z);
  return 0;
}

static int deadlock(void) {
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  double x = rank, y = 0;
  if (rank != size - 1) {
    MPI_Request rq;
    MPI_Iallreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &rq);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
  } else {
    MPI_Recv(&y, 1, MPI_DOUBLE, 0, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  printf("rank %d after\n", rank);
  return 0;
}

static int fallback(void) {
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int count = 131072;
  double* in = malloc(sizeof(double) * count);
  double* out = malloc(sizeof(double) * count);
  for (int i = 0; i < count; i++)
    in[i] = rank + i;
  MPI_Request rq;
  MPI_Iallreduce(in, out, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &rq);
  MPI_Wait(&rq, MPI_STATUS_IGNORE);
  printf("rank %d sum %.1f %.1f\n", rank, out[0], out[count - 1]);
  free(in);
  free(out);
  return 0;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rc = 2;
  const char* mode = argc > 1 ? argv[1] : "";
  if (!strcmp(mode, "mix") && (argc == 5 || argc == 6)) {
    const char* f = argv[4];
    enum Form form = !strcmp(f, "blocking") ? BLOCKING : !strcmp(f, "wait") ? WAIT : !strcmp(f, "test") ? TEST : WAITALL;
    rc = mix((unsigned)atoi(argv[2]), atoi(argv[3]), form, argc == 6 ? argv[5] : "arbBg");
  } else if (!strcmp(mode, "overlap") && argc == 5) {
    const char* f = argv[2];
    rc = overlap(!strcmp(f, "blocking") ? ALONE : !strcmp(f, "overlapped") ? OVERLAPPED : POLLED, atoi(argv[3]),
                 atoi(argv[4]));
  } else if (!strcmp(mode, "freed")) {
    rc = freed();
  } else if (!strcmp(mode, "reduce") && argc == 4) {
    rc = reduce(!strcmp(argv[2], "waited"), atoi(argv[3]));
  } else if (!strcmp(mode, "inplace") && argc == 3) {
    rc = inplace(atol(argv[2]));
  } else if (!strcmp(mode, "testany")) {
    rc = testany();
  } else if (!strcmp(mode, "deadlock")) {
    rc = deadlock();
  } else if (!strcmp(mode, "fallback")) {
    rc = fallback();
  } else {
    fprintf(stderr, "usage: nbc mix SEED CALLS blocking|wait|test|waitall [KINDS] | overlap blocking|overlapped|polled BYTES T | reduce blocking|waited COUNT | inplace COUNT | freed | testany | deadlock | fallback\n");
  }
  MPI_Finalize();
  return rc;
}
