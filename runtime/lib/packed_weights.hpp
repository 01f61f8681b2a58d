// The packed copies of the weights a kernel's GEMMs read packed (qkv::PackedParam), made
// by Kernel::run or Kernel::prepare. Internal to the runtime library.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include <qkv/runtime/kernel.hpp>

namespace qkv {

/// One weight tensor packed in panels of some width: shared by every kernel that reads
/// that weight at that width (a model's prefill and decode kernels, its layers' kernel
/// run on each layer's weights), freed when the last of them lets it go.
struct PackedCopy {
  std::weak_ptr<const void> source; ///< expires with the weight tensor's buffer
  std::uint64_t writes = 0;         ///< the weight's Tensor::writes() when packed
  Tensor packed;
};

/// A kernel's packed copies, by packed param and weight tensor; shared by the kernel's
/// copies.
struct Kernel::PackedWeights {
  std::mutex mu;
  std::map<std::pair<std::size_t, std::uint64_t>, std::shared_ptr<PackedCopy>> copies;
  std::int64_t packs = 0;
};

} // namespace qkv
