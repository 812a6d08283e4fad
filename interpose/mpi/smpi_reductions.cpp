/* liborrery_smpi.so: reductions in rank order where SMPI combines the ranks' data otherwise.
 *
 * MPI combines a reduction's data in rank order, x0 op x1 op ... op x(n-1), and a program may hand
 * it an operation that does not commute (MPI_Op_create(f, 0, &op): composing maps, multiplying
 * matrices, "the first rank's", or any operation the program does not promise commutes). SimGrid
 * 3.32's SMPI, found on generated cases (tests/native/test_reductions.py), gives wrong data there,
 * silently:
 *   - MPI_Scan and MPI_Exscan under every selector: the operation is never applied (colls::scan
 *     and colls::exscan test the wrong index in their non-commutative branch), so each rank got
 *     its own data (MPI_Scan) or its left neighbour's (MPI_Exscan);
 *   - every non-blocking reduction (MPI_Iallreduce, MPI_Ireduce, MPI_Iscan, MPI_Iexscan,
 *     MPI_Ireduce_scatter, MPI_Ireduce_scatter_block): the request's end (Request::
 *     finish_nbc_requests) combines what arrived into the rank's own data, x(k) op acc, from the
 *     lowest rank up, which reverses the order;
 *   - MPI_Iexscan with any operation but a sum, whose result starts from zeros (MPI_MAX of
 *     negative numbers gave 0);
 *   - MPI_Allreduce under MVAPICH2's and Intel MPI's tables, and MPI_Reduce_scatter(_block) under
 *     Intel MPI's, from 800 bytes to 8 KB on the generated cases (their reduce-scatter and allgather
 *     algorithms).
 * Their messages are right: only the data are not. And a non-blocking reduction of a derived type
 * with an operation of the program's, even one that commutes, combined nothing, then crashed the
 * run (Stand, below).
 *
 * The mend keeps SMPI's algorithm, so its messages and its times, and recomputes the data. On entry
 * each rank's input is copied into a table the ranks share (they are actors of one process, as
 * smpi_colls.cpp's kernel programs use it). Where the rank's result is due (SMPI's blocking call
 * returns, or Request::finish_nbc_requests completes the request) it is read from the inputs'
 * prefixes in rank order, (x(0) op ... op x(k-1)) op x(k) with SMPI's own Op::apply, formed once for
 * all ranks, and copied over SMPI's with the program's datatype (its gaps untouched). The inputs it
 * needs are in the table by then: a rank's result depends on a message from each rank whose data
 * it combines, sent after that rank entered; a rank's result that needs an input not yet there
 * stops the run (it would be a bug of this mend, not of the program). Operations that commute
 * (but MPI_Iexscan's, and a derived type's in a non-blocking call) and communicators of one rank
 * are left to SMPI; so are intercommunicators and SMPI's own node and leader communicators (no id:
 * smpi_colls.cpp, identified). Copying and combining take no simulated time, as SMPI's combining
 * inside a call takes none.
 *
 * Whatever takes a non-blocking reduction in place, SMPI is handed a send buffer that lasts until
 * its request completes (lasting, below): its own is freed as its entry point returns.
 *
 * ORRERY_SMPI_REDUCTIONS=simgrid leaves SMPI's data as they are (to show its bug, never for a
 * result); =report writes at the exit one line on standard error: how many results (per rank) were
 * formed again, and how many of them ended a non-blocking call. */
#include "mpi/smpi_layout.hpp"
#include "mpi/smpi_nbc.hpp"
#include "mpi/smpi_next.hpp"

#include <smpi/smpi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#define EXPORTED __attribute__((visibility("default")))

using orrery_smpi::DatatypeCopy;
using orrery_smpi::extent_of;
using orrery_smpi::Laid;
using orrery_smpi::Mode;
using orrery_smpi::next;
using orrery_smpi::OpApply;

// simgrid::smpi::Comm::id() const: the same for all of a communicator's ranks (smpi_colls.cpp)
int comm_id(const void* comm) __asm__("_ZNK7simgrid4smpi4Comm2idEv");

