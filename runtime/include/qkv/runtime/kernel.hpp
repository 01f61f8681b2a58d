// A compiled kernel: what qkv::compile returns. It runs the graph on tensors, binding
// run-time dims and checking every input before anything is written, and it keeps the IR
// of every compilation stage for inspection.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <qkv/dsl/graph.hpp>
#include <qkv/runtime/stage.hpp>
#include <qkv/runtime/tensor.hpp>

namespace qkv {

/// How long each stage of compilation took, and what the kernel cache did.
struct CompileStats {
  /// In pipeline order (graph, qkv, linalg, loops, llvm, llvm-ir) for a compiled kernel;
  /// one entry, "cache" (computing the key, reading, checking and linking the entry), for
  /// a cache hit.
  std::vector<std::pair<std::string, double>> stage_ms;
  /// compile()'s wall time: a cold compile (including writing the cache entry), or the
  /// warm time of a cache hit.
  double total_ms = 0;
  /// The kernel was loaded from the on-disk kernel cache: no MLIR pass or LLVM
  /// optimisation ran (docs/compiler.md, "Kernel cache").
  bool from_cache = false;
  /// How many parts LLVM optimised and compiled on their own threads (0 for a cache hit;
  /// CompileOptions::compile_threads).
  int codegen_parts = 0;
  /// How many parts were deferred instead: task bodies (the attention kernels a query
  /// length bound at run time takes below its longest tiles) compiled when a call first
  /// runs them, on that call (docs/compiler.md, "Deferred schedules"); 0 for a cache hit
  /// and for a compile that keeps its optimised IR.
  int deferred_parts = 0;
  /// Of this compile: time spent looking up, reading and writing the cache.
  double cache_ms = 0;
  /// The tier its products run on ("f32", "avx512bf16"; CompileOptions::isa), and how
  /// f32 products are computed ("highest", "medium": CompileOptions::matmul_precision);
  /// empty for the CUDA target.
  std::string isa, matmul_precision;
  /// The folder of the ahead-of-time bundle the kernel was loaded from (load_bundle,
  /// <qkv/runtime/bundle.hpp>), its stage_ms then one entry, "bundle"; else empty.
  std::string bundle;
  /// The cache key (16 hex digits) and the entry's file; empty when the cache was off.
  std::string cache_key, cache_path;
  /// What the cache did: "hit", "miss, stored", "rebuilt (<why the entry was invalid>)",
  /// "not read (...)", "not stored (<error>)", "off (<why>)".
  std::string cache_note;
  /// The kernel checks (CompileOptions::checked): a checked compile of a graph with a
  /// site the compiler could not prove safe. A checked compile whose sites are all proved
  /// is the unchecked kernel, and says false here.
  bool checked = false;
};

/// A param that the compiled code reads packed for its GEMM (docs/compiler.md, "The
/// GEMM"): argument `argument` of the graph (an index into Graph::arguments()), a (K, N)
/// matrix, laid out in panels of `panel_columns` columns, `panel_rows` rows of it
/// interleaved per packed row (2: bf16 pairs for vdpbf16ps and AMX), K rounded up to a
/// multiple of `row_multiple` (32 on AMX: whole tiles), as `dtype` (pack_gemm_weight).
/// Kernel::run packs it on first use and passes the packed copy after the outputs.
struct PackedParam {
  int argument = 0;
  int panel_columns = 0;
  int panel_rows = 1;
  DType dtype = DType::F32;
  int row_multiple = 1;
};

/// w (K, N) as the GEMM reads a packed weight, converted to `dtype` (f32 or f64 from any
/// float dtype; bf16 from f32 or bf16, rounded to nearest even): panel p holds columns
/// [p * nr, (p + 1) * nr) of every row (nr = panel_columns), zero past column N. With
/// `panel_rows` = 1 the panel's rows follow one another; with 2 (bf16 only) each packed
/// row holds rows 2i and 2i + 1 interleaved column by column, (w[2i][j], w[2i + 1][j]) for
/// each j of the panel. Shape {ceil(N / nr) * K' * nr}, K' = K rounded up to a multiple of
/// `row_multiple` (0: of panel_rows; else a multiple of panel_rows), zero rows past K.
Tensor pack_gemm_weight(const Tensor &w, int panel_columns, DType dtype, int panel_rows = 1,
                        int row_multiple = 0);
/// The same in w's own dtype (f32 or f64), one row per packed row.
Tensor pack_gemm_weight(const Tensor &w, int panel_columns);

/// What a backend hands a Kernel: an entry point taking MLIR's packed arguments (one
/// pointer per argument, each pointing at a pointer to a memref descriptor), and an
/// owner that keeps the code alive.
struct KernelEntry {
  std::shared_ptr<void> owner;
  void (*packed)(void **) = nullptr;
  std::string symbol;
  /// The code checks bounds and reports failures (qkv/runtime/checks.hpp): run() turns
  /// the first into a qkv::Error.
  bool checked = false;
  /// The entry is CUDA host code (Target::cuda()): it takes device buffers, so run()
  /// uploads the inputs to device 0 and downloads the outputs after the call.
  bool on_cuda = false;
  /// The params it takes packed, in the order of their arguments after the outputs.
  std::vector<PackedParam> packed_params;
  /// The schedules the code counts as it runs ("<attention node>:decode", ":tiled"), and
  /// its counters (one per name, in the code's memory, which `owner` keeps).
  std::vector<std::string> schedules;
  const std::int64_t *schedule_runs = nullptr;
  /// The attention nodes whose tiles the code counts, and its counts (three per node:
  /// tiles, computed, full; Kernel::tile_counts).
  std::vector<std::string> attentions;
  const std::int64_t *tile_counts = nullptr;
  /// The errors of parts of the code compiled when a call first needs them (the JIT's
  /// deferred attention schedules) that failed to compile since the last time it was
  /// asked, or "": run() fails a call after which this is not empty. Null: the code has
  /// no such parts.
  std::function<std::string()> take_compile_failures;
};

/// What the tiled attention kernel did with the (query tile, key tile) tiles of one
/// attention node, summed over the calls so far (Kernel::tile_counts): of `tiles`, it
/// skipped `empty()` (the mask false everywhere in them), ran `full` without mask code
/// (true everywhere) and `partial()` with the mask per element. Its tiles are classified
/// on each call from the mask's expression and the data it reads (lengths, prefixes,
/// document ids: docs/compiler.md, "Block sparsity").
struct TileCounts {
  std::string attention;
  std::int64_t tiles = 0, computed = 0, full = 0;
  std::int64_t empty() const { return tiles - computed; }
  std::int64_t partial() const { return computed - full; }
};

class Kernel {
public:
  /// The stage names, in pipeline order: graph, qkv, linalg, loops, llvm, llvm-ir, asm.
  static const std::vector<std::string> &stage_names();
  /// A CUDA kernel's stages (Target::cuda()): graph, qkv, linalg, loops, gpu, nvvm, ptx.
  static const std::vector<std::string> &cuda_stage_names();

