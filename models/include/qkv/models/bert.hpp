// A BERT encoder (Hugging Face BertModel) built from its config.json and .safetensors
// weights with qkv's ops, so the same graphs run on the reference interpreter and compile
// to fused kernels.
//
//   x = LayerNorm(word[ids] + position[0..L) + token_type[types])           embeddings
//   per layer (post-LN):
//     a = x + Wo . attention(Wq x, Wk x, Wv x), keys k < length[b] only       12 heads
//     x = LayerNorm(a);  x = LayerNorm(x + W2 . gelu(W1 x))
//
// Padding is a mask_mod over the captured per-sequence lengths (`kv < lengths[b]`), not an
// L x L tensor: padded keys get no weight, padded query rows are computed (they see the
// real tokens, so they stay finite) and are left out by the pooling.
//
// Graphs (weights are params, bound at run time, so one compiled kernel serves any
// checkpoint of the same shape):
// - bert_embeddings_graph: inputs ids, token_types (B, L), positions (L) -> "x" (B, L, D).
// - bert_layer_graph: one encoder layer, inputs x (B, L, D) and lengths (B) -> "y". Its
//   params are named as in the checkpoint without the "encoder.layer.N." prefix
//   ("attention.self.query.weight", ...), so every layer runs on the same kernel.
// - mean_pool_graph: inputs x (B, L, D) and pool (B, 1, L), the mean-pooling weights
//   (1/length on real tokens, 0 on padding) -> "embedding" (B, 1, D), L2-normalized or not.
// - bert_model_graph: all of it in one graph (params named exactly as in the checkpoint).
// - Tensor parallelism (rank r of N holds H/N heads, I/N FFN columns and a slice of the
//   word embeddings' rows; BertWeights::shard): bert_embeddings_tp_graph takes the word
//   embeddings "word" (B, L, D), summed over the ranks; per layer bert_attention_part_graph
//   (x, lengths -> "part": the heads' o . Wo, without bias), then bert_ffn_part_graph
//   (x, a = the parts summed -> "h" = LayerNorm(x + a + bias), "part": the FFN columns' share
//   without the last bias), then bert_output_graph (h, f = the parts summed -> "y").
// Linear weights are stored (in, out), the transpose of PyTorch's (out, in).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <qkv/dsl/graph.hpp>
#include <qkv/runtime/json_config.hpp>
#include <qkv/runtime/tensor.hpp>

namespace qkv {

/// The fields of a Hugging Face BERT config.json the encoder uses.
struct BertConfig {
  std::int64_t vocab_size = 0;
  std::int64_t hidden_size = 0;
  std::int64_t num_hidden_layers = 0;
  std::int64_t num_attention_heads = 0;
  std::int64_t intermediate_size = 0;
  std::int64_t max_position_embeddings = 0;
  std::int64_t type_vocab_size = 0;
  double layer_norm_eps = 1e-12;
  bool gelu_tanh = false; // hidden_act "gelu" is exact (erf); gelu_new/gelu_pytorch_tanh: tanh

  /// Reads and checks the fields: a missing or ill-typed field, a model_type other than
  /// "bert", a position_embedding_type other than "absolute", an unsupported hidden_act or
  /// heads that do not divide hidden_size is a qkv::Error naming the file and the field.
  static BertConfig from_json(const JsonConfig &config);
  static BertConfig load(const std::string &config_json_path);
  std::int64_t head_dim() const { return hidden_size / num_attention_heads; }
};

/// A batch of token sequences, padded to the longest: what the encoder takes.
struct TokenBatch {
  Tensor ids;         // i32 (B, L), padding filled with the pad id
  Tensor token_types; // i32 (B, L), all 0 (one segment)
  Tensor positions;   // i32 (L): 0, 1, ..., L-1
  Tensor lengths;     // i32 (B): real tokens of each row, padding excluded
  Tensor pool;        // f32 (B, 1, L): 1/length on real tokens, 0 on padding

  /// Pads `sequences` (none empty) into one batch.
  static TokenBatch pad(const std::vector<std::vector<std::int32_t>> &sequences,
                        std::int32_t pad_id);
  std::int64_t batch() const { return ids.shape()[0]; }
  std::int64_t length() const { return ids.shape()[1]; }
};

/// The graphs' float inputs, params and so every node are of `dtype` (f32, or bf16 / f16:
/// each node rounded to it, as a model cast to that dtype computes; docs/models.md).
Graph bert_embeddings_graph(const BertConfig &c, DType dtype = DType::F32);
Graph bert_layer_graph(const BertConfig &c, DType dtype = DType::F32);
Graph mean_pool_graph(const BertConfig &c, bool normalize, DType dtype = DType::F32);
Graph bert_model_graph(const BertConfig &c, bool normalize, DType dtype = DType::F32);
/// The tensor-parallel graphs of one of `ranks` ranks (see above); c is the whole config.
Graph bert_embeddings_tp_graph(const BertConfig &c, DType dtype = DType::F32);
Graph bert_attention_part_graph(const BertConfig &c, int ranks, DType dtype = DType::F32);
Graph bert_ffn_part_graph(const BertConfig &c, int ranks, DType dtype = DType::F32);
Graph bert_output_graph(const BertConfig &c, DType dtype = DType::F32);

/// A BERT checkpoint's weights as the graphs above take them (linear weights transposed to
/// (in, out)), keyed by the checkpoint's names without a "bert." prefix.
class BertWeights {
public:
  /// Reads every tensor the encoder needs from a .safetensors file, checking each shape
  /// against the config; a missing tensor or a wrong shape is a qkv::Error naming the file
  /// and the tensor. The weights are kept as `dtype` (f32, bf16 or f16: the graphs' dtype),
  /// whatever float dtype the file stores (converted to nearest even).
  static BertWeights load(const std::string &safetensors_path, const BertConfig &c,
                          DType dtype = DType::F32);

  /// Every param of bert_model_graph.
  const TensorMap &all() const { return all_; }
  /// The params of bert_embeddings_graph, of bert_layer_graph for layer `i`.
  TensorMap embeddings() const;
  TensorMap layer(std::int64_t i) const;
  /// Rank `rank` of `ranks`'s slices under tensor parallelism: query/key/value's columns
  /// (and biases) and attention.output.dense's rows of its heads, intermediate.dense's
  /// columns (and bias) and output.dense's rows of its FFN columns, its vocabulary's rows
  /// of the word embeddings (vocab_range); the rest whole. Heads and intermediate_size must
  /// be multiples of `ranks` (a qkv::Error names the field).
  BertWeights shard(const BertConfig &c, int rank, int ranks) const;

private:
  TensorMap all_;
};

} // namespace qkv
