/* liborrery_smpi.so: non-blocking collectives on the blocking ones' algorithms.
 *
 * SimGrid 3.32's SMPI runs every non-blocking collective linearly, whatever the selector
 * (src/smpi/colls/smpi_nbc_impl.cpp): each rank sends its whole vector or block to every other at
 * once, or the root to every rank. Its times are not the library's: on h100-ib200, 64 ranks, an
 * 8-byte MPI_Iallreduce waited for at once took 3.5 us where the blocking call takes 13.6 us, and
 * 1 MiB 2.53 ms where it takes 0.23 ms (docs/simulation.md). A program that overlaps one (a
 * pipelined conjugate gradient's dot products, a halo exchange behind a barrier) got wrong overlap.
 *
 * Here MPI_Iallreduce, MPI_Ireduce, MPI_Ibcast, MPI_Ibarrier and MPI_Iallgather send the messages
 * of the algorithm the selector takes for the blocking call:
 *   - the rank makes the blocking call on scratch buffers under a capture (nbc::capture,
 *     smpi_colls.cpp): smpi_colls.cpp's in-kernel algorithms record their program, the messages
 *     the rank would post and wait for, and SMPI's own code has its point-to-point calls recorded
 *     as one; each piece, in the order the blocking call runs them, is a stage (a reduce then a
 *     broadcast are two);
 *   - the stages then run in the kernel one after the other, posted as the call is (nbc::start),
 *     while the rank goes on: a call waited for at once returns at the blocking call's instant,
 *     bit for bit, and one overlapped with other work progresses meanwhile, as SMPI's own requests
 *     do (an MPI library with asynchronous progress). The rank's host time ahead of SimGrid's
 *     clock is waited out first, as SMPI's entry points do (smpi_bench_end);
 *   - the request is SMPI's own kind for a non-blocking collective (an MPI_Ibarrier on
 *     MPI_COMM_SELF: no message), whose completion, Request::finish_nbc_requests, from MPI_Wait,
 *     MPI_Test and their forms for several requests, waits for or tests the schedule here;
 *   - the data: each rank's input is copied into a table the ranks share as it posts (they are
 *     actors of one process), and its result formed where its request completes: a reduction in
 *     rank order, x(0) op x(1) op ..., in its datatype's layout, with SMPI's own Op::apply, formed
 *     once for all ranks; a broadcast the root's data as it posted; an allgather every rank's
 *     block. Copying and combining take no simulated time, as SMPI's combining takes none.
 * Left to SMPI's requests, as before: what cannot be recorded (smpi_colls.cpp says what; the
 * capture ends before anything is posted, and the answer is kept for the same call's arguments),
 * a reduction whose operation does not commute (smpi_reductions.cpp forms its data), a
 * communicator of one rank, an intercommunicator, SMPI's node and leader communicators (no id),
 * and a call whose arguments SMPI refuses. Every rank of a call follows the answer of the first
 * to find it (Decision).
 *
 * ORRERY_SMPI_NBC=simgrid leaves every non-blocking collective to SMPI's requests (to show their
 * times, never for a result); =report writes at the exit one line on standard error: per call,
 * how many ran in the kernel and how many went to SMPI's requests, and the stages by algorithm. */
#include "mpi/smpi_layout.hpp"
#include "mpi/smpi_nbc.hpp"
#include "mpi/smpi_next.hpp"

#include <dlfcn.h>

#include <smpi/smpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#define EXPORTED __attribute__((visibility("default")))

using orrery_smpi::DatatypeCopy;
using orrery_smpi::extent_of;
using orrery_smpi::Laid;
using orrery_smpi::Mode;
using orrery_smpi::next;
using orrery_smpi::OpApply;
using orrery_smpi::packed;
using orrery_smpi::unpack;
using orrery_smpi::laid_room;
namespace nbc = orrery_smpi::nbc;

// simgrid::smpi::Comm::id() const: the same for all of a communicator's ranks (smpi_colls.cpp)
int nbc_comm_id(const void* comm) __asm__("_ZNK7simgrid4smpi4Comm2idEv");

