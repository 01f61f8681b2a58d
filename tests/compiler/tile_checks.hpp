// The compiler's tile classes (qkv::tile_map) against the truth (the mask evaluated at
// every pair by the interpreter), shared by the tile map and inline variant tests.
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <qkv/compiler/tile_map.hpp>
#include <qkv/runtime/interpreter.hpp>
#include <qkv/runtime/kernel.hpp>

namespace qkv::test {

struct TileComparison {
  TileMap compiler;
  std::vector<TileKind> truth; ///< the tiles' classes by brute force, row-major
  int unsound = 0;             ///< tiles proved empty or full that are not: a compiler bug
  int unproved_empty = 0;      ///< truly empty tiles the analysis does not prove empty
  int unproved_full = 0;       ///< truly full tiles the analysis does not prove full
  bool exact() const { return unsound + unproved_empty + unproved_full == 0; }
};

/// The only attention node of g.
inline const Node &only_attention(const Graph &g) {
  const Node *found = nullptr;
  for (const Node &n : g.nodes())
    if (n.op == OpKind::Attention) {
      EXPECT_EQ(found, nullptr) << "graph '" << g.name() << "' has more than one attention";
      found = &n;
    }
  if (!found)
    throw std::runtime_error("graph '" + g.name() + "' has no attention");
  return *found;
}

inline TileComparison compare_tiles(const Graph &g, const TensorMap &in, TileMapOptions o) {
  const Node &att = only_attention(g);
  o.attention = att.name;
  TileComparison c;
  c.compiler = tile_map(g, bind_dims(g, signature(in)), o);
  reference::MaskMap m = reference::mask_map(g, in, att.id, o.batch, o.head);
  const TileMap &t = c.compiler;
  EXPECT_EQ(t.len_q, m.len_q);
  EXPECT_EQ(t.len_kv, m.len_kv);
  for (std::int64_t r = 0; r < t.rows; ++r)
    for (std::int64_t col = 0; col < t.cols; ++col) {
      std::int64_t kept = 0, all = 0;
      for (std::int64_t i = r * t.q_tile; i < std::min(m.len_q, (r + 1) * t.q_tile); ++i)
        for (std::int64_t j = col * t.kv_tile; j < std::min(m.len_kv, (col + 1) * t.kv_tile); ++j) {
          kept += m.at(i, j);
          ++all;
        }
      TileKind truth = kept == 0     ? TileKind::Empty
                       : kept == all ? TileKind::Full
                                     : TileKind::Partial;
      TileKind got = t.at(r, col);
      c.truth.push_back(truth);
      c.unsound += got != TileKind::Partial && got != truth;
      c.unproved_empty += truth == TileKind::Empty && got != TileKind::Empty;
      c.unproved_full += truth == TileKind::Full && got != TileKind::Full;
    }
  return c;
}

/// "tile map 8 x 8 of 32 x 32: 28 empty, 28 full, 8 partial (true: ...)", for messages.
inline std::string describe(const TileComparison &c) {
  auto truly = [&](TileKind k) { return std::count(c.truth.begin(), c.truth.end(), k); };
  const TileMap &t = c.compiler;
  return "tile map " + std::to_string(t.rows) + " x " + std::to_string(t.cols) + " of " +
         std::to_string(t.q_tile) + " x " + std::to_string(t.kv_tile) + ": " +
         std::to_string(t.count(TileKind::Empty)) + " empty, " +
         std::to_string(t.count(TileKind::Full)) + " full, " +
         std::to_string(t.count(TileKind::Partial)) +
         " partial (true: " + std::to_string(truly(TileKind::Empty)) + " empty, " +
         std::to_string(truly(TileKind::Full)) + " full, " +
         std::to_string(truly(TileKind::Partial)) + " partial)";
}

} // namespace qkv::test
