// Packed weights: the layout (pack_gemm_weight), a kernel's packed copies, and the
// process-wide registry that lets kernels share them.
#include "packed_weights.hpp"

#include <algorithm>
#include <tuple>

namespace qkv {

Tensor pack_gemm_weight(const Tensor &w, int panel_columns, DType dtype, int panel_rows,
                        int row_multiple) {
  if (row_multiple == 0)
    row_multiple = panel_rows;
  bool to_bf16 = dtype == DType::BF16 && (w.dtype() == DType::F32 || w.dtype() == DType::BF16);
  bool to_wide = (dtype == DType::F32 || dtype == DType::F64) && is_float(w.dtype());
  if (w.rank() != 2 || panel_columns <= 0 || !(to_bf16 || to_wide) ||
      !(panel_rows == 1 || (panel_rows == 2 && dtype == DType::BF16)) || row_multiple <= 0 ||
      row_multiple % panel_rows != 0)
    user_error("pack_gemm_weight: needs a 2-D float tensor, positive panel columns, f32 or "
               "f64 panels of single rows or bf16 panels of 1 or 2 rows from f32 or bf16, and a "
               "row multiple that is a positive multiple of the panel rows; got " +
               w.type_str() + " into " + std::string(dtype_name(dtype)) + " panels of " +
               std::to_string(panel_columns) + " columns and " + std::to_string(panel_rows) +
               " rows, rows a multiple of " + std::to_string(row_multiple));
  const std::int64_t k = w.shape()[0], n = w.shape()[1], nr = panel_columns, g = panel_rows;
  const std::int64_t panels = (n + nr - 1) / nr;
  const std::int64_t kp = (k + row_multiple - 1) / row_multiple * row_multiple;
  Tensor out(dtype, {panels * kp * nr}); // zero-filled: the columns past n, rows past k stay 0
  // Element (r, j) of panel p goes to (p * kp + r / g * g) * nr + (j - p * nr) * g + r % g.
  auto pack = [&](auto *to, auto convert) {
    for (std::int64_t p = 0; p < panels; ++p) {
      std::int64_t cols = std::min(nr, n - p * nr);
      for (std::int64_t r = 0; r < k; ++r) {
        auto *row = to + (p * kp + r / g * g) * nr + r % g;
        for (std::int64_t j = 0; j < cols; ++j)
          row[j * g] = convert(r * n + p * nr + j);
      }
    }
  };
  if (dtype == DType::BF16 && w.dtype() == DType::BF16) {
    const auto *from = w.data_as<std::uint16_t>();
    pack(out.data_as<std::uint16_t>(), [&](std::int64_t i) { return from[i]; });
  } else if (dtype == DType::BF16) {
    const float *from = w.data_as<float>();
    pack(out.data_as<std::uint16_t>(), [&](std::int64_t i) { return float_to_bf16(from[i]); });
  } else if (dtype == DType::F32) {
    pack(out.data_as<float>(), [&](std::int64_t i) { return static_cast<float>(w.get(i)); });
  } else {
    pack(out.data_as<double>(), [&](std::int64_t i) { return w.get(i); });
  }
  return out;
}

Tensor pack_gemm_weight(const Tensor &w, int panel_columns) {
  if (w.dtype() != DType::F32 && w.dtype() != DType::F64)
    user_error("pack_gemm_weight: needs a 2-D f32 or f64 tensor and positive panel columns, got " +
               w.type_str() + " and " + std::to_string(panel_columns));
  return pack_gemm_weight(w, panel_columns, w.dtype(), 1);
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
  std::shared_ptr<PackedCopy> get(const Tensor &w, const PackedParam &layout, bool &packed) {
    std::lock_guard<std::mutex> lock(mu_);
    std::erase_if(copies_, [](const auto &e) {
      auto c = e.second.lock();
      return !c || c->source.expired();
    });
    auto key = std::make_tuple(w.storage_id(), layout.panel_columns, layout.panel_rows,
                               static_cast<int>(layout.dtype), layout.row_multiple);
    if (auto c = copies_[key].lock(); c && fresh(*c, w)) {
      packed = false;
      return c;
    }
    auto c = std::make_shared<PackedCopy>(
        PackedCopy{w.lifetime(), w.writes(),
                   pack_gemm_weight(w, layout.panel_columns, layout.dtype, layout.panel_rows,
                                    layout.row_multiple)});
    copies_[key] = c;
    packed = true;
    return c;
  }

private:
  std::mutex mu_;
  std::map<std::tuple<std::uint64_t, int, int, int, int>, std::weak_ptr<PackedCopy>> copies_;
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
      c = registry().get(w, p, packed);
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
