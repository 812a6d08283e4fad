/* Modules a program loads through the driver (cuModuleLoad*, cuLibraryLoad*: driver/module.cpp),
 * held here beside the kernels nvcc's host code registers, so that a module's kernel is launched,
 * timed, checked and queried as any other (cudart/launch.cpp, cudart/function.cpp): its handle
 * (CUfunction, and CUkernel, which is the same handle here) is the key a registered kernel's stub
 * is. Exported to libcuda.so.1 under ORRERY_PRIVATE (driver/runtime_bridge.h).
 *
 * A module belongs to the rank that loaded it (its context). Its image is read as the GPU's driver
 * would (core/cubin.hpp): the cubin the GPU runs out of a fat binary, or a cubin, or PTX, which the
 * driver compiles for the GPU as the module loads: here the CUDA toolkit's ptxas does (core/jit.cpp),
 * so that the kernels' resources are the compiled code's.
 * Loading costs no simulated time. */
#include "core/cubin.hpp"
#include "core/runtime.hpp"
#include "driver/runtime_bridge.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>

namespace orrery {
namespace {

struct Module;
struct Function {  // a CUfunction: the address of one of these
  Module* module;
  std::string mangled;
};
struct Module {  // a CUmodule (and CUlibrary): the address of one of these
  int owner;     // the rank that loaded it
  Gpu* gpu;      // the GPU it was loaded for (its context's)
  ModuleImage image;
  std::vector<std::unique_ptr<Function>> functions;  // by mangled name (the image's map's order)
  std::map<std::string, std::pair<void*, size_t>> globals;  // its variables' device memory, once asked for
};

std::map<const void*, std::unique_ptr<Module>>& modules() {
  static std::map<const void*, std::unique_ptr<Module>> m;
  return m;
}

std::map<const void*, Function*>& functions() {
  static std::map<const void*, Function*> f;
  return f;
}

Module* module_of(const Rank& r, const void* handle) {
  auto it = modules().find(handle);
  return it == modules().end() || it->second->owner != r.id ? nullptr : it->second.get();
}

Function* function_of(const Rank& r, const void* handle) {
  auto it = functions().find(handle);
  return it == functions().end() || it->second->module->owner != r.id ? nullptr : it->second;
}

std::string load_log;  // what the last load said went wrong (the JIT's error log), until the next load

}  // namespace
}  // namespace orrery

using namespace orrery;

ORR_EXPORT CUresult orrery_private_module_load(const char* fn, const void* image, const char* ptxas_options,
                                               CUmodule* out, const char** log) {
  Rank& r = rank_self(fn);
  const cudaDeviceProp& p = current_gpu(r).prop;
  ModuleImage m = read_module(image, p.major, p.minor, p.reservedSharedMemPerBlock);
  auto failed = [&](CUresult e, const std::string& why) {
    load_log = why;
    if (log)
      *log = load_log.c_str();
    return e;
  };
  switch (m.status) {
    case ModuleImage::Invalid: return failed(CUDA_ERROR_INVALID_IMAGE, m.why);
    case ModuleImage::NoBinaryForGpu: return failed(CUDA_ERROR_NO_BINARY_FOR_GPU, m.why);
    case ModuleImage::Unreadable: fatal("%s: the module's image: %s", fn, m.why.c_str());
    case ModuleImage::Loaded: break;
  }
  if (!m.ptx.empty()) {
    std::string cubin, why;
    if (!jit_available()) {
      m.why += ", and " + why_no_jit();
    } else if (!jit(m.ptx, ptxas_options ? ptxas_options : "", p.major * 10 + p.minor, cubin, why)) {
      return failed(CUDA_ERROR_INVALID_PTX, why);
    } else {
      ModuleImage compiled = read_module(cubin.c_str(), p.major, p.minor, p.reservedSharedMemPerBlock);
      if (compiled.status != ModuleImage::Loaded)
        fatal("%s: the cubin ptxas compiled of the module's PTX: %s", fn, compiled.why.c_str());
      m = std::move(compiled);
    }
  }
  auto module = std::make_unique<Module>();
  module->owner = r.id;
  module->gpu = &current_gpu(r);
  module->image = std::move(m);
  for (auto& [name, resources] : module->image.kernels) {
    auto f = std::make_unique<Function>(Function{module.get(), name});
    Kernel& k = register_kernel(f.get(), name);
    k.code = module->image.has_code ? &resources : nullptr;
    k.code_looked_up = true;
    if (!module->image.has_code)
      k.no_code = module->image.why;
    functions()[f.get()] = f.get();
    module->functions.push_back(std::move(f));
  }
  *out = (CUmodule)module.get();
  modules()[module.get()] = std::move(module);
  return CUDA_SUCCESS;
}

