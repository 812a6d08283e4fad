/* liborrery_smpi.so: pins each end of every SMPI message where its rank stood
 * when it posted it.
 *
 * SimGrid routes a message between the hosts its two ends are pinned to, and
 * an end not pinned from the host where its actor stands when sender and
 * receiver match (kernel CommImpl::start). A rank moves: the shim stands it at
 * its process for calls on host buffers and next to its GPU for calls on
 * device memory (mpi.cpp), so an end taken at the match would follow wherever
 * the rank happens to be then: a host message from a rank that has since
 * posted a device receive, an eager message a collective sent to a peer that
 * entered it after the sender had left. Pinned where the rank stood when it
 * posted the request, each message takes the route of the call that made it.
 *
 * SMPI's messages are kernel comms without an s4u handle. This library, loaded
 * before libsimgrid (orrery run preloads it into smpimain), stands in for two
 * of SMPI's functions, which libsimgrid calls through its PLT as the program's
 * MPI calls and its collectives post requests:
 *   - Request::Request (the constructor of every request), to learn each
 *     request's receiver and direction;
 *   - Request::start(), to pin the request's comm as soon as it is posted: a
 *     send's source (its comm queued in the receiver's mailbox), a receive's
 *     destination (queued in its own), with CommImpl::set_source and
 *     set_destination, what SimGrid's one-sided comms (s4u::Comm::sendto_init)
 *     use. A comm that matched during the post has started already, from
 *     where the rank stands: the same host.
 * It also stands in for Group::rank, so that the actors Orrery creates beside
 * a rank are no members of its communicators, and for SMPI's k-nomial
 * broadcast, without the node layout it builds and never uses (below), in
 * SimGrid's kernel where smpi_colls.cpp takes it.
 * Each stand-in calls the libsimgrid function it replaces (dlsym RTLD_NEXT).
 * Kernel and SMPI member functions take their object as first argument under
 * the Itanium C++ ABI; linking against their symbols checks at build time
 * that libsimgrid has them. The flags and mailbox names are SimGrid 3.32's;
 * tests/native/test_paths.py fails when a pin is missed. */
#include "mpi/smpi_next.hpp"

#include <simgrid/s4u.hpp>
#include <smpi/smpi.h>

#include <dlfcn.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace sg4 = simgrid::s4u;
namespace simgrid::kernel::activity {
class CommImpl;
}
using simgrid::kernel::activity::CommImpl;

void* comm_set_source(CommImpl* comm, sg4::Host* from) __asm__("_ZN7simgrid6kernel8activity8CommImpl10set_sourceEPNS_3s4u4HostE");
void* comm_set_destination(CommImpl* comm, sg4::Host* to) __asm__("_ZN7simgrid6kernel8activity8CommImpl15set_destinationEPNS_3s4u4HostE");

#define REQUEST_CTOR "_ZN7simgrid4smpi7RequestC1EPKviPNS0_8DatatypeElliPNS0_4CommEjPNS0_2OpE"
#define REQUEST_START "_ZN7simgrid4smpi7Request5startEv"
#define REQUEST_UNREF "_ZN7simgrid4smpi7Request5unrefEPPS1_"

