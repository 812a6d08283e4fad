/* liborrery_smpi.so: the MPI calls SimGrid 3.32's SMPI does not implement stop the run naming the
 * call, as Orrery's refusals of CUDA calls do.
 *
 * SMPI defines every MPI function, but these only end the process (src/smpi/bindings/smpi_mpi.cpp:
 * NOT_YET_IMPLEMENTED, xbt_die): `orrery run` then reported the program as crashed, "rank 0 was
 * killed by signal 6 (SIGABRT)", the call named only in SimGrid's log above it. Here each stops the
 * run through the shim's refusal (libcudart.so.13's orrery_private_refuse, core/fatal.cpp): the
 * run ends as an Orrery error, one line naming the call and the rank. A program run without
 * Orrery's runtime (bare smpirun) gets the same line and SMPI's abort.
 *
 * MPI_Pcontrol, which SMPI also ends the process on, does what MPI asks of it where no profiling
 * library listens: nothing. MPI-IO, which SMPI implements on disks the platform does not have, is
 * refused from MPI_File_open (below). MPI_Win_sync, which SMPI answers with a warning that it is "not yet
 * implemented" and nothing else, is a memory fence, all it needs to be where every rank's window
 * is the same process's memory (the shared-memory windows' usual lock_all, store, sync, barrier):
 * the same answer without the warning. The other calls SMPI only warns about (MPI_Add_error_*)
 * are left to it. Built with SimGrid 3.32 only: another SMPI implements other calls. */
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

#define EXPORTED __attribute__((visibility("default")))

namespace {

const char* const kNotImplemented = "SimGrid 3.32's SMPI does not implement it (docs/supported-calls.md)";
const char* const kNoStorage =
    "MPI-IO reads and writes storage, which Orrery's machines do not describe (docs/supported-calls.md)";

[[noreturn]] void refuse(const char* call, const char* reason = kNotImplemented) {
  using Refuse = void (*)(const char* function, const char* reason);
  if (auto orrery_refuse = (Refuse)dlsym(RTLD_DEFAULT, "orrery_private_refuse"))
    orrery_refuse(call, reason);  // does not return
  fprintf(stderr, "orrery: error: the program called %s, which Orrery does not simulate: %s\n", call, reason);
  abort();
}

}  // namespace

/* The PMPI entry points, which SMPI's MPI_ functions (and the shim's wrappers) call: never
 * returning, they take no parameters here (the System V ABI leaves the caller's arguments unread),
 * and this file includes no MPI header whose prototypes they would contradict. */
#define REFUSED(call) \
  extern "C" EXPORTED int P##call() { refuse(#call); }

