/* Every row of driver_api.def declared with the row's signature. Each family's file includes
 * this before it defines its calls, so a definition that differs from its row fails to compile. */
#ifndef ORRERY_DRIVER_API_H
#define ORRERY_DRIVER_API_H

#include "driver/cuda_driver_abi.h"

#define ORR_EXPORT extern "C" __attribute__((visibility("default")))

#define ORR_CU(name, ret, params, args, family, policy) extern "C" ret name params;
#include "driver/driver_api.def"
#undef ORR_CU

namespace orrery_driver {
/* cuGetProcAddress's table (generated into driver_exports.cpp from cuda13_driver_versions.txt):
 * each versioned entry point, by base name and the CUDA version that introduced it. */
struct ProcEntry {
  const char* base;  // with _ptds/_ptsz for a per-thread-default-stream variant
  int version;
  void* function;
};
extern const ProcEntry kProcs[];
extern const unsigned kProcCount;
}  // namespace orrery_driver

#endif