namespace {
// SMPI's request flags (src/smpi/include/private.hpp)
constexpr unsigned REQ_PERSISTENT = 0x1, REQ_SEND = 0x4, REQ_RECV = 0x8, REQ_RMA = 0x200;

struct Posted {
  long receiver;  // actor pid whose mailbox holds the comm while unmatched
  bool send;
  bool persistent;
  // One-sided (MPI_Put, MPI_Get, MPI_Accumulate...): the side's buffer and the rank it belongs to
  // (the send's source, the receive's destination), whose place its end takes
  bool rma = false;
  const void* buf = nullptr;
  long owner = -1;
  // a one-sided send's other end: the receive made with it (the target's window, the origin's
  // buffer), taken as the send starts
  const void* far_buf = nullptr;
  long far_owner = -1;
};
std::unordered_map<const void*, Posted> g_requests;  // made, not yet started (or persistent)

/* One-sided messages. SMPI's Win::put, get and accumulate post both sides from the origin rank
 * (SimGrid 3.32, smpi_win.cpp): they make the send request and the receive request (the
 * target's window or the origin's buffer), start the send, then the receive, which matches it at
 * once, the receive as the target's actor for a put. Pinned where the posting rank stands, or
 * left to the actors' hosts, a put from host memory would go from GPU to GPU over NVLink (the
 * ranks stand next to their GPUs between wrapped calls). Each end is pinned instead where its
 * buffer is, as the shim says (a rank's process for host memory, next to the GPU for device
 * memory: mpi.cpp's rma_end): the send's source when it starts, and its destination then too,
 * from the receive made just before it, the only thing made between the two (no simcall comes
 * between them: the pairing is taken as the send's start enters, before its first). */
sg4::Host* (*g_rma_end)(const void* buf, long pid) = nullptr;
struct RmaReceive {
  const void* buf = nullptr;
  long src = -1, dst = -1;
} g_rma_receive;

using orrery_smpi::next;

sg4::Mailbox* mailbox_of(long pid) {
  static std::unordered_map<long, sg4::Mailbox*> boxes;
  auto it = boxes.find(pid);
  if (it != boxes.end())
    return it->second;
  sg4::Mailbox* box = sg4::Mailbox::by_name("SMPI-" + std::to_string(pid));  // SMPI's ActorExt
  return boxes.emplace(pid, box).first->second;
}

sg4::Mailbox* small_mailbox_of(long pid) {  // SMPI's ActorExt: where one-sided messages queue
  static std::unordered_map<long, sg4::Mailbox*> boxes;
  auto it = boxes.find(pid);
  if (it != boxes.end())
    return it->second;
  sg4::Mailbox* box = sg4::Mailbox::by_name("small-" + std::to_string(pid));
  return boxes.emplace(pid, box).first->second;
}

/* SMPI gives each rank's small mailbox, where one-sided messages go, the rank as its permanent
 * receiver (ActorExt::init), so that SimGrid starts a message sent there at once, from its
 * actors' hosts, before anything can pin it. Without one the message waits there for the
 * receive that Win posts right after it (the same instant), pinned meanwhile. Nothing else uses
 * these mailboxes under orrery run (smpi/async-small-thresh is 0). */
void no_permanent_receiver(long pid) {
  static std::unordered_set<long> done;
  if (done.insert(pid).second)
    small_mailbox_of(pid)->set_receiver(nullptr);
}

void pin(const void* request, const Posted& p) {
  sg4::Host* here = sg4::this_actor::get_host();
  sg4::Host* there = nullptr;  // a one-sided send's destination
  if (p.rma && g_rma_end) {
    if (sg4::Host* end = g_rma_end(p.buf, p.owner))
      here = end;
    if (p.far_buf)
      there = g_rma_end(p.far_buf, p.far_owner);
  }
  // kernel MailboxImpl::iprobe: type 1 visits the queued receives, type 0 the queued sends;
  // the match function is shown each one's SMPI request and comm, and matches none
  auto visit = [&](sg4::Mailbox* box) {
    box->iprobe(p.send ? 0 : 1, [&](void*, void* queued, CommImpl* comm) {
      if (queued == request) {
        p.send ? comm_set_source(comm, here) : comm_set_destination(comm, here);
        if (there)
          comm_set_destination(comm, there);
      }
      return false;
    }, nullptr);
  };
  visit(mailbox_of(p.receiver));
  if (p.rma)
    visit(small_mailbox_of(p.receiver));
}
}  // namespace

namespace orrery_smpi::nbc {  // smpi_colls.cpp, with SimGrid 3.32: a non-blocking collective's capture
__attribute__((weak)) void before_request();
__attribute__((weak)) bool recorded_unref(void** request);
__attribute__((weak)) void request_made(void* request, unsigned flags);  // smpi_nbc.cpp: which are collectives'
__attribute__((weak)) void request_freed(void* request);
}

// simgrid::smpi::Request::Request(const void* buf, int count, MPI_Datatype, aid_t src, aid_t dst, int tag,
//                                 MPI_Comm, unsigned flags, MPI_Op)
#define EXPORTED __attribute__((visibility("default")))
EXPORTED void request_made(void* self, const void* buf, int count, void* type, long src, long dst, int tag,
                           void* comm, unsigned flags, void* op) __asm__(REQUEST_CTOR);