namespace {

// simgrid::smpi::Request::finish_nbc_requests(Request**, int test)
#define FINISH_NBC "_ZN7simgrid4smpi7Request19finish_nbc_requestsEPPS1_i"
// SMPI's request argument of a blocking call (src/smpi/include/private.hpp: MPI_REQUEST_IGNORED)
MPI_Request* const kRequestIgnored = (MPI_Request*)-100;

// The selector's blocking collectives: simgrid::smpi::colls::allreduce and so on, pointers SMPI sets
using Allreduce = int (*)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm);
using Reduce = int (*)(const void*, void*, int, MPI_Datatype, MPI_Op, int, MPI_Comm);
using Bcast = int (*)(void*, int, MPI_Datatype, int, MPI_Comm);
using Barrier = int (*)(MPI_Comm);
using Allgather = int (*)(const void*, int, MPI_Datatype, void*, int, MPI_Datatype, MPI_Comm);
template <typename F>
F* selector(const char* symbol) {  // where SMPI keeps it (it sets it as it starts): read at each call
  static_assert(sizeof(F) == sizeof(void*));
  return next<F*>(symbol);
}

enum Kind { IALLREDUCE, IREDUCE, IBCAST, IBARRIER, IALLGATHER, KINDS };
const char* const kCalls[KINDS] = {"Iallreduce", "Ireduce", "Ibcast", "Ibarrier", "Iallgather"};

Mode mode() {
  static const Mode m = orrery_smpi::mode_from_environment("ORRERY_SMPI_NBC");
  return m;
}

unsigned long long g_in_kernel[KINDS] = {}, g_by_requests[KINDS] = {};
unsigned long long g_copied = 0;  // bytes of the ranks' inputs copied into the tables
bool g_asked = false;  // a non-blocking collective was called: the stages' counts are there to read

__attribute__((destructor)) void report_at_exit() {
  if (mode() != Mode::Report)
    return;
  std::string line = "orrery: non-blocking collectives:";
  for (int k = 0; k < KINDS; k++)
    line += std::string(k ? "; " : " ") + "MPI_" + kCalls[k] + " " + std::to_string(g_in_kernel[k]) +
            " in the kernel, " + std::to_string(g_by_requests[k]) + " by SMPI's requests";
  if (g_asked)
    line += "; stages: " + nbc::stages_report() + "; inputs copied: " + std::to_string(g_copied) + " bytes";
  fprintf(stderr, "%s\n", line.c_str());
}

/* One call run in the kernel: each rank's input as it posted, until every rank has left. */
struct Table {
  std::vector<std::vector<unsigned char>> inputs;  // packed (a broadcast's, an allgather's)
  std::vector<Laid> laid;                          // in the type's layout (a reduction's)
  std::vector<char> entered;
  std::vector<char> folded;  // a rank's input in folded memory (nothing to copy, nothing to form)
  Laid result;  // a reduction's, once formed
  bool formed = false, absent = false;  // absent: an input was folded
  int left = 0;
};
using Key = std::pair<int, uint64_t>;  // (communicator's id, the call's number among these on it)
std::map<Key, Table> g_tables;           // by the call's Key (g_decided)

void leave(const Key& key) {
  auto it = g_tables.find(key);
  if (++it->second.left == (int)it->second.inputs.size())
    g_tables.erase(it);
}

/* Whether `p` lies in folded memory (the shim's large device and pinned allocations,
 * interpose/cudart/memory.cpp), whose data nobody reads: no copy is made from it or into it, as
 * SMPI's messages from it carry none. */
bool folded(const void* p) {
  using Folded = int (*)(const void*);
  static const Folded query = reinterpret_cast<Folded>(dlsym(RTLD_DEFAULT, "orrery_private_folded"));
  return query && p && p != MPI_IN_PLACE && query(p);
}

// A rank's result needs rank k's input: there, since its messages left after rank k posted
void need(const Table& t, int k, Kind kind, int rank) {
  if (t.entered[k])
    return;
  fprintf(stderr,
          "orrery: MPI_%s on rank %d: its result needs rank %d's data, which has not entered the call "
          "(interpose/mpi/smpi_nbc.cpp)\n",
          kCalls[kind], rank, k);
  abort();
}

