// LlamaModel: the decoder's kernels (or the interpreter) and its KV cache; generate().
#include <qkv/models/llama.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>
#include <numeric>
#include <sstream>

#include <qkv/compiler/compile.hpp>
#include <qkv/dsl/error.hpp>
#include <qkv/runtime/interpreter.hpp>
#include <qkv/runtime/kernel.hpp>

#include "checkpoint.hpp"

namespace qkv {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// One graph, run compiled or interpreted; outputs are in the graph's dtypes either way.
class Runner {
public:
  Runner(Graph graph, const LlamaOptions &o, double &compile_s) : graph_(std::move(graph)) {
    if (o.backend == LlamaOptions::Backend::Interpreter)
      return;
    auto t0 = std::chrono::steady_clock::now();
    CompileOptions co;
    co.schedule.threads = o.threads;
    co.isa = o.isa;
    kernel_ = std::make_unique<Kernel>(compile(graph_, Target::host(), co));
    double s = seconds_since(t0);
    compile_s += s;
    if (o.verbose)
      std::cerr << "[llama] compiled " << graph_.name() << " in " << s << " s\n";
  }

  /// Packs the weights among `params` that the kernel's GEMMs read packed.
  void prepare(const TensorMap &params) const {
    if (kernel_)
      kernel_->prepare(params);
  }

  /// `in` plus those of `params` the graph takes (a layer's weights serve both halves).
  TensorMap run_with(const TensorMap &params, TensorMap in) const {
    return run(models_detail::with_params(graph_, params, std::move(in)));
  }

  TensorMap run(const TensorMap &in) const {
    if (kernel_)
      return kernel_->run(in);
    TensorMap out = reference::run(graph_, in);
    for (const auto &[name, id] : graph_.outputs())
      out.at(name) = out.at(name).to(graph_.node(id).dtype);
    return out;
  }

private:
  Graph graph_;
  std::unique_ptr<Kernel> kernel_;
};

std::unique_ptr<KVCacheBase> make_cache(const LlamaConfig &c, const LlamaOptions &o) {
  std::int64_t capacity = o.capacity ? o.capacity : c.max_position_embeddings;
  if (o.paged) {
    PagedKVCacheConfig pc;
    pc.name = "llama_cache";
    pc.layers = c.num_hidden_layers;
    pc.batch = o.batch;
    pc.kv_heads = c.num_key_value_heads;
    pc.head_dim = c.head_dim;
    pc.page_size = o.page_size;
    pc.max_pages_per_seq = (capacity + o.page_size - 1) / o.page_size;
    pc.num_pages = o.num_pages ? o.num_pages : pc.max_pages_per_seq * o.batch;
    pc.dtype = o.dtype;
    return std::make_unique<PagedKVCache>(pc);
  }
  KVCacheConfig kc;
  kc.name = "llama_cache";
  kc.layers = c.num_hidden_layers;
  kc.batch = o.batch;
  kc.kv_heads = c.num_key_value_heads;
  kc.head_dim = c.head_dim;
  kc.capacity = capacity;
  kc.dtype = o.dtype;
  return std::make_unique<KVCache>(kc);
}

} // namespace

/// a + b, elementwise, f32 (the residual adds of a tensor-parallel layer).
static Tensor plus(const Tensor &a, const Tensor &b) {
  Tensor out = Tensor::uninitialized(DType::F32, a.shape());
  const float *x = a.data_as<float>(), *y = b.data_as<float>();
  float *o = out.data_as<float>();
  for (std::int64_t i = 0; i < a.numel(); ++i)
    o[i] = x[i] + y[i];
  return out;
}

struct LlamaModel::Impl {
  LlamaConfig config;
  LlamaWeights weights; // this rank's slices under tensor parallelism
  LlamaOptions options;
  double compile_s = 0;
  LlamaTimes times;
  std::unique_ptr<KVCacheBase> cache;
  std::unique_ptr<Runner> embed, prefill, decode, head;
  // Tensor parallelism: this rank's part of the config, and each layer's two halves.
  LlamaConfig part;
  std::unique_ptr<Runner> attn_prefill, attn_decode, mlp;

  bool parallel() const { return options.tp && options.tp->ranks > 1; }

