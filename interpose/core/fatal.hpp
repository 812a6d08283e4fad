/* Orrery's own errors: stop the whole simulation with one line naming the cause (fatal.cpp).
 * A program's failure (an exit, a crash, MPI_Abort) is not one: it ends the run by end_run
 * (outcome.cpp) and the report says how. */
#ifndef ORRERY_FATAL_HPP
#define ORRERY_FATAL_HPP

namespace orrery {

[[noreturn]] void fatal(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
[[noreturn]] void unsupported(const char* function);

}  // namespace orrery

#endif