  Kernel(Graph graph, KernelEntry entry, std::vector<std::pair<std::string, std::string>> stages,
         std::function<std::string(const std::string &)> lazy_stage, CompileStats stats);

  /// Runs the kernel. Inputs and params by name; returns the outputs by name. Run-time
  /// dims are bound from the inputs (qkv::bind_dims): a missing, unknown, mistyped or
  /// misshapen input is a qkv::Error naming it, raised before any output is written.
  /// A checked kernel (CompileOptions::checked) that met an index out of bounds throws
  /// the interpreter's qkv::Error for it after the run. A call that reached a deferred
  /// part of the code (an attention schedule compiled on first use) that failed to
  /// compile throws a qkv::Error with the JIT's error after the run.
  TensorMap run(const TensorMap &inputs) const;

  /// The IR at a named stage (see stage_names(), or cuda_stage_names() for a CUDA kernel);
  /// throws qkv::Error for an unknown name.
  std::string ir(std::string_view stage) const;
  std::string ir(Stage stage) const { return ir(stage_name(stage)); }

  const Graph &graph() const { return *graph_; }
  const CompileStats &stats() const { return stats_; }
  /// The params this kernel reads packed (their GEMM weights).
  const std::vector<PackedParam> &packed_params() const { return entry_.packed_params; }
  /// Packs the weights among `params` that this kernel reads packed (packed_params()), as
  /// the first run() would: a model calls it when it loads, so that its first step does
  /// not pay for packing. Params it does not read packed, and names it does not know,
  /// are ignored; a weight of the wrong dtype or shape is a qkv::Error naming it.
  void prepare(const TensorMap &params) const;
  /// How many times this kernel has packed a weight so far: once per weight tensor (by
  /// its Tensor::storage_id) and param, and again when the tensor was written since
  /// (Tensor::writes). A packed copy is shared by every kernel (in the process) that reads
  /// the same weight in panels of the same width: the one that finds it made does not
  /// pack. The copies live while a kernel that used them and the weight tensor do.
  std::int64_t weight_packs() const;
  /// Bytes of the packed copies this kernel holds now.
  std::int64_t packed_bytes() const;
  const std::string &symbol() const { return entry_.symbol; }
  /// For each fused attention of a CPU kernel and each of its schedules, how many calls
  /// of this kernel (and of its copies) ran it so far: {"<attention node>:decode", n},
  /// {"<attention node>:tiled", m}. A query length bound at run time picks the schedule
  /// on each call (docs/compiler.md, "The fused attention kernel"). Empty for a kernel
  /// without attention.
  std::vector<std::pair<std::string, std::int64_t>> schedule_runs() const;
  /// For each fused attention of a CPU kernel, what the tiled kernel did with its tiles
  /// in the calls so far (the decode kernel's calls count nothing). Empty for a kernel
  /// without attention.
  std::vector<TileCounts> tile_counts() const;

