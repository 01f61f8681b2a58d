// .safetensors files (Hugging Face's weight format): an 8-byte little-endian header
// length N, N bytes of JSON
//   {"__metadata__": {"format": "pt"},
//    "embeddings.word_embeddings.weight": {"dtype": "F32", "shape": [30522, 384],
//                                          "data_offsets": [796672, 47678464]}, ...}
// then the data section; each tensor's [begin, end) is relative to the data section.
//
// SafeTensors maps the file read-only (mmap) and checks the whole header when it opens it:
// every entry's dtype, shape and offsets, the byte count (shape x dtype size = end - begin),
// offsets inside the file, no two tensors overlapping, no name twice, a header length
// within the file and under 100 MB. Anything else is a qkv::Error naming the file and the
// tensor; nothing is read outside the mapping. Tensors are copied out on demand (load), so
// a model can take what it needs and convert as it goes. As with any mapped file, the file
// must not be truncated by another program while it is open.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <qkv/runtime/tensor.hpp>

namespace qkv {

/// One tensor of a .safetensors file, as its header describes it.
struct SafeTensorInfo {
  std::string name;
  std::string dtype; // as the file spells it: "F32", "F16", "BF16", "I64", "U8", ...
  Shape shape;
  std::uint64_t begin = 0, end = 0; // byte range in the data section
  /// The qkv dtype holding it, or nullopt for a dtype qkv has no tensors of (U8, F8_E4M3...).
  std::optional<DType> qkv_dtype() const;
  std::int64_t numel() const;
};

class SafeTensors {
public:
  /// Opens, maps and checks `path`; a qkv::Error naming the file (and the tensor) on
  /// anything malformed, truncated or inconsistent.
  static SafeTensors open(const std::string &path);

  /// The largest header the reader accepts, as the reference implementation: 100 MB.
  static constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;

  const std::string &path() const { return state_->path; }
  /// Every tensor, ordered by offset.
  const std::vector<SafeTensorInfo> &tensors() const { return state_->tensors; }
  /// The header's "__metadata__" (string to string), empty when it has none.
  const std::map<std::string, std::string> &metadata() const { return state_->metadata; }
  bool contains(const std::string &name) const;
  /// The entry of `name`; a qkv::Error naming the file and the tensor when it is absent.
  const SafeTensorInfo &info(const std::string &name) const;

  /// The stored bytes of a tensor (little-endian, row-major), valid while any copy of this
  /// SafeTensors lives.
  std::span<const std::byte> bytes(const std::string &name) const;
  /// A copy of the tensor in its own dtype (F32, F64, F16, BF16, I32 or I64; any other is a
  /// qkv::Error naming it).
  Tensor load(const std::string &name) const;
  /// A copy converted to `dtype` (e.g. BF16 or F16 weights to F32).
  Tensor load(const std::string &name, DType dtype) const;
  /// load(name, dtype), after checking the tensor has exactly `shape`: the error names the
  /// file, the tensor and both shapes.
  Tensor load(const std::string &name, DType dtype, const Shape &shape) const;

private:
  struct State {
    std::string path;
    std::shared_ptr<const std::byte> mapping; // munmap'ed with the last copy
    std::size_t file_size = 0;
    const std::byte *data = nullptr; // start of the data section
    std::uint64_t data_size = 0;
    std::vector<SafeTensorInfo> tensors;
    std::map<std::string, std::size_t> index; // name -> position in tensors
    std::map<std::string, std::string> metadata;
  };
  explicit SafeTensors(std::shared_ptr<const State> s) : state_(std::move(s)) {}
  std::shared_ptr<const State> state_;
};

/// The byte size of one element of a safetensors dtype ("F32" -> 4), or 0 if unknown.
std::size_t safetensors_dtype_size(const std::string &dtype);

} // namespace qkv
