/* Modules a program loads through the driver (cuModuleLoad*, cuLibraryLoad*: driver/module.cpp),
 * held here beside the kernels nvcc's host code registers, so that a module's kernel is launched,
 * timed, checked and queried as any other (cudart/launch.cpp, cudart/function.cpp): its handle
 * (CUfunction, and CUkernel, which is the same handle here) is the key a registered kernel's stub
 * is. Exported to libcuda.so.1 under ORRERY_PRIVATE (driver/runtime_bridge.h).
 *
 * A module belongs to the rank that loaded it (its context). Its image is read as the GPU's driver
 * would (core/cubin.hpp): the cubin the GPU runs out of a fat binary, or a cubin, or PTX, which the
 * driver compiles for the GPU as the module loads: here the CUDA toolkit's ptxas does, when
 * `orrery run` found one (ORRERY_PTXAS), so that the kernels' resources are the compiled code's.
 * Loading costs no simulated time. */
#include "core/cubin.hpp"
#include "core/runtime.hpp"
#include "driver/runtime_bridge.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <sstream>

extern char** environ;

namespace orrery {
namespace {

struct Module;
struct Function {  // a CUfunction: the address of one of these
  Module* module;
  std::string mangled;
};
struct Module {  // a CUmodule (and CUlibrary): the address of one of these
  int owner;     // the rank that loaded it
  ModuleImage image;
  std::vector<std::unique_ptr<Function>> functions;  // by mangled name (the image's map's order)
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

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

/* ptxas's cubin of `ptx` for sm_<sm>, as the driver's JIT compiles it, into `cubin`; false with
 * ptxas's message in `why`. Each text is compiled once per process (every rank loads the same). */
bool jit(const char* ptxas, const std::string& options, const std::string& ptx, int sm, std::string& cubin,
         std::string& why) {
  // by architecture, options and text -> the cubin, or why there is none
  static std::map<std::string, std::pair<std::string, std::string>> compiled;
  std::string key = std::to_string(sm) + options + '\0' + ptx;
  auto it = compiled.find(key);
  if (it == compiled.end()) {
    const char* tmp = getenv("TMPDIR");
    std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/orrery-jit-XXXXXX";
    std::string result, message;
    if (!mkdtemp(dir.data())) {
      message = "cannot make a folder for ptxas in " + dir.substr(0, dir.rfind('/')) + ": " + strerror(errno);
    } else {
      std::string in = dir + "/module.ptx", out = dir + "/module.cubin", log = dir + "/ptxas.log";
      std::ofstream(in, std::ios::binary) << ptx;
      std::string arch = "-arch=sm_" + std::to_string(sm);
      std::vector<std::string> words{ptxas, arch};
      std::istringstream extra(options);
      for (std::string w; extra >> w;)
        words.push_back(w);
      for (const std::string& w : {std::string("-o"), out, in})
        words.push_back(w);
      std::vector<char*> argv;
      for (std::string& w : words)
        argv.push_back(w.data());
      argv.push_back(nullptr);
      posix_spawn_file_actions_t actions;
      posix_spawn_file_actions_init(&actions);
      posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      posix_spawn_file_actions_adddup2(&actions, 1, 2);
      pid_t pid;
      int status = 0;
      int e = posix_spawn(&pid, ptxas, &actions, nullptr, argv.data(), environ);
      posix_spawn_file_actions_destroy(&actions);
      if (e != 0)
        message = std::string("cannot run ") + ptxas + ": " + strerror(e);
      else if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        // ptxas names its input as the driver's JIT does, not by the temporary file
        message = read_file(log);
        for (size_t at; (at = message.find(in)) != std::string::npos;)
          message.replace(at, in.size(), "application ptx input");
        while (!message.empty() && isspace((unsigned char)message.back()))
          message.pop_back();
        if (message.empty())
          message = "ptxas " + arch + options + " failed";
      } else {
        result = read_file(out);
      }
      for (const std::string& f : {in, out, log})
        unlink(f.c_str());
      rmdir(dir.c_str());
    }
    it = compiled.emplace(key, std::make_pair(result, message)).first;
  }
  cubin = it->second.first;
  why = it->second.second;
  return why.empty();
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
    const char* ptxas = getenv("ORRERY_PTXAS");
    std::string cubin, why;
    if (!ptxas || !*ptxas) {
      m.why += ", and Orrery found no ptxas to compile it (orrery run looks beside nvcc)";
    } else if (!jit(ptxas, ptxas_options ? ptxas_options : "", m.ptx, p.major * 10 + p.minor, cubin, why)) {
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
  if (out) {
    if (*count != m->functions.size())
      return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < m->functions.size(); i++)
      out[i] = (CUfunction)m->functions[i].get();
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