/* A call's request, until it completes or is freed: its schedule, and the rank's result. */
struct Running {
  std::shared_ptr<nbc::Schedule> schedule;
  Key key;
  std::function<void(Table&)> deliver;  // into the program's buffers
};
std::map<MPI_Request, Running> g_running;

// Calls SMPI's own code would run, by their arguments: (call, communicator's id, size, count, type, op, root)
std::set<std::tuple<int, int, int, int, MPI_Datatype, MPI_Op, int>> g_declined;

/* Whether a call runs in the kernel, as the first of its ranks to finish its capture found: every
 * rank follows (a call's ranks run it one way or the other; the captures of ranks that yield in
 * one, making SMPI's node communicators, end in any order). A rank whose own capture fails where
 * the call runs in the kernel cannot follow (SMPI's code did on it what cannot be recorded, and the
 * others' messages are under way): the run stops, naming the call. */
enum class Way { Unknown, Kernel, Requests };
struct Decision {
  Way way = Way::Unknown;
  int done = 0;  // ranks through
};
std::map<Key, Decision> g_decisions;                // (communicator's id, the call's number among these)
std::map<std::pair<int, int>, uint64_t> g_decided;  // (communicator's id, rank): its calls so far

/* Runs a call in the kernel where the blocking call's algorithms run there: the rank's input into
 * the call's table, its schedule started, its request made. False: SMPI's requests run it. */
bool post(Kind kind, MPI_Comm comm, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Request* request,
          const std::function<void()>& blocking_call, const std::function<void(Table&, int rank)>& enter,
          std::function<void(Table&)> deliver) {
  if (mode() == Mode::Simgrid)
    return false;
  g_asked = true;
  /* As SMPI's own entry points (SmpiBenchGuard): the rank's host time ahead of SimGrid's clock is
   * waited out here (smpi_timers.cpp's hook), so that what the call starts (its messages, SMPI's
   * node communicators made under the capture) starts at the rank's own time. */
  struct BenchGuard {
    BenchGuard() { smpi_bench_end(); }
    ~BenchGuard() { smpi_bench_begin(); }
  } guard;
  int inter = 0, n, rank;
  PMPI_Comm_test_inter(comm, &inter);
  PMPI_Comm_size(comm, &n);
  const int id = nbc_comm_id(comm);
  if (inter || n < 2 || id == MPI_UNDEFINED) {
    g_by_requests[kind]++;
    return false;
  }
  PMPI_Comm_rank(comm, &rank);
  const Key call{id, g_decided[{id, rank}]++};
  const auto arguments = std::make_tuple((int)kind, id, n, count, type, op, root);
  std::shared_ptr<nbc::Schedule> schedule;
  if (g_decisions[call].way != Way::Requests && !g_declined.count(arguments))
    schedule = nbc::capture(comm, blocking_call);  // may yield: the decision is looked up again after
  Decision& d = g_decisions[call];
  if (d.way == Way::Unknown)
    d.way = schedule ? Way::Kernel : Way::Requests;
  if (d.way == Way::Kernel && !schedule) {
    fprintf(stderr,
            "orrery: MPI_%s on rank %d: SMPI's algorithm could not be recorded on this rank, and was on another "
            "(interpose/mpi/smpi_nbc.cpp); ORRERY_SMPI_NBC=simgrid leaves every non-blocking collective to SMPI\n",
            kCalls[kind], rank);
    abort();
  }
  const bool in_kernel = d.way == Way::Kernel;
  if (++d.done == n)
    g_decisions.erase(call);
  if (!in_kernel) {
    if (!schedule)
      g_declined.insert(arguments);
    g_by_requests[kind]++;
    return false;
  }
  const Key& key = call;
  Table& t = g_tables[key];
  if (t.entered.empty()) {
    t.inputs.resize(n);
    t.laid.resize(n);
    t.entered.assign(n, 0);
    t.folded.assign(n, 0);
  }
  enter(t, rank);
  t.entered[rank] = 1;
  nbc::start(schedule);
  using Ibarrier = int (*)(MPI_Comm, MPI_Request*);
  static const Ibarrier make_request = next<Ibarrier>("PMPI_Ibarrier");
  make_request(MPI_COMM_SELF, request);
  g_running[*request] = {std::move(schedule), key, std::move(deliver)};
  g_in_kernel[kind]++;
  return true;
}

