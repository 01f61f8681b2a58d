// The Llama decoder against Hugging Face transformers: a tiny random LlamaForCausalLM
// (2 layers, GQA 4/2, hidden 64, vocab 128) whose config, weights, prompt logits and greedy
// continuations scripts/make-llama-fixtures.py wrote once (tests/models/data/tiny-llama),
// and the same weights under Llama 3's RoPE base 500000 (tiny-llama-rope: its config.json
// as transformers 5 saved it, and its outputs), read from each config layout.
//
// Tolerance: a logit passes when |qkv - transformers| <= 1e-4 * max |transformers logit|
// over the tensor compared (the logits are of order 1; a per-element relative test would
// fail on logits near 0 for no reason). Greedy tokens must be identical; the fixture's
// smallest top-1/top-2 gap along the greedy paths is 0.014, far above the tolerance.
#include <qkv/models/llama.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <fstream>
#include <sstream>

#include "qkv_test/errors.hpp"

namespace qkv::test {
namespace {

namespace fs = std::filesystem;

std::string fixture_dir() { return std::string(QKV_MODEL_TEST_DATA) + "/tiny-llama"; }
std::string rope_fixture_dir() { return std::string(QKV_MODEL_TEST_DATA) + "/tiny-llama-rope"; }
Tensor fixture(const std::string &name, const std::string &dir = fixture_dir()) {
  return load_npy(dir + "/" + name);
}

/// The prompts of the fixture, each without its padding.
std::vector<std::vector<std::int64_t>> prompts() {
  Tensor ids = fixture("prompt_ids.npy"), lengths = fixture("prompt_lengths.npy");
  std::vector<std::vector<std::int64_t>> out;
  for (std::int64_t b = 0; b < ids.shape()[0]; ++b) {
    std::vector<std::int64_t> p;
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(lengths.at({b})); ++i)
      p.push_back(static_cast<std::int64_t>(ids.at({b, i})));
    out.push_back(p);
  }
  return out;
}

/// max |got - want| / max |want| over the rows [0, rows) of (b, ., V) slices.
double worst_logit_error(const Tensor &got, const Tensor &want, std::int64_t b,
                         std::int64_t rows) {
  std::int64_t vocab = want.shape().back();
  double err = 0, scale = 0;
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t v = 0; v < vocab; ++v) {
      double w = want.at({b, i, v}), g = got.at({b, i, v});
      scale = std::max(scale, std::abs(w));
      err = std::max(err, std::isnan(g) ? INFINITY : std::abs(g - w));
    }
  return err / scale;
}

constexpr double kLogitTol = 1e-4;

LlamaOptions options(LlamaOptions::Backend backend, bool paged) {
  LlamaOptions o;
  o.backend = backend;
  o.batch = 2;
  o.capacity = 64;
  o.paged = paged;
  o.page_size = 4; // prompts of 11 and 5 tokens end mid-page
  return o;
}

std::string label(LlamaOptions::Backend backend, bool paged) {
  return std::string(backend == LlamaOptions::Backend::Compiled ? "compiled" : "interpreter") +
         (paged ? ", paged cache" : ", contiguous cache");
}

/// Prompt logits (one batched prefill, prompts padded) and the greedy continuation of 16
/// tokens with the logits that chose them, against the transformers outputs in `dir`.
void matches_transformers(LlamaModel &model, const std::string &dir = fixture_dir()) {
  auto ps = prompts();
  Tensor ids = fixture("prompt_ids.npy", dir), want = fixture("prompt_logits.npy", dir);
  std::vector<std::int64_t> counts = {static_cast<std::int64_t>(ps[0].size()),
                                      static_cast<std::int64_t>(ps[1].size())};
  Tensor logits = model.forward(ids.to(DType::I64), counts);
  for (std::int64_t b = 0; b < 2; ++b)
    EXPECT_LE(worst_logit_error(logits, want, b, counts[static_cast<std::size_t>(b)]), kLogitTol)
        << "prompt " << b << " logits";

  SamplingOptions greedy;
  greedy.max_new_tokens = 16;
  greedy.keep_logits = true;
  GenerationResult r = generate(model, ps, greedy);
  Tensor want_ids = fixture("greedy_ids.npy", dir);
  Tensor want_logits = fixture("greedy_logits.npy", dir);
  ASSERT_EQ(r.logits.size(), 16u);
  for (std::int64_t b = 0; b < 2; ++b) {
    std::vector<std::int64_t> expected;
    for (std::int64_t i = 0; i < 16; ++i)
      expected.push_back(static_cast<std::int64_t>(want_ids.at({b, i})));
    EXPECT_EQ(r.tokens[static_cast<std::size_t>(b)], expected) << "greedy tokens of prompt " << b;
    std::int64_t vocab = want_logits.shape()[2];
    Tensor got(DType::F32, {1, 16, vocab}), exp(DType::F32, {1, 16, vocab});
    for (std::int64_t i = 0; i < 16; ++i)
      for (std::int64_t v = 0; v < vocab; ++v) {
        got.set(i * vocab + v, r.logits[static_cast<std::size_t>(i)].at({b, v}));
        exp.set(i * vocab + v, want_logits.at({b, i, v}));
      }
    EXPECT_LE(worst_logit_error(got, exp, 0, 16), kLogitTol) << "greedy logits of prompt " << b;
  }
  EXPECT_EQ(r.prefill_tokens, counts[0] + counts[1]);
  EXPECT_EQ(r.decode_tokens, 2 * 15);
}

