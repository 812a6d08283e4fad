/* Reading kernel resources from the cubins of a fat binary (cubin.hpp).
 *
 * The layouts, none of which NVIDIA documents beyond its headers, as checked against ptxas -v
 * and nvcc 13's output (tests/native/test_function_attributes.py compares every figure with what
 * ptxas printed for the same kernels):
 * - the wrapper nvcc's host code passes (fatbinary_section.h): magic 0x466243b1, version 1 (2 for
 *   the device-linked code of -rdc builds), then a pointer to the fat binary;
 * - the fat binary: magic 0xba55ed50, a 16-byte header (its size at byte 6, the entries' total
 *   size at byte 8), then entries, each a header (kind at byte 0: 1 PTX, 2 cubin; its own size at
 *   byte 4; the payload's size at byte 8; the architecture, 90 for sm_90, at byte 28; flags at
 *   byte 40, 0x2000 or 0x8000 when the payload is compressed) and its payload;
 * - a cubin: an ELF file whose section .nv.info holds, per kernel symbol, its registers
 *   (EIATTR_REGCOUNT, 0x2f) and stack frame (EIATTR_FRAME_SIZE, 0x11); .nv.info.KERNEL holds its
 *   launch bounds (EIATTR_MAX_THREADS, 0x05), parameter bytes (EIATTR_CBANK_PARAM_SIZE, 0x19)
 *   and barriers (0x4c); .nv.shared.KERNEL's size is its static shared memory, and on cubins
 *   that refer to the driver's reserved shared memory (sm_90 and later: a .nv.shared.reserved.0
 *   section, or the symbol .nv.reservedSmem.offset0 once device-linked) it includes it; the note .note.nv.cuinfo names the virtual architecture. Each
 *   attribute is a format byte (1: none, 2: a byte, 3: a 16-bit value, 4: a 16-bit size and that
 *   many bytes), an attribute byte and its value;
 * - a variable (read_variable): its symbol's size, and its section, .nv.global.init for one with an
 *   initialiser (its bytes at the symbol's value, an offset within the section) or .nv.global
 *   (SHT_NOBITS) for one without. */
#include "core/cubin.hpp"

#include <elf.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

namespace orrery {

namespace {

constexpr uint32_t kWrapperMagic = 0x466243b1, kFatbinMagic = 0xba55ed50;
constexpr uint16_t kEntryCubin = 2;
constexpr uint64_t kCompressed = 0x2000 | 0x8000;

struct Wrapper {
  int32_t magic;
  int32_t version;
  const unsigned char* data;
  const void* filename_or_fatbins;
};

template <typename T>
T at(const unsigned char* p, size_t offset) {
  T v;
  memcpy(&v, p + offset, sizeof v);
  return v;
}

/* One cubin, its sections by name. */
class Elf {
 public:
  Elf(const unsigned char* image, size_t size) : p_(image), size_(size) {
    if (size < sizeof(Elf64_Ehdr) || memcmp(p_, ELFMAG, SELFMAG) || p_[EI_CLASS] != ELFCLASS64)
      return;
    Elf64_Ehdr h = at<Elf64_Ehdr>(p_, 0);
    if (h.e_shoff + (uint64_t)h.e_shnum * sizeof(Elf64_Shdr) > size_ || h.e_shstrndx >= h.e_shnum)
      return;
    for (int i = 0; i < h.e_shnum; i++)
      sections_.push_back(at<Elf64_Shdr>(p_, h.e_shoff + i * sizeof(Elf64_Shdr)));
    names_ = sections_[h.e_shstrndx];
    for (size_t i = 0; i < sections_.size(); i++)  // a lookup per kernel: by name, once
      by_name_.emplace(name_at(names_, sections_[i].sh_name), i);
    ok_ = true;
  }
  bool ok() const { return ok_; }

  const Elf64_Shdr* section(const std::string& name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : &sections_[it->second];
  }
  std::string section_name(const Elf64_Shdr& s) const { return name_at(names_, s.sh_name); }
  const std::vector<Elf64_Shdr>& sections() const { return sections_; }
  // The bytes of a section that has them (not SHT_NOBITS), or null.
  const unsigned char* bytes(const Elf64_Shdr& s) const {
    return s.sh_type != SHT_NOBITS && s.sh_offset + s.sh_size <= size_ ? p_ + s.sh_offset : nullptr;
  }

  // The symbol of that name in .symtab, or none.
  std::optional<Elf64_Sym> symbol(const std::string& name) const {
    std::optional<Elf64_Sym> found;
    each_symbol([&](const Elf64_Sym& sym, const std::string& n) {
      if (!found && n == name)
        found = sym;
    });
    return found;
  }

  // Symbol names by index, from .symtab and its string table.
  std::vector<std::string> symbols() const {
    std::vector<std::string> out;
    each_symbol([&](const Elf64_Sym&, const std::string& n) { out.push_back(n); });
    return out;
  }