void request_made(void* self, const void* buf, int count, void* type, long src, long dst, int tag,
                  void* comm, unsigned flags, void* op) {
  using Ctor = void (*)(void*, const void*, int, void*, long, long, int, void*, unsigned, void*);
  static const Ctor real = next<Ctor>(REQUEST_CTOR);
  if (orrery_smpi::nbc::before_request)  // smpi_colls.cpp, with SimGrid 3.32: a non-blocking collective's capture
    orrery_smpi::nbc::before_request();
  real(self, buf, count, type, src, dst, tag, comm, flags, op);
  if (orrery_smpi::nbc::request_made)
    orrery_smpi::nbc::request_made(self, flags);
  if (flags & (REQ_SEND | REQ_RECV)) {
    const bool send = (flags & REQ_SEND) != 0, rma = (flags & REQ_RMA) != 0;
    g_requests[self] = Posted{dst, send, (flags & REQ_PERSISTENT) != 0, rma, buf, send ? src : dst};
    if (rma && !send)
      g_rma_receive = RmaReceive{buf, src, dst};
  }
}

/* The shim (libcudart.so.13) says where a one-sided message's end stands: at `buf` of the rank
 * whose actor is `pid` (null: where the posting rank stands). */
extern "C" EXPORTED void orrery_smpi_on_rma_end(sg4::Host* (*where)(const void* buf, long pid)) { g_rma_end = where; }

// void simgrid::smpi::Request::start()
EXPORTED void request_start(void* self) __asm__(REQUEST_START);
void request_start(void* self) {
  using Start = void (*)(void*);
  static const Start real = next<Start>(REQUEST_START);
  if (g_rma_end) {
    auto made = g_requests.find(self);
    if (made != g_requests.end() && made->second.rma && made->second.send) {
      Posted& send = made->second;
      const RmaReceive pair = std::exchange(g_rma_receive, RmaReceive{});
      if (pair.buf && pair.dst == send.receiver && pair.src == send.owner) {
        send.far_buf = pair.buf;
        send.far_owner = pair.dst;
      }
      no_permanent_receiver(send.receiver);  // a simcall (others run): after the pairing, before the start
    }
  }
  real(self);
  auto it = g_requests.find(self);
  if (it == g_requests.end())
    return;
  const Posted posted = it->second;  // pin() makes a simcall, during which other ranks change the table
  if (!posted.persistent)
    g_requests.erase(it);
  pin(self, posted);
}

// static void simgrid::smpi::Request::unref(MPI_Request*): forget a request it frees
EXPORTED void request_unref(void** request) __asm__(REQUEST_UNREF);
void request_unref(void** request) {
  using Unref = void (*)(void**);
  static const Unref real = next<Unref>(REQUEST_UNREF);
  if (orrery_smpi::nbc::recorded_unref && orrery_smpi::nbc::recorded_unref(request))
    return;
  void* self = *request;
  real(request);
  if (*request == nullptr) {
    g_requests.erase(self);
    if (orrery_smpi::nbc::request_freed)
      orrery_smpi::nbc::request_freed(self);
  }
}

/* simgrid::smpi::Group::rank(aid_t) const: an actor's rank in a group, or, for an actor that is
 * not in it, its parent's (SMPI lets threads a rank spawns act for it). Orrery's own actors,
 * which ranks create on their GPU's host (streams, NCCL's lanes), never act for their rank:
 * counted as members, they make Comm::find_intra_comm, which lists the group's actors on a
 * host, put them into the node's communicator, and SMPI's SMP-aware algorithms (the two-level
 * ones the mvapich2, impi and mpich selectors take, the k-nomial broadcast before the stand-in
 * below) then wait forever on them. An actor answers for itself only. */
#define GROUP_RANK "_ZNK7simgrid4smpi5Group4rankEl"
EXPORTED int group_rank(const void* self, long pid) __asm__(GROUP_RANK);

/* An actor's parent's pid (0: none), looked up once per actor: every message's match asks
 * Group::rank, and SimGrid finds an actor by pid in a map (2 % of a 1024-rank run). An actor's
 * parent never changes, and SimGrid never gives a pid twice. */
static long parent_of(long pid) {
  static std::vector<long> parents;  // by pid; -1: not looked up yet
  if (pid < 0)
    return 0;
  if ((size_t)pid >= parents.size())
    parents.resize((size_t)pid + 1, -1);
  if (parents[pid] < 0) {
    sg4::ActorPtr actor = sg4::Actor::by_pid(pid);
    if (!actor)
      return 0;  // not (or no longer) an actor: not kept, as before it was not looked up
    parents[pid] = std::max<long>(actor->get_ppid(), 0);
  }
  return parents[pid];
}