/* A reduction's result, x(0) op x(1) op ... op x(n-1), formed once for all ranks. */
// (nothing where a rank's input is folded: the result is nobody's to read)
const Laid* reduced(Table& t, int count, MPI_Datatype type, MPI_Op op, Kind kind, int rank) {
  static const OpApply apply = next<OpApply>(OP_APPLY);
  if (!t.formed) {
    for (int k = 0; k < (int)t.laid.size(); k++)
      need(t, k, kind, rank);
    t.formed = true;
    t.absent = std::find(t.folded.begin(), t.folded.end(), 1) != t.folded.end();
    if (!t.absent) {
      for (size_t k = 1; k < t.laid.size(); k++)  // apply's inout becomes in op inout: the prefix, then x(k)
        apply(op, t.laid[k - 1].at, t.laid[k].at, &count, type);
      t.result = std::move(t.laid.back());
    }
  }
  return t.absent ? nullptr : &t.result;
}

// The rank's data for a reduction, in its type's layout
std::function<void(Table&, int)> enter_laid(const void* from, int count, MPI_Datatype type) {
  return [=](Table& t, int rank) {
    if (folded(from)) {
      t.folded[rank] = 1;
    } else {
      t.laid[rank] = orrery_smpi::laid_out(from, count, type, count, type);
      g_copied += t.laid[rank].room.size();
    }
  };
}
std::function<void(Table&, int)> enter_packed(const void* from, int count, MPI_Datatype type) {
  return [=](Table& t, int rank) {
    if (folded(from)) {
      t.folded[rank] = 1;
    } else {
      t.inputs[rank] = packed(from, count, type);
      g_copied += t.inputs[rank].size();
    }
  };
}

void copy_out(const Laid* result, void* to, int count, MPI_Datatype type) {
  static const DatatypeCopy copy = next<DatatypeCopy>(DATATYPE_COPY);
  if (result && count > 0 && !folded(to))
    copy(result->at, count, type, to, count, type);
}

// The arguments SMPI would refuse (and report), and reductions whose operation does not commute
bool reduction_taken(MPI_Comm comm, int count, MPI_Datatype type, MPI_Op op, MPI_Request* request) {
  if (request == kRequestIgnored || !request || comm == MPI_COMM_NULL || count < 0 || type == MPI_DATATYPE_NULL ||
      op == MPI_OP_NULL)
    return false;
  int commutes = 0;
  PMPI_Op_commutative(op, &commutes);
  return commutes;
}

int rank_in(MPI_Comm comm) {
  int rank;
  PMPI_Comm_rank(comm, &rank);
  return rank;
}

bool root_in(MPI_Comm comm, int root) {
  int n;
  PMPI_Comm_size(comm, &n);
  return root >= 0 && root < n;
}

}  // namespace

/* ---------------- the calls ---------------- */

bool nbc::iallreduce(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                     MPI_Request* request) {
  if (!reduction_taken(comm, count, type, op, request))
    return false;
  static Allreduce* const allreduce = selector<Allreduce>("_ZN7simgrid4smpi5colls9allreduceE");
  const int rank = rank_in(comm);
  return post(
      IALLREDUCE, comm, count, type, op, -1, request,
      [=] {
        Laid send = laid_room(count, type), recv = laid_room(count, type);  // scratch: nothing of the program's
        (*allreduce)(send.at, recv.at, count, type, op, comm);
      },
      enter_laid(sbuf == MPI_IN_PLACE ? rbuf : sbuf, count, type),
      [=](Table& t) { copy_out(reduced(t, count, type, op, IALLREDUCE, rank), rbuf, count, type); });
}

