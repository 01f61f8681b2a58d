// BertWeights: a BERT checkpoint's tensors from .safetensors, shape-checked, as the
// graphs take them.
#include <qkv/models/bert.hpp>

#include <qkv/dsl/error.hpp>
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

TensorMap BertWeights::embeddings() const { return strip(all_, "embeddings."); }

TensorMap BertWeights::layer(std::int64_t i) const {
  return strip(all_, "encoder.layer." + std::to_string(i) + ".");
}

} // namespace qkv
