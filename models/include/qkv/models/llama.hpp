// A Llama-style decoder (Hugging Face LlamaForCausalLM) built from its config.json and
// .safetensors weights with qkv's ops, decoding over a KV cache read in place.
//
//   x = embed_tokens[ids]
//   per layer (pre-norm):
//     h = rms_norm(x) * input_layernorm
//     q, k, v = rope(Wq h), rope(Wk h), Wv h          GQA: Hkv kv heads, RoPE at each
//                                                      token's position lengths[b] + i
//     x = x + Wo . attention(q, cache ++ k, cache ++ v), causal over cache and new rows
//     x = x + Wdown . (silu(Wgate h2) * Wup h2),   h2 = rms_norm(x) * post_attention_layernorm
//   logits = lm_head . (rms_norm(x) * norm)
//
// Graphs (weights are params, so one compiled kernel serves every layer):
// - llama_embed_graph: ids (B, n) int64 -> "x" (B, n, D).
// - llama_layer_graph: x (B, n, D), positions (B, n) int64, lengths (B) int64 and the
//   cache's tensors for one layer (k_past, v_past (B, Hkv, C, Dh); or, paged, k_pool,
//   v_pool (P, Hkv, page, Dh) and block_table (B, M) int32) -> "y" (B, n, D) and this
//   step's "k", "v" (B, Hkv, n, Dh), rotated, for the cache to append. Params are named as
//   in the checkpoint without "model.layers.N." ("self_attn.q_proj.weight", ...).
// - llama_head_graph: x (B, n, D) -> "logits" (B, n, V).
// - llama_attention_graph, llama_mlp_graph: a layer's two halves without their residual
//   adds ("part" (B, n, D)), the kernels of a tensor-parallel rank, whose parts are summed
//   over the ranks between them.
// Linear weights are stored (in, out), the transpose of PyTorch's (out, in).
//
// Tensor parallelism (LlamaOptions::tp, Megatron-style): rank r of N holds H/N query
// heads, Hkv/N kv heads (their KV cache too), I/N columns of the MLP and a slice of the
// vocabulary (rows of embed_tokens, columns of lm_head). Per layer: one all-reduce after
// the attention's o_proj, one after the MLP's down_proj; the embedding is an all-reduce of
// each rank's rows, the logits an all-gather of each rank's columns.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <qkv/compiler/compile.hpp>
#include <qkv/dsl/graph.hpp>
#include <qkv/models/tensor_parallel.hpp>
#include <qkv/runtime/json_config.hpp>
#include <qkv/runtime/kv_cache.hpp>
#include <qkv/runtime/tensor.hpp>

namespace qkv {

/// The fields of a Hugging Face Llama config.json the decoder uses.
struct LlamaConfig {
  std::int64_t vocab_size = 0;
  std::int64_t hidden_size = 0;
  std::int64_t intermediate_size = 0;
  std::int64_t num_hidden_layers = 0;
  std::int64_t num_attention_heads = 0;
  std::int64_t num_key_value_heads = 0; // config default: num_attention_heads
  std::int64_t head_dim = 0;            // config default: hidden_size / num_attention_heads
  std::int64_t max_position_embeddings = 0;
  double rms_norm_eps = 0;
  double rope_theta = 10000; // as transformers 5 finds it: rope_scaling/rope_parameters, top level
  bool tie_word_embeddings = false;

  /// Reads and checks the fields. A missing or ill-typed required field, a model_type
  /// other than "llama", hidden_act other than "silu", biases, RoPE scaling other than
  /// "default", or sizes that do not divide are a qkv::Error naming the file and field.
  static LlamaConfig from_json(const JsonConfig &config);
  static LlamaConfig load(const std::string &config_json_path);

