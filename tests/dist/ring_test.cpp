// Ring attention over the ranks of mpirun (ctest runs it with -np 2) against one process:
// the interpreter's attention over the whole sequence at small, odd and uneven lengths
// (causal and not, GQA, Dv != Dh), the compiled single-process kernel at L = 32768, and
// shapes that disagree across ranks, which every rank must report as an error.
#include <qkv/dist/ring.hpp>
#include <qkv/runtime/check_reference.hpp>
#include <qkv/runtime/interpreter.hpp>

#include <gtest/gtest.h>

#include <cstdio>
#include <numeric>

namespace qkv::test {
namespace {

dist::Comm *g_comm = nullptr;

struct Case {
  std::string name;
  std::int64_t L, H, Hkv, Dh, Dv;
  bool causal;
  bool skewed;         // rank r's share grows with r; else as even as the length allows
  bool zigzag = false; // RingOptions::zigzag: two chunks per rank (zigzag_rows)
};

/// Rows [first, last) of each of `ranges` of t (B, H, L, D), one after another.
Tensor rows_in(const Tensor &t, const std::vector<std::pair<std::int64_t, std::int64_t>> &ranges) {
  const Shape &s = t.shape();
  std::int64_t total = 0;
  for (auto [a, b] : ranges)
    total += b - a;
  Tensor out(t.dtype(), {s[0], s[1], total, s[3]});
  for (std::int64_t x = 0; x < s[0] * s[1]; ++x) {
    std::int64_t at = 0;
    for (auto [a, b] : ranges)
      for (std::int64_t i = a; i < b; ++i, ++at)
        for (std::int64_t d = 0; d < s[3]; ++d)
          out.set((x * total + at) * s[3] + d, t.get((x * s[2] + i) * s[3] + d));
  }
  return out;
}

/// Each rank's row count: even (the first L % n ranks one more), or skewed (weights 1, 2,
/// ..., n), never 0.
std::vector<std::int64_t> shares(const Case &c, int n) {
  std::vector<std::int64_t> rows(static_cast<std::size_t>(n), 1);
  std::int64_t left = c.L - n;
  std::int64_t weight = c.skewed ? n * (n + 1) / 2 : n;
  for (int r = 0; r < n; ++r) {
    std::int64_t w = c.skewed ? r + 1 : 1;
    rows[r] += left * w / weight;
  }
  rows[n - 1] += c.L - std::accumulate(rows.begin(), rows.end(), std::int64_t{0});
  return rows;
}

Graph whole_graph(const Case &c) {
  Graph g("whole");
  Dim B = g.dim("B"), L = g.dim("L"), H = g.dim("H", c.H),
      Hk = c.Hkv == c.H ? H : g.dim("Hkv", c.Hkv), Dh = g.dim("Dh", c.Dh),
      Dv = c.Dv == c.Dh ? Dh : g.dim("Dv", c.Dv);
  Value q = g.input("q", DType::F32, {B, H, L, Dh});
  Value k = g.input("k", DType::F32, {B, Hk, L, Dh});
  Value v = g.input("v", DType::F32, {B, Hk, L, Dv});
  Attention a = attention(q, k, v);
  if (c.causal)
    a.mask(causal_mask());
  g.output("o", a.value());
  return g;
}

/// Runs the ring on this rank's rows of random q, k, v (the same on every rank) and checks
/// them against `want` (the whole output, from one process).
/// This rank's rows of the sequence under the case's layout.
std::vector<std::pair<std::int64_t, std::int64_t>> my_rows(const Case &c, const dist::Comm &comm) {
  if (c.zigzag) {
    auto z = dist::zigzag_rows(c.L, comm.rank(), comm.size());
    return {z[0], z[1]};
  }
  std::vector<std::int64_t> rows = shares(c, comm.size());
  std::int64_t begin = std::accumulate(rows.begin(), rows.begin() + comm.rank(), std::int64_t{0});
  return {{begin, begin + rows[static_cast<std::size_t>(comm.rank())]}};
}

/// The blocks (query chunk x key chunk) a rank attends to: contiguous, causal: its own
/// shard and those before it; zigzag, causal: 3 on its own shard (two diagonals, its
/// second chunk over its first), 2 on each other's; not causal: every pair.
int expected_blocks(const Case &c, int rank, int ranks) {
  if (!c.zigzag)
    return c.causal ? rank + 1 : ranks;
  return c.causal ? 2 * ranks + 1 : 4 * ranks;
}

void check_ring(const Case &c, const TensorMap &whole, const Tensor &want) {
  dist::Comm &comm = *g_comm;
  auto mine = my_rows(c, comm);
  dist::RingOptions o;
  o.causal = c.causal;
  o.zigzag = c.zigzag;
  dist::RingStats st;
  Tensor got =
      dist::ring_attention(comm, rows_in(whole.at("q"), mine), rows_in(whole.at("k"), mine),
                           rows_in(whole.at("v"), mine), o, &st);
  Tolerance tol = tolerance_rule(DType::F32, 1 + c.Dh + c.L, 1);
  Comparison cmp = compare(got, rows_in(want, mine), tol.atol, tol.rtol);
  std::int64_t n = got.shape()[2];
  EXPECT_TRUE(cmp.ok) << "rank " << comm.rank() << " rows from " << mine[0].first << ": "
                      << cmp.message;
  EXPECT_EQ(st.steps, comm.size());
  if (!c.zigzag || mine[1].second > mine[1].first) // both chunks hold rows
    EXPECT_EQ(st.computed, expected_blocks(c, comm.rank(), comm.size()));
  if (c.L >= 4096)
    std::printf("[rank %d] %s: rows %lld, compute %.3f s, merge %.3f s, wait %.3f s, sent %.1f MB, "
                "total %.3f s\n",
                comm.rank(), c.name.c_str(), static_cast<long long>(n), st.compute_s, st.merge_s,
                st.wait_s, st.bytes_sent / 1e6, st.total_s);
}

TensorMap random_whole(const Case &c) {
  return {{"q", Tensor::random(DType::F32, {1, c.H, c.L, c.Dh}, 11)},
          {"k", Tensor::random(DType::F32, {1, c.Hkv, c.L, c.Dh}, 12)},
          {"v", Tensor::random(DType::F32, {1, c.Hkv, c.L, c.Dv}, 13)}};
}

class Ring : public ::testing::TestWithParam<Case> {};

TEST_P(Ring, MatchesTheInterpreterOverTheWholeSequence) {
  const Case &c = GetParam();
  if (c.L < g_comm->size())
    GTEST_SKIP() << "fewer rows than ranks";
  TensorMap whole = random_whole(c);
  Tensor want = reference::run(whole_graph(c), whole).at("o");
  check_ring(c, whole, want);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, Ring,
    ::testing::Values(Case{"two_rows", 2, 1, 1, 8, 8, false, false},
                      Case{"odd_7", 7, 2, 2, 8, 8, false, false},
                      Case{"odd_7_causal", 7, 2, 2, 8, 8, true, false},
                      Case{"gqa_33_causal_skewed", 33, 4, 2, 16, 8, true, true},
                      Case{"gqa_33_skewed", 33, 4, 1, 16, 24, false, true},
                      Case{"even_128_causal", 128, 2, 2, 32, 32, true, false},
                      Case{"odd_257", 257, 2, 1, 16, 16, false, false},
                      Case{"zigzag_9_causal", 9, 2, 2, 8, 8, true, false, true},
                      Case{"zigzag_gqa_67_causal", 67, 4, 2, 16, 8, true, false, true},
                      Case{"zigzag_64", 64, 2, 1, 16, 16, false, false, true}),
    [](const auto &i) { return i.param.name; });

/// One process's compiled kernel over the whole sequence is the reference at a length the
/// interpreter would take hours over.
TEST(RingLarge, L32768MatchesOneProcess) {
  Case c{"causal_32768", 32768, 2, 1, 64, 64, true, false};
  TensorMap whole = random_whole(c);
  Tensor want = compile(whole_graph(c)).run(whole).at("o");
  check_ring(c, whole, want);
  c.name = "causal_32768_zigzag";
  c.zigzag = true;
  check_ring(c, whole, want);
}

/// Dims that disagree across ranks, and a rank given tensors it cannot use: every rank
/// throws, naming the ranks and dims; none waits for the others.
TEST(RingErrors, EveryRankReportsShapesThatDisagree) {
  dist::Comm &comm = *g_comm;
  std::int64_t dh = comm.rank() == comm.size() - 1 && comm.size() > 1 ? 16 : 8;
  Tensor q = Tensor::random(DType::F32, {1, 2, 3, dh}, 1);
  try {
    dist::ring_attention(comm, q, q, q);
    ADD_FAILURE() << "rank " << comm.rank() << ": no error";
  } catch (const Error &e) {
    if (comm.size() > 1)
      EXPECT_NE(std::string(e.what()).find("holds B=1 H=2 Hkv=2 Dh=16"), std::string::npos)
          << e.what();
    else
      ADD_FAILURE() << e.what();
  }
  Tensor bad = comm.rank() == 0 ? Tensor::random(DType::F32, {2, 3}, 1) : q;
  Tensor good = Tensor::random(DType::F32, {1, 2, 3, 8}, 1);
  try {
    dist::ring_attention(comm, comm.rank() == 0 ? bad : good, good, good);
    ADD_FAILURE() << "rank " << comm.rank() << ": no error";
  } catch (const Error &e) {
    const char *want = comm.rank() == 0 ? "q must be f32 (B, heads, rows, dim)"
                                        : "rank 0 was called with tensors it cannot use";
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
}

} // namespace
} // namespace qkv::test

int main(int argc, char **argv) {
  qkv::dist::Comm comm(&argc, &argv);
  qkv::test::g_comm = &comm;
  ::testing::InitGoogleTest(&argc, argv);
  int failed = RUN_ALL_TESTS();
  // The job fails when any rank's tests failed.
  std::vector<std::int64_t> all = comm.all_gather({failed}, "the test results");
  for (std::int64_t f : all)
    failed |= static_cast<int>(f);
  return failed;
}
