// Sampling (qkv::pick_token, generate with a temperature): the tokens drawn against
// distributions the test computes itself, softmax(logits / T) over the top k, as empirical
// frequencies over many draws; T -> 0 is greedy; a seed's stream is splitmix64's, the one
// docs/models.md promises on every machine; and generate() draws every token from that
// stream, in order.
//
// Tolerance of a frequency: |f - p| <= 5 sqrt(p (1 - p) / N) + 1 / N. A token's count over
// N independent draws is binomial, so its frequency has standard deviation
// sqrt(p (1 - p) / N); five of them leave a chance under 1e-6 per token of failing by bad
// luck (and the seeds are fixed, so a pass is reproducible), while the bugs these tests
// are for (a temperature applied upside down, a top-k one too wide, a skewed draw) move
// some frequency by 0.05 or more. 1 / N covers a probability too small to see.
#include <qkv/dsl/error.hpp>
#include <qkv/models/llama.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <tuple>

#include <gtest/gtest.h>

namespace qkv {
namespace {

using Logits = std::vector<float>;

// Distinct gaps (no ties), of order 1 as a model's, and one far-out token.
const Logits kLogits = {2.0f, 1.0f, 0.5f, 0.0f, -1.0f, -3.0f, 1.5f, 0.25f};

/// Token ids from the largest logit down (ties: the lower id first).
std::vector<std::size_t> largest_first(const Logits &logits) {
  std::vector<std::size_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  });
  return order;
}

/// softmax(logits / T) over the k largest logits (ties: the lower index first), 0 elsewhere;
/// k = 0: all of them. Computed here, in long double, from the definition.
std::vector<double> expected_distribution(const Logits &logits, double t, std::int64_t k) {
  std::size_t v = logits.size();
  std::vector<std::size_t> by_logit = largest_first(logits);
  std::size_t keep = k > 0 ? std::min<std::size_t>(static_cast<std::size_t>(k), v) : v;
  std::vector<long double> w(v, 0.0L);
  long double sum = 0;
  for (std::size_t i = 0; i < keep; ++i)
    sum += w[by_logit[i]] = std::exp(static_cast<long double>(logits[by_logit[i]]) / t);
  std::vector<double> p(v);
  for (std::size_t i = 0; i < v; ++i)
    p[i] = static_cast<double>(w[i] / sum);
  return p;
}

/// Frequencies of each token over `draws` picks from one stream seeded `seed`.
std::vector<double> frequencies(const Logits &logits, const SamplingOptions &o,
                                std::int64_t draws) {
  std::vector<double> f(logits.size(), 0.0);
  std::uint64_t rng = o.seed;
  auto v = static_cast<std::int64_t>(logits.size());
  for (std::int64_t i = 0; i < draws; ++i)
    f[static_cast<std::size_t>(pick_token(logits.data(), v, o, rng))] += 1.0;
  for (double &x : f)
    x /= static_cast<double>(draws);
  return f;
}

void expect_distribution(const std::vector<double> &f, const std::vector<double> &p,
                         std::int64_t draws, const std::string &what) {
  auto n = static_cast<double>(draws);
  for (std::size_t i = 0; i < p.size(); ++i) {
    double tol = 5 * std::sqrt(p[i] * (1 - p[i]) / n) + 1 / n;
    EXPECT_NEAR(f[i], p[i], tol) << what << ", token " << i;
    if (p[i] == 0)
      EXPECT_EQ(f[i], 0.0) << what << ", token " << i << " is outside the top k";
  }
}

SamplingOptions sampling(double t, std::int64_t k, std::uint64_t seed) {
  SamplingOptions o;
  o.temperature = t;
  o.top_k = k;
  o.seed = seed;
  return o;
}

TEST(Sampling, FrequenciesAreSoftmaxOfLogitsOverT) {
  constexpr std::int64_t kDraws = 100000;
  for (double t : {0.5, 1.0, 2.0})
    for (std::int64_t k : {0, 1, 3, 8, 20}) {
      std::string what = "T " + std::to_string(t) + ", top_k " + std::to_string(k);
      std::vector<double> f = frequencies(kLogits, sampling(t, k, 1000 + k), kDraws);
      expect_distribution(f, expected_distribution(kLogits, t, k), kDraws, what);
    }
}

