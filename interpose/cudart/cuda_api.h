/* Every row of cuda_api.def declared with the row's signature. Each family's file includes
 * this before it defines its calls, so a definition that differs from its row (a parameter,
 * the return type) fails to compile: two C functions of one name cannot differ. */
#ifndef ORRERY_CUDA_API_H
#define ORRERY_CUDA_API_H

#include "cudart/cuda_abi.h"

#define ORR_CUDA(name, ret, params, args, family, policy) extern "C" ret name params;
#include "cudart/cuda_api.def"
#undef ORR_CUDA

#endif
