// Tensor-parallel Llama over the ranks of mpirun (ctest: -np 2) against one process: the
// tiny fixture's greedy tokens must be the same token for token (and transformers' own),
// its logits within 1e-4 of the largest, contiguous and paged caches, batch 2 with prompts
// of different lengths; a random GQA model with an odd vocabulary (an uneven vocab split)
// the same; and the configs tensor parallelism refuses.
#include <qkv/dist/tensor_parallel.hpp>
#include <qkv/runtime/tensor.hpp>

#include <gtest/gtest.h>

#include <cmath>

namespace qkv::test {
namespace {

dist::Comm *g_comm = nullptr;

std::string fixture_dir() { return std::string(QKV_MODEL_TEST_DATA) + "/tiny-llama"; }

std::vector<std::vector<std::int64_t>> fixture_prompts() {
  Tensor ids = load_npy(fixture_dir() + "/prompt_ids.npy");
  Tensor lengths = load_npy(fixture_dir() + "/prompt_lengths.npy");
  std::vector<std::vector<std::int64_t>> out;
  for (std::int64_t b = 0; b < ids.shape()[0]; ++b) {
    std::vector<std::int64_t> p;
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(lengths.at({b})); ++i)
      p.push_back(static_cast<std::int64_t>(ids.at({b, i})));
    out.push_back(p);
  }
  return out;
}

LlamaOptions options(bool paged, bool parallel) {
  LlamaOptions o;
  o.batch = 2;
  o.capacity = 64;
  o.paged = paged;
  o.page_size = 4;
  o.threads = 1;
  if (parallel)
    o.tp = dist::tensor_parallel(*g_comm);
  return o;
}

/// max |a - b| / max |b| over every step's logits.
double worst(const std::vector<Tensor> &a, const std::vector<Tensor> &b) {
  double err = 0, scale = 0;
  for (std::size_t s = 0; s < b.size(); ++s)
    for (std::int64_t i = 0; i < b[s].numel(); ++i) {
      scale = std::max(scale, std::abs(b[s].get(i)));
      err = std::max(err, std::abs(a[s].get(i) - b[s].get(i)));
    }
  return err / scale;
}

void same_generation(LlamaModel &parallel, LlamaModel &alone,
                     const std::vector<std::vector<std::int64_t>> &prompts) {
  SamplingOptions greedy;
  greedy.max_new_tokens = 12;
  greedy.keep_logits = true;
  GenerationResult p = generate(parallel, prompts, greedy);
  GenerationResult a = generate(alone, prompts, greedy);
  EXPECT_EQ(p.tokens, a.tokens) << "rank " << g_comm->rank();
  EXPECT_LE(worst(p.logits, a.logits), 1e-4) << "rank " << g_comm->rank();
  EXPECT_GT(parallel.times().comm_s, 0);
}

class TinyLlama : public ::testing::TestWithParam<bool> {};

TEST_P(TinyLlama, GreedyTokensAreOneProcesssAndTransformers) {
  bool paged = GetParam();
  LlamaModel parallel = LlamaModel::load(fixture_dir(), options(paged, true));
  LlamaModel alone = LlamaModel::load(fixture_dir(), options(paged, false));
  // Each rank keeps half the kv heads in its cache.
  EXPECT_EQ(parallel.cache().kv_heads(), 2 / g_comm->size());
  auto prompts = fixture_prompts();
  same_generation(parallel, alone, prompts);

  SamplingOptions greedy;
  greedy.max_new_tokens = 16;
  GenerationResult r = generate(parallel, prompts, greedy);
  Tensor want = load_npy(fixture_dir() + "/greedy_ids.npy");
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t i = 0; i < 16; ++i)
      EXPECT_EQ(r.tokens[static_cast<std::size_t>(b)][static_cast<std::size_t>(i)],
                static_cast<std::int64_t>(want.at({b, i})))
          << "prompt " << b << " token " << i;
}

INSTANTIATE_TEST_SUITE_P(Caches, TinyLlama, ::testing::Values(false, true),
                         [](const auto &i) { return i.param ? "paged" : "contiguous"; });

TEST(RandomLlama, GqaAndAnUnevenVocabularySplit) {
  LlamaConfig c;
  c.vocab_size = 101;
  c.hidden_size = 64;
  c.intermediate_size = 96;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 8;
  c.num_key_value_heads = 2;
  c.head_dim = 16;
  c.max_position_embeddings = 64;
  c.rms_norm_eps = 1e-5;
  LlamaWeights w = LlamaWeights::random(c, 7);
  LlamaModel parallel(c, w, options(false, true));
  LlamaModel alone(c, w, options(false, false));
  same_generation(parallel, alone, {{5, 9, 100, 3, 77, 12, 64}, {1, 2}});
}

TEST(TensorParallelErrors, NameTheFieldOrOption) {
  if (g_comm->size() < 2)
    GTEST_SKIP() << "one rank divides everything";
  LlamaConfig c = LlamaConfig::load(fixture_dir() + "/config.json");
  LlamaConfig odd = c;
  odd.num_key_value_heads = 1;
  odd.num_attention_heads = 3;
  try {
    odd.shard(0, g_comm->size());
    ADD_FAILURE() << "no error";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("num_attention_heads (3) must be a multiple of the ranks"),
              std::string::npos)
        << e.what();
  }
  LlamaOptions bf16 = options(false, true);
  bf16.dtype = DType::BF16;
  try {
    LlamaModel m(c, LlamaWeights::random(c, 1, DType::BF16), bf16);
    ADD_FAILURE() << "no error";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("tensor parallelism runs f32 models"), std::string::npos)
        << e.what();
  }
}

} // namespace
} // namespace qkv::test

int main(int argc, char **argv) {
  qkv::dist::Comm comm(&argc, &argv);
  qkv::test::g_comm = &comm;
  ::testing::InitGoogleTest(&argc, argv);
  int failed = RUN_ALL_TESTS();
  for (std::int64_t f : comm.all_gather({failed}, "the test results"))
    failed |= static_cast<int>(f);
  return failed;
}
