/* Calls one MPI function SimGrid 3.32's SMPI does not implement, on the last rank, after a barrier:
 *   mpi_refused CALL   (neighbor_alltoall, mprobe, dist_graph_create_adjacent, comm_idup,
 *                       get_elements, intercomm_create; file_open and file_delete, which SMPI
 *                       implements on a disk Orrery's platform has not)
 *   mpi_refused pcontrol   MPI_Pcontrol(1) and (0) on every rank, printing what they returned;
 *   mpi_refused win_sync   every rank stores 10 x (its rank + 1) into its part of a shared-memory
 *                          window, then MPI_Win_sync, a barrier, MPI_Win_sync, and prints what it
 *                          reads in the next rank's part (the pattern SMPI warned about).
 * Built with `orrery mpicc`. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Barrier(MPI_COMM_WORLD);
  const char* call = argc > 1 ? argv[1] : "";
  if (strcmp(call, "pcontrol") == 0) {
    int a = MPI_Pcontrol(1), b = MPI_Pcontrol(0);
    printf("rank %d pcontrol %d %d\n", rank, a, b);
  } else if (strcmp(call, "win_sync") == 0) {
    int *mine, *next, unit;
    MPI_Aint bytes;
    MPI_Win win;
    MPI_Win_allocate_shared(sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mine, &win);
    MPI_Win_lock_all(0, win);
    *mine = 10 * (rank + 1);
    int a = MPI_Win_sync(win);
    MPI_Barrier(MPI_COMM_WORLD);
    int b = MPI_Win_sync(win);
    MPI_Win_shared_query(win, (rank + 1) % size, &bytes, &unit, &next);
    printf("rank %d win_sync %d %d reads %d\n", rank, a, b, *next);
    MPI_Win_unlock_all(win);
    MPI_Win_free(&win);
  } else if (rank == size - 1) {
    int one = 1, got = 0, peer = rank;
    MPI_Comm comm;
    MPI_Request rq;
    MPI_Status st;
    MPI_Message msg;
    if (strcmp(call, "neighbor_alltoall") == 0)
      MPI_Neighbor_alltoall(&one, 1, MPI_INT, &got, 1, MPI_INT, MPI_COMM_SELF);
    else if (strcmp(call, "mprobe") == 0)
      MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &msg, &st);
    else if (strcmp(call, "dist_graph_create_adjacent") == 0)
      MPI_Dist_graph_create_adjacent(MPI_COMM_SELF, 1, &peer, MPI_UNWEIGHTED, 1, &peer, MPI_UNWEIGHTED, MPI_INFO_NULL,
                                     0, &comm);
    else if (strcmp(call, "comm_idup") == 0)
      MPI_Comm_idup(MPI_COMM_SELF, &comm, &rq);
    else if (strcmp(call, "get_elements") == 0)
      MPI_Get_elements(&st, MPI_INT, &got);
    else if (strcmp(call, "intercomm_create") == 0)
      MPI_Intercomm_create(MPI_COMM_SELF, 0, MPI_COMM_WORLD, 0, 7, &comm);
    else if (strcmp(call, "file_open") == 0) {
      MPI_File file;
      MPI_File_open(MPI_COMM_SELF, "refused.dat", MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &file);
    } else if (strcmp(call, "file_delete") == 0)
      MPI_File_delete("refused.dat", MPI_INFO_NULL);
    printf("rank %d returned from %s\n", rank, call);
  }
  MPI_Finalize();
  return 0;
}
