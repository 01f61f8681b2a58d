// The blocked, packed GEMM (qkv-lower-matmul-to-microkernels) against the interpreter:
// every edge of its blocks at odd sizes, K = 0, operands that are views, a B for each
// batch, fused starts and epilogues, thread counts; and the packed weights the runtime
// keeps (docs/compiler.md, "The GEMM").
#include <gtest/gtest.h>

#include <qkv/compiler/compile.hpp>
#include <qkv/runtime/interpreter.hpp>

#include "differential.hpp"

namespace qkv::test {
namespace {

/// Small blocks, so that small sizes cross every block edge: K blocks of 16, row blocks of
/// 12 (two register tiles on AVX2 and AVX-512).
CompileOptions small_blocks(int threads = 0) {
  CompileOptions o;
  o.schedule.gemm_k_block = 16;
  o.schedule.gemm_m_block = 12;
  o.schedule.threads = threads;
  o.cache = CacheOptions::off();
  return o;
}

/// y = x . w with x (M, K) an input (M bound at run time), w (K, N) a param.
Graph linear_graph(std::int64_t k, std::int64_t n) {
  Graph g("gemm_" + std::to_string(k) + "x" + std::to_string(n));
  Value x = g.input("x", DType::F32, {Dim("M"), Dim("K", k)});
  g.output("out", linear(x, g.param("w", DType::F32, {Dim("K", k), Dim("N", n)})));
  return g;
}

DiffCase linear_case(std::int64_t k, std::int64_t n, std::vector<std::int64_t> ms) {
  DiffCase c;
  c.name = "linear";
  c.build = [k, n] { return linear_graph(k, n); };
  for (std::int64_t m : ms)
    c.shapes.push_back({{"M", m}});
  c.sums({"K"});
  return c;
}

class GemmSizes : public ::testing::TestWithParam<std::pair<std::int64_t, std::int64_t>> {};

// 1, 7, 33, 257 and 1000 in each of M, K, N (and M = 2, 6), under small blocks and the
// host's own. M =
// 1000 only where K * N is small: the interpreter computes in double, one product at a time.
TEST_P(GemmSizes, MatchInterpreter) {
  auto [k, n] = GetParam();
  // 2 and 6 rows take the skinny form (at most mr rows: 6 on AVX2 and AVX-512).
  std::vector<std::int64_t> ms = {1, 2, 6, 7, 33, 257};
  if (k * n <= 257 * 257)
    ms.push_back(1000);
  DiffCase c = linear_case(k, n, ms);
  SCOPED_TRACE("K=" + std::to_string(k) + " N=" + std::to_string(n));
  check_kernel(compile(c.build(), Target::host(), small_blocks()), c);
  CompileOptions host;
  host.cache = CacheOptions::off();
  check_kernel(compile(c.build(), Target::host(), host), c);
}

std::vector<std::pair<std::int64_t, std::int64_t>> sizes() {
  std::vector<std::int64_t> s = {1, 7, 33, 257, 1000};
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  for (std::int64_t k : s)
    for (std::int64_t n : s)
      if (k * n <= 257 * 1000)
        out.push_back({k, n});
  return out;
}

INSTANTIATE_TEST_SUITE_P(KN, GemmSizes, ::testing::ValuesIn(sizes()), [](const auto &info) {
  return "K" + std::to_string(info.param.first) + "_N" + std::to_string(info.param.second);
});

TEST(Gemm, ZeroKWritesTheStart) {
  // K bound at run time to 0: the product is empty, the output is the bias (or 0).
  Graph g("k0");
  Dim k("K");
  Value x = g.input("x", DType::F32, {Dim("M"), k});
  Value w = g.param("w", DType::F32, {k, Dim("N", 19)});
  g.output("out", linear(x, w, g.param("b", DType::F32, {Dim("N", 19)})));
  g.output("plain", linear(x, w));
  Kernel kern = compile(g, Target::host(), small_blocks());
  // 3 rows take the skinny form, 40 the blocked one.
  for (std::int64_t m : {3, 40}) {
    TensorMap in = random_inputs(g, {{"M", m}, {"K", 0}}, 3);
    TensorMap out = kern.run(in);
    for (std::int64_t i = 0; i < m * 19; ++i) {
      EXPECT_EQ(out.at("out").get(i), in.at("b").get(i % 19)) << "M=" << m << " at " << i;
      EXPECT_EQ(out.at("plain").get(i), 0.0) << "M=" << m << " at " << i;
    }
  }
}

TEST(Gemm, ViewsAndBatchedOperands) {
  // A transposed operand, B a head view, a B for each batch (attention written as plain
  // matmuls), a 2-D weight over batched rows, and a weight that is an input (packed per
  // call) of odd sizes.
  std::vector<DiffCase> cases;
  cases.push_back(one_output("transposed_a", [](Graph &g) {
                    Value a = g.input("a", DType::F32, {Dim("K", 37), Dim("M")});
                    return matmul(transpose(a), g.param("b", DType::F32, {Dim("K", 37), Dim("N", 21)}));
                  }, {{{"M", 1}}, {{"M", 45}}}).sums({"K"}));
  cases.push_back(one_output("batched_b", [](Graph &g) {
                    Dim b("B"), m("M"), k("K", 29), n("N", 35);
                    return matmul(g.input("a", DType::F32, {b, m, k}), g.input("c", DType::F32, {b, k, n}));
                  }, {{{"B", 1}, {"M", 1}}, {{"B", 3}, {"M", 40}}}).sums({"K"}));
  cases.push_back(one_output("shared_weight", [](Graph &g) {
                    Dim b("B"), l("L"), k("K", 23), n("N", 50);
                    return linear(g.input("x", DType::F32, {b, l, k}), g.param("w", DType::F32, {k, n}));
                  }, {{{"B", 1}, {"L", 1}}, {{"B", 5}, {"L", 13}}}).sums({"K"}));
  cases.push_back(one_output("weight_input", [](Graph &g) {
                    Dim m("M"), k("K", 300), n("N", 17);
                    return matmul(g.input("a", DType::F32, {m, k}), g.input("w", DType::F32, {k, n}));
                  }, {{{"M", 2}}, {{"M", 31}}}).sums({"K"}));
  for (const DiffCase &c : cases) {
    SCOPED_TRACE(c.name);
    check_kernel(compile(c.build(), Target::host(), small_blocks()), c);
  }
}

TEST(Gemm, FusedStartsAndEpilogues) {
  // The bias as the tiles' start; GELU, SiLU, a residual add and a scale applied by the
  // GEMM's tasks to their blocks (docs/compiler.md: the loops stage shows them fused).
  Dim b("B"), l("L"), k("K", 40), n("N", 45);
  auto block = [&](Graph &g, const char *what) {
    Value x = g.input("x", DType::F32, {b, l, k});
    Value y = linear(x, g.param("w", DType::F32, {k, n}), g.param("bias", DType::F32, {n}));
    std::string w = what;
    if (w == "gelu")
      return gelu(y);
    if (w == "gelu_tanh")
      return gelu(y, true);
    if (w == "silu")
      return silu(y);
    if (w == "residual")
      return residual(g.input("r", DType::F32, {b, l, n}), y);
    return scale(y, 0.25);
  };
  for (const char *what : {"gelu", "gelu_tanh", "silu", "residual", "scale"}) {
    DiffCase c = one_output(std::string("linear_") + what, [&, what](Graph &g) { return block(g, what); },
                            {{{"B", 1}, {"L", 1}}, {{"B", 2}, {"L", 17}}, {{"B", 7}, {"L", 30}}});
    c.sums({"K"}, 2);
    SCOPED_TRACE(c.name);
    Kernel kern = compile(c.build(), Target::host(), small_blocks());
    EXPECT_EQ(kern.ir("loops").find("linalg.generic"), std::string::npos)
        << "the epilogue was not fused:\n"
        << kern.ir("loops");
    check_kernel(kern, c);
  }
}

TEST(Gemm, SiblingsShareOneParallelLoop) {
  // Projections of one input run as one GEMM (one parallel loop, each task over its rows
  // of every weight): Q, K and V of different widths, with and without a bias, and
  // SwiGLU's gate and up, whose product is the up projection's epilogue (it reads the
  // gate's block that the same task wrote). Odd widths, rows on both sides of the
  // skinny form, small and host blocks.
  DiffCase c;
  c.name = "siblings";
  c.build = [] {
    Graph g("siblings");
    Dim b("B"), l("L"), k("K", 37);
    Value x = g.input("x", DType::F32, {b, l, k});
    Dim nq("Nq", 45), nk("Nk", 19), nv("Nv", 50), f("F", 50);
    auto w = [&](const char *name, Dim n) { return g.param(name, DType::F32, {k, n}); };
    auto bias = [&](const char *name, Dim n) { return g.param(name, DType::F32, {n}); };
    g.output("q", linear(x, w("wq", nq), bias("bq", nq)));
    g.output("k", linear(x, w("wk", nk)));
    g.output("v", linear(x, w("wv", nv), bias("bv", nv)));
    Value h = g.input("h", DType::F32, {b, l, k});
    g.output("mlp", swiglu(linear(h, w("wg", f)), linear(h, w("wu", f))));
    return g;
  };
  for (auto [bs, ls] : {std::pair{1, 1}, {1, 2}, {1, 7}, {3, 11}, {2, 33}})
    c.shapes.push_back({{"B", bs}, {"L", ls}});
  c.sums({"K"}, 2);
  for (const CompileOptions &o : {small_blocks(), small_blocks(3)}) {
    Kernel kern = compile(c.build(), Target::host(), o);
    std::string loops = kern.ir("loops");
    std::size_t parallel = 0;
    for (std::size_t at = loops.find("scf.parallel"); at != std::string::npos;
         at = loops.find("scf.parallel", at + 1))
      ++parallel;
    EXPECT_EQ(parallel, 2u) << "Q, K, V and gate, up: one parallel loop each\n" << loops;
    EXPECT_EQ(loops.find("linalg.generic"), std::string::npos)
        << "SwiGLU was not the up projection's epilogue:\n"
        << loops;
    check_kernel(kern, c);
  }
}

TEST(Gemm, SameBitsOnAnyThreadCount) {
  // A task's share of C depends on the thread count; the sum each element gets does not
  // (its K blocks in order), so every count gives the same bits. At most 4: LLVM 22's
  // libomp leaks its per-thread structures when a team of 2 or more threads (the other
  // tests' default here) grows past 4 (docs/reliability.md), which LeakSanitizer reports.
  Graph g = linear_graph(100, 70);
  TensorMap in = random_inputs(g, {{"M", 77}}, 5);
  Tensor first;
  for (int threads : {4, 3, 2, 1}) {
    Tensor y = compile(g, Target::host(), small_blocks(threads)).run(in).at("out");
    if (first.empty())
      first = y;
    EXPECT_TRUE(same_bits(first, y)) << threads << " threads";
  }
}

TEST(GemmPackedWeights, PackedOncePerWeightAndAgainAfterAWrite) {
  Graph g = linear_graph(33, 20);
  Kernel k = compile(g, Target::host(), small_blocks());
  ASSERT_EQ(k.packed_params().size(), 1u);
  EXPECT_EQ(k.packed_params()[0].argument, 1); // after x
  TensorMap in = random_inputs(g, {{"M", 9}}, 7);
  auto expect_matches = [&](const char *when) {
    SCOPED_TRACE(when);
    assert_close(k.run(in).at("out"), reference::run(g, in).at("out"), 1e-5, 1e-4);
  };
  expect_matches("first run");
  k.run(in);
  EXPECT_EQ(k.weight_packs(), 1) << "the weight was packed again without a change";
  std::int64_t nr = k.packed_params()[0].panel_columns;
  EXPECT_EQ(k.packed_bytes(), (20 + nr - 1) / nr * nr * 33 * 4) << "panels of " << nr;

  // A write through the tensor (or any copy of it) is seen: the weight is packed again.
  Tensor alias = in.at("w");
  alias.data_as<float>()[5] += 1.0f;
  expect_matches("after a write through a copy");
  EXPECT_EQ(k.weight_packs(), 2);
  in.at("w").set(0, -3.0);
  expect_matches("after set()");
  EXPECT_EQ(k.weight_packs(), 3);

  // Another tensor is another weight; both stay packed while they live.
  TensorMap other = in;
  other["w"] = Tensor::random(DType::F32, {33, 20}, 99);
  assert_close(k.run(other).at("out"), reference::run(g, other).at("out"), 1e-5, 1e-4);
  k.run(in);
  k.run(other);
  EXPECT_EQ(k.weight_packs(), 4);

  // A copy of the kernel shares its packed weights.
  Kernel copy = k;
  copy.run(in);
  EXPECT_EQ(copy.weight_packs(), 4);

  // A weight that is gone takes its packed copy with it.
  std::int64_t before = k.packed_bytes();
  other.clear();
  k.run(in);
  EXPECT_LT(k.packed_bytes(), before);
}

TEST(GemmPackedWeights, SharedBetweenKernelsAndPreparedAhead) {
  Graph g = linear_graph(40, 30);
  TensorMap in = random_inputs(g, {{"M", 3}}, 11);
  Kernel a = compile(g, Target::host(), small_blocks());
  Kernel b = compile(g, Target::host(), small_blocks(1)); // another kernel, same panels
  // prepare() packs without running; a run after it packs nothing.
  a.prepare({{"w", in.at("w")}});
  EXPECT_EQ(a.weight_packs(), 1);
  a.run(in);
  EXPECT_EQ(a.weight_packs(), 1);
  // The other kernel finds the copy made.
  b.run(in);
  EXPECT_EQ(b.weight_packs(), 0);
  // After a write, the first kernel to run packs again, the other takes its copy.
  in.at("w").set(3, 2.0);
  assert_close(b.run(in).at("out"), reference::run(g, in).at("out"), 1e-5, 1e-4);
  assert_close(a.run(in).at("out"), reference::run(g, in).at("out"), 1e-5, 1e-4);
  EXPECT_EQ(b.weight_packs(), 1);
  EXPECT_EQ(a.weight_packs(), 1);
  // Names it does not know or read packed are ignored; a wrong weight is an error.
  a.prepare({{"x", in.at("x")}, {"nothing", in.at("x")}});
  try {
    a.prepare({{"w", Tensor::random(DType::F32, {30, 40}, 1)}});
    ADD_FAILURE() << "a transposed weight was packed";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("param 'w' is f32[30, 40]"), std::string::npos) << e.what();
  }
}

TEST(GemmPackedWeights, PackLayout) {
  // Panels of nr columns, each row of a panel after the other, zeros past N.
  Tensor w = Tensor::from_f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor p = pack_gemm_weight(w, 2);
  EXPECT_EQ(p.shape(), Shape({2 * 2 * 2}));
  std::vector<double> want = {1, 2, 4, 5, 3, 0, 6, 0};
  EXPECT_EQ(p.values(), want);
  EXPECT_THROW(pack_gemm_weight(Tensor::from_i32({2}, {1, 2}), 2), Error);
}

TEST(GemmPackedWeights, PairLayout) {
  // The avx512bf16 tier's panels: rows 2i and 2i + 1 interleaved column by column, a zero
  // row past an odd K, zero columns past N, rounded to bf16 (to nearest even).
  Tensor w = Tensor::from_f32({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 1.00390625f});
  Tensor p = pack_gemm_weight(w, 2, DType::BF16, 2);
  EXPECT_EQ(p.dtype(), DType::BF16);
  EXPECT_EQ(p.shape(), Shape({2 * 4 * 2}));
  // panel 0: (1,4) (2,5) | (7,0) (8,0); panel 1: (3,6) (0,0) | (1.0039 -> 1,0) (0,0)
  std::vector<double> want = {1, 4, 2, 5, 7, 0, 8, 0, 3, 6, 0, 0, 1, 0, 0, 0};
  EXPECT_EQ(p.values(), want);
  // From bf16 the bits are copied; f32 panels of pairs, or pairs of f64, are refused.
  EXPECT_EQ(pack_gemm_weight(w.to(DType::BF16), 2, DType::BF16, 2).values(), want);
  EXPECT_THROW(pack_gemm_weight(w, 2, DType::F32, 2), Error);
  EXPECT_THROW(pack_gemm_weight(w.to(DType::F64), 2, DType::BF16, 2), Error);
  // Widening packs: bf16 into f32 panels of single rows.
  EXPECT_EQ(pack_gemm_weight(w.to(DType::BF16), 2, DType::F32, 1).values(),
            (std::vector<double>{1, 2, 4, 5, 7, 8, 3, 0, 6, 0, 1, 0}));
}

TEST(GemmPackedWeights, RowMultipleForAmxTiles) {
  // The amx tier's panels: the same pairs, K rounded up to a multiple of 32 (whole tiles)
  // with zero rows; a multiple that is not one of the panel rows is refused.
  Tensor w = Tensor::from_f32({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor p = pack_gemm_weight(w, 2, DType::BF16, 2, 32);
  EXPECT_EQ(p.shape(), Shape({2 * 32 * 2}));
  std::vector<double> want(2 * 32 * 2, 0.0);
  // panel 0 at 0: (1,4) (2,5) | (7,0) (8,0); panel 1 at 64: (3,6) (0,0) | (9,0) (0,0).
  for (auto [at, v] : {std::pair{0, 1}, {1, 4}, {2, 2}, {3, 5}, {4, 7}, {6, 8}, {64, 3},
                       {65, 6}, {68, 9}})
    want[static_cast<std::size_t>(at)] = v;
  EXPECT_EQ(p.values(), want);
  EXPECT_EQ(pack_gemm_weight(w, 2, DType::BF16, 2, 2).values(),
            pack_gemm_weight(w, 2, DType::BF16, 2).values());
  EXPECT_THROW(pack_gemm_weight(w, 2, DType::BF16, 2, 3), Error);
  EXPECT_THROW(pack_gemm_weight(w, 2, DType::BF16, 2, -32), Error);
}

} // namespace
} // namespace qkv::test