namespace {

// simgrid::smpi::Request::finish_nbc_requests(Request**, int test): 1 once a non-blocking collective is done
#define FINISH_NBC "_ZN7simgrid4smpi7Request19finish_nbc_requestsEPPS1_i"

Laid laid_out(const void* from, int count, MPI_Datatype type) {
  return orrery_smpi::laid_out(from, count, type, count, type);
}

// SMPI's request argument of a blocking call (src/smpi/include/private.hpp: MPI_REQUEST_IGNORED)
MPI_Request* const kRequestIgnored = (MPI_Request*)-100;

enum Kind { ALLREDUCE, REDUCE, SCAN, EXSCAN, REDUCE_SCATTER };
const char* const kCalls[] = {"allreduce", "reduce", "scan", "exscan", "reduce_scatter"};

Mode mode() {
  static const Mode m = orrery_smpi::mode_from_environment("ORRERY_SMPI_REDUCTIONS");
  return m;
}
unsigned long long g_formed = 0, g_formed_nonblocking = 0;  // results formed again, for the report

__attribute__((destructor)) void report_at_exit() {
  if (mode() == Mode::Report)
    fprintf(stderr, "orrery: reductions: %llu results formed again in rank order, %llu of them non-blocking\n",
            g_formed, g_formed_nonblocking);
}

/* One call on a communicator: the ranks' inputs as they entered, until every rank has left. The
 * first `prefixed` of them have been replaced by their prefix, x(0) op ... op x(k): each rank's
 * result is one of those (a scan's its own, an exscan's its left neighbour's, every other call's
 * the last, or a block of it), formed once for all ranks, from rank 0 up. */
struct Call {
  std::vector<Laid> inputs;
  std::vector<bool> entered;
  int total = 0;  // elements each rank entered
  int prefixed = 0, left = 0;
};
using Key = std::pair<int, uint64_t>;  // (communicator's id, the call's number among these on it)
std::map<Key, Call> g_calls;
std::map<std::pair<int, int>, uint64_t> g_numbers;  // (communicator's id, rank): its calls so far

/* What SMPI's non-blocking reduction runs on in place of a derived datatype: the same bytes, as
 * MPI_BYTEs, combined by an operation that does nothing. Its end of the request misreads a derived
 * type (Request::finish_nbc_requests: the data of other ranks were not combined, and the run then
 * crashed, an MPI_Iallreduce of a struct of a double and an int from 1 element on 2 ranks); its
 * non-blocking reductions are linear (src/smpi/colls/smpi_nbc_impl.cpp), each message a rank's
 * whole vector or block, so the same bytes make the same messages. The result is formed here. */
struct Stand {
  std::vector<unsigned char> send, recv;
  std::vector<int> counts;  // a reduce-scatter's, in bytes
  int size = 0;             // the type's bytes an element
};

/* What a rank's result is, and where it goes. */
struct Due {
  Key key;
  Kind kind;
  int rank;
  int through;       // x(0) op ... op x(through - 1): 0 where the rank receives nothing
  MPI_Aint first;    // its elements from `first`
  int count;         // and how many
  MPI_Datatype type;
  MPI_Op op;
  void* out;                     // where the program receives it
  std::shared_ptr<Stand> stand;  // what SMPI runs on instead, if anything
};

bool derived(MPI_Datatype type) {
  int integers, addresses, types, combiner;
  PMPI_Type_get_envelope(type, &integers, &addresses, &types, &combiner);
  return combiner != MPI_COMBINER_NAMED;
}

// MPI's predefined operations, which SMPI checks against the type (a user operation takes any)
bool predefined(MPI_Op op) {
  for (MPI_Op p : {MPI_MAX, MPI_MIN, MPI_SUM, MPI_PROD, MPI_LAND, MPI_BAND, MPI_LOR, MPI_BOR, MPI_LXOR, MPI_BXOR,
                   MPI_MAXLOC, MPI_MINLOC, MPI_REPLACE, MPI_NO_OP})
    if (op == p)
      return true;
  return false;
}

// Whether SMPI runs this non-blocking reduction on the same bytes as MPI_BYTEs (Stand)
bool stood_in(MPI_Op op, MPI_Datatype type, MPI_Request* request) {
  return request != kRequestIgnored && derived(type) && !predefined(op);
}

void nothing(void*, void*, int*, MPI_Datatype*) {}
MPI_Op doing_nothing() {
  static const MPI_Op op = [] {
    MPI_Op o;
    PMPI_Op_create(nothing, 1, &o);
    return o;
  }();
  return op;
}

bool taken(MPI_Op op, MPI_Comm comm, MPI_Datatype type, Kind kind, MPI_Request* request, int* n) {
  if (mode() == Mode::Simgrid || op == MPI_OP_NULL || comm == MPI_COMM_NULL)
    return false;
  int commutes = 1, inter = 0;
  PMPI_Op_commutative(op, &commutes);
  if (commutes && !(request != kRequestIgnored && kind == EXSCAN) && !stood_in(op, type, request))
    return false;
  PMPI_Comm_test_inter(comm, &inter);
  PMPI_Comm_size(comm, n);
  return !inter && *n > 1 && comm_id(comm) != MPI_UNDEFINED;
}

/* The rank enters: its input (count x type from `input`) goes into the call's table. */
Key enter(MPI_Comm comm, int rank, int n, const void* input, int count, MPI_Datatype type) {
  const int id = comm_id(comm);
  const Key key{id, g_numbers[{id, rank}]++};
  Call& c = g_calls[key];
  if (c.inputs.empty()) {
    c.inputs.resize(n);
    c.entered.assign(n, false);
    c.total = count;
  }
  c.inputs[rank] = laid_out(input, count, type);
  c.entered[rank] = true;
  return key;
}

void leave(const Key& key) {
  auto it = g_calls.find(key);
  if (++it->second.left == (int)it->second.inputs.size())
    g_calls.erase(it);
}

/* The rank's result, x(0) op ... op x(through - 1), into the program's buffer; then it leaves. */
void deliver(const Due& d) {
  static const OpApply apply = next<OpApply>(OP_APPLY);
  static const DatatypeCopy copy = next<DatatypeCopy>(DATATYPE_COPY);
  Call& c = g_calls.at(d.key);
  for (int k = c.prefixed; k < d.through; k++)  // the prefixed ones were checked as they were
    if (!c.entered[k]) {
      fprintf(stderr,
              "orrery: MPI_%s on rank %d: its result needs rank %d's data, which has not entered the call "
              "(interpose/mpi/smpi_reductions.cpp)\n",
              kCalls[d.kind], d.rank, k);
      abort();
    }
  for (; c.prefixed < d.through; c.prefixed++)  // x(k) becomes (x(0) op ... op x(k - 1)) op x(k)
    if (c.prefixed > 0)
      apply(d.op, c.inputs[c.prefixed - 1].at, c.inputs[c.prefixed].at, &c.total, d.type);
  if (d.out && d.count > 0 && d.through > 0) {
    copy(c.inputs[d.through - 1].at + d.first * extent_of(d.type), d.count, d.type, d.out, d.count, d.type);
    g_formed++;
  }
  leave(d.key);
}

/* A taken call's due: `total` elements entered from `input`; the rank's result, `count` of them
 * from `first`, of the first `through` ranks' data. */
Due due(MPI_Comm comm, Kind kind, const void* input, int total, int first, int count, MPI_Datatype type, MPI_Op op,
        void* out, int n, int through, MPI_Request* request) {
  int rank;
  PMPI_Comm_rank(comm, &rank);
  Due d{enter(comm, rank, n, input, total, type), kind, rank, through, first, count, type, op, out, nullptr};
  if (stood_in(op, type, request)) {
    auto s = std::make_shared<Stand>();
    PMPI_Type_size(type, &s->size);
    s->send.resize((size_t)total * s->size);
    s->recv.resize(s->send.size());
    int position = 0;
    PMPI_Pack(input, total, type, s->send.data(), (int)s->send.size(), &position, comm);
    d.stand = std::move(s);
  }
  return d;
}

// The non-blocking calls' dues, by request, until SMPI completes it
std::map<MPI_Request, Due> g_pending;

int rank_of(MPI_Comm comm) {
  int rank;
  PMPI_Comm_rank(comm, &rank);
  return rank;
}

// where rank r's block of a reduce-scatter starts, and its elements
std::pair<int, int> block_of(const int* counts, int r) {
  int first = 0;
  for (int k = 0; k < r; k++)
    first += counts[k];
  return {first, counts[r]};
}

}  // namespace

