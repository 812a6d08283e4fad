/* liborrery_smpi.so: SimGrid 3.32's detached comms without its O(in flight) removal.
 *
 * SMPI sends a message below smpi/send-is-detached-thresh (its eager messages) as a detached
 * kernel comm. CommImpl::detach appends the comm to one std::list of the maestro's, which holds
 * a reference to it until it ends, and CommImpl::finish takes it out again with
 * std::list::remove: a scan of every detached comm then in flight. In a halo exchange every rank
 * has its sends in flight at once, so a step of P ranks costs O(P^2) in that scan alone: 1 % of a
 * 1024-rank run, 15 % at 4096 ranks and most of a 16 384-rank run (bench/README.md). SimGrid 4
 * keeps that set in a std::set.
 *
 * The stand-ins below keep the same references in a hash table instead:
 *   - CommImpl::detach() calls SimGrid's, then unhooks the list node it appended (the maestro
 *     list's last, holding the comm) and keeps it, the reference in it untouched;
 *   - CommImpl::finish() calls SimGrid's, whose remove() now scans a list without it, then drops
 *     the node and its reference, as remove() would have, once finish is done with the comm.
 * Nothing else changes: the comm stays detached, ends when it did and is freed by the last
 * reference, as before; the simulated times are SimGrid's own (test_paths, test_links and the
 * suite's hand-derived MPI times run through it). The maestro's list is used besides only when a
 * host is turned off (HostImpl::turn_off, which Orrery never does) and at the maestro's exit,
 * when a comm still in flight would be cancelled rather than left, as here, to the exit.
 *
 * The maestro's list (ActorImpl::activities_) is not reachable through an installed header: it is
 * found at the first detach that runs in the maestro (find_maestro_list), as the libstdc++ list
 * header in the maestro's first kilobyte whose last node holds the comm just detached, and the
 * list's end is checked again at every detach. A build where it is not found, or a detach that
 * does not end that list with its comm, is left to SimGrid's own bookkeeping, which is only
 * slower. A detach answering a simcall (SMPI's sends) runs in the maestro; s4u::Comm::sendto's
 * (the shim's copies to and from the host) in the actor that copies: both append to the
 * maestro's list, and both are taken once it is found.
 *
 * The shim's streams hand it their executions too (orrery_maestro_take and _drop, at the end).
 *
 * ORRERY_SMPI_DETACHED=simgrid leaves every comm and execution to SimGrid's list; =report keeps
 * them here and writes at the exit two lines on standard error, one for the comms and one for the
 * executions: how many were taken, the most held at once (the length SimGrid's list would have
 * had) and how many were left in flight. */
#include "mpi/smpi_next.hpp"

#include <simgrid/s4u.hpp>

#include <fcntl.h>
#include <unistd.h>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <new>
#include <unordered_map>

#define EXPORTED __attribute__((visibility("default")))

#define COMM_DETACH "_ZN7simgrid6kernel8activity8CommImpl6detachEv"
#define COMM_FINISH "_ZN7simgrid6kernel8activity8CommImpl6finishEv"
#define ACTIVITY_RELEASE "_ZN7simgrid6kernel8activity21intrusive_ptr_releaseEPNS1_12ActivityImplE"

namespace simgrid::kernel {
namespace activity {
class ActivityImpl;
}
namespace actor {
class ActorImpl;
}
}  // namespace simgrid::kernel
using simgrid::kernel::activity::ActivityImpl;
using simgrid::kernel::actor::ActorImpl;

// simgrid::kernel::actor::ActorImpl::self(): the actor whose context runs (the maestro, in the maestro)
const ActorImpl* actor_self() __asm__("_ZN7simgrid6kernel5actor9ActorImpl4selfEv");
void activity_release(ActivityImpl* activity) __asm__(ACTIVITY_RELEASE);