  Impl(LlamaConfig c, LlamaWeights w, LlamaOptions o)
      : config(std::move(c)), weights(std::move(w)), options(o), part(config) {
    user_check(options.batch >= 1, "LlamaOptions: batch must be positive");
    user_check(options.page_size >= 1, "LlamaOptions: page_size must be positive");
    check_weights();
    if (parallel()) {
      build_parallel();
      return;
    }
    cache = make_cache(config, options);
    DType t = options.dtype;
    embed = std::make_unique<Runner>(llama_embed_graph(config, t), options, compile_s);
    prefill = std::make_unique<Runner>(llama_layer_graph(config, options.paged, 0, t), options,
                                       compile_s);
    decode = std::make_unique<Runner>(llama_layer_graph(config, options.paged, 1, t), options,
                                      compile_s);
    head = std::make_unique<Runner>(llama_head_graph(config, t), options, compile_s);
    // The weights the GEMMs read packed, packed at load rather than by the first step
    // (the prefill and decode kernels share the copies).
    auto t0 = std::chrono::steady_clock::now();
    for (std::int64_t l = 0; l < config.num_hidden_layers; ++l) {
      prefill->prepare(weights.layer(l));
      decode->prepare(weights.layer(l));
    }
    head->prepare(weights.head());
    compile_s += seconds_since(t0);
  }

  /// This rank's slices, cache and kernels: the attention and MLP halves of a layer (for a
  /// prefill and for a one-token step) and the head over its vocabulary slice.
  void build_parallel() {
    const TensorParallel &tp = *options.tp;
    user_check(options.dtype == DType::F32,
               "LlamaOptions: tensor parallelism runs f32 models (dtype is " +
                   std::string(dtype_name(options.dtype)) + ")");
    user_check(bool(tp.all_reduce_sum) && bool(tp.all_gather_last),
               "LlamaOptions::tp: all_reduce_sum and all_gather_last must both be set");
    part = config.shard(tp.rank, tp.ranks);
    weights = weights.shard(config, tp.rank, tp.ranks);
    cache = make_cache(part, options);
    DType t = options.dtype;
    attn_prefill = std::make_unique<Runner>(llama_attention_graph(part, options.paged, 0, t),
                                            options, compile_s);
    attn_decode = std::make_unique<Runner>(llama_attention_graph(part, options.paged, 1, t),
                                           options, compile_s);
    mlp = std::make_unique<Runner>(llama_mlp_graph(part, t), options, compile_s);
    head = std::make_unique<Runner>(llama_head_graph(part, t), options, compile_s);
    auto t0 = std::chrono::steady_clock::now();
    for (std::int64_t l = 0; l < config.num_hidden_layers; ++l) {
      attn_prefill->prepare(weights.layer(l));
      attn_decode->prepare(weights.layer(l));
      mlp->prepare(weights.layer(l));
    }
    head->prepare(weights.head());
    compile_s += seconds_since(t0);
  }

  /// `t` summed over the ranks, timed as communication.
  void all_reduce(Tensor &t, const char *what) {
    auto t0 = std::chrono::steady_clock::now();
    options.tp->all_reduce_sum(t, what);
    times.comm_s += seconds_since(t0);
  }

  /// The embeddings of `ids` (B, n): each rank's rows of its vocabulary slice, zeros for
  /// the other tokens, summed over the ranks.
  Tensor embed_parallel(const Tensor &ids) {
    auto [v0, v1] = config.vocab_range(options.tp->rank, options.tp->ranks);
    const Tensor &table = weights.embed().at("model.embed_tokens.weight");
    std::int64_t batch = ids.shape()[0], n = ids.shape()[1], d = config.hidden_size;
    Tensor x(DType::F32, {batch, n, d});
    const std::int64_t *id = ids.data_as<std::int64_t>();
    for (std::int64_t i = 0; i < batch * n; ++i)
      if (id[i] >= v0 && id[i] < v1)
        std::memcpy(x.data_as<float>() + i * d, table.data_as<float>() + (id[i] - v0) * d,
                    static_cast<std::size_t>(d) * sizeof(float));
    all_reduce(x, "the token embeddings");
    return x;
  }