TEST(Sampling, ALowerTemperatureSharpens) {
  // The best token's share grows as T falls: 0.25 at T = 2, 0.39 at T = 1, 0.62 at T = 0.5,
  // 0.86 at T = 0.25.
  constexpr std::int64_t kDraws = 20000;
  double last = 0;
  for (double t : {2.0, 1.0, 0.5, 0.25}) {
    double best = frequencies(kLogits, sampling(t, 0, 5), kDraws)[0];
    EXPECT_GT(best, last + 0.05) << "T " << t;
    last = best;
  }
}

TEST(Sampling, EachSeedsFirstDrawFollowsTheDistribution) {
  // What generate() draws first for seeds 0, 1, 2, ...: one draw per fresh stream.
  constexpr std::int64_t kSeeds = 50000;
  std::vector<double> f(kLogits.size(), 0.0);
  SamplingOptions o = sampling(0.7, 5, 0);
  for (std::int64_t s = 0; s < kSeeds; ++s) {
    std::uint64_t rng = static_cast<std::uint64_t>(s);
    f[static_cast<std::size_t>(pick_token(kLogits.data(), 8, o, rng))] += 1.0 / kSeeds;
  }
  expect_distribution(f, expected_distribution(kLogits, 0.7, 5), kSeeds, "first draws");
}

TEST(Sampling, TemperatureToZeroIsGreedy) {
  // Gaps of at least 0.25 over T = 1e-6: every other token's weight is exp(-2.5e5) = 0.
  for (double t : {0.0, 1e-6, 1e-3})
    for (std::int64_t k : {0, 3}) {
      std::vector<double> f = frequencies(kLogits, sampling(t, k, 9), 2000);
      EXPECT_EQ(f[0], 1.0) << "T " << t << ", top_k " << k;
    }
  // Greedy takes the first of equal maxima, as torch.argmax does.
  Logits tied = {0.0f, 3.0f, 3.0f, 1.0f};
  std::uint64_t rng = 0;
  EXPECT_EQ(pick_token(tied.data(), 4, sampling(0, 0, 0), rng), 1);
  EXPECT_EQ(rng, 0u) << "greedy draws nothing from the stream";
}

TEST(Sampling, ANanLogitIsAnErrorNotAToken) {
  // A NaN orders nothing: greedy and sampled picks alike would return some token silently.
  Logits broken = kLogits;
  broken[5] = std::nanf("");
  for (double t : {0.0, 1.0}) {
    std::uint64_t rng = 0;
    try {
      std::int64_t token = pick_token(broken.data(), 8, sampling(t, 0, 0), rng);
      ADD_FAILURE() << "T " << t << ": token " << token << " from logits with a NaN";
    } catch (const Error &e) {
      EXPECT_NE(std::string(e.what()).find("logit 5 of 8 is NaN"), std::string::npos) << e.what();
    }
  }
}

TEST(Sampling, AnInfiniteLargestLogitIsAnErrorWhenSampled) {
  // Sampled, the weights e^((x - max) / T) are NaN when the largest logit is +-inf: every
  // token masked to -inf, or one +inf. Greedy still takes the first largest, as torch.argmax.
  Logits masked(8, -INFINITY), plus_inf = kLogits;
  plus_inf[3] = INFINITY;
  for (const auto &[logits, sign, greedy] :
       {std::tuple{masked, "-inf", 0}, std::tuple{plus_inf, "+inf", 3}}) {
    std::uint64_t rng = 0;
    EXPECT_EQ(pick_token(logits.data(), 8, sampling(0, 0, 0), rng), greedy) << sign;
    try {
      std::int64_t token = pick_token(logits.data(), 8, sampling(1.0, 0, 0), rng);
      ADD_FAILURE() << sign << ": token " << token << " drawn from NaN weights";
    } catch (const Error &e) {
      EXPECT_NE(std::string(e.what()).find(std::string("is ") + sign), std::string::npos)
          << e.what();
    }
  }
}

TEST(Sampling, ATokenMaskedToMinusInfIsNeverDrawn) {
  // Banned tokens (logit -inf) weigh e^-inf = 0; the rest keep softmax(logits / T).
  Logits banned = kLogits;
  banned[0] = banned[6] = -INFINITY;
  constexpr std::int64_t kDraws = 20000;
  std::vector<double> f = frequencies(banned, sampling(1.0, 0, 3), kDraws);
  expect_distribution(f, expected_distribution(banned, 1.0, 0), kDraws, "banned 0 and 6");
  EXPECT_EQ(f[0], 0.0);
  EXPECT_EQ(f[6], 0.0);
}

