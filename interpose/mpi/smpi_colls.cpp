/* liborrery_smpi.so: SMPI's small-message collective algorithms, run in the simulation's kernel.
 *
 * SMPI runs a collective as its algorithm's point-to-point messages, each posted and waited for
 * by the rank's actor: every step of every rank is a wake-up of its actor and three simcalls (the
 * send, the receive, the wait), each a switch to the maestro and back. A 4-byte MPI_Allreduce is
 * mostly that: half of a 128-GPU run of the Jacobi example, whose only collective it is, and
 * more per call than bare SMPI pays for the same messages (bench/README.md).
 *
 * The stand-ins below take eleven of SMPI's algorithms, the ones its selectors pick for the small
 * reductions, broadcasts, barriers and allgathers of most programs, and run their messages in the
 * kernel instead: each rank enters
 * once (a simcall), its algorithm's sends, receives and waits go on there without its actor, and
 * the rank wakes when its part is done. The messages are SMPI's, one by one:
 *   - the same sequence of posts and waits per rank as the algorithm's code, from which each
 *     program below is transcribed (SimGrid 3.32, src/smpi/colls);
 *   - each message from where its sender stands to where its receiver stands (the hosts that
 *     smpi_pins.cpp pins SMPI's messages to), of its payload plus SMPI's 16-byte envelope
 *     (Request::start), started when both its send and its receive are posted, as SimGrid
 *     matches them; a send below smpi/send-is-detached-thresh leaves its sender at once
 *     (detached), a larger one holds it until it arrives;
 *   - the same data: each algorithm's reductions in its own order, with SMPI's own Op::apply, in
 *     the actor of the rank that needs the result.
 * So the simulated times and the results are SMPI's (tests/native/test_colls.py compares both,
 * bit for bit, with SMPI's own algorithms on generated cases); only the wall time changes.
 *
 * Taken: allreduce__rdb (recursive doubling), reduce__ompi_binomial with one segment,
 * reduce__default (SMPI's linear ireduce), bcast__NTSB without pipelining (one segment of 8 KiB
 * or less), the k-nomial broadcast (smpi_pins.cpp's tree), bcast__binomial_tree, Open MPI's
 * barriers by recursive doubling, Bruck's, linear and tree, and allgather__rdb on a power of two
 * of ranks. Left to SMPI's requests: any other
 * algorithm, more than 64 KiB per rank, a derived datatype in a reduction, a reduction whose
 * operation does not commute where the algorithm needs one that does (binomial, default) or
 * MPI_OP_NULL, a communicator
 * without an id (below), and every collective where SMPI would charge its per-message overheads
 * (smpi/os, smpi/or, smpi/ois not 0) or sends through its small-message mailbox
 * (smpi/async-small-thresh not 0), neither of which `orrery run` sets.
 *
 * A non-blocking collective (smpi_nbc.cpp) runs on the same programs: the rank makes the blocking
 * call on scratch buffers with the stand-ins below recording their programs instead of running
 * them, and SMPI's own code's point-to-point calls recorded as one (a capture), and the programs
 * then run in the kernel one after the other while the rank goes on (nbc::start, nbc::wait).
 *
 * ORRERY_SMPI_COLLS=simgrid leaves every collective to SMPI's requests; =report writes at the
 * exit one line on standard error: how many calls (per rank) of each of the eleven algorithms ran in
 * the kernel, and how many went to SMPI's requests.
 *
 * At its end, whatever ORRERY_SMPI_COLLS says, it mends SMPI algorithms that its selectors take
 * where they cannot run and abort the run: Open MPI's reduce on one rank, the pairwise alltoall on
 * a number of ranks that is not a power of two, and two of Intel MPI's choices; and it hands SMPI's
 * allgather, allgatherv and alltoall algorithms a send buffer in the receive side's layout where
 * the program's two sides use different types. */
#include "mpi/smpi_layout.hpp"
#include "mpi/smpi_nbc.hpp"
#include "mpi/smpi_next.hpp"

#include "core/comm_then.hpp"

#include <simgrid/s4u.hpp>
#include <simgrid/simix.hpp>
#include <smpi/smpi.h>
#include <xbt/config.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#define EXPORTED __attribute__((visibility("default")))

namespace sg4 = simgrid::s4u;
using orrery_smpi::DatatypeCopy;
using orrery_smpi::extent_of;
using orrery_smpi::Laid;
using orrery_smpi::laid_out;
using orrery_smpi::Mode;
using orrery_smpi::next;
using orrery_smpi::OpApply;
using orrery_smpi::packed;
using orrery_smpi::unpack;

// simgrid::kernel::actor::ActorImpl::simcall_answer(): wakes an actor blocked in simcall_blocking
void simcall_answer(void* actor) __asm__("_ZN7simgrid6kernel5actor9ActorImpl14simcall_answerEv");
// simgrid::smpi::Comm::id() const
int smpi_comm_id(const void* comm) __asm__("_ZNK7simgrid4smpi4Comm2idEv");

// The k-nomial broadcast's radix (smpi_pins.cpp, which holds the broadcast)
int knomial_radix();