  /// The layers on this rank's heads and MLP columns: x += sum over the ranks of each
  /// half's part.
  Tensor layers_parallel(Tensor x, const std::vector<std::int64_t> &counts) {
    std::int64_t batch = x.shape()[0], n = x.shape()[1];
    const Runner &attn = n == 1 ? *attn_decode : *attn_prefill;
    Tensor pos = positions(batch, n);
    cache->begin_step(counts);
    try {
      for (std::int64_t l = 0; l < config.num_hidden_layers; ++l) {
        TensorMap in{{"x", x}, {"positions", pos}};
        bind_cache(in, l);
        auto t0 = std::chrono::steady_clock::now();
        TensorMap out = attn.run_with(weights.layer(l), in);
        auto t1 = std::chrono::steady_clock::now();
        cache->append(l, out.at("k"), out.at("v"), counts);
        times.append_s += seconds_since(t1);
        times.layers_s += std::chrono::duration<double>(t1 - t0).count();
        Tensor a = out.at("part");
        all_reduce(a, "a layer's attention output");
        x = plus(x, a);
        t0 = std::chrono::steady_clock::now();
        Tensor m = mlp->run_with(weights.layer(l), {{"x", x}}).at("part");
        times.layers_s += seconds_since(t0);
        all_reduce(m, "a layer's MLP output");
        x = plus(x, m);
      }
    } catch (...) {
      cache->abort_step();
      throw;
    }
    cache->advance();
    return x;
  }

  /// The logits of x: each rank's vocabulary columns, gathered.
  Tensor head_parallel(const Tensor &x) {
    auto t0 = std::chrono::steady_clock::now();
    Tensor mine = head->run_with(weights.head(), {{"x", x}}).at("logits");
    times.head_s += seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    Tensor all = options.tp->all_gather_last(mine, "the logits");
    times.comm_s += seconds_since(t0);
    return all;
  }

  /// The weights must be of the options' dtype (LlamaWeights::load's and random's).
  void check_weights() const {
    const Tensor &e = weights.embed().at("model.embed_tokens.weight");
    user_check(e.dtype() == options.dtype,
               "LlamaModel: the weights are " + std::string(dtype_name(e.dtype())) +
                   " but LlamaOptions::dtype is " + std::string(dtype_name(options.dtype)) +
                   " (load or draw them as that dtype)");
  }

  /// The cache's tensors for layer l, as llama_layer_graph names them.
  void bind_cache(TensorMap &in, std::int64_t l) const {
    in["lengths"] = cache->lengths();
    if (options.paged) {
      const auto &p = static_cast<const PagedKVCache &>(*cache);
      in["k_pool"] = p.key_pool(l);
      in["v_pool"] = p.value_pool(l);
      in["block_table"] = p.block_table();
    } else {
      const auto &k = static_cast<const KVCache &>(*cache);
      in["k_past"] = k.keys(l);
      in["v_past"] = k.values(l);
    }
  }

  Tensor positions(std::int64_t batch, std::int64_t n) const {
    std::vector<std::int64_t> p(static_cast<std::size_t>(batch * n));
    for (std::int64_t b = 0; b < batch; ++b)
      for (std::int64_t i = 0; i < n; ++i)
        p[static_cast<std::size_t>(b * n + i)] = cache->length(b) + i;
    return Tensor::from_i64({batch, n}, p);
  }

  Tensor layers(Tensor x, const std::vector<std::int64_t> &counts) {
    std::int64_t batch = x.shape()[0], n = x.shape()[1];
    const Runner &layer = n == 1 ? *decode : *prefill;
    Tensor pos = positions(batch, n);
    cache->begin_step(counts);
    try {
      for (std::int64_t l = 0; l < config.num_hidden_layers; ++l) {
        TensorMap in = weights.layer(l);
        in["x"] = x;
        in["positions"] = pos;
        bind_cache(in, l);
        auto t0 = std::chrono::steady_clock::now();
        TensorMap out = layer.run(in);
        auto t1 = std::chrono::steady_clock::now();
        cache->append(l, out.at("k"), out.at("v"), counts);
        times.layers_s += std::chrono::duration<double>(t1 - t0).count();
        times.append_s += seconds_since(t1);
        x = out.at("y");
      }
    } catch (...) {
      cache->abort_step();
      throw;
    }
    cache->advance();
    return x;
  }
};