bool nbc::ireduce(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm,
                  MPI_Request* request) {
  if (!reduction_taken(comm, count, type, op, request) || !root_in(comm, root))
    return false;
  static Reduce* const reduce = selector<Reduce>("_ZN7simgrid4smpi5colls6reduceE");
  const int rank = rank_in(comm);
  return post(
      IREDUCE, comm, count, type, op, root, request,
      [=] {
        Laid send = laid_room(count, type), recv = laid_room(count, type);  // scratch: nothing of the program's
        (*reduce)(send.at, recv.at, count, type, op, root, comm);
      },
      enter_laid(sbuf == MPI_IN_PLACE ? rbuf : sbuf, count, type), [=](Table& t) {
        if (rank == root)
          copy_out(reduced(t, count, type, op, IREDUCE, rank), rbuf, count, type);
      });
}

EXPORTED int PMPI_Ibcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Request* request);
int PMPI_Ibcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Request* request) {
  using Real = int (*)(void*, int, MPI_Datatype, int, MPI_Comm, MPI_Request*);
  static const Real real = next<Real>("PMPI_Ibcast");
  static Bcast* const bcast = selector<Bcast>("_ZN7simgrid4smpi5colls5bcastE");
  if (request == kRequestIgnored || !request || comm == MPI_COMM_NULL || count < 0 || type == MPI_DATATYPE_NULL ||
      !root_in(comm, root))
    return real(buf, count, type, root, comm, request);
  const int rank = rank_in(comm);
  const bool taken = post(
      IBCAST, comm, count, type, MPI_OP_NULL, root, request,
      [=] {
        Laid data = laid_room(count, type);
        (*bcast)(data.at, count, type, root, comm);
      },
      [=](Table& t, int r) {
        if (r == root)
          enter_packed(buf, count, type)(t, r);
      },
      [=](Table& t) {
        if (rank != root) {
          need(t, root, IBCAST, rank);
          if (!t.folded[root] && !folded(buf))
            unpack(t.inputs[root], buf, count, type);
        }
      });
  return taken ? MPI_SUCCESS : real(buf, count, type, root, comm, request);
}

EXPORTED int PMPI_Ibarrier(MPI_Comm comm, MPI_Request* request);
int PMPI_Ibarrier(MPI_Comm comm, MPI_Request* request) {
  using Real = int (*)(MPI_Comm, MPI_Request*);
  static const Real real = next<Real>("PMPI_Ibarrier");
  static Barrier* const barrier = selector<Barrier>("_ZN7simgrid4smpi5colls7barrierE");
  if (request == kRequestIgnored || !request || comm == MPI_COMM_NULL)
    return real(comm, request);
  const bool taken = post(
      IBARRIER, comm, 0, MPI_BYTE, MPI_OP_NULL, -1, request,
      [=] { (*barrier)(comm); },
      [](Table&, int) {}, [](Table&) {});
  return taken ? MPI_SUCCESS : real(comm, request);
}

EXPORTED int PMPI_Iallgather(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount,
                             MPI_Datatype rtype, MPI_Comm comm, MPI_Request* request);
int PMPI_Iallgather(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount, MPI_Datatype rtype,
                    MPI_Comm comm, MPI_Request* request) {
  using Real = int (*)(const void*, int, MPI_Datatype, void*, int, MPI_Datatype, MPI_Comm, MPI_Request*);
  static const Real real = next<Real>("PMPI_Iallgather");
  static Allgather* const allgather = selector<Allgather>("_ZN7simgrid4smpi5colls9allgatherE");
  if (request == kRequestIgnored || !request || comm == MPI_COMM_NULL || rcount < 0 || rtype == MPI_DATATYPE_NULL ||
      !rbuf)
    return real(sbuf, scount, stype, rbuf, rcount, rtype, comm, request);
  const int rank = rank_in(comm);
  const MPI_Aint extent = extent_of(rtype);
  const void* own = sbuf;
  if (sbuf == MPI_IN_PLACE) {  // the rank's block in its place, as PMPI_Allgather makes it
    own = static_cast<const char*>(rbuf) + (MPI_Aint)rank * rcount * extent;
    scount = rcount;
    stype = rtype;
  }
  int ssize = 0, rsize = 0;
  if (scount < 0 || stype == MPI_DATATYPE_NULL || (PMPI_Type_size(stype, &ssize), PMPI_Type_size(rtype, &rsize),
                                                   (long)ssize * scount != (long)rsize * rcount))
    return real(sbuf, scount, stype, rbuf, rcount, rtype, comm, request);  // SMPI's to refuse
  int n;
  PMPI_Comm_size(comm, &n);
  const bool taken = post(
      IALLGATHER, comm, rcount, rtype, MPI_OP_NULL, -1, request,
      [=] {
        Laid send = laid_room(scount, stype), recv = laid_room(n * rcount, rtype);
        (*allgather)(send.at, scount, stype, recv.at, rcount, rtype, comm);
      },
      enter_packed(own, scount, stype), [=](Table& t) {
        for (int r = 0; r < n; r++) {
          need(t, r, IALLGATHER, rank);
          if (!t.folded[r] && !folded(rbuf))
            unpack(t.inputs[r], static_cast<char*>(rbuf) + (MPI_Aint)r * rcount * extent, rcount, rtype);
        }
      });
  return taken ? MPI_SUCCESS : real(sbuf, scount, stype, rbuf, rcount, rtype, comm, request);
}

