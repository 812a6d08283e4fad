/* MPI's reductions whose data must be combined in rank order, each result checked against the value
 * it must hold. Built with `orrery mpicc`. Usage:
 *   reductions SIZES ELEMENTS
 * SIZES and ELEMENTS are comma-separated lists: for each size n (at most the ranks of the run), the
 * first n ranks split off a communicator, and on it, for each count e:
 *   - round "maps": an operation that does not commute (MPI_Op_create(compose, 0, ...)) on e
 *     elements of MPI_2INT, each the affine map x -> a x + b modulo 251, composed: (f op g)(x) =
 *     f(g(x)). Every rank knows every rank's maps, so the result of each call, x(0) op x(1) op ...,
 *     from the ranks it combines in their order. MPI_Allreduce, MPI_Reduce (to rank 0, then to the
 *     last rank), MPI_Scan, MPI_Exscan, MPI_Reduce_scatter_block (e a rank) and
 *     MPI_Reduce_scatter (e + 1 for the odd ranks, e for the even), blocking from separate buffers
 *     (round "maps"), blocking in place ("maps in place") and non-blocking (MPI_Iallreduce and the
 *     rest, then MPI_Wait: "maps non-blocking");
 *   - round "max": MPI_MAX, which commutes, of e negative ints by MPI_Scan, MPI_Exscan, MPI_Iscan
 *     and MPI_Iexscan;
 *   - with a third argument "struct", round "struct non-blocking": an operation that commutes
 *     (MPI_Op_create(add, 1, ...)) on e elements of a derived type, a struct of a double and an int
 *     (12 bytes, 16 apart: 4 bytes of padding, which no call may write), by the non-blocking
 *     reductions as in the rounds of maps.
 * Every rank prints "FAIL <call> n=<n> elements=<e> rank=<r> round=<round>" for a result that is not
 * what it must be;
 * rank 0 of each communicator prints "checked n=<n> elements=<e> round=<round>" once it has checked its
 * own results of that round. */
#include <mpi.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define P 251

typedef struct {
  int a, b;
} Map;

static Map then(Map f, Map g) {  // f o g
  Map r = {(f.a * g.a) % P, (f.a * g.b + f.b) % P};
  return r;
}

static void compose(void* in, void* inout, int* len, MPI_Datatype* type) {  // inout = in op inout
  Map* f = in;
  Map* g = inout;
  for (int i = 0; i < *len; i++)
    g[i] = then(f[i], g[i]);
}

static Map map_of(int rank, int i) {  // never the identity's a = 1 alone: a from 2
  Map m = {(rank * 7 + i * 3) % 249 + 2, (rank * 13 + i * 5 + 1) % P};
  return m;
}

static Map fold(int through, int i) {  // x(0) op ... op x(through - 1), element i
  Map acc = map_of(0, i);
  for (int r = 1; r < through; r++)
    acc = then(acc, map_of(r, i));
  return acc;
}

static int parse(const char* list, int* out, int max) {
  int k = 0;
  for (const char* p = list; *p && k < max; p++) {
    out[k++] = atoi(p);
    while (p[1] && *p != ',')
      p++;
  }
  return k;
}

static int fails = 0;

static void fail(const char* call, int n, int e, int rank, const char* round) {
  printf("FAIL %s n=%d elements=%d rank=%d round=%s\n", call, n, e, rank, round);
  fails++;
}

enum How { SEPARATE, IN_PLACE, NONBLOCKING };
static const char* const kRounds[] = {"maps", "maps in place", "maps non-blocking"};

/* got[0..count) against x(0) op ... op x(through - 1) from element `first` */
static void expect(const char* call, const Map* got, int count, int first, int through, int n, int e, int r,
                   enum How how) {
  for (int i = 0; i < count; i++) {
    Map w = fold(through, first + i);
    if (got[i].a != w.a || got[i].b != w.b) {
      fail(call, n, e, r, kRounds[how]);
      return;
    }
  }
}

static void wait_for(MPI_Request* q) { MPI_Wait(q, MPI_STATUS_IGNORE); }

/* A reduce-scatter's blocks, e + 1 elements for the odd ranks and e for the even: their counts
 * (malloc'd), where rank r's starts and how many there are in all */
static int* blocks(int n, int e, int r, int* first, int* total) {
  int* counts = malloc(sizeof(int) * n);
  *first = *total = 0;
  for (int p = 0; p < n; p++) {
    counts[p] = e + p % 2;
    if (p < r)
      *first += counts[p];
    *total += counts[p];
  }
  return counts;
}

