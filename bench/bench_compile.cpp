// JIT compile time: Graph -> qkv dialect -> ... -> machine code, for each gallery graph
// at LLVM -O2 and -O3 (the default). Reports wall time per compile; the per-stage split
// is printed by `qkv bench NAME`. What it measures is compile(), nothing else: the graph
// is built once outside the timed loop.
#include <benchmark/benchmark.h>

#include <qkv/compiler/compile.hpp>

#include "gallery.hpp"

namespace {

void BM_Compile(benchmark::State &state, const std::string &name, int opt_level) {
  qkv::Graph g = qkv::gallery::find(name).build();
  qkv::CompileOptions o;
  o.opt_level = opt_level;
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

int register_all() {
  for (const auto &e : qkv::gallery::entries())
    for (int o : {2, 3})
      benchmark::RegisterBenchmark(("compile/" + e.name + "/O" + std::to_string(o)).c_str(),
                                   BM_Compile, e.name, o)
          ->Unit(benchmark::kMillisecond)
          ->Iterations(5)
          ->Repetitions(1);
  return 0;
}
const int registered = register_all();

} // namespace

BENCHMARK_MAIN();
