// Llama: config.json, the graphs (qkv ops only), the weights.
#include <qkv/models/llama.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include <qkv/dsl/error.hpp>
#include <qkv/runtime/safetensors.hpp>

#include "checkpoint.hpp"

namespace qkv {

// ---- config ------------------------------------------------------------------------------

namespace {

/// The object that holds the RoPE settings, where transformers 5 looks for it: the legacy
/// `rope_scaling` when it is a non-empty object (transformers 4 wrote scaled RoPE there),
/// else `rope_parameters` (where transformers 5 writes rope_theta and rope_type).
std::optional<JsonConfig> rope_settings(const JsonConfig &j) {
  for (const char *key : {"rope_scaling", "rope_parameters"})
    if (j.has(key) && !j.at(key).keys().empty())
      return j.at(key);
  return std::nullopt;
}

/// RoPE's base: the settings' rope_theta, else the top-level one (transformers 4), else
/// 10000; and a refusal of scaled RoPE variants (Llama 3's "llama3", "linear", "dynamic",
/// YaRN; named by rope_type or by the older type): those change the frequencies, which
/// qkv's rope does not model.
double read_rope_theta(const JsonConfig &j) {
  double top = j.number("rope_theta", 10000.0);
  std::optional<JsonConfig> rs = rope_settings(j);
  if (!rs)
    return top;
  const char *key = rs->has("rope_type") ? "rope_type" : "type";
  std::string type = rs->string(key, "default");
  if (type != "default")
    rs->fail(key, "is '" + type + "'; qkv's Llama supports only \"default\" (unscaled) RoPE");
  return rs->number("rope_theta", top);
}

} // namespace

LlamaConfig LlamaConfig::from_json(const JsonConfig &j) {
  std::string type = j.string("model_type");
  if (type != "llama")
    j.fail("model_type", "is '" + type + "'; qkv's decoder reads \"llama\" models");
  std::string act = j.string("hidden_act", "silu");
  if (act != "silu")
    j.fail("hidden_act", "is '" + act + "'; a Llama MLP is SwiGLU (\"silu\")");
  for (const char *bias : {"attention_bias", "mlp_bias"})
    if (j.boolean(bias, false))
      j.fail(bias, "is true; qkv's Llama has no biases");
  LlamaConfig c;
  auto positive = [&](const char *key, std::int64_t fallback) {
    std::int64_t v = fallback > 0 ? j.integer(key, fallback) : j.integer(key);
    if (v < 1)
      j.fail(key, "must be positive, got " + std::to_string(v));
    return v;
  };
  c.vocab_size = positive("vocab_size", 0);
  c.hidden_size = positive("hidden_size", 0);
  c.intermediate_size = positive("intermediate_size", 0);
  c.num_hidden_layers = positive("num_hidden_layers", 0);
  c.num_attention_heads = positive("num_attention_heads", 0);
  c.num_key_value_heads = positive("num_key_value_heads", c.num_attention_heads);
  c.max_position_embeddings = positive("max_position_embeddings", 0);
  if (c.hidden_size % c.num_attention_heads != 0 && !j.has("head_dim"))
    j.fail("num_attention_heads", "is " + std::to_string(c.num_attention_heads) +
                                      ", which does not divide hidden_size " +
                                      std::to_string(c.hidden_size));
  c.head_dim = positive("head_dim", c.hidden_size / c.num_attention_heads);
  if (c.head_dim % 2 != 0)
    j.fail("head_dim", "is " + std::to_string(c.head_dim) + "; RoPE needs an even head dim");
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    j.fail("num_key_value_heads", "is " + std::to_string(c.num_key_value_heads) +
                                      ", which does not divide num_attention_heads " +
                                      std::to_string(c.num_attention_heads));
  c.rms_norm_eps = j.number("rms_norm_eps");
  if (!(c.rms_norm_eps >= 0))
    j.fail("rms_norm_eps", "must be a non-negative number");
  c.rope_theta = read_rope_theta(j);
  if (!(c.rope_theta > 0))
    j.fail("rope_theta", "must be positive");
  c.tie_word_embeddings = j.boolean("tie_word_embeddings", false);
  return c;
}

LlamaConfig LlamaConfig::load(const std::string &path) { return from_json(JsonConfig::load(path)); }

std::pair<std::int64_t, std::int64_t> LlamaConfig::vocab_range(int rank, int ranks) const {
  return qkv::vocab_range(vocab_size, rank, ranks);
}

LlamaConfig LlamaConfig::shard(int rank, int ranks) const {
  user_check(ranks >= 1 && rank >= 0 && rank < ranks,
             "LlamaConfig::shard: rank " + std::to_string(rank) + " of " + std::to_string(ranks));
  auto divided = [&](std::int64_t n, const char *field) {
    return models_detail::share_of(n, ranks, field);
  };
  LlamaConfig c = *this;
  c.num_attention_heads = divided(num_attention_heads, "num_attention_heads");
  c.num_key_value_heads = divided(num_key_value_heads, "num_key_value_heads");
  c.intermediate_size = divided(intermediate_size, "intermediate_size");
  auto [first, last] = vocab_range(rank, ranks);
  if (last <= first)
    user_error("tensor parallelism over " + std::to_string(ranks) + " ranks: vocab_size " +
               std::to_string(vocab_size) + " leaves rank " + std::to_string(rank) + " no tokens");
  c.vocab_size = last - first;
  return c;
}

// ---- graphs ------------------------------------------------------------------------------

namespace {

/// The graphs' dims, and the dtype of their float values.
struct Dims {
  Dim B{"B"}, N{"n"}, D, H, Hkv, Dh, F, V;
  DType t;
  Dims(const LlamaConfig &c, DType dtype, std::int64_t n = 0)
      : N(n ? Dim("n", n) : Dim("n")), D("D", c.hidden_size), H("H", c.num_attention_heads),
        Hkv(c.num_key_value_heads == c.num_attention_heads ? H
                                                           : Dim("Hkv", c.num_key_value_heads)),
        Dh("Dh", c.head_dim), F("F", c.intermediate_size), V("V", c.vocab_size), t(dtype) {
    models_detail::check_model_dtype("Llama graphs", dtype);
  }
  Dim qdim() const { return product(H, Dh); }
  Dim kvdim() const { return product(Hkv, Dh); }
};

/// This layer's keys or values in the cache, followed by the step's new rows.
struct CacheInputs {
  Value lengths, k_store, v_store, table;
};

CacheInputs cache_inputs(Graph &g, const Dims &d, bool paged) {
  CacheInputs ci;
  ci.lengths = g.input("lengths", DType::I64, {d.B});
  if (paged) {
    Dim P("P"), page("page"), M("M");
    ci.k_store = g.input("k_pool", d.t, {P, d.Hkv, page, d.Dh});
    ci.v_store = g.input("v_pool", d.t, {P, d.Hkv, page, d.Dh});
    ci.table = g.input("block_table", DType::I32, {d.B, M});
  } else {
    Dim C("C");
    ci.k_store = g.input("k_past", d.t, {d.B, d.Hkv, C, d.Dh});
    ci.v_store = g.input("v_past", d.t, {d.B, d.Hkv, C, d.Dh});
  }
  return ci;
}

Value view(const CacheInputs &ci, Value store, Value fresh) {
  return ci.table.valid() ? paged_cache_view(store, ci.table, ci.lengths, fresh)
                          : cache_view(store, ci.lengths, fresh);
}

} // namespace

Graph llama_embed_graph(const LlamaConfig &c, DType dtype) {
  Graph g("llama_embed");
  Dims d(c, dtype);
  Value ids = g.input("ids", DType::I64, {d.B, d.N});
  g.output("x", embedding(ids, g.param("model.embed_tokens.weight", d.t, {d.V, d.D})));
  return g;
}

namespace {

/// The builders of one layer's halves, shared by the whole layer and by a
/// tensor-parallel rank's two kernels.
struct LayerBuilder {
  Graph &g;
  const LlamaConfig &c;
  Dims d;