static void maps(MPI_Comm c, int n, int e, MPI_Op op, enum How how) {
  int r;
  MPI_Comm_rank(c, &r);
  int total, first;
  int* counts = blocks(n, e, r, &first, &total);
  Map* x = malloc(sizeof(Map) * total);
  Map* y = malloc(sizeof(Map) * total);
  MPI_Request q;
  const void* in = how == IN_PLACE ? MPI_IN_PLACE : x;
#define FILL(count) \
  for (int i = 0; i < (count); i++) \
    (how == IN_PLACE ? y : x)[i] = map_of(r, i)
#define CALL(blocking, nonblocking) \
  do { \
    if (how == NONBLOCKING) { \
      nonblocking; \
      wait_for(&q); \
    } else \
      blocking; \
  } while (0)

  FILL(e);
  CALL(MPI_Allreduce(in, y, e, MPI_2INT, op, c), MPI_Iallreduce(x, y, e, MPI_2INT, op, c, &q));
  expect("allreduce", y, e, 0, n, n, e, r, how);

  for (int root = 0; root < n; root += n > 1 ? n - 1 : 1) {
    const void* own = how == IN_PLACE && r != root ? x : in;  // in place at the root only
    FILL(e);
    if (how == IN_PLACE && r != root)
      for (int i = 0; i < e; i++)
        x[i] = map_of(r, i);
    CALL(MPI_Reduce(own, y, e, MPI_2INT, op, root, c), MPI_Ireduce(x, y, e, MPI_2INT, op, root, c, &q));
    if (r == root)
      expect("reduce", y, e, 0, n, n, e, r, how);
  }

  FILL(e);
  CALL(MPI_Scan(in, y, e, MPI_2INT, op, c), MPI_Iscan(x, y, e, MPI_2INT, op, c, &q));
  expect("scan", y, e, 0, r + 1, n, e, r, how);

  FILL(e);
  CALL(MPI_Exscan(in, y, e, MPI_2INT, op, c), MPI_Iexscan(x, y, e, MPI_2INT, op, c, &q));
  if (r > 0)
    expect("exscan", y, e, 0, r, n, e, r, how);

  FILL(n * e);
  CALL(MPI_Reduce_scatter_block(in, y, e, MPI_2INT, op, c), MPI_Ireduce_scatter_block(x, y, e, MPI_2INT, op, c, &q));
  expect("reduce_scatter_block", y, e, r * e, n, n, e, r, how);

  FILL(total);
  CALL(MPI_Reduce_scatter(in, y, counts, MPI_2INT, op, c), MPI_Ireduce_scatter(x, y, counts, MPI_2INT, op, c, &q));
  expect("reduce_scatter", y, counts[r], first, n, n, e, r, how);
#undef CALL
#undef FILL
  free(x);
  free(y);
  free(counts);
}

/* MPI_MAX of -(1000 p + i) over ranks 0..through-1 is -i */
static void max_round(MPI_Comm c, int n, int e) {
  int r;
  MPI_Comm_rank(c, &r);
  int* x = malloc(sizeof(int) * e);
  int* y = malloc(sizeof(int) * e);
  for (int i = 0; i < e; i++)
    x[i] = -(1000 * r + i);
  const char* names[] = {"max scan", "max exscan", "max iscan", "max iexscan"};
  for (int k = 0; k < 4; k++) {
    MPI_Request q;
    if (k == 0)
      MPI_Scan(x, y, e, MPI_INT, MPI_MAX, c);
    else if (k == 1)
      MPI_Exscan(x, y, e, MPI_INT, MPI_MAX, c);
    else {
      if (k == 2)
        MPI_Iscan(x, y, e, MPI_INT, MPI_MAX, c, &q);
      else
        MPI_Iexscan(x, y, e, MPI_INT, MPI_MAX, c, &q);
      wait_for(&q);
    }
    if (k % 2 == 0 || r > 0)
      for (int i = 0; i < e; i++)
        if (y[i] != -i) {
          fail(names[k], n, e, r, "max");
          break;
        }
  }
  free(x);
  free(y);
}

typedef struct {
  double v;
  int i;  // then 4 bytes of padding
} Pair;

static void add(void* in, void* inout, int* len, MPI_Datatype* type) {
  Pair* a = in;
  Pair* b = inout;
  for (int k = 0; k < *len; k++) {
    b[k].v += a[k].v;
    b[k].i += a[k].i;
  }
}

static Pair pair_of(int rank, int j) {
  Pair p;
  memset(&p, 0, sizeof p);
  p.v = rank + 0.5 * j;
  p.i = 3 * rank + j;
  return p;
}

static const unsigned char kPadding = 0x5a;  // what the receive buffers' padding holds, and must