namespace {

/* ---------------- what is taken ---------------- */

enum Algorithm {
  RDB,
  BINOMIAL,
  LINEAR,
  NTSB,
  KNOMIAL,
  BINOMIAL_TREE,
  BARRIER_RDB,
  BARRIER_BRUCK,
  BARRIER_LINEAR,
  BARRIER_TREE,
  ALLGATHER_RDB,
  ALGORITHMS
};
const char* const kNames[ALGORITHMS] = {"allreduce rdb",       "reduce binomial", "reduce default", "bcast NTSB",
                                        "bcast knomial",       "bcast binomial",  "barrier rdb",    "barrier bruck",
                                        "barrier linear", "barrier tree",    "allgather rdb"};

struct Settings {
  Mode mode = Mode::Orrery;
  bool taken = false;  // SMPI's per-message overheads and small mailbox are off
  long detached_below = 0;
  unsigned long long in_kernel[ALGORITHMS] = {}, by_requests[ALGORITHMS] = {};
  unsigned long long nonblocking[ALGORITHMS] = {};  // stages of non-blocking collectives run in the kernel
  unsigned long long recorded = 0;                  // and stages of SMPI's code recorded (smpi_nbc.cpp)
  unsigned long long waitanys = 0;                  // waitany calls recorded
};

// A piecewise setting of SMPI's overheads ("size:factor:..." segments) that charges nothing
bool all_zero(const std::string& value) {
  for (size_t i = 0; i < value.size();) {
    size_t j = value.find_first_of(":;", i);
    std::string number = value.substr(i, j == std::string::npos ? std::string::npos : j - i);
    if (!number.empty() && strtod(number.c_str(), nullptr) != 0)
      return false;
    if (j == std::string::npos)
      break;
    i = j + 1;
  }
  return true;
}

Settings* g_settings = nullptr;  // once a collective asked: the report at the exit reads no configuration

Settings& settings() {
  static Settings s = [] {
    Settings x;
    x.mode = orrery_smpi::mode_from_environment("ORRERY_SMPI_COLLS");
    namespace cfg = simgrid::config;
    x.taken = x.mode != Mode::Simgrid && all_zero(cfg::get_value<std::string>("smpi/os")) &&
              all_zero(cfg::get_value<std::string>("smpi/or")) && all_zero(cfg::get_value<std::string>("smpi/ois")) &&
              cfg::get_value<int>("smpi/async-small-thresh") == 0;
    x.detached_below = cfg::get_value<int>("smpi/send-is-detached-thresh");
    return x;
  }();
  g_settings = &s;
  return s;
}

__attribute__((destructor)) void report_at_exit() {
  if (orrery_smpi::mode_from_environment("ORRERY_SMPI_COLLS") != Mode::Report)
    return;
  const Settings none;  // no collective asked: nothing counted
  const Settings& s = g_settings ? *g_settings : none;
  std::string line = "orrery: collectives:";
  for (int a = 0; a < ALGORITHMS; a++)
    line += std::string(a ? "; " : " ") + kNames[a] + " " + std::to_string(s.in_kernel[a]) + " in the kernel, " +
            std::to_string(s.by_requests[a]) + " by SMPI's requests";
  line += "\n";
  fputs(line.c_str(), stderr);
}

/* A predefined datatype (not derived): what SMPI's reductions take their fast paths for, and
 * contiguous, of `size` bytes. */
bool predefined(MPI_Datatype type, int* size) {
  int integers, addresses, types, combiner;
  PMPI_Type_size(type, size);
  PMPI_Type_get_envelope(type, &integers, &addresses, &types, &combiner);
  return combiner == MPI_COMBINER_NAMED;
}

/* The kernel keeps a copy of every rank's data for the data's sake (the inputs below), where SMPI
 * copies each message's as it arrives, and nothing from folded device memory (cudart/memory.cpp):
 * a collective of more than 64 KiB per rank, whose messages are long beside their start-up
 * anyway, stays with SMPI's requests. */
constexpr double kSmallBytes = 64 * 1024;
bool small(int count, MPI_Datatype type) {
  int size;
  PMPI_Type_size(type, &size);
  return (double)size * count <= kSmallBytes;
}

/* ---------------- the programs: each rank's posts and waits ---------------- */

struct Op {
  enum Kind { Send, Recv, Wait } kind;
  int peer = -1;             // Send, Recv: the other rank (in the communicator)
  std::vector<int> handles;  // Wait: the sends and receives (their indices in the program) it waits for
  double bytes = -1;         // Send: its payload, where not the collective's (-1)
  int tag = 0;               // Send, Recv: what they match on besides their ranks (a recorded program's)
  int need = 0;              // Wait: how many of its handles (0: all; a recorded waitany's k-th call: k)
};
using Program = std::vector<Op>;

struct Builder {
  Program p;
  int send(int peer, double bytes = -1) {
    p.push_back({Op::Send, peer, {}, bytes});
    return (int)p.size() - 1;
  }
  int recv(int peer) {
    p.push_back({Op::Recv, peer, {}});
    return (int)p.size() - 1;
  }
  void wait(std::vector<int> handles) { p.push_back({Op::Wait, -1, std::move(handles)}); }
  void blocking_send(int peer) { wait({send(peer)}); }  // Request::send
  void blocking_recv(int peer) { wait({recv(peer)}); }  // Request::recv
  void sendrecv(int peer) {                               // Request::sendrecv: isend, irecv, waitall
    int s = send(peer);
    wait({s, recv(peer)});
  }
};

int below_power_of_two(int n) {  // the largest power of two <= n
  int pof2 = 1;
  while (pof2 <= n)
    pof2 <<= 1;
  return pof2 >> 1;
}

// allreduce__rdb: its self-sendrecvs are copies (Request::sendrecv to itself), no messages
Program rdb_program(int rank, int n) {
  Builder b;
  const int pof2 = below_power_of_two(n), rem = n - pof2;
  int newrank = rank - rem;
  if (rank < 2 * rem) {
    if (rank % 2 == 0) {
      b.blocking_send(rank + 1);
      newrank = -1;
    } else {
      b.blocking_recv(rank - 1);
      newrank = rank / 2;
    }
  }
  if (newrank != -1)
    for (int mask = 1; mask < pof2; mask <<= 1) {
      int newdst = newrank ^ mask;
      b.sendrecv(newdst < rem ? newdst * 2 + 1 : newdst + rem);
    }
  if (rank < 2 * rem) {
    if (rank % 2)
      b.blocking_send(rank - 1);
    else
      b.blocking_recv(rank + 1);
  }
  return b.p;
}

/* Open MPI's in-order binomial tree (ompi_coll_tuned_topo_build_in_order_bmtree): a rank's parent
 * (-1 at the root) and children, nearest first. */
struct Tree {
  int parent = -1;
  std::vector<int> children;
};
Tree in_order_bmtree(int rank, int n, int root) {
  Tree t;
  const int vrank = (rank - root + n) % n;
  for (int mask = 1; mask < n; mask <<= 1) {
    int remote = vrank ^ mask;
    if (remote < vrank) {
      t.parent = (remote + root) % n;
      break;
    }
    if (remote < n)
      t.children.push_back((remote + root) % n);
  }
  return t;
}

/* smpi_coll_tuned_ompi_reduce_generic with one segment: a receive from each child posted as the
 * one before the last arrives (two in flight), the parent sent to once the last arrived. */
Program binomial_reduce_program(int rank, int n, int root) {
  Builder b;
  Tree t = in_order_bmtree(rank, n, root);
  const int k = (int)t.children.size();
  if (k == 0) {
    b.blocking_send(t.parent);
    return b.p;
  }
  std::vector<int> received(k);
  for (int i = 0; i < k; i++) {
    received[i] = b.recv(t.children[i]);
    if (i > 0)
      b.wait({received[i - 1]});
  }
  b.wait({received[k - 1]});
  if (rank != root)
    b.blocking_send(t.parent);
  return b.p;
}

// bcast__NTSB of one segment: rank 0 is the heap tree's root (another root first sends it the data)
Program ntsb_program(int rank, int n, int root) {
  Builder b;
  if (root != 0) {
    if (rank == root)
      b.blocking_send(0);
    else if (rank == 0)
      b.blocking_recv(root);
  }
  const int left = rank * 2 + 1 < n ? rank * 2 + 1 : -1, right = rank * 2 + 2 < n ? rank * 2 + 2 : -1;
  if (rank != 0)
    b.blocking_recv((rank - 1) / 2);
  if (left >= 0)
    b.blocking_send(left);
  if (right >= 0)
    b.blocking_send(right);
  return b.p;
}

// reduce__default (colls::ireduce): the root posts a receive from every other rank, lowest first
Program linear_reduce_program(int rank, int n, int root) {
  Builder b;
  if (rank != root) {
    b.wait({b.send(root)});
    return b.p;
  }
  std::vector<int> received;
  for (int src = 0; src < n; src++)
    if (src != root)
      received.push_back(b.recv(src));
  b.wait(received);
  return b.p;
}

// bcast__binomial_tree: from the parent, then to each child, farthest first
Program binomial_bcast_program(int rank, int n, int root) {
  Builder b;
  const int relative = rank >= root ? rank - root : rank - root + n;
  int mask = 1;
  for (; mask < n; mask <<= 1)
    if (relative & mask) {
      b.blocking_recv((rank - mask + n) % n);
      break;
    }
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (relative + mask < n)
      b.blocking_send((rank + mask) % n);
  return b.p;
}

/* allgather__rdb on a power of two of ranks: at step j each rank swaps with its partner at distance
 * 2^j all it has, 2^j blocks (SMPI sends curr_count of the send type: `block` bytes each). */
Program allgather_rdb_program(int rank, int n, double block) {
  Builder b;
  for (int mask = 1; mask < n; mask <<= 1) {
    int s = b.send(rank ^ mask, mask * block);
    b.wait({s, b.recv(rank ^ mask)});
  }
  return b.p;
}

/* The barriers of Open MPI's (barrier__ompi_*; SMPI's default takes the linear one, MPICH's the
 * Bruck one): messages of no data. */
Program barrier_rdb_program(int rank, int n) {  // recursive doubling
  Builder b;
  int adjsize = 1;
  while (adjsize <= n)
    adjsize <<= 1;
  adjsize >>= 1;
  if (adjsize != n) {
    if (rank >= adjsize)
      b.sendrecv(rank - adjsize);
    else if (rank < n - adjsize)
      b.blocking_recv(rank + adjsize);
  }
  if (rank < adjsize)
    for (int mask = 1; mask < adjsize; mask <<= 1)
      if (int remote = rank ^ mask; remote < adjsize)
        b.sendrecv(remote);
  if (adjsize != n && rank < n - adjsize)
    b.blocking_send(rank + adjsize);
  return b.p;
}

Program barrier_bruck_program(int rank, int n) {
  Builder b;
  for (int distance = 1; distance < n; distance <<= 1) {  // Request::sendrecv to one, from another
    int s = b.send((rank + distance) % n);
    b.wait({s, b.recv((rank + n - distance) % n)});
  }
  return b.p;
}

Program barrier_linear_program(int rank, int n) {
  Builder b;
  if (rank > 0) {
    b.blocking_send(0);
    b.blocking_recv(0);
    return b.p;
  }
  std::vector<int> ops;
  for (int i = 1; i < n; i++)
    ops.push_back(b.recv(i));
  b.wait(ops);
  ops.clear();
  for (int i = 1; i < n; i++)
    ops.push_back(b.send(i));
  b.wait(ops);
  return b.p;
}

Program barrier_tree_program(int rank, int n) {
  Builder b;
  int depth = 1;
  while (depth < n)
    depth <<= 1;
  for (int jump = 1; jump < depth; jump <<= 1) {
    int partner = rank ^ jump;
    if (!(partner & (jump - 1)) && partner < n) {
      if (partner > rank)
        b.blocking_recv(partner);
      else if (partner < rank)
        b.blocking_send(partner);
    }
  }
  for (int jump = depth >> 1; jump > 0; jump >>= 1) {
    int partner = rank ^ jump;
    if (!(partner & (jump - 1)) && partner < n) {
      if (partner > rank)
        b.blocking_send(partner);
      else if (partner < rank)
        b.blocking_recv(partner);
    }
  }
  return b.p;
}

// the k-nomial tree of smpi_pins.cpp's broadcast: the parent, then each level's children at once
Program knomial_program(int rank, int n, int root, int radix) {
  Builder b;
  const int relative = (rank - root + n) % n;
  int mask = 1;
  for (; mask < n; mask *= radix)
    if (relative % (radix * mask)) {
      b.blocking_recv((relative / (radix * mask) * (radix * mask) + root) % n);
      break;
    }
  for (mask /= radix; mask > 0; mask /= radix) {
    std::vector<int> children;
    for (int k = 1; k < radix; k++)
      if (relative + mask * k < n)
        children.push_back(b.send((rank + mask * k) % n));
    b.wait(children);
  }
  return b.p;
}

/* ---------------- running them in the kernel ---------------- */

using orrery::kernel_comms::comm_then;  // core/comm_then.hpp

/* One call of a collective on a communicator: every rank's program, where each stands, what it
 * has posted and what has arrived. A send and a receive between two ranks match in the order they
 * were posted, as in SimGrid's mailbox; the message starts when the second of the two is posted. */
struct Instance {
  std::pair<int, uint64_t> key;  // (communicator's id, the call's number on it): g_instances's
  int size = 0, left = 0;
  double bytes = 0;  // each message's payload
  std::vector<Program> programs;
  std::vector<sg4::Host*> hosts;
  std::vector<size_t> next;                    // per rank: its next operation
  std::vector<std::vector<char>> done;         // per rank, per operation: a send or receive complete
  std::vector<void*> waiting;                  // per rank: its actor (ActorImpl), blocked until its part is done
  std::vector<std::function<void(Instance&)>> then;  // per rank, where no actor waits: what follows its part (nbc)
  std::vector<void*> owner;                    // per rank, where no actor waits: the actor whose call it is (nbc)
  std::vector<char> held;                      // per rank: held until its actor's next MPI call (mpi.progress)
  std::map<std::tuple<int, int, int>, std::deque<int>> sends, recvs;  // (from, to, tag): posted, unmatched
  // the data: each rank's input as it entered, the result once one rank worked it out
  std::vector<std::vector<unsigned char>> inputs;
  std::vector<unsigned char> result;
  bool has_result = false;
};

void advance(Instance& in, int rank);

/* ---- progress (the machine's mpi.progress) ----
 * asynchronous (the default): a non-blocking collective's part goes on in the kernel whatever its
 * rank does. in_calls: as Open MPI's libnbc or MPICH without MPICH_ASYNC_PROGRESS, only while its
 * rank is inside an MPI call: what the call posts is posted, and once the rank has left the call, a
 * part whose wait is over holds before it posts its next message (or ends) until the rank enters
 * its next MPI call (the shim tells where: orrery_smpi_progress_point, past the rank's host time),
 * or for as long as the rank waits in one. A blocking call's part is never held: its rank is in it. */
bool g_in_calls = false;
std::set<const void*> g_progressing;  // the actors inside an MPI call (in_calls)
std::map<const void*, std::vector<std::pair<std::pair<int, uint64_t>, int>>> g_held;  // by actor: (call, rank)

// Whether rank `rank`'s part of `in` holds here (and is noted to go on at its actor's next MPI call)
bool holds(Instance& in, int rank) {
  if (!g_in_calls || in.waiting[rank] || !in.owner[rank] || g_progressing.count(in.owner[rank]))
    return false;
  if (!in.held[rank]) {
    in.held[rank] = 1;
    g_held[in.owner[rank]].push_back({in.key, rank});
  }
  return true;
}

void complete(Instance& in, int rank, int op) {
  in.done[rank][op] = 1;
  advance(in, rank);
}

// A send's payload, and whether its sender leaves at once (SMPI's detached send) or once it arrives
double payload(const Instance& in, const Op& send) { return send.bytes >= 0 ? send.bytes : in.bytes; }
bool detached(const Instance& in, const Op& send) { return payload(in, send) < (double)settings().detached_below; }

void transfer(Instance& in, int from, int send_op, int to, int recv_op) {
  const Op& send = in.programs[from][send_op];
  auto comm = sg4::Comm::sendto_async(in.hosts[from], in.hosts[to], (uint64_t)(payload(in, send) + 16));
  comm_then(comm, [&in, from, send_op, to, recv_op, held = !detached(in, send)] {
    if (held)
      complete(in, from, send_op);
    complete(in, to, recv_op);
  });
}

// Takes a rank's program as far as it goes now: up to a wait for what has not arrived, or its end.
void advance(Instance& in, int rank) {
  const Program& prog = in.programs[rank];
  size_t& pc = in.next[rank];
  if (in.held[rank])
    return;  // until its actor's next MPI call
  for (; pc < prog.size(); pc++) {
    const Op& op = prog[pc];
    const int i = (int)pc;
    if (op.kind != Op::Wait && holds(in, rank))
      return;
    if (op.kind == Op::Send) {
      if (detached(in, op))
        in.done[rank][i] = 1;
      std::deque<int>& waiting = in.recvs[{rank, op.peer, op.tag}];
      if (waiting.empty()) {
        in.sends[{rank, op.peer, op.tag}].push_back(i);
      } else {
        int r = waiting.front();
        waiting.pop_front();
        transfer(in, rank, i, op.peer, r);
      }
    } else if (op.kind == Op::Recv) {
      std::deque<int>& waiting = in.sends[{op.peer, rank, op.tag}];
      if (waiting.empty()) {
        in.recvs[{op.peer, rank, op.tag}].push_back(i);
      } else {
        int s = waiting.front();
        waiting.pop_front();
        transfer(in, op.peer, s, rank, i);
      }
    } else if (op.need == 0) {
      for (int h : op.handles)
        if (!in.done[rank][h])
          return;
    } else {  // a waitany's k-th return: once k of its requests are done
      int done = 0;
      for (int h : op.handles)
        done += in.done[rank][h];
      if (done < op.need)
        return;
    }
  }
  if (void* actor = in.waiting[rank]) {
    in.waiting[rank] = nullptr;
    simcall_answer(actor);  // the rank's blocking simcall (run) returns
  } else if (in.then[rank] && !holds(in, rank)) {  // an nbc stage: the last use of `in` (it may free it)
    std::function<void(Instance&)> then = std::move(in.then[rank]);
    in.then[rank] = nullptr;
    then(in);
  }
}

/* A communicator is the same for all its ranks by its id: SMPI gives each rank an object of its
 * own for a communicator it splits, and the same id to all of them (Comm::Comm broadcasts rank
 * 0's; MPI_COMM_WORLD's is -1). SMPI's node and leader communicators have none (MPI_UNDEFINED),
 * nor has one under construction (that broadcast itself): their collectives are left to SMPI's
 * requests, as are an intercommunicator's (two groups). A call is known by its communicator and
 * how many the rank made on it before. */
bool identified(MPI_Comm comm) {
  int inter = 0;
  PMPI_Comm_test_inter(comm, &inter);
  return !inter && smpi_comm_id(comm) != MPI_UNDEFINED;
}

using Key = std::pair<int, uint64_t>;  // (communicator's id, the call's number on it): Instance::key
std::map<Key, std::unique_ptr<Instance>> g_instances;
std::map<std::pair<int, int>, uint64_t> g_calls;  // (communicator's id, rank): its collectives so far

void forget_waiter(const void* gone);  // below: a non-blocking collective's

/* A rank killed in a collective (MPI_Abort ends every rank) is not woken: the messages still in
 * flight end after its actor is gone. */
void forget(const sg4::Actor& actor) {
  const void* gone = actor.get_impl();
  for (auto& [key, in] : g_instances)
    for (void*& w : in->waiting)
      if (w == gone)
        w = nullptr;
  forget_waiter(gone);
  g_progressing.erase(gone);
  g_held.erase(gone);  // (its parts stay held: their messages never leave, as the rank's own would not)
}

void watch_terminations() {
  static bool watching = false;
  if (!watching) {
    sg4::Actor::on_termination_cb(forget);
    watching = true;
  }
}

/* In the kernel: rank `rank` (of `n`) posts its part of call `key`, standing at `here`, and goes
 * as far as it can; once its part is done, `waiting` (an actor) is answered, or `then` runs (the
 * part of `owner`'s non-blocking call). The call's instance, which a `then` may have freed by the
 * return. */
Instance* post(const Key& key, int n, int rank, double bytes, sg4::Host* here, Program program,
               std::vector<unsigned char> input, void* waiting, std::function<void(Instance&)> then,
               void* owner = nullptr) {
  std::unique_ptr<Instance>& slot = g_instances[key];
  if (!slot) {
    slot = std::make_unique<Instance>();
    Instance& x = *slot;
    x.key = key;
    x.size = n;
    x.bytes = bytes;
    x.programs.resize(n);
    x.hosts.resize(n);
    x.next.assign(n, 0);
    x.done.resize(n);
    x.waiting.assign(n, nullptr);
    x.then.resize(n);
    x.owner.assign(n, nullptr);
    x.held.assign(n, 0);
    x.inputs.resize(n);
  }
  Instance& in = *slot;
  in.programs[rank] = std::move(program);
  in.done[rank].assign(in.programs[rank].size(), 0);
  in.hosts[rank] = here;
  in.inputs[rank] = std::move(input);
  in.waiting[rank] = waiting;
  in.then[rank] = std::move(then);
  in.owner[rank] = owner;
  advance(in, rank);
  return &in;
}

/* Runs the calling rank's part of a collective in the kernel and returns, in its actor, once that
 * part is done: its instance, whose inputs hold each rank's `input`. */
Instance& run(MPI_Comm comm, double bytes, std::vector<unsigned char> input,
              const std::function<Program(int rank, int n)>& program) {
  watch_terminations();
  int n, rank;
  PMPI_Comm_size(comm, &n);
  PMPI_Comm_rank(comm, &rank);
  const int id = smpi_comm_id(comm);
  const Key key{id, g_calls[{id, rank}]++};
  sg4::Host* here = sg4::this_actor::get_host();
  void* self = sg4::Actor::self()->get_impl();
  Instance* in = nullptr;
  // one simcall: the rank posts its part and blocks until advance answers it, at once if nothing is to arrive
  simgrid::kernel::actor::simcall_blocking(
      [&] { in = post(key, n, rank, bytes, here, program(rank, n), std::move(input), self, nullptr); });
  return *in;  // its rank has not left it
}

// The rank's last use of its instance: the last rank out frees it
void leave(Instance& in) {
  if (++in.left == in.size)
    g_instances.erase(in.key);
}

}  // namespace

