// Attention run time at the shapes of issue 7, for qkv and both baselines on the same
// inputs (the gallery graphs attn, attn_causal, attn_window, attn_decode, mha):
//
//   attention  B=1 H=16 Dh=64, L = S = 2048 and 8192: no mask, causal, window 256
//   decode     B=1 H=8 Dh=128, 1 query over S=32768 keys
//   mha block  B=1 L=2048 H=8 Dh=64 (D=512)
//
// Counters: FLOPS (flops per second, counted as `qkv bench` counts them: 4*B*H*Dh*pairs
// kept by the mask, plus 2*M*K*N per projection), bytes_per_second (inputs read once +
// output written once), pct_peak and pct_bw (of the FMA peak and read bandwidth measured
// once at start-up on the same threads). Threads: --threads=T (default all CPUs).
// Slow today: qkv's scalar kernel takes minutes at L=8192; use --benchmark_filter.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include <qkv/compiler/compile.hpp>

#include "qkv_bench/machine.hpp"
#include "qkv_bench/timing.hpp"
#include "gallery.hpp"
#include "workload.hpp"

namespace {

namespace qb = qkv::bench;
using qkv::gallery::GraphShape;

int g_threads = 0;

struct Roofline {
  double peak_gflops = 0, bandwidth_gbs = 0;
};

const Roofline &roofline() {
  static const Roofline r{qb::fma_peak_gflops(g_threads).value,
                          qb::read_bandwidth_gbs(g_threads).value};
  return r;
}

struct Case {
  std::string entry;
  GraphShape shape;
};

/// Graph, inputs and qkv's output of one case, built once and shared by its benchmarks.
struct Prepared {
  qkv::Graph graph;
  qkv::TensorMap inputs;
  std::unique_ptr<qkv::Kernel> kernel;
};

/// Cleared at the end of main: compiled kernels must go before LLVM's own statics do.
std::map<std::string, std::unique_ptr<Prepared>> g_prepared;

Prepared &prepare(const Case &c) {
  auto &cache = g_prepared;
  std::string key =
      c.entry + "/" + std::to_string(c.shape.seq) + "/" + std::to_string(c.shape.kv_len);
  auto &p = cache[key];
  if (!p) {
    const auto &e = qkv::gallery::find(c.entry);
    p = std::make_unique<Prepared>(Prepared{e.build(c.shape), {}, nullptr});
    p->inputs = qkv::gallery::bench_inputs(p->graph, e.dims(c.shape));
    qkv::CompileOptions o;
    o.schedule.threads = g_threads;
    p->kernel = std::make_unique<qkv::Kernel>(qkv::compile(p->graph, qkv::Target::host(), o));
  }
  return *p;
}

void set_counters(benchmark::State &state, const Case &c, double seconds) {
  const auto &e = qkv::gallery::find(c.entry);
  double flops = qkv::gallery::flops(e, c.shape), bytes = qkv::gallery::bytes(e, c.shape);
  double iters = static_cast<double>(state.iterations());
  state.counters["FLOPS"] =
      benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes * iters));
  state.counters["pct_peak"] = 100 * flops * iters / seconds * 1e-9 / roofline().peak_gflops;
  state.counters["pct_bw"] = 100 * bytes * iters / seconds * 1e-9 / roofline().bandwidth_gbs;
  state.counters["threads"] = g_threads;
}

void BM_Qkv(benchmark::State &state, const Case &c) {
  roofline();
  Prepared &p = prepare(c);
  qb::settle();
  double t0 = qb::now_ms();
  for (auto _ : state) {
    qkv::TensorMap out = p.kernel->run(p.inputs);
    benchmark::DoNotOptimize(out);
  }
  set_counters(state, c, (qb::now_ms() - t0) * 1e-3);
}

void BM_Baseline(benchmark::State &state, const Case &c, qb::Baseline b) {
  roofline();
  Prepared &p = prepare(c);
  const auto &e = qkv::gallery::find(c.entry);
  qkv::Tensor out = p.kernel->run(p.inputs).begin()->second.clone();
  qb::settle();
  double t0 = qb::now_ms();
  for (auto _ : state) {
    qkv::gallery::run_baseline(b, e, c.shape, p.inputs, out, g_threads);
    benchmark::ClobberMemory();
  }
  set_counters(state, c, (qb::now_ms() - t0) * 1e-3);
}

GraphShape shape(std::int64_t heads, std::int64_t seq, std::int64_t kv_len, std::int64_t head_dim) {
  return GraphShape{1, heads, heads, seq, kv_len, head_dim, 256};
}

std::vector<Case> cases() {
  std::vector<Case> all;
  for (std::int64_t l : {2048, 8192})
    for (const char *entry : {"attn", "attn_causal", "attn_window"})
      all.push_back({entry, shape(16, l, l, 64)});
  all.push_back({"attn_decode", shape(8, 1, 32768, 128)});
  all.push_back({"mha", shape(8, 2048, 2048, 64)});
  return all;
}

void register_all() {
  for (const Case &c : cases()) {
    const auto &e = qkv::gallery::find(c.entry);
    std::string sizes = e.sizes(c.shape);
    std::replace(sizes.begin(), sizes.end(), ' ', '_');
    std::string name = c.entry + "/" + sizes + "/";
    benchmark::RegisterBenchmark((name + "qkv").c_str(), BM_Qkv, c)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    for (qb::Baseline b : qb::available_baselines())
      benchmark::RegisterBenchmark((name + std::string(qb::baseline_name(b))).c_str(), BM_Baseline,
                                   c, b)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
  }
}

/// Takes --threads=T out of argv (Google Benchmark rejects flags it does not know).
int take_threads(int &argc, char **argv) {
  int threads = qb::hardware_threads();
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--threads=", 0) == 0) {
      threads = std::atoi(a.c_str() + 10);
      if (threads < 1) {
        std::fprintf(stderr, "bench_attention: --threads must be at least 1, got '%s'\n",
                     a.c_str() + 10);
        std::exit(2);
      }
    } else {
      argv[out++] = argv[i];
    }
  }
  argc = out;
  return threads;
}

} // namespace

int main(int argc, char **argv) {
  g_threads = take_threads(argc, argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv))
    return 1;
  register_all();
  benchmark::AddCustomContext("threads", std::to_string(g_threads));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  g_prepared.clear();
  return 0;
}
