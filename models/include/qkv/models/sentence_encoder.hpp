// Sentence embeddings from a sentence-transformers model directory (all-MiniLM-L6-v2 and
// other BERT models with mean pooling): text -> WordPiece ids -> BERT encoder -> mean over
// the real tokens -> L2 normalization, as the directory's modules.json says.
//
//   SentenceEncoder model = SentenceEncoder::load(dir);  // config, weights, tokenizer
//   model.compile();                                    // JIT-compiles the kernels once
//   Tensor e = model.embed({"A man is playing a guitar.", "Someone plays music."});
//   // e: f32 (2, 384), each row of length 1
//
// The directory holds config.json, model.safetensors, tokenizer.json (or vocab.txt and
// tokenizer_config.json), modules.json (Transformer, Pooling, optionally Normalize),
// 1_Pooling/config.json (mean pooling) and sentence_bert_config.json (max_seq_length).
// Any other module or pooling mode is a qkv::Error naming the file and the field.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <qkv/compiler/compile.hpp>
#include <qkv/models/bert.hpp>
#include <qkv/models/tensor_parallel.hpp>
#include <qkv/models/tokenizer.hpp>

namespace qkv {

/// The model cache scripts/fetch-model.sh fills: $QKV_MODEL_CACHE, else
/// $HOME/.cache/qkv/models.
std::string model_cache_dir();
/// Where `scripts/fetch-model.sh minilm` puts all-MiniLM-L6-v2: model_cache_dir() +
/// "/all-MiniLM-L6-v2".
std::string default_minilm_dir();

/// How the encoder is cut into compiled kernels.
enum class KernelPlan {
  /// Three kernels: the embeddings, one encoder layer (run once per layer, with that
  /// layer's weights) and the pooling. The default: a third of the compile time of
  /// WholeModel for a 6-layer model, and the same run time (docs/models.md).
  PerLayer,
  /// One kernel for the whole model (bert_model_graph).
  WholeModel,
};

class SentenceEncoder {
public:
  /// `dtype`: the weights' and the computation's element type, f32 (the default) or bf16
  /// (or f16): the weights are kept in it (half the bytes) and every node of the graphs
  /// rounds to it, as the model cast to it computes in PyTorch; bf16 products run on the
  /// host's bf16 tier (docs/compiler.md, "ISA tiers"). The embeddings embed() returns are
  /// f32 either way. docs/models.md gives the accuracy.
  static SentenceEncoder load(const std::string &dir, DType dtype = DType::F32);

  /// Compiles the kernels. embed() compiles with the default options on first use when
  /// this was not called; calling it again recompiles.
  void compile(const CompileOptions &options = {}, KernelPlan plan = KernelPlan::PerLayer);
  bool compiled() const { return kernels_ != nullptr; }
  /// Tensor parallelism over `tp`'s ranks (every rank calls it, then embeds the same
  /// sentences): this rank keeps its slices of the weights (BertWeights::shard: its heads,
  /// FFN columns and word-embedding rows), and each layer sums its parts over the ranks
  /// (two all-reduces a layer, one for the embeddings). f32 only; call before compile(),
  /// which then builds the tensor-parallel kernels whatever the plan. embed() returns the
  /// whole embeddings on every rank.
  void parallelize(std::shared_ptr<const TensorParallel> tp);

  /// Embeddings of the sentences, f32 (N, dim()), row i for sentences[i]. Sentences are
  /// tokenized (truncated to max_seq_length()), sorted by length and run in batches of
  /// `batch_size`, each padded to its longest sentence.
  Tensor embed(const std::vector<std::string> &sentences, std::int64_t batch_size = 32);
  /// The same on the reference interpreter (bert_model_graph, double precision, one batch):
  /// f64 (N, dim()). Slow: meant for checking the compiled model on a few sentences.
  Tensor embed_reference(const std::vector<std::string> &sentences) const;

  /// Token ids as the encoder sees them: [CLS] ... [SEP], at most max_seq_length().
  std::vector<std::vector<std::int32_t>> tokenize(const std::vector<std::string> &s) const;
  /// One padded batch through the compiled kernels: f32 (B, dim()) (from dtype()'s values).
  Tensor run(const TokenBatch &batch);
  /// One padded batch through the interpreter: f64 (B, dim()).
  Tensor run_reference(const TokenBatch &batch) const;

  const WordPieceTokenizer &tokenizer() const { return tokenizer_; }
  const BertConfig &config() const { return config_; }
  const BertWeights &weights() const { return weights_; }
  std::int64_t max_seq_length() const { return max_seq_length_; }
  std::int64_t dim() const { return config_.hidden_size; }
  /// The element type it computes in (load's `dtype`).
  DType dtype() const { return dtype_; }
  bool normalizes() const { return normalize_; }
  /// The time compile() took, in ms (0 before): compiling the kernels and packing the
  /// weights their GEMMs read packed.
  double compile_ms() const;

private:
  struct Kernels;
  SentenceEncoder() = default;
  void check_batch(const TokenBatch &batch) const;

  BertConfig config_;
  BertWeights weights_;
  WordPieceTokenizer tokenizer_;
  std::int64_t max_seq_length_ = 0;
  bool normalize_ = false;
  DType dtype_ = DType::F32;
  std::vector<TensorMap> layer_params_;
  std::shared_ptr<Kernels> kernels_;
  std::shared_ptr<const TensorParallel> tp_;
  Tensor run_parallel(const TokenBatch &batch);
};

} // namespace qkv