/* mpi.progress, from the shim (interpose/core/ranks.cpp): the mode as the first rank starts, then
 * where each of the calling rank's MPI calls enters, past its host time (a progress point, from
 * which on it is inside), and where its outermost call returns. */
extern "C" __attribute__((visibility("default"))) void orrery_smpi_progress(int in_calls) { g_in_calls = in_calls; }

extern "C" __attribute__((visibility("default"))) void orrery_smpi_progress_point() {
  const void* self = sg4::Actor::self()->get_impl();
  g_progressing.insert(self);
  auto it = g_held.find(self);
  if (it == g_held.end())
    return;
  simgrid::kernel::actor::simcall_answered([self] {
    auto held = g_held.find(self);
    if (held == g_held.end())
      return;
    std::vector<std::pair<Key, int>> parts = std::move(held->second);
    g_held.erase(held);
    for (auto& [key, rank] : parts)
      if (auto in = g_instances.find(key); in != g_instances.end()) {
        in->second->held[rank] = 0;
        advance(*in->second, rank);  // (may free it)
      }
  });
}

extern "C" __attribute__((visibility("default"))) void orrery_smpi_progress_end() {
  g_progressing.erase(sg4::Actor::self()->get_impl());
}

namespace {

/* ---------------- the non-blocking collectives (smpi_nbc.cpp) ---------------- */

// SMPI's own code's stage: its messages, recorded as its program
constexpr Algorithm RECORDED = ALGORITHMS;

/* A request SMPI's code holds while it is recorded (its stand-in below): its message, and the
 * operation of the program that posted it last (-1: made by an _init call, not started). */
struct Token {
  bool send;
  int peer, tag;
  double bytes;
  bool persistent;
  int op = -1;
};

}  // namespace

/* A rank's part of a non-blocking collective: the stages (the in-kernel algorithms, in the order
 * the blocking call's code runs them: one, or a reduce then a broadcast) that the selector's
 * blocking call would run, captured in place of running them, then run one after the other in the
 * kernel while the rank's actor goes on; finished once its part of the last stage is done. */
struct orrery_smpi::nbc::Schedule {
  struct Stage {
    int id, rank, n;  // the communicator's id, the rank in it, its size
    double bytes;
    Program program;
    Algorithm algorithm;
  };
  void* actor = nullptr;  // capturing, or posting
  MPI_Comm comm = MPI_COMM_NULL;  // the call's: what a recorded message's ranks are of
  int id = 0, rank = 0, n = 0;
  std::vector<Stage> stages;  // between two in-kernel algorithms' stages, SMPI's code recorded (RECORDED)
  std::deque<Token> tokens;  // the requests SMPI's code holds while it is recorded
  // a recorded waitany's array: the operations of its requests at its first call, and the calls so far
  std::map<const MPI_Request*, std::pair<std::vector<int>, int>> waitany_groups;
  std::vector<Key> keys;  // each stage's call on its communicator, drawn as the rank posts
  sg4::Host* host = nullptr;
  size_t current = 0;
  bool finished = false;
  void* waiter = nullptr;  // the actor blocked until it is finished
};