/* ---------------- completion ---------------- */

bool nbc::finish(MPI_Request* request, int test, int* done) {
  if (g_running.empty())
    return false;
  auto it = g_running.find(*request);
  if (it == g_running.end())
    return false;
  if (!nbc::finished(*it->second.schedule)) {
    if (test) {
      *done = 0;
      return true;
    }
    std::shared_ptr<nbc::Schedule> schedule = it->second.schedule;
    nbc::wait(schedule);  // other ranks run meanwhile: the table may have moved
    it = g_running.find(*request);
  }
  Running r = std::move(it->second);
  g_running.erase(it);
  r.deliver(g_tables.at(r.key));
  leave(r.key);
  using Real = int (*)(MPI_Request*, int);
  static const Real real = next<Real>(FINISH_NBC);
  *done = real(request, test);  // SMPI's end of its request (it has no messages of its own)
  return true;
}

/* ---------------- in place: a send buffer that lasts ---------------- */

namespace {
std::map<MPI_Request, std::vector<std::shared_ptr<void>>> g_lasting;
std::vector<std::shared_ptr<void>> g_lasting_freed;  // their requests freed: their messages may still read them
}  // namespace

void nbc::keep_until_done(MPI_Request request, std::shared_ptr<void> buffer) {
  g_lasting[request].push_back(std::move(buffer));
}
void nbc::completed(MPI_Request request) {
  if (!g_lasting.empty())
    g_lasting.erase(request);
}
void nbc::freed(MPI_Request request) {
  if (g_lasting.empty())
    return;
  if (auto it = g_lasting.find(request); it != g_lasting.end()) {
    for (auto& b : it->second)
      g_lasting_freed.push_back(std::move(b));
    g_lasting.erase(it);
  }
}

/* SMPI 3.32's MPI_Ialltoall in place sends from a copy of the receive buffer that its entry point
 * frees as it returns (smpi_get_in_place_buf), as its reductions do (smpi_reductions.cpp): SMPI
 * is handed a copy that lasts, and the receive side's count and type for the send side, as its
 * entry point makes them. */
EXPORTED int PMPI_Ialltoall(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount,
                            MPI_Datatype rtype, MPI_Comm comm, MPI_Request* request);
int PMPI_Ialltoall(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount, MPI_Datatype rtype,
                   MPI_Comm comm, MPI_Request* request) {
  using Real = int (*)(const void*, int, MPI_Datatype, void*, int, MPI_Datatype, MPI_Comm, MPI_Request*);
  static const Real real = next<Real>("PMPI_Ialltoall");
  int n = 0;
  if (request == kRequestIgnored || !request || sbuf != MPI_IN_PLACE || !rbuf || rcount <= 0 ||
      rtype == MPI_DATATYPE_NULL || comm == MPI_COMM_NULL || PMPI_Comm_size(comm, &n) != MPI_SUCCESS)
    return real(sbuf, scount, stype, rbuf, rcount, rtype, comm, request);
  auto copy = std::make_shared<Laid>(orrery_smpi::laid_out(rbuf, rcount * n, rtype, rcount * n, rtype));
  const int err = real(copy->at, rcount, rtype, rbuf, rcount, rtype, comm, request);
  if (err == MPI_SUCCESS && *request != MPI_REQUEST_NULL)
    nbc::keep_until_done(*request, std::move(copy));
  return err;
}

