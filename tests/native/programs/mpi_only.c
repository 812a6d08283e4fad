/* A pure-MPI program (no CUDA call), built with `orrery mpicc`. Usage: mpi_only MODE, 2 ranks.
 *   bytes: MPI calls with known counts and types, for the bytes results.json counts;
 *   exit5: rank 1 calls exit(5) at once (smpicc makes it SMPI's smpi_exit), rank 0 waits for a
 *          message that never comes;
 *   exit0-before-init: every rank calls exit(0) before MPI_Init;
 *   eager N: rank 0 sends N eager messages (64 B, tags 0..N-1), then one of 4 MiB (tag N, above
 *          any eager threshold); rank 1 receives the large one first, so that all N are in
 *          flight at once, unmatched, then the N in order;
 *   allocator: each rank prints whose heap its malloc and glibc's strdup allocate from:
 *          "malloc from mimalloc, strdup from mimalloc" where orrery run preloaded mimalloc;
 *   copies: each rank prints the folder of the file its code was loaded from (SMPI's copy of
 *          the program for that rank) and its TMPDIR;
 *   sampled: an SMPI_SAMPLE_LOCAL loop of 8 iterations, of which SMPI runs and times the first 2
 *          and injects their mean for the other 6; each spins until its thread has used 5 ms of
 *          CPU time; each rank prints the simulated seconds the loop took ("sampled S");
 *   thread L: MPI_Init_thread requiring thread level L instead of MPI_Init; each rank prints what
 *          it provided, what MPI_Query_thread answers and MPI_Is_thread_main's flag;
 *   thread-other: rank 1 calls MPI_Query_thread from a thread of its own;
 *   processor: each rank prints its MPI_Get_processor_name and the local rank programs derive from
 *          it: how many lower ranks' gathered names are the same;
 *   hold: each rank prints "rank R holding" and spins until its thread has used 120 s of CPU
 *          time (a run that someone stops long before it ends);
 *   chatter: each rank prints "rank R line I" for I from 0 to 99 999, a barrier after each line;
 *   shared-window: the ranks of each node allocate a shared window, local rank L its L + 1
 *          doubles, each set to 100 x its world rank + index; each rank prints, for every local
 *          rank, the size, displacement unit and sum of values MPI_Win_shared_query gives, its
 *          distance in bytes from its own part, and the rank MPI_PROC_NULL's query names. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <pthread.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double thread_cpu_seconds(void) {  /* a CPU-time clock: libc's, not the simulated one */
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

static void* query_thread(void* unused) {
  int level;
  MPI_Query_thread(&level);
  return unused;
}