namespace {
using orrery_smpi::nbc::Schedule;

std::vector<Schedule*> g_capturing;                 // the schedules being captured, one per actor at most
std::set<std::shared_ptr<Schedule>> g_schedules;    // posted, not finished

// The calling actor's capture, if it is capturing (an actor's, not the kernel's)
Schedule* capturing() {
  if (g_capturing.empty())
    return nullptr;
  const sg4::Actor* self = sg4::Actor::self();
  if (!self)
    return nullptr;
  for (Schedule* s : g_capturing)
    if (s->actor == self->get_impl())
      return s;
  return nullptr;
}

// What ends a capture where SMPI's code does what cannot be recorded: the call is not the kernel's to run
struct NotInKernel {};

/* SMPI's algorithms that size a message by what an earlier one brought (Status::get_count of a
 * receive: allgather__rdb off a power of two, the scatter-allgather broadcasts) cannot be recorded,
 * whose receives complete nothing: under a capture, the call is SMPI's to run. */
void decline_recording() {
  if (capturing())
    throw NotInKernel();
}

/* In an in-kernel algorithm's stand-in, before it runs: under a capture, records the algorithm's
 * program for the calling rank as the schedule's next stage and returns true (the stand-in then
 * returns at once, without data: smpi_nbc.cpp forms the results). */
bool captured(Algorithm a, MPI_Comm comm, double bytes, const std::function<Program(int rank, int n)>& program) {
  Schedule* s = capturing();
  if (!s)
    return false;
  for (const Token& t : s->tokens)
    if (t.op >= 0)  // SMPI's code around it has a message pending, whose wait would be the next stage's
      throw NotInKernel();
  int n, rank;
  PMPI_Comm_size(comm, &n);
  PMPI_Comm_rank(comm, &rank);
  s->stages.push_back({smpi_comm_id(comm), rank, n, bytes, program(rank, n), a});
  s->stages.push_back({s->id, s->rank, s->n, 0, {}, RECORDED});  // what SMPI's code runs after it
  return true;
}


/* In the kernel: the schedule's current stage is posted, or, past the last, it is finished and
 * its waiter answered. */
void post_stage(const std::shared_ptr<Schedule>& s) {
  if (s->current == s->stages.size()) {
    s->finished = true;
    g_schedules.erase(s);
    if (void* w = s->waiter) {
      s->waiter = nullptr;
      simcall_answer(w);
    }
    return;
  }
  Schedule::Stage& st = s->stages[s->current];
  post(s->keys[s->current], st.n, st.rank, st.bytes, s->host, std::move(st.program), {}, nullptr,
       [s](Instance& in) {
         leave(in);  // may free it
         s->current++;
         post_stage(s);
       },
       s->actor);
}

void forget_waiter(const void* gone) {
  for (const std::shared_ptr<Schedule>& s : g_schedules)
    if (s->waiter == gone)
      s->waiter = nullptr;
}

}  // namespace

namespace orrery_smpi::nbc {

std::shared_ptr<Schedule> capture(MPI_Comm comm, const std::function<void()>& blocking_call) {
  if (!settings().taken)
    return nullptr;
  auto s = std::make_shared<Schedule>();
  s->actor = sg4::Actor::self()->get_impl();
  s->comm = comm;
  s->id = smpi_comm_id(comm);
  PMPI_Comm_rank(comm, &s->rank);
  PMPI_Comm_size(comm, &s->n);
  s->stages.push_back({s->id, s->rank, s->n, 0, {}, RECORDED});
  Settings& counts = settings();
  unsigned long long by_requests[ALGORITHMS];  // a stand-in declining under the capture counted a call not made
  std::copy(std::begin(counts.by_requests), std::end(counts.by_requests), by_requests);
  g_capturing.push_back(s.get());
  bool in_kernel = true;
  try {
    blocking_call();
  } catch (const NotInKernel&) {
    in_kernel = false;
  }
  g_capturing.erase(std::find(g_capturing.begin(), g_capturing.end(), s.get()));
  std::copy(std::begin(by_requests), std::end(by_requests), counts.by_requests);
  s->tokens.clear();
  s->waitany_groups.clear();
  return in_kernel ? s : nullptr;
}

void start(const std::shared_ptr<Schedule>& s) {
  watch_terminations();
  for (const Schedule::Stage& st : s->stages) {
    s->keys.push_back({st.id, g_calls[{st.id, st.rank}]++});
    if (st.algorithm != RECORDED)
      settings().nonblocking[st.algorithm]++;
    else if (!st.program.empty())
      settings().recorded++;
  }
  s->host = sg4::this_actor::get_host();
  simgrid::kernel::actor::simcall_answered([s] {
    g_schedules.insert(s);
    post_stage(s);
  });
}

bool finished(const Schedule& s) { return s.finished; }

std::string stages_report() {
  const Settings& s = settings();
  std::string line;
  for (int a = 0; a < ALGORITHMS; a++)
    line += std::string(a ? ", " : "") + kNames[a] + " " + std::to_string(s.nonblocking[a]);
  return line + ", SMPI's code recorded " + std::to_string(s.recorded) + ", waitany calls recorded " +
         std::to_string(s.waitanys);
}

void wait(const std::shared_ptr<Schedule>& s) {
  if (s->finished)
    return;
  void* self = sg4::Actor::self()->get_impl();
  simgrid::kernel::actor::simcall_blocking([s, self] {
    if (s->finished)
      simcall_answer(self);
    else
      s->waiter = self;
  });
}

}  // namespace orrery_smpi::nbc

/* Under a capture, SMPI's own code (an algorithm the kernel does not run, or one of its stand-ins
 * declining) reaches its first message where it constructs its request (smpi_pins.cpp's stand-in for
 * the constructor asks here first), before anything is posted: the capture ends (NotInKernel) and
 * the non-blocking call goes to SMPI's requests. */
void orrery_smpi::nbc::before_request() {
  if (capturing())
    throw NotInKernel();
}

/* ---- SMPI's own algorithms, recorded under a capture ----
 * Where the blocking call runs SMPI's own code (an algorithm not transcribed above, or a stand-in
 * above declining: a segmented reduce, Rabenseifner's allreduce, a ring allgather, ...), its
 * point-to-point calls (Request::send, recv, sendrecv, isend, irecv, their _init forms with
 * startall, wait, waitall, waitany) are recorded into the current stage's program instead of posted: each
 * message to its rank in the call's communicator, of its bytes and its tag, each wait for what it
 * names. Their requests are tokens of the capture's. SMPI's algorithms post and wait in a fixed
 * order whatever arrives, so the program is the one its code runs, and the kernel runs it as it
 * runs the transcribed ones (tests/native/test_nbc.py compares both with the blocking call, bit
 * for bit). What cannot be recorded so ends the capture (NotInKernel): a message on another
 * communicator (SMPI's node and leader communicators), from any source, a probe. */
namespace {

Schedule* recording(MPI_Comm comm) {
  Schedule* s = capturing();
  if (s && comm != s->comm)
    throw NotInKernel();
  return s;
}

double bytes_of(int count, MPI_Datatype type) {
  int size = 0;
  PMPI_Type_size(type, &size);
  return (double)count * size;
}

Program& recorded(Schedule& s) { return s.stages.back().program; }  // a RECORDED stage (captured opens the next)

// a message posted: its operation's index
int record_post(Schedule& s, bool send, int peer, int tag, double bytes) {
  if (!send && (peer == MPI_ANY_SOURCE || tag == MPI_ANY_TAG))
    throw NotInKernel();
  Program& p = recorded(s);
  p.push_back({send ? Op::Send : Op::Recv, peer, {}, send ? bytes : -1, tag});
  return (int)p.size() - 1;
}

MPI_Request token(Schedule& s, bool send, int peer, int tag, double bytes, bool persistent) {
  s.tokens.push_back({send, peer, tag, bytes, persistent});
  Token& t = s.tokens.back();
  if (!persistent && peer != MPI_PROC_NULL)
    t.op = record_post(s, send, peer, tag, bytes);
  return reinterpret_cast<MPI_Request>(&t);
}

Token& token_of(MPI_Request r) { return *reinterpret_cast<Token*>(r); }

void record_wait(Schedule& s, std::vector<int> handles) {
  if (!handles.empty())
    recorded(s).push_back({Op::Wait, -1, std::move(handles)});
}

void empty_status(MPI_Status* status) {
  if (status && status != MPI_STATUS_IGNORE) {
    status->MPI_SOURCE = MPI_ANY_SOURCE;
    status->MPI_TAG = MPI_ANY_TAG;
    status->MPI_ERROR = MPI_SUCCESS;
  }
}

}  // namespace

#define REQUEST_SEND "_ZN7simgrid4smpi7Request4sendEPKviPNS0_8DatatypeEiiPNS0_4CommE"
#define REQUEST_RECV "_ZN7simgrid4smpi7Request4recvEPviPNS0_8DatatypeEiiPNS0_4CommEP10MPI_Status"
#define REQUEST_SENDRECV \
  "_ZN7simgrid4smpi7Request8sendrecvEPKviPNS0_8DatatypeEiiPviS5_iiPNS0_4CommEP10MPI_Status"
#define REQUEST_ISEND "_ZN7simgrid4smpi7Request5isendEPKviPNS0_8DatatypeEiiPNS0_4CommE"
#define REQUEST_IRECV "_ZN7simgrid4smpi7Request5irecvEPviPNS0_8DatatypeEiiPNS0_4CommE"
#define REQUEST_ISEND_INIT "_ZN7simgrid4smpi7Request10isend_initEPKviPNS0_8DatatypeEiiPNS0_4CommE"
#define REQUEST_IRECV_INIT "_ZN7simgrid4smpi7Request10irecv_initEPviPNS0_8DatatypeEiiPNS0_4CommE"
#define REQUEST_STARTALL "_ZN7simgrid4smpi7Request8startallEiPPS1_"
#define REQUEST_WAIT "_ZN7simgrid4smpi7Request4waitEPPS1_P10MPI_Status"
#define REQUEST_WAITALL "_ZN7simgrid4smpi7Request7waitallEiPPS1_P10MPI_Status"
#define REQUEST_WAITANY "_ZN7simgrid4smpi7Request7waitanyEiPPS1_P10MPI_Status"
#define REQUEST_IPROBE "_ZN7simgrid4smpi7Request6iprobeEiiPNS0_4CommEPiP10MPI_Status"

EXPORTED void request_send(const void* buf, int count, MPI_Datatype type, int dst, int tag, MPI_Comm comm) __asm__(REQUEST_SEND);
void request_send(const void* buf, int count, MPI_Datatype type, int dst, int tag, MPI_Comm comm) {
  using Real = void (*)(const void*, int, MPI_Datatype, int, int, MPI_Comm);
  static const Real real = next<Real>(REQUEST_SEND);
  if (Schedule* s = recording(comm)) {
    if (dst != MPI_PROC_NULL)
      record_wait(*s, {record_post(*s, true, dst, tag, bytes_of(count, type))});
    return;
  }
  real(buf, count, type, dst, tag, comm);
}

EXPORTED int request_recv(void* buf, int count, MPI_Datatype type, int src, int tag, MPI_Comm comm, MPI_Status* status) __asm__(REQUEST_RECV);
int request_recv(void* buf, int count, MPI_Datatype type, int src, int tag, MPI_Comm comm, MPI_Status* status) {
  using Real = int (*)(void*, int, MPI_Datatype, int, int, MPI_Comm, MPI_Status*);
  static const Real real = next<Real>(REQUEST_RECV);
  if (Schedule* s = recording(comm)) {
    empty_status(status);
    if (src != MPI_PROC_NULL)
      record_wait(*s, {record_post(*s, false, src, tag, 0)});
    return MPI_SUCCESS;
  }
  return real(buf, count, type, src, tag, comm, status);
}

