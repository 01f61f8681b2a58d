// bf16 products on one ISA tier (QKV_TEST_ISA; tests/compiler/isa_tier.hpp) against the
// interpreter: the blocked GEMM at odd sizes and every block edge, K = 0, weights packed
// per call and by the runtime, fused starts and epilogues, mixed and f16 operands, and
// f32 graphs under MatmulPrecision::Medium; bf16 attention's tiled kernel at every tile
// edge, odd and dynamic head dims, masks, score mods, GQA and a KV cache read in place
// (docs/compiler.md, "ISA tiers").
#include <gtest/gtest.h>

#include <qkv/compiler/compile.hpp>
#include <qkv/runtime/interpreter.hpp>

#include "differential.hpp"
#include "qkv_test/isa_tier.hpp"

namespace qkv::test {
namespace {

/// Blocks of 16 rows of B and 12 rows of C: small sizes cross every block edge.
CompileOptions small_blocks(int threads = 0) {
  CompileOptions o = on_tier(threads);
  o.schedule.gemm_k_block = 16;
  o.schedule.gemm_m_block = 12;
  return o;
}

/// Whether bf16 products run on bf16 pairs (vdpbf16ps; the GEMM's blocks on AMX tiles
/// on the amx tier).
bool dot_tier() { return tier_under_test() != Isa::F32; }
bool amx_tier() { return tier_under_test() == Isa::Amx; }

/// y = x . w with x (M, K) and w (K, N) of `dt` (M bound at run time; w a param).
Graph linear_graph(DType dt, std::int64_t k, std::int64_t n) {
  Graph g("gemm_" + std::string(dtype_name(dt)) + "_" + std::to_string(k) + "x" + std::to_string(n));
  Value x = g.input("x", dt, {Dim("M"), Dim("K", k)});
  g.output("out", linear(x, g.param("w", dt, {Dim("K", k), Dim("N", n)})));
  return g;
}

class Bf16GemmSizes : public ::testing::TestWithParam<std::pair<std::int64_t, std::int64_t>> {};

// 1, 7, 33 and 257 in each of K and N, M = 1, 2, 6 (the skinny form), 7, 33, 257; bf16
// output within two bf16 ulps of the interpreter's (products of bf16 values are exact in
// f32, the sums are f32's, and each result is rounded once).
TEST_P(Bf16GemmSizes, MatchInterpreter) {
  auto [k, n] = GetParam();
  DiffCase c;
  c.name = "linear_bf16";
  c.build = [k, n] { return linear_graph(DType::BF16, k, n); };
  for (std::int64_t m : {1, 2, 6, 7, 33, 257})
    c.shapes.push_back({{"M", m}});
  c.sums({"K"}).within_half_ulps(2);
  SCOPED_TRACE("K=" + std::to_string(k) + " N=" + std::to_string(n));
  Kernel small = compile(c.build(), Target::host(), small_blocks());
  EXPECT_EQ(small.stats().isa, isa_name(tier_under_test()));
  check_kernel(small, c);
  check_kernel(compile(c.build(), Target::host(), on_tier()), c);
}

std::vector<std::pair<std::int64_t, std::int64_t>> sizes() {
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  for (std::int64_t k : {1, 7, 33, 257})
    for (std::int64_t n : {1, 7, 33, 257})
      out.push_back({k, n});
  out.push_back({1000, 65});
  return out;
}

INSTANTIATE_TEST_SUITE_P(KN, Bf16GemmSizes, ::testing::ValuesIn(sizes()), [](const auto &info) {
  return "K" + std::to_string(info.param.first) + "_N" + std::to_string(info.param.second);
});

TEST(Bf16Gemm, TheTiersInstructionsAreInTheKernel) {
  Kernel k = compile(linear_graph(DType::BF16, 64, 64), Target::host(), on_tier());
  std::string loops = k.ir("loops");
  ASSERT_EQ(k.packed_params().size(), 1u);
  const PackedParam &p = k.packed_params()[0];
  if (amx_tier()) {
    // Blocks on AMX tiles; a few rows (M bound at run time) on vdpbf16ps.
    EXPECT_NE(loops.find("amx.tile_mulf"), std::string::npos) << loops;
    EXPECT_NE(loops.find("@qkv_gemm_block_bf16_amx_32x64_"), std::string::npos);
    EXPECT_NE(loops.find("@qkv_gemm_skinny_bf16_amx_6x64"), std::string::npos);
    std::string as = k.ir("asm");
    EXPECT_NE(as.find("tdpbf16ps"), std::string::npos);
    EXPECT_NE(as.find("tileloadd"), std::string::npos);
    EXPECT_NE(as.find("vdpbf16ps"), std::string::npos);
    EXPECT_EQ(p.dtype, DType::BF16);
    EXPECT_EQ(p.panel_rows, 2);
    EXPECT_EQ(p.row_multiple, 32);
  } else if (dot_tier()) {
    EXPECT_NE(loops.find("x86vector.avx512.dot"), std::string::npos) << loops;
    EXPECT_EQ(loops.find("amx."), std::string::npos);
    EXPECT_NE(loops.find("@qkv_gemm_block_bf16_dot_"), std::string::npos);
    EXPECT_NE(k.ir("asm").find("vdpbf16ps"), std::string::npos);
    EXPECT_EQ(p.dtype, DType::BF16);
    EXPECT_EQ(p.panel_rows, 2);
    EXPECT_EQ(p.row_multiple, 2);
  } else {
    EXPECT_EQ(loops.find("x86vector"), std::string::npos) << loops;
    EXPECT_NE(loops.find("@qkv_gemm_block_bf16_f32_"), std::string::npos);
    EXPECT_EQ(p.dtype, DType::F32);
    EXPECT_EQ(p.panel_rows, 1);
    // The rounding to bf16 is integer vector code (qkv-expand-bf16-conversions), not a
    // call per element.
    std::string as = k.ir("asm");
    EXPECT_EQ(as.find("__truncsfbf2"), std::string::npos) << as;
  }
}

TEST(Bf16Gemm, NarrowVectorsMatchInterpreter) {
  // Schedule::vector_bits below 512: on amx the GEMMs keep the vdpbf16ps form at that
  // width (AMX tile rows are 16 f32), on every tier the result is the interpreter's.
  for (int bits : {128, 256}) {
    DiffCase c;
    c.name = "linear_bf16_" + std::to_string(bits);
    c.build = [] { return linear_graph(DType::BF16, 33, 17); };
    c.shapes = {{{"M", 1}}, {{"M", 40}}};
    c.sums({"K"}).within_half_ulps(2);
    CompileOptions o = small_blocks();
    o.schedule.vector_bits = bits;
    Kernel k = compile(c.build(), Target::host(), o);
    EXPECT_EQ(k.ir("loops").find("amx."), std::string::npos) << bits;
    check_kernel(k, c);
  }
}

TEST(Bf16Gemm, ZeroKWritesTheStart) {
  Graph g("k0_bf16");
  Dim k("K");
  Value x = g.input("x", DType::BF16, {Dim("M"), k});
  Value w = g.param("w", DType::BF16, {k, Dim("N", 19)});
  g.output("out", linear(x, w, g.param("b", DType::BF16, {Dim("N", 19)})));
  g.output("plain", linear(x, w));
  Kernel kern = compile(g, Target::host(), small_blocks());
  for (std::int64_t m : {3, 40}) {
    TensorMap in = random_inputs(g, {{"M", m}, {"K", 0}}, 3);
    TensorMap out = kern.run(in);
    for (std::int64_t i = 0; i < m * 19; ++i) {
      EXPECT_EQ(out.at("out").get(i), in.at("b").get(i % 19)) << "M=" << m << " at " << i;
      EXPECT_EQ(out.at("plain").get(i), 0.0) << "M=" << m << " at " << i;
    }
  }
}

TEST(Bf16Gemm, OperandsPackedPerCallAndMixedTypes) {
  // B an input (packed by the kernel on every call, odd K: the pair past it is zero), a B
  // per batch, a 2-D weight over batched rows, a transposed A, and operands of two
  // dtypes or f16 (on every tier: f32 FMAs, each operand widened exactly).
  std::vector<DiffCase> cases;
  cases.push_back(one_output("weight_input", [](Graph &g) {
                    Dim m("M"), k("K", 301), n("N", 17);
                    return matmul(g.input("a", DType::BF16, {m, k}), g.input("w", DType::BF16, {k, n}));
                  }, {{{"M", 2}}, {{"M", 31}}}).sums({"K"}).within_half_ulps(2));
  cases.push_back(one_output("batched_b", [](Graph &g) {
                    Dim b("B"), m("M"), k("K", 29), n("N", 35);
                    return matmul(g.input("a", DType::BF16, {b, m, k}), g.input("c", DType::BF16, {b, k, n}));
                  }, {{{"B", 1}, {"M", 1}}, {{"B", 3}, {"M", 40}}}).sums({"K"}).within_half_ulps(2));
  cases.push_back(one_output("shared_weight", [](Graph &g) {
                    Dim b("B"), l("L"), k("K", 23), n("N", 50);
                    return linear(g.input("x", DType::BF16, {b, l, k}), g.param("w", DType::BF16, {k, n}));
                  }, {{{"B", 1}, {"L", 1}}, {{"B", 5}, {"L", 13}}}).sums({"K"}).within_half_ulps(2));
  cases.push_back(one_output("transposed_a", [](Graph &g) {
                    Value a = g.input("a", DType::BF16, {Dim("K", 37), Dim("M")});
                    return matmul(transpose(a), g.param("b", DType::BF16, {Dim("K", 37), Dim("N", 21)}));
                  }, {{{"M", 1}}, {{"M", 45}}}).sums({"K"}).within_half_ulps(2));
  cases.push_back(one_output("f16", [](Graph &g) {
                    Dim m("M"), k("K", 45), n("N", 33);
                    return linear(g.input("x", DType::F16, {m, k}), g.param("w", DType::F16, {k, n}));
                  }, {{{"M", 3}}, {{"M", 50}}}).sums({"K"}).within_half_ulps(2));
  for (const DiffCase &c : cases) {
    SCOPED_TRACE(c.name);
    check_kernel(compile(c.build(), Target::host(), small_blocks()), c);
  }
}

TEST(Bf16Gemm, FusedStartsAndEpilogues) {
  // The bias as the tiles' start (read as bf16); GELU, SiLU and a residual add after the
  // rounded result.
  Dim b("B"), l("L"), k("K", 40), n("N", 45);
  for (const char *what : {"gelu", "silu", "residual"}) {
    DiffCase c = one_output(
        std::string("linear_bf16_") + what,
        [&, what](Graph &g) {
          Value x = g.input("x", DType::BF16, {b, l, k});
          Value y = linear(x, g.param("w", DType::BF16, {k, n}), g.param("bias", DType::BF16, {n}));
          std::string w = what;
          if (w == "gelu")
            return gelu(y);
          if (w == "silu")
            return silu(y);
          return residual(g.input("r", DType::BF16, {b, l, n}), y);
        },
        {{{"B", 1}, {"L", 1}}, {{"B", 2}, {"L", 17}}, {{"B", 7}, {"L", 30}}});
    // Two rounded nodes: the product's rounding moves the activation's input by an ulp.
    c.sums({"K"}, 2).within_half_ulps(4);
    SCOPED_TRACE(c.name);
    Kernel kernel = compile(c.build(), Target::host(), small_blocks());
    // The bf16 bias read and widened by the GEMM functions (on AMX into an f32 row that
    // the tiles load with a stride of 0), no pass before.
    EXPECT_NE(kernel.ir("loops").find("_bias_bf16("), std::string::npos);
    check_kernel(kernel, c);
  }
}

TEST(Bf16Gemm, RoundedSiblingsRunAsOneGemm) {
  // Q, K and V of one input, each with a bf16 bias and rounded to bf16: each rounding
  // sits between its product and the next, and becomes that member's epilogue, so the
  // three run as one GEMM (one parallel loop) whose tasks round each member's block; V
  // is narrower than Q and K (its own share of panels).
  Dim m("M"), k("K", 40), n("N", 45), nv("NV", 21);
  DiffCase c;
  c.name = "qkv_bf16";
  c.build = [=] {
    Graph g("qkv_bf16");
    Value x = g.input("x", DType::BF16, {m, k});
    for (auto [name, d] : {std::pair{"q", n}, std::pair{"k", n}, std::pair{"v", nv}})
      g.output(name, linear(x, g.param(std::string("w") + name, DType::BF16, {k, d}),
                            g.param(std::string("b") + name, DType::BF16, {d})));
    return g;
  };
  for (std::int64_t rows : {1, 7, 33, 100})
    c.shapes.push_back({{"M", rows}});
  c.sums({"K"}).within_half_ulps(2);
  Kernel kernel = compile(c.build(), Target::host(), small_blocks());
  std::string loops = kernel.ir("loops");
  std::size_t parallel = 0;
  for (std::size_t at = loops.find("scf.parallel"); at != std::string::npos;
       at = loops.find("scf.parallel", at + 1))
    ++parallel;
  EXPECT_EQ(parallel, 1u) << loops;
  EXPECT_EQ(loops.find("linalg.generic"), std::string::npos);
  check_kernel(kernel, c);
}

TEST(Bf16Gemm, AmxRoundsEachTileAsItWritesIt) {
  // With one block of K (K <= kc), a bf16 product rounded to bf16 is rounded by the AMX
  // GEMM itself, tile by tile from L1 (`_c_bf16`): alone, into the output; before GELU,
  // into a bf16 buffer the epilogue reads. No f32 C. Other tiers keep their f32 C.
  Dim b("B"), l("L"), k("K", 40), n("N", 45);
  for (const char *what : {"rounded", "gelu"}) {
    DiffCase c = one_output(
        std::string("linear_bf16_") + what,
        [&, what](Graph &g) {
          Value x = g.input("x", DType::BF16, {b, l, k});
          Value y = linear(x, g.param("w", DType::BF16, {k, n}), g.param("bias", DType::BF16, {n}));
          return std::string(what) == "gelu" ? gelu(y) : y;
        },
        {{{"B", 1}, {"L", 1}}, {{"B", 1}, {"L", 5}}, {{"B", 2}, {"L", 17}}, {{"B", 7}, {"L", 30}}});
    c.sums({"K"}, 2).within_half_ulps(4);
    SCOPED_TRACE(c.name);
    Kernel kernel = compile(c.build(), Target::host(), on_tier());
    std::string loops = kernel.ir("loops");
    EXPECT_EQ(loops.find("_c_bf16(") != std::string::npos, amx_tier()) << loops;
    EXPECT_EQ(loops.find("x45xf32>") == std::string::npos, amx_tier()) << loops;
    check_kernel(kernel, c);
  }
}

TEST(Bf16Gemm, SameBitsOnAnyThreadCount) {
  Graph g = linear_graph(DType::BF16, 100, 70);
  TensorMap in = random_inputs(g, {{"M", 77}}, 5);
  Tensor first;
  for (int threads : {4, 3, 2, 1}) {
    Tensor y = compile(g, Target::host(), small_blocks(threads)).run(in).at("out");
    if (first.empty())
      first = y;
    EXPECT_TRUE(same_bits(first, y)) << threads << " threads";
  }
}

TEST(Bf16Gemm, AWrittenWeightIsPackedAgain) {
  Graph g = linear_graph(DType::BF16, 33, 20);
  Kernel k = compile(g, Target::host(), small_blocks());
  TensorMap in = random_inputs(g, {{"M", 9}}, 7);
  auto matches = [&](const char *when) {
    SCOPED_TRACE(when);
    Tensor got = k.run(in).at("out"), want = reference::run(g, in).at("out");
    assert_close(got, want, 0, 1.0 / 64); // within 2 bf16 ulps of |want|
  };
  matches("first run");
  EXPECT_EQ(k.weight_packs(), 1);
  in.at("w").set(5, 3.0);
  matches("after a write");
  EXPECT_EQ(k.weight_packs(), 2);
  std::int64_t nr = k.packed_params()[0].panel_columns;
  // K = 33 rows: whole pairs on the dot tier, whole tiles of 32 on AMX.
  std::int64_t rows = amx_tier() ? 64 : dot_tier() ? 34 : 33, bytes = dot_tier() ? 2 : 4;
  EXPECT_EQ(k.packed_bytes(), (20 + nr - 1) / nr * nr * rows * bytes);
}

/// x rounded to bf16, as f32 (what MatmulPrecision::Medium multiplies).
Tensor rounded_to_bf16(const Tensor &x) { return x.to(DType::BF16).to(DType::F32); }

TEST(MediumPrecision, F32ProductsOfBf16RoundedOperands) {
  // An f32 graph under Medium: on the dot tier its products are those of the operands
  // rounded to bf16 (the interpreter on rounded inputs, to f32's rule), its other ops
  // f32; on the f32 tier it is the Highest kernel, bit for bit.
  for (auto [k, n, m] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{33, 17, 3},
                         {257, 70, 45}, {64, 64, 130}}) {
    SCOPED_TRACE("K=" + std::to_string(k) + " N=" + std::to_string(n) + " M=" + std::to_string(m));
    Graph g("medium");
    Value x = g.input("x", DType::F32, {Dim("M"), Dim("K", k)});
    Value y = linear(x, g.param("w", DType::F32, {Dim("K", k), Dim("N", n)}),
                     g.param("b", DType::F32, {Dim("N", n)}));
    g.output("out", gelu(y));
    CompileOptions medium = small_blocks();
    medium.matmul_precision = MatmulPrecision::Medium;
    Kernel km = compile(g, Target::host(), medium);
    EXPECT_EQ(km.stats().matmul_precision, "medium");
    TensorMap in = random_inputs(g, {{"M", m}}, 21);
    Tensor got = km.run(in).at("out");
    if (!dot_tier()) {
      EXPECT_TRUE(same_bits(got, compile(g, Target::host(), small_blocks()).run(in).at("out")));
      continue;
    }
    EXPECT_NE(km.ir("loops").find(amx_tier() ? "amx.tile_mulf" : "x86vector.avx512.dot"),
              std::string::npos);
    TensorMap rounded = in;
    rounded["x"] = rounded_to_bf16(in.at("x"));
    rounded["w"] = rounded_to_bf16(in.at("w"));
    Tensor want = reference::run(g, rounded).at("out");
    Tolerance tol = tolerance(DType::F32, 1.0 + static_cast<double>(k), 1);
    Comparison cmp = compare(got, want, tol.atol, tol.rtol);
    EXPECT_TRUE(cmp.ok) << cmp.message;
    // And it is not the f32 result: the rounding shows.
    Tensor highest = reference::run(g, in).at("out");
    EXPECT_FALSE(compare(got, highest, 1e-7, 1e-7).ok) << "medium precision rounded nothing";
  }
}

// ---- attention -------------------------------------------------------------------------

/// q (B, H, L, Dh), k and v (B, Hkv, S, Dh), bf16, L and S bound at run time (Dh too when
/// dh is 0).
struct Qkv {
  Value q, k, v;
};
Qkv bf16_inputs(Graph &g, std::int64_t h, std::int64_t hkv, std::int64_t dh) {
  Dim B = g.dim("B"), L = g.dim("L"), S = g.dim("S");
  Dim H = g.dim("H", h), Hk = hkv == h ? H : g.dim("Hkv", hkv);
  Dim Dh = dh ? g.dim("Dh", dh) : g.dim("Dh");
  return {g.input("q", DType::BF16, {B, H, L, Dh}), g.input("k", DType::BF16, {B, Hk, S, Dh}),
          g.input("v", DType::BF16, {B, Hk, S, Dh})};
}

/// The tiled kernel for every length (decode_rows = 1 leaves it the single query only).
CompileOptions tiled(int q_tile = 0, int kv_tile = 0) {
  CompileOptions o = on_tier();
  o.schedule.decode_rows = 1;
  o.schedule.q_tile = q_tile;
  o.schedule.kv_tile = kv_tile;
  return o;
}

/// bf16 attention over exact bf16 inputs is one rounded node: within two bf16 ulps of the
/// interpreter's largest output, plus f32's rule over Dh + S terms. On the pairs tier P is
/// rounded to bf16 for P.V (at most 2^-9 of max |v| in the worst case, far less on random
/// data), which the same bound covers.
void check_attention(const std::string &name, const std::function<Graph()> &build,
                     const std::vector<DimBindings> &shapes, const CompileOptions &options) {
  DiffCase c;
  c.name = name;
  c.build = build;
  c.shapes = shapes;
  c.sums({"Dh", "S"}).within_half_ulps(2);
  Kernel k = compile(c.build(), Target::host(), options);
  std::string loops = k.ir("loops");
  // On amx the tiled kernel's products are AMX tiles when its tiles are whole blocks of
  // 32 (the default ones are); else, and on avx512bf16, vdpbf16ps pairs.
  int q_tile = options.schedule.q_tile, kv_tile = options.schedule.kv_tile;
  bool amx_tiles = amx_tier() && q_tile % 32 == 0 && kv_tile % 32 == 0;
  if (dot_tier() && options.schedule.decode_rows == 1)
    EXPECT_NE(loops.find(amx_tiles ? "amx.tile_mulf" : "x86vector.avx512.dot"), std::string::npos)
        << name << ": the tiled kernel does not run on " << (amx_tiles ? "AMX tiles" : "bf16 pairs");
  // The default 64-query tile (no mask) takes AMX tiles too: its 66 keys are cut to 64.
  if (amx_tiles && q_tile == 0)
    EXPECT_EQ(loops.find("tiled(q=64)"), std::string::npos) << name << ": the default tile kept pairs";
  check_kernel(k, c);
}

const std::vector<DimBindings> kEdges = {
    {{"B", 1}, {"L", 1}, {"S", 1}},    {{"B", 2}, {"L", 3}, {"S", 300}},
    {{"B", 1}, {"L", 17}, {"S", 17}},  {{"B", 1}, {"L", 64}, {"S", 97}},
    {{"B", 1}, {"L", 65}, {"S", 96}},  {{"B", 1}, {"L", 130}, {"S", 5}},
    {{"B", 1}, {"L", 33}, {"S", 1000}},
    {{"B", 1}, {"L", 12}, {"S", 300}}}; // by default tiles of one vector of queries (AVX-512)

class Bf16AttentionHeadDim : public ::testing::TestWithParam<std::int64_t> {};

// Head dims: odd (a last pair with one dim), the sizes models use, and one bound at run
// time (then odd and even ones on the same kernel).
TEST_P(Bf16AttentionHeadDim, EveryTileEdgeMatchesInterpreter) {
  std::int64_t dh = GetParam();
  auto build = [dh] {
    Graph g("bf16_attention_dh" + std::to_string(dh));
    auto [q, k, v] = bf16_inputs(g, 2, 2, dh);
    g.output("o", attention(q, k, v).value());
    return g;
  };
  std::vector<DimBindings> shapes = kEdges;
  if (dh == 0)
    for (DimBindings &b : shapes)
      b["Dh"] = b["L"] % 2 ? 33 : 64;
  check_attention("plain", build, shapes, tiled());
  check_attention("default", build, shapes, on_tier());
}

INSTANTIATE_TEST_SUITE_P(Dh, Bf16AttentionHeadDim, ::testing::Values(0, 7, 16, 33, 64, 128),
                         [](const auto &info) {
                           return info.param ? "dh" + std::to_string(info.param) : std::string("dynamic");
                         });

TEST(Bf16Attention, SchedulesMatchInterpreter) {
  // Key tiles of an odd length (a last pair with one key in every tile), shorter and
  // longer than the query tiles, and the dynamic length's two-vector variant.
  auto build = [] {
    Graph g("bf16_attention_schedules");
    auto [q, k, v] = bf16_inputs(g, 2, 1, 64);
    g.output("o", attention(q, k, v).value());
    return g;
  };
  // On amx, (32, 32), (64, 96) and (32, 256) run on AMX tiles, the others on pairs.
  for (auto [qt, kt] : {std::pair{16, 17}, {32, 7}, {64, 65}, {48, 130}, {32, 32}, {64, 96}, {32, 256}}) {
    SCOPED_TRACE("q_tile " + std::to_string(qt) + " kv_tile " + std::to_string(kt));
    check_attention("schedule", build, kEdges, tiled(qt, kt));
  }
}

TEST(Bf16Attention, MasksAndScoreModsMatchInterpreter) {
  std::vector<DimBindings> shapes = {{{"B", 1}, {"L", 300}, {"S", 300}},
                                     {{"B", 2}, {"L", 3}, {"S", 3}},
                                     {{"B", 1}, {"L", 129}, {"S", 400}}};
  check_attention(
      "causal",
      [] {
        Graph g("bf16_causal");
        auto [q, k, v] = bf16_inputs(g, 4, 2, 64);
        g.output("o", attention(q, k, v).mask(causal_mask()).value());
        return g;
      },
      shapes, tiled());
  check_attention(
      "window_alibi",
      [] {
        Graph g("bf16_window_alibi");
        auto [q, k, v] = bf16_inputs(g, 2, 2, 32);
        Value slopes = g.param("slopes", DType::F32, {g.dim("H", 2)});
        g.output("o", attention(q, k, v)
                          .mask(sliding_window_mask(50))
                          .score_mod([slopes](auto s, auto, auto h, auto qi, auto ki) {
                            return s + slopes[h] * (ki - qi);
                          })
                          .value());
        return g;
      },
      shapes, tiled());
}

TEST(Bf16Attention, PrefillOverABf16CacheReadInPlace) {
  // The tiled kernel over a cache view: the cached rows, this step's, then zeros.
  DiffCase c;
  c.name = "bf16_prefill_over_cache";
  c.build = [] {
    Graph g("bf16_prefill_over_cache");
    Dim B = g.dim("B"), C = g.dim("C"), N = g.dim("n"), H = g.dim("H", 4), Hk = g.dim("Hkv", 2),
        Dh = g.dim("Dh", 64);
    Value past_k = g.input("past_k", DType::BF16, {B, Hk, C, Dh});
    Value past_v = g.input("past_v", DType::BF16, {B, Hk, C, Dh});
    Value len = g.input("len", DType::I64, {B});
    Value kn = g.input("k_new", DType::BF16, {B, Hk, N, Dh});
    Value vn = g.input("v_new", DType::BF16, {B, Hk, N, Dh});
    Value q = g.input("q", DType::BF16, {B, H, N, Dh});
    g.output("o", attention(q, cache_view(past_k, len, kn), cache_view(past_v, len, vn))
                      .mask(cache_mask(len))
                      .value());
    return g;
  };
  c.shapes = {{{"B", 2}, {"C", 50}, {"n", 70}}, {{"B", 3}, {"C", 129}, {"n", 5}},
              {{"B", 1}, {"C", 0}, {"n", 17}}};
  c.sums({"Dh", "C", "n"}).within_half_ulps(2);
  c.inputs([](TensorMap &in) {
    Tensor &t = in.at("len");
    std::int64_t rows = in.at("past_k").shape()[2];
    for (std::int64_t b = 0; b < t.numel(); ++b)
      t.set(b, static_cast<double>((b * 7 + 3) % (rows + 1)));
  });
  Kernel k = compile(c.build(), Target::host(), tiled());
  // On amx the tiles read the view packed segment by segment, wherever the stored length
  // ends (len = 3, 10, 17, ...: never a whole block of 32).
  EXPECT_EQ(k.ir("loops").find("amx.tile_mulf") != std::string::npos, amx_tier());
  check_kernel(k, c);
}

TEST(Bf16Attention, PrefillOverAPagedBf16Cache) {
  // The same through a block table of 4-row pages, each sequence's pages scattered over the
  // pool: on amx the packing reads each key row through the table.
  DiffCase c;
  c.name = "bf16_prefill_over_pages";
  c.build = [] {
    Graph g("bf16_prefill_over_pages");
    Dim B = g.dim("B"), P = g.dim("P"), M = g.dim("M"), page = g.dim("page", 4), N = g.dim("n"),
        H = g.dim("H", 4), Hk = g.dim("Hkv", 2), Dh = g.dim("Dh", 64);
    Value pool_k = g.input("pool_k", DType::BF16, {P, Hk, page, Dh});
    Value pool_v = g.input("pool_v", DType::BF16, {P, Hk, page, Dh});
    Value table = g.input("table", DType::I32, {B, M});
    Value len = g.input("len", DType::I64, {B});
    Value kn = g.input("k_new", DType::BF16, {B, Hk, N, Dh});
    Value vn = g.input("v_new", DType::BF16, {B, Hk, N, Dh});
    Value q = g.input("q", DType::BF16, {B, H, N, Dh});
    g.output("o", attention(q, paged_cache_view(pool_k, table, len, kn),
                            paged_cache_view(pool_v, table, len, vn))
                      .mask(cache_mask(len))
                      .value());
    return g;
  };
  c.shapes = {{{"B", 2}, {"P", 30}, {"M", 12}, {"n", 70}}, {{"B", 1}, {"P", 9}, {"M", 9}, {"n", 33}}};
  c.sums({"Dh", "M", "n"}, 4).within_half_ulps(2);
  c.inputs([](TensorMap &in) {
    Tensor &table = in.at("table");
    std::int64_t pages = in.at("pool_k").shape()[0], m = table.shape()[1];
    for (std::int64_t i = 0; i < table.numel(); ++i)
      table.set(i, static_cast<double>((i * 7 + 1) % pages));
    Tensor &len = in.at("len");
    for (std::int64_t b = 0; b < len.numel(); ++b)
      len.set(b, static_cast<double>((b * 13 + 5) % (m * 4 + 1)));
  });
  Kernel k = compile(c.build(), Target::host(), tiled());
  EXPECT_EQ(k.ir("loops").find("amx.tile_mulf") != std::string::npos, amx_tier());
  check_kernel(k, c);
}

} // namespace
} // namespace qkv::test
