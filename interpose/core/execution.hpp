/* Executing a stream's operation (execution.cpp), for the stream's actor and the simulation's
 * kernel (streams.cpp). */
#ifndef ORRERY_EXECUTION_HPP
#define ORRERY_EXECUTION_HPP

#include "core/runtime.hpp"

namespace orrery {

void execute(Stream* s, Op& op);  // in the stream's actor: returns when the operation is complete

/* An event's record, a wait for events, a stream-ordered free: once their dependencies are met,
 * operations that take no time and make no simcall, which execute() completes at once wherever it
 * runs, SimGrid's kernel included (streams.cpp). */
bool completes_at_once(const Op& op);

/* A stream's kernels, memsets and copies whose dependencies are met, and whose copy engine is
 * free, run without its actor: as activities that the simulation's kernel starts and completes
 * (streams.cpp). start_without_worker, in the kernel and for an operation whose dependencies are
 * met, starts the operation so (traced as begun,
 * its engine taken) and hands its activity to `started`, at once or, for a copy whose measured
 * latency exceeds its route's, after that wait (a timer of the kernel's); or it returns false and
 * changes nothing: the worker runs the operation. finish_without_worker does its accounting once
 * it completes, having run from t0. */
bool start_without_worker(Stream* s, const Op& op, void (*started)(Stream*, sg4::ActivityPtr));
void finish_without_worker(Stream* s, const Op& op, double t0);

/* A GPU's copy engines (streams.cpp): the worker waits for one (it takes the stream's actor),
 * the kernel takes one only if one is free, and whoever has one gives it back, to the first
 * stream waiting if any. */
void acquire_engine(Stream* s, CopyEngines& engines);
void release_engine(CopyEngines& engines);

}  // namespace orrery

#endif