// Request::sendrecv: a copy where both ends are the rank itself, else isend_init, irecv_init, startall, waitall
EXPORTED void request_sendrecv(const void* sbuf, int scount, MPI_Datatype stype, int dst, int stag, void* rbuf,
                               int rcount, MPI_Datatype rtype, int src, int rtag, MPI_Comm comm,
                               MPI_Status* status) __asm__(REQUEST_SENDRECV);
void request_sendrecv(const void* sbuf, int scount, MPI_Datatype stype, int dst, int stag, void* rbuf, int rcount,
                      MPI_Datatype rtype, int src, int rtag, MPI_Comm comm, MPI_Status* status) {
  using Real = void (*)(const void*, int, MPI_Datatype, int, int, void*, int, MPI_Datatype, int, int, MPI_Comm,
                        MPI_Status*);
  static const Real real = next<Real>(REQUEST_SENDRECV);
  if (Schedule* s = recording(comm)) {
    empty_status(status);
    if (dst == s->rank && src == s->rank)
      return;  // SMPI copies: no message
    std::vector<int> handles;
    if (dst != MPI_PROC_NULL)
      handles.push_back(record_post(*s, true, dst, stag, bytes_of(scount, stype)));
    if (src != MPI_PROC_NULL)
      handles.push_back(record_post(*s, false, src, rtag, 0));
    record_wait(*s, std::move(handles));
    return;
  }
  real(sbuf, scount, stype, dst, stag, rbuf, rcount, rtype, src, rtag, comm, status);
}

EXPORTED MPI_Request request_isend(const void* buf, int count, MPI_Datatype type, int dst, int tag, MPI_Comm comm) __asm__(REQUEST_ISEND);
MPI_Request request_isend(const void* buf, int count, MPI_Datatype type, int dst, int tag, MPI_Comm comm) {
  using Real = MPI_Request (*)(const void*, int, MPI_Datatype, int, int, MPI_Comm);
  static const Real real = next<Real>(REQUEST_ISEND);
  if (Schedule* s = recording(comm))
    return token(*s, true, dst, tag, bytes_of(count, type), false);
  return real(buf, count, type, dst, tag, comm);
}

EXPORTED MPI_Request request_irecv(void* buf, int count, MPI_Datatype type, int src, int tag, MPI_Comm comm) __asm__(REQUEST_IRECV);
MPI_Request request_irecv(void* buf, int count, MPI_Datatype type, int src, int tag, MPI_Comm comm) {
  using Real = MPI_Request (*)(void*, int, MPI_Datatype, int, int, MPI_Comm);
  static const Real real = next<Real>(REQUEST_IRECV);
  if (Schedule* s = recording(comm))
    return token(*s, false, src, tag, 0, false);
  return real(buf, count, type, src, tag, comm);
}

EXPORTED MPI_Request request_isend_init(const void* buf, int count, MPI_Datatype type, int dst, int tag, MPI_Comm comm) __asm__(REQUEST_ISEND_INIT);
MPI_Request request_isend_init(const void* buf, int count, MPI_Datatype type, int dst, int tag, MPI_Comm comm) {
  using Real = MPI_Request (*)(const void*, int, MPI_Datatype, int, int, MPI_Comm);
  static const Real real = next<Real>(REQUEST_ISEND_INIT);
  if (Schedule* s = recording(comm))
    return token(*s, true, dst, tag, bytes_of(count, type), true);
  return real(buf, count, type, dst, tag, comm);
}

EXPORTED MPI_Request request_irecv_init(void* buf, int count, MPI_Datatype type, int src, int tag, MPI_Comm comm) __asm__(REQUEST_IRECV_INIT);
MPI_Request request_irecv_init(void* buf, int count, MPI_Datatype type, int src, int tag, MPI_Comm comm) {
  using Real = MPI_Request (*)(void*, int, MPI_Datatype, int, int, MPI_Comm);
  static const Real real = next<Real>(REQUEST_IRECV_INIT);
  if (Schedule* s = recording(comm))
    return token(*s, false, src, tag, 0, true);
  return real(buf, count, type, src, tag, comm);
}

EXPORTED void request_startall(int count, MPI_Request* requests) __asm__(REQUEST_STARTALL);
void request_startall(int count, MPI_Request* requests) {
  using Real = void (*)(int, MPI_Request*);
  static const Real real = next<Real>(REQUEST_STARTALL);
  if (Schedule* s = capturing()) {
    for (int i = 0; i < count; i++)
      if (requests[i] != MPI_REQUEST_NULL) {
        Token& t = token_of(requests[i]);
        if (t.peer != MPI_PROC_NULL)
          t.op = record_post(*s, t.send, t.peer, t.tag, t.bytes);
      }
    return;
  }
  real(count, requests);
}

// A wait for recorded requests: on the operations they posted; a request not persistent is then freed
namespace {
int wait_recorded(Schedule& s, int count, MPI_Request* requests, MPI_Status* statuses) {
  std::vector<int> handles;
  for (int i = 0; i < count; i++) {
    empty_status(statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &statuses[i]);
    if (requests[i] == MPI_REQUEST_NULL)
      continue;
    Token& t = token_of(requests[i]);
    if (t.op >= 0)
      handles.push_back(t.op);
    t.op = -1;
    if (!t.persistent)
      requests[i] = MPI_REQUEST_NULL;
  }
  record_wait(s, std::move(handles));
  return MPI_SUCCESS;
}
}  // namespace

EXPORTED int request_wait(MPI_Request* request, MPI_Status* status) __asm__(REQUEST_WAIT);
int request_wait(MPI_Request* request, MPI_Status* status) {
  using Real = int (*)(MPI_Request*, MPI_Status*);
  static const Real real = next<Real>(REQUEST_WAIT);
  if (Schedule* s = capturing()) {
    wait_recorded(*s, 1, request, MPI_STATUSES_IGNORE);
    empty_status(status);
    return MPI_SUCCESS;
  }
  return real(request, status);
}

EXPORTED int request_waitall(int count, MPI_Request* requests, MPI_Status* statuses) __asm__(REQUEST_WAITALL);
int request_waitall(int count, MPI_Request* requests, MPI_Status* statuses) {
  using Real = int (*)(int, MPI_Request*, MPI_Status*);
  static const Real real = next<Real>(REQUEST_WAITALL);
  if (Schedule* s = capturing())
    return wait_recorded(*s, count, requests, statuses);
  return real(count, requests, statuses);
}

/* A recorded waitany (MVAPICH2's k-nomial reduce combines each child's data as it arrives): SMPI's
 * code calls it on one array of requests until each has returned, posting nothing in between that
 * depends on which; its k-th call returns once k of the array's requests are done, whichever they
 * are (an operation waiting for k of them). Here it returns the first still held, which the
 * recording needs no more of. */
EXPORTED int request_waitany(int count, MPI_Request* requests, MPI_Status* status) __asm__(REQUEST_WAITANY);
int request_waitany(int count, MPI_Request* requests, MPI_Status* status) {
  using Real = int (*)(int, MPI_Request*, MPI_Status*);
  static const Real real = next<Real>(REQUEST_WAITANY);
  Schedule* s = capturing();
  if (!s)
    return real(count, requests, status);
  empty_status(status);
  auto& [handles, calls] = s->waitany_groups[requests];
  std::vector<int> held;  // the operations of the requests still held, and where the first is
  int first = MPI_UNDEFINED;
  for (int i = 0; i < count; i++)
    if (requests[i] != MPI_REQUEST_NULL) {
      const Token& t = token_of(requests[i]);
      if (t.persistent || t.op < 0)
        throw NotInKernel();  // not a request a waitany of this kind holds
      held.push_back(t.op);
      if (first == MPI_UNDEFINED)
        first = i;
    }
  if (first == MPI_UNDEFINED)
    return MPI_UNDEFINED;
  if (calls == (int)handles.size()) {  // a new round on the array
    handles = held;
    calls = 0;
  }
  for (int op : held)
    if (std::find(handles.begin(), handles.end(), op) == handles.end())
      throw NotInKernel();  // a request posted into the array midway
  calls++;
  recorded(*s).push_back({Op::Wait, -1, handles, -1, 0, calls});
  settings().waitanys++;
  token_of(requests[first]).op = -1;
  requests[first] = MPI_REQUEST_NULL;
  return first;
}

EXPORTED void request_iprobe(int source, int tag, MPI_Comm comm, int* flag, MPI_Status* status) __asm__(REQUEST_IPROBE);
void request_iprobe(int source, int tag, MPI_Comm comm, int* flag, MPI_Status* status) {
  using Real = void (*)(int, int, MPI_Comm, int*, MPI_Status*);
  static const Real real = next<Real>(REQUEST_IPROBE);
  if (capturing())
    throw NotInKernel();
  real(source, tag, comm, flag, status);
}

bool orrery_smpi::nbc::recorded_unref(void** request) {
  if (!capturing())
    return false;
  reinterpret_cast<Token*>(*request)->op = -1;  // not waited for: its message runs on
  *request = nullptr;  // a token of the capture's (SMPI's own requests are not made under it)
  return true;
}

// simgrid::smpi::bcast__scatter_LR_allgather and bcast__scatter_rdb_allgather(void*, int, Datatype*, int root, Comm*)
#define BCAST_SCATTER_LR "_ZN7simgrid4smpi27bcast__scatter_LR_allgatherEPviPNS0_8DatatypeEiPNS0_4CommE"
#define BCAST_SCATTER_RDB "_ZN7simgrid4smpi28bcast__scatter_rdb_allgatherEPviPNS0_8DatatypeEiPNS0_4CommE"
namespace {
template <const char* Symbol>
int sized_by_arrivals(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  using Real = int (*)(void*, int, MPI_Datatype, int, MPI_Comm);
  static const Real real = next<Real>(Symbol);
  decline_recording();
  return real(buf, count, type, root, comm);
}
constexpr char kBcastScatterLr[] = BCAST_SCATTER_LR;
constexpr char kBcastScatterRdb[] = BCAST_SCATTER_RDB;
}  // namespace
EXPORTED int bcast_scatter_lr(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm) __asm__(BCAST_SCATTER_LR);
EXPORTED int bcast_scatter_rdb(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm) __asm__(BCAST_SCATTER_RDB);
int bcast_scatter_lr(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  return sized_by_arrivals<kBcastScatterLr>(buf, count, type, root, comm);
}
int bcast_scatter_rdb(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  return sized_by_arrivals<kBcastScatterRdb>(buf, count, type, root, comm);
}

/* A communicator's node and leader communicators (Comm::init_smp), made at the first collective
 * of some algorithms (MVAPICH2's, Intel MPI's) by collectives of their own: run as SMPI runs them,
 * even under a capture (every rank makes them in the same call, blocking or not). */