  /// Rank `rank` of `ranks`'s part under tensor parallelism: heads, kv heads and
  /// intermediate_size divided by `ranks` (each must divide: a qkv::Error names the field
  /// otherwise), vocab_size its slice's (vocab_range). ranks 1: the config itself.
  LlamaConfig shard(int rank, int ranks) const;
  /// The tokens [first, last) of rank `rank`'s vocabulary slice: ceil(V / ranks) each, the
  /// last rank the rest.
  std::pair<std::int64_t, std::int64_t> vocab_range(int rank, int ranks) const;
};

/// The graphs' float inputs (x, the cache), params and so every node are of `dtype` (f32,
/// or bf16 / f16: each node rounded to it, as the model cast to it computes).
Graph llama_embed_graph(const LlamaConfig &c, DType dtype = DType::F32);
/// `new_tokens`: the static n of a decode step (1, or a few speculative tokens), or 0 for a
/// dynamic n (prefill). `paged`: read a PagedKVCache's pools through its block table.
Graph llama_layer_graph(const LlamaConfig &c, bool paged, std::int64_t new_tokens,
                        DType dtype = DType::F32);
Graph llama_head_graph(const LlamaConfig &c, DType dtype = DType::F32);
/// A layer's attention half: the inputs of llama_layer_graph -> "part" = o_proj . attention
/// (B, n, D), without the residual, and "k", "v".
Graph llama_attention_graph(const LlamaConfig &c, bool paged, std::int64_t new_tokens,
                            DType dtype = DType::F32);
/// A layer's MLP half: x (B, n, D) -> "part" = down . swiglu(gate . h, up . h), h =
/// rms_norm(x) * post_attention_layernorm, without the residual.
Graph llama_mlp_graph(const LlamaConfig &c, DType dtype = DType::F32);

/// A Llama checkpoint's weights as the graphs take them (linear weights transposed to
/// (in, out)), keyed by the checkpoint's names.
class LlamaWeights {
public:
  /// Reads every tensor the decoder needs from a .safetensors file, checking each shape
  /// against the config; a missing tensor or a wrong shape is a qkv::Error naming the file
  /// and the tensor. The weights are kept as `dtype` (f32, bf16 or f16), whatever float
  /// dtype the file stores (converted to nearest even). A tied LM head reads embed_tokens.
  static LlamaWeights load(const std::string &safetensors_path, const LlamaConfig &c,
                           DType dtype = DType::F32);
  /// Random weights of the config's shapes (for benchmarks): linear weights uniform with
  /// variance 1/fan-in, norms 1, embeddings uniform in [-1, 1); drawn in f32, kept as dtype.
  static LlamaWeights random(const LlamaConfig &c, std::uint64_t seed, DType dtype = DType::F32);

  /// The params of llama_embed_graph, llama_layer_graph for layer `i`, llama_head_graph.
  const TensorMap &embed() const { return embed_; }
  const TensorMap &layer(std::int64_t i) const { return layers_.at(static_cast<std::size_t>(i)); }
  const TensorMap &head() const { return head_; }
  /// Rank `rank` of `ranks`'s slices of these weights under tensor parallelism (config
  /// `full`, LlamaConfig::shard): q/k/v_proj's columns and o_proj's rows of its heads,
  /// gate/up_proj's columns and down_proj's rows of its MLP columns, its vocabulary's rows
  /// of embed_tokens and columns of lm_head; the norms whole.
  LlamaWeights shard(const LlamaConfig &full, int rank, int ranks) const;

private:
  void convert(DType dtype); // every tensor to dtype
  TensorMap embed_, head_;
  std::vector<TensorMap> layers_;
};

/// How a LlamaModel runs.
struct LlamaOptions {
  enum class Backend { Compiled, Interpreter };
  Backend backend = Backend::Compiled;
  std::int64_t batch = 1;    // sequences decoded together
  std::int64_t capacity = 0; // tokens per sequence (prompt + generated); 0: max_position_embeddings
  bool paged = false;        // a PagedKVCache instead of a contiguous KVCache
  std::int64_t page_size = 16;
  std::int64_t num_pages = 0; // 0: enough for every sequence to reach the capacity
  int threads = 0;            // compiled kernels' threads; 0: all cores
  bool verbose = false;       // compile progress on stderr
  /// The element type of the weights, the KV cache and every node: f32, or bf16 (half the
  /// bytes a decode step reads; products on the host's bf16 tier). LlamaModel::load reads
  /// the weights as it; forward() returns f32 logits either way.
  DType dtype = DType::F32;
  /// The tier the kernels' products run on (CompileOptions::isa).
  Isa isa = Isa::Host;
  /// Tensor parallelism over several ranks (null: this process alone). The model is built
  /// from the whole config and weights on every rank and keeps its rank's slices; f32 only.
  /// forward() returns the whole logits on every rank, so generate() picks the same tokens
  /// on all of them.
  std::shared_ptr<const TensorParallel> tp;
};

/// Wall time a LlamaModel spent in each part of its forward steps, summed since the last
/// reset_times(): where a decode step's time goes.
struct LlamaTimes {
  double embed_s = 0;  // the embedding kernel
  double layers_s = 0; // the layer kernels (attention over the cache, MLP)
  double append_s = 0; // appending each step's K, V to the cache
  double head_s = 0;   // final norm and LM head
  double comm_s = 0;   // tensor parallelism: all-reduces and the logits' all-gather
  std::int64_t steps = 0;
};

/// A decoder with its weights, compiled kernels (or the interpreter) and KV cache.
class LlamaModel {
public:
  LlamaModel(LlamaConfig config, LlamaWeights weights, LlamaOptions options = {});
  /// Reads `dir`/config.json and `dir`/model.safetensors.
  static LlamaModel load(const std::string &dir, LlamaOptions options = {});
  LlamaModel(LlamaModel &&) noexcept;
  LlamaModel &operator=(LlamaModel &&) noexcept;
  ~LlamaModel();