ORR_EXPORT CUresult orrery_private_module_unload(const char* fn, CUmodule handle) {
  Rank& r = rank_self(fn);
  Module* m = module_of(r, handle);
  if (!m)
    return CUDA_ERROR_INVALID_HANDLE;
  for (const auto& f : m->functions) {
    unregister_kernel(f.get());
    functions().erase(f.get());
  }
  for (const auto& [name, global] : m->globals)
    free_module_memory(global.first);
  modules().erase(handle);
  return CUDA_SUCCESS;
}

ORR_EXPORT CUresult orrery_private_module_function(const char* fn, CUmodule handle, const char* name,
                                                   CUfunction* out) {
  Module* m = module_of(rank_self(fn), handle);
  if (!m)
    return CUDA_ERROR_INVALID_HANDLE;
  for (const auto& f : m->functions)
    if (f->mangled == name) {
      *out = (CUfunction)f.get();
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_NOT_FOUND;
}

ORR_EXPORT CUresult orrery_private_module_functions(const char* fn, CUmodule handle, CUfunction* out,
                                                    unsigned* count) {
  Module* m = module_of(rank_self(fn), handle);
  if (!m)
    return CUDA_ERROR_INVALID_HANDLE;
  if (out) {  // at most *count of them
    for (size_t i = 0; i < m->functions.size() && i < *count; i++)
      out[i] = (CUfunction)m->functions[i].get();
    return CUDA_SUCCESS;
  }
  *count = (unsigned)m->functions.size();
  return CUDA_SUCCESS;
}

ORR_EXPORT CUresult orrery_private_function_module(const char* fn, const void* function, CUmodule* out) {
  Function* f = function_of(rank_self(fn), function);
  if (!f)
    return CUDA_ERROR_INVALID_HANDLE;
  if (out)
    *out = (CUmodule)f->module;
  return CUDA_SUCCESS;
}

ORR_EXPORT CUresult orrery_private_function_check(const char* fn, const void* function, bool needs_code) {
  Rank& r = rank_self(fn);
  Kernel* k = registered_kernel(function);
  if (!k || (functions().count(function) && !function_of(r, function)))
    return CUDA_ERROR_INVALID_HANDLE;
  if (needs_code && !k->code && !k->no_code.empty())
    fatal("%s: kernel '%s': its resources are not known: %s", fn, k->name.c_str(), k->no_code.c_str());
  return CUDA_SUCCESS;
}

/* A module's variable (cuModuleGetGlobal): device memory of its size on the module's GPU, holding
 * its initial value, made the first time it is asked for and kept until the module is unloaded. */
ORR_EXPORT CUresult orrery_private_module_global(const char* fn, CUmodule handle, const char* name, CUdeviceptr* out,
                                                 size_t* bytes) {
  Rank& r = rank_self(fn);
  Module* m = module_of(r, handle);
  if (!m)
    return CUDA_ERROR_INVALID_HANDLE;
  auto it = m->globals.find(name);
  if (it == m->globals.end()) {
    if (!m->image.has_code)
      fatal("%s: variable '%s': %s", fn, name, m->image.why.c_str());
    std::vector<unsigned char> initial;
    if (!cubin_variable(m->image.cubin, name, initial))
      return CUDA_ERROR_NOT_FOUND;
    void* p = allocate_module_memory(*m->gpu, initial.size(), fn, r.id);
    if (!p)
      return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(p, initial.data(), initial.size());
    it = m->globals.emplace(name, std::make_pair(p, initial.size())).first;
  }
  if (out)
    *out = (CUdeviceptr)it->second.first;
  if (bytes)
    *bytes = it->second.second;
  return CUDA_SUCCESS;
}
