// Packed weights: the layout (pack_gemm_weight), a kernel's packed copies, and the
// process-wide registry that lets kernels share them.
#include "packed_weights.hpp"

#include <algorithm>

namespace qkv {

Tensor pack_gemm_weight(const Tensor &w, int panel_columns) {
  if (w.rank() != 2 || (w.dtype() != DType::F32 && w.dtype() != DType::F64) || panel_columns <= 0)
    user_error("pack_gemm_weight: needs a 2-D f32 or f64 tensor and positive panel columns, got " +
               w.type_str() + " and " + std::to_string(panel_columns));
  const std::int64_t k = w.shape()[0], n = w.shape()[1], nr = panel_columns;
  const std::int64_t panels = (n + nr - 1) / nr;
  Tensor out(w.dtype(), {panels * k * nr}); // zero-filled: the columns past n stay 0
  auto copy = [&](auto *to, const auto *from) {
    for (std::int64_t p = 0; p < panels; ++p) {
      std::int64_t cols = std::min(nr, n - p * nr);
      for (std::int64_t r = 0; r < k; ++r)
        std::copy_n(from + r * n + p * nr, cols, to + (p * k + r) * nr);
    }
  };
  if (w.dtype() == DType::F32)
    copy(out.data_as<float>(), w.data_as<float>());
  else
    copy(out.data_as<double>(), w.data_as<double>());
  return out;
}

namespace {

bool fresh(const PackedCopy &c, const Tensor &w) {
  return !c.source.expired() && c.writes == w.writes();
}

/// The packed copies alive in the process, by weight tensor and panel width.
class Registry {
public:
  /// The packed copy of `w` in panels of `nr`: an existing one when it is still fresh,
  /// else a new one (`packed` is set).
  std::shared_ptr<PackedCopy> get(const Tensor &w, int nr, bool &packed) {
    std::lock_guard<std::mutex> lock(mu_);
    std::erase_if(copies_, [](const auto &e) {
      auto c = e.second.lock();
      return !c || c->source.expired();
    });
    auto key = std::make_pair(w.storage_id(), nr);
    if (auto c = copies_[key].lock(); c && fresh(*c, w)) {
      packed = false;
      return c;
    }
    auto c = std::make_shared<PackedCopy>(PackedCopy{w.lifetime(), w.writes(), pack_gemm_weight(w, nr)});
    copies_[key] = c;
    packed = true;
    return c;
  }

private:
  std::mutex mu_;
  std::map<std::pair<std::uint64_t, int>, std::weak_ptr<PackedCopy>> copies_;
};

Registry &registry() {
  static Registry r;
  return r;
}

} // namespace

std::vector<Tensor> Kernel::packed_weights(const TensorMap &inputs, bool skip_missing) const {
  std::vector<Tensor> out;
  if (entry_.packed_params.empty())
    return out;
  std::lock_guard<std::mutex> lock(packed_->mu);
  // Copies of weights that are gone are let go.
  std::erase_if(packed_->copies, [](const auto &c) { return c.second->source.expired(); });
  for (std::size_t i = 0; i < entry_.packed_params.size(); ++i) {
    const PackedParam &p = entry_.packed_params[i];
    const std::string &name = graph_->node(graph_->arguments()[static_cast<std::size_t>(p.argument)]).name;
    auto it = inputs.find(name);
    if (it == inputs.end() && skip_missing)
      continue;
    const Tensor &w = inputs.at(name);
    std::shared_ptr<PackedCopy> &c = packed_->copies[{i, w.storage_id()}];
    if (!c || !fresh(*c, w)) {
      bool packed = false;
      c = registry().get(w, p.panel_columns, packed);
      packed_->packs += packed ? 1 : 0;
    }
    out.push_back(c->packed);
  }
  return out;
}

void Kernel::prepare(const TensorMap &params) const {
  for (const PackedParam &p : entry_.packed_params) {
    const Node &n = graph_->node(graph_->arguments()[static_cast<std::size_t>(p.argument)]);
    auto it = params.find(n.name);
    if (it == params.end())
      continue;
    const Tensor &w = it->second;
    if (w.dtype() != n.dtype || w.rank() != 2 || (n.dims[0].is_static() && w.shape()[0] != n.dims[0].extent) ||
        (n.dims[1].is_static() && w.shape()[1] != n.dims[1].extent))
      user_error("graph '" + graph_->name() + "': param '" + n.name + "' is " + w.type_str() +
                 ", the graph declares " + std::string(dtype_name(n.dtype)) + describe_full(n.dims));
  }
  packed_weights(params, /*skip_missing=*/true);
}

std::int64_t Kernel::weight_packs() const {
  std::lock_guard<std::mutex> lock(packed_->mu);
  return packed_->packs;
}

std::int64_t Kernel::packed_bytes() const {
  std::lock_guard<std::mutex> lock(packed_->mu);
  std::int64_t bytes = 0;
  for (const auto &[key, c] : packed_->copies)
    bytes += static_cast<std::int64_t>(c->packed.nbytes());
  return bytes;
}

} // namespace qkv
