// all-MiniLM-L6-v2 through qkv against sentence-transformers: the committed fixtures
// (scripts/make-minilm-fixtures.py: token ids and model.encode() embeddings made with
// PyTorch) for the compiled model and for the interpreter; padding; the model without its
// Normalize module (mean pooling's scale shows); the real weights file and broken copies
// of the model directory.
#include <qkv/models/sentence_encoder.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <gtest/gtest.h>
#include <unistd.h>

#include <qkv/runtime/safetensors.hpp>
#include <qkv_test/errors.hpp>

#include "model_dir.hpp"

namespace qkv {
namespace {

namespace fs = std::filesystem;
using test::ErrorSays;
using Ids = std::vector<std::int32_t>;

// The issue's tolerances: per sentence, cosine and largest element difference.
constexpr double kMinCosine = 0.99999;
constexpr double kMaxAbsDiff = 1e-4;

struct Agreement {
  double cosine = 1, max_abs_diff = 0;
};

/// Row `i` of `got` against row `j` of `want`.
Agreement agreement(const Tensor &got, std::int64_t i, const Tensor &want, std::int64_t j) {
  std::int64_t d = got.shape()[1];
  double gw = 0, gg = 0, ww = 0, diff = 0;
  for (std::int64_t k = 0; k < d; ++k) {
    double g = got.get(i * d + k), w = want.get(j * d + k);
    gw += g * w, gg += g * g, ww += w * w;
    diff = std::max(diff, std::abs(g - w));
  }
  return {gw / std::sqrt(gg * ww), diff};
}

class MiniLM : public testing::Test {
protected:
  static void SetUpTestSuite() {
    std::string dir = default_minilm_dir();
    if (!fs::exists(fs::path(dir) / "model.safetensors"))
      return; // each test fails, saying what to run
    model_ = new SentenceEncoder(SentenceEncoder::load(dir));
    model_->compile();
    std::cout << "compiled the 3 kernels in " << model_->compile_ms() << " ms\n";
  }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
  }
  SentenceEncoder &model() {
    test::minilm_dir(); // fails the test when the model is missing
    if (!model_)
      throw Error("no model");
    return *model_;
  }
  static std::vector<std::string> sentences() {
    nlohmann::json j = test::read_json(test::fixture("minilm_sentences.json"));
    return j["sentences"];
  }
  static std::vector<Ids> ids() {
    nlohmann::json j = test::read_json(test::fixture("minilm_sentences.json"));
    return j["input_ids"];
  }
  static Tensor embeddings() { return load_npy(test::fixture("minilm_embeddings.npy")); }

  static SentenceEncoder *model_;
};
SentenceEncoder *MiniLM::model_ = nullptr;

TEST_F(MiniLM, TokenIdsEqualSentenceTransformers) {
  std::vector<Ids> got = model().tokenize(sentences());
  std::vector<Ids> want = ids();
  ASSERT_EQ(got.size(), 8u);
  for (std::size_t i = 0; i < got.size(); ++i)
    EXPECT_EQ(got[i], want[i]) << "sentence " << i << ": " << sentences()[i];
  EXPECT_EQ(got.back().size(), 256u); // the long sentence, truncated at max_seq_length
  EXPECT_EQ(model().max_seq_length(), 256);
}

void expect_close(const Tensor &got, const Tensor &want, const std::vector<std::int64_t> &rows,
                  const char *what) {
  Agreement worst;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    Agreement a = agreement(got, static_cast<std::int64_t>(i), want, rows[i]);
    EXPECT_GE(a.cosine, kMinCosine) << what << ", sentence " << rows[i];
    EXPECT_LE(a.max_abs_diff, kMaxAbsDiff) << what << ", sentence " << rows[i];
    worst.cosine = std::min(worst.cosine, a.cosine);
    worst.max_abs_diff = std::max(worst.max_abs_diff, a.max_abs_diff);
  }
  std::printf("%s vs sentence-transformers: min cosine %.12f, max abs diff %.3g\n", what,
              worst.cosine, worst.max_abs_diff);
}