#define COMM_INIT_SMP "_ZN7simgrid4smpi4Comm8init_smpEv"
EXPORTED void comm_init_smp(void* self) __asm__(COMM_INIT_SMP);
void comm_init_smp(void* self) {
  using Real = void (*)(void*);
  static const Real real = next<Real>(COMM_INIT_SMP);
  Schedule* s = capturing();
  if (s)
    g_capturing.erase(std::find(g_capturing.begin(), g_capturing.end(), s));
  real(self);
  if (s)
    g_capturing.push_back(s);
}

namespace {

// A broadcast in the kernel: the root's data as it entered, in every other rank's buffer at its end
int bcast_in_kernel(Algorithm a, void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm,
                    const std::function<Program(int rank, int n)>& program) {
  int rank, size;
  PMPI_Comm_rank(comm, &rank);
  PMPI_Type_size(type, &size);
  const size_t bytes = (size_t)size * count;
  if (captured(a, comm, (double)bytes, program))
    return MPI_SUCCESS;
  settings().in_kernel[a]++;
  Instance& in =
      run(comm, (double)bytes, rank == root ? packed(buf, count, type) : std::vector<unsigned char>(), program);
  if (rank != root)
    unpack(in.inputs[root], buf, count, type);
  leave(in);
  return MPI_SUCCESS;
}


}  // namespace

/* ---------------- the stand-ins ---------------- */

// simgrid::smpi::allreduce__rdb(const void*, void*, int, Datatype*, Op*, Comm*)
#define ALLREDUCE_RDB "_ZN7simgrid4smpi14allreduce__rdbEPKvPviPNS0_8DatatypeEPNS0_2OpEPNS0_4CommE"
EXPORTED int allreduce_rdb(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) __asm__(ALLREDUCE_RDB);
int allreduce_rdb(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  using Real = int (*)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm);
  static const Real real = next<Real>(ALLREDUCE_RDB);
  static const OpApply apply = next<OpApply>(OP_APPLY);
  Settings& s = settings();
  int size;
  if (!s.taken || op == MPI_OP_NULL || !identified(comm) || !predefined(type, &size) || !small(count, type)) {
    s.by_requests[RDB]++;
    return real(sbuf, rbuf, count, type, op, comm);
  }
  const size_t bytes = (size_t)size * count;
  if (captured(RDB, comm, (double)bytes, rdb_program))
    return MPI_SUCCESS;
  s.in_kernel[RDB]++;
  Instance& in = run(comm, (double)bytes, packed(sbuf, count, type), rdb_program);
  if (!in.has_result) {
    /* Every input is in (each rank's result needs them all): the butterfly's value. Each pair of
     * partners combines lower-ranked data into higher (apply's in, then inout) and both keep it;
     * before, the odd ranks below 2 rem combine their even neighbour's into theirs. */
    const int n = in.size, pof2 = below_power_of_two(n), rem = n - pof2;
    std::vector<std::vector<unsigned char>> v(pof2);
    for (int nr = 0; nr < pof2; nr++) {
      v[nr] = in.inputs[nr < rem ? 2 * nr + 1 : nr + rem];
      if (nr < rem)
        apply(op, in.inputs[2 * nr].data(), v[nr].data(), &count, type);
    }
    for (int mask = 1; mask < pof2; mask <<= 1)
      for (int lower = 0; lower < pof2; lower++)
        if (!(lower & mask)) {
          apply(op, v[lower].data(), v[lower | mask].data(), &count, type);
          v[lower] = v[lower | mask];
        }
    in.result = std::move(v[0]);
    in.has_result = true;
  }
  if (bytes)
    memcpy(rbuf, in.result.data(), bytes);
  leave(in);
  return MPI_SUCCESS;
}

// simgrid::smpi::reduce__ompi_binomial(const void*, void*, int, Datatype*, Op*, int root, Comm*)
#define REDUCE_BINOMIAL "_ZN7simgrid4smpi21reduce__ompi_binomialEPKvPviPNS0_8DatatypeEPNS0_2OpEiPNS0_4CommE"
EXPORTED int reduce_binomial(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm) __asm__(REDUCE_BINOMIAL);
int reduce_binomial(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm) {
  using Real = int (*)(const void*, void*, int, MPI_Datatype, MPI_Op, int, MPI_Comm);
  static const Real real = next<Real>(REDUCE_BINOMIAL);
  static const OpApply apply = next<OpApply>(OP_APPLY);
  Settings& s = settings();
  int size, commutative = 0, n, rank;
  PMPI_Comm_size(comm, &n);
  PMPI_Comm_rank(comm, &rank);
  if (op != MPI_OP_NULL)
    PMPI_Op_commutative(op, &commutative);
  const bool predefined_type = predefined(type, &size);
  // reduce__ompi_binomial's segment: none (one segment) below these sizes, else 1 KiB
  const size_t message = (size_t)size * count;
  const bool one_segment =
      (n < 8 && message < 20480) || message < 2048 || count <= 1 || !(n > 0.6016 / 1024.0 * message + 1.3496);
  if (!s.taken || !commutative || !predefined_type || !one_segment || !small(count, type) || !identified(comm)) {
    s.by_requests[BINOMIAL]++;
    return real(sbuf, rbuf, count, type, op, root, comm);
  }
  if (captured(BINOMIAL, comm, (double)message, [root](int r, int nr) { return binomial_reduce_program(r, nr, root); }))
    return MPI_SUCCESS;
  s.in_kernel[BINOMIAL]++;
  const bool in_place_root = sbuf == MPI_IN_PLACE && rank == root;
  const void* own = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
  Instance& in = run(comm, (double)message, packed(own, count, type),
                     [root](int r, int nr) { return binomial_reduce_program(r, nr, root); });
  if (rank == root) {
    /* A rank's value, as the generic reduction forms it: the first child's data, with the rank's
     * own combined in as the second child arrives (or the first, if it has only one), then each
     * further child's in turn. The root that reduces in place combines each child's into its own. */
    std::function<std::vector<unsigned char>(int)> value = [&](int r) {
      Tree t = in_order_bmtree(r, in.size, root);
      if (t.children.empty())
        return in.inputs[r];
      const bool into_own = in_place_root && r == root;
      std::vector<unsigned char> acc = into_own ? in.inputs[r] : value(t.children[0]);
      if (into_own)
        apply(op, value(t.children[0]).data(), acc.data(), &count, type);
      else
        apply(op, in.inputs[r].data(), acc.data(), &count, type);
      for (size_t i = 1; i < t.children.size(); i++)
        apply(op, value(t.children[i]).data(), acc.data(), &count, type);
      return acc;
    };
    std::vector<unsigned char> result = value(root);
    if (message)
      memcpy(rbuf, result.data(), message);
  }
  leave(in);
  return MPI_SUCCESS;
}

// simgrid::smpi::bcast__NTSB(void*, int, Datatype*, int root, Comm*)
#define BCAST_NTSB "_ZN7simgrid4smpi11bcast__NTSBEPviPNS0_8DatatypeEiPNS0_4CommE"
EXPORTED int bcast_ntsb(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm) __asm__(BCAST_NTSB);
int bcast_ntsb(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  using Real = int (*)(void*, int, MPI_Datatype, int, MPI_Comm);
  static const Real real = next<Real>(BCAST_NTSB);
  Settings& s = settings();
  int size;
  PMPI_Type_size(type, &size);
  const MPI_Aint extent = extent_of(type);
  const long segment = extent > 0 ? std::max(8192L / (long)extent, 1L) : 1;  // bcast_NTSB_segment_size_in_byte / extent
  if (!s.taken || count > segment || !small(count, type) || !identified(comm)) {
    s.by_requests[NTSB]++;
    return real(buf, count, type, root, comm);
  }
  return bcast_in_kernel(NTSB, buf, count, type, root, comm, [root](int r, int n) { return ntsb_program(r, n, root); });
}

/* The k-nomial broadcast SMPI's ompi selector takes (Open MPI's "knomial"): smpi_pins.cpp's stand-in
 * for bcast__mvapich2_knomial_intra_node asks here first, and runs it by SMPI's requests where this
 * leaves it (false). */
bool knomial_bcast_in_kernel(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  Settings& s = settings();
  if (!s.taken || !small(count, type) || !identified(comm)) {
    s.by_requests[KNOMIAL]++;
    return false;
  }
  const int radix = knomial_radix();
  bcast_in_kernel(KNOMIAL, buf, count, type, root, comm,
                  [root, radix](int r, int n) { return knomial_program(r, n, root, radix); });
  return true;
}

// simgrid::smpi::reduce__default(const void*, void*, int, Datatype*, Op*, int root, Comm*)
#define REDUCE_DEFAULT "_ZN7simgrid4smpi15reduce__defaultEPKvPviPNS0_8DatatypeEPNS0_2OpEiPNS0_4CommE"
EXPORTED int reduce_default(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm) __asm__(REDUCE_DEFAULT);
int reduce_default(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm) {
  using Real = int (*)(const void*, void*, int, MPI_Datatype, MPI_Op, int, MPI_Comm);
  static const Real real = next<Real>(REDUCE_DEFAULT);
  static const OpApply apply = next<OpApply>(OP_APPLY);
  Settings& s = settings();
  int size, commutative = 0, rank;
  if (op != MPI_OP_NULL)
    PMPI_Op_commutative(op, &commutative);
  // SMPI takes Open MPI's basic linear reduction for a derived datatype or an operation that does not commute
  if (!s.taken || !commutative || !predefined(type, &size) || !small(count, type) || !identified(comm)) {
    s.by_requests[LINEAR]++;
    return real(sbuf, rbuf, count, type, op, root, comm);
  }
  const size_t bytes = (size_t)size * count;
  if (captured(LINEAR, comm, (double)bytes, [root](int r, int n) { return linear_reduce_program(r, n, root); }))
    return MPI_SUCCESS;
  s.in_kernel[LINEAR]++;
  PMPI_Comm_rank(comm, &rank);
  const void* own = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
  Instance& in = run(comm, (double)bytes, packed(own, count, type),
                     [root](int r, int n) { return linear_reduce_program(r, n, root); });
  if (rank == root) {
    /* the root's own data, then every other rank's combined into it in rank order, as
     * Request::finish_nbc_requests does once all have arrived */
    std::vector<unsigned char> acc = in.inputs[root];
    for (int src = 0; src < in.size; src++)
      if (src != root)
        apply(op, in.inputs[src].data(), acc.data(), &count, type);
    if (bytes)
      memcpy(rbuf, acc.data(), bytes);
  }
  leave(in);
  return MPI_SUCCESS;
}