  const LlamaConfig &config() const;
  const LlamaOptions &options() const;
  KVCacheBase &cache();
  /// Seconds spent compiling the kernels and packing the weights their GEMMs read packed
  /// (0 with the interpreter).
  double compile_seconds() const;
  const LlamaTimes &times() const;
  void reset_times();

  /// One step: tokens (B, n) int64, of which the first counts[b] are real (a batch of
  /// prompts padded on the right; empty: all n), run at each sequence's cached length;
  /// their K and V are appended to the cache. Returns f32 logits (B, n, V), or with
  /// `last_only` (B, 1, V) at each sequence's last real token (a sequence with count 0
  /// gets zeros).
  Tensor forward(const Tensor &tokens, const std::vector<std::int64_t> &counts = {},
                 bool last_only = false);

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// How generate() picks tokens: greedy (temperature 0), or sampling from
/// softmax(logits / temperature) restricted to the top_k tokens (0: all), seeded.
struct SamplingOptions {
  std::int64_t max_new_tokens = 16;
  double temperature = 0;
  std::int64_t top_k = 0;
  std::uint64_t seed = 0;
  std::optional<std::int64_t> eos; // a sequence stops after generating it
  bool keep_logits = false;        // keep each step's logits in the result
};

struct GenerationResult {
  std::vector<std::vector<std::int64_t>> tokens; // per sequence, the generated tokens
  std::vector<Tensor> logits; // with keep_logits: per step, (B, V) f32, the logits sampled from
  double prefill_seconds = 0, decode_seconds = 0;
  std::int64_t prefill_tokens = 0, decode_tokens = 0; // real tokens processed
  double prefill_tokens_per_second() const;
  double decode_tokens_per_second() const;
};

/// Generates up to max_new_tokens per sequence: a prefill of every prompt (one batched step,
/// prompts of different lengths padded) gives the first token, then each decode step (one
/// token per sequence still running) gives one more; a sequence stops at eos. The model's
/// cache is reset first and must hold the longest prompt plus max_new_tokens. With
/// max_new_tokens 0 nothing runs.
GenerationResult generate(LlamaModel &model, const std::vector<std::vector<std::int64_t>> &prompts,
                          const SamplingOptions &options = {});

/// The token a logits row (V) gives under `options` (greedy or sampled with `rng`).
std::int64_t pick_token(const float *logits, std::int64_t vocab, const SamplingOptions &options,
                        std::uint64_t &rng_state);

} // namespace qkv