int main(int argc, char** argv) {
  if (argc > 1 && !strcmp(argv[1], "exit0-before-init"))
    exit(0);  /* a rank that is no MPI job's member yet: its normal end */
  if (argc > 1 && !strcmp(argv[1], "exit1-before-init"))
    exit(1);  /* a usage error found before MPI_Init (OSU's option parsing): the job's end */
  int provided = -1;
  if (argc > 2 && !strcmp(argv[1], "thread"))
    MPI_Init_thread(&argc, &argv, atoi(argv[2]), &provided);
  else
    MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char* mode = argc > 1 ? argv[1] : "";
  printf("rank %d before\n", rank);
  static double v[1000];
  static int w[600];
  const int peer = 1 - rank;
  if (!strcmp(mode, "bytes")) {
    MPI_Sendrecv(v, 10, MPI_DOUBLE, peer, 1, v + 500, 20, MPI_DOUBLE, peer, 1, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    if (rank == 0) {
      MPI_Send(v, 100, MPI_DOUBLE, 1, 0, MPI_COMM_WORLD);
      MPI_Send(w, 3, MPI_INT, 1, 0, MPI_COMM_WORLD);
    } else {
      MPI_Recv(v, 100, MPI_DOUBLE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Recv(w, 3, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    MPI_Request rq[2];
    MPI_Irecv(w + 300, 7, MPI_INT, peer, 2, MPI_COMM_WORLD, &rq[0]);
    MPI_Isend(w, 7, MPI_INT, peer, 2, MPI_COMM_WORLD, &rq[1]);
    MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
    MPI_Bcast(v, 50, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Allreduce(v, v + 500, 30, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, v, 30, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allgather(w, 5, MPI_INT, w + 300, 5, MPI_INT, MPI_COMM_WORLD);
    MPI_Alltoall(w, 4, MPI_INT, w + 300, 4, MPI_INT, MPI_COMM_WORLD);
    MPI_Scatter(v, 6, MPI_DOUBLE, v + 500, 6, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0) /* in place at the root: its count is the receive count */
      MPI_Gather(MPI_IN_PLACE, 0, MPI_INT, w, 9, MPI_INT, 0, MPI_COMM_WORLD);
    else
      MPI_Gather(w, 9, MPI_INT, NULL, 0, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
  } else if (!strcmp(mode, "thread")) {
    int queried = -1, is_main = -1;
    MPI_Query_thread(&queried);
    MPI_Is_thread_main(&is_main);
    printf("rank %d provided %d\nrank %d queried %d\nrank %d main %d\n", rank, provided, rank, queried, rank,
           is_main);
  } else if (!strcmp(mode, "processor")) {
    char name[MPI_MAX_PROCESSOR_NAME] = {0};
    int len = 0, local = 0;
    MPI_Get_processor_name(name, &len);
    char* all = calloc((size_t)size, MPI_MAX_PROCESSOR_NAME);
    MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, MPI_COMM_WORLD);
    for (int r = 0; r < rank; r++)
      local += !strcmp(all + (size_t)r * MPI_MAX_PROCESSOR_NAME, name);
    printf("rank %d processor %s %d\nrank %d local %d\n", rank, name, len, rank, local);
    free(all);
  } else if (!strcmp(mode, "shared-window")) {
    MPI_Comm node;
    int local, locals;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    MPI_Comm_size(node, &locals);
    double* mine;
    MPI_Win win;
    MPI_Win_allocate_shared((MPI_Aint)((local + 1) * sizeof(double)), sizeof(double), MPI_INFO_NULL, node, &mine,
                            &win);
    for (int j = 0; j <= local; j++)
      mine[j] = 100.0 * rank + j;
    MPI_Win_fence(0, win);
    for (int l = 0; l < locals; l++) {
      MPI_Aint bytes;
      int unit;
      double* part;
      MPI_Win_shared_query(win, l, &bytes, &unit, &part);
      double sum = 0;
      for (MPI_Aint j = 0; j < bytes / (MPI_Aint)sizeof(double); j++)
        sum += part[j];
      printf("rank %d part %d bytes %ld\nrank %d part %d unit %d\nrank %d part %d sum %g\nrank %d part %d at %ld\n",
             rank, l, (long)bytes, rank, l, unit, rank, l, sum, rank, l, (long)((char*)part - (char*)mine));
    }
    MPI_Aint bytes;
    int unit;
    double* first;
    MPI_Win_shared_query(win, MPI_PROC_NULL, &bytes, &unit, &first);
    printf("rank %d any at %ld\n", rank, (long)((char*)first - (char*)mine));
    MPI_Win_fence(0, win);
    MPI_Win_free(&win);
    MPI_Comm_free(&node);
  } else if (!strcmp(mode, "thread-other")) {
    if (rank == 1) {
      pthread_t other;
      pthread_create(&other, NULL, query_thread, NULL);
      pthread_join(other, NULL);
    }
  } else if (!strcmp(mode, "exit5")) {
    if (rank == 1)
      exit(5);
    int token;
    MPI_Recv(&token, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else if (!strcmp(mode, "eager") && argc > 2) {
    const int n = atoi(argv[2]);
    static char big[4 << 20];
    if (rank == 0) {
      for (int i = 0; i < n; i++)
        MPI_Send(v, 8, MPI_DOUBLE, 1, i, MPI_COMM_WORLD);
      MPI_Send(big, (int)sizeof big, MPI_CHAR, 1, n, MPI_COMM_WORLD);
    } else {
      MPI_Recv(big, (int)sizeof big, MPI_CHAR, 0, n, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      for (int i = 0; i < n; i++)
        MPI_Recv(v, 8, MPI_DOUBLE, 0, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
  } else if (!strcmp(mode, "allocator")) {
    _Bool (*in_mimalloc)(const void*) = (_Bool (*)(const void*))dlsym(RTLD_DEFAULT, "mi_is_in_heap_region");
    void* p = malloc(16);
    char* s = strdup(mode);  /* glibc's own allocations too */
    printf("malloc from %s, strdup from %s\n", in_mimalloc && in_mimalloc(p) ? "mimalloc" : "glibc",
           in_mimalloc && in_mimalloc(s) ? "mimalloc" : "glibc");
    free(s);
    free(p);
  } else if (!strcmp(mode, "copies")) {
    Dl_info self;
    char folder[4096] = "?";
    if (dladdr((void*)&main, &self) && self.dli_fname) {
      snprintf(folder, sizeof folder, "%s", self.dli_fname);
      char* slash = strrchr(folder, '/');
      if (slash)
        *slash = 0;
    }
    const char* tmpdir = getenv("TMPDIR");
    printf("copy in %s, TMPDIR %s\n", folder, tmpdir ? tmpdir : "unset");
  } else if (!strcmp(mode, "sampled")) {
    static volatile double spun;
    const double start = MPI_Wtime();
    SMPI_SAMPLE_LOCAL(int i = 0, i < 8, i++, 2, -1) {
      const double from = thread_cpu_seconds();
      while (thread_cpu_seconds() - from < 0.005)
        spun += 1;
    }
    printf("sampled %.9f\n", MPI_Wtime() - start);
  } else if (!strcmp(mode, "chatter")) {
    for (int i = 0; i < 100000; i++) {
      printf("rank %d line %d\n", rank, i);
      MPI_Barrier(MPI_COMM_WORLD);
    }
  } else if (!strcmp(mode, "hold")) {
    static volatile double spun;
    printf("rank %d holding\n", rank);
    fflush(stdout);
    while (thread_cpu_seconds() < 120)
      spun += 1;
  } else {
    fprintf(stderr, "unknown mode '%s'\n", mode);
    return 2;
  }
  printf("rank %d after\n", rank);
  MPI_Finalize();
  return 0;
}