/* ---------------- the stand-ins ---------------- */

/* SMPI's blocking reductions are its non-blocking ones' entry points called with a request of
 * MPI_REQUEST_IGNORED (src/smpi/include/private.hpp), which run the blocking algorithm
 * (PMPI_Allreduce calls PMPI_Iallreduce, and so on, through the loader): one stand-in for both. */
namespace {
/* After SMPI's call: the result of a blocking one now; of a non-blocking one, when its request
 * completes (a rank that receives none leaves the call now, unless SMPI runs on its Stand, which
 * must outlive the request). */
int after(int err, MPI_Request* request, const Due& d) {
  if (err != MPI_SUCCESS)  // SMPI refused the call (its arguments): nothing to deliver
    leave(d.key);
  else if (request != kRequestIgnored && (d.out || d.stand))
    g_pending[*request] = d;
  else
    deliver(d);
  return err;
}

/* What SMPI's call is handed: the program's buffers, type and operation, or, where SMPI runs on a
 * Stand, its bytes as MPI_BYTEs (counts times the type's size) and the operation doing nothing. */
struct Handed {
  const void* send;
  void* recv;
  MPI_Datatype type;
  MPI_Op op;
  int scale;  // bytes an element, or 1
};
Handed handed(const Due& d, const void* sbuf, void* rbuf, MPI_Datatype type, MPI_Op op) {
  if (Stand* s = d.stand.get())
    return {s->send.data(), s->recv.data(), MPI_BYTE, doing_nothing(), s->size};
  return {sbuf, rbuf, type, op, 1};
}

/* SMPI 3.32's non-blocking reductions in place (MPI_Iallreduce, MPI_Iscan, MPI_Iexscan,
 * MPI_Ireduce_scatter(_block)) copy the receive buffer into a vector of their entry point's
 * (smpi_get_in_place_buf) and send from it, and the vector is freed as the entry point returns:
 * a message sent after that (one at or above smpi/send-is-detached-thresh, or the rank's own data
 * combined at the end) read freed memory, and the results came out wrong, silently (an in-place
 * MPI_Iallreduce of MPI_MAX over 23 136 doubles on 8 ranks: element 0 wrong on every rank, and
 * thousands once the freed memory was reused). Here SMPI is handed a copy of its own that lasts
 * until the request completes (or, freed by the program, for the rest of the run: smpi_nbc.cpp keeps
 * it, and MPI_Ialltoall's). */

// A reduce-scatter's whole vector, in elements (its counts summed; none given: the communicator's size)
int whole(const int* counts, MPI_Comm comm) {
  int n = 0, total = 0;
  if (comm == MPI_COMM_NULL || PMPI_Comm_size(comm, &n) != MPI_SUCCESS)
    return 0;
  if (!counts)
    return n;
  for (int k = 0; k < n; k++)
    total += counts[k];
  return total;
}

template <typename Call>
int lasting(MPI_Request* request, const void* sbuf, const void* rbuf, int count, MPI_Datatype type, Call call) {
  if (request == kRequestIgnored || !request || sbuf != MPI_IN_PLACE || !rbuf || count <= 0)
    return call(sbuf);
  auto copy = std::make_shared<Laid>(laid_out(rbuf, count, type));
  const int err = call(copy->at);
  if (err == MPI_SUCCESS && *request != MPI_REQUEST_NULL)
    orrery_smpi::nbc::keep_until_done(*request, std::move(copy));
  return err;
}
}  // namespace