/// Rows counts[b] - 1 of x (B, n, D): each sequence's last real token, (B, 1, D), in x's
/// dtype (zeros for a sequence with no real token).
static Tensor last_rows(const Tensor &x, const std::vector<std::int64_t> &counts) {
  std::int64_t batch = x.shape()[0], n = x.shape()[1], d = x.shape()[2];
  Tensor out(x.dtype(), {batch, 1, d});
  std::size_t row = static_cast<std::size_t>(d) * dtype_size(x.dtype());
  const auto *src = static_cast<const unsigned char *>(x.data());
  auto *dst = static_cast<unsigned char *>(out.data());
  for (std::int64_t b = 0; b < batch; ++b)
    if (counts[static_cast<std::size_t>(b)] > 0)
      std::memcpy(dst + static_cast<std::size_t>(b) * row,
                  src + static_cast<std::size_t>(b * n + counts[static_cast<std::size_t>(b)] - 1) * row,
                  row);
  return out;
}

LlamaModel::LlamaModel(LlamaConfig config, LlamaWeights weights, LlamaOptions options)
    : impl_(std::make_unique<Impl>(std::move(config), std::move(weights), options)) {}

LlamaModel LlamaModel::load(const std::string &dir, LlamaOptions options) {
  LlamaConfig c = LlamaConfig::load(dir + "/config.json");
  return LlamaModel(c, LlamaWeights::load(dir + "/model.safetensors", c, options.dtype), options);
}

LlamaModel::LlamaModel(LlamaModel &&) noexcept = default;
LlamaModel &LlamaModel::operator=(LlamaModel &&) noexcept = default;
LlamaModel::~LlamaModel() = default;

const LlamaConfig &LlamaModel::config() const { return impl_->config; }
const LlamaOptions &LlamaModel::options() const { return impl_->options; }
KVCacheBase &LlamaModel::cache() { return *impl_->cache; }
double LlamaModel::compile_seconds() const { return impl_->compile_s; }
const LlamaTimes &LlamaModel::times() const { return impl_->times; }
void LlamaModel::reset_times() { impl_->times = {}; }

Tensor LlamaModel::forward(const Tensor &tokens, const std::vector<std::int64_t> &counts_in,
                           bool last_only) {
  user_check(tokens.rank() == 2 && (tokens.dtype() == DType::I64),
             "LlamaModel::forward: tokens must be an int64 (B, n) tensor");
  std::int64_t batch = tokens.shape()[0], n = tokens.shape()[1];
  user_check(batch == impl_->options.batch,
             "LlamaModel::forward: tokens have " + std::to_string(batch) +
                 " sequences; the model decodes " + std::to_string(impl_->options.batch));
  user_check(n >= 1, "LlamaModel::forward: no tokens");
  std::vector<std::int64_t> counts =
      counts_in.empty() ? std::vector<std::int64_t>(static_cast<std::size_t>(batch), n) : counts_in;
  user_check(static_cast<std::int64_t>(counts.size()) == batch,
             "LlamaModel::forward: counts must have one entry per sequence");
  const std::int64_t *ids = tokens.data_as<std::int64_t>();
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t i = 0; i < counts[static_cast<std::size_t>(b)] && i < n; ++i) {
      std::int64_t id = ids[b * n + i];
      if (id < 0 || id >= impl_->config.vocab_size)
        user_error("LlamaModel::forward: token " + std::to_string(id) + " of sequence " +
                   std::to_string(b) + " (position " + std::to_string(i) +
                   ") is outside the vocabulary [0, " + std::to_string(impl_->config.vocab_size) +
                   ")");
    }
  // Padding rows take token 0: they are computed but never cached nor read.
  Tensor safe = tokens.clone();
  std::int64_t *s = safe.data_as<std::int64_t>();
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t i = std::max<std::int64_t>(counts[static_cast<std::size_t>(b)], 0); i < n; ++i)
      s[b * n + i] = 0;
  LlamaTimes &times = impl_->times;
  if (impl_->parallel()) {
    auto t0 = std::chrono::steady_clock::now();
    double comm = times.comm_s;
    Tensor x = impl_->embed_parallel(safe);
    times.embed_s += seconds_since(t0) - (times.comm_s - comm);
    x = impl_->layers_parallel(x, counts);
    ++times.steps;
    return impl_->head_parallel(last_only ? last_rows(x, counts) : x);
  }
  TensorMap in = impl_->weights.embed();
  in["ids"] = safe;
  auto t0 = std::chrono::steady_clock::now();
  Tensor x = impl_->embed->run(in).at("x");
  times.embed_s += seconds_since(t0);
  x = impl_->layers(x, counts);
  TensorMap h = impl_->weights.head();
  h["x"] = last_only ? last_rows(x, counts) : x;
  t0 = std::chrono::steady_clock::now();
  Tensor logits = impl_->head->run(h).at("logits");
  times.head_s += seconds_since(t0);
  ++times.steps;
  return logits.dtype() == DType::F32 ? logits : logits.to(DType::F32);
}

