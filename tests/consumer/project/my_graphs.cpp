// A user's graphs for the qkv command line (qkv_add_tool in CMakeLists.txt): none of them
// is in qkv's gallery.
#include <qkv/qkv.hpp>
#include <qkv/tool.hpp>

namespace {

using namespace qkv;

constexpr auto B = dim<"B">;
constexpr auto L = dim<"L">;
constexpr auto H = dim<"H", 4>;
constexpr auto Hkv = dim<"Hkv", 2>;
constexpr auto Dh = dim<"Dh", 16>;

/// Sliding window of 24 keys plus 4 "sink" tokens every query sees: attention alone over
/// q, k, v, so qkv bench runs its baselines (the mask as a table of kept pairs).
Graph sink_window() {
  Graph g("sink_window");
  auto q = g.input<f32>("q", B, H, L, Dh), k = g.input<f32>("k", B, H, L, Dh);
  auto v = g.input<f32>("v", B, H, L, Dh);
  auto o = attention(q, k, v).mask(
      [](auto, auto, auto qi, auto ki) { return ki <= qi && (qi - ki < 24 || ki < 4); });
  g.output("out", o.value());
  return g;
}

/// Gemma-2 style: grouped-query heads (4 over 2), RoPE on q and k, a causal window of 32
/// and scores soft-capped at 30.
Graph softcap_gqa() {
  Graph g("softcap_gqa");
  auto q = g.input<f32>("q", B, H, L, Dh);
  auto k = g.input<f32>("k", B, Hkv, L, Dh);
  auto v = g.input<f32>("v", B, Hkv, L, Dh);
  auto o = attention(rope(q), rope(k), v)
               .mask(sliding_window_mask(32))
               .score_mod([](auto s, auto, auto, auto, auto) { return 30.0 * tanh(s / 30.0); });
  g.output("out", o.value());
  return g;
}

QKV_TOOL_GRAPH({.name = "sink_window",
                .description = "sliding window of 24 plus 4 sink tokens",
                .build = sink_window,
                .dims = {{"B", 1}, {"L", 64}},
                .bench_dims = {{"B", 1}, {"L", 256}}});
QKV_TOOL_GRAPH({.name = "softcap_gqa",
                .description = "GQA 4/2, RoPE, window of 32, soft cap 30",
                .build = softcap_gqa,
                .dims = {{"B", 2}, {"L", 50}}});

} // namespace