  Value param(const std::string &name, std::vector<Dim> dims) {
    return g.param(name, d.t, std::move(dims));
  }
  Value norm(Value in, const std::string &name) {
    return rms_norm(in, param(name + ".weight", {d.D}), c.rms_norm_eps);
  }
  Value proj(Value in, const std::string &name, const Dim &from, const Dim &to) {
    return linear(in, param(name + ".weight", {from, to}));
  }

  /// o_proj . attention(q, cache ++ k, cache ++ v) of norm(x), without the residual, and
  /// this step's rotated k and v.
  struct Attn {
    Value part, k, v;
  };
  Attn attention_half(Value x, bool paged) {
    Value positions = g.input("positions", DType::I64, {d.B, d.N});
    CacheInputs ci = cache_inputs(g, d, paged);
    RopeOptions rope_opts;
    rope_opts.base = c.rope_theta;
    Value h = norm(x, "input_layernorm");
    Value q = rope(split_heads(proj(h, "self_attn.q_proj", d.D, d.qdim()), d.H, d.Dh), positions,
                   rope_opts);
    Value k = rope(split_heads(proj(h, "self_attn.k_proj", d.D, d.kvdim()), d.Hkv, d.Dh), positions,
                   rope_opts);
    Value v = split_heads(proj(h, "self_attn.v_proj", d.D, d.kvdim()), d.Hkv, d.Dh);
    Value o =
        attention(q, view(ci, ci.k_store, k), view(ci, ci.v_store, v)).mask(cache_mask(ci.lengths));
    return {proj(merge_heads(o), "self_attn.o_proj", d.qdim(), d.D), k, v};
  }

