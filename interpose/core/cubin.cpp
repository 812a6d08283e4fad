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
 *   byte 40, 0x2000 or 0x8000 when the payload is compressed; the size decompressed at byte 64)
 *   and its payload. nvcc 13 compresses PTX by default and cubins under -Xfatbin -compress-all,
 *   both as a zstd frame (0x8000), which libzstd reads; 0x2000 is an older form, not read here;
 * - a cubin alone (cuModuleLoadData's image, nvcc -cubin): an ELF file for EM_CUDA (190) whose
 *   e_flags hold its architecture at bits 8-15 (0x5a for sm_90; CUDA 13's ELF ABI version 8);
 * - PTX text: its kernels are its .entry directives, its architecture its .target;
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
#include <zstd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

namespace orrery {

namespace {

constexpr uint32_t kWrapperMagic = 0x466243b1, kFatbinMagic = 0xba55ed50;
constexpr uint16_t kEntryPtx = 1, kEntryCubin = 2;
constexpr uint64_t kCompressed = 0x2000 | 0x8000, kZstd = 0x8000;
constexpr uint16_t kEmCuda = 190;  // EM_CUDA

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

/* A fat binary's entry's payload, decompressed where nvcc compressed it with zstd (flag 0x8000:
 * nvcc 13's PTX by default, its cubins under -Xfatbin -compress-all or -compress-mode): into
 * `buffer`, which then holds it. False, with why, for the older compression (0x2000) or bad data. */
bool payload(const unsigned char* entry, uint32_t entry_header, uint64_t size, uint64_t flags, const std::string& what,
             const unsigned char*& data, uint64_t& data_size, std::vector<unsigned char>& buffer, std::string& why) {
  data = entry + entry_header;
  data_size = size;
  if (!(flags & kCompressed))
    return true;
  if (!(flags & kZstd)) {
    why = "its " + what + " is compressed in the older form (flag 0x2000), which Orrery cannot read";
    return false;
  }
  size = ZSTD_findFrameCompressedSize(data, size);  // the payload is padded to 8 bytes
  if (ZSTD_isError(size)) {
    why = "its " + what + " is not a zstd frame Orrery can read";
    return false;
  }
  unsigned long long n = ZSTD_getFrameContentSize(data, size);
  if (n == ZSTD_CONTENTSIZE_ERROR || n == ZSTD_CONTENTSIZE_UNKNOWN || n > (1ull << 32)) {
    why = "its " + what + " is not a zstd frame Orrery can read";
    return false;
  }
  buffer.resize(n);
  size_t got = ZSTD_decompress(buffer.data(), n, data, size);
  if (ZSTD_isError(got) || got != n) {
    why = "its " + what + " does not decompress (zstd: " + ZSTD_getErrorName(got) + ")";
    return false;
  }
  data = buffer.data();
  data_size = n;
  return true;
}

/* What a fat binary (its magic first) holds for a GPU of compute capability major.minor. */
struct FatbinChoice {
  const unsigned char* cubin = nullptr;  // the cubin the GPU runs (the highest sm_XY of its major version, Y at most its minor)
  uint64_t cubin_size = 0;
  int sm = -1;
  const unsigned char* ptx = nullptr;  // the PTX of the highest virtual architecture at most the GPU's
  uint64_t ptx_size = 0;
  int ptx_sm = -1;
  std::string built;  // the cubins' architectures, for messages
  std::string why;    // why an entry chosen could not be read
};

bool choose(const unsigned char* fb, int major, int minor, bool any, FatbinChoice& c,
            std::vector<unsigned char>& cubin_buffer, std::vector<unsigned char>* ptx_buffer) {
  uint16_t header = at<uint16_t>(fb, 6);
  uint64_t total = at<uint64_t>(fb, 8);
  const unsigned char *best = nullptr, *best_ptx = nullptr;
  uint64_t best_size = 0, best_flags = 0, ptx_size = 0, ptx_flags = 0;
  uint32_t best_header = 0, ptx_header = 0;
  bool best_is_gpus = false;
  const int gpu = major * 10 + minor;
  for (uint64_t off = header; off + 48 <= header + total;) {
    const unsigned char* e = fb + off;
    uint16_t kind = at<uint16_t>(e, 0);
    uint32_t entry_header = at<uint32_t>(e, 4);
    uint64_t size = at<uint64_t>(e, 8);
    if (kind == 0 || entry_header < 48)
      break;
    int entry_sm = (int)at<uint32_t>(e, 28);
    if (kind == kEntryCubin) {
      c.built += (c.built.empty() ? "" : ", ") + std::string("sm_") + std::to_string(entry_sm);
      bool gpus = entry_sm / 10 == major && entry_sm % 10 <= minor;
      if ((gpus && (!best_is_gpus || entry_sm > c.sm)) || (any && !best_is_gpus && entry_sm > c.sm)) {
        best_is_gpus = gpus;
        best = e;
        best_header = entry_header;
        best_size = size;
        best_flags = at<uint64_t>(e, 40);
        c.sm = entry_sm;
      }
    } else if (kind == kEntryPtx && entry_sm <= gpu && entry_sm > c.ptx_sm) {
      best_ptx = e;
      ptx_header = entry_header;
      ptx_size = size;
      ptx_flags = at<uint64_t>(e, 40);
      c.ptx_sm = entry_sm;
    }
    off += entry_header + size;
  }
  if (best && !payload(best, best_header, best_size, best_flags, "sm_" + std::to_string(c.sm) + " code", c.cubin,
                       c.cubin_size, cubin_buffer, c.why))
    return false;
  if (best_ptx && ptx_buffer && !best_is_gpus &&  // PTX the GPU would compile: only without its cubin
      !payload(best_ptx, ptx_header, ptx_size, ptx_flags, "PTX", c.ptx, c.ptx_size, *ptx_buffer, c.why))
    return false;
  return true;
}

/* The fat binary nvcc's wrapper points to, or null (with why) for a wrapper Orrery cannot read.
 * Version 1: a whole program's code; version 2: relocatable device code (-rdc) after nvcc's device
 * link, whose fat binary holds the linked cubin. */
const unsigned char* wrapped_fatbin(const void* wrapper_ptr, std::string& why) {
  const Wrapper* w = (const Wrapper*)wrapper_ptr;
  if (!w || w->magic != (int32_t)kWrapperMagic || (w->version != 1 && w->version != 2) || !w->data ||
      at<uint32_t>(w->data, 0) != kFatbinMagic) {
    why = "its fat binary is not one Orrery can read";
    return nullptr;
  }
  return w->data;
}

/* The cubin a GPU of compute capability major.minor runs out of the fat binary of nvcc's wrapper,
 * or false and why not. With `any`, the highest architecture's when none is the GPU's (what holds
 * the same for all: variables' initial values). */
bool select_cubin(const void* wrapper_ptr, int major, int minor, const unsigned char*& image, uint64_t& size,
                  int& sm, std::vector<unsigned char>& buffer, std::string& why, bool any = false) {
  const unsigned char* fb = wrapped_fatbin(wrapper_ptr, why);
  if (!fb)
    return false;
  FatbinChoice c;
  if (!choose(fb, major, minor, any, c, buffer, nullptr)) {
    why = c.why;
    return false;
  }
  std::string arch = "sm_" + std::to_string(major * 10 + minor);
  if (!c.cubin) {
    why = "the program has no code for the simulated GPU's " + arch + " (" +
          (c.built.empty() ? std::string("PTX only") : "only " + c.built) +
          "), which a real GPU would compile from PTX as it loads: build with -arch=" + arch;
    return false;
  }
  image = c.cubin;
  size = c.cubin_size;
  sm = c.sm;
  return true;
}

/* The size of an ELF image from its headers: the end of its last table or section. */
uint64_t elf_size(const unsigned char* p) {
  Elf64_Ehdr h = at<Elf64_Ehdr>(p, 0);
  uint64_t end = std::max<uint64_t>(h.e_shoff + (uint64_t)h.e_shnum * h.e_shentsize,
                                    h.e_phoff + (uint64_t)h.e_phnum * h.e_phentsize);
  for (int i = 0; i < h.e_shnum; i++) {
    Elf64_Shdr s = at<Elf64_Shdr>(p, h.e_shoff + (uint64_t)i * h.e_shentsize);
    if (s.sh_type != SHT_NOBITS)
      end = std::max(end, s.sh_offset + s.sh_size);
  }
  return end;
}

/* The kernels PTX text declares (its .entry directives), and its target architecture. */
void ptx_entries(const std::string& ptx, std::map<std::string, KernelResources>& kernels, int& target) {
  auto word_end = [&](size_t i) {
    while (i < ptx.size() && (isalnum((unsigned char)ptx[i]) || ptx[i] == '_' || ptx[i] == '$' || ptx[i] == '.'))
      i++;
    return i;
  };
  for (size_t at = ptx.find(".entry"); at != std::string::npos; at = ptx.find(".entry", at + 6)) {
    size_t i = at + 6;
    if (i < ptx.size() && !isspace((unsigned char)ptx[i]))
      continue;  // .entryfoo is not the directive
    while (i < ptx.size() && isspace((unsigned char)ptx[i]))
      i++;
    size_t end = word_end(i);
    if (end > i)
      kernels[ptx.substr(i, end - i)] = KernelResources{};
  }
  size_t t = ptx.find(".target");
  if (t != std::string::npos) {
    size_t sm = ptx.find("sm_", t);
    if (sm != std::string::npos && sm < ptx.find('\n', t))
      target = atoi(ptx.c_str() + sm + 3);
  }
}

}  // namespace

FatbinKernels read_fatbin(const void* wrapper_ptr, int major, int minor, size_t reserved_shared) {
  FatbinKernels result;
  const unsigned char* fb = wrapped_fatbin(wrapper_ptr, result.why);
  if (!fb)
    return result;
  FatbinChoice c;
  std::vector<unsigned char> cubin_buffer, ptx_buffer;
  if (!choose(fb, major, minor, false, c, cubin_buffer, &ptx_buffer)) {
    result.why = c.why;
    return result;
  }
  if (c.cubin) {
    result.kernels = read_cubin(c.cubin, c.cubin_size, c.sm, reserved_shared, result.why);
    return result;
  }
  // No cubin the GPU runs: the PTX a real GPU would compile as the program loads, if any
  std::string arch = "sm_" + std::to_string(major * 10 + minor);
  std::string built = c.built.empty() ? std::string("PTX only") : "only " + c.built;
  if (c.ptx) {
    result.ptx.assign((const char*)c.ptx, strnlen((const char*)c.ptx, c.ptx_size));
    result.why = "the program has no code for the simulated GPU's " + arch + " (" + built +
                 "), which a real GPU compiles from PTX as the program loads";
  } else {
    result.no_code = true;
    result.why = "the program has no code for the simulated GPU's " + arch + " (" + built +
                 ") and no PTX it could compile for it: build with -arch=" + arch;
  }
  return result;
}

ModuleImage read_module(const void* image_ptr, int major, int minor, size_t reserved_shared) {
  ModuleImage m;
  const unsigned char* p = (const unsigned char*)image_ptr;
  const std::string arch = "sm_" + std::to_string(major * 10 + minor);
  if (!p) {
    m.why = "no image";
    return m;
  }
  auto from_cubin = [&](const unsigned char* cubin, uint64_t size, int sm) {
    if (sm / 10 != major || sm % 10 > minor) {
      m.status = ModuleImage::NoBinaryForGpu;
      m.why = "its code is for sm_" + std::to_string(sm) + ", which the simulated GPU's " + arch + " cannot run";
      return;
    }
    m.kernels = read_cubin(cubin, size, sm, reserved_shared, m.why);
    m.status = m.why.empty() ? ModuleImage::Loaded : ModuleImage::Invalid;
    m.has_code = m.status == ModuleImage::Loaded;
    if (m.has_code)
      m.cubin.assign((const char*)cubin, size);
  };
  auto from_ptx = [&](std::string text) {
    int target = 0;
    ptx_entries(text, m.kernels, target);
    if (text.find(".version") == std::string::npos) {
      m.why = "it is neither a fat binary, a cubin nor PTX";
      return;
    }
    if (target > major * 10 + minor) {
      m.status = ModuleImage::NoBinaryForGpu;
      m.why = "its PTX targets sm_" + std::to_string(target) + ", beyond the simulated GPU's " + arch;
      m.kernels.clear();
      return;
    }
    m.status = ModuleImage::Loaded;
    m.ptx = std::move(text);
    m.why = "its code is PTX, which the driver compiles for the GPU as the module loads";
  };
  if (at<uint32_t>(p, 0) == kWrapperMagic) {  // cuModuleLoadFatBinary may be given nvcc's wrapper
    const Wrapper* w = (const Wrapper*)p;
    p = w->data;
    if (!p) {
      m.why = "its fat binary wrapper points to no fat binary";
      return m;
    }
  }
  if (at<uint32_t>(p, 0) == kFatbinMagic) {
    FatbinChoice c;
    std::vector<unsigned char> cubin_buffer, ptx_buffer;
    if (!choose(p, major, minor, false, c, cubin_buffer, &ptx_buffer)) {
      m.status = ModuleImage::Unreadable;
      m.why = c.why;
      return m;
    }
    if (c.cubin)  // the GPU's own (choose without `any`)
      from_cubin(c.cubin, c.cubin_size, c.sm);
    else if (c.ptx)
      from_ptx(std::string((const char*)c.ptx, strnlen((const char*)c.ptx, c.ptx_size)));
    else {
      m.status = ModuleImage::NoBinaryForGpu;
      m.why = "its fat binary has no code for the simulated GPU's " + arch + " (" +
              (c.built.empty() ? std::string("nor PTX it could compile") : "only " + c.built + ", and no PTX it could compile") + ")";
    }
    return m;
  }
  if (!memcmp(p, ELFMAG, SELFMAG)) {
    if (p[EI_CLASS] != ELFCLASS64 || at<Elf64_Ehdr>(p, 0).e_machine != kEmCuda) {
      m.why = "it is an ELF file, but not a CUDA cubin";
      return m;
    }
    uint32_t flags = at<Elf64_Ehdr>(p, 0).e_flags;
    from_cubin(p, elf_size(p), (int)((flags >> 8) & 0xff));  // EF_CUDA_SM, ELF ABI version 8 (CUDA 12.8 on)
    return m;
  }
  from_ptx((const char*)p);
  return m;
}

bool cubin_variable(const std::string& cubin, const std::string& name, std::vector<unsigned char>& bytes) {
  Elf elf((const unsigned char*)cubin.data(), cubin.size());
  std::optional<Elf64_Sym> sym = elf.ok() ? elf.symbol(name) : std::nullopt;
  if (!sym || ELF64_ST_TYPE(sym->st_info) != STT_OBJECT || sym->st_shndx >= elf.sections().size())
    return false;
  const Elf64_Shdr& section = elf.sections()[sym->st_shndx];
  std::string where = elf.section_name(section);
  // __device__ variables (.nv.global, .nv.global.init) and __constant__ ones (.nv.constant3 and up;
  // banks 0 to 2 hold kernel parameters and the driver's constants)
  bool variable = where == ".nv.global" || where == ".nv.global.init" ||
                  (where.rfind(".nv.constant", 0) == 0 && where.size() == 13 && where[12] >= '3' && where[12] <= '9');
  if (!variable)
    return false;
  bytes.assign(sym->st_size, 0);
  const unsigned char* data = elf.bytes(section);
  if (data && sym->st_value <= section.sh_size && sym->st_size <= section.sh_size - sym->st_value)
    memcpy(bytes.data(), data + sym->st_value, sym->st_size);
  return true;
}

bool read_variable(const void* wrapper_ptr, int major, int minor, const std::string& name, size_t size,
                   std::vector<unsigned char>& bytes, std::string& why) {
  const unsigned char* image;
  uint64_t image_size;
  int sm = 0;
  std::vector<unsigned char> buffer;
  if (!select_cubin(wrapper_ptr, major, minor, image, image_size, sm, buffer, why, true))
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
