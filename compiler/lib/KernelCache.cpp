// The on-disk kernel cache: the key, the folder, entries written atomically and read
// back only when every check passes, and the public info/clear.
#include "KernelCache.h"

#include <qkv/compiler/kernel_cache.hpp>
#include <qkv/runtime/env.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <set>

#include <fcntl.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include "llvm/Config/llvm-config.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/xxhash.h"
#include "llvm/TargetParser/Host.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "CodegenParts.h"
#include "ObjectJit.h"

#ifndef QKV_VERSION
#define QKV_VERSION "unknown"
#endif

namespace fs = std::filesystem;

namespace qkv::cache {

namespace {

// ---- the toolchain: qkv's version and the build ids of the code that makes kernels ----

struct BuildIdSearch {
  std::uintptr_t addr = 0;
  std::string id;
};

/// The NT_GNU_BUILD_ID note of a loaded object, as hex ("" when it has none).
std::string build_id_of(const dl_phdr_info *info) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) &ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE)
      continue;
    auto *p = reinterpret_cast<const unsigned char *>(info->dlpi_addr + ph.p_vaddr);
    const unsigned char *end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      auto *n = reinterpret_cast<const ElfW(Nhdr) *>(p);
      const unsigned char *name = p + sizeof(ElfW(Nhdr));
      const unsigned char *desc = name + ((n->n_namesz + 3) & ~3u);
      if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
        std::string hex;
        for (unsigned j = 0; j < n->n_descsz; ++j)
          hex += "0123456789abcdef"[desc[j] >> 4], hex += "0123456789abcdef"[desc[j] & 15];
        return hex;
      }
      p = desc + ((n->n_descsz + 3) & ~3u);
    }
  }
  return "";
}

int find_object(dl_phdr_info *info, std::size_t, void *data) {
  auto *s = static_cast<BuildIdSearch *>(data);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) &ph = info->dlpi_phdr[i];
    std::uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD && s->addr >= lo && s->addr < lo + ph.p_memsz) {
      s->id = build_id_of(info);
      if (s->id.empty()) { // no build id: the file's size and time stand in for it
        struct stat st{};
        const char *path = info->dlpi_name && *info->dlpi_name ? info->dlpi_name : "/proc/self/exe";
        if (::stat(path, &st) == 0)
          s->id = std::to_string(st.st_size) + "@" + std::to_string(st.st_mtime);
      }
      return 1;
    }
  }
  return 0;
}

std::string build_id_containing(const void *addr) {
  BuildIdSearch s;
  s.addr = reinterpret_cast<std::uintptr_t>(addr);
  dl_iterate_phdr(find_object, &s);
  return s.id.empty() ? "?" : s.id;
}

/// qkv's version, the entry format, LLVM's version and the build ids of qkv's compiler
/// library, libMLIR and libLLVM: a rebuild that changes any of them changes the key.
const std::string &toolchain() {
  static const std::string t =
      "qkv " QKV_VERSION " format " + std::to_string(kFormat) + "\nllvm " LLVM_VERSION_STRING +
      "\nbuild qkv_compiler=" + build_id_containing(reinterpret_cast<const void *>(&make_key)) +
      " mlir=" +
      build_id_containing(reinterpret_cast<const void *>(
          static_cast<std::unique_ptr<llvm::Module> (*)(mlir::Operation *, llvm::LLVMContext &,
                                                        llvm::StringRef, bool)>(
              &mlir::translateModuleToLLVMIR))) +
      " llvm=" + build_id_containing(reinterpret_cast<const void *>(&llvm::sys::getHostCPUName));
  return t;
}

std::string hex16(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

} // namespace

Key make_key(const Graph &g, const CompileOptions &o, int vector_bits, const std::string &target) {
  CompileOptions resolved = o;
  resolved.schedule.vector_bits = vector_bits;
  Key k;
  k.text = toolchain() + "\ntarget " + jit::host_identity() + " " + target + "\noptions " +
           kernel_cache::options_text(resolved) + " l1=" + std::to_string(host_cache_bytes(1)) +
           " l2=" + std::to_string(host_cache_bytes(2)) +
           " codegen_parts=" + std::to_string(jit::codegen_parts(o.compile_threads)) + "\n" +
           g.key_text();
  k.hash = llvm::xxh3_64bits(k.text);
  k.hex = hex16(k.hash);
  return k;
}