namespace {
/* The bytes of a receive buffer that blocks (displacement in bytes, count, type) cover, copied so
 * that they last: SMPI's in-place MPI_Ialltoallv and MPI_Ialltoallw send from the copy. The copy
 * holds [lo, hi) of the buffer, with what lies between the blocks; `at` addresses its byte 0. */
struct Span {
  std::shared_ptr<Laid> copy;
  const unsigned char* at = nullptr;
};
Span lasting_span(const void* buf, int n, const std::function<std::tuple<MPI_Aint, int, MPI_Datatype>(int)>& block) {
  MPI_Aint lo = 0, hi = 0;
  bool any = false;
  for (int i = 0; i < n; i++) {
    auto [displ, count, type] = block(i);
    if (count <= 0)
      continue;
    MPI_Aint true_lb, true_extent;
    PMPI_Type_get_true_extent(type, &true_lb, &true_extent);
    const MPI_Aint first = displ + true_lb, last = first + (count - 1) * extent_of(type) + true_extent;
    lo = any ? std::min(lo, first) : first;
    hi = any ? std::max(hi, last) : last;
    any = true;
  }
  Span s;
  const int bytes = (int)(hi - lo);
  s.copy = std::make_shared<Laid>(orrery_smpi::laid_out(static_cast<const unsigned char*>(buf) + lo, bytes, MPI_BYTE,
                                                        bytes, MPI_BYTE));
  s.at = s.copy->at - lo;
  return s;
}
}  // namespace

/* SMPI 3.32's MPI_Ialltoallv and MPI_Ialltoallw in place: the same freed copy as MPI_Ialltoall's.
 * SMPI is handed a copy of the blocks' span that lasts, with the receive side's counts,
 * displacements and types for the send side, as its entry point makes them. */
EXPORTED int PMPI_Ialltoallv(const void* sbuf, const int* scounts, const int* sdispls, MPI_Datatype stype, void* rbuf,
                             const int* rcounts, const int* rdispls, MPI_Datatype rtype, MPI_Comm comm,
                             MPI_Request* request);
int PMPI_Ialltoallv(const void* sbuf, const int* scounts, const int* sdispls, MPI_Datatype stype, void* rbuf,
                    const int* rcounts, const int* rdispls, MPI_Datatype rtype, MPI_Comm comm, MPI_Request* request) {
  using Real = int (*)(const void*, const int*, const int*, MPI_Datatype, void*, const int*, const int*, MPI_Datatype,
                       MPI_Comm, MPI_Request*);
  static const Real real = next<Real>("PMPI_Ialltoallv");
  int n = 0;
  if (request == kRequestIgnored || !request || sbuf != MPI_IN_PLACE || !rbuf || !rcounts || !rdispls ||
      rtype == MPI_DATATYPE_NULL || comm == MPI_COMM_NULL || PMPI_Comm_size(comm, &n) != MPI_SUCCESS)
    return real(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm, request);
  const MPI_Aint extent = extent_of(rtype);
  Span s = lasting_span(rbuf, n, [&](int i) { return std::make_tuple(rdispls[i] * extent, rcounts[i], rtype); });
  const int err = real(s.at, rcounts, rdispls, rtype, rbuf, rcounts, rdispls, rtype, comm, request);
  if (err == MPI_SUCCESS && *request != MPI_REQUEST_NULL)
    nbc::keep_until_done(*request, std::move(s.copy));
  return err;
}

EXPORTED int PMPI_Ialltoallw(const void* sbuf, const int* scounts, const int* sdispls, const MPI_Datatype* stypes,
                             void* rbuf, const int* rcounts, const int* rdispls, const MPI_Datatype* rtypes,
                             MPI_Comm comm, MPI_Request* request);
