/* The driver's JIT (cubin.hpp): PTX compiled for the simulated GPU by the CUDA toolkit's ptxas, as
 * a real driver compiles it when a program carries no code for its GPU, or loads a module of PTX.
 * `orrery run` names the ptxas beside the nvcc it finds (ORRERY_PTXAS; empty: none). ptxas runs
 * in a folder of its own under TMPDIR, outside the simulation: its time is the host's, not the
 * simulated program's (a real driver caches what it compiled, so a program pays it once). */
#include "core/cubin.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <vector>

extern char** environ;

namespace orrery {
namespace {

const char* ptxas() {
  static const char* path = [] {
    const char* p = getenv("ORRERY_PTXAS");
    return p && *p ? p : nullptr;
  }();
  return path;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

}  // namespace

bool jit_available() { return ptxas() != nullptr; }

std::string why_no_jit() { return "Orrery found no ptxas to compile it (orrery run looks beside nvcc)"; }

bool jit(const std::string& ptx, const std::string& options, int sm, std::string& cubin, std::string& why) {
  const char* compiler = ptxas();
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
      std::vector<std::string> words{compiler, arch};
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
      int e = posix_spawn(&pid, compiler, &actions, nullptr, argv.data(), environ);
      posix_spawn_file_actions_destroy(&actions);
      if (e != 0)
        message = std::string("cannot run ") + compiler + ": " + strerror(e);
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

}  // namespace orrery