Place place(const CompileOptions &o, const Key &key) {
  Place p;
  if (!kernel_cache::enabled_by_env())
    p.off = "QKV_CACHE=" + std::string(std::getenv("QKV_CACHE"));
  else if (!o.cache.read && !o.cache.write)
    p.off = "CompileOptions::cache";
  else if ((p.dir = o.cache.dir.empty() ? kernel_cache::default_dir() : o.cache.dir).empty())
    p.off = "no folder: QKV_CACHE_DIR and HOME are not set";
  if (!p.off.empty())
    return p;
  p.read = o.cache.read;
  p.write = o.cache.write;
  p.max_bytes = kernel_cache::max_bytes(o.cache.max_bytes);
  p.path = (fs::path(p.dir) / (key.hex + kernel_cache::kEntrySuffix)).string();
  return p;
}

void warn_once(const std::string &dir, const std::string &message) {
  static std::mutex mu;
  static std::set<std::string> warned;
  std::lock_guard<std::mutex> lock(mu);
  if (warned.insert(dir).second)
    std::cerr << "qkv: warning: kernel cache: " << message << "\n";
}

// ---- entries ----------------------------------------------------------------------------
//
// Little-endian, 56 bytes of header then four byte strings:
//   0 magic "QKVKERN\n"   8 u32 format   12 u32 header size (56)
//  16 u64 checksum: xxh3-64 of every byte from offset 24 to the end
//  24 u64 key hash      32 u32 version length   36 u32 symbol length
//  40 u64 key length    48 u64 payload length
//  56 version, key text, symbol, payload
// The payload is the kernel's objects (one per part LLVM compiled on its own thread), then
// the bitcode of each deferred part (compiled when a call first runs it), each a u64
// length and its bytes.

namespace {

constexpr char kMagic[8] = {'Q', 'K', 'V', 'K', 'E', 'R', 'N', '\n'};
constexpr std::size_t kHeader = 56;

using llvm::support::endian::read32le;
using llvm::support::endian::read64le;
using llvm::support::endian::write32le;
using llvm::support::endian::write64le;

std::string encode(const Key &key, const Entry &e) {
  std::string version = kernel_cache::version();
  std::string out(kHeader, '\0');
  char *h = out.data();
  std::memcpy(h, kMagic, 8);
  write32le(h + 8, kFormat);
  write32le(h + 12, kHeader);
  write64le(h + 24, key.hash);
  write32le(h + 32, static_cast<std::uint32_t>(version.size()));
  write32le(h + 36, static_cast<std::uint32_t>(e.symbol.size()));
  write64le(h + 40, key.text.size());
  std::string payload;
  for (const std::string &object : e.objects) {
    char n[8];
    write64le(n, object.size());
    payload.append(n, 8).append(object);
  }
  write64le(h + 48, payload.size());
  out += version + key.text + e.symbol + payload;
  write64le(out.data() + 16, llvm::xxh3_64bits(llvm::StringRef(out).drop_front(24)));
  return out;
}

/// The entry in `bytes` if it is a whole, intact entry of this format and version for
/// `key`; otherwise why not.
std::optional<Entry> decode(const std::string &bytes, const Key &key, std::string &why) {
  auto fail = [&](std::string reason) -> std::optional<Entry> {
    why = std::move(reason);
    return std::nullopt;
  };
  const char *h = bytes.data();
  if (bytes.size() >= 8 && std::memcmp(h, kMagic, 8) != 0)
    return fail("not a qkv kernel cache entry");
  if (bytes.size() < kHeader)
    return fail("truncated");
  if (read32le(h + 8) != kFormat || read32le(h + 12) != kHeader)
    return fail("entry format " + std::to_string(read32le(h + 8)) + ", this qkv reads " +
                std::to_string(kFormat));
  std::uint64_t vlen = read32le(h + 32), slen = read32le(h + 36), klen = read64le(h + 40),
                olen = read64le(h + 48), have = bytes.size() - kHeader;
  if (klen > have || olen > have || vlen + slen + klen + olen > have)
    return fail("truncated");
  if (vlen + slen + klen + olen < have)
    return fail("trailing bytes");
  std::string_view rest(bytes.data() + kHeader, have);
  if (rest.substr(0, vlen) != kernel_cache::version())
    return fail("written by qkv " + std::string(rest.substr(0, vlen)));
  if (read64le(h + 16) != llvm::xxh3_64bits(llvm::StringRef(bytes).drop_front(24)))
    return fail("checksum mismatch");
  if (read64le(h + 24) != key.hash || rest.substr(vlen, klen) != key.text)
    return fail("the entry is for another key");
  if (slen == 0)
    return fail("no entry symbol");
  Entry e{std::string(rest.substr(vlen + klen, slen)), {}};
  for (std::string_view payload = rest.substr(vlen + klen + slen); !payload.empty();) {
    std::uint64_t n = payload.size() >= 8 ? read64le(payload.data()) : ~std::uint64_t(0);
    if (n > payload.size() - 8 || n == 0)
      return fail("malformed object list");
    e.objects.emplace_back(payload.substr(8, n));
    payload.remove_prefix(8 + n);
  }
  if (e.objects.empty())
    return fail("no object");
  return e;
}

/// The whole file, or nullopt (errno set) when it cannot be read.
std::optional<std::string> read_file(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return std::nullopt;
  std::string out;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      errno = err;
      return n == 0 ? std::optional<std::string>(std::move(out)) : std::nullopt;
    }
    out.append(buf, static_cast<std::size_t>(n));
  }
}

