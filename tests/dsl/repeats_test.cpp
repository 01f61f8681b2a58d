// find_repeated_blocks: the runs of identical layers a graph repeats, what each block reads
// and what it hands on.
#include <algorithm>
#include <string>

#include <gtest/gtest.h>

#include <qkv/dsl/repeats.hpp>

#include <qkv_test/layer_stack.hpp>

namespace qkv {
namespace {

using test::LayerOptions;
Graph layers(int n, const LayerOptions &o = {}) { return test::layer_stack(n, o); }

/// The nodes of layer i: from its first param to the node before the next layer's.
NodeId first_of_layer(const Graph &g, int i) {
  return *g.find_argument("layer" + std::to_string(i) + ".w1");
}

TEST(RepeatedBlocks, FindsEveryLayerOfAStack) {
  Graph g = layers(4);
  std::vector<RepeatedBlocks> runs = find_repeated_blocks(g);
  ASSERT_EQ(runs.size(), 1u);
  const RepeatedBlocks &r = runs[0];
  EXPECT_EQ(r.count, 4);
  EXPECT_EQ(r.size, first_of_layer(g, 1) - first_of_layer(g, 0));
  EXPECT_EQ(r.start, first_of_layer(g, 0));
  ASSERT_EQ(r.externals.size(), 4u);
  for (int j = 0; j < 4; ++j) {
    // x (the layer before's result), then the six params in order of use.
    ASSERT_EQ(r.externals[j].size(), 7u) << "block " << j;
    EXPECT_EQ(r.externals[j][0], j == 0 ? r.start - 1 : r.start + j * r.size - 1) << "block " << j;
    EXPECT_EQ(g.node(r.externals[j][1]).name, "layer" + std::to_string(j) + ".w1");
  }
  // Only the last node is read after a block (by the next layer, or the softmax).
  EXPECT_EQ(r.results, std::vector<NodeId>{r.size - 1});
}

TEST(RepeatedBlocks, AnAttributeThatDiffersEndsTheRun) {
  Graph g = layers(5, {.odd_layer = 2});
  std::vector<RepeatedBlocks> runs = find_repeated_blocks(g);
  // Layer 2's LayerNorm (its own eps) belongs to no block; the layers around it pair up.
  NodeId odd = -1;
  for (const Node &n : g.nodes())
    if (n.op == OpKind::LayerNorm && n.attrs.eps == 2e-5)
      odd = n.id;
  ASSERT_GE(odd, 0);
  ASSERT_EQ(runs.size(), 2u);
  for (const RepeatedBlocks &r : runs) {
    EXPECT_EQ(r.count, 2);
    NodeId end = r.start + r.size * r.count;
    EXPECT_TRUE(odd < r.start || odd >= end)
        << "a run [" << r.start << ", " << end << ") takes the odd LayerNorm " << odd;
  }
}

TEST(RepeatedBlocks, ReadingOneValueTwiceIsNotReadingTwo) {
  // Layer 2 adds its input to itself, the others add the graph's input x0: the same ops on
  // the same types, but not the same function of the block's externals.
  Graph g("twice");
  Dim B("B"), L("L"), D("D", 16);
  Value x0 = g.input("x0", DType::F32, {B, L, D});
  Value x = scale(x0, 2.0);
  NodeId odd = -1;
  for (int i = 0; i < 4; ++i) {
    Value w = g.param("w" + std::to_string(i), DType::F32, {D, D});
    Value a = add(x, i == 2 ? x : x0);
    if (i == 2)
      odd = a.id();
    Value h = silu(gelu(linear(a, w)));
    x = layer_norm(add(a, scale(h, 0.5)), 1e-5);
    x = add(x, mul(x, sub(x, scale(x, 0.25))));
  }
  g.output("y", x);
  std::vector<RepeatedBlocks> runs = find_repeated_blocks(g);
  ASSERT_FALSE(runs.empty());
  for (const RepeatedBlocks &r : runs)
    EXPECT_TRUE(odd < r.start || odd >= r.start + r.size * r.count)
        << "layer 2's add(x, x) is in a block of add(x, x0)s";
}

TEST(RepeatedBlocks, SmallBlocksAreLeftAlone) {
  Graph g = layers(3);
  EXPECT_EQ(find_repeated_blocks(g, 100).size(), 0u);
  EXPECT_EQ(find_repeated_blocks(layers(1)).size(), 0u);
}

TEST(RepeatedBlocks, AValueReadAfterItsBlockIsAResult) {
  Graph g = layers(3, {.output_middle = true});
  std::vector<RepeatedBlocks> runs = find_repeated_blocks(g);
  ASSERT_EQ(runs.size(), 1u);
  const RepeatedBlocks &r = runs[0];
  NodeId gelu1 = g.outputs()[0].second; // "middle", in layer 1
  ASSERT_EQ(g.outputs()[0].first, "middle");
  NodeId k = (gelu1 - r.start) % r.size;
  EXPECT_EQ(r.results, (std::vector<NodeId>{k, r.size - 1}));
}

TEST(RepeatedBlocks, ATensorEveryMaskReadsIsOneExternal) {
  Graph g = layers(3, {.masked = true});
  std::vector<RepeatedBlocks> runs = find_repeated_blocks(g);
  ASSERT_EQ(runs.size(), 1u);
  NodeId lengths = *g.find_argument("lengths");
  for (const std::vector<NodeId> &ext : runs[0].externals)
    EXPECT_EQ(std::count(ext.begin(), ext.end(), lengths), 1) << "every block reads lengths";
}

TEST(RepeatedBlocks, AMaskWrittenOtherwiseDoesNotMatch) {
  Graph g("masks");
  Dim B("B"), L("L"), H("H", 2), Dh("Dh", 8), D("D", 16);
  Value x = g.input("x", DType::F32, {B, L, D});
  Value n = g.input("n", DType::I64, {B});
  for (int i = 0; i < 4; ++i) {
    Value w = g.param("w" + std::to_string(i), DType::F32, {D, D});
    Value h = linear(x, w);
    Value q = split_heads(gelu(h), H, Dh);
    Attention a = attention(q, q, q);
    if (i == 2)
      a.mask([n](Expr b, Expr, Expr q_, Expr kv) { return kv <= n[b] + q_; });
    else
      a.mask([n](Expr b, Expr, Expr, Expr kv) { return kv < n[b]; });
    x = layer_norm(add(x, silu(scale(merge_heads(a, D), 0.5))), 1e-5);
    x = add(x, scale(x, 0.25));
  }
  g.output("y", x);
  for (const RepeatedBlocks &r : find_repeated_blocks(g))
    for (int j = 0; j < r.count; ++j) {
      NodeId w2 = *g.find_argument("w2");
      EXPECT_FALSE(w2 >= r.start + j * r.size && w2 < r.start + (j + 1) * r.size)
          << "the layer with the other mask is in a block";
    }
}

} // namespace
} // namespace qkv
