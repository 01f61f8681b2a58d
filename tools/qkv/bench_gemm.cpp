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
    "                      [--no-baselines] [--dtype f32|bf16] [--isa TIER]\n"
    "                      [--precision highest|medium] [--kc KC] [--mc MC]\n"
    "\n"
    "Benchmarks one projection y = x . w [+ bias]: x (M, K) an input whose M is a dim bound\n"
    "at run time, w (K, N) a param (its packed copy made on the first run, which the\n"
    "warm-up takes), as the models' projections are. In one process, in this order: the\n"
    "machine's fp32 FMA peak and read bandwidth on T threads; qkv's compile time (the\n"
    "kernel cache bypassed); Kernel::run on random inputs (median); OpenBLAS's cblas_sgemm\n"
    "(plus the bias, added in a loop) on the same inputs, its output checked against\n"
    "qkv's (max abs error <= 1e-4 x max(1, max |y|); in bf16, on the same bf16 values\n"
    "widened, one bf16 rounding more: 2^-8 x max |y|); the peak and bandwidth again.\n"
    "Prints ms, GFLOP/s (2*M*K*N flops), % of the tier's peak (the FMA peak on the f32\n"
    "tier; on avx512bf16 the vdpbf16ps peak, on amx the tdpbf16ps peak, each measured\n"
    "the same way and printed), and\n"
    "OpenBLAS ms / qkv ms.\n"
    "\n"
    "options:\n"
    "  --m M, --k K, --n N   the sizes (default 2048, 512, 2048)\n"
    "  --threads T     threads for qkv, OpenBLAS, the peak and the bandwidth (default: all\n"
    "                  logical CPUs)\n"
    "  --bias          y = x . w + bias (in qkv the tiles start from the bias)\n"
    "  --dtype T       x, w (and bias) in f32 (default) or bf16\n"
    "  --isa TIER      the tier qkv's products run on: host (default: the best this CPU\n"
    "                  has), f32, avx512bf16, amx (docs/compiler.md, \"ISA tiers\")\n"
    "  --precision P   highest (default) or medium: f32 products on the tier's bf16 engine\n"
    "  --kc KC, --mc MC  the GEMM's blocks (Schedule::gemm_k_block, gemm_m_block; default:\n"
    "                  from the host's L1 and L2 caches)\n"
    "  --json          one JSON object on stdout: name (gemm), m, k, n, bias, dtype, tier,\n"
    "                  matmul_precision, threads, isa (the peak loop's), ms, min_ms, runs,\n"
    "                  gflops, pct_peak (of the tier's peak), peak_gflops (the tier's),\n"
    "                  fma_peak_gflops, bf16_peak_gflops, amx_peak_gflops,\n"
    "                  engine (FMA, vdpbf16ps, tdpbf16ps), bandwidth_gbs, compile_ms, baselines\n"
    "                  (openblas: ms, ratio, gflops, pct_peak, max_abs_err, ok), steal (the\n"
    "                  share of CPU time the VM's host took during qkv's runs, /proc/stat;\n"
    "                  -1 where unknown)\n"
    "  --repeat N      exactly N timed runs of each (default: adaptive, >= 3 runs and >= 1 s)\n"
    "  --no-baselines  time qkv alone\n";

