// JIT compile time: Graph -> qkv dialect -> ... -> machine code, for each gallery graph
// at LLVM -O2 and -O3 (the default), the kernel cache off; and the warm time, the kernel
// loaded from the cache (a scratch cache folder, removed at the end). Reports wall time per
// compile; the per-stage split is printed by `qkv bench NAME`. What it measures is
// compile(), nothing else: the graph is built once outside the timed loop.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>

#include <qkv/compiler/compile.hpp>

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

int register_all() {
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
  return 0;
}
const int registered = register_all();

} // namespace

BENCHMARK_MAIN();