EXPORTED int PMPI_Iallreduce(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                             MPI_Request* request);
int PMPI_Iallreduce(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                    MPI_Request* request) {
  using Real = int (*)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Request*);
  static const Real real = next<Real>("PMPI_Iallreduce");
  if (request != kRequestIgnored && orrery_smpi::nbc::iallreduce(sbuf, rbuf, count, type, op, comm, request))
    return MPI_SUCCESS;  // smpi_nbc.cpp runs it in the kernel
  int n;
  if (!taken(op, comm, type, ALLREDUCE, request, &n))
    return lasting(request, sbuf, rbuf, count, type,
                   [&](const void* send) { return real(send, rbuf, count, type, op, comm, request); });
  Due d = due(comm, ALLREDUCE, sbuf == MPI_IN_PLACE ? rbuf : sbuf, count, 0, count, type, op, rbuf, n, n, request);
  const Handed h = handed(d, sbuf, rbuf, type, op);
  return after(lasting(request, h.send, rbuf, count, type,
                       [&](const void* send) { return real(send, h.recv, count * h.scale, h.type, h.op, comm, request); }),
               request, d);
}

EXPORTED int PMPI_Ireduce(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, int root,
                          MPI_Comm comm, MPI_Request* request);
int PMPI_Ireduce(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm,
                 MPI_Request* request) {
  using Real = int (*)(const void*, void*, int, MPI_Datatype, MPI_Op, int, MPI_Comm, MPI_Request*);
  static const Real real = next<Real>("PMPI_Ireduce");
  if (request != kRequestIgnored && orrery_smpi::nbc::ireduce(sbuf, rbuf, count, type, op, root, comm, request))
    return MPI_SUCCESS;  // smpi_nbc.cpp runs it in the kernel
  int n;
  if (!taken(op, comm, type, REDUCE, request, &n))
    return real(sbuf, rbuf, count, type, op, root, comm, request);
  const bool at_root = rank_of(comm) == root;
  Due d = due(comm, REDUCE, sbuf == MPI_IN_PLACE ? rbuf : sbuf, count, 0, count, type, op, at_root ? rbuf : nullptr,
              n, at_root ? n : 0, request);
  const Handed h = handed(d, sbuf, rbuf, type, op);
  return after(real(h.send, h.recv, count * h.scale, h.type, h.op, root, comm, request), request, d);
}

