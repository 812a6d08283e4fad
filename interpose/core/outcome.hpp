/* How the run ended (outcome.cpp; end_run and finish_rank are in runtime.hpp): the first failure
 * of the program, which the report's status row says. */
#ifndef ORRERY_OUTCOME_HPP
#define ORRERY_OUTCOME_HPP

#include "core/runtime.hpp"

#include <string>

namespace orrery {

struct Outcome {
  std::string status = "completed";
  int rank = -1;  // the rank concerned; -1: none
  int code = 0;   // exit status, MPI_Abort's error code, or signal
  double time_s = -1;
};
Outcome run_outcome();  // the failure recorded first, or a completion now

bool simulation_over();  // the report is written: what exits after it is SimGrid's normal end
void set_simulation_over();

void on_deadlock();              // SimGrid's on_deadlock
void install_failure_handlers(); // a rank's exit(), fatal signals
void install_limits();           // --sim-time-limit, --wall-time-limit
bool is_work(const Op& op);      // work that takes the GPU time (pending work ends a run)
// At a limit's stop (streams.cpp): the work the GPUs are running, accounted as ending now.
void account_work_in_flight();

}  // namespace orrery

#endif