namespace {

namespace qb = qkv::bench;
using qb::fixed;
using json = nlohmann::ordered_json;

void progress(const std::string &s) { std::cerr << "[qkv bench gemm] " << s << std::endl; }

struct GemmConfig {
  std::int64_t m = 2048, k = 512, n = 2048;
  int threads = 1;
  bool bias = false, json = false, baselines = true;
  int repeat = 0;
  DType dtype = DType::F32;
  Isa isa = Isa::Host;
  MatmulPrecision precision = MatmulPrecision::Highest;
  int kc = 0, mc = 0;
};

GemmConfig gemm_config(const cli::Args &a) {
  cli::check_opts(a, {"m", "k", "n", "threads", "bias", "json", "repeat", "no-baselines", "dtype",
                      "isa", "precision", "kc", "mc"});
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
  if (a.opts.count("dtype")) {
    const std::string &d = a.opts.at("dtype");
    if (d != "f32" && d != "bf16")
      user_error("--dtype takes f32 or bf16, got '" + d + "'");
    c.dtype = d == "bf16" ? DType::BF16 : DType::F32;
  }
  if (a.opts.count("isa"))
    c.isa = parse_isa(a.opts.at("isa"), "--isa");
  c.kc = static_cast<int>(cli::int_opt(a, "kc").value_or(0));
  c.mc = static_cast<int>(cli::int_opt(a, "mc").value_or(0));
  if (a.opts.count("precision")) {
    const std::string &p = a.opts.at("precision");
    if (p != "highest" && p != "medium")
      user_error("--precision takes highest or medium, got '" + p + "'");
    c.precision = p == "medium" ? MatmulPrecision::Medium : MatmulPrecision::Highest;
  }
  return c;
}

Graph gemm_graph(const GemmConfig &c) {
  Graph g("gemm");
  Value x = g.input("x", c.dtype, {Dim("M"), Dim("K", c.k)});
  Value w = g.param("w", c.dtype, {Dim("K", c.k), Dim("N", c.n)});
  Value y = c.bias ? linear(x, w, g.param("bias", c.dtype, {Dim("N", c.n)})) : linear(x, w);
  g.output("y", y);
  return g;
}

qb::TimingPolicy policy(const GemmConfig &c) {
  qb::TimingPolicy p;
  p.runs = c.repeat;
  return p;
}

/// The engine a GEMM's products ran on, whose peak its % is of.
enum class Engine { Fma, Dot, Amx };
const char *engine_name(Engine e) {
  return e == Engine::Amx ? "tdpbf16ps" : e == Engine::Dot ? "vdpbf16ps" : "FMA";
}

struct Machine {
  qb::Isa isa = qb::host_isa();
  std::vector<double> peaks, bf16_peaks, amx_peaks, bandwidths;
  void measure(int threads, const char *when) {
    progress(std::string("FMA peak, vdpbf16ps and tdpbf16ps peaks, read bandwidth on ") +
             std::to_string(threads) + " threads, " + when);
    peaks.push_back(qb::fma_peak_gflops(threads, isa).value);
    bf16_peaks.push_back(qb::bf16_dot_peak_gflops(threads).value);
    amx_peaks.push_back(qb::amx_bf16_peak_gflops(threads).value);
    bandwidths.push_back(qb::read_bandwidth_gbs(threads, 0, isa).value);
  }
  static double best(const std::vector<double> &v) { return *std::max_element(v.begin(), v.end()); }
  double peak() const { return best(peaks); }
  double bf16_peak() const { return best(bf16_peaks); }
  double amx_peak() const { return best(amx_peaks); }
  double bandwidth() const { return best(bandwidths); }
  double peak_of(Engine e) const {
    return e == Engine::Amx ? amx_peak() : e == Engine::Dot ? bf16_peak() : peak();
  }
  const std::vector<double> &peaks_of(Engine e) const {
    return e == Engine::Amx ? amx_peaks : e == Engine::Dot ? bf16_peaks : peaks;
  }
};

/// `t` as f32 (a copy when it is bf16).
Tensor as_f32(const Tensor &t) { return t.dtype() == DType::F32 ? t : t.to(DType::F32); }

} // namespace

namespace {

/// What one `qkv bench gemm` measured.
struct GemmRun {
  GemmConfig c;
  Machine machine;
  std::string tier, precision;
  Engine engine = Engine::Fma; // what the products ran on: % peak is of its peak
  double compile_ms = 0, flops = 0;
  qb::Timing qkv, blas;
  bool have_blas = false, ok = true;
  double err = 0, limit = 0; // OpenBLAS against qkv, and what is allowed