EXPORTED int PMPI_Iscan(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                        MPI_Request* request);
int PMPI_Iscan(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
               MPI_Request* request) {
  using Real = int (*)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Request*);
  static const Real real = next<Real>("PMPI_Iscan");
  int n;
  if (!taken(op, comm, type, SCAN, request, &n))
    return lasting(request, sbuf, rbuf, count, type,
                   [&](const void* send) { return real(send, rbuf, count, type, op, comm, request); });
  Due d = due(comm, SCAN, sbuf == MPI_IN_PLACE ? rbuf : sbuf, count, 0, count, type, op, rbuf, n, rank_of(comm) + 1,
              request);
  const Handed h = handed(d, sbuf, rbuf, type, op);
  return after(lasting(request, h.send, rbuf, count, type,
                       [&](const void* send) { return real(send, h.recv, count * h.scale, h.type, h.op, comm, request); }),
               request, d);
}

EXPORTED int PMPI_Iexscan(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                          MPI_Request* request);
int PMPI_Iexscan(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                 MPI_Request* request) {
  using Real = int (*)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Request*);
  static const Real real = next<Real>("PMPI_Iexscan");
  int n;
  if (!taken(op, comm, type, EXSCAN, request, &n))
    return lasting(request, sbuf, rbuf, count, type,
                   [&](const void* send) { return real(send, rbuf, count, type, op, comm, request); });
  const int rank = rank_of(comm);
  Due d = due(comm, EXSCAN, sbuf == MPI_IN_PLACE ? rbuf : sbuf, count, 0, count, type, op, rank ? rbuf : nullptr, n,
              rank, request);
  const Handed h = handed(d, sbuf, rbuf, type, op);
  return after(lasting(request, h.send, rbuf, count, type,
                       [&](const void* send) { return real(send, h.recv, count * h.scale, h.type, h.op, comm, request); }),
               request, d);
}

EXPORTED int PMPI_Ireduce_scatter(const void* sbuf, void* rbuf, const int* rcounts, MPI_Datatype type, MPI_Op op,
                                  MPI_Comm comm, MPI_Request* request);
