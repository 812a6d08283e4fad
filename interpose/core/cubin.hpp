/* What a kernel's compiled code says of its resources: registers, static shared memory, local
 * memory, parameter bytes, its launch bounds and barriers, as ptxas wrote them into the cubin
 * that nvcc embeds in the program (its fat binary). cudaFuncGetAttributes and the occupancy
 * calls answer from them (cudart/function.cpp); nothing here runs on a GPU. The initial values of
 * the code's variables come from there too (read_variable, for __managed__ variables).
 *
 * A fat binary holds a cubin per real architecture it was built for (-arch=sm_90, -gencode ...)
 * and PTX; the GPU runs the cubin of its own architecture (the highest sm_XY of its major
 * version, Y at most its minor), or compiles PTX at load. The resources of code compiled at
 * load are not in the program, so a kernel without a cubin for the GPU has none here. */
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace orrery {

struct KernelResources {
  int registers = 0;            // per thread (EIATTR_REGCOUNT)
  size_t static_shared = 0;     // bytes of __shared__ variables (ptxas's "bytes smem")
  size_t local_bytes = 0;       // stack frame per thread (EIATTR_FRAME_SIZE)
  size_t param_bytes = 0;       // the kernel's parameters (EIATTR_CBANK_PARAM_SIZE)
  int launch_bound_threads = 0;  // __launch_bounds__ / .maxntid, threads per block; 0: none
  int barriers = 0;             // named barriers it uses (ptxas's "used N barriers")
  int binary_version = 0;       // the cubin's architecture, e.g. 90
  int ptx_version = 0;          // the virtual architecture it was compiled from, e.g. 90
};

/* The kernels of one fat binary (the image __cudaRegisterFatBinary is given), by mangled name, as
 * its cubin for a GPU of compute capability major.minor describes them; `why` says why there
 * are none (no cubin for that GPU, a compressed one, an image Orrery cannot read). */
struct FatbinKernels {
  std::map<std::string, KernelResources> kernels;
  std::string why;
  std::string ptx;      // without a cubin for the GPU: the PTX it would compile (the highest at most its own)
  bool no_code = false;  // neither a cubin for the GPU nor PTX: a real GPU cannot run its kernels
};
FatbinKernels read_fatbin(const void* wrapper, int major, int minor, size_t reserved_shared);

/* The driver's JIT (core/jit.cpp): ptxas's cubin of `ptx` for sm_<sm> with ptxas's `options`, into
 * `cubin`; false with ptxas's message (naming its input as the driver does) in `why`. Each text
 * is compiled once per process (every rank's copy of a program carries the same). Where no ptxas
 * is available (jit_available), why_no_jit says so. */
bool jit_available();
std::string why_no_jit();
bool jit(const std::string& ptx, const std::string& options, int sm, std::string& cubin, std::string& why);

/* A module's image as the driver's cuModuleLoadData is given it: a fat binary (or nvcc's wrapper of
 * one), a cubin, or PTX text. Loaded: its kernels by mangled name, with their resources where it
 * holds a cubin the GPU runs (has_code); else their names only, from the PTX a real driver compiles
 * as it loads (ptx holds it, and `why` says so). Invalid, NoBinaryForGpu: `why` says what is wrong
 * (CUDA_ERROR_INVALID_IMAGE, CUDA_ERROR_NO_BINARY_FOR_GPU); Unreadable: a real driver would load
 * it, but Orrery cannot read it (an older compression). */
struct ModuleImage {
  enum Status { Loaded, Invalid, NoBinaryForGpu, Unreadable } status = Invalid;
  std::map<std::string, KernelResources> kernels;
  bool has_code = false;
  std::string cubin;  // the cubin the GPU runs (has_code), for its variables
  std::string ptx;
  std::string why;
};
ModuleImage read_module(const void* image, int major, int minor, size_t reserved_shared);

/* A variable of a cubin (a module's __device__ or __constant__ variable) by name: its initial
 * bytes, as many as its size (zeros without an initialiser); false when the cubin has no variable
 * of that name. */
bool cubin_variable(const std::string& cubin, const std::string& name, std::vector<unsigned char>& bytes);

/* The initial bytes of the variable `name` (its symbol, `size` bytes) in the cubin of the same fat
 * binary that a GPU of compute capability major.minor runs: its initialiser (.nv.global.init), or
 * zeros for one without (.nv.global). False, with `why`, when they cannot be read. A __managed__
 * variable's host code reads them (cudart/launch.cpp). */
bool read_variable(const void* wrapper, int major, int minor, const std::string& name, size_t size,
                   std::vector<unsigned char>& bytes, std::string& why);

}  // namespace orrery
