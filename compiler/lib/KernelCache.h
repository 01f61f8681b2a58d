// The on-disk kernel cache's key and entries (internal to the compiler library; the
// public side is <qkv/compiler/kernel_cache.hpp>). docs/compiler.md, "Kernel cache",
// describes the key, the entry format and the safety rules implemented here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <qkv/compiler/compile.hpp>

namespace qkv::cache {

/// The entry format: bump it whenever the bytes of an entry, or what the object inside
/// expects of the code that loads it (the packed calling convention), change.
inline constexpr std::uint32_t kFormat = 3;

/// Everything that changes the code compile() makes, as text, and its hash. Two compiles
/// with equal key texts make the same object.
struct Key {
  std::string text;
  std::uint64_t hash = 0;
  std::string hex; ///< the hash as 16 hex digits: the entry's file name
};

/// The key of compiling g with options on this host for `target` (Target::str()), the
/// schedule's vector width resolved to `vector_bits` (0 in the schedule means the host's
/// widest).
Key make_key(const Graph &g, const CompileOptions &options, int vector_bits,
             const std::string &target);

/// Where (and whether) compile() reads and writes the entry for a key.
struct Place {
  bool read = false, write = false;
  std::string dir, path;
  std::uint64_t max_bytes = 0; ///< the folder's cap (kernel_cache::max_bytes)
  std::string off; ///< why neither happens, when so
};
Place place(const CompileOptions &options, const Key &key);

/// What a cached kernel is: its entry symbol (`_mlir_ciface_<fn>`) and its object files
/// (one per part LLVM compiled on its own thread).
struct Entry {
  std::string symbol;
  std::vector<std::string> objects;
};

/// The entry at place.path, if there is a valid one for the key (its file's time is then
/// renewed, so the cap removes least recently used entries first). `invalid` receives why
/// an existing file was not used (truncated, checksum mismatch, other version or key, ...);
/// it stays empty when there is no file.
std::optional<Entry> read_entry(const Place &place, const Key &key, std::string &invalid);

/// Writes the entry to a temporary file in place.dir and renames it to place.path (so a
/// reader sees the old file or the new one, never a part), then trims the folder to
/// place.max_bytes. Returns "" on success, else what failed; never throws.
std::string write_entry(const Place &place, const Key &key, const Entry &entry);

/// One line on stderr per cache folder and process: "qkv: warning: kernel cache: ...".
void warn_once(const std::string &dir, const std::string &message);

} // namespace qkv::cache
