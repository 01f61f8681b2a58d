// `qkv bench`: measures, in this order and in this process, the FMA peak and the read
// bandwidth on T threads, qkv's compile time, qkv's run time, and each baseline's run
// time on the same inputs, checking every baseline's output against qkv's.
#include "bench.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <qkv/compiler/compile.hpp>
#include <qkv/runtime/interpreter.hpp>
#include <qkv/tool.hpp>

#include "qkv_bench/baselines.hpp"
#include "qkv_bench/machine.hpp"
#include "qkv_bench/problem.hpp"
#include "qkv_bench/timing.hpp"
#include "workload.hpp"

namespace qkv::tool {

const char *const kBenchHelp =
    "usage: qkv bench NAME [shape options] [--threads T] [--compile-threads C] [--eager]\n"
    "                  [--json] [--repeat N]\n"
    "\n"
    "Benchmarks gallery graph NAME at a shape (default: the graph's benchmark shape, e.g.\n"
    "attn: B=1 H=16 L=2048 Dh=64; attn_window: L=8192 W=256; attn_decode: H=8 L=1 S=32768\n"
    "Dh=128; mha: B=1 H=8 L=2048 Dh=64, so D=512; decode: B=1 H=32 Hkv=8 S=4096 Dh=128).\n"
    "decode is one decode step: 1 query attends over a KV cache read in place, S rows\n"
    "cached per sequence (--kv-len S), plus this step's new k, v row; --paged reads the\n"
    "cache in pages of 16 rows through a block table, each sequence's pages scattered over\n"
    "the pool. In one process, in this order:\n"
    "  1. the machine: fp32 FMA peak (widest ISA: avx512, avx2 or scalar) and read\n"
    "     bandwidth (summing a buffer >> last-level cache), each on T threads at once,\n"
    "     measured before the runs and again after them, keeping the higher;\n"
    "  2. qkv: JIT compile time (schedule.threads = T) cold, the kernel cache bypassed, and\n"
    "     warm, loaded from the kernel cache the cold compiles wrote (a temporary cache\n"
    "     folder of the benchmark's own, removed at the end: the user's cache is neither\n"
    "     read nor written); then Kernel::run on random inputs (weights scaled by\n"
    "     1/sqrt(fan-in));\n"
    "  3. baselines on the same inputs, each checked against qkv's output:\n"
    "     reference  unfused plain C++ (scores materialised, mask, softmax, p.v), T threads\n"
    "     openblas   cblas_sgemm q.k^T, C++ mask + softmax, cblas_sgemm p.v, T threads\n"
    "     (decode: both read dense k, v (B, Hkv, S+1, Dh), the cached rows then the new\n"
    "     one, gathered once before they are timed)\n"
    "Progress goes to stderr; the results to stdout, as a table or (--json) one JSON\n"
    "object. Exits 1 when a baseline's output differs from qkv's by more than 1e-3 x\n"
    "max(1, max|qkv output|): a benchmark of a wrong result means nothing.\n"
    "\n"
    "Runs: after one untimed warm-up (counted when it took >= 0.5 s), repeat until >= 3 runs\n"
    "and >= 1 s, stopping before a run would pass 10 s (qkv) or 5 s (each baseline) in all;\n"
    "times are medians, and each one's run count is printed.\n"
    "\n"
    "Flops: attention 4*B*H*Dh*pairs, pairs = the (query, key) pairs the mask keeps,\n"
    "counted exactly; blocks add 2*M*K*N per projection. The variants of\n"
    "examples/gallery/ are counted node by node, their pairs by evaluating the mask on\n"
    "the inputs; decode keeps all S+1 keys. read_gbs: bytes of the inputs (q, k, v; or x,\n"
    "memory and the weights; decode: the cached k, v rows it attends, q, the new k, v,\n"
    "lengths and block table) read once and of the output written once, divided by the\n"
    "median time; pct_bandwidth compares that with the read bandwidth. The\n"
    "baselines run where they compute the graph: attention with a mask (a mask expression\n"
    "as a table of kept pairs), blocks of projections and attention; not with a score_mod.\n"
    "\n"
    "options:\n"
    "  --threads T     threads for qkv, the baselines, peak and bandwidth (default: all\n"
    "                  logical CPUs)\n"
    "  --compile-threads C\n"
    "                  threads LLVM optimises and compiles the kernel on, in as many parts\n"
    "                  (CompileOptions::compile_threads; default 0: the host's hardware\n"
    "                  threads, at most 4)\n"
    "  --eager         compile every attention schedule with the kernel, none when a call\n"
    "                  first needs it (CompileOptions::defer_schedules = false)\n"
    "  --json          print one JSON object on stdout instead of the table\n"
    "  --repeat N      exactly N timed runs of qkv and of each baseline, and N cold and N\n"
    "                  warm compiles (default: adaptive runs as above, 3 cold and 5 warm\n"
    "                  compiles)\n"
    "  --no-baselines  time qkv alone\n"
    "  --isa TIER      the tier qkv's products run on: host (default: the best this CPU\n"
    "                  has), f32, avx512bf16, amx (docs/compiler.md, \"ISA tiers\");\n"
    "                  with --dtype bf16 on avx512bf16, % peak is of the vdpbf16ps peak,\n"
    "                  on amx of the tdpbf16ps (AMX tile) peak, each measured the same\n"
    "                  way as the FMA peak\n"
    "  --q-tile T, --kv-tile T\n"
    "                  the tiled attention kernel's queries and keys per tile\n"
    "                  (Schedule::q_tile, kv_tile; default 0: the kernel's own choice)\n"
    "  --decode-rows N  attention over at most N queries takes the split-KV decode kernel\n"
    "                  (Schedule::decode_rows; default 0: the kernel's own threshold)\n"
    "\n"
    "shape options:\n" QKV_SHAPE_HELP "\n"
    "JSON fields: name, shape (with dtype; decode: with paged, page_rows), mask (none, causal,\n"
    "window, cache, expr), threads, isa (the peak loop's), tier (qkv's products'), ms, runs,\n"
    "compile_ms (= compile_cold_ms), compile_runs, compile_cold_ms, compile_warm_ms (null\n"
    "when the warm compiles did not come from the cache, e.g. under QKV_CACHE=0),\n"
    "compile_warm_runs, compile_warm_cache (what the cache did), compile_stages_ms (the\n"
    "median cold compile's stages), compile_parts (the parts LLVM compiled), deferred_parts\n"
    "(the task bodies left to the first call that runs each), schedules (the\n"
    "attention kernels qkv's runs took, with their runs), flops, gflops, kept_pairs and pairs "
    "(over all batches and\n"
    "heads), peak_gflops (the tier's), peak_kind (fma, vdpbf16ps, tdpbf16ps), fma_peak_gflops,\n"
    "bf16_peak_gflops, amx_peak_gflops, pct_peak, bytes, read_gbs, bandwidth_gbs, pct_bandwidth,\n"
    "baselines (name -> {ms, ratio = baseline ms / qkv ms, runs, gflops, pct_peak,\n"
    "max_abs_err, ok}), baselines_not_run (why, when they did not), tolerance, wall_s,\n"
    "steal (the share of the machine's CPU time a virtual machine's host took for other\n"
    "guests during qkv's runs, from /proc/stat; -1 where unknown).\n"
    "Percentages are in percent.\n";

namespace {

namespace qb = qkv::bench;
using qb::fixed;
using gallery::attention_problem;
using gallery::block_problem;
using gallery::Entry;
using gallery::GraphShape;
using gallery::is_block;
using gallery::Workload;
using json = nlohmann::ordered_json;

constexpr double kQkvBudgetS = 10, kBaselineBudgetS = 5;
constexpr double kTolerance = 1e-3; // of max(1, max |qkv output|)

struct Config {
  const Entry *entry = nullptr;
  bool progress = true; // progress lines on stderr
  GraphShape shape;
  int threads = 1;
  bool json = false;
  int repeat = 0; // 0: adaptive
  bool baselines = true;
  int compile_threads = 0; // CompileOptions::compile_threads
  bool eager = false;      // !CompileOptions::defer_schedules
  Isa isa = Isa::Host;      // CompileOptions::isa
  int q_tile = 0, kv_tile = 0; // Schedule::q_tile, kv_tile (0: the kernel's defaults)
  int decode_rows = 0;         // Schedule::decode_rows (0: the kernel's default)
};

struct Result {
  std::string name;
  qb::Timing t;
  double max_abs_err = 0;
  bool ok = true;
};

struct Report {
  Config c;
  qb::Isa isa = qb::Isa::Scalar;
  qb::Measurement peak, bandwidth;       // the higher of the measurements below
  std::vector<double> peaks, bandwidths; // before and after the runs
  qb::Measurement bf16_peak;             // vdpbf16ps (0 without AVX512-BF16), the same way
  std::vector<double> bf16_peaks;
  qb::Measurement amx_peak; // tdpbf16ps on AMX tiles (0 without AMX-BF16), the same way
  std::vector<double> amx_peaks;
  std::string tier;      // the tier qkv's products ran on (CompileStats::isa)
  bool on_pairs = false; // bf16 products on vdpbf16ps: % peak is of bf16_peak
  bool on_amx = false;   // bf16 products on AMX tiles: % peak is of amx_peak
  double flops = 0, bytes = 0;
  std::vector<double> compile_ms;      // cold: the kernel cache not read
  std::vector<double> warm_compile_ms; // warm: loaded from the kernel cache
  std::string warm_cache_note;         // what the cache did for the warm compiles
  CompileStats compile_stats;          // of the median cold compile
  Result qkv;
  std::vector<Result> baselines;
  double out_scale = 1; // max(1, max |qkv output|)
  double wall_s = 0;
  std::int64_t kept = 0, pairs = 0; // (query, key) pairs kept and in all, per batch and head
  std::string no_baselines;         // why the baselines did not run, or ""
  std::vector<std::uint8_t> table;  // a mask expression's kept pairs, for the baselines
  // The attention kernels qkv's timed runs took (Kernel::schedule_runs), with their runs.
  std::vector<std::pair<std::string, std::int64_t>> schedules;
};

bool g_progress = true; // Config::progress of the benchmark running

void progress(const std::string &s) {
  if (g_progress)
    std::cerr << "[qkv bench] " << s << std::endl;
}

/// 4 significant digits, e.g. 17.18, 0.001049, 2.4e-07.
std::string sig(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

Config config_of(const cli::Args &a) {
  cli::check_opts(a, {"threads", "compile-threads", "eager", "json", "repeat", "no-baselines",
                      "isa", "q-tile", "kv-tile", "decode-rows", QKV_SHAPE_OPTS});
  for (const char *flag : {"eager", "json", "no-baselines"})
    if (a.opts.count(flag) && !a.opts.at(flag).empty())
      user_error(std::string("--") + flag + " takes no value, got '" + a.opts.at(flag) + "'");
  Config c;
  c.entry = &gallery::registered(a.name);
  c.shape = cli::shape_from_opts(*c.entry, a, c.entry->bench_shape);
  c.threads = static_cast<int>(cli::int_opt(a, "threads").value_or(qb::hardware_threads()));
  c.json = a.opts.count("json") > 0;
  c.repeat = static_cast<int>(cli::int_opt(a, "repeat").value_or(0));
  c.baselines = a.opts.count("no-baselines") == 0;
  c.compile_threads = static_cast<int>(cli::int_opt(a, "compile-threads", 0).value_or(0));
  c.eager = a.opts.count("eager") > 0;
  if (a.opts.count("isa"))
    c.isa = parse_isa(a.opts.at("isa"), "--isa");
  c.q_tile = static_cast<int>(cli::int_opt(a, "q-tile", 0).value_or(0));
  c.kv_tile = static_cast<int>(cli::int_opt(a, "kv-tile", 0).value_or(0));
  c.decode_rows = static_cast<int>(cli::int_opt(a, "decode-rows", 0).value_or(0));
  return c;
}

/// Measures the peak and the bandwidth once more (`when`: "before" or "after" the runs);
/// the report keeps the higher of the measurements, since other processes on the
/// machine can only lower them.
void measure_machine(Report &r, const char *when) {
  r.isa = qb::host_isa();
  progress(std::string("FMA peak (") + std::string(qb::isa_name(r.isa)) +
           ") and read bandwidth on " + std::to_string(r.c.threads) + " threads, " + when);
  qb::Measurement peak = qb::fma_peak_gflops(r.c.threads, r.isa);
  qb::Measurement bw = qb::read_bandwidth_gbs(r.c.threads, 0, r.isa);
  qb::Measurement dot = qb::bf16_dot_peak_gflops(r.c.threads);
  qb::Measurement amx = qb::amx_bf16_peak_gflops(r.c.threads);
  r.amx_peaks.push_back(amx.value);
  if (amx.value > r.amx_peak.value)
    r.amx_peak = amx;
  r.peaks.push_back(peak.value);
  r.bandwidths.push_back(bw.value);
  r.bf16_peaks.push_back(dot.value);
  if (peak.value > r.peak.value)
    r.peak = peak;
  if (bw.value > r.bandwidth.value)
    r.bandwidth = bw;
  if (dot.value > r.bf16_peak.value)
    r.bf16_peak = dot;
  progress("peak " + fixed(peak.value, 1) + " GFLOP/s" +
           (dot.value > 0 ? ", vdpbf16ps peak " + fixed(dot.value, 1) + " GFLOP/s" : "") +
           (amx.value > 0 ? ", tdpbf16ps peak " + fixed(amx.value, 1) + " GFLOP/s" : "") +
           ", bandwidth " + fixed(bw.value, 1) + " GB/s");
}

/// A kernel cache folder of the benchmark's own, removed with everything in it at the end:
/// the cold compiles write to it and the warm ones read from it, so the user's cache is
/// neither read (cold times would be warm) nor filled.
class ScratchCache {
public:
  ScratchCache() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "qkv-bench-kernels-XXXXXX").string();
    if (::mkdtemp(tmpl.data()))
      path_ = tmpl;
  }
  ~ScratchCache() {
    std::error_code ec;
    if (!path_.empty())
      std::filesystem::remove_all(path_, ec);
  }
  const std::string &path() const { return path_; }

private:
  std::string path_;
};

/// Cold compiles (the cache bypassed) then warm ones (cache hits); returns a cold kernel.
Kernel compile_timed(const Graph &g, Report &r) {
  int n = r.c.repeat > 0 ? r.c.repeat : 3, n_warm = r.c.repeat > 0 ? r.c.repeat : 5;
  progress("compiling " + g.name() + " (" + std::to_string(n) + "x cold, " +
           std::to_string(n_warm) + "x from the kernel cache)");
  ScratchCache scratch;
  CompileOptions o;
  o.schedule.threads = r.c.threads;
  o.schedule.q_tile = r.c.q_tile;
  o.schedule.kv_tile = r.c.kv_tile;
  o.schedule.decode_rows = r.c.decode_rows;
  o.compile_threads = r.c.compile_threads;
  o.defer_schedules = !r.c.eager;
  o.isa = r.c.isa;
  o.cache.dir = scratch.path();
  o.cache.read = false;
  o.cache.write = !scratch.path().empty();
  std::vector<Kernel> kernels;
  for (int i = 0; i < n; ++i) {
    kernels.push_back(compile(g, Target::host(), o));
    r.compile_ms.push_back(kernels.back().stats().total_ms);
  }
  o.cache.read = o.cache.write;
  for (int i = 0; i < n_warm; ++i) {
    Kernel warm = compile(g, Target::host(), o);
    r.warm_cache_note = warm.stats().cache_note;
    if (!warm.stats().from_cache)
      break;
    r.warm_compile_ms.push_back(warm.stats().total_ms);
  }
  if (scratch.path().empty())
    r.warm_cache_note = "no scratch cache folder could be made";
  double med = qb::median(r.compile_ms);
  auto closest = std::min_element(kernels.begin(), kernels.end(), [&](auto &x, auto &y) {
    return std::abs(x.stats().total_ms - med) < std::abs(y.stats().total_ms - med);
  });
  r.compile_stats = closest->stats();
  r.tier = r.compile_stats.isa;
  r.on_amx = r.tier == "amx" && r.c.shape.dtype == DType::BF16;
  r.on_pairs = r.tier != "f32" && r.c.shape.dtype == DType::BF16 && !r.on_amx;
  return std::move(kernels.back());
}

qb::TimingPolicy policy(const Config &c, double budget_s) {
  qb::TimingPolicy p;
  p.runs = c.repeat;
  p.budget_seconds = budget_s;
  return p;
}

Tensor time_qkv(const Kernel &k, const TensorMap &in, Report &r) {
  progress("running qkv");
  qb::settle();
  Tensor out;
  r.qkv.name = "qkv";
  std::vector<std::pair<std::string, std::int64_t>> before = k.schedule_runs();
  r.qkv.t = qb::time_runs([&] { out = k.run(in).begin()->second; }, policy(r.c, kQkvBudgetS));
  std::vector<std::pair<std::string, std::int64_t>> after = k.schedule_runs();
  for (std::size_t i = 0; i < after.size(); ++i)
    if (after[i].second > before[i].second)
      r.schedules.emplace_back(after[i].first, after[i].second - before[i].second);
  progress("qkv: " + fixed(r.qkv.t.median_ms, 3) + " ms (median of " +
           std::to_string(r.qkv.t.runs) + ")");
  for (std::int64_t i = 0; i < out.numel(); ++i)
    r.out_scale = std::max(r.out_scale, std::fabs(out.get(i)));
  return out;
}

Result time_baseline(qb::Baseline b, const TensorMap &in, const Tensor &want, Report &r) {
  Result res;
  res.name = std::string(qb::baseline_name(b));
  progress("running baseline " + res.name);
  qb::settle();
  Tensor out(DType::F32, want.shape());
  const std::uint8_t *table = r.table.empty() ? nullptr : r.table.data();
  res.t = qb::time_runs(
      [&] { gallery::run_baseline(b, *r.c.entry, r.c.shape, in, out, r.c.threads, table); },
      policy(r.c, kBaselineBudgetS));
  const float *got = out.data_as<float>(), *w = want.data_as<float>();
  for (std::int64_t i = 0; i < out.numel(); ++i) {
    double d = std::fabs(static_cast<double>(got[i]) - w[i]);
    res.max_abs_err = std::isnan(d) ? INFINITY : std::max(res.max_abs_err, d);
  }
  res.ok = res.max_abs_err <= kTolerance * r.out_scale;
  progress(res.name + ": " + fixed(res.t.median_ms, 3) + " ms (median of " +
           std::to_string(res.t.runs) + "), max_abs_err " + sig(res.max_abs_err));
  return res;
}

double gflops(const Report &r, const Result &x) { return r.flops / (x.t.median_ms * 1e6); }
/// The peak of the tier qkv's products ran on: vdpbf16ps for bf16 on the avx512bf16 tier,
/// tdpbf16ps on the amx tier (whose short query tiles and cache views still take pairs:
/// `schedules` says which ran), else the FMA peak. The baselines (f32 FMAs) are shown
/// against the same, for the ratio.
double tier_peak(const Report &r) {
  return r.on_amx ? r.amx_peak.value : r.on_pairs ? r.bf16_peak.value : r.peak.value;
}
const char *peak_kind(const Report &r) {
  return r.on_amx ? "tdpbf16ps" : r.on_pairs ? "vdpbf16ps" : "fma";
}
double pct_peak(const Report &r, const Result &x) { return 100 * gflops(r, x) / tier_peak(r); }
double gbs(const Report &r, const Result &x) { return r.bytes / (x.t.median_ms * 1e6); }

json shape_json(const Config &c) {
  const GraphShape &s = c.shape;
  json j = {{"batch", s.batch}, {"heads", s.heads},   {"kv_heads", s.kv_heads},
            {"seq", s.seq},     {"kv_len", s.kv_len}, {"head_dim", s.head_dim},
            {"dtype", std::string(dtype_name(s.dtype))}};
  if (is_block(*c.entry))
    j["model_dim"] = s.model_dim();
  if (c.entry->uses_window())
    j["window"] = s.window;
  if (c.entry->workload.cache) {
    j["paged"] = s.paged;
    if (s.paged)
      j["page_rows"] = GraphShape::kPageRows;
  }
  if (c.entry->user) // its dynamic dims by name (the fields above: its attention's sizes)
    for (const auto &[d, n] : c.entry->dims(s))
      j["dims"][d] = n;
  return j;
}

/// none, causal, window, cache (cache_mask over a KV cache), or expr (any other mask
/// expression, evaluated).
std::string mask_label(const Entry &e) {
  if (e.workload.mask == Workload::Mask::Expr)
    return "expr";
  if (e.workload.cache)
    return "cache";
  return std::string(qb::mask_name(attention_problem(e, GraphShape{}).mask));
}

/// The openblas baseline ran (its configuration line is printed then only).
bool ran_openblas(const Report &r) {
  return std::any_of(r.baselines.begin(), r.baselines.end(),
                     [](const Result &b) { return b.name == "openblas"; });
}

json to_json(const Report &r) {
  json j;
  j["name"] = r.c.entry->name;
  j["shape"] = shape_json(r.c);
  j["mask"] = mask_label(*r.c.entry);
  j["kept_pairs"] = r.kept;
  j["pairs"] = r.pairs;
  j["threads"] = r.c.threads;
  j["isa"] = qb::isa_name(r.isa);
  j["tier"] = r.tier;
  j["ms"] = r.qkv.t.median_ms;
  j["runs"] = r.qkv.t.runs;
  j["min_ms"] = r.qkv.t.min_ms;
  j["steal"] = r.qkv.t.steal;
  j["compile_ms"] = qb::median(r.compile_ms);
  j["compile_runs"] = r.compile_ms.size();
  j["compile_cold_ms"] = qb::median(r.compile_ms);
  j["compile_warm_ms"] =
      r.warm_compile_ms.empty() ? json(nullptr) : json(qb::median(r.warm_compile_ms));
  j["compile_warm_runs"] = r.warm_compile_ms.size();
  j["compile_warm_cache"] = r.warm_cache_note;
  for (const auto &[stage, ms] : r.compile_stats.stage_ms)
    j["compile_stages_ms"][stage] = ms;
  j["compile_parts"] = r.compile_stats.codegen_parts;
  j["deferred_parts"] = r.compile_stats.deferred_parts;
  j["checked"] = r.compile_stats.checked;
  j["schedules"] = json::object();
  for (const auto &[name, runs] : r.schedules)
    j["schedules"][name] = runs;
  j["flops"] = r.flops;
  j["gflops"] = gflops(r, r.qkv);
  j["peak_gflops"] = tier_peak(r);
  j["peak_kind"] = peak_kind(r);
  j["peak_gflops_measured"] = r.on_amx ? r.amx_peaks : r.on_pairs ? r.bf16_peaks : r.peaks;
  j["fma_peak_gflops"] = r.peak.value;
  j["bf16_peak_gflops"] = r.bf16_peak.value;
  j["amx_peak_gflops"] = r.amx_peak.value;
  j["pct_peak"] = pct_peak(r, r.qkv);
  j["bytes"] = r.bytes;
  j["read_gbs"] = gbs(r, r.qkv);
  j["bandwidth_gbs"] = r.bandwidth.value;
  j["bandwidth_gbs_measured"] = r.bandwidths;
  j["pct_bandwidth"] = 100 * gbs(r, r.qkv) / r.bandwidth.value;
  j["baselines"] = json::object();
  for (const Result &b : r.baselines)
    j["baselines"][b.name] = {{"ms", b.t.median_ms},
                              {"ratio", b.t.median_ms / r.qkv.t.median_ms},
                              {"runs", b.t.runs},
                              {"gflops", gflops(r, b)},
                              {"pct_peak", pct_peak(r, b)},
                              {"max_abs_err", b.max_abs_err},
                              {"ok", b.ok}};
  if (!qb::missing_baselines_reason().empty() && r.no_baselines.empty())
    j["baselines_missing"] = qb::missing_baselines_reason();
  if (!r.no_baselines.empty())
    j["baselines_not_run"] = r.no_baselines;
  if (!qb::blas_config().empty() && ran_openblas(r))
    j["blas"] = qb::blas_config();
  j["tolerance"] = kTolerance * r.out_scale;
  j["wall_s"] = r.wall_s;
  return j;
}

std::string work_line(const Report &r) {
  const Entry &e = *r.c.entry;
  qb::AttentionProblem p = attention_problem(e, r.c.shape);
  std::string s = sig(r.flops * 1e-9) + " GFLOP";
  if (is_block(e))
    s += " (projections " + sig(block_problem(e, r.c.shape).projection_flops() * 1e-9) +
         " + attention " + sig(p.flops() * 1e-9) + ")";
  if (e.fixed())
    s += "; counted node by node, attention 2*(Dh+Dv)*pairs with " + std::to_string(r.kept) +
         " of " + std::to_string(r.pairs) + " pairs kept (all batches and heads)";
  else
    s += "; attention 4*B*H*Dh*pairs with " + std::to_string(p.kept_pairs()) + " of " +
         std::to_string(p.len_q * p.len_kv) + " pairs kept per head";
  if (e.workload.cache)
    return s + " (" + std::to_string(r.c.shape.kv_len) + " cached keys + the new one)" +
           "\nbytes     " + sig(r.bytes * 1e-6) + " MB (the cached k, v rows attended, q, " +
           "the new k, v, lengths" + (r.c.shape.paged ? ", the block table" : "") +
           " read once + output written once)";
  return s + "\nbytes     " + sig(r.bytes * 1e-6) + " MB (inputs read once + output " +
         "written once)";
}

void print_row(std::ostream &os, const Report &r, const Result &x, bool is_qkv) {
  char buf[256];
  std::string ratio = is_qkv ? "-" : fixed(x.t.median_ms / r.qkv.t.median_ms, 3) + "x";
  char err[32] = "-";
  if (!is_qkv)
    std::snprintf(err, sizeof err, "%.2e%s", x.max_abs_err, x.ok ? "" : " WRONG");
  std::snprintf(buf, sizeof buf, "%-10s %12.3f %5d %10.2f %7.2f%% %9.2f %7.2f%% %12s  %s\n",
                x.name.c_str(), x.t.median_ms, x.t.runs, gflops(r, x), pct_peak(r, x), gbs(r, x),
                100 * gbs(r, x) / r.bandwidth.value, ratio.c_str(), err);
  os << buf;
}

void print_table(std::ostream &os, const Report &r) {
  const Config &c = r.c;
  os << "qkv bench " << c.entry->name << ": " << c.entry->sizes(c.shape) << ", mask "
            << mask_label(*c.entry) << ", " << c.threads << " threads\n"
            << "machine   " << qb::isa_name(r.isa) << " FMA peak " << fixed(r.peak.value, 1)
            << " GFLOP/s, read bandwidth " << fixed(r.bandwidth.value, 1) << " GB/s (on "
            << c.threads << " threads; the higher of " << fixed(r.peaks.front(), 1) << " and "
            << fixed(r.peaks.back(), 1) << ", " << fixed(r.bandwidths.front(), 1) << " and "
            << fixed(r.bandwidths.back(), 1) << ")";
  if (r.bf16_peak.value > 0)
    os << "; vdpbf16ps peak " << fixed(r.bf16_peak.value, 1) << " GFLOP/s";
  if (r.amx_peak.value > 0)
    os << "; tdpbf16ps peak " << fixed(r.amx_peak.value, 1) << " GFLOP/s";
  os << "\n"
            << "tier      " << r.tier
            << (r.on_amx     ? ": bf16 products on AMX tiles; % peak is of the tdpbf16ps peak"
                : r.on_pairs ? ": bf16 products on vdpbf16ps; % peak is of the vdpbf16ps peak"
                             : ": f32 FMAs; % peak is of the FMA peak")
            << "\n"
            << "flops     " << work_line(r) << "\n"
            << "compile   " << fixed(qb::median(r.compile_ms), 1) << " ms cold (median of "
            << r.compile_ms.size() << "):";
  for (const auto &[stage, ms] : r.compile_stats.stage_ms)
    if (stage != "graph")
      os << " " << stage << "=" << fixed(ms, 1);
  os << " (LLVM in " << r.compile_stats.codegen_parts << " part"
     << (r.compile_stats.codegen_parts == 1 ? "" : "s") << ", " << r.compile_stats.deferred_parts
     << " deferred; " << (r.compile_stats.checked ? "checked" : "no checks") << ")\n          ";
  if (r.warm_compile_ms.empty())
    os << "warm: not measured, the kernel cache did not serve it (" << r.warm_cache_note
              << ")";
  else
    os << fixed(qb::median(r.warm_compile_ms), 2) << " ms warm, from the kernel cache "
              << "(median of " << r.warm_compile_ms.size() << ")";
  if (!r.schedules.empty()) {
    os << "\nschedule ";
    for (const auto &[name, runs] : r.schedules)
      os << " " << name << " (" << runs << " runs)";
  }
  os << "\n\n"
            << "             median ms  runs    GFLOP/s  % peak  read GB/s    % bw  "
               "baseline/qkv  max abs err\n";
  print_row(os, r, r.qkv, true);
  for (const Result &b : r.baselines)
    print_row(os, r, b, false);
  if (!qb::missing_baselines_reason().empty() && r.no_baselines.empty())
    os << "(" << qb::missing_baselines_reason() << ")\n";
  if (!r.no_baselines.empty())
    os << "(baselines not run: " << r.no_baselines << ")\n";
  if (!qb::blas_config().empty() && ran_openblas(r))
    os << "openblas  " << qb::blas_config() << "\n";
  os << qb::steal_line(r.qkv.t.steal) << "wall time " << fixed(r.wall_s, 1) << " s\n";
}

int verdict(const Report &r) {
  int status = 0;
  for (const Result &b : r.baselines)
    if (!b.ok) {
      std::cerr << "qkv: error: baseline '" << b.name << "' disagrees with qkv on graph '"
                << r.c.entry->name << "': max_abs_err " << b.max_abs_err << " > tolerance "
                << kTolerance * r.out_scale << "\n";
      status = 1;
    }
  return status;
}

/// Flops, bytes and kept pairs: the variants' by evaluating their graphs on the inputs,
/// the other entries' by their fixed forms.
void count_work(Report &r, const Graph &g, const TensorMap &in) {
  const Entry &e = *r.c.entry;
  if (!e.fixed()) {
    r.flops = gallery::flops(e, r.c.shape);
    r.bytes = gallery::bytes(e, r.c.shape);
    qb::AttentionProblem p = attention_problem(e, r.c.shape);
    r.kept = p.kept_pairs() * p.batch * p.heads;
    r.pairs = p.len_q * p.len_kv * p.batch * p.heads;
    return;
  }
  progress("counting the pairs the mask keeps");
  r.flops = gallery::graph_flops(g, in);
  r.bytes = gallery::graph_bytes(g, in);
  for (const Node &n : g.nodes())
    if (n.op == OpKind::Attention) {
      r.kept += reference::kept_pairs(g, in, n.id);
      Shape q = resolve(g.node(n.inputs[0]).dims, complete_dims(g, e.dims(r.c.shape)));
      Shape k = resolve(g.node(n.inputs[1]).dims, complete_dims(g, e.dims(r.c.shape)));
      std::int64_t lanes = 1;
      for (std::size_t i = 0; i + 2 < q.size(); ++i)
        lanes *= q[i];
      r.pairs += lanes * q.end()[-2] * k.end()[-2];
    }
}

/// The whole benchmark of c, in the order the help states.
Report run(const Config &c) {
  double t0 = qb::now_ms();
  g_progress = c.progress;
  Report r;
  r.c = c;
  const Entry &e = *r.c.entry;
  Graph g = e.build(r.c.shape);
  progress(e.name + ": " + e.sizes(r.c.shape) + ", " + std::to_string(r.c.threads) + " threads");
  progress("random inputs");
  TensorMap in = e.inputs(g, r.c.shape, 1, true);
  count_work(r, g, in);
  measure_machine(r, "before the runs");
  Kernel k = compile_timed(g, r);
  Tensor out = time_qkv(k, in, r);
  r.no_baselines = r.c.baselines ? gallery::baseline_gap(e, g, r.c.shape) : "--no-baselines";
  if (r.no_baselines.empty() && e.workload.mask == Workload::Mask::Expr)
    r.table = gallery::mask_table(g, in);
  if (r.no_baselines.empty()) {
    TensorMap dense = gallery::baseline_inputs(e, r.c.shape, in);
    for (qb::Baseline b : qb::available_baselines())
      r.baselines.push_back(time_baseline(b, dense, out, r));
  }
  measure_machine(r, "after the runs");
  r.wall_s = (qb::now_ms() - t0) * 1e-3;
  return r;
}

} // namespace

