// Must compile: the positive control. It uses every typed op with the same flags and include
// paths as the failing snippets, so a snippet that fails, fails for its own reason.
// EXPECT-COMPILES
#include <qkv/dsl.hpp>

using namespace qkv;

constexpr auto B = dim<"B">;
constexpr auto L = dim<"L">;
constexpr auto S = dim<"S">;
constexpr auto K = dim<"K", 16>;
constexpr auto N = dim<"N", 32>;
constexpr auto H = dim<"H", 8>;
constexpr auto Hkv = dim<"Hkv", 2>;
constexpr auto Dh = dim<"Dh", 64>;

void build() {
  Graph g("g");
  auto x = g.input<f32>("x", B, L, K);
  auto w = g.param<f32>("w", K, N);
  auto bias = g.param<f32>("bias", N);
  auto ids = g.input<i32>("ids", B, L);
  auto table = g.param<f32>("table", dim<"V", 100>, N);
  auto e = g.param<f32>("e", dim<"Kp", 4>, L);
  auto slopes = constant<f32>(g, "slopes", {1, 2, 3, 4, 5, 6, 7, 8}, H);
  auto wq = g.param<f32>("wq", N, H * Dh);
  auto wk = g.param<f32>("wk", N, Hkv * Dh);

  auto y = linear(x, w, bias);
  auto q = rope(split_heads(linear(y, wq), H, Dh));
  auto k = split_heads(linear(y, wk), Hkv, Dh);
  auto o = attention(q, k, k)
               .scale(0.125)
               .mask(and_masks(causal_mask(), sliding_window_mask(128)))
               .score_mod([&](auto s, auto b, auto h, auto qi, auto ki) {
                 return s + slopes[h] * to_float(ki - qi);
               });
  auto z = merge_heads(o);
  auto m = merge_heads(o, dim<"M", 512>);
  auto scores = softmax(matmul(q, transpose(q)));
  auto masked = mask(score_mod(scores, [](auto s, auto, auto, auto, auto) { return s * 0.5; }),
                     [](auto, auto, auto qi, auto ki) { return qi >= ki; });
  auto t = transpose<0, 1>(x);
  auto t2 = transpose(x, L, K);
  auto s2 = softmax<1>(x);
  auto s3 = softmax(x, K);
  auto c = concat(y, y);
  auto c2 = concat<-1>(y, y, dim<"N2", 64>);
  auto ar = residual(y, (y + bias) - (y * y) / y) * 2.0;
  auto nrm = layer_norm(rms_norm(y, bias), bias, bias);
  auto act = swiglu(gelu(silu(elu(y))), sinusoidal_pe(y));
  auto emb = embedding(ids, table);
  auto lp = linformer_project(x, e);
  auto la = linear_attention(q, q, q);
  auto len = g.input<i64>("lengths", B);
  auto pos = g.input<i32>("positions", B, L);
  auto past = g.input<f32>("k_past", B, H, dim<"C", 64>, Dh);
  auto pool = g.input<f32>("k_pool", dim<"P">, H, dim<"page", 16>, Dh);
  auto bt = g.input<i32>("block_table", B, dim<"M", 4>);
  auto kc = cache_view(past, len, rope(q, pos));
  auto kp = paged_cache_view(pool, bt, len, q);
  auto oc = attention(q, kc, kc).mask(cache_mask(len));
  g.output("z", z.value());
  (void)m, (void)masked, (void)t, (void)t2, (void)s2, (void)s3, (void)c, (void)c2, (void)ar,
      (void)nrm, (void)act, (void)emb, (void)lp, (void)la, (void)kp, (void)oc;
}
