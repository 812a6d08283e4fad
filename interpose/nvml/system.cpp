/* NVML's initialisation, errors and versions (nvml_api.def's system family).
 *
 * nvmlInit counts, per rank (each rank is a process of its own under a real MPI), and nvmlShutdown
 * counts down; calls made before it, or after the last shutdown, get NVML_ERROR_UNINITIALIZED, as
 * from the real library. The versions are those of CUDA 13.0's first driver, as the driver and
 * runtime stand-ins answer cuDriverGetVersion and cudaDriverGetVersion (13000): 580.65.06, the
 * minimum Linux driver CUDA 13.0's release notes name, and NVML's "13.580.65.06". */
#include "nvml/nvml.hpp"

#include "core/ranks.hpp"

#include <map>

namespace orrery_nvml {

namespace {
constexpr char kDriverVersion[] = "580.65.06";
constexpr char kNvmlVersion[] = "13.580.65.06";
constexpr int kCudaDriverVersion = 13000;

std::map<int, int>& init_counts() {  // rank -> nvmlInit calls not yet shut down
  static std::map<int, int> counts;
  return counts;
}

int& init_count(const char* fn) { return init_counts()[orrery::rank_self(fn).id]; }

nvmlReturn_t version_text(const char* fn, const char* text, char* out, unsigned int length) {
  if (nvmlReturn_t e = initialised(fn))
    return e;
  return copy_string(text, out, length);
}
}  // namespace

nvmlReturn_t initialised(const char* fn) { return init_count(fn) > 0 ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED; }

}  // namespace orrery_nvml

using namespace orrery_nvml;

// NVML_INIT_FLAG_NO_GPUS (1): succeed without GPUs; NVML_INIT_FLAG_NO_ATTACH (2): do not attach to
// them. Neither changes what the stand-in does.
constexpr unsigned kInitFlags = 0x1 | 0x2;

ORR_NVML_EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
  if (flags & ~kInitFlags)
    return NVML_ERROR_INVALID_ARGUMENT;
  init_count("nvmlInitWithFlags")++;
  return NVML_SUCCESS;
}
ORR_NVML_EXPORT nvmlReturn_t nvmlInit_v2(void) {
  init_count("nvmlInit_v2")++;
  return NVML_SUCCESS;
}
ORR_NVML_EXPORT nvmlReturn_t nvmlInit(void) {
  init_count("nvmlInit")++;
  return NVML_SUCCESS;
}

ORR_NVML_EXPORT nvmlReturn_t nvmlShutdown(void) {
  int& count = init_count("nvmlShutdown");
  if (count == 0)
    return NVML_ERROR_UNINITIALIZED;
  count--;
  return NVML_SUCCESS;
}

ORR_NVML_EXPORT const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {  // the real library's texts
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED: return "Already Initialized";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_INSUFFICIENT_POWER: return "Insufficient External Power";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_IRQ_ISSUE: return "Interrupt request issue";
    case NVML_ERROR_LIBRARY_NOT_FOUND: return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_CORRUPTED_INFOROM: return "Corrupted infoROM";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED: return "GPU requires restart";
    case NVML_ERROR_OPERATING_SYSTEM: return "GPU access blocked by the operating system";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "Driver/library version mismatch";
    case NVML_ERROR_IN_USE: return "In use by another client";
    case NVML_ERROR_MEMORY: return "Insufficient Memory";
    case NVML_ERROR_NO_DATA: return "No data";
    case NVML_ERROR_NOT_READY: return "System not ready";
    case NVML_ERROR_GPU_NOT_FOUND: return "No GPUs were found";
    case NVML_ERROR_UNKNOWN: return "Unknown Error";
    default: return "Unknown Error";
  }
}

ORR_NVML_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  return version_text("nvmlSystemGetDriverVersion", kDriverVersion, version, length);
}
ORR_NVML_EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char* version, unsigned int length) {
  return version_text("nvmlSystemGetNVMLVersion", kNvmlVersion, version, length);
}

static nvmlReturn_t cuda_driver_version(int* version) {
  if (!version)
    return NVML_ERROR_INVALID_ARGUMENT;
  *version = kCudaDriverVersion;
  return NVML_SUCCESS;
}
// (their documentation names no NVML_ERROR_UNINITIALIZED: they ask the CUDA driver, not NVML)
ORR_NVML_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* v) { return cuda_driver_version(v); }
ORR_NVML_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* v) { return cuda_driver_version(v); }