int PMPI_Ialltoallw(const void* sbuf, const int* scounts, const int* sdispls, const MPI_Datatype* stypes, void* rbuf,
                    const int* rcounts, const int* rdispls, const MPI_Datatype* rtypes, MPI_Comm comm,
                    MPI_Request* request) {
  using Real = int (*)(const void*, const int*, const int*, const MPI_Datatype*, void*, const int*, const int*,
                       const MPI_Datatype*, MPI_Comm, MPI_Request*);
  static const Real real = next<Real>("PMPI_Ialltoallw");
  int n = 0;
  if (request == kRequestIgnored || !request || sbuf != MPI_IN_PLACE || !rbuf || !rcounts || !rdispls || !rtypes ||
      comm == MPI_COMM_NULL || PMPI_Comm_size(comm, &n) != MPI_SUCCESS ||
      std::any_of(rtypes, rtypes + n, [](MPI_Datatype t) { return t == MPI_DATATYPE_NULL; }))
    return real(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm, request);
  Span s = lasting_span(rbuf, n, [&](int i) { return std::make_tuple((MPI_Aint)rdispls[i], rcounts[i], rtypes[i]); });
  const int err = real(s.at, rcounts, rdispls, rtypes, rbuf, rcounts, rdispls, rtypes, comm, request);
  if (err == MPI_SUCCESS && *request != MPI_REQUEST_NULL)
    nbc::keep_until_done(*request, std::move(s.copy));
  return err;
}

/* ---------------- MPI_Testany ----------------
 * SMPI 3.32's Request::testany looks only at requests with a comm of their own: a non-blocking
 * collective's request has none (its messages are its sub-requests, or the kernel's), so an
 * MPI_Testany over one pending collective answered "no active request" (flag 1, MPI_UNDEFINED) at
 * once, its own non-blocking collectives' as well as these, and the program went on as if it had
 * completed. Here, where SMPI's finds none complete, each non-blocking collective's request is
 * tested in turn (Request::test, one poll each, as SMPI's MPI_Testsome tests every request). */
namespace {
constexpr unsigned kRequestNbc = 0x10000;  // MPI_REQ_NBC, src/smpi/include/private.hpp
std::set<const void*> g_collective_requests;  // SMPI's requests of non-blocking collectives, alive
}  // namespace

void nbc::request_made(void* request, unsigned flags) {
  if (flags & kRequestNbc)
    g_collective_requests.insert(request);
}
void nbc::request_freed(void* request) {
  if (!g_collective_requests.empty())
    g_collective_requests.erase(request);
}

#define REQUEST_TESTANY "_ZN7simgrid4smpi7Request7testanyEiPPS1_PiS4_P10MPI_Status"
#define REQUEST_TEST "_ZN7simgrid4smpi7Request4testEPPS1_P10MPI_StatusPi"
EXPORTED int request_testany(int count, MPI_Request* requests, int* index, int* flag, MPI_Status* status) __asm__(REQUEST_TESTANY);
int request_testany(int count, MPI_Request* requests, int* index, int* flag, MPI_Status* status) {
  using Real = int (*)(int, MPI_Request*, int*, int*, MPI_Status*);
  using Test = int (*)(MPI_Request*, MPI_Status*, int*);
  static const Real real = next<Real>(REQUEST_TESTANY);
  static const Test test = next<Test>(REQUEST_TEST);
  std::vector<int> collectives;
  if (!g_collective_requests.empty())
    for (int i = 0; i < count; i++)
      if (requests[i] != MPI_REQUEST_NULL && g_collective_requests.count(requests[i]))
        collectives.push_back(i);
  const int ret = real(count, requests, index, flag, status);
  if (collectives.empty() || (*flag && *index != MPI_UNDEFINED))
    return ret;
  for (int i : collectives) {
    int done = 0;
    const int tested = test(&requests[i], status, &done);
    if (done) {
      *index = i;
      *flag = 1;
      return tested;
    }
  }
  *index = MPI_UNDEFINED;
  *flag = 0;
  return ret;
}

bool nbc::release(MPI_Request request) {
  auto it = g_running.find(request);
  if (it == g_running.end())
    return false;
  leave(it->second.key);  // the schedule runs on in the kernel: the other ranks' parts need its messages
  g_running.erase(it);
  return true;
}