  /// down . swiglu(gate . h2, up . h2), h2 = norm(a), without the residual.
  Value mlp_half(Value a) {
    Value h2 = norm(a, "post_attention_layernorm");
    Value mlp = swiglu(proj(h2, "mlp.gate_proj", d.D, d.F), proj(h2, "mlp.up_proj", d.D, d.F));
    return proj(mlp, "mlp.down_proj", d.F, d.D);
  }
};

} // namespace

Graph llama_layer_graph(const LlamaConfig &c, bool paged, std::int64_t new_tokens, DType dtype) {
  Graph g(paged ? "llama_layer_paged" : "llama_layer");
  LayerBuilder lb{g, c, Dims(c, dtype, new_tokens)};
  Value x = g.input("x", lb.d.t, {lb.d.B, lb.d.N, lb.d.D});
  LayerBuilder::Attn at = lb.attention_half(x, paged);
  Value a = add(x, at.part);
  g.output("y", add(a, lb.mlp_half(a)));
  g.output("k", at.k);
  g.output("v", at.v);
  return g;
}

Graph llama_attention_graph(const LlamaConfig &c, bool paged, std::int64_t new_tokens,
                            DType dtype) {
  Graph g(paged ? "llama_attention_paged" : "llama_attention");
  LayerBuilder lb{g, c, Dims(c, dtype, new_tokens)};
  Value x = g.input("x", lb.d.t, {lb.d.B, lb.d.N, lb.d.D});
  LayerBuilder::Attn at = lb.attention_half(x, paged);
  g.output("part", at.part);
  g.output("k", at.k);
  g.output("v", at.v);
  return g;
}

Graph llama_mlp_graph(const LlamaConfig &c, DType dtype) {
  Graph g("llama_mlp");
  LayerBuilder lb{g, c, Dims(c, dtype)};
  g.output("part", lb.mlp_half(g.input("x", lb.d.t, {lb.d.B, lb.d.N, lb.d.D})));
  return g;
}

Graph llama_head_graph(const LlamaConfig &c, DType dtype) {
  Graph g("llama_head");
  Dims d(c, dtype);
  Value x = g.input("x", d.t, {d.B, d.N, d.D});
  Value h = rms_norm(x, g.param("model.norm.weight", d.t, {d.D}), c.rms_norm_eps);
  g.output("logits", linear(h, g.param("lm_head.weight", d.t, {d.D, d.V})));
  return g;
}

// ---- weights -----------------------------------------------------------------------------

namespace {

using models_detail::load_weight;
using models_detail::transposed;
using Spec = models_detail::WeightSpec;

std::vector<Spec> layer_specs(const LlamaConfig &c) {
  std::int64_t D = c.hidden_size, F = c.intermediate_size;
  std::int64_t Q = c.num_attention_heads * c.head_dim, KV = c.num_key_value_heads * c.head_dim;
  return {{"input_layernorm.weight", {D}},
          {"self_attn.q_proj.weight", {Q, D}, true},
          {"self_attn.k_proj.weight", {KV, D}, true},
          {"self_attn.v_proj.weight", {KV, D}, true},
          {"self_attn.o_proj.weight", {D, Q}, true},
          {"post_attention_layernorm.weight", {D}},
          {"mlp.gate_proj.weight", {F, D}, true},
          {"mlp.up_proj.weight", {F, D}, true},
          {"mlp.down_proj.weight", {D, F}, true}};
}

std::string layer_prefix(std::int64_t i) { return "model.layers." + std::to_string(i) + "."; }

} // namespace

namespace {

/// Every tensor of `w` converted to `dtype` (f32 kept as it is).
void keep_as(TensorMap &w, DType dtype) {
  if (dtype != DType::F32)
    for (auto &[name, t] : w)
      t = t.to(dtype);
}

} // namespace

using models_detail::cols_of;
using models_detail::rows_of;

LlamaWeights LlamaWeights::shard(const LlamaConfig &full, int rank, int ranks) const {
  LlamaConfig part = full.shard(rank, ranks);
  auto [v0, v1] = full.vocab_range(rank, ranks);
  std::int64_t q = part.num_attention_heads * full.head_dim;
  std::int64_t kv = part.num_key_value_heads * full.head_dim;
  std::int64_t f = part.intermediate_size;
  LlamaWeights w;
  w.embed_.emplace("model.embed_tokens.weight",
                   rows_of(embed_.at("model.embed_tokens.weight"), v0, v1));
  for (const TensorMap &layer : layers_) {
    TensorMap l;
    auto col_slice = [&](const char *name, std::int64_t width) {
      l.emplace(name, cols_of(layer.at(name), rank * width, (rank + 1) * width));
    };
    auto row_slice = [&](const char *name, std::int64_t height) {
      l.emplace(name, rows_of(layer.at(name), rank * height, (rank + 1) * height));
    };
    col_slice("self_attn.q_proj.weight", q);
    col_slice("self_attn.k_proj.weight", kv);
    col_slice("self_attn.v_proj.weight", kv);
    row_slice("self_attn.o_proj.weight", q);
    col_slice("mlp.gate_proj.weight", f);
    col_slice("mlp.up_proj.weight", f);
    row_slice("mlp.down_proj.weight", f);
    for (const char *norm : {"input_layernorm.weight", "post_attention_layernorm.weight"})
      l.emplace(norm, layer.at(norm));
    w.layers_.push_back(std::move(l));
  }
  w.head_.emplace("model.norm.weight", head_.at("model.norm.weight"));
  w.head_.emplace("lm_head.weight", cols_of(head_.at("lm_head.weight"), v0, v1));
  return w;
}

void LlamaWeights::convert(DType dtype) {
  keep_as(embed_, dtype);
  keep_as(head_, dtype);
  for (TensorMap &layer : layers_)
    keep_as(layer, dtype);
}

LlamaWeights LlamaWeights::load(const std::string &path, const LlamaConfig &c, DType dtype) {
  models_detail::check_model_dtype("LlamaWeights", dtype);
  SafeTensors file = SafeTensors::open(path);
  LlamaWeights w;
  auto take = [&](const std::string &name, const Shape &shape, bool linear_weight) {
    Tensor t = load_weight(file, name, shape);
    return linear_weight ? transposed(t) : t;
  };
  std::int64_t D = c.hidden_size, V = c.vocab_size;
  Tensor embed = take("model.embed_tokens.weight", {V, D}, false);
  w.embed_.emplace("model.embed_tokens.weight", embed);
  for (std::int64_t i = 0; i < c.num_hidden_layers; ++i) {
    TensorMap layer;
    for (const Spec &s : layer_specs(c))
      layer.emplace(s.name, take(layer_prefix(i) + s.name, s.shape, s.linear_weight));
    w.layers_.push_back(std::move(layer));
  }
  w.head_.emplace("model.norm.weight", take("model.norm.weight", {D}, false));
  if (c.tie_word_embeddings)
    w.head_.emplace("lm_head.weight", transposed(embed));
  else if (!file.contains("lm_head.weight"))
    user_error(path + ": no tensor 'lm_head.weight', and config.json does not tie it to "
                      "model.embed_tokens.weight (tie_word_embeddings is false)");
  else
    w.head_.emplace("lm_head.weight", take("lm_head.weight", {V, D}, true));
  w.convert(dtype);
  return w;
}

LlamaWeights LlamaWeights::random(const LlamaConfig &c, std::uint64_t seed, DType dtype) {
  models_detail::check_model_dtype("LlamaWeights", dtype);
  LlamaWeights w;
  auto uniform = [&](Shape shape, double fan_in) {
    double a = fan_in > 0 ? std::sqrt(3.0 / fan_in) : 1.0;
    return Tensor::random(DType::F32, std::move(shape), seed++, -a, a);
  };
  auto ones = [](std::int64_t n) {
    return Tensor::from_values(DType::F32, {n}, std::vector<double>(static_cast<std::size_t>(n), 1.0));
  };
  std::int64_t D = c.hidden_size, V = c.vocab_size;
  w.embed_.emplace("model.embed_tokens.weight", uniform({V, D}, 0));
  for (std::int64_t i = 0; i < c.num_hidden_layers; ++i) {
    TensorMap layer;
    for (const Spec &s : layer_specs(c))
      layer.emplace(s.name, s.linear_weight
                                ? uniform({s.shape[1], s.shape[0]}, static_cast<double>(s.shape[1]))
                                : ones(s.shape[0]));
    w.layers_.push_back(std::move(layer));
  }
  w.head_.emplace("model.norm.weight", ones(D));
  w.head_.emplace("lm_head.weight", uniform({D, V}, static_cast<double>(D)));
  w.convert(dtype);
  return w;
}

} // namespace qkv