/// Writes all of `bytes` to a new file at `path` (which must not exist); "" or the error.
std::string write_new_file(const std::string &path, const std::string &bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    return "cannot create " + path + ": " + std::strerror(errno);
  std::size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      std::string err = "cannot write " + path + ": " + std::strerror(n < 0 ? errno : ENOSPC);
      ::close(fd);
      return err;
    }
    done += static_cast<std::size_t>(n);
  }
  if (::close(fd) != 0)
    return "cannot write " + path + ": " + std::strerror(errno);
  return "";
}

} // namespace

std::optional<Entry> read_entry(const Place &place, const Key &key, std::string &invalid) {
  std::optional<std::string> bytes = read_file(place.path);
  if (!bytes) {
    if (errno != ENOENT)
      invalid = std::string("unreadable: ") + std::strerror(errno);
    return std::nullopt;
  }
  std::optional<Entry> e = decode(*bytes, key, invalid);
  if (e)
    ::utimensat(AT_FDCWD, place.path.c_str(), nullptr, 0); // used now; a read-only folder keeps
                                                           // the old time
  return e;
}

std::string write_entry(const Place &place, const Key &key, const Entry &entry) {
  static std::atomic<unsigned> counter{0};
  std::error_code ec;
  fs::create_directories(place.dir, ec);
  if (ec)
    return "cannot create the folder " + place.dir + ": " + ec.message();
  std::string tmp = place.path + ".tmp." + std::to_string(::getpid()) + "." +
                    std::to_string(counter++);
  std::string err = write_new_file(tmp, encode(key, entry));
  if (err.empty() && std::rename(tmp.c_str(), place.path.c_str()) != 0)
    err = "cannot rename " + tmp + " to " + place.path + ": " + std::strerror(errno);
  if (!err.empty()) {
    ::unlink(tmp.c_str());
    return err;
  }
  kernel_cache::trim(place.dir, place.max_bytes);
  return err;
}

} // namespace qkv::cache

// ---- the public side -----------------------------------------------------------------------