/* got[0..count) against the sum over ranks 0..through-1 from element `first`, padding untouched */
static void expect_pairs(const char* call, const Pair* got, int count, int first, int through, int n, int e, int r) {
  for (int k = 0; k < count; k++) {
    Pair w = pair_of(0, first + k);
    for (int p = 1; p < through; p++) {
      w.v += pair_of(p, first + k).v;
      w.i += pair_of(p, first + k).i;
    }
    const unsigned char* pad = (const unsigned char*)&got[k] + 12;
    if (got[k].v != w.v || got[k].i != w.i || pad[0] != kPadding || pad[3] != kPadding) {
      fail(call, n, e, r, "struct non-blocking");
      return;
    }
  }
}

static void pairs(MPI_Comm c, int n, int e, MPI_Datatype pair, MPI_Op add_op) {
  int r;
  MPI_Comm_rank(c, &r);
  int total, first;
  int* counts = blocks(n, e, r, &first, &total);
  Pair* x = malloc(sizeof(Pair) * total);
  Pair* y = malloc(sizeof(Pair) * total);
  for (int j = 0; j < total; j++)
    x[j] = pair_of(r, j);
  MPI_Request q;
#define FRESH memset(y, kPadding, sizeof(Pair) * total)
  FRESH;
  MPI_Iallreduce(x, y, e, pair, add_op, c, &q);
  wait_for(&q);
  expect_pairs("allreduce", y, e, 0, n, n, e, r);
  for (int root = 0; root < n; root += n > 1 ? n - 1 : 1) {
    FRESH;
    MPI_Ireduce(x, y, e, pair, add_op, root, c, &q);
    wait_for(&q);
    if (r == root)
      expect_pairs("reduce", y, e, 0, n, n, e, r);
  }
  FRESH;
  MPI_Iscan(x, y, e, pair, add_op, c, &q);
  wait_for(&q);
  expect_pairs("scan", y, e, 0, r + 1, n, e, r);
  FRESH;
  MPI_Iexscan(x, y, e, pair, add_op, c, &q);
  wait_for(&q);
  if (r > 0)
    expect_pairs("exscan", y, e, 0, r, n, e, r);
  FRESH;
  MPI_Ireduce_scatter_block(x, y, e, pair, add_op, c, &q);
  wait_for(&q);
  expect_pairs("reduce_scatter_block", y, e, r * e, n, n, e, r);
  FRESH;
  MPI_Ireduce_scatter(x, y, counts, pair, add_op, c, &q);
  wait_for(&q);
  expect_pairs("reduce_scatter", y, counts[r], first, n, n, e, r);
#undef FRESH
  free(x);
  free(y);
  free(counts);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int world, me, sizes[32], elements[32];
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  const int with_struct = argc == 4 && strcmp(argv[3], "struct") == 0;
  if (argc != 3 && !with_struct) {
    if (me == 0)
      fprintf(stderr, "usage: reductions SIZES ELEMENTS [struct]\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const int nsizes = parse(argv[1], sizes, 32), nelements = parse(argv[2], elements, 32);
  MPI_Op op, add_op;
  MPI_Op_create(compose, 0, &op);
  MPI_Op_create(add, 1, &add_op);
  MPI_Datatype fields, pair;
  int lengths[2] = {1, 1};
  MPI_Aint places[2] = {offsetof(Pair, v), offsetof(Pair, i)};
  MPI_Datatype types[2] = {MPI_DOUBLE, MPI_INT};
  MPI_Type_create_struct(2, lengths, places, types, &fields);
  MPI_Type_create_resized(fields, 0, sizeof(Pair), &pair);
  MPI_Type_commit(&pair);
  for (int s = 0; s < nsizes; s++) {
    const int n = sizes[s];
    if (n > world)
      break;
    MPI_Comm c;
    MPI_Comm_split(MPI_COMM_WORLD, me < n ? 0 : MPI_UNDEFINED, me, &c);
    if (c == MPI_COMM_NULL)
      continue;
    int r;
    MPI_Comm_rank(c, &r);
    for (int k = 0; k < nelements; k++) {
      const int e = elements[k];
      for (int how = SEPARATE; how <= NONBLOCKING; how++) {
        maps(c, n, e, op, how);
        if (r == 0)
          printf("checked n=%d elements=%d round=%s\n", n, e, kRounds[how]);
      }
      max_round(c, n, e);
      if (r == 0)
        printf("checked n=%d elements=%d round=max\n", n, e);
      if (with_struct) {
        pairs(c, n, e, pair, add_op);
        if (r == 0)
          printf("checked n=%d elements=%d round=struct non-blocking\n", n, e);
      }
    }
    MPI_Comm_free(&c);
  }
  MPI_Op_free(&op);
  MPI_Op_free(&add_op);
  MPI_Type_free(&fields);
  MPI_Type_free(&pair);
  MPI_Finalize();
  return fails != 0;
}