REFUSED(MPI_Cart_map)
REFUSED(MPI_Close_port)
REFUSED(MPI_Comm_accept)
REFUSED(MPI_Comm_connect)
REFUSED(MPI_Comm_get_parent)
REFUSED(MPI_Comm_idup)
REFUSED(MPI_Comm_join)
REFUSED(MPI_Comm_remote_group)
REFUSED(MPI_Comm_remote_size)
REFUSED(MPI_Comm_spawn)
REFUSED(MPI_Comm_spawn_multiple)
REFUSED(MPI_Dist_graph_create)
REFUSED(MPI_Dist_graph_create_adjacent)
REFUSED(MPI_Dist_graph_neighbors)
REFUSED(MPI_Dist_graph_neighbors_count)
REFUSED(MPI_File_c2f)
REFUSED(MPI_File_f2c)
REFUSED(MPI_File_preallocate)
REFUSED(MPI_File_iread_at)
REFUSED(MPI_File_iwrite_at)
REFUSED(MPI_File_iread_at_all)
REFUSED(MPI_File_iwrite_at_all)
REFUSED(MPI_File_iread)
REFUSED(MPI_File_iwrite)
REFUSED(MPI_File_iread_all)
REFUSED(MPI_File_iwrite_all)
REFUSED(MPI_File_iread_shared)
REFUSED(MPI_File_iwrite_shared)
REFUSED(MPI_File_read_at_all_begin)
REFUSED(MPI_File_read_at_all_end)
REFUSED(MPI_File_write_at_all_begin)
REFUSED(MPI_File_write_at_all_end)
REFUSED(MPI_File_read_all_begin)
REFUSED(MPI_File_read_all_end)
REFUSED(MPI_File_write_all_begin)
REFUSED(MPI_File_write_all_end)
REFUSED(MPI_File_read_ordered_begin)
REFUSED(MPI_File_read_ordered_end)
REFUSED(MPI_File_write_ordered_begin)
REFUSED(MPI_File_write_ordered_end)
REFUSED(MPI_Get_elements)
REFUSED(MPI_Get_elements_x)
REFUSED(MPI_Graph_create)
REFUSED(MPI_Graphdims_get)
REFUSED(MPI_Graph_get)
REFUSED(MPI_Graph_map)
REFUSED(MPI_Graph_neighbors_count)
REFUSED(MPI_Graph_neighbors)
REFUSED(MPI_Improbe)
REFUSED(MPI_Imrecv)
REFUSED(MPI_Intercomm_create)
REFUSED(MPI_Intercomm_merge)
REFUSED(MPI_Lookup_name)
REFUSED(MPI_Message_f2c)
REFUSED(MPI_Message_c2f)
REFUSED(MPI_Mprobe)
REFUSED(MPI_Mrecv)
REFUSED(MPI_Neighbor_allgather)
REFUSED(MPI_Neighbor_allgatherv)
REFUSED(MPI_Neighbor_alltoall)
REFUSED(MPI_Neighbor_alltoallv)
REFUSED(MPI_Neighbor_alltoallw)
REFUSED(MPI_Ineighbor_allgather)
REFUSED(MPI_Ineighbor_allgatherv)
REFUSED(MPI_Ineighbor_alltoall)
REFUSED(MPI_Ineighbor_alltoallv)
REFUSED(MPI_Ineighbor_alltoallw)
REFUSED(MPI_Open_port)
REFUSED(MPI_Pack_external)
REFUSED(MPI_Pack_external_size)
REFUSED(MPI_Publish_name)
REFUSED(MPI_Register_datarep)
REFUSED(MPI_Status_f2c)
REFUSED(MPI_Status_c2f)
REFUSED(MPI_Topo_test)
REFUSED(MPI_Type_create_f90_integer)
REFUSED(MPI_Type_create_f90_real)
REFUSED(MPI_Type_create_f90_complex)
REFUSED(MPI_Type_create_darray)
REFUSED(MPI_Type_match_size)
REFUSED(MPI_Unpack_external)
REFUSED(MPI_Unpublish_name)
REFUSED(MPI_Win_test)

/* MPI-IO: SMPI implements the rest of it on a host's disk, which Orrery's platform gives no host
 * (no storage in a machine description): SMPI's MPI_File_open ended the process ("Trying to open
 * file on a diskless host"), reported as a crash. Every other file call needs the handle
 * MPI_File_open gives, but MPI_File_delete, which names the file. */
#define REFUSED_NO_STORAGE(call) \
  extern "C" EXPORTED int P##call() { refuse(#call, kNoStorage); }

REFUSED_NO_STORAGE(MPI_File_open)
REFUSED_NO_STORAGE(MPI_File_delete)

// MPI_Win_sync(win): the ranks' loads and stores are one process's (SMPI's answer, MPI_SUCCESS)
extern "C" EXPORTED int PMPI_Win_sync(void*) {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  return 0;  // MPI_SUCCESS
}

// MPI_Pcontrol(level, ...): without a profiling library, "MPI_PCONTROL does nothing" (MPI 4.1, 15.2)
extern "C" EXPORTED int PMPI_Pcontrol(const int, ...) {
  return 0;  // MPI_SUCCESS
}
