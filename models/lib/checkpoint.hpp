// What the model loaders share when they read a Hugging Face checkpoint: the table of
// tensors a model needs, and PyTorch's (out, in) linear weights turned into the (in, out)
// that qkv's `linear` takes. Private to models/lib.
#pragma once

#include <string>

#include <qkv/runtime/tensor.hpp>

namespace qkv::models_detail {

/// One tensor of a checkpoint: its name (within a layer, or whole) and PyTorch shape.
struct WeightSpec {
  std::string name;
  Shape shape;
  bool linear_weight = false; // stored (out, in); the graphs take (in, out)
};

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

} // namespace qkv::models_detail
