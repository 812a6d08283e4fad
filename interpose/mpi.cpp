/* MPI wrappers: each rank's simulated time per MPI call, through PMPI.
 *
 * The shim is found before libsimgrid when a rank's program copy resolves its
 * symbols (it is the program's libcudart), and SMPI declares MPI_* weak, so
 * these definitions take the calls and forward them to SMPI's PMPI_*. Device
 * buffers need nothing here: folded device memory is SMPI shared memory, whose
 * data SMPI does not copy. */
#include "runtime.hpp"

#include <smpi/smpi.h>

#include <cstdlib>

using namespace orrery;

namespace {
class MpiScope {  // times one MPI call of the calling rank
 public:
  explicit MpiScope(const char* name) : rank_(rank_self(name)), name_(name), t0_(now()) {}
  ~MpiScope() {
    Tally& t = rank_.stats.mpi[name_];
    t.count++;
    t.time_s += now() - t0_;
  }

 private:
  Rank& rank_;
  const char* name_;
  double t0_;
};
}  // namespace

#define ORR_MPI(name, params, args)            \
  ORR_EXPORT int MPI_##name params {           \
    MpiScope scope("MPI_" #name);              \
    return PMPI_##name args;                   \
  }
#include "mpi_api.def"
#undef ORR_MPI

ORR_EXPORT int MPI_Init(int* argc, char*** argv) {
  int rc = PMPI_Init(argc, argv);
  rank_self("MPI_Init");
  return rc;
}

ORR_EXPORT int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  int rc = PMPI_Init_thread(argc, argv, required, provided);
  rank_self("MPI_Init_thread");
  return rc;
}

/* SMPI groups MPI_COMM_TYPE_SHARED by simulated host, and every rank runs on
 * its own GPU's host: group by node instead, as on the real machine. */
ORR_EXPORT int MPI_Comm_split_type(MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm* out) {
  if (type != MPI_COMM_TYPE_SHARED)
    return PMPI_Comm_split_type(comm, type, key, info, out);
  Rank& r = rank_self("MPI_Comm_split_type");
  const char* node = r.host->get_property("orrery:node");
  return PMPI_Comm_split(comm, node ? atoi(node) : 0, key, out);
}

ORR_EXPORT int MPI_Finalize(void) {
  Rank& r = rank_self("MPI_Finalize");
  r.stats.end_s = now();
  return PMPI_Finalize();
}
