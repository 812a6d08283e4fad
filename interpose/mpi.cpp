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
#include <vector>

using namespace orrery;

namespace {
class MpiScope {  // times one MPI call of the calling rank
 public:
  explicit MpiScope(const char* name) : rank_(rank_self(name)), name_(name), t0_(now()) {}
  ~MpiScope() {
    Tally& t = rank_.stats.mpi[name_];
    t.count++;
    t.time_s += now() - t0_;
    rank_.stats.comm.add(t0_, now());
  }
  Rank& rank() { return rank_; }

 private:
  Rank& rank_;
  const char* name_;
  double t0_;
};
}  // namespace

/* A non-blocking request counts as communication from its post until the
 * wait or test that sees it complete. */
static void posted(Rank& r, MPI_Request rq) {
  if (rq != MPI_REQUEST_NULL)
    r.requests[(const void*)rq] = now();
}
static void completed(Rank& r, MPI_Request rq) {
  auto it = r.requests.find((const void*)rq);
  if (it == r.requests.end())
    return;
  r.stats.comm.add(it->second, now());
  r.requests.erase(it);
}

#define ORR_MPI(name, params, args)            \
  ORR_EXPORT int MPI_##name params {           \
    MpiScope scope("MPI_" #name);              \
    return PMPI_##name args;                   \
  }
#define ORR_MPI_POST(name, params, args)       \
  ORR_EXPORT int MPI_##name params {           \
    MpiScope scope("MPI_" #name);              \
    int rc = PMPI_##name args;                 \
    posted(scope.rank(), *rq);                 \
    return rc;                                 \
  }
#include "mpi_api.def"
#undef ORR_MPI
#undef ORR_MPI_POST

ORR_EXPORT int MPI_Wait(MPI_Request* rq, MPI_Status* st) {
  MpiScope scope("MPI_Wait");
  MPI_Request handle = *rq;
  int rc = PMPI_Wait(rq, st);
  completed(scope.rank(), handle);
  return rc;
}

ORR_EXPORT int MPI_Waitall(int n, MPI_Request rqs[], MPI_Status sts[]) {
  MpiScope scope("MPI_Waitall");
  std::vector<MPI_Request> handles(rqs, rqs + n);
  int rc = PMPI_Waitall(n, rqs, sts);
  for (MPI_Request h : handles)
    completed(scope.rank(), h);
  return rc;
}

ORR_EXPORT int MPI_Waitany(int n, MPI_Request rqs[], int* index, MPI_Status* st) {
  MpiScope scope("MPI_Waitany");
  std::vector<MPI_Request> handles(rqs, rqs + n);
  int rc = PMPI_Waitany(n, rqs, index, st);
  if (*index != MPI_UNDEFINED)
    completed(scope.rank(), handles[*index]);
  return rc;
}

ORR_EXPORT int MPI_Test(MPI_Request* rq, int* flag, MPI_Status* st) {
  MpiScope scope("MPI_Test");
  MPI_Request handle = *rq;
  int rc = PMPI_Test(rq, flag, st);
  if (*flag)
    completed(scope.rank(), handle);
  return rc;
}

ORR_EXPORT int MPI_Testall(int n, MPI_Request* rqs, int* flag, MPI_Status* sts) {
  MpiScope scope("MPI_Testall");
  std::vector<MPI_Request> handles(rqs, rqs + n);
  int rc = PMPI_Testall(n, rqs, flag, sts);
  if (*flag)
    for (MPI_Request h : handles)
      completed(scope.rank(), h);
  return rc;
}

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
