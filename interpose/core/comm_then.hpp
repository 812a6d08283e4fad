/* A comm started in SimGrid's kernel and what to do when it completes: the NCCL schedules'
 * transfers (nccl/schedules.cpp, in the shim) and the collectives liborrery_smpi.so runs in the
 * kernel (mpi/smpi_colls.cpp). Header-only: each library keeps its own extension and callback.
 *
 * The comm holds itself until it completes, and the last one completed is kept until the next
 * completes: SimGrid goes on using a comm after its completion callbacks. */
#pragma once

#include <simgrid/s4u.hpp>

#include <functional>
#include <utility>

namespace orrery::kernel_comms {

struct OnDone {
  std::function<void()> then;
  simgrid::s4u::ActivityPtr self;
};

inline const simgrid::xbt::Extension<simgrid::s4u::Activity, OnDone>& on_done() {
  static const auto extension = simgrid::s4u::Activity::extension_create<OnDone>();
  return extension;
}

inline void on_comm_done(const simgrid::s4u::Activity& a) {
  OnDone* d = a.extension(on_done());
  if (!d || !d->self)
    return;
  static auto* last = new simgrid::s4u::ActivityPtr;  // never destroyed: not after SimGrid's end
  *last = std::move(d->self);
  std::function<void()> then = std::move(d->then);
  then();
}

// `then` once `comm` (started in the kernel) completes, in the kernel
inline void comm_then(simgrid::s4u::ActivityPtr comm, std::function<void()> then) {
  static bool connected = false;
  if (!connected) {
    simgrid::s4u::Activity::on_completion_cb(on_comm_done);
    connected = true;
  }
  comm->extension_set(on_done(), new OnDone{std::move(then), comm});
}

}  // namespace orrery::kernel_comms
