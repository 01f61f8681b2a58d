// A variant written here, outside the gallery, goes through the same checks as the
// gallery's: compiled vs interpreter on two shapes (one a new dynamic L), the compiler's
// tile classes against the mask pair by pair, and the flop count from the kept pairs.
//
// The variant: strided attention (the Sparse Transformer's fixed pattern, Child et al.
// 2019): causal, each position sees the 16 before it and every 16th "summary" position.
#include <qkv/qkv.hpp>

#include "differential.hpp"
#include "tile_checks.hpp"
#include "workload.hpp"

namespace qkv::test {
namespace {

constexpr auto B = dim<"B">;
constexpr auto L = dim<"L">;
constexpr auto H = dim<"H", 4>;
constexpr auto Dh = dim<"Dh", 32>;
constexpr std::int64_t stride = 16;

Graph strided() {
  Graph g("strided");
  auto q = g.input<f32>("q", B, H, L, Dh);
  auto k = g.input<f32>("k", B, H, L, Dh);
  auto v = g.input<f32>("v", B, H, L, Dh);
  auto local = mask_fn([](auto, auto, auto qi, auto ki) { return qi - ki < stride; });
  auto summary = mask_fn([](auto, auto, auto, auto ki) { return ki % stride == stride - 1; });
  auto o = attention(q, k, v).mask(and_masks(causal_mask(), or_masks(local, summary)));
  g.output("out", o.value());
  return g;
}

TEST(InlineVariant, MatchesTheInterpreter) {
  DiffCase c;
  c.name = "strided";
  c.build = strided;
  c.shapes = {{{"B", 2}, {"L", 64}}, {{"B", 1}, {"L", 157}}};
  c.sums({"Dh", "L"}, 1).large_inputs(10, 100);
  run_differential(c);
}

std::int64_t kept_by_hand(std::int64_t len) {
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < len; ++i)
    for (std::int64_t j = 0; j <= i; ++j)
      n += i - j < stride || j % stride == stride - 1;
  return n;
}

TEST(InlineVariant, TilesAreProvedExactly) {
  Graph g = strided();
  for (std::int64_t len : {157, 512}) {
    TensorMap in = random_inputs(g, {{"B", 1}, {"L", len}}, 1);
    TileMapOptions o;
    o.q_tile = o.kv_tile = 32;
    TileComparison c = compare_tiles(g, in, o);
    EXPECT_TRUE(c.exact()) << "L=" << len << ": " << describe(c);
    EXPECT_EQ(reference::mask_map(g, in, only_attention(g).id, 0, 0).kept(), kept_by_hand(len));
  }
}

TEST(InlineVariant, FlopsCountTheKeptPairs) {
  Graph g = strided();
  TensorMap in = random_inputs(g, {{"B", 2}, {"L", 100}}, 1);
  double pairs = static_cast<double>(kept_by_hand(100)) * 2 * 4; // B * H
  EXPECT_EQ(gallery::graph_flops(g, in), 4 * 32 * pairs);        // 2 (Dh + Dv) per pair
  EXPECT_EQ(gallery::graph_bytes(g, in), 4.0 * 4 * (2 * 4 * 100 * 32));
}

} // namespace
} // namespace qkv::test
