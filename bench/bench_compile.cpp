// JIT compile time: Graph -> qkv dialect -> ... -> machine code, for each gallery graph
// at LLVM -O2 and -O3 (the default), the kernel cache off; the warm time, the kernel
// loaded from the cache (a scratch cache folder, removed at the end); and encoders of
// all-MiniLM-L6-v2's size written as one graph, 1 to 24 layers, with their layers shared
// (CompileOptions::share_repeated_layers) and, for 6, without. Reports wall time per
// compile; the per-stage split is printed by `qkv bench NAME`. What it measures is
// compile(), nothing else: the graph is built once outside the timed loop; first_calls
// times compile() and then the first and second calls at each query length.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>

#include <qkv/compiler/compile.hpp>
#include <qkv/models/bert.hpp>

#include "gallery.hpp"

namespace {

void BM_Compile(benchmark::State &state, const std::string &name, int opt_level) {
  qkv::Graph g = qkv::gallery::find(name).build();
  qkv::CompileOptions o;
  o.opt_level = opt_level;
  o.cache = qkv::CacheOptions::off();
  double llvm_ms = 0, total_ms = 0;
  for (auto _ : state) {
    qkv::Kernel k = qkv::compile(g, qkv::Target::host(), o);
    llvm_ms += k.stats().stage_ms.back().second; // the llvm-ir stage: LLVM opt + JIT codegen
    total_ms += k.stats().total_ms;
    benchmark::DoNotOptimize(k);
  }
  // The fraction of compile time spent in LLVM (optimisation and code generation).
  state.counters["llvm_share"] = total_ms > 0 ? llvm_ms / total_ms : 0;
}

/// Loading a kernel from the kernel cache: the compile before the loop stores it.
void BM_CompileWarm(benchmark::State &state, const std::string &name) {
  std::string dir = (std::filesystem::temp_directory_path() / "qkv-bench-kernels-XXXXXX").string();
  if (!::mkdtemp(dir.data())) {
    state.SkipWithError("cannot make a scratch cache folder");
    return;
  }
  qkv::Graph g = qkv::gallery::find(name).build();
  qkv::CompileOptions o;
  o.cache.dir = dir;
  qkv::compile(g, qkv::Target::host(), o);
  for (auto _ : state) {
    qkv::Kernel k = qkv::compile(g, qkv::Target::host(), o);
    if (!k.stats().from_cache)
      state.SkipWithError(("not a cache hit: " + k.stats().cache_note).c_str());
    benchmark::DoNotOptimize(k);
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

/// What deferred schedules (CompileOptions::defer_schedules) move into the calls: `name`
/// (a gallery graph with a query length "L" bound at run time) compiled cold, then run at
/// lengths that take each of its attention schedules on any host (decode, tiles of one
/// and two vectors, the default tiles), the first call at each length timed apart from
/// the second: their difference is what compiling that length's schedule took, if it was
/// deferred. Reported as counters: the compile, then L<n>_first_ms and L<n>_again_ms.
void BM_FirstCalls(benchmark::State &state, const std::string &name, bool defer) {
  qkv::Graph g = qkv::gallery::find(name).build();
  qkv::CompileOptions o;
  o.cache = qkv::CacheOptions::off();
  o.defer_schedules = defer;
  std::map<std::string, double> ms;
  auto since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
  };
  for (auto _ : state) {
    auto t = std::chrono::steady_clock::now();
    qkv::Kernel k = qkv::compile(g, qkv::Target::host(), o);
    ms["compile_ms"] += since(t);
    for (std::int64_t l : {1, 12, 24, 512}) {
      qkv::TensorMap in = qkv::random_inputs(g, {{"B", 1}, {"L", l}}, 1);
      for (const char *which : {"_first_ms", "_again_ms"}) {
        t = std::chrono::steady_clock::now();
        benchmark::DoNotOptimize(k.run(in));
        ms["L" + std::to_string(l) + which] += since(t);
      }
    }
  }
  for (const auto &[what, total] : ms)
    state.counters[what] = total / static_cast<double>(state.iterations());
}

/// bert_model_graph at all-MiniLM-L6-v2's size with `layers` layers, compiled cold.
void BM_CompileEncoder(benchmark::State &state, int layers, bool share) {
  qkv::BertConfig c;
  c.vocab_size = 30522;
  c.hidden_size = 384;
  c.num_hidden_layers = layers;
  c.num_attention_heads = 12;
  c.intermediate_size = 1536;
  c.max_position_embeddings = 512;
  c.type_vocab_size = 2;
  qkv::Graph g = qkv::bert_model_graph(c, true);
  qkv::CompileOptions o;
  o.cache = qkv::CacheOptions::off();
  o.share_repeated_layers = share;
  std::map<std::string, double> stage_ms;
  for (auto _ : state) {
    qkv::Kernel k = qkv::compile(g, qkv::Target::host(), o);
    for (const auto &[stage, ms] : k.stats().stage_ms)
      stage_ms[stage] += ms;
    benchmark::DoNotOptimize(k);
  }
  // Where the time went: each stage's mean ms per compile (qkv includes the import).
  for (const auto &[stage, ms] : stage_ms)
    state.counters[stage + "_ms"] = ms / static_cast<double>(state.iterations());
}

int register_all() {
  for (int layers : {1, 6, 12, 24})
    benchmark::RegisterBenchmark(("compile_encoder/" + std::to_string(layers) + "_layers").c_str(),
                                 BM_CompileEncoder, layers, true)
        ->Unit(benchmark::kMillisecond)
        ->Iterations(3)
        ->Repetitions(1);
  benchmark::RegisterBenchmark("compile_encoder/6_layers_unshared", BM_CompileEncoder, 6, false)
      ->Unit(benchmark::kMillisecond)
      ->Iterations(1)
      ->Repetitions(1);
  for (const auto &e : qkv::gallery::entries())
    for (int o : {2, 3})
      benchmark::RegisterBenchmark(("compile/" + e.name + "/O" + std::to_string(o)).c_str(),
                                   BM_Compile, e.name, o)
          ->Unit(benchmark::kMillisecond)
          ->Iterations(5)
          ->Repetitions(1);
  for (const auto &e : qkv::gallery::entries())
    benchmark::RegisterBenchmark(("compile_warm/" + e.name).c_str(), BM_CompileWarm, e.name)
        ->Unit(benchmark::kMillisecond)
        ->Iterations(20)
        ->Repetitions(1);
  // Last: a kernel's calls leave libomp's workers spinning for KMP_BLOCKTIME (200 ms by
  // default), which on a 2-core host added 7 ms to compile/mha/O3's mean when it ran after.
  for (bool defer : {true, false})
    benchmark::RegisterBenchmark(defer ? "first_calls/mha/deferred" : "first_calls/mha/eager",
                                 BM_FirstCalls, "mha", defer)
        ->Unit(benchmark::kMillisecond)
        ->Iterations(3)
        ->Repetitions(1);
  return 0;
}
const int registered = register_all();

} // namespace

BENCHMARK_MAIN();
