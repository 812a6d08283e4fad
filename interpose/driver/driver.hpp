/* What the driver calls' files share (libcuda.so.1): contexts as handles, and the runtime's
 * answers (runtime_bridge.h). The driver stand-in keeps no state of its own. */
#ifndef ORRERY_DRIVER_HPP
#define ORRERY_DRIVER_HPP

#include "driver/driver_api.h"
#include "driver/runtime_bridge.h"

namespace orrery_driver {

/* A device's primary context, as a handle: the address of its slot in a table of this library
 * (programs only compare and pass contexts). The rank's device numbers index it. */
constexpr int kMaxDevices = 256;
CUcontext primary_context(const char* fn, int device);
int device_of_context(CUcontext ctx);  // -1: not a primary context
bool valid_device(const char* fn, CUdevice dev);

}  // namespace orrery_driver

#endif
