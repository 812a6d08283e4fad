/* Executing a stream's operation (execution.cpp), for the stream's actor (streams.cpp). */
#ifndef ORRERY_EXECUTION_HPP
#define ORRERY_EXECUTION_HPP

#include "core/runtime.hpp"

namespace orrery {

void execute(Stream* s, Op& op);  // in the stream's actor: returns when the operation is complete

/* A stream's kernels and memsets whose dependencies are met run without its actor: as executions
 * that the simulation's kernel starts and completes (streams.cpp). */
bool runs_on_gpu_alone(const Op& op);
sg4::ExecPtr gpu_execution(Stream* s, const Op& op);  // not yet started (traced as begun)
void finish_on_gpu(Stream* s, const Op& op, double t0);  // its accounting, at its completion

}  // namespace orrery

#endif
