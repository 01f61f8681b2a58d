// The benchmarks' flop and byte counts: the node-by-node count the variants use
// (graph_flops, graph_bytes) agrees with the fixed forms of the other gallery entries,
// and baselines run only where they compute what the graph does.
#include <gtest/gtest.h>

#include "workload.hpp"

namespace qkv::test {
namespace {

TEST(GalleryWorkload, NodeCountsAgreeWithTheFixedForms) {
  for (const auto &e : gallery::entries()) {
    if (e.variant)
      continue;
    for (const DimBindings &d : e.shapes) {
      SCOPED_TRACE(e.name);
      gallery::GraphShape s = e.with_dims(e.shape, d);
      if (e.self_attention())
        s.kv_len = s.seq;
      Graph g = e.build(s);
      TensorMap in = e.inputs(g, e.dims(s));
      EXPECT_EQ(gallery::graph_flops(g, in), gallery::flops(e, s));
      EXPECT_EQ(gallery::graph_bytes(g, in), gallery::bytes(e, s));
    }
  }
}

TEST(GalleryWorkload, BaselinesRunWhereTheyComputeTheGraph) {
  auto gap = [](const char *name) {
    const auto &e = gallery::find(name);
    return gallery::baseline_gap(e, e.build(), e.shape);
  };
  for (const char *name : {"causal_lm", "prefix_lm", "neighborhood_2d", "packed_documents",
                           "multihead", "grouped_query", "multi_query", "cross_attention", "mha"})
    EXPECT_EQ(gap(name), "") << name;
  EXPECT_EQ(gap("alibi"), "they compute no score_mod; 'alibi' has one");
  EXPECT_EQ(gap("linear_attn"), "they compute softmax attention; 'linear_attn' has none");
  EXPECT_EQ(gap("rope_block"), "their blocks are projections and attention; 'rope_block' has rope");
  // A mask that reads the batch index is one table only at batch 1.
  const auto &docs = gallery::find("packed_documents");
  gallery::GraphShape two = docs.shape;
  two.batch = 2;
  EXPECT_EQ(gallery::baseline_gap(docs, docs.build(two), two),
            "their mask is the same for every batch and head; the mask of 'packed_documents' "
            "is not");
}

// The kept pairs of a variant's flops come from its mask: the causal half plus the diagonal.
TEST(GalleryWorkload, VariantFlopsCountKeptPairs) {
  const auto &e = gallery::find("causal_lm");
  gallery::GraphShape s = e.shape;
  s.batch = 2;
  s.seq = s.kv_len = 100;
  Graph g = e.build(s);
  TensorMap in = e.inputs(g, e.dims(s));
  EXPECT_EQ(gallery::graph_flops(g, in), 4.0 * 64 * 2 * 8 * (100 * 101 / 2));
}

} // namespace
} // namespace qkv::test
