/* Driver entry points by name: cuGetProcAddress, which cudaGetDriverEntryPoint asks too. Every
 * versioned entry point libcuda.so.1 exports is found (generated table, from the CUDA 13 typedef
 * headers): a supported one answers, any other refuses by name when the program calls it, as if
 * the program had linked it. */
#include "driver/driver.hpp"

#include <algorithm>
#include <cstring>
#include <string>

using namespace orrery_driver;

/* The newest entry of `base` introduced at or before `version`; `exists` says whether `base`
 * has any entry at all. */
static const ProcEntry* newest(const std::string& base, int version, bool& exists) {
  const ProcEntry* end = kProcs + kProcCount;
  const ProcEntry* it = std::lower_bound(kProcs, end, base.c_str(),
                                         [](const ProcEntry& e, const char* b) { return strcmp(e.base, b) < 0; });
  const ProcEntry* found = nullptr;
  exists = false;
  for (; it != end && base == it->base; ++it) {
    exists = true;
    if (it->version <= version)
      found = it;  // sorted by version
  }
  return found;
}

static CUresult get_proc(const char* symbol, void** pfn, int version, cuuint64_t flags,
                         CUdriverProcAddressQueryResult* status) {
  if (!symbol || !pfn || flags > (CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))
    return CUDA_ERROR_INVALID_VALUE;
  orrery_private_device_count("cuGetProcAddress");  // a call from a rank, as every other
  bool exists = false, any = false;
  const ProcEntry* e = nullptr;
  if (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) {  // its per-thread variant if it has one
    for (const char* suffix : {"_ptds", "_ptsz"}) {
      if (!e)
        e = newest(std::string(symbol) + suffix, version, exists);
      any |= exists;
    }
  }
  if (!e)
    e = newest(symbol, version, exists);
  any |= exists;
  *pfn = e ? e->function : nullptr;
  if (status)
    *status = e ? CU_GET_PROC_ADDRESS_SUCCESS
              : any ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                    : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return e ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

ORR_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  return get_proc(symbol, pfn, version, flags, nullptr);
}

ORR_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                                        CUdriverProcAddressQueryResult* status) {
  return get_proc(symbol, pfn, version, flags, status);
}

/* NVIDIA's private tables of internal entry points, by UUID: none is Orrery's. NVRTC asks the
 * driver it loads for one and compiles without it. */
ORR_EXPORT CUresult cuGetExportTable(const void** table, const CUuuid* id) {
  if (!table || !id)
    return CUDA_ERROR_INVALID_VALUE;
  *table = nullptr;
  return CUDA_ERROR_INVALID_VALUE;
}