void matches_transformers(LlamaOptions::Backend backend, bool paged) {
  SCOPED_TRACE(label(backend, paged));
  LlamaModel model = LlamaModel::load(fixture_dir(), options(backend, paged));
  matches_transformers(model);
}

TEST(Llama, CompiledMatchesTransformers) {
  matches_transformers(LlamaOptions::Backend::Compiled, false);
}

TEST(Llama, CompiledPagedMatchesTransformers) {
  matches_transformers(LlamaOptions::Backend::Compiled, true);
}

TEST(Llama, InterpreterMatchesTransformers) {
  matches_transformers(LlamaOptions::Backend::Interpreter, false);
}

/// The rope fixture's config.json (transformers 5: rope_parameters.rope_theta 500000) with
/// `edit` applied, read with tiny-llama's weights, compiled.
LlamaModel rope_model(const std::function<void(nlohmann::json &)> &edit) {
  std::ifstream in(rope_fixture_dir() + "/config.json");
  nlohmann::json j = nlohmann::json::parse(in);
  edit(j);
  LlamaConfig c = LlamaConfig::from_json(JsonConfig::parse(j.dump(), "config.json"));
  return LlamaModel(c, LlamaWeights::load(fixture_dir() + "/model.safetensors", c),
                    options(LlamaOptions::Backend::Compiled, false));
}

TEST(LlamaRopeBase, Transformers5ConfigMatchesTransformers) {
  // As saved: rope_theta only under rope_parameters. A loader that read the top level
  // would run base 10000, whose logits differ from these by up to 0.53 (meta.json).
  LlamaModel model = rope_model([](nlohmann::json &) {});
  EXPECT_EQ(model.config().rope_theta, 500000);
  matches_transformers(model, rope_fixture_dir());
}

TEST(LlamaRopeBase, Transformers4ConfigMatchesTransformers) {
  // The layout transformers 4 wrote: rope_theta at the top level, rope_scaling null.
  LlamaModel model = rope_model([](nlohmann::json &j) {
    j["rope_theta"] = j["rope_parameters"]["rope_theta"];
    j.erase("rope_parameters");
    j["rope_scaling"] = nullptr;
  });
  EXPECT_EQ(model.config().rope_theta, 500000);
  matches_transformers(model, rope_fixture_dir());
}

TEST(LlamaRopeBase, AbsentIsTenThousand) {
  // No rope_theta anywhere: transformers' default 10000, tiny-llama's own outputs.
  LlamaModel model = rope_model([](nlohmann::json &j) { j.erase("rope_parameters"); });
  matches_transformers(model, fixture_dir());
}

