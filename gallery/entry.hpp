// The graphs the qkv tool, the benchmarks and the tests work on: what `list`, `dump`, `run`,
// `bench` and `show` take by name. An Entry builds its graph from a GraphShape: the static sizes of a built-in graph
// (heads, head dim, model dim, window, the query length of a decode graph) become static
// dims of the graph; the dynamic ones (batch B, query length L, key/value length S, a KV
// cache's capacity C, and any other dim of a user's graph) are bound at run time from the
// shape by Entry::dims.
//
// The `qkv` binary's entries are the built-in gallery (gallery.hpp); a user's tool has the
// graphs it registered (<qkv/tool.hpp>, made into entries by user_entry in
// tools/qkv/registry.hpp). The benchmarks and the tests take the gallery's entries alone.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <qkv/dsl/graph.hpp>
#include <qkv/runtime/tensor.hpp>

namespace qkv::gallery {

struct Variant; // examples/gallery/variants.hpp

/// The sizes a graph is built and run at. Which fields an entry uses is in its
/// description; the model dim of the projection blocks is D = heads * head_dim.
struct GraphShape {
  std::int64_t batch = 1;
  std::int64_t heads = 1;
  std::int64_t kv_heads = 1; ///< heads of k and v (GQA/MQA when fewer than heads)
  std::int64_t seq = 1;      ///< query length L
  std::int64_t kv_len = 1;   ///< key/value length S (= seq for self-attention blocks)
  std::int64_t head_dim = 1;
  std::int64_t window = 256; ///< keys a sliding-window query sees (itself included)
  /// A KV-cache graph (Workload::cache) reads its cache through a block table of pages
  /// of kPageRows rows (paged_cache_view) instead of one contiguous buffer (cache_view).
  bool paged = false;
  /// The element type of the graph's float inputs and weights (f32, f16 or bf16); the
  /// variants of examples/gallery/ have theirs in their types (f32).
  DType dtype = DType::F32;
  /// A user's graph: the extents of its dynamic dims other than B, L and S.
  DimBindings other = {};

  static constexpr std::int64_t kPageRows = 16;

  std::int64_t model_dim() const { return heads * head_dim; }
  /// Pages of kPageRows rows that hold kv_len rows: a paged sequence's block-table width.
  std::int64_t pages_per_seq() const { return (kv_len + kPageRows - 1) / kPageRows; }
};

/// What a graph computes, in the terms the benchmarks count flops and run baselines in.
struct Workload {
  /// Attention: inputs q (B, H, L, Dh), k and v (B, Hkv, S, Dh), output "out".
  /// Block: x (B, L, D) [and memory (B, S, D)] projected by wq, wk, wv, attention per
  /// head, merged heads [projected by wo], output "y" (or "out" without wo).
  enum class Form { Attention, Block } form = Form::Attention;
  /// Expr: any other mask expression; its kept pairs are counted by evaluating it.
  enum class Mask { None, Causal, Window, Expr } mask = Mask::None;
  bool cross = false;   ///< Block: keys and values come from the input "memory"
  bool out_proj = true; ///< Block: ends with the output projection wo
  /// Attention: one decode step over a KV cache read in place. q (B, H, 1, Dh), this
  /// step's k_new, v_new (B, Hkv, 1, Dh), lengths (B) and the cache (k_past, v_past
  /// (B, Hkv, C, Dh); or with GraphShape::paged k_pool, v_pool (P, Hkv, 16, Dh) and
  /// block_table (B, M)), each sequence's cache full to S = kv_len rows. In dense terms:
  /// the query attends over k, v (B, Hkv, S + 1, Dh), the cached rows then the new one,
  /// with no mask (cache_mask keeps all S + 1).
  bool cache = false;
};

struct Entry {
  std::string name;
  std::string description;
  /// The graph at a shape's static sizes; throws qkv::Error naming the graph when the
  /// shape does not fit it (e.g. a batch for a graph without one).
  std::function<Graph(const GraphShape &)> make;
  /// Names of the dynamic dims, among B (batch), L (seq) and S (kv_len).
  std::vector<std::string> dynamic;
  /// The default shape: what list/run/dump and the tests use.
  GraphShape shape;
  /// The shape `qkv bench NAME` starts from (the benchmark shapes).
  GraphShape bench_shape;
  /// Extents of the dynamic dims for the tests: dims(shape) first, then more shapes
  /// (including 1 and odd sizes).
  std::vector<DimBindings> shapes;
  Workload workload;
  /// Gives inputs meaningful values after random ones at a shape (document ids; a KV
  /// cache's lengths and block table); or null.
  std::function<void(TensorMap &, const GraphShape &)> prepare = nullptr;
  /// The examples/gallery/ variant the entry is, or null. A variant is written in the
  /// typed DSL: its heads, kv heads and head dim are in its types, not in the shape.
  const Variant *variant = nullptr;
  /// The graph reads GraphShape::window (a sliding-window variant of examples/gallery/).
  bool window = false;
  /// A graph a user's tool registered (user_entry): its static sizes and dtype are in its
  /// own code, and it may have dynamic dims of any name (GraphShape::other).
  bool user = false;
  /// A user's graph: its static dims, "H=8 Dh=64", as sizes() prints them.
  std::string statics = {};
  /// Inputs a program gave (qkv::tool::bench): inputs() returns them instead of random ones.
  TensorMap given_inputs = {};
  /// A user's graph: why the baselines cannot compute it ("" when they can: attention
  /// alone over inputs q, k, v, or a block of projections x, wq, wk, wv, wo).
  std::string baseline_gap = {};

  /// The static sizes are in the graph's code (a variant or a user's graph), not in the
  /// shape: its flops are counted node by node and its baselines checked on its nodes.
  bool fixed() const { return variant != nullptr || user; }

  /// The graph at the default shape.
  Graph build() const { return make(shape); }
  Graph build(const GraphShape &s) const { return make(s); }
  /// Extents of the dynamic dims at shape s (paged: the pool's pages P = B * M and the
  /// block table's width M = ceil(S / 16) in place of C).
  DimBindings dims(const GraphShape &s) const;
  /// Keys come from the queries' own sequence (S = L): the entries whose only dynamic
  /// dims are B and L (the blocks other than cross).
  bool self_attention() const;
  /// Every size of shape s that the graph uses: "B=1 H=16 L=2048 S=2048 Dh=64" (Hkv when
  /// it differs from H, D for blocks, W for a sliding window, page=16 for a paged cache).
  std::string sizes(const GraphShape &s) const;
  /// s with the dynamic dims set from bindings (B, L, S); throws qkv::Error naming the
  /// graph for a dim it does not have.
  GraphShape with_dims(GraphShape s, const DimBindings &bindings) const;
  /// The graph reads the shape's window (a sliding-window mask).
  bool uses_window() const;
  /// Random inputs of g at shape s (random_weighted_inputs at dims(s)); then `prepare`.
  TensorMap inputs(const Graph &g, const GraphShape &s, std::uint64_t seed = 1,
                   bool scale_weights = false) const;
};

/// Random inputs of g (random_inputs with this seed: values in [-1, 1)), with the weights
/// (params) scaled by 1/sqrt(fan-in), their first extent, as models initialise them, when
/// `scale_weights`.
TensorMap random_weighted_inputs(const Graph &g, const DimBindings &dims, std::uint64_t seed,
                                 bool scale_weights);

/// The entry of `list` with this name; else a qkv::Error "no <kind> named ...; try one
/// of: ..." listing them.
const Entry &find_entry(const std::vector<Entry> &list, const std::string &name,
                        const std::string &kind);

} // namespace qkv::gallery
