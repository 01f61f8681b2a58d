// qkv::tile_map: the fused kernel's tile classification. It must be sound for every mask
// of the gallery (a tile proved empty holds no kept pair, one proved full no masked
// pair), and exact (every empty and every full tile proved) for the masks and
// combinations the interval analysis sees through.
#include <algorithm>

#include "gallery.hpp"
#include "tile_checks.hpp"

namespace qkv::test {
namespace {

struct Case {
  std::string name;
  std::int64_t len, q_tile, kv_tile;
};

TileComparison compare_entry(const gallery::Entry &e, std::int64_t len, int q_tile, int kv_tile) {
  gallery::GraphShape s = e.shape;
  s.seq = s.kv_len = len;
  Graph g = e.build(s);
  TensorMap in = e.inputs(g, s);
  TileMapOptions o;
  o.q_tile = q_tile;
  o.kv_tile = kv_tile;
  return compare_tiles(g, in, o);
}

bool has_mask(const gallery::Entry &e) { return e.workload.mask != gallery::Workload::Mask::None; }

// Every masked entry, at lengths that are and are not multiples of the tiles, with square,
// narrow and wide tiles.
TEST(TileMap, SoundForEveryGalleryMask) {
  int checked = 0;
  for (const auto &e : gallery::entries()) {
    if (!has_mask(e))
      continue;
    for (std::int64_t len : {96, 200, 320})
      for (auto [qt, kt] : {std::pair{16, 16}, {32, 32}, {32, 48}}) {
        SCOPED_TRACE(e.name + " L=" + std::to_string(len) + " tiles " + std::to_string(qt) + "x" +
                     std::to_string(kt));
        TileComparison c = compare_entry(e, len, qt, kt);
        EXPECT_EQ(c.unsound, 0) << describe(c);
        EXPECT_TRUE(c.compiler.analysed);
      }
    ++checked;
  }
  EXPECT_GE(checked, 14);
}

class Exact : public ::testing::TestWithParam<std::string> {};

// The masks (and and_masks / or_masks combinations, a mod plus a mask) whose every empty
// and full tile the analysis proves.
TEST_P(Exact, EveryEmptyAndFullTileIsProved) {
  const auto &e = gallery::find(GetParam());
  for (std::int64_t len : {320, 1024}) {
    TileComparison c = compare_entry(e, len, 32, 32);
    EXPECT_TRUE(c.exact()) << e.name << " L=" << len << ": " << describe(c);
    EXPECT_GT(c.compiler.count(TileKind::Empty), 0) << e.name << ": nothing to skip";
  }
}

INSTANTIATE_TEST_SUITE_P(Gallery, Exact,
                         ::testing::Values("causal_lm", "sliding_window", "dilated_window",
                                           "prefix_lm", "shared_prefix", "neighborhood_2d",
                                           "block_diagonal", "alibi", "softcap", "sinusoidal_block",
                                           "rope_block", "attn_causal", "attn_window"),
                         [](const auto &info) { return info.param; });

// The analysis does not read captured tensors: the document ids of a packed row are data,
// so it proves only the causal half empty, and tiles between documents run masked.
TEST(TileMap, PackedDocumentsNotSeenThrough) {
  GTEST_SKIP() << "tile_map has no data: a load from a captured tensor at a range of positions "
                  "(doc[b, q] == doc[b, kv]) is unknown there; the kernel classifies those tiles "
                  "from each call's ids (Flash.TileCountsFollowTheData)";
  TileComparison c = compare_entry(gallery::find("packed_documents"), 1024, 32, 32);
  EXPECT_EQ(c.unproved_empty, 0) << describe(c);
}

// What it does prove there: exactly the tiles above the diagonal.
TEST(TileMap, PackedDocumentsProveTheCausalHalf) {
  TileComparison c = compare_entry(gallery::find("packed_documents"), 1024, 32, 32);
  EXPECT_EQ(c.unsound, 0);
  EXPECT_EQ(c.compiler.count(TileKind::Empty), 32 * 31 / 2) << describe(c);
  EXPECT_GT(c.unproved_empty, 0) << describe(c);
}

// An or of conditions that each cover part of a tile: abs(q - kv) <= 16 || q < 16 ||
// kv < 16 holds on all of tile (0, 0), but no disjunct holds on all of it, and intervals
// cannot split cases.
TEST(TileMap, LongformerCornerNotSeenThrough) {
  GTEST_SKIP() << "or_masks of a local window and global rows/columns: tile (0, 0) is full, "
                  "but each disjunct covers only part of it, so the interval analysis calls it "
                  "partial";
  TileComparison c = compare_entry(gallery::find("longformer"), 320, 32, 32);
  EXPECT_TRUE(c.exact()) << describe(c);
}

TEST(TileMap, LongformerProvesEveryEmptyTile) {
  TileComparison c = compare_entry(gallery::find("longformer"), 320, 32, 32);
  EXPECT_EQ(c.unsound, 0);
  EXPECT_EQ(c.unproved_empty, 0) << describe(c);
  EXPECT_EQ(c.unproved_full, 1) << describe(c);
  EXPECT_EQ(c.compiler.at(0, 0), TileKind::Partial);
}

// Past a million tiles, boxes of tiles are classified first and split where nothing is
// proved (qkv show at L = 100000): the map must be the one tile by tile gives, for every
// mask of the gallery (one_by_one = 0 takes the boxes at any size).
TEST(TileMap, BoxesOfTilesGiveTheSameMap) {
  int checked = 0;
  for (const auto &e : gallery::entries()) {
    if (!has_mask(e))
      continue;
    gallery::GraphShape s = e.shape;
    s.seq = s.kv_len = 333;
    Graph g = e.build(s);
    TensorMap in = e.inputs(g, s);
    const Node *att = nullptr;
    for (const Node &n : g.nodes())
      if (n.op == OpKind::Attention && !att)
        att = &n;
    for (auto [qt, kt] : {std::pair{16, 16}, {32, 48}}) {
      TileMapOptions o;
      o.attention = att->name;
      o.q_tile = qt;
      o.kv_tile = kt;
      TileMap one = tile_map(g, e.dims(s), o);
      o.one_by_one = 0;
      TileMap boxes = tile_map(g, e.dims(s), o);
      EXPECT_EQ(boxes.tiles, one.tiles) << e.name << " tiles " << qt << "x" << kt;
      EXPECT_EQ(boxes.analysed, one.analysed) << e.name;
    }
    ++checked;
  }
  EXPECT_GE(checked, 14);
  TileMapOptions bad;
  bad.one_by_one = -1;
  EXPECT_THROW(tile_map(gallery::find("causal_lm").build(), {{"B", 1}, {"L", 8}}, bad), Error);
}

TEST(TileMap, NoMaskIsAllFull) {
  TileComparison c = compare_entry(gallery::find("t5_bias"), 100, 32, 32);
  EXPECT_FALSE(c.compiler.analysed);
  EXPECT_EQ(c.compiler.count(TileKind::Full), 16);
  EXPECT_TRUE(c.exact());
}

TEST(TileMap, TileSizesFollowTheSchedule) {
  Graph g = gallery::find("causal_lm").build();
  DimBindings d = {{"B", 1}, {"L", 100}};
  TileMapOptions o;
  o.vector_bits = 512;
  EXPECT_EQ(tile_map(g, d, o).q_tile, 32); // two vectors of 16 f32 with a mask
  o.vector_bits = 256;
  TileMap t = tile_map(g, d, o);
  EXPECT_EQ(t.q_tile, 16);
  EXPECT_EQ(t.kv_tile, 16);
  EXPECT_EQ(t.rows, 7);
  o.q_tile = 20; // rounded down to whole vectors, as the kernel does
  o.kv_tile = 24;
  t = tile_map(g, d, o);
  EXPECT_EQ(t.q_tile, 16);
  EXPECT_EQ(t.kv_tile, 24);
  EXPECT_EQ(t.cols, 5);
}

// Two attention nodes: options.attention picks one by the name the graph gave it.
TEST(TileMap, PicksTheAttentionNodeByName) {
  Graph g("two");
  Dim B = g.dim("B"), L = g.dim("L"), H = g.dim("H", 2), Dh = g.dim("Dh", 16);
  Value q = g.input("q", DType::F32, {B, H, L, Dh});
  g.output("plain", attention(q, q, q).value().named("plain"));
  g.output("lm", attention(q, q, q).mask(causal_mask()).value().named("lm"));
  DimBindings d = {{"B", 1}, {"L", 100}};
  TileMapOptions o;
  o.attention = "lm";
  TileMap lm = tile_map(g, d, o);
  EXPECT_TRUE(lm.analysed);
  EXPECT_GT(lm.count(TileKind::Empty), 0);
  o.attention = "plain";
  TileMap plain = tile_map(g, d, o);
  EXPECT_FALSE(plain.analysed);
  EXPECT_EQ(plain.count(TileKind::Full), plain.rows * plain.cols);
}

TEST(TileMap, Errors) {
  Graph g = gallery::find("linear_attn").build();
  try {
    tile_map(g, {{"B", 1}, {"L", 8}});
    ADD_FAILURE() << "no error";
  } catch (const Error &e) {
    EXPECT_STREQ(e.what(), "tile_map: graph 'linear_attn' has 0 attention nodes");
  }
}

} // namespace
} // namespace qkv::test
