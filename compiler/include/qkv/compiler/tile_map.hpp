// What the fused attention kernel proves about each tile of a mask: the compiler's own
// block-sparsity analysis, run outside a kernel so that tools (`qkv show`) and tests can
// see it. MLIR-free header.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <qkv/dsl/graph.hpp>
#include <qkv/runtime/tensor.hpp>

namespace qkv {

/// How the kernel treats one (query tile, key tile): skipped (Empty: the mask is provably
/// false everywhere in it), run without mask code (Full: provably true everywhere), or run
/// with the mask evaluated per element (Partial: neither was proved).
enum class TileKind : std::uint8_t { Empty, Partial, Full };

struct TileMap {
  std::int64_t len_q = 0, len_kv = 0;   ///< the query and key extents
  std::int64_t q_tile = 0, kv_tile = 0; ///< queries and keys per tile
  std::int64_t rows = 0, cols = 0;      ///< tiles along the queries and the keys
  /// False when the mask's expression gives the analysis nothing to work with (every
  /// tile is Partial), or when there is no mask (every tile is Full).
  bool analysed = false;
  std::vector<TileKind> tiles; ///< rows x cols, row-major

  TileKind at(std::int64_t r, std::int64_t c) const { return tiles[r * cols + c]; }
  std::int64_t count(TileKind k) const;
};

struct TileMapOptions {
  /// The attention node of the graph, by name; empty: the graph's only attention node.
  std::string attention;
  std::int64_t batch = 0, head = 0; ///< the (b, h) the tiles are classified for
  /// Tile sizes as Schedule takes them (0: the kernel's default for a masked attention on
  /// this host: two vectors of f32 queries, as many keys), and the vector width (0: the
  /// host's widest), which the default tile sizes follow.
  int q_tile = 0, kv_tile = 0, vector_bits = 0;
  /// Up to this many tiles, each is classified on its own; past it boxes of tiles first
  /// (see tile_map). The tests set 0 to check that both give the same map.
  std::int64_t one_by_one = std::int64_t{1} << 20;
  /// The call's inputs by name (null: none). With them, the map is the one the kernel
  /// makes on that call: a mask that loads a captured tensor at points (`lengths[b]`) or
  /// at a range of positions (`doc[b, q] == doc[b, kv]`) is classified from these values,
  /// through range tables built as the kernel builds them. Without them such loads are
  /// unknown and their tiles partial, whatever the data. Only the tensors the mask
  /// captures are read; one it captures that is not here is an error naming it.
  const TensorMap *inputs = nullptr;
};

/// Classifies every tile of the attention node's mask at the extents `dims` gives its
/// dynamic dims, exactly as the fused kernel does: the graph is imported and taken
/// through the `qkv` stage of the CPU pipeline, and the attention op's mask region is
/// evaluated on intervals by the kernel's own tile classifier, one tile at a time (tile
/// (r, c) covers queries [r * q_tile, min(L, (r+1) * q_tile)) and the keys likewise).
/// The kernel classifies groups of 8 key tiles before the tiles themselves; a group
/// proves no more than its tiles do, so the tiles are what it skips. Attention with at
/// most 4 queries runs the decode kernel, which classifies nothing. Past
/// TileMapOptions::one_by_one tiles, boxes of tiles are classified first and split where
/// the analysis proves nothing, down to single tiles: what it proves of a box it proves
/// of each tile in it (its intervals only narrow), so the map is the same, in a fraction
/// of the time (a mask of 10^10 pairs has tens of millions of tiles). With
/// TileMapOptions::inputs the mask's loads from captured tensors read those values (the
/// per-call map of block maps from the data); a load that the inputs put out of bounds
/// is an error naming the tensor. Throws qkv::Error
/// naming the graph when it has no such attention node.
TileMap tile_map(const Graph &g, const DimBindings &dims, const TileMapOptions &options = {});

} // namespace qkv
