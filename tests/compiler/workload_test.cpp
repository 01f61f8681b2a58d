// The benchmarks' flop and byte counts: the node-by-node count the variants use
// (graph_flops, graph_bytes) agrees with the fixed forms of the other gallery entries,
// and baselines run only where they compute what the graph does.
#include <gtest/gtest.h>

#include <qkv/runtime/interpreter.hpp>

#include "gallery.hpp"
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
      TensorMap in = e.inputs(g, s);
      EXPECT_EQ(gallery::graph_flops(g, in), gallery::flops(e, s));
      EXPECT_EQ(gallery::graph_bytes(g, in), gallery::bytes(e, s));
    }
  }
}

// A decode step over a paged cache counts the rows it attends: the pool's pages past the
// cached rows (the last page's tail) are not read, so not counted; lengths and the block
// table are.
TEST(GalleryWorkload, PagedDecodeCountsTheRowsItReads) {
  const auto &e = gallery::find("decode");
  for (std::int64_t rows : {64, 77}) {
    SCOPED_TRACE(rows);
    gallery::GraphShape s = e.shape;
    s.kv_len = rows;
    s.paged = true;
    Graph g = e.build(s);
    TensorMap in = e.inputs(g, s);
    std::int64_t pages = (rows + 15) / 16, unread = pages * 16 - rows;
    EXPECT_EQ(e.dims(s), (DimBindings{{"B", s.batch}, {"M", pages}, {"P", s.batch * pages}}));
    EXPECT_EQ(gallery::graph_flops(g, in),
              4.0 * s.batch * s.heads * s.head_dim * static_cast<double>(rows + 1));
    EXPECT_EQ(gallery::graph_bytes(g, in) - gallery::bytes(e, s),
              2.0 * 4 * static_cast<double>(s.batch * s.kv_heads * unread * s.head_dim));
    s.paged = false;
    EXPECT_EQ(gallery::bytes(e, s) + 4.0 * static_cast<double>(s.batch * pages),
              gallery::bytes(e, gallery::GraphShape{s.batch, s.heads, s.kv_heads, 1, rows,
                                                    s.head_dim, 256, true}));
  }
}

// A Llama-sized decode step is memory bound: its bytes are the cached K, V rows it reads,
// 2 * S * Hkv * Dh floats, give or take the few new rows, q, out, lengths and block table
// (B = 1, H = Hkv = 8, S = 32768, Dh = 128: 256 MiB of cache, 8 KiB of block table).
TEST(GalleryWorkload, DecodeBytesAreTheCacheRowsRead) {
  const auto &e = gallery::find("decode");
  gallery::GraphShape s = e.bench_shape;
  s.batch = 1;
  s.heads = s.kv_heads = 8;
  s.kv_len = 32768;
  s.head_dim = 128;
  const double cache = 2.0 * 32768 * 8 * 128 * 4, row = 8 * 128 * 4;
  for (bool paged : {false, true}) {
    SCOPED_TRACE(paged);
    s.paged = paged;
    // + the new k, v rows, q, out; lengths (i64); the block table (2048 i32 pages)
    EXPECT_EQ(gallery::bytes(e, s), cache + 4 * row + 8 + (paged ? 4.0 * 2048 : 0.0));
    EXPECT_NEAR(gallery::bytes(e, s) / cache, 1.0, 1e-3);
    EXPECT_EQ(gallery::flops(e, s), 4.0 * 8 * 128 * 32769);
  }
}

// The baselines read dense k, v built from the cache (gathered through the block table
// when paged) and compute what the graph does, at odd cache lengths and under GQA.
TEST(GalleryWorkload, DecodeBaselinesReadTheCacheGathered) {
  const auto &e = gallery::find("decode");
  for (bool paged : {false, true})
    for (std::int64_t rows : {1, 17, 100}) {
      SCOPED_TRACE(std::string(paged ? "paged " : "contiguous ") + std::to_string(rows));
      gallery::GraphShape s = e.shape;
      s.batch = 3;
      s.kv_len = rows;
      s.paged = paged;
      Graph g = e.build(s);
      TensorMap in = e.inputs(g, s);
      const Tensor want = reference::run(g, in).at("out");
      TensorMap dense = gallery::baseline_inputs(e, s, in);
      EXPECT_EQ(dense.at("k").shape(), (Shape{3, s.kv_heads, rows + 1, s.head_dim}));
      Tensor got(DType::F32, want.shape());
      gallery::run_baseline(bench::Baseline::Reference, e, s, dense, got, 1);
      for (std::int64_t i = 0; i < want.numel(); ++i)
        ASSERT_NEAR(got.get(i), want.get(i), 1e-5) << i;
    }
}

TEST(GalleryWorkload, BaselinesRunWhereTheyComputeTheGraph) {
  auto gap = [](const char *name) {
    const auto &e = gallery::find(name);
    return gallery::baseline_gap(e, e.build(), e.shape);
  };
  for (const char *name :
       {"causal_lm", "prefix_lm", "neighborhood_2d", "packed_documents", "multihead",
        "grouped_query", "multi_query", "cross_attention", "mha", "decode"})
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
  TensorMap in = e.inputs(g, s);
  EXPECT_EQ(gallery::graph_flops(g, in), 4.0 * 64 * 2 * 8 * (100 * 101 / 2));
}

} // namespace
} // namespace qkv::test
