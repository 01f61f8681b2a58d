// The typed front end: the dims it computes at compile time, and that the graph it builds
// is the one the untyped builders make by hand (same text, same hash).
#include <qkv/dsl.hpp>

#include <gtest/gtest.h>

#include <type_traits>

namespace {

using namespace qkv;

constexpr auto B = dim<"B">;
constexpr auto L = dim<"L">;
constexpr auto S = dim<"S">;
constexpr auto D = dim<"D", 512>;
constexpr auto H = dim<"H", 8>;
constexpr auto Hkv = dim<"Hkv", 2>;
constexpr auto Dh = dim<"Dh", 64>;
constexpr auto V = dim<"V", 1000>;
constexpr auto F = dim<"F", 2048>;

using DB = std::remove_cv_t<decltype(B)>;
using DL = std::remove_cv_t<decltype(L)>;
using DS = std::remove_cv_t<decltype(S)>;
using DD = std::remove_cv_t<decltype(D)>;
using DH = std::remove_cv_t<decltype(H)>;
using DHkv = std::remove_cv_t<decltype(Hkv)>;
using DDh = std::remove_cv_t<decltype(Dh)>;
using DF = std::remove_cv_t<decltype(F)>;

template <class T, class U> constexpr bool same = std::is_same_v<std::remove_cvref_t<T>, U>;

// ---- dims --------------------------------------------------------------------------------

TEST(TypedDims, NameAndExtentAreInTheType) {
  static_assert(DD::extent == 512 && DD::is_static);
  static_assert(DL::extent == kDynamic && !DL::is_static);
  static_assert(DD::name.view() == "D");
  EXPECT_EQ(Dim(D), Dim("D", 512));
  EXPECT_EQ(Dim(L), Dim("L"));
  EXPECT_EQ(D.untyped().name, "D");
}

// The typed product and sum must spell derived dims exactly as qkv::product/qkv::sum do:
// the untyped layer matches split_heads/merge_heads/concat dims by these names.
TEST(TypedDims, ProductAndSumMatchTheUntypedSpelling) {
  constexpr auto A = dim<"A", 3>;
  constexpr auto C = dim<"C", 5>;
  auto check = [](Dim typed, Dim untyped) {
    EXPECT_EQ(typed.name, untyped.name);
    EXPECT_EQ(typed.extent, untyped.extent);
  };
  check(H * Dh, product(Dim(H), Dim(Dh)));
  check(H * L, product(Dim(H), Dim(L)));
  check(L * H, product(Dim(L), Dim(H)));
  check(A + C, sum({Dim(A), Dim(C)}));
  check((A + C) * H, product(sum({Dim(A), Dim(C)}), Dim(H)));
  check(H * (A + C), product(Dim(H), sum({Dim(A), Dim(C)})));
  check((A + C) * (A + L), product(sum({Dim(A), Dim(C)}), sum({Dim(A), Dim(L)})));
  check(H * Dh + A, sum({product(Dim(H), Dim(Dh)), Dim(A)}));
  check((A + C) + H, sum({Dim(A), Dim(C), Dim(H)}));
  static_assert((H * Dh).extent == 512);
  static_assert((H * L).extent == kDynamic);
  static_assert((A + C).extent == 8);
  static_assert((A + L).extent == kDynamic);
}

// ---- leaves ----------------------------------------------------------------------------

TEST(TypedLeaves, InputParamConstant) {
  Graph g("leaves");
  auto x = g.input<f32>("x", B, L, D);
  auto w = g.param<bf16>("w", D, H * Dh);
  auto c = constant<f32>(g, "c", {1, 2, 3, 4, 5, 6, 7, 8}, H);
  auto ids = g.input<i32>("ids", L);
  static_assert(same<decltype(x), TypedValue<f32, DB, DL, DD>>);
  static_assert(same<decltype(w), TypedValue<bf16, DD, decltype(H * Dh)>>);
  static_assert(same<decltype(c), TypedValue<f32, DH>>);
  static_assert(decltype(x)::rank == 3 && decltype(ids)::rank == 1);
  static_assert(decltype(ids)::dtype == DType::I32);
  static_assert(same<decltype(boost::hana::at_c<2>(x.dims)), DD>);

  Graph u("leaves");
  u.input("x", DType::F32, {Dim("B"), Dim("L"), Dim("D", 512)});
  u.param("w", DType::BF16, {Dim("D", 512), product(Dim("H", 8), Dim("Dh", 64))});
  u.constant("c", {Dim("H", 8)}, {1, 2, 3, 4, 5, 6, 7, 8});
  u.input("ids", DType::I32, {Dim("L")});
  EXPECT_EQ(g.str(), u.str());
  EXPECT_EQ(x.value().dims(), (std::vector<Dim>{Dim("B"), Dim("L"), Dim("D", 512)}));
  EXPECT_EQ(x.name(), "x");
}

TEST(TypedLeaves, RunTimeErrorsStillReachTheUser) {
  Graph g("g");
  g.input<f32>("x", L, D);
  // A second argument with the same name is a run-time fact, checked by the untyped layer.
  EXPECT_THROW(g.param<f32>("x", D), Error);
  // One name, two extents in one graph: compile-time dims cannot see across statements.
  EXPECT_THROW(g.input<f32>("y", dim<"D", 256>), Error);
  // Wrong value count for a constant.
  EXPECT_THROW(constant<f32>(g, "c", {1, 2}, H), Error);
}

// ---- a graph built both ways ----------------------------------------------------------------

/// The untyped dims, for building the reference graphs.
Dim u(const char *name, std::int64_t e = kDynamic) { return Dim(name, e); }

TEST(TypedGraph, AttentionBlockEqualsTheUntypedGraph) {
  Graph g("block");
  auto x = g.input<f32>("x", B, L, D);
  auto wq = g.param<f32>("wq", D, H * Dh);
  auto wk = g.param<f32>("wk", D, Hkv * Dh);
  auto wv = g.param<f32>("wv", D, Hkv * Dh);
  auto wo = g.param<f32>("wo", H * Dh, D);
  auto slopes = g.param<f32>("slopes", H);
  auto q = rope(split_heads(linear(x, wq), H, Dh));
  auto k = rope(split_heads(linear(x, wk), Hkv, Dh));
  auto v = split_heads(linear(x, wv), Hkv, Dh);
  auto o = attention(q, k, v)
               .scale(0.125)
               .mask(causal_mask())
               .score_mod([&](auto s, auto, auto h, auto qi, auto ki) {
                 return s + slopes[h] * to_float(ki - qi);
               });
  static_assert(same<decltype(q), TypedValue<f32, DB, DH, DL, DDh>>);
  static_assert(same<decltype(k), TypedValue<f32, DB, DHkv, DL, DDh>>);
  static_assert(same<decltype(o), TypedAttention<f32, DB, DH, DL, DDh>>);
  auto y = residual(x, linear(merge_heads(o), wo)).named("y");
  static_assert(same<decltype(y), TypedValue<f32, DB, DL, DD>>);
  g.output("y", y.value());
  g.verify();

  Graph r("block");
  Value ux = r.input("x", DType::F32, {u("B"), u("L"), u("D", 512)});
  Dim hd = product(u("H", 8), u("Dh", 64)), kvd = product(u("Hkv", 2), u("Dh", 64));
  Value uwq = r.param("wq", DType::F32, {u("D", 512), hd});
  Value uwk = r.param("wk", DType::F32, {u("D", 512), kvd});
  Value uwv = r.param("wv", DType::F32, {u("D", 512), kvd});
  Value uwo = r.param("wo", DType::F32, {hd, u("D", 512)});
  Value us = r.param("slopes", DType::F32, {u("H", 8)});
  Value uq = rope(split_heads(linear(ux, uwq), u("H", 8), u("Dh", 64)));
  Value uk = rope(split_heads(linear(ux, uwk), u("Hkv", 2), u("Dh", 64)));
  Value uv = split_heads(linear(ux, uwv), u("Hkv", 2), u("Dh", 64));
  Value uo = attention(uq, uk, uv)
                 .scale(0.125)
                 .mask(causal_mask())
                 .score_mod([&](Expr s, Expr, Expr h, Expr qi, Expr ki) {
                   return s + us[h] * to_float(ki - qi);
                 });
  Value uy = residual(ux, linear(merge_heads(uo), uwo)).named("y");
  r.output("y", uy);

  EXPECT_EQ(g.str(), r.str());
  EXPECT_EQ(g.hash(), r.hash());
}

// Every other op, each checked for its result type and against the untyped builder.
TEST(TypedGraph, EveryOpEqualsTheUntypedGraph) {
  constexpr auto K = dim<"K", 16>;
  constexpr auto N = dim<"N", 32>;
  constexpr auto Kp = dim<"Kp", 4>;
  constexpr auto Dv = dim<"Dv", 16>;
  using DK = std::remove_cv_t<decltype(K)>;
  using DN = std::remove_cv_t<decltype(N)>;
  using DKp = std::remove_cv_t<decltype(Kp)>;
  using DDv = std::remove_cv_t<decltype(Dv)>;

  Graph g("ops");
  auto a = g.input<f32>("a", B, L, K);
  auto w = g.param<f32>("w", K, N);
  auto m2 = g.param<f32>("m2", K, N);
  auto bias = g.param<f32>("bias", N);
  auto gamma = g.param<f32>("gamma", N);
  auto beta = g.param<f32>("beta", N);
  auto ids = g.input<i64>("ids", B, L);
  auto table = g.param<f32>("table", V, N);
  auto e = g.param<f32>("e", Kp, L);
  auto q3 = g.input<f32>("q3", H, L, Dh);
  auto k3 = g.input<f32>("k3", H, S, Dh);
  auto v3 = g.input<f32>("v3", H, S, Dv);

  auto mm = matmul(a, m2); // 2-D right side broadcasts
  static_assert(same<decltype(mm), TypedValue<f32, DB, DL, DN>>);
  auto mt = matmul(a, transpose(a)); // batch dims equal
  static_assert(same<decltype(mt), TypedValue<f32, DB, DL, DL>>);
  auto lb = linear(a, w, bias);
  static_assert(same<decltype(lb), TypedValue<f32, DB, DL, DN>>);
  auto t02 = transpose<0, 2>(a);
  static_assert(same<decltype(t02), TypedValue<f32, DK, DL, DB>>);
  auto tn = transpose(a, K, B);
  static_assert(same<decltype(tn), TypedValue<f32, DK, DL, DB>>);
  auto sc = scale(lb, 0.5);
  auto ar = (lb + bias) - (mm * lb) / lb; // bias broadcasts over (B, L)
  static_assert(same<decltype(ar), TypedValue<f32, DB, DL, DN>>);
  auto br = bias + lb; // shorter on the left: longer's dims
  static_assert(same<decltype(br), TypedValue<f32, DB, DL, DN>>);
  auto sm = softmax(lb);
  auto sm1 = softmax<1>(lb);
  auto smn = softmax(lb, L);
  auto sh = split_heads(a, dim<"G", 4>, dim<"E", 4>); // K=16 splits as 4 x 4 by extent
  static_assert(same<decltype(sh), TypedValue<f32, DB, NamedDim<"G", 4>, DL, NamedDim<"E", 4>>>);
  auto mh = merge_heads(sh);
  static_assert(same<decltype(mh), TypedValue<f32, DB, DL, NamedDim<"G*E", 16>>>);
  auto mho = merge_heads(sh, K);
  static_assert(same<decltype(mho), TypedValue<f32, DB, DL, DK>>);
  auto cc = concat(lb, lb, a);
  static_assert(same<decltype(cc), TypedValue<f32, DB, DL, NamedDim<"N+N+K", 80>>>);
  auto c0 = concat<1>(a, a);
  static_assert(same<decltype(c0), TypedValue<f32, DB, NamedDim<"L+L">, DK>>);
  auto c2 = concat<2>(a, a, dim<"K2", 32>); // named by extent
  static_assert(same<decltype(c2), TypedValue<f32, DB, DL, NamedDim<"K2", 32>>>);
  auto c1 = concat(a);
  auto scores = matmul(q3, transpose(k3));
  static_assert(same<decltype(scores), TypedValue<f32, DH, DL, DS>>);
  auto mk = mask(scores, sliding_window_mask(4));
  auto sm2 = score_mod(mk, [](auto s, auto, auto, auto, auto) { return s * 0.5; });
  auto pe = sinusoidal_pe(a, 500.0, 3);
  auto rp = rope(q3, {.base = 5000, .interleaved = true, .offset = 2});
  auto ln = layer_norm(lb, 1e-3);
  auto lng = layer_norm(lb, gamma, beta);
  auto rn = rms_norm(lb);
  auto rng = rms_norm(lb, gamma, 1e-4);
  auto ge = gelu(lb, true);
  auto si = silu(lb);
  auto el = elu(lb, 0.5);
  auto sw = swiglu(ln, rn);
  auto em = embedding(ids, table);
  static_assert(same<decltype(em), TypedValue<f32, DB, DL, DN>>);
  auto lp = linformer_project(a, e);
  static_assert(same<decltype(lp), TypedValue<f32, DB, DKp, DK>>);
  auto la = linear_attention(q3, k3, v3, FeatureMap::Relu);
  static_assert(same<decltype(la), TypedValue<f32, DH, DL, DDv>>);
  auto at = attention(q3, k3, v3);
  static_assert(same<decltype(at), TypedAttention<f32, DH, DL, DDv>>);
  auto x2 = 2.0 * sc * 3.0;

  Graph r("ops");
  Dim uB = u("B"), uL = u("L"), uK = u("K", 16), uN = u("N", 32), uH = u("H", 8), uS = u("S"),
      uDh = u("Dh", 64), uDv = u("Dv", 16);
  Value ua = r.input("a", DType::F32, {uB, uL, uK});
  Value uw = r.param("w", DType::F32, {uK, uN});
  Value um2 = r.param("m2", DType::F32, {uK, uN});
  Value ubias = r.param("bias", DType::F32, {uN});
  Value ugamma = r.param("gamma", DType::F32, {uN});
  Value ubeta = r.param("beta", DType::F32, {uN});
  Value uids = r.input("ids", DType::I64, {uB, uL});
  Value utable = r.param("table", DType::F32, {u("V", 1000), uN});
  Value ue = r.param("e", DType::F32, {u("Kp", 4), uL});
  Value uq3 = r.input("q3", DType::F32, {uH, uL, uDh});
  Value uk3 = r.input("k3", DType::F32, {uH, uS, uDh});
  Value uv3 = r.input("v3", DType::F32, {uH, uS, uDv});
  Value umm = matmul(ua, um2);
  matmul(ua, transpose(ua));
  Value ulb = linear(ua, uw, ubias);
  transpose(ua, 0, 2);
  transpose(ua, "K", "B");
  Value usc = scale(ulb, 0.5);
  (ulb + ubias) - (umm * ulb) / ulb;
  ubias + ulb;
  softmax(ulb);
  softmax(ulb, 1);
  softmax(ulb, "L");
  Value ush = split_heads(ua, u("G", 4), u("E", 4));
  merge_heads(ush);
  merge_heads(ush, uK);
  concat({ulb, ulb, ua});
  concat({ua, ua}, 1);
  concat({ua, ua}, 2, u("K2", 32));
  concat({ua});
  Value uscores = matmul(uq3, transpose(uk3));
  Value umk = mask(uscores, sliding_window_mask(4));
  score_mod(umk, [](Expr s, Expr, Expr, Expr, Expr) { return s * 0.5; });
  sinusoidal_pe(ua, 500.0, 3);
  rope(uq3, {.base = 5000, .interleaved = true, .offset = 2});
  Value uln = layer_norm(ulb, 1e-3);
  layer_norm(ulb, ugamma, ubeta);
  Value urn = rms_norm(ulb);
  rms_norm(ulb, ugamma, 1e-4);
  gelu(ulb, true);
  silu(ulb);
  elu(ulb, 0.5);
  swiglu(uln, urn);
  embedding(uids, utable);
  linformer_project(ua, ue);
  linear_attention(uq3, uk3, uv3, FeatureMap::Relu);
  attention(uq3, uk3, uv3);
  2.0 * usc * 3.0;

  EXPECT_EQ(g.str(), r.str());
  EXPECT_EQ(g.hash(), r.hash());
  (void)mt, (void)t02, (void)tn, (void)ar, (void)br, (void)sm, (void)sm1, (void)smn, (void)mh,
      (void)mho, (void)cc, (void)c0, (void)c1, (void)c2, (void)sm2, (void)pe, (void)rp, (void)lng,
      (void)rng, (void)ge, (void)si, (void)el, (void)sw, (void)em, (void)lp, (void)la, (void)at,
      (void)x2;
}

TEST(TypedGraph, MatmulLeftSide2DTakesTheRightBatch) {
  Graph g("g");
  auto w = g.param<f32>("w", S, L);
  auto x = g.input<f32>("x", B, L, D);
  auto y = matmul(w, x);
  static_assert(same<decltype(y), TypedValue<f32, DB, DS, DD>>);
  EXPECT_EQ(y.value().dims(), (std::vector<Dim>{Dim("B"), Dim("S"), Dim("D", 512)}));
}

TEST(TypedGraph, SplitHeadsByNameWithADynamicHeadDim) {
  constexpr auto E = dim<"E">;
  Graph g("g");
  auto x = g.input<f32>("x", L, H * E);
  auto s = split_heads(x, H, E);
  static_assert(same<decltype(s), TypedValue<f32, DH, DL, std::remove_cv_t<decltype(E)>>>);
  auto m = merge_heads(s);
  static_assert(same<decltype(m), decltype(x)>);
  g.output("m", m.value());
  g.verify();
}

// ---- attention variants -----------------------------------------------------------------

TEST(TypedAttention, MaskAndScoreModAreTheUntypedOnes) {
  Graph g("g");
  auto q = g.input<f32>("q", H, L, Dh);
  auto k = g.input<f32>("k", H, S, Dh);
  auto v = g.input<f32>("v", H, S, Dh);
  auto docs = g.input<i32>("docs", L);
  auto o = attention(q, k, v).mask(
      [&](auto, auto, auto qi, auto ki) { return docs[qi] == docs[ki] && qi >= ki; });
  const Node &n = o.value().node();
  ASSERT_EQ(n.op, OpKind::Attention);
  ASSERT_TRUE(n.attrs.mask);
  EXPECT_EQ(to_string(n.attrs.mask), "%3[q] == %3[kv] && q >= kv");
  EXPECT_EQ(n.inputs, (std::vector<NodeId>{0, 1, 2, 3}));
  EXPECT_FALSE(n.attrs.score);
  EXPECT_FALSE(n.attrs.scale);
}

TEST(TypedAttention, FluentCallsAfterUseAreErrors) {
  Graph g("g");
  auto q = g.input<f32>("q", L, Dh);
  auto o = attention(q, q, q);
  auto y = scale(o, 2.0);
  EXPECT_THROW(o.scale(0.5), Error);
  EXPECT_THROW(o.mask(causal_mask()), Error);
  (void)y;
}

TEST(TypedAttention, NamedKeepsTheBuilder) {
  Graph g("g");
  auto q = g.input<f32>("q", L, Dh);
  auto o = attention(q, q, q).named("o").scale(0.5);
  static_assert(same<decltype(o), TypedAttention<f32, DL, DDh>>);
  EXPECT_EQ(o.name(), "o");
  EXPECT_EQ(o.value().node().attrs.scale, 0.5);
}

TEST(TypedAttention, PartialsMergeAsTheUntypedOnes) {
  Graph g("g");
  auto q = g.input<f32>("q", B, H, L, Dh);
  auto k = g.input<f32>("k", B, Hkv, S, Dh);
  auto k2 = g.input<f32>("k2", B, Hkv, S, Dh);
  auto a = attention(q, k, k);
  auto b = attention(q, k2, k2).mask(causal_mask());
  auto la = a.lse();
  auto lb = b.lse();
  static_assert(same<decltype(la), TypedValue<f32, DB, DH, DL>>);
  auto o = merge_attention(a, la, b, lb);
  auto l = merge_lse(la, lb);
  static_assert(same<decltype(o), TypedValue<f32, DB, DH, DL, DDh>>);
  static_assert(same<decltype(l), TypedValue<f32, DB, DH, DL>>);
  g.output("o", o.value());
  g.output("l", l.value());

  Graph u("g");
  Dim b_ = u.dim("B"), l_ = u.dim("L"), s_ = u.dim("S"), h_ = u.dim("H", 8), hk_ = u.dim("Hkv", 2),
      d_ = u.dim("Dh", 64);
  Value uq = u.input("q", DType::F32, {b_, h_, l_, d_});
  Value uk = u.input("k", DType::F32, {b_, hk_, s_, d_});
  Value uk2 = u.input("k2", DType::F32, {b_, hk_, s_, d_});
  Attention ua = attention(uq, uk, uk);
  Attention ub = attention(uq, uk2, uk2);
  ub.mask(causal_mask());
  Value ula = ua.lse(), ulb = ub.lse();
  u.output("o", merge_attention(ua, ula, ub, ulb));
  u.output("l", merge_lse(ula, ulb));
  EXPECT_EQ(g.str(), u.str());
  EXPECT_EQ(g.hash(), u.hash());
}

TEST(TypedAttention, GroupedQueryAndMultiQuery) {
  Graph g("g");
  auto q = g.input<f32>("q", B, H, L, Dh);
  auto k = g.input<f32>("k", B, Hkv, S, Dh);
  auto v = g.input<f32>("v", B, Hkv, S, Dh);
  auto k1 = g.input<f32>("k1", B, dim<"One", 1>, S, Dh);
  auto o = attention(q, k, v);
  auto o1 = attention(q, k1, k1);
  static_assert(same<decltype(o), TypedAttention<f32, DB, DH, DL, DDh>>);
  static_assert(same<decltype(o1), TypedAttention<f32, DB, DH, DL, DDh>>);
  g.output("o", o.value());
  g.output("o1", o1.value());
  g.verify();
}

TEST(TypedCache, ViewsRopeAndMaskEqualTheUntypedGraph) {
  constexpr auto C = dim<"C", 128>;
  constexpr auto N = dim<"n">;
  constexpr auto P = dim<"P">;
  constexpr auto M = dim<"M", 4>;
  constexpr auto Page = dim<"page", 16>;
  Graph g("cache");
  auto q = g.input<f32>("q", B, H, N, Dh);
  auto kn = g.input<f32>("k_new", B, Hkv, N, Dh);
  auto past = g.input<f32>("k_past", B, Hkv, C, Dh);
  auto pool = g.input<f32>("k_pool", P, Hkv, Page, Dh);
  auto table = g.input<i32>("table", B, M);
  auto len = g.input<i64>("lengths", B);
  auto pos = g.input<i64>("positions", B, N);
  auto kv = cache_view(past, len, rope(kn, pos));
  static_assert(
      same<decltype(kv), TypedValue<f32, DB, DHkv, std::remove_cv_t<decltype(C + N)>, DDh>>);
  auto pv = paged_cache_view(pool, table, len, kn);
  static_assert(
      same<decltype(pv), TypedValue<f32, DB, DHkv, std::remove_cv_t<decltype(M * Page + N)>, DDh>>);
  auto o = attention(rope(q, pos), kv, kv).mask(cache_mask(len));
  auto op = attention(q, pv, pv).mask(cache_mask(len));
  g.output("o", o.value());
  g.output("op", op.value());

  Graph r("cache");
  Dim uB = u("B"), uH = u("H", 8), uHkv = u("Hkv", 2), uN = u("n"), uDh = u("Dh", 64);
  Value uq = r.input("q", DType::F32, {uB, uH, uN, uDh});
  Value ukn = r.input("k_new", DType::F32, {uB, uHkv, uN, uDh});
  Value upast = r.input("k_past", DType::F32, {uB, uHkv, u("C", 128), uDh});
  Value upool = r.input("k_pool", DType::F32, {u("P"), uHkv, u("page", 16), uDh});
  Value utable = r.input("table", DType::I32, {uB, u("M", 4)});
  Value ulen = r.input("lengths", DType::I64, {uB});
  Value upos = r.input("positions", DType::I64, {uB, uN});
  Value ukv = cache_view(upast, ulen, rope(ukn, upos));
  Value upv = paged_cache_view(upool, utable, ulen, ukn);
  r.output("o", attention(rope(uq, upos), ukv, ukv).mask(cache_mask(ulen)));
  r.output("op", attention(uq, upv, upv).mask(cache_mask(ulen)));
  EXPECT_EQ(g.str(), r.str());
  EXPECT_EQ(g.hash(), r.hash());
}

// ---- loads -------------------------------------------------------------------------------

TEST(TypedLoads, IndexCountMatchesRank) {
  Graph g("g");
  auto slopes = g.param<f32>("slopes", H);
  auto bias = g.param<f32>("bias", H, dim<"R", 9>);
  IntExpr h = detail::int_index_var(ExprOp::IndexH);
  IntExpr qi = detail::int_index_var(ExprOp::IndexQ);
  IntExpr ki = detail::int_index_var(ExprOp::IndexKV);
  EXPECT_EQ(slopes[h].str(), "%0[h]");
  EXPECT_EQ(slopes(h).str(), "%0[h]");
  EXPECT_EQ(bias(h, qi - ki + 4).str(), "%1[h, q - kv + 4]");
  EXPECT_EQ(bias(h, 3).type(), ExprType::Float);
}

// Indices are integers by type: arithmetic on IntExprs stays IntExpr, a load from an
// integer tensor is one, a float load is a plain Expr (indexing with it does not compile:
// tests/compile_fail/load_float_index.cpp).
TEST(TypedLoads, IntegerIndicesByType) {
  Graph g("g");
  auto doc = g.input<i32>("doc", L);
  auto slopes = g.param<f32>("slopes", H);
  IntExpr qi = detail::int_index_var(ExprOp::IndexQ);
  IntExpr ki = detail::int_index_var(ExprOp::IndexKV);
  static_assert(same<decltype(doc[qi]), IntExpr>);
  static_assert(same<decltype(slopes[qi]), Expr>);
  static_assert(same<decltype(qi - ki), IntExpr>);
  static_assert(same<decltype(2 * qi % 3), IntExpr>);
  static_assert(same<decltype(max(0, min(qi / 4, len_q() - 1))), IntExpr>);
  static_assert(same<decltype(abs(-qi)), IntExpr>);
  static_assert(same<decltype(select(qi > ki, qi, 0)), IntExpr>);
  static_assert(same<decltype(qi * 0.5), Expr>);
  static_assert(same<decltype(qi - Expr(1.5)), Expr>);
  EXPECT_EQ(slopes[doc[qi] % 8].str(), "%1[%0[q] % 8]");
  EXPECT_EQ((qi * 0.5).type(), ExprType::Float);
}

// ---- the layers' cross-check --------------------------------------------------------------

TEST(TypedCrossCheck, AWrapperWithOtherDimsIsAnInternalError) {
  Graph g("g");
  Value x = g.input("x", DType::F32, {Dim("L"), Dim("D", 512)});
  // What a typed op would do if its compile-time dims drifted from the untyped rule.
  EXPECT_THROW((detail::wrap<TypedValue<f32, DL>>(x, "test")), InternalError);
  EXPECT_THROW((detail::wrap<TypedValue<f64, DL, DD>>(x, "test")), InternalError);
  EXPECT_NO_THROW((detail::wrap<TypedValue<f32, DL, DD>>(x, "test")));
  try {
    detail::wrap<TypedValue<f32, DD, DL>>(x, "test");
    ADD_FAILURE() << "dims in another order must be an InternalError";
  } catch (const InternalError &e) {
    EXPECT_NE(std::string(e.what()).find("f32 (D=512, L=?)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("f32 (L=?, D=512)"), std::string::npos) << e.what();
  }
}

TEST(TypedCrossCheck, AsTypedChecksTheUsersClaim) {
  Graph g("g");
  Value x = g.input("x", DType::F32, {Dim("L"), Dim("D", 512)});
  auto t = as_typed<f32>(x, L, D);
  static_assert(same<decltype(t), TypedValue<f32, DL, DD>>);
  EXPECT_EQ(t.value(), x);
  EXPECT_THROW(as_typed<f32>(x, L, F), Error);
  EXPECT_THROW(as_typed<i32>(x, L, D), Error);
  try {
    as_typed<f32>(x, D);
    ADD_FAILURE() << "no error";
  } catch (const Error &e) {
    EXPECT_EQ(std::string(e.what()), "as_typed: 'x' is f32 (L=?, D=512), not f32 (D=512)");
  }
}

} // namespace
