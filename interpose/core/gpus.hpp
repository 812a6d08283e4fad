/* The simulated GPUs (gpus.cpp): the engine's parts that need a GPU by its host. */
#ifndef ORRERY_GPUS_HPP
#define ORRERY_GPUS_HPP

#include "core/runtime.hpp"

#include <string>

namespace orrery {

sg4::Host* host_by_name(const std::string& name);  // fatal if the platform has none
Gpu* gpu_of_host(sg4::Host* host);                 // the GPU that executes on a host (built once)

}  // namespace orrery

#endif