// simgrid::smpi::bcast__binomial_tree(void*, int, Datatype*, int root, Comm*)
#define BCAST_BINOMIAL_TREE "_ZN7simgrid4smpi20bcast__binomial_treeEPviPNS0_8DatatypeEiPNS0_4CommE"
EXPORTED int bcast_binomial_tree(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm) __asm__(BCAST_BINOMIAL_TREE);
int bcast_binomial_tree(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  using Real = int (*)(void*, int, MPI_Datatype, int, MPI_Comm);
  static const Real real = next<Real>(BCAST_BINOMIAL_TREE);
  Settings& s = settings();
  if (!s.taken || !small(count, type) || !identified(comm)) {
    s.by_requests[BINOMIAL_TREE]++;
    return real(buf, count, type, root, comm);
  }
  return bcast_in_kernel(BINOMIAL_TREE, buf, count, type, root, comm,
                         [root](int r, int n) { return binomial_bcast_program(r, n, root); });
}

/* The barriers: simgrid::smpi::barrier__ompi_*(Comm*) */
namespace {
template <Algorithm A>
int barrier(MPI_Comm comm, const char* symbol, Program (*program)(int, int)) {
  using Real = int (*)(MPI_Comm);
  static const Real real = next<Real>(symbol);
  Settings& s = settings();
  if (!s.taken || !identified(comm)) {
    s.by_requests[A]++;
    return real(comm);
  }
  if (captured(A, comm, 0, program))
    return MPI_SUCCESS;
  s.in_kernel[A]++;
  leave(run(comm, 0, {}, program));
  return MPI_SUCCESS;
}
}  // namespace

#define BARRIER_RDB_SYMBOL "_ZN7simgrid4smpi31barrier__ompi_recursivedoublingEPNS0_4CommE"
#define BARRIER_BRUCK_SYMBOL "_ZN7simgrid4smpi19barrier__ompi_bruckEPNS0_4CommE"
#define BARRIER_LINEAR_SYMBOL "_ZN7simgrid4smpi26barrier__ompi_basic_linearEPNS0_4CommE"
#define BARRIER_TREE_SYMBOL "_ZN7simgrid4smpi18barrier__ompi_treeEPNS0_4CommE"
EXPORTED int barrier_rdb(MPI_Comm comm) __asm__(BARRIER_RDB_SYMBOL);
EXPORTED int barrier_bruck(MPI_Comm comm) __asm__(BARRIER_BRUCK_SYMBOL);
EXPORTED int barrier_linear(MPI_Comm comm) __asm__(BARRIER_LINEAR_SYMBOL);
EXPORTED int barrier_tree(MPI_Comm comm) __asm__(BARRIER_TREE_SYMBOL);
int barrier_rdb(MPI_Comm comm) { return barrier<BARRIER_RDB>(comm, BARRIER_RDB_SYMBOL, barrier_rdb_program); }
int barrier_bruck(MPI_Comm comm) { return barrier<BARRIER_BRUCK>(comm, BARRIER_BRUCK_SYMBOL, barrier_bruck_program); }
int barrier_linear(MPI_Comm comm) { return barrier<BARRIER_LINEAR>(comm, BARRIER_LINEAR_SYMBOL, barrier_linear_program); }
int barrier_tree(MPI_Comm comm) { return barrier<BARRIER_TREE>(comm, BARRIER_TREE_SYMBOL, barrier_tree_program); }

/* simgrid::smpi::allgather__rdb(const void*, int, Datatype*, void*, int, Datatype*, Comm*): Open MPI's
 * and MPICH's small allgather. Taken on a power of two of ranks with the same count and datatype on
 * both sides (MPI_IN_PLACE is made so by PMPI_Allgather); its other cases (the remainder's tree)
 * go to SMPI's requests. Every rank ends with every rank's block in its place. */
#define ALLGATHER_RDB_SYMBOL "_ZN7simgrid4smpi14allgather__rdbEPKviPNS0_8DatatypeEPviS4_PNS0_4CommE"
EXPORTED int allgather_rdb(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount, MPI_Datatype rtype,
                           MPI_Comm comm) __asm__(ALLGATHER_RDB_SYMBOL);
int allgather_rdb(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount, MPI_Datatype rtype,
                  MPI_Comm comm) {
  using Real = int (*)(const void*, int, MPI_Datatype, void*, int, MPI_Datatype, MPI_Comm);
  static const Real real = next<Real>(ALLGATHER_RDB_SYMBOL);
  Settings& s = settings();
  int n;
  PMPI_Comm_size(comm, &n);
  if (!s.taken || (n & (n - 1)) || scount != rcount || stype != rtype || !small(rcount, rtype) || !identified(comm)) {
    decline_recording();  // SMPI's code sizes its messages by what arrived (below)
    s.by_requests[ALLGATHER_RDB]++;
    return real(sbuf, scount, stype, rbuf, rcount, rtype, comm);
  }
  int size;
  PMPI_Type_size(rtype, &size);
  const MPI_Aint extent = extent_of(rtype);
  const size_t bytes = (size_t)size * rcount;
  if (captured(ALLGATHER_RDB, comm, (double)bytes,
               [bytes](int r, int nr) { return allgather_rdb_program(r, nr, (double)bytes); }))
    return MPI_SUCCESS;
  s.in_kernel[ALLGATHER_RDB]++;
  Instance& in = run(comm, (double)bytes, packed(sbuf, scount, stype),
                     [bytes](int r, int nr) { return allgather_rdb_program(r, nr, (double)bytes); });
  for (int r = 0; r < in.size; r++)
    unpack(in.inputs[r], static_cast<char*>(rbuf) + (ptrdiff_t)r * rcount * extent, rcount, rtype);
  leave(in);
  return MPI_SUCCESS;
}

/* Open MPI's reduce on one rank. SMPI 3.32's reduce__ompi takes its tree algorithms (binary,
 * pipeline, chain) even on a communicator of one rank, whose tree gives the root a parent of -1:
 * the run aborted ("Actor pid=-1 is gone"; MPI_Reduce on MPI_COMM_SELF, or on a split of one
 * rank). Open MPI itself hands such a communicator to its coll/self component, which copies the
 * send buffer into the receive buffer (nothing in place), without a message: so does this, whatever
 * ORRERY_SMPI_COLLS says (it is no faster way, the only one that works). Larger communicators go to
 * SimGrid's selector. */
#define REDUCE_OMPI "_ZN7simgrid4smpi12reduce__ompiEPKvPviPNS0_8DatatypeEPNS0_2OpEiPNS0_4CommE"
EXPORTED int reduce_ompi(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm) __asm__(REDUCE_OMPI);
int reduce_ompi(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm) {
  using Real = int (*)(const void*, void*, int, MPI_Datatype, MPI_Op, int, MPI_Comm);
  static const Real real = next<Real>(REDUCE_OMPI);
  static const DatatypeCopy copy = next<DatatypeCopy>(DATATYPE_COPY);
  int n;
  PMPI_Comm_size(comm, &n);
  if (n != 1)
    return real(sbuf, rbuf, count, type, op, root, comm);
  if (sbuf != MPI_IN_PLACE && count > 0)
    copy(sbuf, count, type, rbuf, count, type);
  return MPI_SUCCESS;
}

/* ---------------- the pairwise exchange on any number of ranks ---------------- */

/* SMPI 3.32's alltoall__pair and alltoallv__pair pair the ranks by exclusive-or (step i: rank ^ i),
 * which only a power of two of ranks allows; on any other count they throw, and the run aborted
 * ("alltoall pair algorithm can't be used with non power of two number of processes!"). Its
 * selectors take them there all the same: Open MPI's for MPI_Alltoallv on 3 ranks, on 64 to 127 and
 * on 256 to 1023 ranks at any size, and for MPI_Alltoall on 3 to 7 ranks from 512 KiB a block, on
 * 65 to 255 from 256 KiB, on 257 to 511 from 32 KiB, on 513 to 1023 from 256 KiB; MPICH's for
 * MPI_Alltoall on an odd count of ranks from 32 KiB a block; MVAPICH2's and Intel MPI's where their
 * tables say pairwise. Open MPI's own pairwise exchange takes any count of ranks: at step s a rank sends to
 * rank + s and receives from rank - s (modulo the count), a sendrecv each (coll_base_alltoall.c,
 * coll_base_alltoallv.c: steps 1 to n for MPI_Alltoall, its own block last; 0 to n - 1 for
 * MPI_Alltoallv, its own first); MPICH's and MVAPICH2's do the same on counts that are not a power of two. So
 * do these, on those counts, by SMPI's requests (Request::sendrecv, with SMPI's own tags: a sendrecv
 * to the rank itself is a copy), whatever ORRERY_SMPI_COLLS says. On a power of two, SMPI's own. */
namespace {
using Sendrecv = void (*)(const void* sbuf, int scount, MPI_Datatype stype, int dst, int stag, void* rbuf, int rcount,
                          MPI_Datatype rtype, int src, int rtag, MPI_Comm comm, MPI_Status* status);
#define REQUEST_SENDRECV "_ZN7simgrid4smpi7Request8sendrecvEPKviPNS0_8DatatypeEiiPviS5_iiPNS0_4CommEP10MPI_Status"
constexpr int kTagAlltoallv = -1000, kTagAlltoall = -1112;  // COLL_TAG_ALLTOALL(V), src/smpi/include/private.hpp
}  // namespace

// simgrid::smpi::alltoall__pair(const void*, int, Datatype*, void*, int, Datatype*, Comm*)
#define ALLTOALL_PAIR "_ZN7simgrid4smpi14alltoall__pairEPKviPNS0_8DatatypeEPviS4_PNS0_4CommE"
EXPORTED int alltoall_pair(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount, MPI_Datatype rtype,
                           MPI_Comm comm) __asm__(ALLTOALL_PAIR);
int alltoall_pair(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount, MPI_Datatype rtype,
                  MPI_Comm comm) {
  using Real = int (*)(const void*, int, MPI_Datatype, void*, int, MPI_Datatype, MPI_Comm);
  static const Real real = next<Real>(ALLTOALL_PAIR);
  static const Sendrecv sendrecv = next<Sendrecv>(REQUEST_SENDRECV);
  int n, rank;
  PMPI_Comm_size(comm, &n);
  if (!(n & (n - 1)))
    return real(sbuf, scount, stype, rbuf, rcount, rtype, comm);
  PMPI_Comm_rank(comm, &rank);
  const MPI_Aint sblock = extent_of(stype) * scount, rblock = extent_of(rtype) * rcount;
  for (int step = 1; step <= n; step++) {
    const int to = (rank + step) % n, from = (rank - step + n) % n;
    sendrecv(static_cast<const char*>(sbuf) + to * sblock, scount, stype, to, kTagAlltoall,
             static_cast<char*>(rbuf) + from * rblock, rcount, rtype, from, kTagAlltoall, comm, MPI_STATUS_IGNORE);
  }
  return MPI_SUCCESS;
}