int group_rank(const void* self, long pid) {
  using Rank = int (*)(const void*, long);
  static const Rank real = next<Rank>(GROUP_RANK);
  int rank = real(self, pid);
  if (rank == MPI_UNDEFINED)
    return rank;
  // the rank found is its parent's (a rank is one actor: its pid is the parent's only if it is the parent)
  long parent = parent_of(pid);
  if (parent > 0 && real(self, parent) == rank)
    return MPI_UNDEFINED;
  return rank;
}

/* simgrid::smpi::bcast__mvapich2_knomial_intra_node(void*, int, Datatype*, int root, Comm*): the
 * k-nomial broadcast tree (radix mv2_intra_node_knomial_factor, 4 as in Open MPI's
 * coll_tuned_bcast_knomial_radix) that SMPI's ompi selector takes for Open MPI's "knomial" (small
 * broadcasts from 8 ranks on), in SimGrid's kernel where smpi_colls.cpp (built with SimGrid 3.32)
 * takes it, else by SMPI's requests. SimGrid's own first builds the
 * communicator's node layout (Comm::init_smp), which it never uses: a ring allgather over all the
 * ranks, in simulated time and (P^2 messages) wall time, on the first broadcast of each
 * communicator, which no MPI library pays there. The same tree without it: each rank receives from
 * its parent, then sends to its children, the farthest first, one round per level. */
#define COMM_RANK "_ZNK7simgrid4smpi4Comm4rankEv"
#define COMM_SIZE "_ZNK7simgrid4smpi4Comm4sizeEv"
#define REQUEST_ISEND "_ZN7simgrid4smpi7Request5isendEPKviPNS0_8DatatypeEiiPNS0_4CommE"
#define REQUEST_RECV "_ZN7simgrid4smpi7Request4recvEPviPNS0_8DatatypeEiiPNS0_4CommEP10MPI_Status"
#define REQUEST_WAITALL "_ZN7simgrid4smpi7Request7waitallEiPPS1_P10MPI_Status"
constexpr int COLL_TAG_BCAST = -3334;  // SMPI's (src/smpi/include/private.hpp)
int knomial_radix() {
  static const int* const factor = next<int*>("mv2_intra_node_knomial_factor");  // the mvapich2 selector sets it
  return std::max(*factor, 2);
}
#define KNOMIAL_BCAST "_ZN7simgrid4smpi34bcast__mvapich2_knomial_intra_nodeEPviPNS0_8DatatypeEiPNS0_4CommE"
// smpi_colls.cpp's, where it is built: false where it leaves the call to SMPI's requests
bool knomial_bcast_in_kernel(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
    __attribute__((weak, visibility("hidden")));
EXPORTED int knomial_bcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm) __asm__(KNOMIAL_BCAST);
int knomial_bcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  if (knomial_bcast_in_kernel && knomial_bcast_in_kernel(buf, count, type, root, comm))
    return MPI_SUCCESS;
  using Member = int (*)(const void*);
  using Isend = void* (*)(const void*, int, void*, int, int, void*);
  using Recv = void (*)(void*, int, void*, int, int, void*, MPI_Status*);
  using Waitall = int (*)(int, void**, MPI_Status*);
  static const Member rank_of = next<Member>(COMM_RANK), size_of = next<Member>(COMM_SIZE);
  static const Isend isend = next<Isend>(REQUEST_ISEND);
  static const Recv recv = next<Recv>(REQUEST_RECV);
  static const Waitall waitall = next<Waitall>(REQUEST_WAITALL);
  const int radix = knomial_radix();
  const int size = size_of(comm), rank = rank_of(comm), relative = (rank - root + size) % size;
  int mask = 1;
  for (; mask < size; mask *= radix)
    if (relative % (radix * mask)) {
      int parent = (relative / (radix * mask) * (radix * mask) + root) % size;
      recv(buf, count, type, parent, COLL_TAG_BCAST, comm, MPI_STATUS_IGNORE);
      break;
    }
  std::vector<void*> children;
  for (mask /= radix; mask > 0; mask /= radix) {
    children.clear();
    for (int k = 1; k < radix; k++)
      if (relative + mask * k < size)
        children.push_back(isend(buf, count, type, (rank + mask * k) % size, COLL_TAG_BCAST, comm));
    waitall((int)children.size(), children.data(), MPI_STATUSES_IGNORE);
  }
  return MPI_SUCCESS;
}

/* The shim asks for this at start-up: its messages are routed right only with the pins. */
extern "C" EXPORTED int orrery_smpi_pins(void) { return 1; }