// ---- generation --------------------------------------------------------------------------

double GenerationResult::prefill_tokens_per_second() const {
  return prefill_seconds > 0 ? static_cast<double>(prefill_tokens) / prefill_seconds : 0;
}
double GenerationResult::decode_tokens_per_second() const {
  return decode_seconds > 0 ? static_cast<double>(decode_tokens) / decode_seconds : 0;
}

namespace {

/// splitmix64: a small, portable generator (the same tokens for a seed on every platform).
std::uint64_t next_random(std::uint64_t &state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

} // namespace

std::int64_t pick_token(const float *logits, std::int64_t vocab, const SamplingOptions &o,
                        std::uint64_t &rng) {
  // A NaN orders nothing: max_element and the draw would return some token silently.
  if (const float *nan =
          std::find_if(logits, logits + vocab, [](float x) { return std::isnan(x); });
      nan != logits + vocab)
    user_error("pick_token: logit " + std::to_string(nan - logits) + " of " +
               std::to_string(vocab) + " is NaN: no token can be chosen");
  std::int64_t best = std::max_element(logits, logits + vocab) - logits;
  if (o.temperature <= 0)
    return best; // greedy: the first of equal maxima, as torch.argmax
  // Weights are e^((x - max) / T): a largest logit of +-inf makes them NaN (inf - inf), and
  // the draw would fall through to the last of the top k, silently (torch.multinomial
  // refuses such a row too).
  if (!std::isfinite(logits[best]))
    user_error("pick_token: the largest of the " + std::to_string(vocab) + " logits (logit " +
               std::to_string(best) + ") is " + (logits[best] > 0 ? "+inf" : "-inf") +
               ": no distribution to sample from at temperature " + std::to_string(o.temperature));
  std::vector<std::int64_t> order(static_cast<std::size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  std::int64_t k = o.top_k > 0 ? std::min(o.top_k, vocab) : vocab;
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](std::int64_t a, std::int64_t b) {
                      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
                    });
  std::vector<double> p(static_cast<std::size_t>(k));
  double top = logits[order[0]], sum = 0;
  for (std::int64_t i = 0; i < k; ++i)
    sum += p[static_cast<std::size_t>(i)] = std::exp((logits[order[i]] - top) / o.temperature);
  double u = static_cast<double>(next_random(rng) >> 11) * 0x1p-53 * sum;
  for (std::int64_t i = 0; i < k; ++i) {
    u -= p[static_cast<std::size_t>(i)];
    if (u < 0)
      return order[static_cast<std::size_t>(i)];
  }
  return order[static_cast<std::size_t>(k - 1)];
}

namespace {

/// pick_token for new token `n` of sequence `b`, its error saying which.
std::int64_t pick_for(const float *logits, std::int64_t vocab, const SamplingOptions &o,
                      std::uint64_t &rng, std::int64_t b, std::size_t n) {
  try {
    return pick_token(logits, vocab, o, rng);
  } catch (const Error &e) {
    user_error("generate: new token " + std::to_string(n) + " of sequence " + std::to_string(b) +
               ": " + e.what());
  }
}

} // namespace

