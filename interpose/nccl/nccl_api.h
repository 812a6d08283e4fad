/* Every row of nccl_api.def declared with the row's signature (as cudart/cuda_api.h does for the
 * CUDA runtime), so that a definition that differs from its row does not compile; and the
 * attribute that exports a definition from libnccl.so.2 (built with hidden visibility). */
#ifndef ORRERY_NCCL_API_H
#define ORRERY_NCCL_API_H

#include "cudart/cuda_abi.h"
#include "nccl/nccl_abi.h"

#define ORR_NCCL_EXPORT extern "C" __attribute__((visibility("default")))

#define ORR_NCCL(name, ret, params, args, family, policy) extern "C" ret name params;
#include "nccl/nccl_api.def"
#undef ORR_NCCL

#endif
