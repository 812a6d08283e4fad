/* Orrery's simulated CUDA runtime: shared state and the GPU engine's interface.
 *
 * Every MPI rank is a SimGrid actor in one OS process, all on one thread, so
 * state is keyed by rank (never thread-local, never file-scope per-rank). A
 * simulated GPU is a SimGrid host; each CUDA stream executes its operations in
 * order, so asynchronous work advances in simulated time while the rank's host
 * code goes on: a kernel or memset with nothing to wait for as an execution that
 * SimGrid's kernel starts and completes, the others in the stream's daemon actor.
 *
 * Its parts (core/): description.cpp (the run description), fatal.cpp, gpus.cpp, ranks.cpp,
 * streams.cpp (and host-side waits), execution.cpp (a stream operation as a SimGrid activity),
 * intervals.cpp, terms.cpp (the term breakdown), messages.cpp (per-message network factors, collective corrections),
 * outcome.cpp (how the run ended), report.cpp, trace.cpp (the timeline trace), environment.cpp
 * (each rank's launcher variables: getenv and its kin, which it defines); the small headers
 * beside them are what they share with each other only.
 *
 * Not here: the CUDA entry points themselves (launch.cpp, memory.cpp,
 * stream_event.cpp, device.cpp, errors.cpp) and the MPI wrappers (mpi.cpp). */
#ifndef ORRERY_RUNTIME_HPP
#define ORRERY_RUNTIME_HPP

#include "core/fatal.hpp"
#include "cudart/cuda_abi.h"
#include "run_description.hpp"

#include <simgrid/s4u.hpp>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#define ORR_EXPORT extern "C" __attribute__((visibility("default")))

namespace sg4 = simgrid::s4u;

/* The core's interface is exported from libcudart.so.13 under its private version node
 * ORRERY_PRIVATE (gen_exports.py's PRIVATE_NODE), for libnccl.so.2, whose collectives are stream
 * operations of this core; no program links against that node. */
#pragma GCC visibility push(default)
namespace orrery {

/* ---- the run's description (written by `orrery run` as run.json, read once; its types are
 * generated from interpose/core/run_description.json) ---- */
const RunDescription& run_description();
bool run_description_loaded();  // before it is, a fatal error cannot end the run by the report
// The description of the GPU on a platform host (fatal if it has none).
const GpuHost& gpu_place(const sg4::Host* host);
// The GPUs of a node, by device number (none for a node number the run does not have).
const std::vector<const GpuHost*>& gpus_of_node(int64_t node);

/* ---- how the run ended (outcome.cpp): the report's status rows, read by orrery/results.py ----
 * Ends the simulation now, for a failure of the program found while it runs (MPI_Abort, a
 * rank's exit, a crash, GPU work pending when a rank ends): records the status, the rank
 * concerned (-1: none) and a code (the exit status, MPI_Abort's error code, the signal), flushes
 * the program's output, writes the report and ends the process with status 0: `orrery run`
 * takes the outcome from the report, and SMPI's launcher adds nothing to the program's output. */
[[noreturn]] void end_run(const char* status, int rank, int code);
struct Rank;
// A rank that ends with work still queued on its GPU ends the run (status pending_gpu_work).
void finish_rank(const Rank& r);
// exit(status) of a rank that never called MPI_Init: with 0, its normal end (the rank finished).
void end_outside_mpi(Rank& r, int status);
// Stops the run when a loaded object's CUDA calls would go to a runtime other than Orrery's (a
// statically linked copy: nvcc's default), before the program's first simulated second
// (foreign_runtime.cpp).
void check_no_foreign_runtime();

/* ---- a simulated GPU, shared by the ranks of its node ---- */
/* A union of time intervals, built in (mostly) increasing order. */
class IntervalSet {
 public:
  void add(double begin, double end);
  double measure() const;                            // total length of the union
  double overlap(const IntervalSet& other) const;    // length of the intersection
  IntervalSet minus(const IntervalSet& other) const; // the instants of this set not in `other`
  void normalize() const;                            // sort and merge (once, at the end)

