/* What NVML's stand-in's families share (system.cpp, devices.cpp): whether the calling rank has
 * initialised NVML, and its device handles. */
#ifndef ORRERY_NVML_HPP
#define ORRERY_NVML_HPP

#include "nvml/nvml_api.h"

#include <cstdint>
#include <cstring>

namespace orrery_nvml {

// NVML_SUCCESS where the calling rank (a process, as under a real MPI) has initialised NVML and not
// shut it down as often, else NVML_ERROR_UNINITIALIZED.
nvmlReturn_t initialised(const char* fn);

/* A device handle: the GPU's index in the node, plus one (a handle is never null). Handles are the
 * same in every rank of a node, as NVML's are per process for one machine. */
inline nvmlDevice_t handle_of(int index) { return reinterpret_cast<nvmlDevice_t>((uintptr_t)index + 1); }
inline int index_of(nvmlDevice_t device) { return (int)(reinterpret_cast<uintptr_t>(device) - 1); }

// `text` into the caller's buffer of `length` bytes, as NVML's string queries fill theirs.
inline nvmlReturn_t copy_string(const char* text, char* out, unsigned int length) {
  if (!out)
    return NVML_ERROR_INVALID_ARGUMENT;
  if (length < strlen(text) + 1)
    return NVML_ERROR_INSUFFICIENT_SIZE;
  memcpy(out, text, strlen(text) + 1);
  return NVML_SUCCESS;
}

}  // namespace orrery_nvml

#endif
