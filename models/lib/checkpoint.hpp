// What the model loaders share when they read a Hugging Face checkpoint: the table of
// tensors a model needs, and PyTorch's (out, in) linear weights turned into the (in, out)
// that qkv's `linear` takes. Private to models/lib.
#pragma once

#include <cstring>
#include <optional>
#include <string>

#include <qkv/dsl/error.hpp>
#include <qkv/dsl/graph.hpp>
#include <qkv/runtime/safetensors.hpp>
#include <qkv/runtime/tensor.hpp>

namespace qkv::models_detail {

/// One tensor of a checkpoint: its name (within a layer, or whole) and PyTorch shape.
struct WeightSpec {
  std::string name;
  Shape shape;
  bool linear_weight = false; // stored (out, in); the graphs take (in, out)
};

/// Weight `name` of `file` as f32, after checking it has exactly `shape` and a float
/// dtype: F32, F16, BF16 and F64 are converted to F32; anything else (an I32 tensor of the
/// same byte count, say, whose bits would convert to numbers near -1e9) is a qkv::Error
/// naming the file, the tensor and both dtypes.
inline Tensor load_weight(const SafeTensors &file, const std::string &name, const Shape &shape) {
  const SafeTensorInfo &info = file.info(name);
  std::optional<DType> dtype = info.qkv_dtype();
  if (!dtype || !is_float(*dtype))
    user_error(file.path() + ": tensor '" + name + "' is stored as " + info.dtype +
               ", but the model expects F32 weights (F32, F16, BF16 or F64, converted to F32)");
  return file.load(name, DType::F32, shape);
}

/// A model's element type must be f32, bf16 or f16: a qkv::Error naming `what` otherwise.
inline void check_model_dtype(const std::string &what, DType dtype) {
  if (dtype != DType::F32 && dtype != DType::BF16 && dtype != DType::F16)
    user_error(what + ": the dtype must be f32, bf16 or f16, got " + std::string(dtype_name(dtype)));
}

/// A 2-D f32 tensor transposed: (out, in) -> (in, out).
inline Tensor transposed(const Tensor &w) {
  std::int64_t rows = w.shape()[0], cols = w.shape()[1];
  Tensor t = Tensor::uninitialized(DType::F32, {cols, rows});
  const float *src = w.data_as<float>();
  float *dst = t.data_as<float>();
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j)
      dst[j * rows + i] = src[i * cols + j];
  return t;
}

/// Rows [first, last) of a tensor along its first axis (a 1-D tensor's elements).
inline Tensor rows_of(const Tensor &t, std::int64_t first, std::int64_t last) {
  Shape shape = t.shape();
  std::size_t row = dtype_size(t.dtype());
  for (std::size_t d = 1; d < shape.size(); ++d)
    row *= static_cast<std::size_t>(shape[d]);
  shape[0] = last - first;
  Tensor out(t.dtype(), shape);
  std::memcpy(out.data(), static_cast<const unsigned char *>(t.data()) + first * row,
              static_cast<std::size_t>(last - first) * row);
  return out;
}

/// Columns [first, last) of a 2-D tensor.
inline Tensor cols_of(const Tensor &t, std::int64_t first, std::int64_t last) {
  std::int64_t n = t.shape()[0], cols = t.shape()[1];
  std::size_t e = dtype_size(t.dtype()), width = static_cast<std::size_t>(last - first) * e;
  Tensor out(t.dtype(), {n, last - first});
  const auto *src = static_cast<const unsigned char *>(t.data());
  auto *dst = static_cast<unsigned char *>(out.data());
  for (std::int64_t i = 0; i < n; ++i)
    std::memcpy(dst + static_cast<std::size_t>(i) * width,
                src + static_cast<std::size_t>(i * cols + first) * e, width);
  return out;
}

/// A tensor-parallel rank's share [r n / ranks, (r + 1) n / ranks) of n, which `field`
/// (a config field) must divide: a qkv::Error naming it otherwise.
inline std::int64_t share_of(std::int64_t n, int ranks, const char *field) {
  if (n % ranks != 0)
    user_error("tensor parallelism over " + std::to_string(ranks) + " ranks: " + field + " (" +
               std::to_string(n) + ") must be a multiple of the ranks");
  return n / ranks;
}

/// `in` plus those of `params` that graph `g` takes as arguments: a layer's weights serve
/// the several kernels a layer is split into (tensor parallelism), each taking its own.
inline TensorMap with_params(const Graph &g, const TensorMap &params, TensorMap in) {
  for (NodeId id : g.arguments()) {
    const std::string &name = g.node(id).name;
    auto it = params.find(name);
    if (it != params.end() && !in.count(name))
      in.emplace(name, it->second);
  }
  return in;
}

} // namespace qkv::models_detail