TEST_F(MiniLM, CompiledModelMatchesSentenceTransformers) {
  Tensor want = embeddings();
  ASSERT_EQ(want.shape(), (Shape{8, 384}));
  Tensor got = model().embed(sentences(), 8); // one batch, padded to 256 tokens
  ASSERT_EQ(got.shape(), (Shape{8, 384}));
  expect_close(got, want, {0, 1, 2, 3, 4, 5, 6, 7}, "compiled");
  got = model().embed(sentences(), 3); // batches of 3, in order of length
  expect_close(got, want, {0, 1, 2, 3, 4, 5, 6, 7}, "compiled, batches of 3");
}

TEST_F(MiniLM, WholeModelInOneKernelMatchesThePerLayerKernels) {
  // bert_model_graph compiles its six layers as one function called six times
  // (CompileOptions::share_repeated_layers): the same code as the layer kernel, so the
  // same bits, and the fixtures' agreement.
  SentenceEncoder whole = SentenceEncoder::load(test::minilm_dir());
  whole.compile({}, KernelPlan::WholeModel);
  std::printf("compiled the whole model in %.0f ms\n", whole.compile_ms());
  Tensor got = whole.embed(sentences(), 3), per_layer = model().embed(sentences(), 3);
  expect_close(got, embeddings(), {0, 1, 2, 3, 4, 5, 6, 7}, "whole model, batches of 3");
  ASSERT_EQ(got.shape(), per_layer.shape());
  EXPECT_EQ(std::memcmp(got.data(), per_layer.data(), got.nbytes()), 0);
}

TEST_F(MiniLM, InterpreterMatchesSentenceTransformers) {
  // Double precision and plain loops: three short sentences, one padded batch.
  std::vector<std::string> all = sentences();
  Tensor got = model().embed_reference({all[0], all[6], all[1]});
  EXPECT_EQ(got.dtype(), DType::F64);
  expect_close(got, embeddings(), {0, 6, 1}, "interpreter");
}

TEST_F(MiniLM, PaddingChangesNothing) {
  // Each sentence alone (no padding) against all in one batch (padded to 256 tokens).
  std::vector<std::string> s = sentences();
  Tensor batch = model().embed(s, 8);
  for (std::int64_t i = 0; i < 8; ++i) {
    Tensor alone = model().embed({s[static_cast<std::size_t>(i)]}, 1);
    EXPECT_LE(agreement(alone, 0, batch, i).max_abs_diff, 1e-6) << "sentence " << i;
  }
  // Whatever ids fill the padding, the masked attention and the pooling ignore them.
  std::vector<Ids> ids = model().tokenize({s[0], s[7]});
  TokenBatch b = TokenBatch::pad(ids, 0);
  Tensor clean = model().run(b);
  for (std::int64_t j = static_cast<std::int64_t>(ids[0].size()); j < b.length(); ++j)
    b.ids.data_as<std::int32_t>()[j] = 1000 + static_cast<std::int32_t>(j);
  Tensor noisy = model().run(b);
  EXPECT_LE(agreement(noisy, 0, clean, 0).max_abs_diff, 1e-7);
  EXPECT_LE(agreement(noisy, 1, clean, 1).max_abs_diff, 1e-7);
}

TEST_F(MiniLM, EmbedsNothingAndRefusesABadBatchSize) {
  EXPECT_EQ(model().embed({}).shape(), (Shape{0, 384}));
  EXPECT_TRUE(ErrorSays([&] { model().embed({"a"}, 0); }, {"batch_size must be at least 1"}));
}

/// A temp copy of the model directory: small files copied (so a test can break them), the
/// large ones linked. Removed when the test ends.
class ModelCopy {
public:
  ModelCopy()
      : dir_(fs::temp_directory_path() /
             ("qkv_minilm_" + std::to_string(::getpid()) + "_" +
              testing::UnitTest::GetInstance()->current_test_info()->name())) {
    fs::path src = test::minilm_dir();
    fs::create_directories(dir_ / "1_Pooling");
    for (const char *f : {"config.json", "modules.json", "sentence_bert_config.json",
                          "tokenizer_config.json", "1_Pooling/config.json"})
      fs::copy_file(src / f, dir_ / f);
    for (const char *f : {"model.safetensors", "tokenizer.json", "vocab.txt"})
      fs::create_symlink(src / f, dir_ / f);
  }
  ~ModelCopy() { fs::remove_all(dir_); }
  std::string path(const std::string &f) const { return (dir_ / f).string(); }
  std::string dir() const { return dir_.string(); }
  /// Replaces a file with `text`.
  void write(const std::string &f, const std::string &text) const {
    fs::remove(dir_ / f);
    std::ofstream(dir_ / f) << text;
  }
  nlohmann::json json(const std::string &f) const { return test::read_json(path(f)); }

private:
  fs::path dir_;
};

