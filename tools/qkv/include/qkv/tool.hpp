// qkv's command-line tool over your own graphs, and its commands as C++ calls.
//
// A program of yours registers graphs; linked with qkv's tool library it is the `qkv`
// command over them (list, dump every stage, run --check against the interpreter, bench
// against the machine's peak and the baselines, show the mask and the tiles, cache):
//
//   // my_graphs.cpp
//   #include <qkv/qkv.hpp>
//   #include <qkv/tool.hpp>
//
//   qkv::Graph causal_alibi() { ... }
//   QKV_TOOL_GRAPH({.name = "causal_alibi",
//                   .description = "causal attention with ALiBi slopes",
//                   .build = causal_alibi,
//                   .dims = {{"B", 2}, {"L", 64}},            // run, dump, show, list
//                   .bench_dims = {{"B", 1}, {"L", 2048}}});  // bench
//
//   # CMakeLists.txt
//   find_package(qkv CONFIG REQUIRED)
//   qkv_add_tool(mytool SOURCES my_graphs.cpp)   # mytool has qkv's main
//
//   $ mytool list
//   $ mytool run causal_alibi --check --seq 300
//   $ mytool bench causal_alibi --threads 2
//
// The shape options set the dynamic dims: --batch (B), --seq (L), --kv-len (S) and
// --dims NAME=N,... for any dim; the static ones are the graph's own. A program with a
// main of its own calls qkv::tool::main(argc, argv) instead of linking qkv::tool_main.
// A program that wants a command's output for its own graph and inputs calls
// qkv::tool::show(graph, inputs) or qkv::tool::bench(graph, inputs).
// docs/compiler.md ("Tools") describes every command.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <qkv/dsl/graph.hpp>
#include <qkv/runtime/tensor.hpp>

namespace qkv {
namespace tool {

/// A graph the tool knows by name.
struct GraphSpec {
  /// What the commands take: letters, digits, '_' and '-'.
  std::string name = {};
  /// One line, for `list`.
  std::string description = {};
  /// Builds the graph (called whenever a command needs it).
  std::function<Graph()> build = {};
  /// Extents of every dynamic dim of the graph, for list, dump, run and show (the shape
  /// options change them).
  DimBindings dims = {};
  /// The extents `bench` starts from; empty: dims.
  DimBindings bench_dims = {};
  /// Gives the random inputs meaningful values (document ids, lengths), or null. Random
  /// inputs are uniform in [-1, 1), params scaled by 1/sqrt(fan-in) (qkv::random_inputs
  /// with RandomOptions::scale_params).
  std::function<void(TensorMap &)> prepare = {};
};

/// Adds a graph to the tool. Checked when the tool first needs its graphs: a bad spec (an
/// empty or taken name, no build, a dynamic dim without an extent) is then an error of
/// the command, naming the graph.
void add_graph(GraphSpec spec);

/// Registers a graph when the program starts (QKV_TOOL_GRAPH does this).
struct Registration {
  explicit Registration(GraphSpec spec) { add_graph(std::move(spec)); }
};

/// The command line over the graphs added: `argv[0] list|dump|run|bench|show|cache ...`,
/// as the qkv binary's. Returns the exit status (errors are printed, never thrown).
int main(int argc, char **argv);

} // namespace tool
} // namespace qkv

#define QKV_TOOL_CONCAT_(a, b) a##b
#define QKV_TOOL_CONCAT(a, b) QKV_TOOL_CONCAT_(a, b)
/// QKV_TOOL_GRAPH({.name = ..., .description = ..., .build = ..., .dims = ...}): registers
/// a qkv::tool::GraphSpec at namespace scope.
#define QKV_TOOL_GRAPH(...)                                                                    \
  static const ::qkv::tool::Registration QKV_TOOL_CONCAT(qkv_tool_graph_, __COUNTER__)(        \
      ::qkv::tool::GraphSpec __VA_ARGS__)

// ---- the commands as C++ calls ---------------------------------------------------------------

namespace qkv::tool {

/// What `qkv show` draws.
struct ShowOptions {
  /// Tile sizes of the tile map (0: the fused kernel's for a mask on this host).
  int q_tile = 0, kv_tile = 0;
  /// The terminal pictures have at most this many cells a side (at least 8).
  std::int64_t cols = 64;
  /// Also writes the PNG here (when not empty).
  std::string png = {};
};

/// `qkv show` for graph g on `inputs`: the mask of its first attention at batch 0, head 0,
/// and its tiles as the compiler classifies them next to their true classes, as the text
/// the command prints (and the PNG, with ShowOptions::png). A qkv::Error when g has no
/// attention.
std::string show(const Graph &g, const TensorMap &inputs, const ShowOptions &options = {});

struct BenchOptions {
  /// Threads for qkv, the baselines, the peak and the bandwidth (0: all logical CPUs).
  int threads = 0;
  /// CompileOptions::compile_threads.
  int compile_threads = 0;
  /// Exactly this many timed runs (and cold and warm compiles); 0: adaptive.
  int repeat = 0;
  /// Run the baselines where they compute the graph.
  bool baselines = true;
  /// Progress lines on stderr, as `qkv bench` prints them.
  bool progress = false;
};

struct BenchBaseline {
  std::string name; ///< reference or openblas
  double ms = 0;    ///< median
  double ratio = 0; ///< ms / qkv's ms: above 1, qkv is faster
  int runs = 0;
  double max_abs_err = 0; ///< against qkv's output
  bool ok = true;         ///< max_abs_err within the tolerance
};

/// What `qkv bench` measures (docs/compiler.md, "Benchmarks").
struct BenchReport {
  double ms = 0, min_ms = 0; ///< qkv's median and fastest run
  int runs = 0;
  double compile_ms = 0; ///< median cold compile
  double flops = 0, gflops = 0, peak_gflops = 0, pct_peak = 0;
  double bytes = 0, read_gbs = 0, bandwidth_gbs = 0, pct_bandwidth = 0;
  std::vector<BenchBaseline> baselines;
  /// Why the baselines did not run ("" when they did).
  std::string baselines_not_run;
  /// The report as `qkv bench` prints it, and as `qkv bench --json` does.
  std::string table, json;
  /// Every baseline agrees with qkv.
  bool ok() const;
};

/// `qkv bench` for graph g on `inputs` (their shapes bind its dynamic dims): the machine's
/// FMA peak and read bandwidth, qkv's compile and run times, and the baselines on the same
/// inputs where they compute g (attention alone over inputs q, k, v (B, H, L, Dh), or a
/// block of projections over x, wq, wk, wv, wo).
BenchReport bench(const Graph &g, const TensorMap &inputs, const BenchOptions &options = {});

} // namespace qkv::tool
