// The models in bf16 (weights, cache and every node in bf16, as the model cast to bf16
// computes) on one ISA tier (QKV_TEST_ISA; qkv_test/isa_tier.hpp): all-MiniLM-L6-v2
// against sentence-transformers' f32 embeddings (cosine >= 0.999, docs/models.md) and
// against its own bf16 interpreter; the tiny Llama fixture's greedy tokens (transformers,
// f32) from the compiled model over both caches and from the interpreter.
#include <qkv/models/llama.hpp>
#include <qkv/models/sentence_encoder.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include <gtest/gtest.h>

#include "model_dir.hpp"
#include "qkv_test/isa_tier.hpp"

namespace qkv::test {
namespace {

namespace fs = std::filesystem;

/// The smallest cosine between rows of `got` and rows `rows` of `want`.
double worst_cosine(const Tensor &got, const Tensor &want, const std::vector<std::int64_t> &rows) {
  std::int64_t d = got.shape()[1];
  double worst = 1;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    double gw = 0, gg = 0, ww = 0;
    for (std::int64_t k = 0; k < d; ++k) {
      double g = got.get(static_cast<std::int64_t>(i) * d + k), w = want.get(rows[i] * d + k);
      gw += g * w, gg += g * g, ww += w * w;
    }
    worst = std::min(worst, gw / std::sqrt(gg * ww));
  }
  return worst;
}

class MiniLMBf16 : public testing::Test {
protected:
  static void SetUpTestSuite() {
    std::string dir = default_minilm_dir();
    if (!fs::exists(fs::path(dir) / "model.safetensors"))
      return; // each test fails, saying what to run
    model_ = new SentenceEncoder(SentenceEncoder::load(dir, DType::BF16));
    model_->compile(on_tier());
  }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
  }
  SentenceEncoder &model() {
    minilm_dir(); // fails the test when the model is missing
    if (!model_)
      throw Error("no model");
    return *model_;
  }
  static std::vector<std::string> sentences() {
    return read_json(fixture("minilm_sentences.json"))["sentences"];
  }
  static SentenceEncoder *model_;
};
SentenceEncoder *MiniLMBf16::model_ = nullptr;

TEST_F(MiniLMBf16, WeightsAreKeptInBf16) {
  EXPECT_EQ(model().dtype(), DType::BF16);
  for (const auto &[name, t] : model().weights().all())
    EXPECT_EQ(t.dtype(), DType::BF16) << name;
}

TEST_F(MiniLMBf16, WithinCosine0999OfSentenceTransformersF32) {
  Tensor want = load_npy(fixture("minilm_embeddings.npy"));
  for (std::int64_t batch : {8, 3}) {
    Tensor got = model().embed(sentences(), batch);
    ASSERT_EQ(got.dtype(), DType::F32);
    double c = worst_cosine(got, want, {0, 1, 2, 3, 4, 5, 6, 7});
    EXPECT_GE(c, 0.999) << "batches of " << batch;
    std::printf("bf16 (%s tier), batches of %lld, vs sentence-transformers f32: min cosine %.6f\n",
                isa_name(tier_under_test()).c_str(), static_cast<long long>(batch), c);
  }
}

TEST_F(MiniLMBf16, CompiledMatchesItsInterpreter) {
  // Both round every node to bf16; they differ by the f32 sums' order (and, on the bf16
  // pairs tier, attention's P rounded to bf16), which a rounding of a node can carry on.
  std::vector<std::string> all = sentences();
  std::vector<std::string> three = {all[0], all[6], all[1]};
  Tensor got = model().embed(three, 3), want = model().embed_reference(three);
  double c = worst_cosine(got, want, {0, 1, 2});
  EXPECT_GE(c, 0.9999);
  std::printf("bf16 compiled vs the bf16 interpreter: min cosine %.8f\n", c);
}

std::string llama_dir() { return std::string(QKV_MODEL_TEST_DATA) + "/tiny-llama"; }

/// The tiny fixture's prompts without their padding.
std::vector<std::vector<std::int64_t>> llama_prompts() {
  Tensor ids = load_npy(llama_dir() + "/prompt_ids.npy");
  Tensor lengths = load_npy(llama_dir() + "/prompt_lengths.npy");
  std::vector<std::vector<std::int64_t>> out;
  for (std::int64_t b = 0; b < ids.shape()[0]; ++b) {
    std::vector<std::int64_t> p;
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(lengths.at({b})); ++i)
      p.push_back(static_cast<std::int64_t>(ids.at({b, i})));
    out.push_back(p);
  }
  return out;
}

// The fixture's smallest top-1/top-2 gap along its greedy paths is 0.014 (llama_test.cpp),
// large against bf16's rounding of these small logits: the same tokens.
TEST(LlamaBf16, GreedyTokensOfTheTinyFixture) {
  Tensor want = load_npy(llama_dir() + "/greedy_ids.npy");
  for (auto [backend, paged] : {std::pair{LlamaOptions::Backend::Compiled, false},
                                {LlamaOptions::Backend::Compiled, true},
                                {LlamaOptions::Backend::Interpreter, false}}) {
    SCOPED_TRACE(std::string(backend == LlamaOptions::Backend::Compiled ? "compiled" : "interpreter") +
                 (paged ? ", paged cache" : ", contiguous cache"));
    LlamaOptions o;
    o.backend = backend;
    o.batch = 2;
    o.capacity = 64;
    o.paged = paged;
    o.page_size = 4;
    o.dtype = DType::BF16;
    o.isa = tier_under_test();
    LlamaModel model = LlamaModel::load(llama_dir(), o);
    EXPECT_EQ(model.cache().dtype(), DType::BF16);
    SamplingOptions greedy;
    greedy.max_new_tokens = 16;
    GenerationResult r = generate(model, llama_prompts(), greedy);
    for (std::int64_t b = 0; b < 2; ++b) {
      std::vector<std::int64_t> expected;
      for (std::int64_t i = 0; i < 16; ++i)
        expected.push_back(static_cast<std::int64_t>(want.at({b, i})));
      EXPECT_EQ(r.tokens[static_cast<std::size_t>(b)], expected) << "prompt " << b;
    }
  }
}

TEST(LlamaBf16, WeightsOfAnotherDtypeAreRefused) {
  LlamaConfig c = LlamaConfig::load(llama_dir() + "/config.json");
  LlamaOptions o;
  o.dtype = DType::BF16;
  o.isa = tier_under_test();
  try {
    LlamaModel m(c, LlamaWeights::random(c, 1), o); // f32 weights
    ADD_FAILURE() << "f32 weights were taken for a bf16 model";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("the weights are f32 but LlamaOptions::dtype is bf16"),
              std::string::npos)
        << e.what();
  }
}

TEST(ModelsDtype, OnlyF32Bf16AndF16AreTaken) {
  LlamaConfig c = LlamaConfig::load(llama_dir() + "/config.json");
  auto error = [](auto f) {
    try {
      f();
    } catch (const Error &e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error([&] { llama_layer_graph(c, false, 0, DType::F64); }),
            "Llama graphs: the dtype must be f32, bf16 or f16, got f64");
  EXPECT_EQ(error([&] { LlamaWeights::random(c, 1, DType::I32); }),
            "LlamaWeights: the dtype must be f32, bf16 or f16, got i32");
  BertConfig bc = BertConfig::load(fixture("bert-config/transformers-5.24.0.json"));
  EXPECT_EQ(error([&] { bert_layer_graph(bc, DType::F64); }),
            "BERT graphs: the dtype must be f32, bf16 or f16, got f64");
}

} // namespace
} // namespace qkv::test