  /// For a CUDA kernel (compile(g, Target::cuda()), or a CUDA bundle): the inputs checked
  /// and copied to device 0 once, then `calls` calls on them, each timed from its start to
  /// the device's end of it (a synchronize): milliseconds per call, in order. Unlike
  /// run(), no copy in or out is timed: what a benchmark of the kernels wants. A
  /// qkv::Error for a CPU kernel.
  std::vector<double> time_on_device(const TensorMap &inputs, int calls) const;

private:
  /// The outputs of a run on `inputs`, allocated at the dims the inputs bind, after every
  /// check run() makes of them (`out_order`: the outputs in the graph's order).
  TensorMap checked_outputs(const TensorMap &inputs, std::vector<const Tensor *> &out_order) const;
  struct DeviceArgs;
  /// One call of a CUDA kernel on its device arguments, to the device's end of it.
  void call_on_device(DeviceArgs &args) const;
  /// Calls the entry on memref descriptors (MLIR's packed arguments).
  void call(std::vector<std::vector<std::int64_t>> &descs) const;
  /// The packed copies of the packed params among `inputs`, made or reused (those not in
  /// `inputs` are skipped when `skip_missing`; else missing is an error).
  std::vector<Tensor> packed_weights(const TensorMap &inputs, bool skip_missing = false) const;
  /// run() for CUDA host code: device copies of the inputs and outputs.
  void run_on_cuda(const TensorMap &inputs, const std::vector<const Tensor *> &outs) const;

  std::shared_ptr<const Graph> graph_;
  KernelEntry entry_;
  std::vector<std::pair<std::string, std::string>> stages_;
  std::function<std::string(const std::string &)> lazy_stage_;
  mutable std::shared_ptr<std::map<std::string, std::string>> lazy_cache_;
  CompileStats stats_;
  struct PackedWeights;
  std::shared_ptr<PackedWeights> packed_;
};

/// Value ranges [lo, hi) for random_inputs, by input or param name.
using RandomRanges = std::map<std::string, std::pair<double, double>>;

/// Random tensors for every input and param of g (a fixed-seed generator). `dims` gives
/// the extent of each dynamic dim (complete_dims' rules: a dim the graph lacks, a static
/// dim given another extent, or a dynamic dim left out is a qkv::Error). Values are
/// uniform in [lo, hi): `ranges` sets them per input (integers take lo .. hi - 1);
/// otherwise floats take [-1, 1), embedding ids [0, vocab) and other integer tensors
/// (document ids, positions) [0, 4). A range for a name the graph lacks, or with
/// hi <= lo, is a qkv::Error.
TensorMap random_inputs(const Graph &g, const DimBindings &dims, std::uint64_t seed,
                        const RandomRanges &ranges = {});

/// random_inputs' settings, for the overload below:
///   random_inputs(g, dims, {.seed = 1, .scale_params = true})
struct RandomOptions {
  std::uint64_t seed = 1;
  RandomRanges ranges = {};
  /// Float params (weights) multiplied by 1/sqrt(fan-in), their first extent, as models
  /// initialise them and as the qkv tool draws them (`qkv run`, `qkv bench`): a block's
  /// outputs then stay O(1) instead of growing with the model dim. A param with its own
  /// range in `ranges` keeps it.
  bool scale_params = false;
};
/// random_inputs(g, dims, options.seed, options.ranges), then the params scaled when
/// options.scale_params.
TensorMap random_inputs(const Graph &g, const DimBindings &dims, const RandomOptions &options);

} // namespace qkv