 private:
  // Calls f(symbol, its name) for each symbol of .symtab, in order.
  template <typename F>
  void each_symbol(F f) const {
    for (const Elf64_Shdr& s : sections_) {
      if (s.sh_type != SHT_SYMTAB || s.sh_link >= sections_.size() || !bytes(s))
        continue;
      for (size_t off = 0; off + sizeof(Elf64_Sym) <= s.sh_size; off += sizeof(Elf64_Sym)) {
        Elf64_Sym sym = at<Elf64_Sym>(bytes(s), off);
        f(sym, name_at(sections_[s.sh_link], sym.st_name));
      }
    }
  }
  std::string name_at(const Elf64_Shdr& strtab, uint32_t offset) const {
    if (strtab.sh_offset + offset >= size_)
      return "";
    const char* s = (const char*)p_ + strtab.sh_offset + offset;
    return std::string(s, strnlen(s, size_ - strtab.sh_offset - offset));
  }
  const unsigned char* p_;
  size_t size_;
  std::vector<Elf64_Shdr> sections_;
  std::map<std::string, size_t> by_name_;
  Elf64_Shdr names_{};
  bool ok_ = false;
};

/* Calls f(attribute, value bytes, value size) for each attribute of an .nv.info section. */
template <typename F>
void each_attribute(const unsigned char* p, size_t size, F f) {
  size_t i = 0;
  while (i + 2 <= size) {
    uint8_t format = p[i], attr = p[i + 1];
    if (format == 1) {  // no value
      f(attr, p + i, 0);
      i += 2;
    } else if (format == 2 || format == 3) {  // a byte or a 16-bit value, in 2 bytes
      if (i + 4 > size)
        return;
      f(attr, p + i + 2, format == 2 ? 1 : 2);
      i += 4;
    } else if (format == 4) {  // sized
      if (i + 4 > size)
        return;
      size_t n = at<uint16_t>(p, i + 2);
      if (i + 4 + n > size)
        return;
      f(attr, p + i + 4, n);
      i += 4 + n;
    } else {
      return;  // a format this reader does not know: the rest cannot be split
    }
  }
}

constexpr uint8_t kMaxThreads = 0x05, kFrameSize = 0x11, kParamSize = 0x19, kRegCount = 0x2f, kBarriers = 0x4c;

std::map<std::string, KernelResources> read_cubin(const unsigned char* image, size_t size, int sm,
                                                  size_t reserved_shared, std::string& why) {
  std::map<std::string, KernelResources> out;
  Elf elf(image, size);
  if (!elf.ok()) {
    why = "its sm_" + std::to_string(sm) + " code is not an ELF file Orrery can read";
    return out;
  }
  int ptx_version = 0;
  if (const Elf64_Shdr* note = elf.section(".note.nv.cuinfo")) {
    const unsigned char* b = elf.bytes(*note);
    // namesz, descsz, type, "NVIDIA Corp\0", then the description: u16, virtual architecture, ...
    if (b && note->sh_size >= 28)
      ptx_version = at<uint16_t>(b, 12 + 12 + 2);
  }
  // sm_90 code refers to the driver's reserved shared memory: a section .nv.shared.reserved.0 in
  // a whole program's cubin, the symbol .nv.reservedSmem.offset0 in a device-linked one (-rdc).
  std::vector<std::string> symbols = elf.symbols();
  const bool reserved_in_section =
      elf.section(".nv.shared.reserved.0") != nullptr ||
      std::find(symbols.begin(), symbols.end(), ".nv.reservedSmem.offset0") != symbols.end();
  for (const Elf64_Shdr& s : elf.sections()) {
    std::string name = elf.section_name(s);
    if (name.rfind(".nv.info.", 0) != 0 || !elf.bytes(s))
      continue;
    KernelResources k;
    k.binary_version = sm;
    k.ptx_version = ptx_version;
    each_attribute(elf.bytes(s), s.sh_size, [&](uint8_t attr, const unsigned char* v, size_t n) {
      if (attr == kMaxThreads && n == 12)
        k.launch_bound_threads = (int)(at<uint32_t>(v, 0) * at<uint32_t>(v, 4) * at<uint32_t>(v, 8));
      else if (attr == kParamSize && n == 2)
        k.param_bytes = at<uint16_t>(v, 0);
      else if (attr == kBarriers && n == 1)
        k.barriers = v[0];
    });
    std::string kernel = name.substr(strlen(".nv.info."));
    if (const Elf64_Shdr* shared = elf.section(".nv.shared." + kernel)) {
      k.static_shared = shared->sh_size;
      if (reserved_in_section)
        k.static_shared = k.static_shared >= reserved_shared ? k.static_shared - reserved_shared : 0;
    }
    out[kernel] = k;
  }
  // Registers and stack frames are in .nv.info, keyed by symbol index.
  if (const Elf64_Shdr* info = elf.section(".nv.info"); info && elf.bytes(*info))
    each_attribute(elf.bytes(*info), info->sh_size, [&](uint8_t attr, const unsigned char* v, size_t n) {
      if ((attr != kRegCount && attr != kFrameSize) || n != 8)
        return;
      uint32_t index = at<uint32_t>(v, 0), value = at<uint32_t>(v, 4);
      if (index >= symbols.size())
        return;
      auto it = out.find(symbols[index]);
      if (it == out.end())
        return;
      if (attr == kRegCount)
        it->second.registers = (int)value;
      else
        it->second.local_bytes = value;
    });
  return out;
}

}  // namespace

namespace {

/* The cubin a GPU of compute capability major.minor runs out of a fat binary (the highest
 * architecture of its major version at most its own), or false and why not. With `any`, the
 * highest architecture's when none is the GPU's (what holds the same for all: variables' initial
 * values). */
bool select_cubin(const void* wrapper_ptr, int major, int minor, const unsigned char*& image, uint64_t& size,
                  int& sm, std::string& why, bool any = false) {
  const Wrapper* w = (const Wrapper*)wrapper_ptr;
  // Version 1: a whole program's code; version 2: relocatable device code (-rdc) after nvcc's
  // device link, whose fat binary holds the linked cubin.
  if (!w || w->magic != (int32_t)kWrapperMagic || (w->version != 1 && w->version != 2) || !w->data ||
      at<uint32_t>(w->data, 0) != kFatbinMagic) {
    why = "its fat binary is not one Orrery can read";
    return false;
  }
  const unsigned char* fb = w->data;
  uint16_t header = at<uint16_t>(fb, 6);
  uint64_t total = at<uint64_t>(fb, 8);
  const unsigned char* best = nullptr;
  uint64_t best_size = 0, best_flags = 0;
  int best_sm = -1;
  bool best_is_gpus = false;
  std::string built;
  for (uint64_t off = header; off + 48 <= header + total;) {
    const unsigned char* e = fb + off;
    uint16_t kind = at<uint16_t>(e, 0);
    uint32_t entry_header = at<uint32_t>(e, 4);
    uint64_t payload = at<uint64_t>(e, 8);
    if (kind == 0 || entry_header < 48)
      break;
    int entry_sm = (int)at<uint32_t>(e, 28);
    if (kind == kEntryCubin) {
      built += (built.empty() ? "" : ", ") + std::string("sm_") + std::to_string(entry_sm);
      bool gpus = entry_sm / 10 == major && entry_sm % 10 <= minor;
      if ((gpus && (!best_is_gpus || entry_sm > best_sm)) || (any && !best_is_gpus && entry_sm > best_sm)) {
        best_is_gpus = gpus;
        best = e + entry_header;
        best_size = payload;
        best_flags = at<uint64_t>(e, 40);
        best_sm = entry_sm;
      }
    }
    off += entry_header + payload;
  }
  std::string arch = "sm_" + std::to_string(major * 10 + minor);
  if (!best) {
    why = "the program has no code for the simulated GPU's " + arch + " (" +
          (built.empty() ? std::string("PTX only") : "only " + built) +
          "), which a real GPU would compile from PTX as it loads: build with -arch=" + arch;
    return false;
  }
  if (best_flags & kCompressed) {
    why = "its sm_" + std::to_string(best_sm) + " code is compressed (nvcc -Xfatbin -compress-all)";
    return false;
  }
  image = best;
  size = best_size;
  sm = best_sm;
  return true;
}

}  // namespace

FatbinKernels read_fatbin(const void* wrapper_ptr, int major, int minor, size_t reserved_shared) {
  FatbinKernels result;
  const unsigned char* image;
  uint64_t size;
  int sm;
  if (select_cubin(wrapper_ptr, major, minor, image, size, sm, result.why))
    result.kernels = read_cubin(image, size, sm, reserved_shared, result.why);
  return result;
}

bool read_variable(const void* wrapper_ptr, int major, int minor, const std::string& name, size_t size,
                   std::vector<unsigned char>& bytes, std::string& why) {
  const unsigned char* image;
  uint64_t image_size;
  int sm;
  if (!select_cubin(wrapper_ptr, major, minor, image, image_size, sm, why, true))
    return false;
  Elf elf(image, image_size);
  std::optional<Elf64_Sym> sym = elf.ok() ? elf.symbol(name) : std::nullopt;
  if (!sym || sym->st_shndx >= elf.sections().size() || sym->st_size != size) {
    why = "its sm_" + std::to_string(sm) + " code has no variable " + name + " of " + std::to_string(size) + " bytes";
    return false;
  }
  const Elf64_Shdr& section = elf.sections()[sym->st_shndx];
  bytes.assign(size, 0);  // a variable without an initialiser (.nv.global, SHT_NOBITS) starts as zeros
  if (section.sh_type == SHT_NOBITS)
    return true;
  const unsigned char* data = elf.bytes(section);
  if (!data || sym->st_value > section.sh_size || size > section.sh_size - sym->st_value) {
    why = "its sm_" + std::to_string(sm) + " code holds variable " + name + " outside its section";
    return false;
  }
  memcpy(bytes.data(), data + sym->st_value, size);
  return true;
}

}  // namespace orrery