// simgrid::smpi::alltoallv__pair(const void*, const int*, const int*, Datatype*, void*, const int*, const int*, Datatype*, Comm*)
#define ALLTOALLV_PAIR "_ZN7simgrid4smpi15alltoallv__pairEPKvPKiS4_PNS0_8DatatypeEPvS4_S4_S6_PNS0_4CommE"
EXPORTED int alltoallv_pair(const void* sbuf, const int* scounts, const int* sdispls, MPI_Datatype stype, void* rbuf,
                            const int* rcounts, const int* rdispls, MPI_Datatype rtype,
                            MPI_Comm comm) __asm__(ALLTOALLV_PAIR);
int alltoallv_pair(const void* sbuf, const int* scounts, const int* sdispls, MPI_Datatype stype, void* rbuf,
                   const int* rcounts, const int* rdispls, MPI_Datatype rtype, MPI_Comm comm) {
  using Real = int (*)(const void*, const int*, const int*, MPI_Datatype, void*, const int*, const int*, MPI_Datatype,
                       MPI_Comm);
  static const Real real = next<Real>(ALLTOALLV_PAIR);
  static const Sendrecv sendrecv = next<Sendrecv>(REQUEST_SENDRECV);
  int n, rank;
  PMPI_Comm_size(comm, &n);
  if (!(n & (n - 1)))
    return real(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm);
  PMPI_Comm_rank(comm, &rank);
  const MPI_Aint sext = extent_of(stype), rext = extent_of(rtype);
  for (int step = 0; step < n; step++) {
    const int to = (rank + step) % n, from = (rank - step + n) % n;
    sendrecv(static_cast<const char*>(sbuf) + sdispls[to] * sext, scounts[to], stype, to, kTagAlltoallv,
             static_cast<char*>(rbuf) + rdispls[from] * rext, rcounts[from], rtype, from, kTagAlltoallv, comm,
             MPI_STATUS_IGNORE);
  }
  return MPI_SUCCESS;
}

/* ---------------- Intel MPI's choices on the layouts SMPI's code cannot run ---------------- */

/* SMPI 3.32's Intel MPI selector (impi) takes two algorithms where their code cannot run, and the
 * run aborted: each goes, there only, to the algorithm Intel MPI's table means.
 *
 * allreduce__rab1, Rabenseifner's reduce-scatter and allgather, throws on a number of ranks that
 * is not a power of two ("allreduce rab1 algorithm can't be used with non power of two number of
 * processes!"), where the table takes it for mid-sized reductions (e.g. 40 KB on 12 ranks, 3 nodes
 * of 4). Intel MPI's Rabenseifner runs on any number, folding the ranks beyond the largest power of
 * two first, as SMPI's allreduce__rab_rdb (MPICH's Rabenseifner) does: that one, there. */
// simgrid::smpi::allreduce__rab1(const void*, void*, int, Datatype*, Op*, Comm*)
#define ALLREDUCE_RAB1 "_ZN7simgrid4smpi15allreduce__rab1EPKvPviPNS0_8DatatypeEPNS0_2OpEPNS0_4CommE"
#define ALLREDUCE_RAB_RDB "_ZN7simgrid4smpi18allreduce__rab_rdbEPKvPviPNS0_8DatatypeEPNS0_2OpEPNS0_4CommE"
EXPORTED int allreduce_rab1(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) __asm__(ALLREDUCE_RAB1);
int allreduce_rab1(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  using Real = int (*)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm);
  static const Real real = next<Real>(ALLREDUCE_RAB1);
  static const Real any_count = next<Real>(ALLREDUCE_RAB_RDB);
  int n;
  PMPI_Comm_size(comm, &n);
  return (n & (n - 1)) ? any_count(sbuf, rbuf, count, type, op, comm) : real(sbuf, rbuf, count, type, op, comm);
}

/* bcast__SMP_linear, the table's "topology aware ring", on nodes of one rank each: its node
 * leaders send to the next node and to the next rank of their own, the same rank here, twice, and
 * the last sends to rank 0, which never receives (the run ended "Actor pid=1 is gone??"). SMPI's
 * nodes are SimGrid's hosts, and in an Orrery run every rank stands on a host of its own (its
 * GPU's): every node has one rank, and Intel MPI's small broadcasts from 5 ranks aborted (a 1-int
 * MPI_Bcast on 2 nodes of 4 GPUs). With one rank a node the topology-aware ring is the plain ring,
 * a pipeline from rank to rank in 8 KiB segments: SMPI's bcast__NTSL, the table's "ring", there.
 * The node layout is the one SMPI's own code reads (Comm::init_smp, which the selector has already
 * made). */
// simgrid::smpi::bcast__SMP_linear(void*, int, Datatype*, int root, Comm*)
#define BCAST_SMP_LINEAR "_ZN7simgrid4smpi17bcast__SMP_linearEPviPNS0_8DatatypeEiPNS0_4CommE"
#define BCAST_NTSL "_ZN7simgrid4smpi11bcast__NTSLEPviPNS0_8DatatypeEiPNS0_4CommE"
// simgrid::smpi::Comm members: called with the object first (Itanium C++ ABI)
using CommOf = MPI_Comm (*)(const void* comm);
using CommTest = bool (*)(const void* comm);
using CommInit = void (*)(void* comm);
#define COMM_LEADERS "_ZNK7simgrid4smpi4Comm16get_leaders_commEv"
#define COMM_INTRA "_ZNK7simgrid4smpi4Comm14get_intra_commEv"
#define COMM_UNIFORM "_ZNK7simgrid4smpi4Comm10is_uniformEv"
#define COMM_INIT_SMP "_ZN7simgrid4smpi4Comm8init_smpEv"
EXPORTED int bcast_smp_linear(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm) __asm__(BCAST_SMP_LINEAR);
int bcast_smp_linear(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  using Real = int (*)(void*, int, MPI_Datatype, int, MPI_Comm);
  static const Real real = next<Real>(BCAST_SMP_LINEAR);
  static const Real ring = next<Real>(BCAST_NTSL);
  static const CommOf leaders = next<CommOf>(COMM_LEADERS), intra = next<CommOf>(COMM_INTRA);
  static const CommTest uniform = next<CommTest>(COMM_UNIFORM);
  static const CommInit init_smp = next<CommInit>(COMM_INIT_SMP);
  if (leaders(comm) == MPI_COMM_NULL)
    init_smp(comm);
  int per_node = 0;
  if (uniform(comm))
    PMPI_Comm_size(intra(comm), &per_node);
  return per_node == 1 ? ring(buf, count, type, root, comm) : real(buf, count, type, root, comm);
}

/* ---------------- a send type other than the receive type ---------------- */

/* MPI lets the two sides of a collective describe the same data with different types (MPI_INT
 * x 8 sent, a contiguous type of 8 ints x 1 received): only the type signatures must match. Most
 * of SMPI 3.32's allgather algorithms (under the Open MPI, MPICH, MVAPICH2 and Intel MPI
 * selectors), Intel MPI's and Open MPI's allgatherv ones and its Bruck alltoall (every selector's
 * for small blocks) take the receive side's count or extent for the send buffer too: every rank got
 * wrong blocks, silently, or the heap was overwritten ("malloc(): unaligned tcache chunk detected",
 * an 8-byte MPI_Alltoall on 16 ranks under Open MPI's selector). Where the send side differs, the
 * stand-ins for PMPI_Allgather, PMPI_Allgatherv and PMPI_Alltoall (which the shim's MPI wrappers
 * call) first copy the send buffer into the receive side's layout (SMPI's Datatype::copy, no
 * simulated time), as SMPI does for MPI_IN_PLACE, and hand that to SMPI: the same bytes in every
 * message, now from the right places. */
namespace {
using Gathering = int (*)(const void*, int, MPI_Datatype, void*, int, MPI_Datatype, MPI_Comm);
/* real(...) of a send buffer of one block of scount x stype (an allgather's) or of one for every
 * rank (an alltoall's), in the receive side's layout where the two sides' types or counts differ. */
int in_receive_layout(Gathering real, bool block_per_rank, const void* sbuf, int scount, MPI_Datatype stype,
                      void* rbuf, int rcount, MPI_Datatype rtype, MPI_Comm comm) {
  if (sbuf == MPI_IN_PLACE || (stype == rtype && scount == rcount))
    return real(sbuf, scount, stype, rbuf, rcount, rtype, comm);
  int blocks = 1;
  if (block_per_rank)
    PMPI_Comm_size(comm, &blocks);
  Laid own = laid_out(sbuf, blocks * scount, stype, blocks * rcount, rtype);  // block i after block i - 1 on both sides
  return real(own.at, rcount, rtype, rbuf, rcount, rtype, comm);
}
}  // namespace

EXPORTED int PMPI_Allgather(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount,
                            MPI_Datatype rtype, MPI_Comm comm);
int PMPI_Allgather(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount, MPI_Datatype rtype,
                   MPI_Comm comm) {
  static const Gathering real = next<Gathering>("PMPI_Allgather");
  return in_receive_layout(real, false, sbuf, scount, stype, rbuf, rcount, rtype, comm);
}

EXPORTED int PMPI_Allgatherv(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, const int* rcounts,
                             const int* displs, MPI_Datatype rtype, MPI_Comm comm);
int PMPI_Allgatherv(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, const int* rcounts,
                    const int* displs, MPI_Datatype rtype, MPI_Comm comm) {
  using Real = int (*)(const void*, int, MPI_Datatype, void*, const int*, const int*, MPI_Datatype, MPI_Comm);
  static const Real real = next<Real>("PMPI_Allgatherv");
  int rank = 0;
  if (sbuf != MPI_IN_PLACE && rcounts)
    PMPI_Comm_rank(comm, &rank);
  if (sbuf == MPI_IN_PLACE || !rcounts || (stype == rtype && scount == rcounts[rank]))
    return real(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm);
  Laid own = laid_out(sbuf, scount, stype, rcounts[rank], rtype);
  return real(own.at, rcounts[rank], rtype, rbuf, rcounts, displs, rtype, comm);
}

EXPORTED int PMPI_Alltoall(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount,
                           MPI_Datatype rtype, MPI_Comm comm);
int PMPI_Alltoall(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount, MPI_Datatype rtype,
                  MPI_Comm comm) {
  static const Gathering real = next<Gathering>("PMPI_Alltoall");
  return in_receive_layout(real, true, sbuf, scount, stype, rbuf, rcount, rtype, comm);
}
