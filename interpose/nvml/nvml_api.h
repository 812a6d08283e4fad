/* Every row of nvml_api.def declared with the row's signature (as cudart/cuda_api.h does for the
 * CUDA runtime), so that a definition that differs from its row does not compile; and the
 * attribute that exports a definition from libnvidia-ml.so.1 (built with hidden visibility). */
#ifndef ORRERY_NVML_API_H
#define ORRERY_NVML_API_H

#include "nvml/nvml_abi.h"

#define ORR_NVML_EXPORT extern "C" __attribute__((visibility("default")))

#define ORR_NVML(name, ret, params, args, family, policy) extern "C" ret name params;
#include "nvml/nvml_api.def"
#undef ORR_NVML

#endif