int PMPI_Ireduce_scatter(const void* sbuf, void* rbuf, const int* rcounts, MPI_Datatype type, MPI_Op op,
                         MPI_Comm comm, MPI_Request* request) {
  using Real = int (*)(const void*, void*, const int*, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Request*);
  static const Real real = next<Real>("PMPI_Ireduce_scatter");
  int n;
  if (!rcounts || !taken(op, comm, type, REDUCE_SCATTER, request, &n))
    return lasting(request, sbuf, rbuf, rcounts ? whole(rcounts, comm) : 0, type,
                   [&](const void* send) { return real(send, rbuf, rcounts, type, op, comm, request); });
  const auto [first, count] = block_of(rcounts, rank_of(comm));
  const int total = block_of(rcounts, n - 1).first + rcounts[n - 1];
  Due d = due(comm, REDUCE_SCATTER, sbuf == MPI_IN_PLACE ? rbuf : sbuf, total, first, count, type, op, rbuf, n, n,
              request);
  const Handed h = handed(d, sbuf, rbuf, type, op);
  const int* counts = rcounts;
  if (Stand* st = d.stand.get()) {  // the counts too, in bytes
    for (int k = 0; k < n; k++)
      st->counts.push_back(rcounts[k] * h.scale);
    counts = st->counts.data();
  }
  return after(lasting(request, h.send, rbuf, total, type,
                       [&](const void* send) { return real(send, h.recv, counts, h.type, h.op, comm, request); }),
               request, d);
}

EXPORTED int PMPI_Ireduce_scatter_block(const void* sbuf, void* rbuf, int rcount, MPI_Datatype type, MPI_Op op,
                                        MPI_Comm comm, MPI_Request* request);
int PMPI_Ireduce_scatter_block(const void* sbuf, void* rbuf, int rcount, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                               MPI_Request* request) {
  using Real = int (*)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Request*);
  static const Real real = next<Real>("PMPI_Ireduce_scatter_block");
  int n;
  if (!taken(op, comm, type, REDUCE_SCATTER, request, &n))
    return lasting(request, sbuf, rbuf, rcount * whole(nullptr, comm), type,
                   [&](const void* send) { return real(send, rbuf, rcount, type, op, comm, request); });
  Due d = due(comm, REDUCE_SCATTER, sbuf == MPI_IN_PLACE ? rbuf : sbuf, n * rcount, rank_of(comm) * rcount, rcount,
              type, op, rbuf, n, n, request);
  const Handed h = handed(d, sbuf, rbuf, type, op);
  return after(lasting(request, h.send, rbuf, n * rcount, type,
                       [&](const void* send) { return real(send, h.recv, rcount * h.scale, h.type, h.op, comm, request); }),
               request, d);
}

/* A pending reduction's request freed before it completes (MPI_Request_free: the program will not
 * see its result): it leaves the call now, so that its request's address, which SMPI may give a
 * later request, is not taken for it; what SMPI still runs on (its Stand) lives on. */
namespace {
std::vector<std::shared_ptr<Stand>> g_freed_stands;
}  // namespace

EXPORTED int PMPI_Request_free(MPI_Request* request);
int PMPI_Request_free(MPI_Request* request) {
  using Real = int (*)(MPI_Request*);
  static const Real real = next<Real>("PMPI_Request_free");
  if (request && orrery_smpi::nbc::release(*request))
    return real(request);
  if (request)
    orrery_smpi::nbc::freed(*request);
  if (request && !g_pending.empty()) {
    auto it = g_pending.find(*request);
    if (it != g_pending.end()) {
      if (it->second.stand)
        g_freed_stands.push_back(it->second.stand);
      leave(it->second.key);
      g_pending.erase(it);
    }
  }
  return real(request);
}

/* Where SMPI completes a non-blocking collective (its wait and test, for one request or several),
 * having combined what arrived: a pending reduction's result, formed again, replaces it. */
EXPORTED int finish_nbc_requests(MPI_Request* request, int test) __asm__(FINISH_NBC);
int finish_nbc_requests(MPI_Request* request, int test) {
  using Real = int (*)(MPI_Request*, int);
  static const Real real = next<Real>(FINISH_NBC);
  int finished;
  if (orrery_smpi::nbc::finish(request, test, &finished))
    return finished;  // one smpi_nbc.cpp runs in the kernel
  const MPI_Request r = *request;
  const int done = real(request, test);
  if (done)
    orrery_smpi::nbc::completed(r);
  if (done && !g_pending.empty()) {
    auto it = g_pending.find(r);
    if (it != g_pending.end()) {
      const Due d = it->second;
      g_pending.erase(it);
      g_formed_nonblocking += d.count > 0 && d.through > 0;
      deliver(d);
    }
  }
  return done;
}