/// ||got|| / ||want|| - 1 for row i of got against row j of want.
double norm_error(const Tensor &got, std::int64_t i, const Tensor &want, std::int64_t j) {
  std::int64_t d = got.shape()[1];
  double gg = 0, ww = 0;
  for (std::int64_t k = 0; k < d; ++k) {
    gg += got.get(i * d + k) * got.get(i * d + k);
    ww += want.get(j * d + k) * want.get(j * d + k);
  }
  return std::sqrt(gg / ww) - 1;
}

/// Unnormalized embeddings: the direction as for the unit vectors (cosine >= 0.99999),
/// and the length within 1e-5 of sentence-transformers' (the unit vectors agree to 2e-7
/// per element; a wrong pooling weight scales a padded sentence by its length over the
/// batch's, at least 10% for every sentence but the longest here).
void expect_close_unnormalized(const Tensor &got, const Tensor &want, const char *what) {
  double worst_cos = 1, worst_norm = 0;
  for (std::int64_t i = 0; i < want.shape()[0]; ++i) {
    double cosine = agreement(got, i, want, i).cosine, norm = std::abs(norm_error(got, i, want, i));
    EXPECT_GE(cosine, kMinCosine) << what << ", sentence " << i;
    EXPECT_LE(norm, 1e-5) << what << ", sentence " << i;
    worst_cos = std::min(worst_cos, cosine);
    worst_norm = std::max(worst_norm, norm);
  }
  std::printf("%s vs sentence-transformers: min cosine %.12f, max norm error %.3g\n", what,
              worst_cos, worst_norm);
}

TEST(MiniLMFiles, WithoutNormalizeMatchesSentenceTransformers) {
  // A copy of the model whose modules.json ends at Pooling (as sentence-transformers
  // models without a Normalize module do): the mean-pooled vectors themselves.
  ModelCopy m;
  nlohmann::json modules = m.json("modules.json");
  ASSERT_EQ(modules.size(), 3u);
  modules.erase(2); // Normalize
  m.write("modules.json", modules.dump());
  SentenceEncoder model = SentenceEncoder::load(m.dir());
  EXPECT_FALSE(model.normalizes());
  nlohmann::json j = test::read_json(test::fixture("minilm_sentences.json"));
  std::vector<std::string> sentences = j["sentences"];
  Tensor want = load_npy(test::fixture("minilm_unnormalized_embeddings.npy"));
  ASSERT_EQ(want.shape(), (Shape{8, 384}));
  model.compile();
  expect_close_unnormalized(model.embed(sentences, 8), want, "unnormalized, one padded batch");
  expect_close_unnormalized(model.embed(sentences, 3), want, "unnormalized, batches of 3");
  // The interpreter, on three short sentences padded to the longest.
  Tensor ref = model.embed_reference({sentences[0], sentences[6], sentences[1]});
  const std::int64_t rows[3] = {0, 6, 1};
  Tensor want3(DType::F32, {3, 384});
  for (std::int64_t r = 0; r < 3; ++r)
    for (std::int64_t k = 0; k < 384; ++k)
      want3.set(r * 384 + k, want.get(rows[r] * 384 + k));
  expect_close_unnormalized(ref, want3, "unnormalized, interpreter");
}

TEST(MiniLMFiles, TheRealWeightsFile) {
  SafeTensors st = SafeTensors::open(test::minilm_dir() + "/model.safetensors");
  // 5 embeddings, 16 per layer, position_ids and the pooler's 2 (which qkv does not use).
  EXPECT_EQ(st.tensors().size(), 104u);
  EXPECT_TRUE(st.contains("pooler.dense.weight"));
  EXPECT_EQ(st.info("embeddings.position_ids").dtype, "I64");
  EXPECT_EQ(st.info("encoder.layer.5.intermediate.dense.weight").shape, (Shape{1536, 384}));
  EXPECT_EQ(st.metadata().at("format"), "pt");
}