 private:
  mutable std::vector<std::pair<double, double>> spans_;
  mutable bool sorted_ = true;
};

enum class CopyKind { H2H, H2D, D2H, D2D, Peer };
const char* copy_kind_name(CopyKind k);

/* A measured model (machine keys copies.*, messages.*, gaps.*; collectives.* as segments of no
 * size term): by size, each Segment (run_description.hpp) up to its up_to bytes. */
using Piecewise = std::vector<Segment>;  // empty: the route's own latency and bandwidth
const Segment* segment_for(const Piecewise& model, double bytes);  // nullptr for an empty model

/* Per-message latency factors: measured message models (messages.*), rendezvous
 * handshakes, staging fill (messages.cpp). */
void install_message_factors();
/* The extra time of a blocking collective on a communicator of `ranks` ranks
 * (collectives.*; 0 without a correction). */
double collective_correction(const char* name, double bytes, bool device, int ranks);

struct Stream;

/* A GPU's copy engines of one direction (streams.cpp): how many are idle, and the streams whose
 * copy waits for one, each given the next that frees in the order they asked, as a semaphore
 * would. Not SimGrid's semaphore: the simulation's kernel takes them too, for the copies it
 * starts without the stream's actor, and it cannot block. */
struct CopyEngines {
  int free = 0;
  std::deque<Stream*> waiting;
};

struct Gpu {
  sg4::Host* host = nullptr;  // executes kernels and memsets
  sg4::Host* cpu = nullptr;   // the node's CPU: the other end of H2D/D2H copies
  sg4::Host* copy_engine = nullptr;  // where its peer copies start and end (beside the GPU)
  sg4::Host* message_end = nullptr;  // where messages from and to its memory start and end
  sg4::Host* staged_end = nullptr;   // with gpudirect.rdma_limit: where its staged messages start and end
  int node = 0;
  int index = 0;              // device number within the node
  double speed = 0;           // flop/s of the host: 1 simulated second = speed flops
  size_t memory_used = 0;
  cudaDeviceProp prop{};
  double launch_overhead_s = 0;  // host time to launch a kernel
  double copy_overhead_s = 0;    // host time to issue a copy or memset
  double sync_overhead_s = 0;    // host time to return from a synchronisation
  double memset_bandwidth = 0;   // bytes/s of cudaMemset on the device
  double d2d_bandwidth = 0;      // bytes/s of a device-to-device copy on one GPU
  double d2d_latency_s = 0;      // fixed time of a device-to-device copy
  double host_memcpy_bandwidth = 0; // bytes/s of host-to-host copies
  // Copy engines: with two or more, host-to-device copies have their own and
  // device-to-host (and outgoing peer) copies theirs; with one, all share it.
  CopyEngines* h2d_engine = nullptr;
  CopyEngines* d2h_engine = nullptr;
  Piecewise copy_model[5];  // by CopyKind
  Piecewise staged_peer_model;  // each half of a peer copy staged through host memory (copies.peer_staged)
};

/* ---- device-side work ---- */
struct Rank;
struct Stream;

struct Dependency {   // operation number `seq` of `stream` must be complete
  Stream* stream;
  uint64_t seq;
};

struct Capture;

struct Event {
  Stream* stream = nullptr;  // where it was last recorded (nullptr: never)
  uint64_t seq = 0;
  double time = -1;          // simulated time it completed
  unsigned flags = 0;
  int owner = -1;    // the rank that created it
  int handles = 1;   // its creator's, and each cudaIpcOpenEventHandle's: destroyed at the last
  // Last recorded in a stream capture (capture.cpp): the capture and its nodes the record stands
  // for (what a stream that waits for it depends on); `stream` is then nullptr.
  Capture* capture = nullptr;
  std::vector<uint32_t> nodes;
};


struct Op {
  // Collective: an operation of a sibling stand-in (libnccl.so.2's collectives and point-to-point
  // transfers), which `run` executes in the stream's actor and accounts for itself.
  // Free: a stream-ordered free (cudaFreeAsync), which gives its allocation back once the stream
  // reaches it, in no time.
  enum Kind { Kernel, Copy, Memset, Record, Wait, HostFn, Collective, Free } kind;
  explicit Op(Kind k) : kind(k) {}
  std::vector<Dependency> deps;
  std::string name;           // kernel name
  dim3 grid{1, 1, 1}, block{1, 1, 1};  // a kernel's launch configuration (the trace shows it)
  double seconds = 0;         // kernel / memset device time
  CopyKind copy = CopyKind::H2H;
  uint64_t bytes = 0;
  sg4::Host* from = nullptr;
  sg4::Host* to = nullptr;
  void* fill_dst = nullptr;   // host destination to fill once a D2H copy completes
  uint64_t fill_width = 0, fill_pitch = 0, fill_rows = 0;
  const void* h2h_src = nullptr;
  // A peer copy between two GPUs of a rank that has not enabled peer access between them: the
  // driver stages it through host memory `via`, from `from` (the source GPU) to `to` (the
  // destination's), both halves at once (execution.cpp).
  bool staged = false;
  sg4::Host* via = nullptr;
  Event* event = nullptr;
  cudaHostFn_t fn = nullptr;
  void* fn_data = nullptr;
  std::function<void(Stream*)> run;  // a Collective's execution
  // A Collective launched again from a graph (capture.cpp): numbers it afresh among its
  // communicator's operations, as NCCL does at each launch of a captured collective.
  std::function<void(Op&)> relaunch;
  bool uncosted = false;      // a kernel given the default time: each launch counts in the report
  uintptr_t free_base = 0;    // a Free's allocation
  // When its rank enqueued it (host_now): it starts no sooner, however early its stream is free.
  double not_before = 0;
};

struct Stream {
  Rank* rank = nullptr;
  Gpu* gpu = nullptr;
  int device = 0;
  unsigned flags = 0;
  int priority = 0;
  bool legacy = false;        // the legacy default stream of (rank, device)
  bool destroyed = false;
  std::deque<Op> queue;
  uint64_t enqueued = 0, completed = 0;
  // Its daemon actor, created the first time an operation needs it (wake_worker): most streams'
  // operations run without it (streams.cpp), and an actor is a stack of its own, in memory maps
  // that vm.max_map_count bounds, and a bigger actor table for every MPI message's lookups.
  sg4::ActorPtr worker;
  std::string worker_name;
  // Who runs the operation at the head of the queue (streams.cpp): nobody (the queue is empty),
  // the simulation's kernel (a kernel, memset or copy as an activity of its own, `on_gpu`), or
  // the worker, until it has emptied the queue.
  enum class Driver { None, Gpu, Worker } driver = Driver::None;
  sg4::ActivityPtr on_gpu;
  double started_at = 0;      // when the kernel started the head (a copy's wait included)
  // A head whose dependencies are not met, left to SimGrid's kernel: it waits, listed among the
  // `dependents` of the stream it waits for, until that stream completes the operation (since
  // `parked_since`; -1: not waiting).
  struct Dependent {
    Stream* stream;
    uint64_t seq;
  };
  std::vector<Dependent> dependents;
  double parked_since = -1;
  int engine_unit = -1;       // the copy engine unit `on_gpu` holds, as the trace numbers them
  bool engine_granted = false;  // the worker's copy was given an engine (streams.cpp)
  // The hand-over between the worker and those waiting for it (streams.cpp): the worker waits on
  // `wake` while idle, for the operations of other streams that its own wait for, or for a copy
  // engine (one at a time).
  bool idle = false;
  sg4::SemaphorePtr wake;
  struct Waiter {             // an actor blocked on `wake` until operation `seq` completes
    sg4::Semaphore* wake;
    uint64_t seq;
  };
  std::vector<Waiter> waiters;
  // cudaStreamQuery's and cudaEventQuery's timed polls (poll_for) wait on done_cv instead
  sg4::ConditionVariablePtr done_cv;
  int pollers = 0;
  // While the stream is captured into a graph (capture.cpp): the capture, which of its streams
  // it is (a branch of the graph) and the nodes its next operation depends on.
  Capture* capture = nullptr;
  int branch = -1;
  std::vector<uint32_t> capture_tail;
};

/* ---- per-rank accounting, written to the report at the end ---- */
struct Tally {
  uint64_t count = 0;
  uint64_t bytes = 0;
  double time_s = 0;
};

/* What a rank's host is doing, for the term breakdown (terms.cpp, docs/running.md "The terms"):
 * each instant of its timeline is in one state, the innermost it entered (a GPU wait inside an
 * MPI call is a GPU wait). Outside every state it runs the program's own code. */
enum class HostState { Code, Api, GpuWait, PointToPoint, Collective };
constexpr int kHostStates = 5;
struct HostTimeline {
  std::vector<HostState> stack;     // entered states, innermost last; empty: the program's code
  double since = 0;                 // when the innermost state (or the program's code) began
  double seconds[kHostStates] = {}; // time in each state, up to the rank's end
  IntervalSet spans[kHostStates];   // when: for the states split by what the GPU did (waits)
};

struct Stats {
  std::map<std::string, Tally> kernels;  // device time per kernel name
  std::map<std::string, Tally> copies;   // device time per copy kind
  std::map<std::string, Tally> mpi;      // host time per MPI call
  std::map<std::string, Tally> nccl;     // device time per NCCL call and algorithm/protocol
  std::map<std::string, Tally> uncosted; // kernels that got the default cost
  // managed memory under --managed resident, by call: what was allocated, prefetched, advised
  // (counts and bytes; no time: nothing migrates)
  std::map<std::string, Tally> managed;
  double host_api_s = 0;   // modelled CUDA API overheads on the host
  double gpu_wait_s = 0;   // host blocked until device work completed
  double end_s = -1;       // when the rank called MPI_Finalize
  // MPI calls that moved host buffers, or left host-buffer requests pending, while
  // device-buffer data was in play: the rank stood next to its GPU, so those
  // host-buffer messages took the GPU's route (reported, never silent).
  uint64_t mixed_placements = 0;
  // When things happened, for overlap: the rank's device work by engine, and
  // its communication (blocking MPI calls; non-blocking requests from post to
  // the wait or test that completed them).
  IntervalSet compute, h2d, d2h, comm;
  // For the terms: when its GPU ran its kernels (kernels only, not memsets or device copies) and
  // its NCCL operations (from the stream reaching one to its end), and what its host was doing.
  IntervalSet kernel, nccl_collective, nccl_p2p;
  HostTimeline host;
};

/* The host timeline (terms.cpp): a state entered and left (innermost last), or the innermost
 * one renamed (an MPI wait found to complete a collective's request). */
void host_enter(Rank& r, HostState s);
void host_leave(Rank& r);
void host_relabel(Rank& r, HostState s);
class HostSpan {  // the calling scope in one state
 public:
  HostSpan(Rank& r, HostState s) : rank_(r) { host_enter(r, s); }
  ~HostSpan() { host_leave(rank_); }
  HostSpan(const HostSpan&) = delete;
  HostSpan& operator=(const HostSpan&) = delete;