namespace qkv::kernel_cache {

std::string options_text(const CompileOptions &o) {
  const Schedule &s = o.schedule;
  return "threads=" + std::to_string(s.threads) + " q_tile=" + std::to_string(s.q_tile) +
         " kv_tile=" + std::to_string(s.kv_tile) + " vector_bits=" + std::to_string(s.vector_bits) +
         " gemm_k_block=" + std::to_string(s.gemm_k_block) +
         " gemm_m_block=" + std::to_string(s.gemm_m_block) +
         " decode_rows=" + std::to_string(s.decode_rows) +
         " opt_level=" + std::to_string(o.opt_level) +
         " recognize_attention=" + std::to_string(o.recognize_attention) +
         " share_repeated_layers=" + std::to_string(o.share_repeated_layers) +
         " defer_schedules=" + std::to_string(o.defer_schedules) +
         " checked=" + (o.checked ? std::to_string(*o.checked) : "default") +
         " isa=" + isa_name(o.isa) + " matmul_precision=" +
         (o.matmul_precision == MatmulPrecision::Medium ? "medium" : "highest");
}

std::string default_dir() {
  if (const char *d = std::getenv("QKV_CACHE_DIR"); d && *d)
    return d;
  if (const char *home = std::getenv("HOME"); home && *home)
    return (fs::path(home) / ".cache" / "qkv" / "kernels").string();
  return "";
}

bool enabled_by_env() { return env_switch("QKV_CACHE").value_or(true); }

std::uint64_t max_bytes(std::uint64_t requested) {
  if (requested)
    return requested;
  const char *v = std::getenv("QKV_CACHE_MAX_MB");
  if (!v || !*v)
    return kDefaultMaxBytes;
  char *end = nullptr;
  errno = 0;
  unsigned long long mb = std::strtoull(v, &end, 10);
  if (*end || errno || mb == 0 || v[0] == '-' || mb > (std::uint64_t{1} << 43))
    user_error("QKV_CACHE_MAX_MB='" + std::string(v) +
               "': the kernel cache's size cap must be a positive whole number of mebibytes");
  return mb << 20;
}

std::string version() { return QKV_VERSION " format " + std::to_string(cache::kFormat); }

namespace {

enum class FileKind { Entry, Temporary, Other };

FileKind kind_of(const fs::directory_entry &e) {
  std::string name = e.path().filename().string();
  std::string suffix = kEntrySuffix;
  if (!e.is_regular_file())
    return FileKind::Other;
  if (name.size() > suffix.size() && name.ends_with(suffix))
    return FileKind::Entry;
  if (name.find(suffix + ".tmp.") != std::string::npos)
    return FileKind::Temporary;
  return FileKind::Other;
}

} // namespace

Info info(const std::string &dir) {
  Info out;
  out.dir = dir.empty() ? default_dir() : dir;
  out.enabled = enabled_by_env();
  std::error_code ec;
  out.exists = !out.dir.empty() && fs::is_directory(out.dir, ec);
  if (!out.exists)
    return out;
  for (const auto &e : fs::directory_iterator(out.dir, ec)) {
    FileKind k = kind_of(e);
    if (k == FileKind::Entry) {
      ++out.entries;
      out.bytes += e.file_size(ec);
    } else if (k == FileKind::Temporary) {
      ++out.temporary;
    }
  }
  if (ec)
    user_error("kernel cache: cannot list " + out.dir + ": " + ec.message());
  return out;
}

std::uint64_t trim(const std::string &dir, std::uint64_t max_bytes) {
  struct File {
    fs::path path;
    fs::file_time_type time;
    std::uint64_t bytes;
  };
  std::vector<File> files;
  std::uint64_t total = 0;
  std::error_code ec;
  for (const auto &e : fs::directory_iterator(dir, ec)) {
    if (kind_of(e) != FileKind::Entry)
      continue;
    std::error_code fe;
    File f{e.path(), e.last_write_time(fe), e.file_size(fe)};
    if (fe)
      continue; // removed since the listing
    total += f.bytes;
    files.push_back(std::move(f));
  }
  if (total <= max_bytes)
    return 0;
  std::sort(files.begin(), files.end(), [](const File &a, const File &b) {
    return a.time != b.time ? a.time < b.time : a.path < b.path;
  });
  std::uint64_t removed = 0;
  for (const File &f : files) {
    if (total <= max_bytes)
      break;
    std::error_code re;
    if (fs::remove(f.path, re))
      ++removed;
    if (!re)
      total -= f.bytes; // removed here or by another process
  }
  return removed;
}

std::uint64_t clear(const std::string &dir) {
  std::string d = dir.empty() ? default_dir() : dir;
  std::error_code ec;
  if (d.empty() || !fs::is_directory(d, ec))
    return 0;
  std::vector<fs::path> doomed;
  for (const auto &e : fs::directory_iterator(d, ec))
    if (kind_of(e) != FileKind::Other)
      doomed.push_back(e.path());
  if (ec)
    user_error("kernel cache: cannot list " + d + ": " + ec.message());
  std::uint64_t n = 0;
  for (const fs::path &p : doomed) {
    bool removed = fs::remove(p, ec); // false: another process removed it first
    if (ec)
      user_error("kernel cache: cannot remove " + p.string() + ": " + ec.message());
    n += removed ? 1 : 0;
  }
  return n;
}

} // namespace qkv::kernel_cache