  double gflops(const qb::Timing &t) const { return flops / (t.median_ms * 1e6); }
  // The peak of the tier the products ran on; OpenBLAS's sgemm is on f32 FMAs whatever
  // qkv's tier, so it is shown against the same peak, for the ratio of the two.
  double peak() const { return machine.peak_of(engine); }
  double pct(const qb::Timing &t) const { return 100 * gflops(t) / peak(); }
};

Kernel compile_gemm(const Graph &g, GemmRun &r) {
  progress("compiling");
  CompileOptions o;
  o.schedule.threads = r.c.threads;
  o.cache.read = false;
  o.cache.write = false;
  o.isa = r.c.isa;
  o.matmul_precision = r.c.precision;
  o.schedule.gemm_k_block = r.c.kc;
  o.schedule.gemm_m_block = r.c.mc;
  Kernel kernel = compile(g, Target::host(), o);
  r.compile_ms = kernel.stats().total_ms;
  r.tier = kernel.stats().isa;
  r.precision = kernel.stats().matmul_precision;
  // Products on bf16 pairs: bf16 operands on the avx512bf16 and amx tiers, or f32 ones
  // under medium; on amx the GEMM's blocks run on tiles (M of a few rows on vdpbf16ps).
  bool pairs = r.tier != "f32" &&
               (r.c.dtype == DType::BF16 || r.c.precision == MatmulPrecision::Medium);
  r.engine = !pairs ? Engine::Fma : r.tier == "amx" ? Engine::Amx : Engine::Dot;
  progress("tier " + r.tier + " (" + engine_name(r.engine) + ")");
  return kernel;
}

/// OpenBLAS's sgemm (plus the bias, in a loop) on the same values widened to f32, timed
/// and compared with qkv's output `y`.
void run_openblas(const TensorMap &in, const Tensor &y, GemmRun &r) {
  const GemmConfig &c = r.c;
  progress("running openblas");
  qb::settle();
  Tensor out(DType::F32, y.shape());
  Tensor xf = as_f32(in.at("x")), wf = as_f32(in.at("w")),
         bf = c.bias ? as_f32(in.at("bias")) : Tensor();
  const float *x = xf.data_as<float>(), *w = wf.data_as<float>();
  const float *bias = c.bias ? bf.data_as<float>() : nullptr;
  float *o = out.data_as<float>();
  r.blas = qb::time_runs(
      [&] {
        qb::matmul(qb::Baseline::OpenBlas, c.m, c.k, c.n, x, w, o, c.threads);
        if (bias)
          qb::parallel_for(c.m, c.threads, [&](std::int64_t i, int) {
            for (std::int64_t j = 0; j < c.n; ++j)
              o[i * c.n + j] += bias[j];
          });
      },
      policy(c));
  for (std::int64_t i = 0; i < out.numel(); ++i) {
    double d = std::fabs(y.get(i) - o[i]);
    r.err = std::isnan(d) ? INFINITY : std::max(r.err, d);
  }
  r.ok = r.err <= r.limit;
  progress("openblas: " + fixed(r.blas.median_ms, 3) + " ms (median of " +
           std::to_string(r.blas.runs) + "), max_abs_err " + std::to_string(r.err));
}

/// How far OpenBLAS may be from qkv's `y`: 1e-4 of the largest |y|; in bf16 qkv rounds
/// its f32 sums once more, half an ulp (2^-8 of the largest |y|); under medium precision
/// its operands are rounded too, about sqrt(K) such errors.
double allowed_error(const GemmRun &r, const Tensor &y) {
  double scale = 1;
  for (std::int64_t i = 0; i < y.numel(); ++i)
    scale = std::max(scale, std::fabs(y.get(i)));
  if (r.c.precision == MatmulPrecision::Medium && r.engine != Engine::Fma)
    return std::ldexp(scale, -7) * std::sqrt(static_cast<double>(r.c.k));
  return r.c.dtype == DType::BF16 ? std::ldexp(scale, -8) + 1e-4 * scale : 1e-4 * scale;
}

void print_gemm_json(const GemmRun &r) {
  const GemmConfig &c = r.c;
  const Machine &m = r.machine;
  json j = {{"name", "gemm"}, {"m", c.m},         {"k", c.k},
            {"n", c.n},       {"bias", c.bias},   {"dtype", dtype_name(c.dtype)},
            {"tier", r.tier}, {"matmul_precision", r.precision},
            {"threads", c.threads},
            {"isa", qb::isa_name(m.isa)},          {"ms", r.qkv.median_ms},
            {"min_ms", r.qkv.min_ms},              {"runs", r.qkv.runs},  {"gflops", r.gflops(r.qkv)},
            {"pct_peak", r.pct(r.qkv)},            {"peak_gflops", r.peak()},
            {"fma_peak_gflops", m.peak()},         {"bf16_peak_gflops", m.bf16_peak()},
            {"amx_peak_gflops", m.amx_peak()},     {"engine", engine_name(r.engine)},
            {"peak_gflops_measured", m.peaks_of(r.engine)},
            {"bandwidth_gbs", m.bandwidth()},      {"compile_ms", r.compile_ms},
            {"steal", r.qkv.steal}};
  j["baselines"] = json::object();
  if (r.have_blas)
    j["baselines"]["openblas"] = {{"ms", r.blas.median_ms},
                                  {"ratio", r.blas.median_ms / r.qkv.median_ms},
                                  {"runs", r.blas.runs},
                                  {"gflops", r.gflops(r.blas)},
                                  {"pct_peak", r.pct(r.blas)},
                                  {"max_abs_err", r.err},
                                  {"ok", r.ok}};
  std::cout << j.dump(2) << "\n";
}

void print_gemm_table(const GemmRun &r) {
  const GemmConfig &c = r.c;
  const Machine &m = r.machine;
  std::cout << "qkv bench gemm: M=" << c.m << " K=" << c.k << " N=" << c.n
            << (c.bias ? " +bias" : "") << ", " << dtype_name(c.dtype) << ", " << c.threads
            << " threads\n"
            << "machine   " << qb::isa_name(m.isa) << " FMA peak " << fixed(m.peak(), 1)
            << " GFLOP/s (the higher of " << fixed(m.peaks.front(), 1) << " and "
            << fixed(m.peaks.back(), 1) << ")";
  if (m.bf16_peak() > 0)
    std::cout << ", vdpbf16ps peak " << fixed(m.bf16_peak(), 1) << " GFLOP/s";
  if (m.amx_peak() > 0)
    std::cout << ", tdpbf16ps peak " << fixed(m.amx_peak(), 1) << " GFLOP/s";
  const char *engine = r.engine == Engine::Amx   ? ": bf16 pairs on AMX tiles (tdpbf16ps)"
                       : r.engine == Engine::Dot ? ": bf16 pairs on vdpbf16ps"
                                                 : ": f32 FMAs";
  std::cout << ", read bandwidth " << fixed(m.bandwidth(), 1) << " GB/s\n"
            << "tier      " << r.tier << engine << ", matmul precision " << r.precision
            << "; % peak is of the " << engine_name(r.engine) << " peak\n"
            << "compile   " << fixed(r.compile_ms, 1) << " ms cold\n\n"
            << "             median ms  runs    GFLOP/s  % peak  baseline/qkv  max abs err\n";
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-10s %12.3f %5d %10.2f %7.2f%% %12s  %s\n", "qkv",
                r.qkv.median_ms, r.qkv.runs, r.gflops(r.qkv), r.pct(r.qkv), "-", "-");
  std::cout << buf;
  if (r.have_blas) {
    std::snprintf(buf, sizeof buf, "%-10s %12.3f %5d %10.2f %7.2f%% %11.3fx  %.2e%s\n",
                  "openblas", r.blas.median_ms, r.blas.runs, r.gflops(r.blas), r.pct(r.blas),
                  r.blas.median_ms / r.qkv.median_ms, r.err, r.ok ? "" : " WRONG");
    std::cout << buf << "openblas  " << qb::blas_config() << "\n";
  }
  std::cout << qb::steal_line(r.qkv.steal);
}

} // namespace