int cmd_bench(const cli::Args &a) {
  Report r = run(config_of(a));
  if (r.c.json)
    std::cout << to_json(r).dump(2) << "\n";
  else
    print_table(std::cout, r);
  return verdict(r);
}

bool BenchReport::ok() const {
  return std::all_of(baselines.begin(), baselines.end(), [](const BenchBaseline &b) { return b.ok; });
}

BenchReport bench(const Graph &g, const TensorMap &inputs, const BenchOptions &options) {
  user_check(options.threads >= 0 && options.compile_threads >= 0 && options.repeat >= 0,
             "bench: BenchOptions::threads, compile_threads and repeat must not be negative");
  gallery::Entry e = gallery::program_entry(g, inputs);
  Config c;
  c.entry = &e;
  c.shape = e.shape;
  c.threads = options.threads > 0 ? options.threads : qb::hardware_threads();
  c.repeat = options.repeat;
  c.baselines = options.baselines;
  c.compile_threads = options.compile_threads;
  c.progress = options.progress;
  Report r = run(c);
  BenchReport out;
  out.ms = r.qkv.t.median_ms;
  out.min_ms = r.qkv.t.min_ms;
  out.runs = r.qkv.t.runs;
  out.compile_ms = qb::median(r.compile_ms);
  out.flops = r.flops;
  out.gflops = gflops(r, r.qkv);
  out.peak_gflops = tier_peak(r);
  out.pct_peak = pct_peak(r, r.qkv);
  out.bytes = r.bytes;
  out.read_gbs = gbs(r, r.qkv);
  out.bandwidth_gbs = r.bandwidth.value;
  out.pct_bandwidth = 100 * out.read_gbs / r.bandwidth.value;
  for (const Result &b : r.baselines)
    out.baselines.push_back({b.name, b.t.median_ms, b.t.median_ms / r.qkv.t.median_ms, b.t.runs,
                             b.max_abs_err, b.ok});
  out.baselines_not_run = r.no_baselines;
  std::ostringstream table;
  print_table(table, r);
  out.table = table.str();
  out.json = to_json(r).dump(2);
  return out;
}

} // namespace qkv::tool
