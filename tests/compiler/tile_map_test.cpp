// qkv::tile_map: the fused kernel's tile classification. It must be sound for every mask
// of the gallery (a tile proved empty holds no kept pair, one proved full no masked
// pair), and exact (every empty and every full tile proved) for the masks and
// combinations the interval analysis sees through.
#include <algorithm>
#include <functional>
#include <limits>

#include <qkv/compiler/compile.hpp>

#include "gallery.hpp"
#include "tile_checks.hpp"

namespace qkv::test {
namespace {

struct Case {
  std::string name;
  std::int64_t len, q_tile, kv_tile;
};

/// The entry's map against the truth on its inputs; with `data` the map is the per-call
/// one (TileMapOptions::inputs), without it the one that knows only the graph.
TileComparison compare_entry(const gallery::Entry &e, std::int64_t len, int q_tile, int kv_tile,
                             bool data = false) {
  gallery::GraphShape s = e.shape;
  s.seq = s.kv_len = len;
  Graph g = e.build(s);
  TensorMap in = e.inputs(g, s);
  TileMapOptions o;
  o.q_tile = q_tile;
  o.kv_tile = kv_tile;
  o.inputs = data ? &in : nullptr;
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
        for (bool data : {false, true}) {
          TileComparison c = compare_entry(e, len, qt, kt, data);
          EXPECT_EQ(c.unsound, 0) << describe(c) << (data ? " (with the inputs)" : "");
          // padding's mask is only a loaded length against the key: without the inputs
          // there is nothing to bound.
          if (data || e.name != "padding")
            EXPECT_TRUE(c.compiler.analysed);
        }
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
  for (std::int64_t len : {320, 1024})
    for (bool data : {false, true}) {
      TileComparison c = compare_entry(e, len, 32, 32, data);
      EXPECT_TRUE(c.exact()) << e.name << " L=" << len << (data ? " with the inputs" : "") << ": "
                             << describe(c);
      EXPECT_GT(c.compiler.count(TileKind::Empty), 0) << e.name << ": nothing to skip";
    }
}

INSTANTIATE_TEST_SUITE_P(Gallery, Exact,
                         ::testing::Values("causal_lm", "sliding_window", "dilated_window",
                                           "prefix_lm", "shared_prefix", "neighborhood_2d",
                                           "block_diagonal", "alibi", "softcap", "sinusoidal_block",
                                           "rope_block", "attn_causal", "attn_window"),
                         [](const auto &info) { return info.param; });

// Given the call's inputs, the map reads the document ids as the kernel does (range tables
// of doc's rows): every tile between documents is proved empty, every tile inside one
// document and under the diagonal full.
TEST(TileMap, PackedDocumentsSeenThroughWithTheirIds) {
  for (std::int64_t len : {320, 1024}) {
    TileComparison c = compare_entry(gallery::find("packed_documents"), len, 32, 32, true);
    EXPECT_TRUE(c.exact()) << "L=" << len << ": " << describe(c);
    std::int64_t rows = c.compiler.rows;
    EXPECT_GT(c.compiler.count(TileKind::Empty), rows * (rows - 1) / 2) << describe(c);
  }
}

// Lengths read from a tensor per sequence (a prompt's prefix, a sentence's padding): given
// the call's inputs every empty and every full tile is proved, as with a constant; without
// them only what the rest of the mask says (the causal half of the prefix LM, nothing of
// the padding).
TEST(TileMap, LengthsFromTensorsSeenThroughWithTheirValues) {
  for (const char *name : {"prefix_lm_lengths", "padding"})
    for (std::int64_t len : {320, 1024}) {
      TileComparison c = compare_entry(gallery::find(name), len, 32, 32, true);
      EXPECT_TRUE(c.exact()) << name << " L=" << len << ": " << describe(c);
      EXPECT_GT(c.compiler.count(TileKind::Empty), 0)
          << name << " L=" << len << ": " << describe(c);
      EXPECT_GT(c.compiler.count(TileKind::Full), 0) << name << " L=" << len << ": " << describe(c);
    }
  std::int64_t rows = 1024 / 32;
  TileComparison prefix = compare_entry(gallery::find("prefix_lm_lengths"), 1024, 32, 32);
  EXPECT_EQ(prefix.unsound, 0);
  EXPECT_EQ(prefix.compiler.count(TileKind::Empty), 0) << describe(prefix);
  EXPECT_EQ(prefix.compiler.count(TileKind::Full), rows * (rows - 1) / 2) << describe(prefix);
  TileComparison padding = compare_entry(gallery::find("padding"), 1024, 32, 32);
  EXPECT_EQ(padding.unsound, 0);
  EXPECT_FALSE(padding.compiler.analysed) << describe(padding);
}

// Without them the ids are unknown, and the map proves only the causal half empty.
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

// A mask whose interval ends wrap: (q - kv) * 2^63 + 2^63 == 0 (mod 2^64) keeps the
// pairs where q - kv is odd. At a tile's range ends (odd differences) both products are
// -2^63 and the sum 0, so unguarded interval arithmetic would call every tile full and
// run it without the mask (keeping every pair). The classifier requires sums within
// +-2^62 and products within +-2^31 (TileClassifier.cpp, IntervalEval::inRange): the
// tiles are partial, and the kernel computes the interpreter's outputs.
TEST(TileMap, NeverRestsOnWrappedArithmetic) {
  constexpr auto B = dim<"B">;
  constexpr auto L = dim<"L">;
  Graph g("odd_offsets");
  auto q = g.input<f32>("q", B, dim<"H", 2>, L, dim<"Dh", 8>);
  constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
  auto o = attention(q, q, q).mask(
      [&](auto, auto, auto qi, auto ki) { return (qi - ki) * kMin + kMin == 0; });
  g.output("o", o.value());
  TensorMap in = random_inputs(g, {{"B", 1}, {"L", 96}}, 3);
  TileMapOptions opts;
  opts.q_tile = opts.kv_tile = 32;
  TileComparison c = compare_tiles(g, in, opts);
  EXPECT_EQ(c.unsound, 0) << describe(c);
  EXPECT_EQ(c.compiler.count(TileKind::Full), 0);
  Kernel k = compile(g);
  Comparison d = compare(k.run(in).at("o"), reference::run(g, in).at("o"), 1e-5, 1e-4);
  EXPECT_TRUE(d.ok) << d.message;
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

/// Attention of one head over `doc`'s documents (doc[qi] == doc[ki]), or with `lengths`
/// over each sequence's first lengths[b] keys; B and L dynamic.
Graph data_mask_graph(bool padding) {
  Graph g(padding ? "padding" : "docs");
  Dim B = g.dim("B"), L = g.dim("L"), H = g.dim("H", 1), Dh = g.dim("Dh", 16);
  Value q = g.input("q", DType::F32, {B, H, L, Dh});
  Value doc = g.input("doc", DType::I32, {L});
  Value lengths = g.input("lengths", DType::I32, {B});
  if (padding)
    g.output("o", attention(q, q, q)
                      .mask([&](auto b, auto, auto, auto kv) { return kv < lengths[b]; })
                      .value());
  else
    g.output("o", attention(q, q, q)
                      .mask([&](auto, auto, auto qi, auto ki) { return doc[qi] == doc[ki]; })
                      .value());
  return g;
}

TensorMap data_mask_inputs(const Graph &g, std::int64_t batch, std::int64_t len,
                           const std::function<std::int64_t(std::int64_t)> &id,
                           const std::vector<std::int64_t> &lengths) {
  TensorMap in = random_inputs(g, {{"B", batch}, {"L", len}}, 3);
  for (std::int64_t i = 0; i < len; ++i)
    in.at("doc").set(i, static_cast<double>(id(i)));
  for (std::int64_t b = 0; b < batch; ++b)
    in.at("lengths").set(b, static_cast<double>(lengths[static_cast<std::size_t>(b)]));
  return in;
}

// The per-call map is the kernel's: its tile counts on the same inputs (summed over the
// batch) are the map's, for sorted, random and single document ids and padded lengths;
// and the map follows the tensor alone (same graph, same dims, other ids or lengths).
TEST(TileMap, WithTheInputsItIsTheKernelsMap) {
  std::int64_t len = 100, batch = 3;
  std::vector<std::pair<std::string, std::function<std::int64_t(std::int64_t)>>> ids = {
      {"one", [](std::int64_t) { return 4; }},
      {"sorted", [](std::int64_t i) { return i / 12 + (i > 40) + 2 * (i > 70); }},
      {"random", [](std::int64_t i) { return (i * 7919 % 13) / 5; }}};
  std::vector<std::int64_t> lengths = {100, 37, 0};
  for (bool padding : {false, true}) {
    Graph g = data_mask_graph(padding);
    CompileOptions co;
    co.schedule.q_tile = co.schedule.kv_tile = 8;
    co.schedule.decode_rows = 1;
    Kernel kernel = compile(g, Target::host(), co);
    std::vector<std::vector<TileKind>> maps;
    for (const auto &[name, id] : ids) {
      SCOPED_TRACE((padding ? "padding, ids " : "docs, ids ") + name);
      TensorMap in = data_mask_inputs(g, batch, len, id, lengths);
      TileMapOptions o;
      o.q_tile = o.kv_tile = 8;
      o.inputs = &in;
      std::int64_t tiles = 0, empty = 0, full = 0;
      for (o.batch = 0; o.batch < batch; ++o.batch) {
        TileComparison c = compare_tiles(g, in, o);
        EXPECT_EQ(c.unsound, 0) << describe(c);
        tiles += c.compiler.rows * c.compiler.cols;
        empty += c.compiler.count(TileKind::Empty);
        full += c.compiler.count(TileKind::Full);
        maps.push_back(c.compiler.tiles);
      }
      TileCounts before = kernel.tile_counts().at(0);
      kernel.run(in);
      TileCounts after = kernel.tile_counts().at(0);
      EXPECT_EQ(after.tiles - before.tiles, tiles);
      EXPECT_EQ(after.empty() - before.empty(), empty);
      EXPECT_EQ(after.full - before.full, full);
    }
    if (padding) { // lengths 100, 37, 0: all full, a boundary, all empty; ids unread
      EXPECT_EQ(maps[0], maps[3]);
      EXPECT_NE(maps[0], maps[1]);
      EXPECT_NE(maps[1], maps[2]);
    } else { // the same map for each batch; other ids, another map
      EXPECT_EQ(maps[0], maps[1]);
      EXPECT_NE(maps[0], maps[3]);
      EXPECT_NE(maps[3], maps[6]);
    }
  }
}

/// What tile_map(g, d, o) throws ("" when it does not).
std::string error_of(const Graph &g, const DimBindings &d, const TileMapOptions &o) {
  try {
    tile_map(g, d, o);
  } catch (const Error &e) {
    return e.what();
  }
  return "";
}

TEST(TileMap, InputsThatDoNotFitAreErrors) {
  Graph g = data_mask_graph(false);
  DimBindings d = {{"B", 1}, {"L", 64}};
  TensorMap in = data_mask_inputs(g, 1, 64, [](std::int64_t i) { return i / 16; }, {64});
  TileMapOptions o;
  TensorMap missing = in;
  missing.erase("doc");
  o.inputs = &missing;
  EXPECT_EQ(error_of(g, d, o), "tile_map: the mask of graph 'docs' reads 'doc'; "
                               "TileMapOptions::inputs has no tensor of that name");
  TensorMap wide = in;
  wide["doc"] = Tensor(DType::I32, {2, 64});
  o.inputs = &wide;
  EXPECT_EQ(error_of(g, d, o),
            "tile_map: input 'doc' has shape (2, 64); graph 'docs' takes it as tensor<?xi32>");
  Graph pad = data_mask_graph(true);
  TensorMap p = data_mask_inputs(pad, 1, 64, [](std::int64_t) { return 0; }, {64});
  o.inputs = &p;
  o.batch = 1; // lengths has one element
  EXPECT_EQ(error_of(pad, d, o),
            "tile_map: the mask loads lengths at (1), out of bounds of its shape (1)");
}

TEST(TileMap, Errors) {
  Graph g = gallery::find("linear_attn").build();
  EXPECT_EQ(error_of(g, {{"B", 1}, {"L", 8}}, {}),
            "tile_map: graph 'linear_attn' has 0 attention nodes");
}

} // namespace
} // namespace qkv::test