 private:
  Rank& rank_;
};
/* A rank's time up to `end` in the terms that partition it (docs/running.md, "The terms"). */
struct Terms {
  double kernels = 0, p2p = 0, collectives = 0, copies_sync = 0, host_overheads = 0, host = 0;
};
Terms rank_terms(const Rank& r, double end);

/* MPI protocol of one path (host or device buffers), from the machine description. */
struct MpiPath {
  double eager_threshold = 0;  // bytes: this large or larger, the sender waits for the receiver
  double send_overhead_s = 0;  // between nodes
  double recv_overhead_s = 0;
  double send_intra_s = 0;     // within a node
  double recv_intra_s = 0;
  double send(bool intra) const { return intra ? send_intra_s : send_overhead_s; }
  double recv(bool intra) const { return intra ? recv_intra_s : recv_overhead_s; }
  // The least time from the start of a send of the rank to the start of its next (gaps.*),
  // between nodes and within a node, and when its next send on each may start (mpi.cpp's pace).
  Piecewise gap_inter, gap_intra;
  double next_inter = 0, next_intra = 0;
};

struct Rank {
  int id = 0;
  bool mpi_initialized = false;  // it called MPI_Init (or MPI_Init_thread)
  int mpi_thread_level = 0;      // the thread support MPI_Init_thread provided (MPI_THREAD_SINGLE: none asked)
  static constexpr int kNoPeer = -1, kAnyPeer = -2;
  // The MPI call the rank is in (mpi.cpp's MpiScope): a deadlock names it, and a run that ends
  // inside it counts it until then.
  struct MpiCall {
    const char* name = nullptr;  // nullptr: not in an MPI call
    double t0 = 0;
    uint64_t bytes = 0;
    int peer = kNoPeer;          // a rank of MPI_COMM_WORLD, kNoPeer, or kAnyPeer (MPI_ANY_SOURCE)
    int tag = kNoPeer;           // the same for tags (MPI_ANY_TAG)
    uint64_t call = 0;           // its number on the rank, when traced (core/trace.hpp)
  } in_mpi;
  double gpu_wait_since = -1;  // a host wait for its GPU going on: its start (-1: none)
  MpiPath mpi_host, mpi_device;
  sg4::Host* cpu = nullptr;          // its process's host endpoint (host-buffer messages)
  sg4::Host* host = nullptr;
  sg4::Host* device_end = nullptr;   // where its device-buffer messages start: its GPU's host, or
                                     // with mpi.intra_node = "nic" the GPU's message endpoint
  std::vector<Gpu*> gpus;            // the devices of its node, by device number
  int device = 0;                    // current device
  std::set<std::pair<int, int>> peer_access;  // (device, peer) pairs cudaDeviceEnablePeerAccess enabled
  std::map<const Gpu*, int> cache_config;     // cudaDeviceSetCacheConfig per device (none: PreferNone)
  std::vector<Stream*> legacy;       // legacy default stream per device (lazily)
  std::vector<Stream*> per_thread;   // per-thread default stream per device (lazily): the rank's thread's
  std::vector<Stream*> streams;      // every stream it created, for ordering and sync
  cudaError_t last_error = cudaSuccess;
  sg4::SemaphorePtr wake = sg4::Semaphore::create(0);  // its waits for streams (streams.cpp)
  // launch configuration pushed by nvcc's stubs
  dim3 cfg_grid{1, 1, 1}, cfg_block{1, 1, 1};
  size_t cfg_shmem = 0;
  cudaStream_t cfg_stream = nullptr;
  std::map<const void*, double> requests;  // pending non-blocking MPI requests: simulated time of the post
  std::set<const void*> collective_requests;  // those of them a non-blocking collective made
  struct Persistent {  // what MPI_Start needs of a persistent request (mpi.cpp)
    const void* buf;
    double bytes;
    int peer_world;    // its destination or source in MPI_COMM_WORLD (negative: any, none)
    bool send;
    int tag;           // as the trace pairs messages (core/trace.hpp): its tag (Rank::kAnyPeer: any),
    int comm;          // SMPI's id of its communicator
    const void* comm_handle;
  };
  std::map<const void*, Persistent> persistent;
  // The MPI library's CUDA IPC cache (mpi.ipc_setup): (allocation serial, peer rank) pairs whose
  // handle the peer has opened already (mpi.cpp).
  std::set<std::pair<uint64_t, int>> ipc_opened;
  // The rank's own time where it is ahead of SimGrid's clock: the host time of its CUDA API
  // overheads and MPI software overheads, which it waits out only when something needs it
  // (streams.cpp, "the host's time"). Never behind: host_now() is the later of the two.
  double clock = 0;
  // How many times in a row the rank entered an MPI call and read the host's clock at `still_at`,
  // its own time then (note_still, ranks.cpp)
  double still_at = -1;
  uint64_t still_calls = 0, still_reads = 0;
  Stats stats;
};

/* The rank of the calling actor (created on first use); fails loudly when
 * called from an actor that is not an MPI rank (a stream, a host callback). Its host time is
 * caught up first (catch_up): whatever the call does starts at the rank's own time. */
Rank& rank_self(const char* function);
/* The same without the catch-up, for the calls that keep the rank ahead of the clock: those that
 * only enqueue stream work (which starts no sooner than Op::not_before), wait for it (a wait
 * ends no sooner than host_now()), answer from the rank's state, or time things with host_now()
 * and reach SMPI only through its MPI calls (which catch up as they enter). */
Rank& rank_deferring(const char* function);
void mpi_call_left(const Rank& r);  // after an MPI call of the rank returned (mpi.progress, ranks.cpp)
// The rank enters an MPI call (MPI_Wtime among them) or, with `clock_read`, reads the host's
// clock: a run whose rank does so for ever at one simulated instant stops, named (ranks.cpp).
void note_still(Rank& r, bool clock_read);
// The calling actor's rank, or nullptr for any other actor and the maestro.
Rank* calling_rank();
Rank* rank_of_actor(long pid);  // the rank whose actor is `pid`, or nullptr (not started, not a rank)
Gpu& current_gpu(Rank& r);

/* Resolve a cudaStream_t of rank r (nullptr/legacy handles -> legacy stream). */
Stream* resolve_stream(Rank& r, cudaStream_t s, const char* function);
Stream* legacy_stream(Rank& r, int device);  // the legacy default stream of one of the rank's devices
// The per-thread default stream (cudaStreamPerThread; stream 0 of code built with nvcc's
// --default-stream per-thread): a blocking stream of its own, one per device for the rank's thread.
Stream* per_thread_stream(Rank& r, int device);
// A _ptsz entry point's stream: its 0 is the per-thread default stream, not the legacy one.
inline cudaStream_t per_thread(cudaStream_t s) { return s ? s : cudaStreamPerThread; }
// A new stream of `device` (-1: the rank's current device, as cudaStreamCreate makes it).
Stream* create_stream(Rank& r, unsigned flags, int priority, int device = -1);

/* Enqueue op on stream, adding the implicit legacy-stream ordering; on a stream being captured,
 * the operation becomes a node of the capture's graph instead (capture.cpp). An error is what
 * CUDA returns for the call that enqueued it (an operation that would cross a capture's
 * boundary), and nothing is enqueued. */
cudaError_t enqueue(Stream* s, Op op);
// Legacy default stream semantics: `op` waits for the pending work of every blocking stream of
// `legacy`'s device (enqueue applies it to the legacy stream's own operations).
void wait_like_legacy(Op& op, Stream* legacy);
// Resumes the stream's worker if it is waiting for work: after an enqueue, or its destruction.
void wake_worker(Stream* s);

/* Host-side blocking, accounted as gpu_wait. */
void wait_for(Rank& r, Stream* s, uint64_t seq);
void wait_stream(Rank& r, Stream* s);
void wait_device(Rank& r, int device);
// What a synchronous copy on the legacy default stream waits for (blocking_only: its own work and
// every blocking stream's of the device), or, without blocking_only, all of the device's work.
void wait_device_streams(Rank& r, int device, bool blocking_only);
/* A host-side poll (cudaStreamQuery, cudaEventQuery): whether operation `seq` of `s` is complete.
 * If not, the host spins until the stream completes an operation or the device's sync overhead
 * has passed, whichever is first (accounted as gpu_wait), so that a polling loop advances the
 * simulated clock and sees a completion when it happens; then answers again. */
bool poll_for(Rank& r, Stream* s, uint64_t seq);

/* Host-side modelled API cost, accounted as host_api: deferred (defer), not slept. */
void host_overhead(Rank& r, double seconds);

double now();

/* SimGrid's precision (surf/precision, SMPI_CONFIG in orrery/run/launch.py): a time less than this
 * ahead of the clock is the clock's own, reached by a sum taken in another order (a rank's host
 * time against the end of the GPU work it waited for). SimGrid would sleep for it, an activity and
 * a scheduling round, and say on standard error that the duration is below its accuracy: Orrery
 * does not wait for such a time. */
constexpr double kClockPrecision = 1e-12;
inline bool ahead_of_clock(double t) { return t - now() > kClockPrecision; }

/* ---- the host's time (streams.cpp) ----
 * A rank spends host time (API and MPI software overheads) without a SimGrid sleep for each:
 * defer() moves its own clock ahead, and it waits it out (catch_up) only where something
 * starts or is observed at that time outside Orrery's own accounting: before SMPI's MPI calls
 * (liborrery_smpi.so catches the rank up as every MPI call enters), and at every CUDA or NCCL call
 * but those that keep it ahead (rank_deferring). */
inline double host_now(const Rank& r) {
  double t = now();
  return r.clock > t ? r.clock : t;
}
void defer(Rank& r, double seconds);  // the rank spends `seconds` of host time from host_now()
void catch_up(Rank& r);               // the calling rank sleeps until its own clock
void install_host_time_report();      // ORRERY_HOST_TIME=report (streams.cpp), with the first rank

/* Memory registry (memory.cpp) */
struct Allocation {
  uintptr_t base;
  size_t size;
  bool device;      // device memory (else pinned host memory)
  bool folded;      // mapped onto the shared fold block: contents are not kept
  Gpu* gpu;         // owning device (device memory only)
  bool mapped = false;  // a range the driver mapped (cuMemMap): cuMemUnmap ends it, not cudaFree
  bool registered = false;  // the program's own memory, pinned by cudaHostRegister: never freed here
  struct MemPool* pool = nullptr;  // stream-ordered (cudaMallocAsync): the pool it came from
  bool free_pending = false;       // cudaFreeAsync enqueued its free
  int ipc_opens = 0;               // other ranks' cudaIpcOpenMemHandle of it not yet closed
  bool freed_by_owner = false;     // cudaFree'd while opened elsewhere: it goes at the last close
  unsigned flags = 0;       // pinned host memory: cudaHostAlloc's or cudaHostRegister's flags
  // managed memory (cudaMallocManaged under --managed resident): device memory of `gpu` that stays
  // there, which the program's host code reads and writes too (neither folded nor migrated)
  bool managed = false;
  bool anonymous = false;   // its own anonymous map (munmap releases it), not malloc's memory
  uint64_t serial = 0;  // which allocation of the run it is (from 1): a reallocation at the same address is another
};
const Allocation* find_allocation(const void* p);
// The calling rank's host name, its node's (n0, n1, ...), as gethostname answers it (environment.cpp).
int rank_gethostname(char* name, size_t len);
// Device memory the driver stand-in mapped (driver/runtime_bridge.cpp), known to the copies,
// memsets and pointer queries as cudaMalloc's is; the caller accounts for its memory.
void register_allocation(const Allocation& a);
// A stream-ordered free reached in its stream (Op::Free): the allocation goes back to its pool
// and its device (cudart/memory.cpp).
void free_in_stream_order(uintptr_t base);
void unregister_allocation(uintptr_t base);
// A __device__ or __constant__ variable the program registered (__cudaRegisterVar, per rank's copy
// of the program: `host_var` is its host shadow), which the symbol calls name (cudart/memory.cpp).
void register_symbol(const void* host_var, size_t size);
// A __managed__ variable's memory for the calling rank (--managed resident; otherwise the run stops
// naming it): managed memory of its current device holding the variable's initial value, read from
// `fatbin`'s code for that device (cudart/memory.cpp).
void* managed_variable(const void* fatbin, const char* name, size_t size);
struct KernelResources;  // core/cubin.hpp
// A kernel the program registered (__cudaRegisterFunction, per rank's copy of the program) or a
// module it loaded through the driver holds (cudart/module.cpp): its names, the fat binary holding
// its code, and what cudaFuncSetAttribute and cudaFuncSetCacheConfig set for it (cudart/function.cpp).
struct Kernel {
  std::string name;              // demangled: the cost file's and the reports' name
  std::string mangled;           // the cubin's
  const void* fatbin = nullptr;  // the wrapper __cudaRegisterFatBinary was given
  int max_dynamic_shared = -1;   // cudaFuncAttributeMaxDynamicSharedMemorySize; -1: not set
  int carveout = -1;             // cudaFuncAttributePreferredSharedMemoryCarveout; -1: the default
  int cache_config = 0;          // cudaFuncSetCacheConfig; 0: cudaFuncCachePreferNone
  // Its code's resources for the GPU (core/cubin.hpp), once looked up; null where there is none.
  const KernelResources* code = nullptr;
  bool code_looked_up = false;
  std::string no_code;  // a module's kernel without code for the GPU: why (its fat binary's otherwise)
};
Kernel* registered_kernel(const void* stub);  // null where no kernel is registered
// A module's kernel, by its mangled name: launched and queried by its handle as a registered kernel
// by its stub, until its module is unloaded.
Kernel& register_kernel(const void* handle, const std::string& mangled);
void unregister_kernel(const void* handle);
// Device memory of a module's variable (cudart/module.cpp), allocated and counted as cudaMalloc's
// (null when the GPU has not that much left), and given back with its module.
void* allocate_module_memory(Gpu& g, size_t size, const char* fn, int rank);
void free_module_memory(void* p);
// Whether a launch of `threads` per block with `dynamic_shared` bytes fits the kernel, as a real
// GPU checks it: cudaErrorInvalidValue beyond its dynamic shared memory limit,
// cudaErrorLaunchOutOfResources beyond the threads its registers and launch bounds allow. Checked
// where the program has the kernel's code for the GPU (cudart/function.cpp); success elsewhere.
cudaError_t check_launch(Rank& r, Kernel& k, int threads, size_t dynamic_shared);
// A cooperative launch's blocks must all be resident at once: cudaErrorCooperativeLaunchTooLarge
// beyond what the GPU's multiprocessors hold (checked, as check_launch, where the code is known).
cudaError_t check_cooperative(Rank& r, Kernel& k, long blocks, int threads, size_t dynamic_shared);
// A cudaDevAttr value of a device (cudaDeviceGetAttribute, cuDeviceGetAttribute): null once
// *value is set, else why the attribute has no answer (cudart/device_attributes.cpp).
const char* device_attribute(const Gpu& g, int attr, int* value);
const char* device_attribute_name(int attr);  // cudaDevAttrClockRate, ...
void install_rma_ends();     // where one-sided messages start and end (mpi.cpp, liborrery_smpi.so)
void install_message_copy();  // skip the data of MPI messages sent from folded memory

/* Fill a host destination after a device-to-host copy, per the fill policy. */
void apply_d2h_fill(void* dst, uint64_t width, uint64_t pitch, uint64_t rows);

}  // namespace orrery
#pragma GCC visibility pop

#endif