int cmd_bench_gemm(const cli::Args &a) {
  GemmRun r;
  r.c = gemm_config(a);
  const GemmConfig &c = r.c;
  Graph g = gemm_graph(c);
  progress("M=" + std::to_string(c.m) + " K=" + std::to_string(c.k) + " N=" + std::to_string(c.n) +
           (c.bias ? " +bias" : "") + ", " + std::to_string(c.threads) + " threads");
  // Weights scaled by 1/sqrt(K), as models initialise them: outputs stay O(1).
  TensorMap in = random_inputs(g, {{"M", c.m}}, {.seed = 1, .scale_params = true});
  r.machine.measure(c.threads, "before the runs");
  Kernel kernel = compile_gemm(g, r);
  progress("running qkv");
  qb::settle();
  Tensor y;
  r.qkv = qb::time_runs([&] { y = kernel.run(in).at("y"); }, policy(c));
  progress("qkv: " + fixed(r.qkv.median_ms, 3) + " ms (median of " + std::to_string(r.qkv.runs) + ")");
  r.flops = 2.0 * static_cast<double>(c.m) * static_cast<double>(c.k) * static_cast<double>(c.n);
  r.limit = allowed_error(r, y);
  r.have_blas = c.baselines && !qb::blas_config().empty();
  if (r.have_blas)
    run_openblas(in, y, r);
  r.machine.measure(c.threads, "after the runs");
  if (c.json)
    print_gemm_json(r);
  else
    print_gemm_table(r);
  if (!r.ok) {
    std::cerr << "qkv: error: openblas disagrees with qkv: max_abs_err " << r.err << " > "
              << r.limit << "\n";
    return 1;
  }
  return 0;
}

} // namespace qkv::tool
