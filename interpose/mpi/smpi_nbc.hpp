/* liborrery_smpi.so: non-blocking collectives on the blocking ones' algorithms, run in the kernel.
 * smpi_colls.cpp captures and runs a call's schedule (its in-kernel algorithms); smpi_nbc.cpp
 * holds the stand-ins, the requests and the data; smpi_reductions.cpp's stand-ins for
 * MPI_Iallreduce, MPI_Ireduce, Request::finish_nbc_requests and MPI_Request_free ask here first. */
#pragma once

#include <smpi/smpi.h>

#include <functional>
#include <memory>
#include <string>

namespace orrery_smpi::nbc {

/* ---- smpi_colls.cpp ---- */

struct Schedule;  // a rank's part of a non-blocking collective: its stages, run in the kernel

/* Runs `blocking_call` (the selector's blocking collective, on scratch buffers) with the kernel's
 * algorithms captured instead of run: the schedule, or nothing where SMPI's own code would post a
 * message (nothing has been posted then) or none of it runs in the kernel. */
std::shared_ptr<Schedule> capture(MPI_Comm comm, const std::function<void()>& blocking_call);
void start(const std::shared_ptr<Schedule>& schedule);  // posts the rank's part; returns at once
bool finished(const Schedule& schedule);
void wait(const std::shared_ptr<Schedule>& schedule);  // blocks the calling rank until it is finished
std::string stages_report();                           // the stages run, by algorithm
// Where SMPI constructs a request (smpi_pins.cpp): under a capture, throws (the call is SMPI's to run)
void before_request();
// Where SMPI frees a request (smpi_pins.cpp): true where it is one of a recording's (nulled here)
bool recorded_unref(void** request);  // an MPI_Request*

/* ---- smpi_nbc.cpp ---- */

// true where the call is run in the kernel (its request made here); false: SMPI's to run
bool iallreduce(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                MPI_Request* request);
bool ireduce(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm,
             MPI_Request* request);
// true where `request` is one of these (its completion, `*done`, answered here)
bool finish(MPI_Request* request, int test, int* done);
// true where `request` is one of these (the rank leaves the call: its messages go on)
bool release(MPI_Request request);
/* A send buffer handed to SMPI for an in-place non-blocking call (its own is freed as its entry
 * point returns), kept until `request` completes (completed) or, freed by the program, for the
 * rest of the run (freed): smpi_reductions.cpp's reductions and MPI_Ialltoall here. */
void keep_until_done(MPI_Request request, std::shared_ptr<void> buffer);
void completed(MPI_Request request);
void freed(MPI_Request request);
// Where SMPI constructs and frees a request (smpi_pins.cpp): the non-blocking collectives' are kept
void request_made(void* request, unsigned flags);
void request_freed(void* request);

}  // namespace orrery_smpi::nbc