TEST(Llama, SamplingIsSeededAndTopOneIsGreedy) {
  LlamaModel model = LlamaModel::load(fixture_dir(), options(LlamaOptions::Backend::Compiled, false));
  auto ps = prompts();
  SamplingOptions s;
  s.max_new_tokens = 12;
  s.temperature = 1.0;
  s.top_k = 20;
  s.seed = 7;
  GenerationResult a = generate(model, ps, s), b = generate(model, ps, s);
  EXPECT_EQ(a.tokens, b.tokens) << "the same seed gives the same tokens";
  s.seed = 8;
  EXPECT_NE(generate(model, ps, s).tokens, a.tokens) << "another seed, other tokens";
  s.top_k = 1; // only the best token can be drawn: greedy
  Tensor want_ids = fixture("greedy_ids.npy");
  GenerationResult top1 = generate(model, ps, s);
  for (std::int64_t i = 0; i < 12; ++i)
    EXPECT_EQ(top1.tokens[0][static_cast<std::size_t>(i)],
              static_cast<std::int64_t>(want_ids.at({0, i})));
  // Every sampled token is one of the 20 best at its step.
  s.top_k = 20;
  s.seed = 7;
  s.keep_logits = true;
  GenerationResult k = generate(model, ps, s);
  for (std::size_t step = 0; step < k.logits.size(); ++step)
    for (std::int64_t bi = 0; bi < 2; ++bi) {
      std::int64_t t = k.tokens[static_cast<std::size_t>(bi)][step];
      double lt = k.logits[step].at({bi, t});
      int better = 0;
      for (std::int64_t v = 0; v < 128; ++v)
        better += k.logits[step].at({bi, v}) > lt;
      EXPECT_LT(better, 20) << "step " << step << " sequence " << bi;
    }
}

TEST(Llama, EosStopsASequence) {
  LlamaModel model = LlamaModel::load(fixture_dir(), options(LlamaOptions::Backend::Compiled, false));
  Tensor want_ids = fixture("greedy_ids.npy");
  SamplingOptions s;
  s.max_new_tokens = 16;
  s.eos = static_cast<std::int64_t>(want_ids.at({1, 4})); // 37: prompt 1's 5th greedy token,
  // and prompt 0's 13th: each sequence stops at its own first eos, the other goes on.
  GenerationResult r = generate(model, prompts(), s);
  const std::size_t stop[2] = {13, 5};
  for (std::int64_t b = 0; b < 2; ++b) {
    const auto &got = r.tokens[static_cast<std::size_t>(b)];
    ASSERT_EQ(got.size(), stop[b]) << "sequence " << b;
    EXPECT_EQ(got.back(), *s.eos);
    for (std::size_t i = 0; i < got.size(); ++i) // what came before is unchanged
      EXPECT_EQ(got[i], static_cast<std::int64_t>(want_ids.at({b, static_cast<std::int64_t>(i)})));
  }
}

// ---- broken inputs -------------------------------------------------------------------------

/// A copy of the fixture's directory, for breaking.
class BrokenModel : public testing::Test {
protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("qkv_llama_" + std::to_string(::getpid()) + "_" +
            testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    for (const char *f : {"config.json", "model.safetensors"})
      fs::copy_file(fs::path(fixture_dir()) / f, dir_ / f);
  }
  void TearDown() override { fs::remove_all(dir_); }

  nlohmann::json config() const {
    std::ifstream in(dir_ / "config.json");
    return nlohmann::json::parse(in);
  }
  void write_config(const nlohmann::json &j) const {
    std::ofstream(dir_ / "config.json") << j.dump(2);
  }
  /// Rewrites model.safetensors with `edit` applied to its header (same data).
  template <class F> void edit_weights(F edit) const {
    std::ifstream in(dir_ / "model.safetensors", std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string bytes = ss.str();
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i)
      n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
    nlohmann::json header = nlohmann::json::parse(bytes.substr(8, n));
    edit(header);
    std::string h = header.dump();
    std::string out;
    for (int i = 0; i < 8; ++i)
      out.push_back(static_cast<char>((h.size() >> (8 * i)) & 0xff));
    out += h + bytes.substr(8 + n);
    std::ofstream(dir_ / "model.safetensors", std::ios::binary) << out;
  }
  std::string dir() const { return dir_.string(); }

  fs::path dir_;
};

TEST_F(BrokenModel, ConfigMissingAField) {
  nlohmann::json j = config();
  j.erase("num_hidden_layers");
  write_config(j);
  EXPECT_TRUE(ErrorSays([&] { LlamaModel::load(dir()); },
                        {"config.json", "field 'num_hidden_layers' is missing"}));
}

TEST_F(BrokenModel, ConfigWithWhatQkvDoesNotModel) {
  nlohmann::json j = config();
  j["model_type"] = "mistral";
  write_config(j);
  EXPECT_TRUE(ErrorSays([&] { LlamaModel::load(dir()); }, {"model_type", "mistral", "llama"}));
  j = config();
  j["model_type"] = "llama";
  j["rope_parameters"]["rope_type"] = "llama3";
  write_config(j);
  EXPECT_TRUE(ErrorSays([&] { LlamaModel::load(dir()); },
                        {"rope_parameters.rope_type", "llama3", "default"}));
  j["rope_parameters"]["rope_type"] = "default";
  j["num_key_value_heads"] = 3;
  write_config(j);
  EXPECT_TRUE(ErrorSays([&] { LlamaModel::load(dir()); },
                        {"num_key_value_heads", "3", "does not divide num_attention_heads 4"}));
  j["num_key_value_heads"] = "two";
  write_config(j);
  EXPECT_TRUE(ErrorSays([&] { LlamaModel::load(dir()); }, {"num_key_value_heads", "must be"}));
}

