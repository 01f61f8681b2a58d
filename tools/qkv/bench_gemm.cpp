// `qkv bench gemm`: one projection, y = x . w (x an input of M rows, M a dim bound at run
// time; w a param), timed against the machine's FMA peak and OpenBLAS's sgemm on the same
// inputs, in one process.
#include "bench_gemm.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <qkv/compiler/compile.hpp>

#include "qkv_bench/baselines.hpp"
#include "qkv_bench/machine.hpp"
#include "qkv_bench/timing.hpp"

namespace qkv::tool {

const char *const kBenchGemmHelp =
    "usage: qkv bench gemm --m M --k K --n N [--threads T] [--bias] [--json] [--repeat N]\n"
    "                      [--no-baselines]\n"
    "\n"
    "Benchmarks one projection y = x . w [+ bias]: x (M, K) an input whose M is a dim bound\n"
    "at run time, w (K, N) a param (its packed copy made on the first run, which the\n"
    "warm-up takes), as the models' projections are. In one process, in this order: the\n"
    "machine's fp32 FMA peak and read bandwidth on T threads; qkv's compile time (the\n"
    "kernel cache bypassed); Kernel::run on random inputs (median); OpenBLAS's cblas_sgemm\n"
    "(plus the bias, added in a loop) on the same inputs, its output checked against\n"
    "qkv's (max abs error <= 1e-4 x max(1, max |y|)); the peak and bandwidth again. Prints\n"
    "ms, GFLOP/s (2*M*K*N flops), % of the FMA peak, and OpenBLAS ms / qkv ms.\n"
    "\n"
    "options:\n"
    "  --m M, --k K, --n N   the sizes (default 2048, 512, 2048)\n"
    "  --threads T     threads for qkv, OpenBLAS, the peak and the bandwidth (default: all\n"
    "                  logical CPUs)\n"
    "  --bias          y = x . w + bias (in qkv the tiles start from the bias)\n"
    "  --json          one JSON object on stdout: name (gemm), m, k, n, bias, threads, isa, ms,\n"
    "                  min_ms, runs, gflops, pct_peak, peak_gflops, bandwidth_gbs, compile_ms,\n"
    "                  baselines\n"
    "                  (openblas: ms, ratio, gflops, pct_peak, max_abs_err, ok)\n"
    "  --repeat N      exactly N timed runs of each (default: adaptive, >= 3 runs and >= 1 s)\n"
    "  --no-baselines  time qkv alone\n";

namespace {

namespace qb = qkv::bench;
using json = nlohmann::ordered_json;

void progress(const std::string &s) { std::cerr << "[qkv bench gemm] " << s << std::endl; }

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

struct GemmConfig {
  std::int64_t m = 2048, k = 512, n = 2048;
  int threads = 1;
  bool bias = false, json = false, baselines = true;
  int repeat = 0;
};

GemmConfig gemm_config(const cli::Args &a) {
  cli::check_opts(a, {"m", "k", "n", "threads", "bias", "json", "repeat", "no-baselines"});
  for (const char *flag : {"json", "no-baselines", "bias"})
    if (a.opts.count(flag) && !a.opts.at(flag).empty())
      user_error(std::string("--") + flag + " takes no value, got '" + a.opts.at(flag) + "'");
  GemmConfig c;
  c.m = cli::int_opt(a, "m").value_or(c.m);
  c.k = cli::int_opt(a, "k").value_or(c.k);
  c.n = cli::int_opt(a, "n").value_or(c.n);
  c.threads = static_cast<int>(cli::int_opt(a, "threads").value_or(qb::hardware_threads()));
  c.bias = a.opts.count("bias") > 0;
  c.json = a.opts.count("json") > 0;
  c.baselines = a.opts.count("no-baselines") == 0;
  c.repeat = static_cast<int>(cli::int_opt(a, "repeat").value_or(0));
  return c;
}

Graph gemm_graph(const GemmConfig &c) {
  Graph g("gemm");
  Value x = g.input("x", DType::F32, {Dim("M"), Dim("K", c.k)});
  Value w = g.param("w", DType::F32, {Dim("K", c.k), Dim("N", c.n)});
  Value y = c.bias ? linear(x, w, g.param("bias", DType::F32, {Dim("N", c.n)})) : linear(x, w);
  g.output("y", y);
  return g;
}

qb::TimingPolicy policy(const GemmConfig &c) {
  qb::TimingPolicy p;
  p.runs = c.repeat;
  return p;
}

struct Machine {
  qb::Isa isa = qb::host_isa();
  std::vector<double> peaks, bandwidths;
  void measure(int threads, const char *when) {
    progress(std::string("FMA peak and read bandwidth on ") + std::to_string(threads) +
             " threads, " + when);
    peaks.push_back(qb::fma_peak_gflops(threads, isa).value);
    bandwidths.push_back(qb::read_bandwidth_gbs(threads, 0, isa).value);
  }
  double peak() const { return *std::max_element(peaks.begin(), peaks.end()); }
  double bandwidth() const { return *std::max_element(bandwidths.begin(), bandwidths.end()); }
};

} // namespace

int cmd_bench_gemm(const cli::Args &a) {
  GemmConfig c = gemm_config(a);
  Graph g = gemm_graph(c);
  progress("M=" + std::to_string(c.m) + " K=" + std::to_string(c.k) + " N=" + std::to_string(c.n) +
           (c.bias ? " +bias" : "") + ", " + std::to_string(c.threads) + " threads");
  // Weights scaled by 1/sqrt(K), as models initialise them: outputs stay O(1).
  TensorMap in = random_inputs(g, {{"M", c.m}}, 1);
  {
    float *w = in.at("w").data_as<float>();
    float s = 1.0f / std::sqrt(static_cast<float>(c.k));
    for (std::int64_t i = 0; i < c.k * c.n; ++i)
      w[i] *= s;
  }
  Machine machine;
  machine.measure(c.threads, "before the runs");

  progress("compiling");
  CompileOptions o;
  o.schedule.threads = c.threads;
  o.cache.read = false;
  o.cache.write = false;
  Kernel kernel = compile(g, Target::host(), o);
  double compile_ms = kernel.stats().total_ms;

  progress("running qkv");
  qb::settle();
  Tensor y;
  qb::Timing tq = qb::time_runs([&] { y = kernel.run(in).at("y"); }, policy(c));
  progress("qkv: " + fixed(tq.median_ms, 3) + " ms (median of " + std::to_string(tq.runs) + ")");
  double flops = 2.0 * static_cast<double>(c.m) * static_cast<double>(c.k) * static_cast<double>(c.n);
  double scale = 1;
  for (std::int64_t i = 0; i < y.numel(); ++i)
    scale = std::max(scale, std::fabs(y.get(i)));

  bool have_blas = c.baselines && !qb::blas_config().empty();
  qb::Timing tb;
  double err = 0;
  bool ok = true;
  if (have_blas) {
    progress("running openblas");
    qb::settle();
    Tensor out(DType::F32, y.shape());
    const float *x = in.at("x").data_as<float>(), *w = in.at("w").data_as<float>();
    const float *bias = c.bias ? in.at("bias").data_as<float>() : nullptr;
    float *o = out.data_as<float>();
    tb = qb::time_runs(
        [&] {
          qb::matmul(qb::Baseline::OpenBlas, c.m, c.k, c.n, x, w, o, c.threads);
          if (bias)
            qb::parallel_for(c.m, c.threads, [&](std::int64_t i, int) {
              for (std::int64_t j = 0; j < c.n; ++j)
                o[i * c.n + j] += bias[j];
            });
        },
        policy(c));
    const float *got = y.data_as<float>();
    for (std::int64_t i = 0; i < out.numel(); ++i) {
      double d = std::fabs(static_cast<double>(got[i]) - o[i]);
      err = std::isnan(d) ? INFINITY : std::max(err, d);
    }
    ok = err <= 1e-4 * scale;
    progress("openblas: " + fixed(tb.median_ms, 3) + " ms (median of " + std::to_string(tb.runs) +
             "), max_abs_err " + std::to_string(err));
  }
  machine.measure(c.threads, "after the runs");

  auto gf = [&](const qb::Timing &t) { return flops / (t.median_ms * 1e6); };
  auto pct = [&](const qb::Timing &t) { return 100 * gf(t) / machine.peak(); };
  if (c.json) {
    json j = {{"name", "gemm"}, {"m", c.m},         {"k", c.k},
              {"n", c.n},       {"bias", c.bias},   {"threads", c.threads},
              {"isa", qb::isa_name(machine.isa)},   {"ms", tq.median_ms},
              {"min_ms", tq.min_ms},                {"runs", tq.runs},                    {"gflops", gf(tq)},
              {"pct_peak", pct(tq)},                {"peak_gflops", machine.peak()},
              {"peak_gflops_measured", machine.peaks},
              {"bandwidth_gbs", machine.bandwidth()}, {"compile_ms", compile_ms}};
    j["baselines"] = json::object();
    if (have_blas)
      j["baselines"]["openblas"] = {{"ms", tb.median_ms},     {"ratio", tb.median_ms / tq.median_ms},
                                    {"runs", tb.runs},         {"gflops", gf(tb)},
                                    {"pct_peak", pct(tb)},     {"max_abs_err", err},
                                    {"ok", ok}};
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << "qkv bench gemm: M=" << c.m << " K=" << c.k << " N=" << c.n
              << (c.bias ? " +bias" : "") << ", " << c.threads << " threads\n"
              << "machine   " << qb::isa_name(machine.isa) << " FMA peak " << fixed(machine.peak(), 1)
              << " GFLOP/s (the higher of " << fixed(machine.peaks.front(), 1) << " and "
              << fixed(machine.peaks.back(), 1) << "), read bandwidth "
              << fixed(machine.bandwidth(), 1) << " GB/s\n"
              << "compile   " << fixed(compile_ms, 1) << " ms cold\n\n"
              << "             median ms  runs    GFLOP/s  % peak  baseline/qkv  max abs err\n";
    char buf[256];
    std::snprintf(buf, sizeof buf, "%-10s %12.3f %5d %10.2f %7.2f%% %12s  %s\n", "qkv",
                  tq.median_ms, tq.runs, gf(tq), pct(tq), "-", "-");
    std::cout << buf;
    if (have_blas) {
      std::snprintf(buf, sizeof buf, "%-10s %12.3f %5d %10.2f %7.2f%% %11.3fx  %.2e%s\n",
                    "openblas", tb.median_ms, tb.runs, gf(tb), pct(tb), tb.median_ms / tq.median_ms,
                    err, ok ? "" : " WRONG");
      std::cout << buf << "openblas  " << qb::blas_config() << "\n";
    }
  }
  if (!ok) {
    std::cerr << "qkv: error: openblas disagrees with qkv: max_abs_err " << err << " > "
              << 1e-4 * scale << "\n";
    return 1;
  }
  return 0;
}

} // namespace qkv::tool
