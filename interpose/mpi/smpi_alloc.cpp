/* liborrery_alloc.so: one allocator for the whole process, SMPI's copies of the program included.
 *
 * SMPI runs each rank in a copy of the program that it loads with RTLD_DEEPBIND: the copy's own
 * references to malloc and free bind to the first definition among its own dependencies (glibc's),
 * not to the allocator the process runs with (mimalloc, which `orrery run` preloads, or one the
 * user preloads). Code SMPI's compilers build gets SMPI's malloc macros and reaches the process's
 * allocator; code the wrappers do not compile that way (nvcc's host code, a Makefile's plain
 * $(CXX), a library) does not. A pointer then crosses the two: strdup's, getline's or fscanf
 * "%ms"'s buffer (the process's allocator) freed by glibc's free aborts or corrupts the heap.
 *
 * The wrappers link this library first into every program (orrery/run/build.py, link_args): in a
 * copy's scope it comes before glibc, and each entry point forwards to the process's own, which it
 * finds in the global scope (the scope of SMPI's launcher, which the copies' libraries are not
 * part of: mimalloc, an allocator the user preloads, or glibc's) at the first call of any of them
 * or at its constructor, whichever comes first. A library loaded with the first copy may allocate
 * in its own constructor before this library's runs: a rank's private copy of libgfortran
 * (launch.py, smpi/privatize-libs) makes its standard units there and frees them at exit, which
 * with glibc's malloc then and mimalloc's free at exit crashed the process as it ended. The
 * lookups do not come back here: the dynamic loader's own allocations use the global scope's
 * allocator. `orrery run` preloads mimalloc only into programs that link this library
 * (launch.py). */
#include <dlfcn.h>

#include <atomic>
#include <cstddef>

extern "C" {
void* __libc_malloc(size_t);
void __libc_free(void*);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
void* __libc_valloc(size_t);
void* __libc_pvalloc(size_t);
}

namespace {

void* glibc_reallocarray(void* p, size_t n, size_t size) {
  size_t bytes;
  return __builtin_mul_overflow(n, size, &bytes) ? nullptr : __libc_realloc(p, bytes);
}
int glibc_posix_memalign(void** out, size_t alignment, size_t size) {
  void* p = __libc_memalign(alignment, size);
  if (!p)
    return 12;  // ENOMEM
  *out = p;
  return 0;
}
void* glibc_aligned_alloc(size_t alignment, size_t size) { return __libc_memalign(alignment, size); }

struct Allocator {
  void* (*malloc)(size_t) = __libc_malloc;
  void (*free)(void*) = __libc_free;
  void* (*calloc)(size_t, size_t) = __libc_calloc;
  void* (*realloc)(void*, size_t) = __libc_realloc;
  void* (*reallocarray)(void*, size_t, size_t) = glibc_reallocarray;
  void* (*memalign)(size_t, size_t) = __libc_memalign;
  int (*posix_memalign)(void**, size_t, size_t) = glibc_posix_memalign;
  void* (*aligned_alloc)(size_t, size_t) = glibc_aligned_alloc;
  void* (*valloc)(size_t) = __libc_valloc;
  void* (*pvalloc)(size_t) = __libc_pvalloc;
  size_t (*malloc_usable_size)(void*) = nullptr;  // glibc's, found at load
};
Allocator g;  // constant-initialised: usable before any constructor runs
std::atomic<bool> bound{false};  // g holds the process's allocator

// Whether `f` is defined in this library (not by address: taking the address of this library's
// own `free` would give the global scope's, which may be another allocator's).
bool ours(void* f) {
  static const int here = 0;
  Dl_info a, b;
  return dladdr(f, &a) && dladdr(&here, &b) && a.dli_fbase == b.dli_fbase;
}

// The process's definition of `name`: the global scope's (SMPI's launcher, its preloads, their
// libraries). Not RTLD_DEFAULT: from a library of a copy, that searches the copy's scope first.
template <typename F>
void bind(void* global, F& slot, const char* name) {
  void* f = global ? dlsym(global, name) : nullptr;
  if (!f || ours(f))
    f = dlsym(RTLD_NEXT, name);
  if (f && !ours(f))
    slot = reinterpret_cast<F>(f);
}

// g bound to the process's allocator (once; two threads binding at once find the same one).
void find_the_process_allocator() {
  if (bound.load(std::memory_order_acquire))
    return;
  Allocator found;
  void* global = dlopen(nullptr, RTLD_LAZY | RTLD_NOLOAD);  // the launcher's own scope
  bind(global, found.malloc, "malloc");
  bind(global, found.free, "free");
  bind(global, found.calloc, "calloc");
  bind(global, found.realloc, "realloc");
  bind(global, found.reallocarray, "reallocarray");
  bind(global, found.memalign, "memalign");
  bind(global, found.posix_memalign, "posix_memalign");
  bind(global, found.aligned_alloc, "aligned_alloc");
  bind(global, found.valloc, "valloc");
  bind(global, found.pvalloc, "pvalloc");
  bind(global, found.malloc_usable_size, "malloc_usable_size");
  g = found;
  bound.store(true, std::memory_order_release);
  if (global)
    dlclose(global);
}

const Allocator& process() {
  find_the_process_allocator();
  return g;
}

__attribute__((constructor)) void bind_at_load() { find_the_process_allocator(); }

}  // namespace

extern "C" {
__attribute__((visibility("default"))) void* malloc(size_t n) { return process().malloc(n); }
__attribute__((visibility("default"))) void free(void* p) { process().free(p); }
__attribute__((visibility("default"))) void* calloc(size_t n, size_t size) { return process().calloc(n, size); }
__attribute__((visibility("default"))) void* realloc(void* p, size_t n) { return process().realloc(p, n); }
__attribute__((visibility("default"))) void* reallocarray(void* p, size_t n, size_t size) {
  return process().reallocarray(p, n, size);
}
__attribute__((visibility("default"))) void* memalign(size_t alignment, size_t n) {
  return process().memalign(alignment, n);
}
__attribute__((visibility("default"))) int posix_memalign(void** out, size_t alignment, size_t n) {
  return process().posix_memalign(out, alignment, n);
}
__attribute__((visibility("default"))) void* aligned_alloc(size_t alignment, size_t n) {
  return process().aligned_alloc(alignment, n);
}
__attribute__((visibility("default"))) void* valloc(size_t n) { return process().valloc(n); }
__attribute__((visibility("default"))) void* pvalloc(size_t n) { return process().pvalloc(n); }
__attribute__((visibility("default"))) size_t malloc_usable_size(void* p) {
  const Allocator& a = process();
  return a.malloc_usable_size ? a.malloc_usable_size(p) : 0;
}
}
