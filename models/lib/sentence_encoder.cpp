// SentenceEncoder: a sentence-transformers directory, run through the BERT graphs.
#include <qkv/models/sentence_encoder.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <numeric>

#include <qkv/dsl/error.hpp>
#include <qkv/runtime/interpreter.hpp>

#include "checkpoint.hpp"

namespace qkv {

namespace fs = std::filesystem;

struct SentenceEncoder::Kernels {
  KernelPlan plan;
  std::vector<Kernel> kernels; // PerLayer: embeddings, layer, pool; WholeModel: the model
  double compile_ms = 0;       // compile()'s wall time
};

namespace {

/// modules.json: Transformer, then Pooling, then optionally Normalize. Returns whether
/// the embeddings are normalized, and where the pooling config is.
bool read_modules(const std::string &dir, std::string &pooling_dir) {
  JsonConfig modules = JsonConfig::load((fs::path(dir) / "modules.json").string());
  std::vector<JsonConfig> list = modules.elements();
  const std::string st = "sentence_transformers.models.";
  auto type_of = [&](std::size_t i) {
    return i < list.size() ? list[i].string("type") : std::string("nothing");
  };
  if (type_of(0) != st + "Transformer")
    modules.fail_here("must start with " + st + "Transformer, not " + type_of(0));
  if (type_of(1) != st + "Pooling")
    modules.fail_here("must have " + st + "Pooling second, not " + type_of(1));
  pooling_dir = list[1].string("path");
  bool normalize = list.size() > 2 && type_of(2) == st + "Normalize";
  std::size_t known = normalize ? 3 : 2;
  if (list.size() > known)
    list[known].fail("type", "is " + type_of(known) + ", a module qkv does not run (it runs " +
                                 "Transformer, Pooling and Normalize)");
  return normalize;
}

/// 1_Pooling/config.json must ask for mean pooling and nothing else.
void check_pooling(const std::string &path, std::int64_t hidden) {
  JsonConfig p = JsonConfig::load(path);
  if (!p.boolean("pooling_mode_mean_tokens"))
    p.fail("pooling_mode_mean_tokens", "is false; qkv supports mean pooling only");
  for (const char *mode :
       {"pooling_mode_cls_token", "pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens",
        "pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken"})
    if (p.boolean(mode, false))
      p.fail(mode, "is true; qkv supports mean pooling only");
  std::int64_t dim = p.integer("word_embedding_dimension");
  if (dim != hidden)
    p.fail("word_embedding_dimension", "is " + std::to_string(dim) +
                                           " but the model's hidden_size is " +
                                           std::to_string(hidden));
}

std::int64_t read_max_seq_length(const std::string &dir, const BertConfig &c) {
  fs::path path = fs::path(dir) / "sentence_bert_config.json";
  if (!fs::exists(path))
    return c.max_position_embeddings;
  JsonConfig s = JsonConfig::load(path.string());
  if (s.boolean("do_lower_case", false))
    s.fail("do_lower_case", "is true, which qkv does not support");
  std::int64_t n = s.integer("max_seq_length", c.max_position_embeddings);
  if (n < 3 || n > c.max_position_embeddings)
    s.fail("max_seq_length", "is " + std::to_string(n) + "; it must be in 3.." +
                                 std::to_string(c.max_position_embeddings) +
                                 " (max_position_embeddings)");
  return n;
}

/// (B, 1, D) -> (B, D): the same values, row-major, f32 from a half-precision model's
/// values (the interpreter's f64 stay f64).
Tensor drop_pool_axis(const Tensor &t) {
  Tensor in = is_half(t.dtype()) ? t.to(DType::F32) : t;
  Tensor out = Tensor::uninitialized(in.dtype(), {in.shape()[0], in.shape()[2]});
  if (in.nbytes())
    std::memcpy(out.data(), in.data(), in.nbytes());
  return out;
}

/// The batch's pooling weights in the model's dtype.
Tensor pool_of(const TokenBatch &b, DType dtype) {
  return dtype == DType::F32 ? b.pool : b.pool.to(dtype);
}

} // namespace

std::string model_cache_dir() {
  if (const char *env = std::getenv("QKV_MODEL_CACHE"); env && *env)
    return env;
  const char *home = std::getenv("HOME");
  return (fs::path(home && *home ? home : "/") / ".cache" / "qkv" / "models").string();
}

std::string default_minilm_dir() {
  return (fs::path(model_cache_dir()) / "all-MiniLM-L6-v2").string();
}

SentenceEncoder SentenceEncoder::load(const std::string &dir, DType dtype) {
  if (!fs::is_directory(dir))
    user_error(dir + ": not a directory (a sentence-transformers model directory is expected; "
                     "scripts/fetch-model.sh minilm downloads all-MiniLM-L6-v2)");
  SentenceEncoder m;
  m.config_ = BertConfig::load((fs::path(dir) / "config.json").string());
  std::string pooling_dir;
  m.normalize_ = read_modules(dir, pooling_dir);
  check_pooling((fs::path(dir) / pooling_dir / "config.json").string(), m.config_.hidden_size);
  m.max_seq_length_ = read_max_seq_length(dir, m.config_);
  m.tokenizer_ = WordPieceTokenizer::load(dir);
  if (static_cast<std::int64_t>(m.tokenizer_.vocab_size()) > m.config_.vocab_size)
    user_error(dir + ": the tokenizer has " + std::to_string(m.tokenizer_.vocab_size()) +
               " tokens but config.json's vocab_size is " + std::to_string(m.config_.vocab_size));
  m.dtype_ = dtype;
  m.weights_ = BertWeights::load((fs::path(dir) / "model.safetensors").string(), m.config_, dtype);
  for (std::int64_t i = 0; i < m.config_.num_hidden_layers; ++i)
    m.layer_params_.push_back(m.weights_.layer(i));
  return m;
}

void SentenceEncoder::parallelize(std::shared_ptr<const TensorParallel> tp) {
  user_check(tp && tp->all_reduce_sum, "SentenceEncoder::parallelize: no all_reduce_sum");
  user_check(dtype_ == DType::F32,
             "SentenceEncoder: tensor parallelism runs f32 models (dtype is " +
                 std::string(dtype_name(dtype_)) + ")");
  user_check(!tp_, "SentenceEncoder::parallelize: already parallel");
  weights_ = weights_.shard(config_, tp->rank, tp->ranks);
  layer_params_.clear();
  for (std::int64_t i = 0; i < config_.num_hidden_layers; ++i)
    layer_params_.push_back(weights_.layer(i));
  tp_ = std::move(tp);
  kernels_.reset();
}

namespace {

/// `extra` plus those of `params` kernel k's graph takes.
TensorMap args_of(const Kernel &k, const TensorMap &params, TensorMap extra) {
  return models_detail::with_params(k.graph(), params, std::move(extra));
}

} // namespace

void SentenceEncoder::compile(const CompileOptions &options, KernelPlan plan) {
  auto t = std::chrono::steady_clock::now();
  auto k = std::make_shared<Kernels>();
  k->plan = plan;
  if (tp_) { // embeddings, a layer's three parts, pooling
    k->plan = KernelPlan::PerLayer;
    k->kernels = compile_all({bert_embeddings_tp_graph(config_, dtype_),
                              bert_attention_part_graph(config_, tp_->ranks, dtype_),
                              bert_ffn_part_graph(config_, tp_->ranks, dtype_),
                              bert_output_graph(config_, dtype_),
                              mean_pool_graph(config_, normalize_, dtype_)},
                             Target::host(), options);
    for (const TensorMap &layer : layer_params_)
      for (int i = 1; i <= 3; ++i)
        k->kernels[i].prepare(args_of(k->kernels[i], layer, {}));
  } else if (plan == KernelPlan::WholeModel)
    k->kernels.push_back(
        qkv::compile(bert_model_graph(config_, normalize_, dtype_), Target::host(), options));
  else // three independent graphs, compiled at once
    k->kernels = compile_all({bert_embeddings_graph(config_, dtype_),
                              bert_layer_graph(config_, dtype_),
                              mean_pool_graph(config_, normalize_, dtype_)},
                             Target::host(), options);
  // The weights the GEMMs read packed, packed now rather than by the first batch.
  if (tp_)
    ;
  else if (plan == KernelPlan::WholeModel)
    k->kernels[0].prepare(weights_.all());
  else
    for (const TensorMap &layer : layer_params_)
      k->kernels[1].prepare(layer);
  k->compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
  kernels_ = std::move(k);
}

double SentenceEncoder::compile_ms() const { return kernels_ ? kernels_->compile_ms : 0; }

std::vector<std::vector<std::int32_t>>
SentenceEncoder::tokenize(const std::vector<std::string> &sentences) const {
  std::vector<std::vector<std::int32_t>> out;
  out.reserve(sentences.size());
  for (const std::string &s : sentences)
    out.push_back(tokenizer_.encode(s, static_cast<std::size_t>(max_seq_length_)));
  return out;
}

void SentenceEncoder::check_batch(const TokenBatch &b) const {
  if (b.length() > config_.max_position_embeddings)
    user_error("SentenceEncoder: a batch of " + std::to_string(b.length()) +
               " tokens is longer than the model's " +
               std::to_string(config_.max_position_embeddings) + " positions");
}

/// The batch through this rank's slices: word embeddings of its vocabulary rows summed
/// over the ranks, then per layer the attention's and the FFN's parts summed.
Tensor SentenceEncoder::run_parallel(const TokenBatch &b) {
  const std::vector<Kernel> &k = kernels_->kernels;
  auto [v0, v1] = vocab_range(config_.vocab_size, tp_->rank, tp_->ranks);
  const Tensor &table = weights_.all().at("embeddings.word_embeddings.weight");
  std::int64_t d = config_.hidden_size;
  Tensor word(DType::F32, {b.batch(), b.length(), d});
  const std::int32_t *ids = b.ids.data_as<std::int32_t>();
  for (std::int64_t i = 0; i < b.ids.numel(); ++i)
    if (ids[i] >= v0 && ids[i] < v1)
      std::memcpy(word.data_as<float>() + i * d, table.data_as<float>() + (ids[i] - v0) * d,
                  sizeof(float) * static_cast<std::size_t>(d));
  tp_->all_reduce_sum(word, "the word embeddings");
  Tensor x =
      k[0].run(
              args_of(k[0], weights_.embeddings(),
                      {{"word", word}, {"token_types", b.token_types}, {"positions", b.positions}}))
          .at("x");
  for (const TensorMap &layer : layer_params_) {
    Tensor a = k[1].run(args_of(k[1], layer, {{"x", x}, {"lengths", b.lengths}})).at("part");
    tp_->all_reduce_sum(a, "a layer's attention output");
    TensorMap hf = k[2].run(args_of(k[2], layer, {{"x", x}, {"a", a}}));
    Tensor f = hf.at("part");
    tp_->all_reduce_sum(f, "a layer's FFN output");
    x = k[3].run(args_of(k[3], layer, {{"h", hf.at("h")}, {"f", f}})).at("y");
  }
  return drop_pool_axis(k[4].run({{"x", x}, {"pool", pool_of(b, dtype_)}}).at("embedding"));
}

Tensor SentenceEncoder::run(const TokenBatch &b) {
  check_batch(b);
  if (!kernels_)
    compile();
  if (tp_)
    return run_parallel(b);
  const std::vector<Kernel> &k = kernels_->kernels;
  if (kernels_->plan == KernelPlan::WholeModel) {
    TensorMap in = weights_.all();
    in.insert({{"ids", b.ids},
               {"token_types", b.token_types},
               {"positions", b.positions},
               {"lengths", b.lengths},
               {"pool", pool_of(b, dtype_)}});
    return drop_pool_axis(k[0].run(in).at("embedding"));
  }
  TensorMap in = weights_.embeddings();
  in.insert({{"ids", b.ids}, {"token_types", b.token_types}, {"positions", b.positions}});
  Tensor x = k[0].run(in).at("x");
  for (TensorMap layer : layer_params_) {
    layer.insert({{"x", x}, {"lengths", b.lengths}});
    x = k[1].run(layer).at("y");
  }
  return drop_pool_axis(k[2].run({{"x", x}, {"pool", pool_of(b, dtype_)}}).at("embedding"));
}

Tensor SentenceEncoder::run_reference(const TokenBatch &b) const {
  check_batch(b);
  user_check(!tp_, "SentenceEncoder: the reference runs the whole model in one process; this "
                   "one keeps a rank's slices of the weights (parallelize)");
  TensorMap in = weights_.all();
  in.insert({{"ids", b.ids},
             {"token_types", b.token_types},
             {"positions", b.positions},
             {"lengths", b.lengths},
             {"pool", pool_of(b, dtype_)}});
  return drop_pool_axis(
      reference::run(bert_model_graph(config_, normalize_, dtype_), in).at("embedding"));
}

Tensor SentenceEncoder::embed(const std::vector<std::string> &sentences, std::int64_t batch_size) {
  user_check(batch_size >= 1, "SentenceEncoder::embed: batch_size must be at least 1, got " +
                                  std::to_string(batch_size));
  auto ids = tokenize(sentences);
  auto n = static_cast<std::int64_t>(ids.size());
  // Longest first, so each batch pads to similar lengths (sentence-transformers sorts by
  // characters; tokens are what padding costs).
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
    return ids[a].size() != ids[b].size() ? ids[a].size() > ids[b].size() : a < b;
  });
  Tensor out(DType::F32, {n, dim()});
  for (std::int64_t start = 0; start < n; start += batch_size) {
    std::int64_t end = std::min(n, start + batch_size);
    std::vector<std::vector<std::int32_t>> chunk;
    for (std::int64_t i = start; i < end; ++i)
      chunk.push_back(ids[order[i]]);
    Tensor e = run(TokenBatch::pad(chunk, tokenizer_.pad_id()));
    for (std::int64_t i = start; i < end; ++i)
      std::memcpy(out.data_as<float>() + order[i] * dim(), e.data_as<float>() + (i - start) * dim(),
                  sizeof(float) * dim());
  }
  return out;
}

Tensor SentenceEncoder::embed_reference(const std::vector<std::string> &sentences) const {
  if (sentences.empty())
    return Tensor(DType::F64, {0, dim()});
  return run_reference(TokenBatch::pad(tokenize(sentences), tokenizer_.pad_id()));
}

} // namespace qkv