namespace {

/* libstdc++'s std::list<boost::intrusive_ptr<ActivityImpl>> (the C++11 ABI, with its size): a
 * header {next, prev, size}, nodes {next, prev, value}; an intrusive_ptr is its pointer. */
struct Node {
  Node* next;
  Node* prev;
  ActivityImpl* value;
};
struct Header {
  Node* next;
  Node* prev;
  size_t size;
};

bool read_memory(int fd, const void* at, void* into, size_t bytes) {
  return pread(fd, into, bytes, (off_t)(uintptr_t)at) == (ssize_t)bytes;
}

/* The offset in `actor` of a list header whose last node holds `comm`, or -1. */
long find_list(int fd, const void* actor, const void* comm) {
  for (long off = 0; off + (long)sizeof(Header) <= 1024; off += sizeof(void*)) {
    const char* at = static_cast<const char*>(actor) + off;
    Header h;
    Node last, first;
    if (!read_memory(fd, at, &h, sizeof h) || h.size == 0 || h.size > (size_t)1 << 40 ||
        (const void*)h.prev == at || !read_memory(fd, h.prev, &last, sizeof last) ||
        !read_memory(fd, h.next, &first, sizeof first))
      continue;
    if ((const void*)last.next == at && (const void*)first.prev == at && last.value == comm)
      return off;
  }
  return -1;
}

/* The offset of the maestro's list of detached comms in the maestro, whose last holds `comm` (just
 * appended by detach), when the detach runs in the maestro (answering a simcall): the actor it runs
 * in is the maestro then. -1 if no such list is found; -2 (look again at the next detach) in an
 * actor, whose own list of activities may hold the comm too. Every read goes through
 * /proc/self/mem, and no member of anything is called: an object that merely looked like the
 * maestro's list once was asked whether it was the maestro, and was not an actor at all (an
 * in-place MPI_Reduce_scatter on 3 ranks under Open MPI's selector crashed there). */
long find_maestro_list(const void* comm, const ActorImpl** maestro) {
  if (!simgrid::s4u::Actor::is_maestro())
    return -2;
  const ActorImpl* self = actor_self();
  int fd = self ? open("/proc/self/mem", O_RDONLY | O_CLOEXEC) : -1;
  if (fd < 0)
    return -1;
  const long offset = find_list(fd, self, comm);
  close(fd);
  *maestro = self;
  return offset;
}

using orrery_smpi::Mode;

struct Detached {
  Mode mode = orrery_smpi::mode_from_environment("ORRERY_SMPI_DETACHED");
  const ActorImpl* maestro = nullptr;
  long offset = -2;  // -2: not looked for yet; -1: not found (SimGrid keeps its list)
  // comm or execution -> its node, taken from the maestro's list, and which of the two it is
  struct Held {
    Node* node;
    int kind;
  };
  std::unordered_map<const void*, Held> held;
  static constexpr int kComm = 0, kExec = 1;
  uint64_t taken[2] = {};
  size_t now_held[2] = {}, most_held[2] = {};

  Header* list_of(const ActorImpl* actor) const {
    return reinterpret_cast<Header*>(reinterpret_cast<char*>(const_cast<ActorImpl*>(actor)) + offset);
  }

  void take(const void* comm, int kind) {
    if (offset == -2)  // the first detach in the maestro: find the list (or keep SimGrid's for good)
      offset = mode == Mode::Simgrid ? -1 : find_maestro_list(comm, &maestro);
    if (offset < 0)
      return;
    Header* list = list_of(maestro);
    Node* last = list->prev;
    if ((void*)last == (void*)list || last->value != comm || held.count(comm))
      return;  // not the list's last as found: left to SimGrid
    last->prev->next = reinterpret_cast<Node*>(list);
    list->prev = last->prev;
    list->size--;
    held.emplace(comm, Held{last, kind});
    taken[kind]++;
    most_held[kind] = std::max(most_held[kind], ++now_held[kind]);
  }

  void report() const {
    if (mode != Mode::Report)
      return;
    fprintf(stderr, "orrery: detached comms: %llu taken from SimGrid's list, at most %zu at once, %zu left in flight\n",
            (unsigned long long)taken[kComm], most_held[kComm], now_held[kComm]);
    fprintf(stderr,
            "orrery: streams' executions: %llu taken from SimGrid's list, at most %zu at once, %zu left in flight\n",
            (unsigned long long)taken[kExec], most_held[kExec], now_held[kExec]);
  }

  void drop(const void* comm) {
    auto it = held.find(comm);
    if (it == held.end())
      return;
    Node* node = it->second.node;
    now_held[it->second.kind]--;
    held.erase(it);
    ActivityImpl* activity = node->value;
    ::operator delete(node);  // the node std::list allocated; its intrusive_ptr is released here
    activity_release(activity);
  }
};

Detached& detached() {
  static Detached* d = new Detached;  // never destroyed: comms may end during the exit
  return *d;
}

// The environment is read as the library loads: a wrong value stops smpimain before it starts.
__attribute__((constructor)) void read_environment() { detached(); }
__attribute__((destructor)) void report_at_exit() { detached().report(); }

}  // namespace

// CommImpl& simgrid::kernel::activity::CommImpl::detach()
EXPORTED void* comm_detach(void* self) __asm__(COMM_DETACH);
void* comm_detach(void* self) {
  using Detach = void* (*)(void*);
  static const Detach real = orrery_smpi::next<Detach>(COMM_DETACH);
  void* comm = real(self);
  detached().take(self, Detached::kComm);
  return comm;
}

// void simgrid::kernel::activity::CommImpl::finish() (virtual: libsimgrid's vtable binds this one)
EXPORTED void comm_finish(void* self) __asm__(COMM_FINISH);
void comm_finish(void* self) {
  using Finish = void (*)(void*);
  static const Finish real = orrery_smpi::next<Finish>(COMM_FINISH);
  real(self);
  detached().drop(self);
}

/* The same for the executions that the shim's streams start in the maestro (core/streams.cpp): an
 * s4u::Exec created there joins the maestro's list (ExecImpl's constructor), and ExecImpl::post
 * scans it at the end, one entry per busy stream. The shim hands each one here as it creates it,
 * and back once it completes; unlike a comm, it keeps its own reference to the execution until
 * SimGrid is done with it, so the node's is dropped then. Found by dlsym: without this library the
 * executions stay in SimGrid's list, only slower. */
extern "C" EXPORTED void orrery_maestro_take(const void* activity) { detached().take(activity, Detached::kExec); }
extern "C" EXPORTED void orrery_maestro_drop(const void* activity) { detached().drop(activity); }
