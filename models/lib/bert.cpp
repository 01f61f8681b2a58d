// BERT: config.json, the graphs (qkv ops only), padded token batches.
#include <qkv/models/bert.hpp>

#include <algorithm>
#include <cmath>

#include <qkv/dsl/error.hpp>

#include "checkpoint.hpp"

namespace qkv {

// ---- config ------------------------------------------------------------------------------

BertConfig BertConfig::from_json(const JsonConfig &j) {
  std::string type = j.string("model_type");
  if (type != "bert")
    j.fail("model_type", "is '" + type + "'; qkv's BERT encoder reads \"bert\" models");
  std::string pos = j.string("position_embedding_type", "absolute");
  if (pos != "absolute")
    j.fail("position_embedding_type", "is '" + pos + "'; only \"absolute\" is supported");
  BertConfig c;
  auto positive = [&](const char *key) {
    std::int64_t v = j.integer(key);
    if (v < 1)
      j.fail(key, "must be positive, got " + std::to_string(v));
    return v;
  };
  c.vocab_size = positive("vocab_size");
  c.hidden_size = positive("hidden_size");
  c.num_hidden_layers = positive("num_hidden_layers");
  c.num_attention_heads = positive("num_attention_heads");
  c.intermediate_size = positive("intermediate_size");
  c.max_position_embeddings = positive("max_position_embeddings");
  c.type_vocab_size = positive("type_vocab_size");
  c.layer_norm_eps = j.number("layer_norm_eps");
  if (!(c.layer_norm_eps >= 0))
    j.fail("layer_norm_eps", "must be a non-negative number");
  if (c.hidden_size % c.num_attention_heads != 0)
    j.fail("num_attention_heads", "is " + std::to_string(c.num_attention_heads) +
                                      ", which does not divide hidden_size " +
                                      std::to_string(c.hidden_size));
  std::string act = j.string("hidden_act");
  if (act == "gelu_new" || act == "gelu_pytorch_tanh")
    c.gelu_tanh = true;
  else if (act != "gelu")
    j.fail("hidden_act", "is '" + act + "'; supported: gelu, gelu_new, gelu_pytorch_tanh");
  return c;
}

BertConfig BertConfig::load(const std::string &path) { return from_json(JsonConfig::load(path)); }

// ---- graphs ------------------------------------------------------------------------------

namespace {

/// The graphs' dims, and the dtype of their float values.
struct Dims {
  Dim B{"B"}, L{"L"}, D, H, Dh, F, V, P, T, Pool{"Pool", 1};
  DType t;
  Dims(const BertConfig &c, DType dtype)
      : D("D", c.hidden_size), H("H", c.num_attention_heads), Dh("Dh", c.head_dim()),
        F("F", c.intermediate_size), V("V", c.vocab_size), P("P", c.max_position_embeddings),
        T("T", c.type_vocab_size), t(dtype) {
    models_detail::check_model_dtype("BERT graphs", dtype);
  }
};

Value bert_embeddings(Graph &g, const Dims &d, const BertConfig &c, const std::string &prefix) {
  Value ids = g.input("ids", DType::I32, {d.B, d.L});
  Value types = g.input("token_types", DType::I32, {d.B, d.L});
  Value positions = g.input("positions", DType::I32, {d.L});
  auto param = [&](const std::string &name, std::vector<Dim> dims) {
    return g.param(prefix + name, d.t, dims);
  };
  Value word = param("word_embeddings.weight", {d.V, d.D});
  Value pos = param("position_embeddings.weight", {d.P, d.D});
  Value type = param("token_type_embeddings.weight", {d.T, d.D});
  Value gamma = param("LayerNorm.weight", {d.D});
  Value beta = param("LayerNorm.bias", {d.D});
  Value x = add(add(embedding(ids, word), embedding(types, type)), embedding(positions, pos));
  return layer_norm(x, gamma, beta, c.layer_norm_eps);
}

/// One post-LN encoder layer; its params are `prefix` + the checkpoint's names.
Value bert_layer(Graph &g, const Dims &d, const BertConfig &c, Value x, Value lengths,
                 const std::string &prefix) {
  auto param = [&](const std::string &name, std::vector<Dim> dims) {
    return g.param(prefix + name, d.t, dims);
  };
  auto dense = [&](Value in, const std::string &name, const Dim &from, const Dim &to) {
    return linear(in, param(name + ".weight", {from, to}), param(name + ".bias", {to}));
  };
  auto norm = [&](Value in, const std::string &name) {
    return layer_norm(in, param(name + ".weight", {d.D}), param(name + ".bias", {d.D}),
                      c.layer_norm_eps);
  };
  Value q = split_heads(dense(x, "attention.self.query", d.D, d.D), d.H, d.Dh);
  Value k = split_heads(dense(x, "attention.self.key", d.D, d.D), d.H, d.Dh);
  Value v = split_heads(dense(x, "attention.self.value", d.D, d.D), d.H, d.Dh);
  Value o = attention(q, k, v).mask([&](Expr b, Expr, Expr, Expr kv) { return kv < lengths[b]; });
  Value a = dense(merge_heads(o, d.D), "attention.output.dense", d.D, d.D);
  Value h = norm(residual(x, a), "attention.output.LayerNorm");
  Value f = gelu(dense(h, "intermediate.dense", d.D, d.F), c.gelu_tanh);
  return norm(residual(h, dense(f, "output.dense", d.F, d.D)), "output.LayerNorm");
}

/// Mean over the real tokens (a (1, L) x (L, D) product per sentence with the pooling
/// weights), then x / max(|x|, 1e-12) as torch's F.normalize when `normalize`: rms_norm
/// divides by sqrt(mean(x^2) + eps), so eps = 1e-24 / D and a factor 1/sqrt(D) give
/// x / sqrt(|x|^2 + 1e-24).
Value mean_pool(Graph &g, const Dims &d, Value x, bool normalize) {
  Value pool = g.input("pool", d.t, {d.B, d.Pool, d.L});
  Value mean = matmul(pool, x);
  if (!normalize)
    return mean;
  double dim = static_cast<double>(d.D.extent);
  return scale(rms_norm(mean, 1e-24 / dim), 1.0 / std::sqrt(dim));
}

} // namespace

namespace {

/// A rank's dims under tensor parallelism: H/ranks heads of the full head dim, I/ranks FFN
/// columns.
Dims rank_dims(const BertConfig &c, int ranks, DType dtype) {
  Dims d(c, dtype);
  d.H = Dim("H", models_detail::share_of(c.num_attention_heads, ranks, "num_attention_heads"));
  d.F = Dim("F", models_detail::share_of(c.intermediate_size, ranks, "intermediate_size"));
  return d;
}

} // namespace

Graph bert_embeddings_tp_graph(const BertConfig &c, DType dtype) {
  Graph g("bert_embeddings_tp");
  Dims d(c, dtype);
  Value word = g.input("word", d.t, {d.B, d.L, d.D});
  Value types = g.input("token_types", DType::I32, {d.B, d.L});
  Value positions = g.input("positions", DType::I32, {d.L});
  auto param = [&](const std::string &name, std::vector<Dim> dims) {
    return g.param(name, d.t, dims);
  };
  Value x = add(add(word, embedding(types, param("token_type_embeddings.weight", {d.T, d.D}))),
                embedding(positions, param("position_embeddings.weight", {d.P, d.D})));
  g.output("x", layer_norm(x, param("LayerNorm.weight", {d.D}), param("LayerNorm.bias", {d.D}),
                           c.layer_norm_eps));
  return g;
}

Graph bert_attention_part_graph(const BertConfig &c, int ranks, DType dtype) {
  Graph g("bert_attention_part");
  Dims d = rank_dims(c, ranks, dtype);
  Value x = g.input("x", d.t, {d.B, d.L, d.D});
  Value lengths = g.input("lengths", DType::I32, {d.B});
  Dim hd = product(d.H, d.Dh);
  auto dense = [&](Value in, const std::string &name) {
    return linear(in, g.param(name + ".weight", d.t, {d.D, hd}),
                  g.param(name + ".bias", d.t, {hd}));
  };
  Value q = split_heads(dense(x, "attention.self.query"), d.H, d.Dh);
  Value k = split_heads(dense(x, "attention.self.key"), d.H, d.Dh);
  Value v = split_heads(dense(x, "attention.self.value"), d.H, d.Dh);
  Value o = attention(q, k, v).mask([&](Expr b, Expr, Expr, Expr kv) { return kv < lengths[b]; });
  g.output("part",
           linear(merge_heads(o, hd), g.param("attention.output.dense.weight", d.t, {hd, d.D})));
  return g;
}

Graph bert_ffn_part_graph(const BertConfig &c, int ranks, DType dtype) {
  Graph g("bert_ffn_part");
  Dims d = rank_dims(c, ranks, dtype);
  Value x = g.input("x", d.t, {d.B, d.L, d.D});
  Value a = g.input("a", d.t, {d.B, d.L, d.D});
  auto param = [&](const std::string &name, std::vector<Dim> dims) {
    return g.param(name, d.t, std::move(dims));
  };
  Value h = layer_norm(add(residual(x, a), param("attention.output.dense.bias", {d.D})),
                       param("attention.output.LayerNorm.weight", {d.D}),
                       param("attention.output.LayerNorm.bias", {d.D}), c.layer_norm_eps);
  Value f = gelu(linear(h, param("intermediate.dense.weight", {d.D, d.F}),
                        param("intermediate.dense.bias", {d.F})),
                 c.gelu_tanh);
  g.output("h", h);
  g.output("part", linear(f, param("output.dense.weight", {d.F, d.D})));
  return g;
}

Graph bert_output_graph(const BertConfig &c, DType dtype) {
  Graph g("bert_output");
  Dims d(c, dtype);
  Value h = g.input("h", d.t, {d.B, d.L, d.D});
  Value f = g.input("f", d.t, {d.B, d.L, d.D});
  auto param = [&](const std::string &name) { return g.param(name, d.t, {d.D}); };
  g.output("y", layer_norm(add(residual(h, f), param("output.dense.bias")),
                           param("output.LayerNorm.weight"), param("output.LayerNorm.bias"),
                           c.layer_norm_eps));
  return g;
}

Graph bert_embeddings_graph(const BertConfig &c, DType dtype) {
  Graph g("bert_embeddings");
  Dims d(c, dtype);
  g.output("x", bert_embeddings(g, d, c, ""));
  return g;
}

Graph bert_layer_graph(const BertConfig &c, DType dtype) {
  Graph g("bert_layer");
  Dims d(c, dtype);
  Value x = g.input("x", d.t, {d.B, d.L, d.D});
  Value lengths = g.input("lengths", DType::I32, {d.B});
  g.output("y", bert_layer(g, d, c, x, lengths, ""));
  return g;
}

Graph mean_pool_graph(const BertConfig &c, bool normalize, DType dtype) {
  Graph g(normalize ? "mean_pool_normalize" : "mean_pool");
  Dims d(c, dtype);
  Value x = g.input("x", d.t, {d.B, d.L, d.D});
  g.output("embedding", mean_pool(g, d, x, normalize));
  return g;
}

Graph bert_model_graph(const BertConfig &c, bool normalize, DType dtype) {
  Graph g("bert_model");
  Dims d(c, dtype);
  Value x = bert_embeddings(g, d, c, "embeddings.");
  Value lengths = g.input("lengths", DType::I32, {d.B});
  for (std::int64_t i = 0; i < c.num_hidden_layers; ++i)
    x = bert_layer(g, d, c, x, lengths, "encoder.layer." + std::to_string(i) + ".");
  g.output("embedding", mean_pool(g, d, x, normalize));
  return g;
}

// ---- batches -----------------------------------------------------------------------------

TokenBatch TokenBatch::pad(const std::vector<std::vector<std::int32_t>> &sequences,
                           std::int32_t pad_id) {
  std::int64_t n = static_cast<std::int64_t>(sequences.size()), len = 0;
  for (const auto &s : sequences) {
    user_check(!s.empty(), "TokenBatch: a sequence has no tokens");
    len = std::max(len, static_cast<std::int64_t>(s.size()));
  }
  TokenBatch b;
  b.ids = Tensor(DType::I32, {n, len});
  b.token_types = Tensor(DType::I32, {n, len});
  b.positions = Tensor(DType::I32, {len});
  b.lengths = Tensor(DType::I32, {n});
  b.pool = Tensor(DType::F32, {n, 1, len});
  auto *ids = b.ids.data_as<std::int32_t>();
  auto *pool = b.pool.data_as<float>();
  for (std::int64_t i = 0; i < n; ++i) {
    const auto &s = sequences[static_cast<std::size_t>(i)];
    auto m = static_cast<std::int64_t>(s.size());
    std::fill(ids + i * len, ids + (i + 1) * len, pad_id);
    std::copy(s.begin(), s.end(), ids + i * len);
    std::fill(pool + i * len, pool + i * len + m, 1.0f / static_cast<float>(m));
    b.lengths.data_as<std::int32_t>()[i] = static_cast<std::int32_t>(m);
  }
  for (std::int64_t j = 0; j < len; ++j)
    b.positions.data_as<std::int32_t>()[j] = static_cast<std::int32_t>(j);
  return b;
}

} // namespace qkv