GenerationResult generate(LlamaModel &model, const std::vector<std::vector<std::int64_t>> &prompts,
                          const SamplingOptions &o) {
  std::int64_t batch = model.options().batch, vocab = model.config().vocab_size;
  user_check(static_cast<std::int64_t>(prompts.size()) == batch,
             "generate: " + std::to_string(prompts.size()) + " prompts for a model that decodes " +
                 std::to_string(batch) + " sequences at once");
  user_check(o.max_new_tokens >= 0, "generate: max_new_tokens must not be negative");
  if (!(o.temperature >= 0) || std::isinf(o.temperature)) {
    std::ostringstream t;
    t << o.temperature;
    user_error("generate: temperature must be a finite number, 0 (greedy) or positive, got " +
               t.str());
  }
  user_check(o.top_k >= 0, "generate: top_k must be 0 (every token) or positive, got " +
                               std::to_string(o.top_k));
  std::vector<std::int64_t> counts;
  for (const auto &p : prompts) {
    user_check(!p.empty(), "generate: an empty prompt (sequence " +
                               std::to_string(counts.size()) + ")");
    counts.push_back(static_cast<std::int64_t>(p.size()));
  }
  std::int64_t longest = *std::max_element(counts.begin(), counts.end());
  std::int64_t need = longest + o.max_new_tokens;
  std::int64_t positions = model.config().max_position_embeddings;
  user_check(need <= positions,
             "generate: the longest prompt (" + std::to_string(longest) + " tokens) plus " +
                 std::to_string(o.max_new_tokens) + " new tokens needs " + std::to_string(need) +
                 " positions; the model was trained for " + std::to_string(positions) +
                 " (max_position_embeddings in its config.json)");
  user_check(need <= model.cache().capacity(),
             "generate: the longest prompt (" + std::to_string(longest) + " tokens) plus " +
                 std::to_string(o.max_new_tokens) + " new tokens needs " + std::to_string(need) +
                 " positions; the model's KV cache holds " +
                 std::to_string(model.cache().capacity()) + " (LlamaOptions::capacity)");
  model.cache().reset();
  GenerationResult r;
  r.tokens.resize(prompts.size());
  std::uint64_t rng = o.seed;
  std::vector<bool> done(prompts.size(), false);
  Tensor ids(DType::I64, {batch, longest});
  for (std::int64_t b = 0; b < batch; ++b)
    std::copy(prompts[b].begin(), prompts[b].end(), ids.data_as<std::int64_t>() + b * longest);

  auto choose = [&](const Tensor &logits) {
    const float *l = logits.data_as<float>();
    for (std::int64_t b = 0; b < batch; ++b)
      if (!done[static_cast<std::size_t>(b)]) {
        std::int64_t t =
            pick_for(l + b * vocab, vocab, o, rng, b, r.tokens[static_cast<std::size_t>(b)].size());
        r.tokens[static_cast<std::size_t>(b)].push_back(t);
        done[static_cast<std::size_t>(b)] = o.eos && t == *o.eos;
      }
    if (o.keep_logits)
      r.logits.push_back(Tensor::from_values(DType::F32, {batch, vocab}, logits.values()));
  };

  if (o.max_new_tokens == 0)
    return r; // nothing to generate: not even the prefill runs
  auto t0 = std::chrono::steady_clock::now();
  Tensor logits = model.forward(ids, counts, /*last_only=*/true);
  r.prefill_seconds = seconds_since(t0);
  r.prefill_tokens = std::accumulate(counts.begin(), counts.end(), std::int64_t{0});
  choose(logits);
  t0 = std::chrono::steady_clock::now();
  for (std::int64_t step = 1; step < o.max_new_tokens; ++step) {
    if (std::all_of(done.begin(), done.end(), [](bool d) { return d; }))
      break;
    Tensor next(DType::I64, {batch, 1});
    std::vector<std::int64_t> step_counts(static_cast<std::size_t>(batch));
    for (std::int64_t b = 0; b < batch; ++b) {
      bool live = !done[static_cast<std::size_t>(b)];
      next.data_as<std::int64_t>()[b] = live ? r.tokens[static_cast<std::size_t>(b)].back() : 0;
      step_counts[static_cast<std::size_t>(b)] = live ? 1 : 0;
      r.decode_tokens += live ? 1 : 0;
    }
    choose(model.forward(next, step_counts, /*last_only=*/true));
  }
  r.decode_seconds = seconds_since(t0);
  return r;
}

} // namespace qkv
