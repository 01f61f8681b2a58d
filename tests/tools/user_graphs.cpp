// A user's own graphs, registered for the qkv command line as a user's project would
// (QKV_TOOL_GRAPH, qkv_add_tool): the tests run every command of `qkv-user-tool` on them.
// None of them is in the gallery.
#include <qkv/qkv.hpp>
#include <qkv/tool.hpp>

namespace {

using namespace qkv;

constexpr auto B = dim<"B">;
constexpr auto L = dim<"L">;
constexpr auto H = dim<"H", 4>;
constexpr auto Dh = dim<"Dh", 32>;
constexpr auto D = dim<"D", 128>;
constexpr auto R = dim<"R">; // offsets of a relative-position table

/// Prefix LM whose prefix length is per sequence (an input), plus ALiBi slopes: the
/// baselines compute neither (the mask reads b, the scores are modified).
Graph prefix_alibi() {
  Graph g("prefix_alibi");
  auto q = g.input<f32>("q", B, H, L, Dh), k = g.input<f32>("k", B, H, L, Dh);
  auto v = g.input<f32>("v", B, H, L, Dh);
  auto prefix = g.input<i64>("prefix", B);
  auto slopes = g.param<f32>("slopes", H);
  auto o = attention(q, k, v)
               .mask([&](auto b, auto, auto qi, auto ki) { return ki <= qi || ki < prefix[b]; })
               .score_mod([&](auto s, auto, auto h, auto qi, auto ki) {
                 return s - slopes[h] * abs(qi - ki);
               });
  g.output("out", o.value());
  return g;
}

/// A prefix LM with a fixed prefix of 16: attention alone over q, k, v, a mask the
/// baselines take as a table of kept pairs.
Graph user_prefix_lm() {
  Graph g("user_prefix_lm");
  auto q = g.input<f32>("q", B, H, L, Dh), k = g.input<f32>("k", B, H, L, Dh);
  auto v = g.input<f32>("v", B, H, L, Dh);
  g.output("out",
           attention(q, k, v).mask([](auto, auto, auto qi, auto ki) { return ki <= qi || ki < 16; }).value());
  return g;
}

/// Differential attention (Ye et al. 2024): two softmax maps over one set of values, the
/// second subtracted with weight 0.5, as a block over x (B, L, D). Two attentions: the
/// baselines compute neither; `show` draws the first.
Graph diff_attn() {
  Graph g("diff_attn");
  auto x = g.input<f32>("x", B, L, D);
  auto w1 = g.param<f32>("wq1", D, H * Dh), w2 = g.param<f32>("wq2", D, H * Dh);
  auto u1 = g.param<f32>("wk1", D, H * Dh), u2 = g.param<f32>("wk2", D, H * Dh);
  auto wv = g.param<f32>("wv", D, H * Dh);
  auto wo = g.param<f32>("wo", D, D);
  auto heads = [&](auto w) { return split_heads(linear(x, w), H, Dh); };
  auto v = heads(wv);
  auto a1 = attention(heads(w1), heads(u1), v).mask(causal_mask());
  auto a2 = attention(heads(w2), heads(u2), v).mask(causal_mask());
  auto o = a1 - scale(a2, 0.5);
  g.output("y", linear(merge_heads(o, D), wo));
  return g;
}

/// A bias per head and relative offset from a table of R offsets, R bound at run time
/// (2L - 1 covers every offset): the compiler cannot prove the index within the table, so
/// a checked kernel checks it (and only it: gain[h] is proved).
Graph rel_bias() {
  Graph g("rel_bias");
  auto q = g.input<f32>("q", B, H, L, Dh), k = g.input<f32>("k", B, H, L, Dh);
  auto v = g.input<f32>("v", B, H, L, Dh);
  auto table = g.param<f32>("table", H, R);
  auto gain = g.param<f32>("gain", H); // proved: h is within H
  auto o = attention(q, k, v).score_mod([&](auto s, auto, auto h, auto qi, auto ki) {
    return s * gain(h) + table(h, qi - ki + len_kv() - 1);
  });
  g.output("out", o.value());
  return g;
}

/// No attention and a dynamic dim of another name: token features normalised.
Graph tokens() {
  Graph g("tokens");
  Dim T = g.dim("T"), F = g.dim("F", 48);
  Value x = g.input("x", DType::F32, {T, F});
  g.output("y", gelu(layer_norm(x)));
  return g;
}

QKV_TOOL_GRAPH({.name = "prefix_alibi",
                .description = "prefix LM with a prefix length per sequence, and ALiBi",
                .build = prefix_alibi,
                .dims = {{"B", 2}, {"L", 40}},
                .bench_dims = {{"B", 1}, {"L", 96}},
                .prepare = [](TensorMap &in) { // prefixes of 0 and 13 tokens
                  Tensor &p = in.at("prefix");
                  for (std::int64_t b = 0; b < p.numel(); ++b)
                    p.set(b, static_cast<double>(13 * b));
                }});
QKV_TOOL_GRAPH({.name = "user_prefix_lm",
                .description = "prefix LM, prefix of 16, attention alone",
                .build = user_prefix_lm,
                .dims = {{"B", 1}, {"L", 64}}});
QKV_TOOL_GRAPH({.name = "diff_attn",
                .description = "differential attention block, causal",
                .build = diff_attn,
                .dims = {{"B", 2}, {"L", 24}}});
QKV_TOOL_GRAPH({.name = "rel_bias",
                .description = "a bias per head and relative offset, from a table",
                .build = rel_bias,
                .dims = {{"B", 1}, {"L", 24}, {"R", 47}}});
QKV_TOOL_GRAPH({.name = "tokens",
                .description = "layer norm and GELU over T tokens",
                .build = tokens,
                .dims = {{"T", 10}}});

} // namespace