// ---- the seed's stream ---------------------------------------------------------------------

/// splitmix64 (Steele, Lea and Flood, 2014), written out again here.
std::uint64_t splitmix64(std::uint64_t &state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// The token the draw `u` in [0, 1) selects by inverting the distribution's CDF, the tokens
/// taken from the largest logit down.
std::int64_t inverse_cdf(const std::vector<double> &p, const Logits &logits, double u) {
  std::vector<std::size_t> order = largest_first(logits);
  double c = 0;
  std::size_t last = order[0];
  for (std::size_t i : order)
    if (p[i] > 0) {
      last = i;
      if (u < (c += p[i]))
        return static_cast<std::int64_t>(i);
    }
  return static_cast<std::int64_t>(last);
}

TEST(Sampling, ASeedIsSplitmix64sStream) {
  // Draw i of seed s uses the top 53 bits of splitmix64's i-th output as u in [0, 1). Draws
  // that fall within 1e-12 of a boundary of the CDF are skipped: there the test's sums and
  // qkv's may round to either side.
  for (std::uint64_t seed : {0ull, 7ull, 0xdeadbeefull}) {
    SamplingOptions o = sampling(0.8, 6, seed);
    std::vector<double> p = expected_distribution(kLogits, 0.8, 6);
    std::uint64_t mine = seed, theirs = seed;
    int compared = 0;
    for (int i = 0; i < 2000; ++i) {
      double u = static_cast<double>(splitmix64(mine) >> 11) * 0x1p-53;
      std::int64_t got = pick_token(kLogits.data(), 8, o, theirs);
      if (inverse_cdf(p, kLogits, u - 1e-12) != inverse_cdf(p, kLogits, u + 1e-12))
        continue;
      EXPECT_EQ(got, inverse_cdf(p, kLogits, u)) << "seed " << seed << ", draw " << i;
      ++compared;
    }
    EXPECT_GT(compared, 1990);
    EXPECT_EQ(mine, theirs) << "one 64-bit output per draw";
  }
}

// ---- generate() -------------------------------------------------------------------------

// The tiny Llama of tests/models/data/tiny-llama (llama_test.cpp compares it with
// transformers) and the fixture's two prompts, decoded together.
LlamaModel tiny_llama() {
  LlamaOptions o;
  o.batch = 2;
  o.capacity = 32;
  return LlamaModel::load(std::string(QKV_MODEL_TEST_DATA) + "/tiny-llama", o);
}
const std::vector<std::vector<std::int64_t>> kPrompts = {{1, 17, 42, 99, 3, 64, 8, 120, 55, 7, 31},
                                                         {1, 90, 12, 77, 5}};

TEST(SamplingGenerate, EveryTokenIsTheSeedsNextDrawInOrder) {
  // Replaying pick_token on the logits generate() kept, with one stream seeded as the
  // options say and the sequences taken in order at each step, gives its tokens.
  LlamaModel model = tiny_llama();
  SamplingOptions o = sampling(0.9, 30, 11);
  o.max_new_tokens = 12;
  o.keep_logits = true;
  GenerationResult r = generate(model, kPrompts, o);
  std::uint64_t rng = o.seed;
  for (std::size_t step = 0; step < r.logits.size(); ++step)
    for (std::int64_t b = 0; b < 2; ++b) {
      const float *row = r.logits[step].data_as<float>() + b * 128;
      EXPECT_EQ(pick_token(row, 128, o, rng), r.tokens[static_cast<std::size_t>(b)][step])
          << "step " << step << ", sequence " << b;
    }
}

TEST(SamplingGenerate, ATinyTemperatureIsGreedy) {
  // The greedy paths' smallest top-2 gap is 0.0145 (tiny-llama/meta.json): at T = 1e-4 the
  // runner-up's weight is exp(-145), so sampling must pick the greedy token every time.
  LlamaModel model = tiny_llama();
  SamplingOptions greedy;
  greedy.max_new_tokens = 16;
  GenerationResult want = generate(model, kPrompts, greedy);
  for (std::uint64_t seed : {1ull, 2ull, 3ull}) {
    SamplingOptions cold = sampling(1e-4, 0, seed);
    cold.max_new_tokens = 16;
    EXPECT_EQ(generate(model, kPrompts, cold).tokens, want.tokens) << "seed " << seed;
  }
}

} // namespace
} // namespace qkv
