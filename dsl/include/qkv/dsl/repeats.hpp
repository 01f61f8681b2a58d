// Repeated blocks: the runs of structurally identical layers in a graph.
//
// A model written as one graph repeats its layer: the same ops, on the same shapes, each
// layer reading its own params and the layer before it. find_repeated_blocks finds such
// runs in a graph's node list, so that the compiler can make one function of a block and
// call it once per instance: a graph's compile time then grows with its distinct layers,
// not with its depth.
#pragma once

#include <cstdint>
#include <vector>

#include <qkv/dsl/graph.hpp>

namespace qkv {

/// `count` consecutive blocks of `size` nodes from `start` (block j is nodes
/// [start + j*size, start + (j+1)*size)) that compute the same function of their
/// externals: the same ops, dtypes, dims and attributes, each input at the same place in
/// the block or the same external. Inputs and params are never part of that function:
/// those made inside a block are externals of it like any value made before it.
struct RepeatedBlocks {
  NodeId start = 0;
  NodeId size = 0;
  int count = 0;
  /// Per block, what it reads that it does not compute (values made before it, and the
  /// inputs and params made inside it), in the order of first use: the function's
  /// arguments. Block j's k-th external has the dtype and dims of block 0's.
  std::vector<std::vector<NodeId>> externals;
  /// The offsets (in a block) of the values read after their block in any instance, or
  /// output by the graph, ascending: the function's results.
  std::vector<NodeId> results;
};

/// Blocks smaller than this many ops (nodes other than inputs and params) are not worth a
/// function of their own.
inline constexpr int kMinRepeatedOps = 8;

/// The runs of repeated blocks, in node order and disjoint, chosen greedily: the run that
/// leaves out the most ops ((count - 1) x ops per block) first, then the best of what is
/// left, and so on; a block's size is the smallest that gives the run its count. Every
/// block has at least `min_ops` ops.
std::vector<RepeatedBlocks> find_repeated_blocks(const Graph &g, int min_ops = kMinRepeatedOps);

} // namespace qkv
