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
 * Each stand-in calls the libsimgrid function it replaces (dlsym RTLD_NEXT).
 * Kernel and SMPI member functions take their object as first argument under
 * the Itanium C++ ABI; linking against their symbols checks at build time
 * that libsimgrid has them. The flags and mailbox names are SimGrid 3.32's;
 * tests/native/test_paths.py fails when a pin is missed. */
#include <simgrid/s4u.hpp>

#include <dlfcn.h>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unordered_map>

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
constexpr unsigned REQ_PERSISTENT = 0x1, REQ_SEND = 0x4, REQ_RECV = 0x8;

struct Posted {
  long receiver;  // actor pid whose mailbox holds the comm while unmatched
  bool send;
  bool persistent;
};
std::unordered_map<const void*, Posted> g_requests;  // made, not yet started (or persistent)

template <typename F>
F next(const char* symbol) {
  void* f = dlsym(RTLD_NEXT, symbol);
  if (!f) {
    fprintf(stderr, "orrery: libsimgrid has no %s: Orrery needs SimGrid 3.32\n", symbol);
    abort();
  }
  return (F)f;
}

sg4::Mailbox* mailbox_of(long pid) {
  static std::unordered_map<long, sg4::Mailbox*> boxes;
  auto it = boxes.find(pid);
  if (it != boxes.end())
    return it->second;
  sg4::Mailbox* box = sg4::Mailbox::by_name("SMPI-" + std::to_string(pid));  // SMPI's ActorExt
  return boxes.emplace(pid, box).first->second;
}

void pin(const void* request, const Posted& p) {
  sg4::Host* here = sg4::this_actor::get_host();
  // kernel MailboxImpl::iprobe: type 1 visits the queued receives, type 0 the queued sends;
  // the match function is shown each one's SMPI request and comm, and matches none
  mailbox_of(p.receiver)->iprobe(p.send ? 0 : 1, [&](void*, void* queued, CommImpl* comm) {
    if (queued == request)
      p.send ? comm_set_source(comm, here) : comm_set_destination(comm, here);
    return false;
  }, nullptr);
}
}  // namespace

// simgrid::smpi::Request::Request(const void* buf, int count, MPI_Datatype, aid_t src, aid_t dst, int tag,
//                                 MPI_Comm, unsigned flags, MPI_Op)
#define EXPORTED __attribute__((visibility("default")))
EXPORTED void request_made(void* self, const void* buf, int count, void* type, long src, long dst, int tag,
                           void* comm, unsigned flags, void* op) __asm__(REQUEST_CTOR);
void request_made(void* self, const void* buf, int count, void* type, long src, long dst, int tag,
                  void* comm, unsigned flags, void* op) {
  using Ctor = void (*)(void*, const void*, int, void*, long, long, int, void*, unsigned, void*);
  static const Ctor real = next<Ctor>(REQUEST_CTOR);
  real(self, buf, count, type, src, dst, tag, comm, flags, op);
  if (flags & (REQ_SEND | REQ_RECV))
    g_requests[self] = Posted{dst, (flags & REQ_SEND) != 0, (flags & REQ_PERSISTENT) != 0};
}

// void simgrid::smpi::Request::start()
EXPORTED void request_start(void* self) __asm__(REQUEST_START);
void request_start(void* self) {
  using Start = void (*)(void*);
  static const Start real = next<Start>(REQUEST_START);
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
  void* self = *request;
  real(request);
  if (*request == nullptr)
    g_requests.erase(self);
}

/* The shim asks for this at start-up: its messages are routed right only with the pins. */
extern "C" EXPORTED int orrery_smpi_pins(void) { return 1; }
