/* Orrery's own errors: stop the whole simulation with one line naming the cause (fatal.cpp).
 * A program's failure (an exit, a crash, MPI_Abort) is not one: it ends the run by end_run
 * (outcome.cpp) and the report says how. */
#ifndef ORRERY_FATAL_HPP
#define ORRERY_FATAL_HPP

#pragma GCC visibility push(default)
namespace orrery {

[[noreturn]] void fatal(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
[[noreturn]] void unsupported(const char* function);
// Whether the caller runs on the simulation's thread, where every actor runs (not on a thread of
// the program's own: OpenMP's, std::thread's).
bool on_simulation_thread();

}  // namespace orrery
#pragma GCC visibility pop

/* For the sibling stand-ins (libnccl.so.2, libcuda.so.1), which link against libcudart.so.13 and
 * share its state: stops the run as orrery::unsupported does, naming the function and saying why
 * (one line). Exported under the private version node ORRERY_PRIVATE (gen_exports.py's
 * PRIVATE_NODE: every orrery_private_* function), which no program links against. */
extern "C" [[noreturn]] __attribute__((visibility("default"))) void orrery_private_refuse(const char* function,
                                                                                   const char* reason);

#endif