TEST(MiniLMFiles, TruncatedWeightsAreRefused) {
  ModelCopy m;
  std::string real = test::minilm_dir() + "/model.safetensors";
  std::ifstream in(real, std::ios::binary);
  std::string half(static_cast<std::size_t>(fs::file_size(real) / 2), '\0');
  in.read(half.data(), static_cast<std::streamsize>(half.size()));
  m.write("model.safetensors", half);
  EXPECT_TRUE(
      ErrorSays([&] { SentenceEncoder::load(m.dir()); },
                {m.path("model.safetensors"), "run past the end of the data", "truncated"}));
  m.write("model.safetensors", half.substr(0, 1000)); // inside the header
  EXPECT_TRUE(ErrorSays([&] { SentenceEncoder::load(m.dir()); },
                        {m.path("model.safetensors"), "runs past the end of the file"}));
}

TEST(MiniLMFiles, BrokenConfigsNameTheFileAndField) {
  ModelCopy m;
  nlohmann::json c = m.json("config.json");
  c["hidden_act"] = "relu";
  m.write("config.json", c.dump());
  EXPECT_TRUE(ErrorSays([&] { SentenceEncoder::load(m.dir()); },
                        {m.path("config.json"), "field 'hidden_act' is 'relu'"}));
  c.erase("hidden_act");
  m.write("config.json", c.dump());
  EXPECT_TRUE(ErrorSays([&] { SentenceEncoder::load(m.dir()); },
                        {m.path("config.json"), "field 'hidden_act' is missing"}));
  c = m.json("config.json");
  c["hidden_act"] = "gelu";
  c["num_attention_heads"] = 7;
  m.write("config.json", c.dump());
  EXPECT_TRUE(ErrorSays([&] { SentenceEncoder::load(m.dir()); },
                        {"field 'num_attention_heads' is 7", "does not divide hidden_size 384"}));
}

TEST(MiniLMFiles, UnsupportedModulesAndPoolingAreRefused) {
  ModelCopy m;
  nlohmann::json modules = m.json("modules.json");
  modules.push_back({{"idx", 3},
                     {"name", "3"},
                     {"path", "3_Dense"},
                     {"type", "sentence_transformers.models.Dense"}});
  m.write("modules.json", modules.dump());
  EXPECT_TRUE(ErrorSays([&] { SentenceEncoder::load(m.dir()); },
                        {m.path("modules.json"), "field '[3].type'", "models.Dense"}));
  modules.erase(3);
  m.write("modules.json", modules.dump());
  nlohmann::json pooling = m.json("1_Pooling/config.json");
  pooling["pooling_mode_cls_token"] = true;
  m.write("1_Pooling/config.json", pooling.dump());
  EXPECT_TRUE(ErrorSays([&] { SentenceEncoder::load(m.dir()); },
                        {m.path("1_Pooling/config.json"), "'pooling_mode_cls_token' is true"}));
}

/// A .safetensors file of one word-embeddings entry with this dtype and data offsets,
/// followed by `data` bytes.
std::string word_embeddings_file(const std::string &dtype, std::uint64_t end, std::size_t data) {
  std::string header = R"({"embeddings.word_embeddings.weight":{"dtype":")" + dtype +
                       R"(","shape":[30522,384],"data_offsets":[0,)" + std::to_string(end) + "]}}";
  std::string len(8, '\0');
  std::uint64_t n = header.size();
  std::memcpy(len.data(), &n, 8);
  return len + header + std::string(data, '\0');
}

TEST(MiniLMFiles, MissingWeightsNameTheTensor) {
  ModelCopy m;
  m.write("model.safetensors", word_embeddings_file("F32", 0, 0));
  EXPECT_TRUE(ErrorSays([&] { SentenceEncoder::load(m.dir()); },
                        {m.path("model.safetensors"), "'embeddings.word_embeddings.weight'",
                         "needs 46881792 bytes"}));
}

// A weight stored as I32 with the bytes of the F32 one it replaces is refused, naming the
// file, the tensor and both dtypes (converted, its bits would be floats near -1.1e9).
TEST(MiniLMFiles, IntegerWeightsAreRefused) {
  ModelCopy m;
  m.write("model.safetensors", word_embeddings_file("I32", 46881792, 46881792));
  EXPECT_TRUE(ErrorSays([&] { SentenceEncoder::load(m.dir()); },
                        {m.path("model.safetensors"), "'embeddings.word_embeddings.weight'",
                         "stored as I32", "expects F32 weights"}));
}

} // namespace
} // namespace qkv
