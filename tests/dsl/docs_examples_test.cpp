// The examples of docs/dsl.md. Each region between `// [doc:<name>]` and `// [/doc]` is a
// ```cpp block of the guide, word for word (GuideIsInSync checks both directions), so
// every example there compiles and runs here; the checks after a region are not shown.
#include <qkv/dsl.hpp>
#include <qkv/runtime/interpreter.hpp>

#include <gtest/gtest.h>

#include "qkv_test/errors.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using namespace qkv;
using qkv::test::error_of;
using qkv::test::ErrorSays;

namespace {

std::string read_file(const char *path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot open " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string guide() { return read_file(QKV_DSL_GUIDE); }

/// Text the guide must quote exactly (a printed graph, an error message).
void expect_in_guide(const std::string &text) {
  EXPECT_NE(guide().find(text), std::string::npos) << "docs/dsl.md should contain, verbatim:\n"
                                                   << text;
}

} // namespace

// clang-format off
// [doc:dims]
constexpr auto B = qkv::dim<"B">;       // batch: bound at run time
constexpr auto L = qkv::dim<"L">;       // sequence: bound at run time
constexpr auto D = qkv::dim<"D", 512>;  // model width: static
constexpr auto H = qkv::dim<"H", 8>;    // heads
constexpr auto Dh = qkv::dim<"Dh", 64>; // head dim
// [/doc]
// clang-format on

namespace {

// ---- the guide's structure -------------------------------------------------------------

struct Region {
  std::string name, code;
};

/// The regions of this file, each dedented by its common indentation.
std::vector<Region> regions() {
  std::istringstream in(read_file(QKV_DOCS_EXAMPLES_SOURCE));
  std::vector<Region> out;
  std::vector<std::string> lines;
  std::string line, name;
  bool inside = false;
  while (std::getline(in, line)) {
    std::size_t first = line.find_first_not_of(' ');
    std::string trimmed = first == std::string::npos ? "" : line.substr(first);
    if (!inside && trimmed.rfind("// [doc:", 0) == 0) {
      name = trimmed.substr(8, trimmed.find(']') - 8);
      inside = true;
      lines.clear();
    } else if (inside && trimmed == "// [/doc]") {
      std::size_t indent = std::string::npos;
      for (const std::string &l : lines)
        if (l.find_first_not_of(' ') != std::string::npos)
          indent = std::min(indent, l.find_first_not_of(' '));
      std::string code;
      for (const std::string &l : lines)
        code += (l.size() > indent ? l.substr(indent) : "") + "\n";
      out.push_back({name, code});
      inside = false;
    } else if (inside) {
      lines.push_back(line);
    }
  }
  EXPECT_FALSE(inside) << "region '" << name << "' has no // [/doc]";
  return out;
}

/// The ```cpp blocks of the guide.
std::vector<std::string> guide_cpp_blocks() {
  std::istringstream in(guide());
  std::vector<std::string> out;
  std::string line, block;
  bool inside = false;
  while (std::getline(in, line)) {
    if (!inside && line == "```cpp") {
      inside = true;
      block.clear();
    } else if (inside && line == "```") {
      out.push_back(block);
      inside = false;
    } else if (inside) {
      block += line + "\n";
    }
  }
  return out;
}

TEST(DslGuide, IsInSyncWithTheExamples) {
  std::vector<Region> rs = regions();
  std::vector<std::string> blocks = guide_cpp_blocks();
  ASSERT_GE(rs.size(), 20u);
  std::set<std::string> tested;
  for (const Region &r : rs) {
    tested.insert(r.code);
    EXPECT_TRUE(std::find(blocks.begin(), blocks.end(), r.code) != blocks.end())
        << "docs/dsl.md lacks example '" << r.name << "' as a ```cpp block:\n"
        << r.code;
  }
  for (const std::string &b : blocks)
    EXPECT_TRUE(tested.count(b)) << "a ```cpp block of docs/dsl.md is not an example that "
                                    "tests/dsl/docs_examples_test.cpp compiles and runs:\n"
                                 << b;
}

// ---- quick start -----------------------------------------------------------------------

Graph quickstart_typed() {
  // [doc:quickstart]
  Graph g("alibi_block");
  auto x = g.input<f32>("x", B, L, D);
  auto wq = g.param<f32>("wq", D, H * Dh);
  auto wk = g.param<f32>("wk", D, H * Dh);
  auto wv = g.param<f32>("wv", D, H * Dh);
  auto wo = g.param<f32>("wo", H * Dh, D);
  auto slopes = g.param<f32>("slopes", H);

  auto q = split_heads(linear(x, wq), H, Dh); // (B, H, L, Dh)
  auto k = split_heads(linear(x, wk), H, Dh);
  auto v = split_heads(linear(x, wv), H, Dh);
  auto o = attention(q, k, v)
               .mask([](auto b, auto h, auto qi, auto ki) { return qi >= ki && qi - ki < 256; })
               .score_mod([&](auto s, auto b, auto h, auto qi, auto ki) {
                 return s + slopes[h] * (ki - qi);
               });
  auto y = residual(x, linear(merge_heads(o), wo)); // (B, L, D)
  g.output("y", y.value());
  std::cout << g.str();
  // [/doc]
  static_assert(std::is_same_v<
                decltype(o),
                TypedAttention<f32, std::remove_cv_t<decltype(B)>, std::remove_cv_t<decltype(H)>,
                               std::remove_cv_t<decltype(L)>, std::remove_cv_t<decltype(Dh)>>>);
  return g;
}

Graph quickstart_untyped() {
  // [doc:untyped]
  Graph g("alibi_block");
  Dim B("B"), L("L"), D("D", 512), H("H", 8), Dh("Dh", 64);
  Value x = g.input("x", DType::F32, {B, L, D});
  Value wq = g.param("wq", DType::F32, {D, product(H, Dh)});
  Value wk = g.param("wk", DType::F32, {D, product(H, Dh)});
  Value wv = g.param("wv", DType::F32, {D, product(H, Dh)});
  Value wo = g.param("wo", DType::F32, {product(H, Dh), D});
  Value slopes = g.param("slopes", DType::F32, {H});

  Value q = split_heads(linear(x, wq), H, Dh);
  Value k = split_heads(linear(x, wk), H, Dh);
  Value v = split_heads(linear(x, wv), H, Dh);
  Value o = attention(q, k, v)
                .mask([](Expr b, Expr h, Expr qi, Expr ki) { return qi >= ki && qi - ki < 256; })
                .score_mod([&](Expr s, Expr b, Expr h, Expr qi, Expr ki) {
                  return s + slopes[h] * (ki - qi);
                });
  g.output("y", residual(x, linear(merge_heads(o), wo)));
  // [/doc]
  return g;
}

TEST(DslGuide, QuickStartPrintsTheGraphShownInTheGuide) {
  Graph g = quickstart_typed();
  g.verify();
  expect_in_guide(g.str());
}

TEST(DslGuide, TheTwoFrontDoorsBuildOneGraph) {
  Graph t = quickstart_typed(), u = quickstart_untyped();
  EXPECT_EQ(t.str(), u.str());
  EXPECT_EQ(t.hash(), u.hash());
}

TEST(DslGuide, MixingTheLayers) {
  Graph g("mixed");
  // [doc:mixing]
  Value raw = g.input("x", DType::F32, {Dim("L"), Dim("D", 512)}); // e.g. from a model loader
  auto x = as_typed<f32>(raw, L, D);                               // checked now, at run time
  auto y = gelu(x);                                                // typed from here on
  Value back = y.value();                                          // and back to the untyped API
  // [/doc]
  EXPECT_EQ(back.node().op, OpKind::Gelu);
  EXPECT_EQ(error_of([&] { as_typed<f32>(raw, L, Dh); }),
            "as_typed: 'x' is f32 (L=?, D=512), not f32 (L=?, Dh=64)");
}

TEST(DslGuide, DimsAndValues) {
  // [doc:named-dims]
  constexpr auto A = qkv::dim<"A", 3>;
  constexpr auto C = qkv::dim<"C", 5>;
  static_assert((H * Dh).extent == 512);          // named "H*Dh"
  static_assert((H * L).extent == qkv::kDynamic); // dynamic if either factor is
  static_assert((A + C).extent == 8);             // named "A+C", as concat names its dim
  qkv::Dim d = Dh;                                // 'Dh'(64) for the untyped API
  // [/doc]
  EXPECT_EQ(d, Dim("Dh", 64));
  EXPECT_EQ(Dim((A + C) * H).name, "(A+C)*H");

  Graph g("values");
  // [doc:typed-values]
  auto x = g.input<f32>("x", B, L,
                        D); // TypedValue<f32, NamedDim<"B">, NamedDim<"L">, NamedDim<"D", 512>>
  static_assert(decltype(x)::rank == 3);
  static_assert(decltype(x)::dtype == DType::F32);
  auto d0 = boost::hana::at_c<2>(x.dims); // NamedDim<"D", 512>, a dim value like D
  auto y = silu(x).named("act");          // names the node in errors and printed graphs
  Value v = y.value();                    // the untyped handle: explicit, never implicit
  // [/doc]
  static_assert(std::is_same_v<decltype(d0), std::remove_cv_t<decltype(D)>>);
  EXPECT_EQ(v.name(), "act");
}

// ---- leaves ------------------------------------------------------------------------------

TEST(DslGuide, Leaves) {
  Graph g("leaves");
  // [doc:leaves]
  auto tokens = g.input<i32>("tokens", B, L); // bound by name when run
  auto w = g.param<bf16>("w", D, H * Dh);     // a weight: bound like an input
  auto slopes = constant<f32>(g, "slopes",
                              {0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 0.00390625},
                              H); // values in the graph
  // [/doc]
  EXPECT_EQ(g.arguments().size(), 2u);
  EXPECT_EQ(tokens.value().dtype(), DType::I32);
  EXPECT_EQ(w.value().dtype(), DType::BF16);
  EXPECT_EQ(slopes.value().node().attrs.data->size(), 8u);
}

// ---- ops ---------------------------------------------------------------------------------

class Ops : public testing::Test {
protected:
  Graph g{"ops"};
  void TearDown() override {
    if (!g.outputs().empty())
      g.verify();
  }
};

TEST_F(Ops, Matmul) {
  // [doc:matmul]
  constexpr auto S = dim<"S">;
  auto q = g.input<f32>("q", B, H, L, Dh);
  auto k = g.input<f32>("k", B, H, S, Dh);
  auto scores = matmul(q, transpose(k)); // (B, H, L, Dh) x (B, H, Dh, S) -> (B, H, L, S)
  auto w = g.param<f32>("w", Dh, Dh);
  auto qw = matmul(q, w); // a 2-D side is shared by every batch
  // [/doc]
  g.output("s", scores.value());
  EXPECT_EQ(scores.value().dims(), (std::vector<Dim>{B, H, L, S}));
  EXPECT_EQ(qw.value().dims(), q.value().dims());
}

TEST_F(Ops, Linear) {
  // [doc:linear]
  constexpr auto F = dim<"F", 2048>;
  auto x = g.input<f32>("x", B, L, D);
  auto w1 = g.param<f32>("w1", D, F); // stored (in, out), not PyTorch's (out, in)
  auto b1 = g.param<f32>("b1", F);
  auto h1 = linear(x, w1, b1); // (B, L, F) = x . w1 + b1
  auto w2 = g.param<f32>("w2", F, D);
  auto y = linear(gelu(h1), w2); // (B, L, D)
  // [/doc]
  g.output("y", y.value());
  EXPECT_EQ(h1.value().dims(), (std::vector<Dim>{B, L, F}));
}

TEST_F(Ops, Transpose) {
  // [doc:transpose]
  auto x = g.input<f32>("x", B, H, L, Dh);
  auto a = transpose(x);       // last two: (B, H, Dh, L)
  auto b = transpose<1, 2>(x); // by axis: (B, L, H, Dh)
  auto c = transpose(x, H, L); // by dim: the same as b
  // [/doc]
  g.output("c", c.value());
  EXPECT_EQ(a.value().dims(), (std::vector<Dim>{B, H, Dh, L}));
  EXPECT_EQ(b.value().dims(), c.value().dims());
}

TEST_F(Ops, Elementwise) {
  // [doc:elementwise]
  auto x = g.input<f32>("x", B, L, D);
  auto bias = g.param<f32>("bias", D);
  auto gate = g.input<f32>("gate", B, L, D);
  auto a = x + bias;            // bias (D) ends (B, L, D): repeated over B, L
  auto m = x * gate - x / gate; // equal dims
  auto s = scale(x, 0.125);     // also x * 0.125, 0.125 * x, x / 8.0
  auto r = residual(x, m);      // like +, but the dims must be equal
  // [/doc]
  g.output("r", r.value());
  EXPECT_EQ(a.value().dims(), x.value().dims());
  EXPECT_EQ(s.value().node().attrs.scale, 0.125);
}

TEST_F(Ops, Softmax) {
  // [doc:softmax]
  constexpr auto S = dim<"S">;
  auto scores = g.input<f32>("scores", B, H, L, S);
  auto p = softmax(scores);      // over the last axis, S
  auto p2 = softmax<-2>(scores); // over axis -2, L
  auto p3 = softmax(scores, S);  // by dim: the same as p
  // [/doc]
  g.output("p", p.value());
  EXPECT_EQ(p2.value().node().attrs.axes, (std::vector<std::int64_t>{-2}));
  EXPECT_EQ(p3.value().node().attrs.axes, (std::vector<std::int64_t>{3}));
}

TEST_F(Ops, Heads) {
  // [doc:heads]
  auto x = g.input<f32>("x", B, L, H * Dh);
  auto heads = split_heads(x, H, Dh); // (B, H, L, Dh): feature h*64 + d goes to head h
  auto merged = merge_heads(heads);   // (B, L, H*Dh): the inverse
  auto named = merge_heads(heads, D); // (B, L, D): D has H*Dh's extent, 512
  // [/doc]
  g.output("m", named.value());
  static_assert(std::is_same_v<decltype(merged), decltype(x)>);
  EXPECT_EQ(heads.value().dims(), (std::vector<Dim>{B, H, L, Dh}));
}

TEST_F(Ops, Concat) {
  // [doc:concat]
  constexpr auto R = dim<"R", 32>;
  auto a = g.input<f32>("a", L, Dh);
  auto b = g.input<f32>("b", L, R);
  auto ab = concat(a, b);                  // (L, Dh+R): the new dim is named "Dh+R", 96
  auto rows = concat<0>(a, a);             // (L+L, Dh)
  auto named = concat(a, b, dim<"E", 96>); // (L, E): a dim passed last names the result
  // [/doc]
  g.output("ab", ab.value());
  EXPECT_EQ(ab.value().dims(), (std::vector<Dim>{L, Dim("Dh+R", 96)}));
  EXPECT_EQ(rows.value().dims()[0], Dim("L+L"));
  EXPECT_EQ(named.value().dims()[1], Dim("E", 96));
}

TEST_F(Ops, MaskAndScoreModOnScores) {
  // [doc:mask-score-mod]
  constexpr auto S = dim<"S">;
  auto scores = g.input<f32>("scores", H, L, S);
  auto capped = score_mod(
      scores, [](auto s, auto b, auto h, auto qi, auto ki) { return 30.0 * tanh(s / 30.0); });
  auto causal = mask(capped, causal_mask()); // -inf where kv > q
  auto p = softmax(causal);                  // a fully masked row gives 0, not NaN
  // [/doc]
  g.output("p", p.value());
  EXPECT_EQ(to_string(causal.value().node().attrs.mask), "q >= kv");
}

TEST_F(Ops, Positions) {
  // [doc:positions]
  auto x = g.input<f32>("x", B, L, D);
  auto pe = sinusoidal_pe(x); // x + sin/cos positions over (L, D)
  auto q = g.input<f32>("q", B, H, L, Dh);
  auto r = rope(q); // Llama/NeoX pairs (i, i + Dh/2)
  auto rj = rope(q, {.base = 10000, .interleaved = true, .offset = 128}); // GPT-J pairs, decode
  // [/doc]
  g.output("pe", pe.value());
  g.output("r", r.value());
  EXPECT_TRUE(rj.value().node().attrs.interleaved);
  EXPECT_EQ(rj.value().node().attrs.offset, 128);
}

TEST_F(Ops, Norms) {
  // [doc:norms]
  auto x = g.input<f32>("x", B, L, D);
  auto gamma = g.param<f32>("gamma", D);
  auto beta = g.param<f32>("beta", D);
  auto a = layer_norm(x, gamma, beta); // eps 1e-5
  auto b = rms_norm(x, gamma, 1e-6);
  auto c = layer_norm(x); // no affine part
  // [/doc]
  g.output("a", a.value());
  EXPECT_EQ(b.value().node().attrs.eps, 1e-6);
  EXPECT_FALSE(c.value().node().attrs.has_gamma);
}

TEST_F(Ops, Activations) {
  // [doc:activations]
  constexpr auto F = dim<"F", 1408>;
  auto x = g.input<f32>("x", B, L, D);
  auto w_gate = g.param<f32>("w_gate", D, F);
  auto w_up = g.param<f32>("w_up", D, F);
  auto ffn = swiglu(linear(x, w_gate), linear(x, w_up)); // silu(gate) * up, (B, L, F)
  auto geg = geglu(linear(x, w_gate), linear(x, w_up));  // gelu(gate) * up, (B, L, F)
  auto a = gelu(x);                                      // exact, with erf
  auto b = gelu(x, /*approximate=*/true);                // the tanh form
  auto c = silu(x);
  auto d = elu(x, 1.0);
  auto s = softcap(x, 30.0); // 30 tanh(x / 30)
  auto e = softplus(x); // log(1 + e^x)
  auto f = sigmoid(x);  // 1 / (1 + e^-x)
  auto r = relu(x);     // max(x, 0)
  // [/doc]
  g.output("ffn", ffn.value());
  EXPECT_TRUE(b.value().node().attrs.approximate);
  EXPECT_EQ(e.value().node().op, OpKind::Softplus);
  EXPECT_EQ(f.value().node().op, OpKind::Sigmoid);
  EXPECT_EQ(r.value().node().op, OpKind::Relu);
  EXPECT_EQ(geg.value().node().op, OpKind::Geglu);
  EXPECT_EQ(s.value().node().op, OpKind::Softcap);
  EXPECT_EQ(s.value().node().attrs.alpha, 30.0);
  (void)a, (void)c, (void)d;
}

TEST_F(Ops, Embedding) {
  // [doc:embedding]
  constexpr auto V = dim<"V", 32000>;
  auto tokens = g.input<i32>("tokens", B, L);
  auto table = g.param<f32>("table", V, D);
  auto x = embedding(tokens, table); // (B, L, D): table[tokens[b, l], :]
  // [/doc]
  g.output("x", x.value());
  EXPECT_EQ(x.value().dims(), (std::vector<Dim>{B, L, D}));
}

TEST_F(Ops, Attention) {
  // [doc:attention]
  constexpr auto S = dim<"S">;
  constexpr auto Hkv = dim<"Hkv", 2>;
  auto q = g.input<f32>("q", B, H, L, Dh);
  auto k = g.input<f32>("k", B, Hkv, S, Dh); // 8 query heads share 2 kv heads (GQA)
  auto v = g.input<f32>("v", B, Hkv, S, Dh);
  auto o = attention(q, k, v); // (B, H, L, Dh), scale 1/sqrt(64)
  auto o2 = attention(q, k, v).scale(0.1).mask(sliding_window_mask(128));
  // [/doc]
  g.output("o", o.value());
  EXPECT_EQ(o2.value().node().attrs.scale, 0.1);
}

TEST_F(Ops, PartialAttention) {
  // [doc:partial-attention]
  constexpr auto S = dim<"S">;
  auto q = g.input<f32>("q", B, H, L, Dh);
  auto k1 = g.input<f32>("k1", B, H, S, Dh); // the first half of the keys
  auto k2 = g.input<f32>("k2", B, H, S, Dh); // the second half
  auto a = attention(q, k1, k1), b = attention(q, k2, k2);
  auto la = a.lse(), lb = b.lse();           // (B, H, L)
  auto o = merge_attention(a, la, b, lb);    // attention over k1 and k2 together
  auto l = merge_lse(la, lb);                // and its log-sum-exp
  // [/doc]
  g.output("o", o.value());
  g.output("l", l.value());
  EXPECT_EQ(l.value().dims(), (std::vector<Dim>{B, H, L}));
  // The merge is the attention over both halves of the keys.
  TensorMap in{{"q", Tensor::random(DType::F32, {1, 8, 3, 64}, 1)},
               {"k1", Tensor::random(DType::F32, {1, 8, 2, 64}, 2)},
               {"k2", Tensor::random(DType::F32, {1, 8, 2, 64}, 3)}};
  TensorMap got = reference::run(g, in);
  Graph whole("whole");
  auto wq = whole.input<f32>("q", B, H, L, Dh);
  auto wk = whole.input<f32>("k", B, H, dim<"S2">, Dh);
  whole.output("o", attention(wq, wk, wk).value());
  Tensor k(DType::F32, {1, 8, 4, 64});
  for (std::int64_t h = 0; h < 8; ++h)
    for (std::int64_t j = 0; j < 4; ++j)
      for (std::int64_t d = 0; d < 64; ++d)
        k.set((h * 4 + j) * 64 + d, in.at(j < 2 ? "k1" : "k2").get((h * 2 + j % 2) * 64 + d));
  Tensor want = reference::run(whole, {{"q", in.at("q")}, {"k", k}}).at("o");
  for (std::int64_t i = 0; i < want.numel(); ++i)
    EXPECT_NEAR(got.at("o").get(i), want.get(i), 1e-12);
}

TEST_F(Ops, Linformer) {
  // [doc:linformer]
  constexpr auto Kp = dim<"Kp", 64>;
  auto k = g.input<f32>("k", B, H, L, Dh);
  auto e = g.param<f32>("e", Kp, L); // projects the sequence axis, L -> Kp
  auto kp = linformer_project(k, e); // (B, H, Kp, Dh)
  // [/doc]
  g.output("kp", kp.value());
  EXPECT_EQ(kp.value().dims(), (std::vector<Dim>{B, H, Dim("Kp", 64), Dh}));
}

TEST_F(Ops, LinearAttention) {
  // [doc:linear-attention]
  auto q = g.input<f32>("q", B, H, L, Dh);
  auto o = linear_attention(q, q, q); // phi = elu + 1
  auto o2 = linear_attention(q, q, q, FeatureMap::Relu);
  // [/doc]
  g.output("o", o.value());
  EXPECT_EQ(o2.value().node().attrs.feature_map, FeatureMap::Relu);
}

TEST_F(Ops, KvCache) {
  // [doc:kv-cache]
  constexpr auto Hkv = dim<"Hkv", 2>;
  constexpr auto C = dim<"C", 4096>; // the cache's capacity
  constexpr auto N = dim<"n">;       // this step's tokens: 1 when decoding
  auto x_q = g.input<f32>("q", B, H, N, Dh);
  auto x_k = g.input<f32>("k", B, Hkv, N, Dh);
  auto x_v = g.input<f32>("v", B, Hkv, N, Dh);
  auto lengths = g.input<i64>("lengths", B);  // rows already cached, per sequence
  auto pos = g.input<i64>("positions", B, N); // lengths[b] + i
  auto k_past = g.input<f32>("k_past", B, Hkv, C, Dh);
  auto v_past = g.input<f32>("v_past", B, Hkv, C, Dh);
  auto k = cache_view(k_past, lengths, rope(x_k, pos)); // (B, Hkv, C+n, Dh)
  auto v = cache_view(v_past, lengths, x_v);
  auto o = attention(rope(x_q, pos), k, v).mask(cache_mask(lengths)); // (B, H, n, Dh)

  // The same over a paged cache: 16-row pages, at most 256 per sequence.
  constexpr auto Page = dim<"page", 16>;
  constexpr auto M = dim<"M", 256>;
  auto k_pool = g.input<f32>("k_pool", dim<"P">, Hkv, Page, Dh);
  auto table = g.input<i32>("block_table", B, M); // page of rows [m*16, m*16+16)
  auto kp = paged_cache_view(k_pool, table, lengths, rope(x_k, pos)); // (B, Hkv, M*page+n, Dh)
  // [/doc]
  g.output("o", o.value());
  EXPECT_EQ(k.value().dims()[2].name, "C+n");
  EXPECT_EQ(kp.value().dims()[2].name, "M*page+n");
  // The mask loads lengths[b] (printed by the loaded tensor's node id).
  std::string m = to_string(o.value().node().attrs.mask);
  EXPECT_EQ(m.rfind("kv <= %", 0), 0u) << m;
  EXPECT_NE(m.find("[b] + q"), std::string::npos) << m;
}

// ---- mods --------------------------------------------------------------------------------

class Mods : public testing::Test {
protected:
  Graph g{"mods"};
  TypedValue<f32, std::remove_cv_t<decltype(B)>, std::remove_cv_t<decltype(H)>,
             std::remove_cv_t<decltype(L)>, std::remove_cv_t<decltype(Dh)>>
      q = g.input<f32>("q", B, H, L, Dh),
      k = g.input<f32>("k", B, H, L, Dh), v = g.input<f32>("v", B, H, L, Dh);
  std::string mask_text(const Value &o) { return to_string(o.node().attrs.mask); }
};

TEST_F(Mods, ReadyMade) {
  // [doc:ready-made-masks]
  auto causal = attention(q, k, v).mask(causal_mask());           // q >= kv
  auto local = attention(q, k, v).mask(sliding_window_mask(256)); // q >= kv && q - kv < 256
  // [/doc]
  EXPECT_EQ(mask_text(causal.value()), "q >= kv");
  EXPECT_EQ(mask_text(local.value()), "q >= kv && q - kv < 256");
}

TEST_F(Mods, DocumentMasking) {
  // [doc:document-mask]
  auto doc = g.input<i32>("doc", B, L); // doc[b, i]: which document token i belongs to
  auto o = attention(q, k, v).mask(
      [&](auto b, auto h, auto qi, auto ki) { return doc(b, qi) == doc(b, ki) && qi >= ki; });
  // [/doc]
  EXPECT_EQ(to_string(o.value().node().attrs.mask, nullptr), "%3[b, q] == %3[b, kv] && q >= kv");
  EXPECT_EQ(o.value().node().inputs, (std::vector<NodeId>{0, 1, 2, 3}));
}

TEST_F(Mods, PrefixLM) {
  // [doc:prefix-lm]
  std::int64_t prefix = 64; // the prompt sees itself in full
  auto o = attention(q, k, v).mask(
      or_masks(causal_mask(), [prefix](auto, auto, auto, auto ki) { return ki < prefix; }));
  // [/doc]
  EXPECT_EQ(mask_text(o.value()), "q >= kv || kv < 64");
}

TEST_F(Mods, Alibi) {
  // [doc:alibi]
  auto slopes = g.param<f32>("slopes", H); // one slope per head
  auto o = attention(q, k, v)
               .mask(causal_mask())
               .score_mod([&](auto s, auto b, auto h, auto qi, auto ki) {
                 return s + slopes[h] * (ki - qi);
               });
  // [/doc]
  EXPECT_EQ(to_string(o.value().node().attrs.score), "score + %3[h] * float(kv - q)");
}

TEST_F(Mods, Softcap) {
  // [doc:softcap]
  double cap = 50.0; // Gemma 2's attention logit softcapping
  auto o = attention(q, k, v).score_mod(
      [cap](auto s, auto b, auto h, auto qi, auto ki) { return cap * tanh(s / cap); });
  // [/doc]
  EXPECT_EQ(to_string(o.value().node().attrs.score), "50.0 * tanh(score / 50.0)");
}

TEST_F(Mods, RelativeBias) {
  // [doc:relative-bias]
  constexpr auto R = dim<"R", 257>; // relative distances -128..128
  auto bias = g.param<f32>("rel_bias", H, R);
  auto o = attention(q, k, v).score_mod([&](auto s, auto b, auto h, auto qi, auto ki) {
    auto d = max(-128, min(128, ki - qi)); // clamp, then look up
    return s + bias(h, d + 128);
  });
  // [/doc]
  EXPECT_EQ(to_string(o.value().node().attrs.score),
            "score + %3[h, max(-128, min(128, kv - q)) + 128]");
}

TEST_F(Mods, SelectAndLengths) {
  // [doc:select]
  // Causal attention aligned to the last query when L != S (a decode step over a cache),
  // and a score bonus for the first token: `if` and ?: cannot see symbolic values.
  auto o =
      attention(q, k, v)
          .mask([](auto b, auto h, auto qi, auto ki) { return ki <= qi + (len_kv() - len_q()); })
          .score_mod(
              [](auto s, auto b, auto h, auto qi, auto ki) { return select(ki == 0, s + 1.0, s); });
  // [/doc]
  EXPECT_EQ(mask_text(o.value()), "kv <= q + (len_kv - len_q)");
  EXPECT_EQ(to_string(o.value().node().attrs.score), "select(kv == 0, score + 1.0, score)");
}

TEST_F(Mods, Combining) {
  // [doc:combining]
  auto doc = g.input<i32>("doc", L);
  MaskFn same_doc = mask_fn([&](auto b, auto h, auto qi, auto ki) { return doc[qi] == doc[ki]; });
  MaskFn m = and_masks(causal_mask(), same_doc, sliding_window_mask(1024));
  auto o = attention(q, k, v).mask(m);
  auto o2 = attention(q, k, v).mask(causal_mask()).mask(same_doc); // calls combine with &&
  // [/doc]
  EXPECT_EQ(mask_text(o.value()), "q >= kv && %3[q] == %3[kv] && (q >= kv && q - kv < 1024)");
  EXPECT_EQ(mask_text(o2.value()), "q >= kv && %3[q] == %3[kv]");
}

// ---- running the reference interpreter ----------------------------------------------------

TEST(DslGuide, DocumentMaskOnTheInterpreter) {
  // [doc:run]
  constexpr auto T = qkv::dim<"T">;
  constexpr auto E = qkv::dim<"E", 2>;
  Graph g("docs");
  auto x = g.input<f32>("x", T, E);
  auto doc = g.input<i32>("doc", T);
  auto o = attention(x, x, x).mask(
      [&](auto b, auto h, auto qi, auto ki) { return doc[qi] == doc[ki] && qi >= ki; });
  g.output("o", o.value());

  TensorMap out = reference::run(g, {{"x", Tensor::from_f32({3, 2}, {1, 0, 0, 1, 5, 5})},
                                     {"doc", Tensor::from_i32({3}, {0, 0, 1})}});
  std::cout << out.at("o").str(2) << "\n"; // row 2 starts document 1: it sees only itself
  // [/doc]
  const Tensor &y = out.at("o");
  // Row 0 sees only key 0, row 2 only key 2: their outputs are those rows of v.
  EXPECT_DOUBLE_EQ(y.at({0, 0}), 1.0);
  EXPECT_DOUBLE_EQ(y.at({0, 1}), 0.0);
  EXPECT_DOUBLE_EQ(y.at({2, 0}), 5.0);
  EXPECT_DOUBLE_EQ(y.at({2, 1}), 5.0);
  // Row 1 sees keys 0 and 1 with scores (0, 1)/sqrt(2): softmax weights on v rows 0, 1.
  double w1 = 1.0 / (1.0 + std::exp(-1.0 / std::sqrt(2.0)));
  EXPECT_NEAR(y.at({1, 0}), 1.0 - w1, 1e-12);
  EXPECT_NEAR(y.at({1, 1}), w1, 1e-12);
}

// ---- errors ------------------------------------------------------------------------------

TEST(DslGuide, RunTimeErrorsQuotedInTheGuide) {
  Graph g("g");
  // [doc:runtime-error]
  Value q = g.input("q", DType::F32, {Dim("L"), Dim("Dh", 64)});
  Value k = g.input("k", DType::F32, {Dim("D", 512), Dim("S")});
  try {
    matmul(q, k);
  } catch (const qkv::Error &e) {
    std::cout << e.what() << "\n";
  }
  // [/doc]
  std::string m = error_of([&] { matmul(q, k); });
  expect_in_guide(m);
  Value wk = g.param("wk", DType::F32, {Dim("D", 512), Dim("Dh", 64)});
  expect_in_guide(error_of([&] { linear(q, wk); }));
  Value x = g.input("x", DType::F32, {Dim("L"), Dim("D", 512)});
  expect_in_guide(error_of([&] { split_heads(x, Dim("H", 8), Dim("Dh", 32)); }));
  Value o = g.input("o", DType::F32, {Dim("H", 8), Dim("L"), Dim("Dh", 64)});
  Value kv = g.input("kv", DType::F32, {Dim("G", 3), Dim("S"), Dim("Dh", 64)});
  expect_in_guide(error_of([&] { attention(o, kv, kv); }));
  Value ids = g.input("ids", DType::F32, {Dim("L")});
  Value table = g.param("table", DType::F32, {Dim("V", 100), Dim("D", 512)});
  expect_in_guide(error_of([&] { embedding(ids, table); }));
  Value slopes = g.param("slopes", DType::F32, {Dim("H", 8)});
  expect_in_guide(error_of([&] {
    attention(o, o, o).score_mod(
        [&](Expr s, Expr, Expr h, Expr qi, Expr) { return s + slopes(h, qi); });
  }));
  expect_in_guide(error_of([&] {
    attention(o, o, o).score_mod(
        [&](Expr s, Expr, Expr h, Expr, Expr) { return s + slopes[h * 0.5]; });
  }));
  expect_in_guide(error_of([&] { bind_dims(g, {{"q", {DType::F32, {3, 64}}}}); }));
}

} // namespace