TEST_F(BrokenModel, WeightsOfTheWrongShape) {
  edit_weights([](nlohmann::json &h) { // (176, 64) stored as (64, 176): same bytes
    h["model.layers.1.mlp.up_proj.weight"]["shape"] = {64, 176};
  });
  EXPECT_TRUE(ErrorSays([&] { LlamaModel::load(dir()); },
                        {"model.safetensors", "model.layers.1.mlp.up_proj.weight", "176", "64"}));
}

// An I32 tensor of the same byte count is not a float weight: converted, its bits would be
// numbers near -1e9 and the model would run on them.
TEST_F(BrokenModel, WeightsOfAnIntegerDtype) {
  edit_weights([](nlohmann::json &h) { h["model.layers.0.mlp.down_proj.weight"]["dtype"] = "I32"; });
  EXPECT_TRUE(ErrorSays([&] { LlamaModel::load(dir()); },
                        {"model.safetensors", "tensor 'model.layers.0.mlp.down_proj.weight'",
                         "stored as I32", "expects F32 weights"}));
}

TEST_F(BrokenModel, AMissingTensor) {
  edit_weights([](nlohmann::json &h) {
    h["model.layers.0.self_attn.k_proj.weigth"] = h["model.layers.0.self_attn.k_proj.weight"];
    h.erase("model.layers.0.self_attn.k_proj.weight");
  });
  EXPECT_TRUE(ErrorSays([&] { LlamaModel::load(dir()); },
                        {"model.safetensors", "model.layers.0.self_attn.k_proj.weight"}));
  edit_weights([](nlohmann::json &h) { // k_proj back, lm_head gone
    h["model.layers.0.self_attn.k_proj.weight"] = h["model.layers.0.self_attn.k_proj.weigth"];
    h.erase("model.layers.0.self_attn.k_proj.weigth");
    h.erase("lm_head.weight");
  });
  EXPECT_TRUE(ErrorSays([&] { LlamaModel::load(dir()); },
                        {"lm_head.weight", "tie_word_embeddings is false"}));
}

TEST(LlamaErrors, BadCallsNameWhatIsWrong) {
  LlamaModel model = LlamaModel::load(fixture_dir(), options(LlamaOptions::Backend::Compiled, false));
  EXPECT_TRUE(ErrorSays([&] { generate(model, {{1, 2}}); }, {"1 prompts", "2 sequences"}));
  EXPECT_TRUE(ErrorSays([&] { generate(model, {{1, 2}, {}}); }, {"empty prompt (sequence 1)"}));
  EXPECT_TRUE(ErrorSays([&] { generate(model, {{1, 2}, {3, 500}}); },
                        {"token 500 of sequence 1", "[0, 128)"}));
  SamplingOptions many;
  many.max_new_tokens = 60;
  EXPECT_TRUE(ErrorSays([&] { generate(model, {{1, 2, 3, 4, 5}, {1}}, many); },
                        {"65 positions", "holds 64"}));
  // A NaN temperature is not "negative", and a negative top_k is not "every token".
  SamplingOptions nan_t;
  nan_t.temperature = std::nan("");
  EXPECT_TRUE(ErrorSays([&] { generate(model, {{1, 2}, {3}}, nan_t); },
                        {"temperature must be a finite number, 0 (greedy) or positive, got nan"}));
  SamplingOptions neg_k;
  neg_k.temperature = 1;
  neg_k.top_k = -5;
  EXPECT_TRUE(ErrorSays([&] { generate(model, {{1, 2}, {3}}, neg_k); },
                        {"top_k must be 0 (every token) or positive, got -5"}));
  // Past the positions the model was trained for (512), whatever the cache could hold.
  SamplingOptions far;
  far.max_new_tokens = 600;
  EXPECT_TRUE(ErrorSays([&] { generate(model, {{1, 2}, {3}}, far); },
                        {"needs 602 positions", "trained for 512 (max_position_embeddings"}));
  // A failed step leaves the cache as it was.
  EXPECT_EQ(model.cache().length(0), 0);
}

} // namespace
} // namespace qkv::test
