// The on-disk kernel cache, from the outside: where it is, what it holds, emptying it.
// compile() reads and writes it (CompileOptions::cache); docs/compiler.md, "Kernel cache",
// describes the key and the entry format. MLIR-free header.
#pragma once

#include <cstdint>
#include <string>

namespace qkv {
struct CompileOptions;
} // namespace qkv

namespace qkv::kernel_cache {

/// The compile options that change a kernel's code, as the cache's key spells them
/// (`threads=2 q_tile=0 ... matmul_precision=highest`; Schedule::vector_bits as given, 0
/// for the host's): a cache of kernels of one's own (qkv::dist's ring attention) keys on
/// the same text, so that an option added later is never left out of it.
std::string options_text(const CompileOptions &o);

/// The folder compile() uses when CompileOptions::cache.dir is empty: $QKV_CACHE_DIR if
/// set and not empty, else $HOME/.cache/qkv/kernels ("" when HOME is not set either).
std::string default_dir();

/// Whether the environment allows the cache: false when QKV_CACHE is 0, off, false or no.
bool enabled_by_env();

/// The cap on a folder's entries when neither CacheOptions::max_bytes nor
/// $QKV_CACHE_MAX_MB says otherwise.
inline constexpr std::uint64_t kDefaultMaxBytes = std::uint64_t{1} << 30;

/// `requested` when not 0, else $QKV_CACHE_MAX_MB mebibytes (a positive whole number;
/// anything else is a qkv::Error naming the variable), else kDefaultMaxBytes.
std::uint64_t max_bytes(std::uint64_t requested = 0);

/// qkv's version and the entry format, as entries record them, e.g. "0.1.0 format 1".
std::string version();

/// The file name suffix of an entry.
inline constexpr const char *kEntrySuffix = ".qkvk";

struct Info {
  std::string dir;             ///< the folder looked at
  bool exists = false;         ///< whether it exists
  bool enabled = true;         ///< enabled_by_env()
  std::uint64_t entries = 0;   ///< files named *.qkvk
  std::uint64_t bytes = 0;     ///< their total size
  std::uint64_t temporary = 0; ///< *.qkvk.tmp.* files: writes in progress or interrupted
};

/// What the folder `dir` (default_dir() when empty) holds.
Info info(const std::string &dir = {});

/// Removes the least recently used entries of `dir` (by their files' modification times,
/// oldest first; a hit renews its entry's) until the rest take at most `max_bytes`.
/// Returns how many were removed. Never throws: an entry another process removed first,
/// or one that cannot be removed, is passed over.
std::uint64_t trim(const std::string &dir, std::uint64_t max_bytes);

/// Removes the files the cache wrote in `dir` (default_dir() when empty): its entries and
/// temporary files, nothing else. Returns how many were removed; throws qkv::Error when
/// one cannot be.
std::uint64_t clear(const std::string &dir = {});

} // namespace qkv::kernel_cache
