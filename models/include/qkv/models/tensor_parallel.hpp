// Tensor parallelism (Megatron-style) for the models: what a model needs from its ranks,
// and how a vocabulary is split over them. qkv::dist::tensor_parallel(comm) provides the
// collectives over MPI (docs/distributed.md); the models link nothing of MPI.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include <qkv/runtime/tensor.hpp>

namespace qkv {

/// The collectives of a tensor-parallel model. Both calls are collective: every rank makes
/// them in the same order.
struct TensorParallel {
  int rank = 0, ranks = 1;
  /// t (f32) summed over the ranks, in place; `what` names it in errors.
  std::function<void(Tensor &t, const std::string &what)> all_reduce_sum;
  /// Every rank's t (f32, (..., n_r), the same leading dims) joined along the last axis,
  /// in rank order.
  std::function<Tensor(const Tensor &t, const std::string &what)> all_gather_last;
};

/// Rank `rank` of `ranks`'s tokens [first, last) of a vocabulary of `vocab`: ceil(vocab /
/// ranks) each, the last rank the rest.
inline std::pair<std::int64_t, std::int64_t> vocab_range(std::int64_t vocab, int rank, int ranks) {
  std::int64_t per = (vocab + ranks - 1) / ranks;
  std::int64_t first = std::min(vocab, per * rank);
  return {first, std::min(vocab, first + per)};
}

} // namespace qkv
