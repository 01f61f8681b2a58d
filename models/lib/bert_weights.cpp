// BertWeights: a BERT checkpoint's tensors from .safetensors, shape-checked, as the
// graphs take them.
#include <qkv/models/bert.hpp>

#include <qkv/dsl/error.hpp>
#include <qkv/models/tensor_parallel.hpp>
#include <qkv/runtime/safetensors.hpp>

#include "checkpoint.hpp"

namespace qkv {

namespace {

using models_detail::load_weight;
using models_detail::transposed;
using Spec = models_detail::WeightSpec;

std::vector<Spec> layer_specs(const BertConfig &c) {
  std::int64_t D = c.hidden_size, F = c.intermediate_size;
  std::vector<Spec> s;
  auto dense = [&](const std::string &n, std::int64_t in, std::int64_t out) {
    s.push_back({n + ".weight", {out, in}, true});
    s.push_back({n + ".bias", {out}});
  };
  auto norm = [&](const std::string &n) {
    s.push_back({n + ".weight", {D}});
    s.push_back({n + ".bias", {D}});
  };
  dense("attention.self.query", D, D);
  dense("attention.self.key", D, D);
  dense("attention.self.value", D, D);
  dense("attention.output.dense", D, D);
  norm("attention.output.LayerNorm");
  dense("intermediate.dense", D, F);
  dense("output.dense", F, D);
  norm("output.LayerNorm");
  return s;
}

std::vector<Spec> embedding_specs(const BertConfig &c) {
  std::int64_t D = c.hidden_size;
  return {{"word_embeddings.weight", {c.vocab_size, D}},
          {"position_embeddings.weight", {c.max_position_embeddings, D}},
          {"token_type_embeddings.weight", {c.type_vocab_size, D}},
          {"LayerNorm.weight", {D}},
          {"LayerNorm.bias", {D}}};
}

/// A map's entries under `prefix`, with the prefix removed.
TensorMap strip(const TensorMap &all, const std::string &prefix) {
  TensorMap out;
  for (const auto &[name, t] : all)
    if (name.compare(0, prefix.size(), prefix) == 0)
      out.emplace(name.substr(prefix.size()), t);
  return out;
}

} // namespace

BertWeights BertWeights::load(const std::string &path, const BertConfig &c, DType dtype) {
  models_detail::check_model_dtype("BertWeights::load", dtype);
  SafeTensors file = SafeTensors::open(path);
  // BertModel checkpoints name tensors "embeddings...", task models "bert.embeddings...".
  std::string root;
  if (!file.contains("embeddings.word_embeddings.weight")) {
    if (!file.contains("bert.embeddings.word_embeddings.weight"))
      user_error(path + ": no tensor 'embeddings.word_embeddings.weight' (nor "
                        "'bert.embeddings.word_embeddings.weight'): not a BERT checkpoint?");
    root = "bert.";
  }
  BertWeights w;
  auto take = [&](const std::string &prefix, const std::vector<Spec> &specs) {
    for (const Spec &s : specs) {
      Tensor t = load_weight(file, root + prefix + s.name, s.shape);
      if (s.linear_weight)
        t = transposed(t);
      w.all_.emplace(prefix + s.name, dtype == DType::F32 ? t : t.to(dtype));
    }
  };
  take("embeddings.", embedding_specs(c));
  for (std::int64_t i = 0; i < c.num_hidden_layers; ++i)
    take("encoder.layer." + std::to_string(i) + ".", layer_specs(c));
  return w;
}

BertWeights BertWeights::shard(const BertConfig &c, int rank, int ranks) const {
  using models_detail::cols_of;
  using models_detail::rows_of;
  std::int64_t hd =
      models_detail::share_of(c.num_attention_heads, ranks, "num_attention_heads") * c.head_dim();
  std::int64_t f = models_detail::share_of(c.intermediate_size, ranks, "intermediate_size");
  auto [v0, v1] = vocab_range(c.vocab_size, rank, ranks);
  BertWeights w = *this;
  auto slice = [&](const std::string &name, bool columns, std::int64_t width) {
    Tensor &t = w.all_.at(name);
    t = columns ? cols_of(t, rank * width, (rank + 1) * width)
                : rows_of(t, rank * width, (rank + 1) * width);
  };
  for (std::int64_t i = 0; i < c.num_hidden_layers; ++i) {
    std::string p = "encoder.layer." + std::to_string(i) + ".";
    for (const char *qkv : {"attention.self.query", "attention.self.key", "attention.self.value"}) {
      slice(p + qkv + ".weight", true, hd);
      slice(p + qkv + ".bias", false, hd);
    }
    slice(p + "attention.output.dense.weight", false, hd);
    slice(p + "intermediate.dense.weight", true, f);
    slice(p + "intermediate.dense.bias", false, f);
    slice(p + "output.dense.weight", false, f);
  }
  Tensor &word = w.all_.at("embeddings.word_embeddings.weight");
  word = rows_of(word, v0, v1);
  return w;
}

TensorMap BertWeights::embeddings() const { return strip(all_, "embeddings."); }

TensorMap BertWeights::layer(std::int64_t i) const {
  return strip(all_, "encoder.layer." + std::to_string(i) + ".");
}

} // namespace qkv
