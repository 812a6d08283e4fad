/* A program whose CUDA calls would bypass Orrery stops before its first simulated second.
 *
 * nvcc links the CUDA runtime statically by default, so a prebuilt library (`nvcc -shared -o
 * libkernels.so`), a static archive, or a link line naming libcudart_static.a as a file gives
 * an object a private copy of the runtime. Its calls bind to that copy (the copy's symbols are
 * hidden, so the dynamic linker never offers Orrery's instead) and never reach the stand-in: the
 * program would run with those kernels and copies missing from the simulated clock and report a
 * plausible, wrong time. Each loaded object's file is read for the runtime's own entry points
 * defined inside it; a stripped object that carries kernels (a .nv_fatbin section) but does not
 * import the registration call from a shared runtime has one too. */
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xbt/config.hpp>

#include <cstring>
#include <string>

#include "core/runtime.hpp"

namespace orrery {
namespace {

// Every CUDA runtime defines cudaMalloc; nvcc's host stubs call __cudaRegisterFatBinary at start-up.
constexpr const char* kEntryPoints[] = {"cudaMalloc", "__cudaRegisterFatBinary"};

bool is_entry_point(const char* name) {
  for (const char* e : kEntryPoints)
    if (strcmp(name, e) == 0)
      return true;
  return false;
}

// What an ELF file says about its CUDA runtime: which entry point it defines itself (nullptr:
// none), whether it has kernels, and whether it imports their registration.
struct Runtime {
  const char* defined = nullptr;
  bool kernels = false;
  bool imports_registration = false;
};

Runtime read_runtime(const char* path) {
  Runtime rt;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return rt;
  struct stat st{};
  void* map = MAP_FAILED;
  if (fstat(fd, &st) == 0 && st.st_size >= (off_t)sizeof(Elf64_Ehdr))
    map = mmap(nullptr, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED)
    return rt;
  const auto* base = static_cast<const unsigned char*>(map);
  const size_t size = st.st_size;
  const auto* eh = reinterpret_cast<const Elf64_Ehdr*>(base);
  auto inside = [&](size_t off, size_t len) { return off <= size && len <= size - off; };
  if (memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 && eh->e_ident[EI_CLASS] == ELFCLASS64 &&
      eh->e_shentsize == sizeof(Elf64_Shdr) && inside(eh->e_shoff, (size_t)eh->e_shnum * sizeof(Elf64_Shdr))) {
    const auto* sh = reinterpret_cast<const Elf64_Shdr*>(base + eh->e_shoff);
    const Elf64_Shdr* names = eh->e_shstrndx < eh->e_shnum ? &sh[eh->e_shstrndx] : nullptr;
    for (int i = 0; i < eh->e_shnum; ++i) {
      if (names && inside(names->sh_offset, names->sh_size) && sh[i].sh_name < names->sh_size &&
          strncmp(reinterpret_cast<const char*>(base + names->sh_offset + sh[i].sh_name), ".nv_fatbin",
                  names->sh_size - sh[i].sh_name) == 0)
        rt.kernels = true;
      if ((sh[i].sh_type != SHT_SYMTAB && sh[i].sh_type != SHT_DYNSYM) || sh[i].sh_link >= eh->e_shnum ||
          sh[i].sh_entsize != sizeof(Elf64_Sym) || !inside(sh[i].sh_offset, sh[i].sh_size))
        continue;
      const Elf64_Shdr& strtab = sh[sh[i].sh_link];
      if (!inside(strtab.sh_offset, strtab.sh_size) || strtab.sh_size == 0)
        continue;
      const char* strings = reinterpret_cast<const char*>(base + strtab.sh_offset);
      const auto* syms = reinterpret_cast<const Elf64_Sym*>(base + sh[i].sh_offset);
      for (size_t k = 0; k < sh[i].sh_size / sizeof(Elf64_Sym); ++k) {
        if (syms[k].st_name >= strtab.sh_size || strings[strtab.sh_size - 1] != '\0')
          continue;
        const char* name = strings + syms[k].st_name;
        if (!is_entry_point(name))
          continue;
        if (syms[k].st_shndx != SHN_UNDEF)
          rt.defined = name[0] == 'c' ? kEntryPoints[0] : kEntryPoints[1];
        else if (sh[i].sh_type == SHT_DYNSYM && strcmp(name, "__cudaRegisterFatBinary") == 0)
          rt.imports_registration = true;
      }
    }
  }
  munmap(map, size);
  return rt;
}

// SMPI runs a private copy of the program per rank, NAME_PID_RANK.so in its smpi/tmpdir (the
// folder orrery run gives smpirun, /tmp by default), deleted once loaded.
bool is_smpi_copy(const std::string& object) {
  static const std::string folder = simgrid::config::get_value<std::string>("smpi/tmpdir");
  size_t slash = object.rfind('/');
  if (slash == std::string::npos || object.compare(0, slash, folder) != 0 || slash != folder.size())
    return false;
  std::string base = object.substr(slash + 1);
  size_t rank = base.rfind('_');
  size_t pid = rank == std::string::npos || rank == 0 ? std::string::npos : base.rfind('_', rank - 1);
  return pid != std::string::npos && base.size() > 3 && base.compare(base.size() - 3, 3, ".so") == 0 &&
         base.find_first_not_of("0123456789", pid + 1) == rank &&
         base.find_first_not_of("0123456789", rank + 1) == base.size() - 3;
}

struct Search {
  ElfW(Addr) own_base;  // Orrery's libcudart.so.13
  std::string object;   // the first loaded object with a runtime of its own
  std::string why;
};

int visit(dl_phdr_info* info, size_t, void* data) {
  auto* s = static_cast<Search*>(data);
  const char* name = info->dlpi_name;
  if (!name || name[0] != '/' || info->dlpi_addr == s->own_base)  // smpimain, the vDSO, Orrery
    return 0;
  const std::string& program = run_description().program;
  bool copy = is_smpi_copy(name) && !program.empty();
  Runtime rt = read_runtime(copy ? program.c_str() : name);
  if (rt.defined)
    s->why = std::string(rt.defined) + " is defined in it";
  else if (rt.kernels && !rt.imports_registration)
    s->why = "it has kernels but imports no runtime to register them with";
  else
    return 0;
  s->object = copy ? "the program " + program : std::string(name);
  return 1;
}

}  // namespace

void check_no_foreign_runtime() {
  Dl_info self;
  if (!dladdr(reinterpret_cast<const void*>(&check_no_foreign_runtime), &self))
    return;
  Search s{reinterpret_cast<ElfW(Addr)>(self.dli_fbase), {}, {}};
  dl_iterate_phdr(visit, &s);
  if (s.object.empty())
    return;
  fatal("%s carries its own copy of the CUDA runtime (%s: nvcc links it statically by default), so its "
        "CUDA calls would not be simulated; rebuild it with orrery-nvcc, or with nvcc -cudart shared",
        s.object.c_str(), s.why.c_str());
}

}  // namespace orrery
