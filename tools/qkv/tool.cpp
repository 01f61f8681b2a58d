// The qkv command line over the registered graphs (entry.hpp): list, dump, run and the
// dispatch to bench, show and cache; qkv::tool::main. The qkv binary (main.cpp) registers
// the gallery and `embed`; a user's tool registers its own graphs (<qkv/tool.hpp>).
//
//   qkv list
//   qkv dump NAME [--stage=S] [--checked|--unchecked] [shape options]
//   qkv run NAME [--check] [shape options] [--seed N] [--atol X] [--rtol Y]
//   qkv bench NAME [shape options] [--threads T] [--json] [--repeat N]   (bench.cpp)
//   qkv bench gemm --m M --k K --n N [--threads T] [--bias] [--json]     (bench_gemm.cpp)
//   qkv show NAME [--seq L] [--png FILE] [--q-tile T] [--kv-tile T]      (show.cpp)
//   qkv cache info|clear [--dir D]                                       (cache.cpp)
//   qkv export NAME -o DIR [shape options]                               (export_cmd.cpp)
#include <algorithm>
#include <exception>
#include <iomanip>
#include <iostream>
#include <string>
#include <vector>

#include <qkv/compiler/compile.hpp>
#include <qkv/runtime/interpreter.hpp>
#include <qkv/tool.hpp>

#include "bench.hpp"
#include "bench_gemm.hpp"
#include "cache.hpp"
#include "cli.hpp"
#include "export_cmd.hpp"
#include "show.hpp"

namespace qkv {
namespace {

using cli::Args;

std::vector<cli::Command> &commands() {
  static std::vector<cli::Command> c;
  return c;
}

std::string &about() {
  static std::string a = "compile, inspect and check attention graphs: this tool's own, "
                         "which list shows.";
  return a;
}

std::string usage() {
  std::string p = cli::program();
  std::string u = p + ": " + about() + "\n\nusage: " + p +
                  " <command> [options]\n\n"
                  "commands:\n"
                  "  list                 the graphs, with their default shapes\n"
                  "  dump NAME            print NAME's IR at one stage (default: qkv)\n"
                  "  run NAME             compile NAME for the host CPU and run it on random "
                  "inputs\n"
                  "  bench NAME           time NAME at a shape against the machine's peak and "
                  "two baselines\n"
                  "  bench gemm           time one projection x . w (--m --k --n) against the "
                  "peak and OpenBLAS\n"
                  "  show NAME            draw NAME's mask and the tiles the compiled kernel "
                  "skips\n"
                  "  export NAME -o DIR   write NAME compiled for the host CPU as a bundle that "
                  "runs without LLVM\n";
  for (const cli::Command &c : commands()) {
    std::string head = "  " + c.name + " " + c.summary;
    u += head + "\n";
  }
  u += "  cache info|clear     the compiled-kernel cache: where it is and what it holds, or "
       "empty it\n\n`" +
       p + " <command> --help` describes each command's options.\n";
  return u;
}

/// A command's help with the program's name where it says qkv in its usage lines.
std::string with_program(const std::string &help) {
  std::string out = help;
  for (const char *at : {"usage: qkv ", "\n       qkv "}) {
    std::string from = at, to = from.substr(0, from.size() - 4) + cli::program() + " ";
    for (std::size_t i = out.find(from); i != std::string::npos; i = out.find(from, i + to.size()))
      out.replace(i, from.size(), to);
  }
  return out;
}

const char *kDumpHelp = "usage: qkv dump NAME [--stage=S] [--checked|--unchecked] [--target=T [--chip=C]]\n"
                        "                [--vector-bits B] [shape options]\n\n"
                        "Prints graph NAME's IR at stage S, one of:\n"
                        "  graph    qkv's graph IR (the text Graph::str prints)\n"
                        "  qkv      the qkv dialect, after canonicalisation and attention "
                        "recognition\n"
                        "  linalg   qkv ops lowered to linalg/tensor/arith/math, attention to "
                        "scf loops\n"
                        "  loops    bufferized, linalg lowered to loops\n"
                        "  llvm     the LLVM dialect\n"
                        "  llvm-ir  LLVM IR after -O3 for the host\n"
                        "  asm      host machine code\n"
                        "The IR is a checked compile's on the CPU, as compile() makes by default "
                        "(checks on the\nloads and divisions in mods that are not proved safe; "
                        "QKV_CHECKED=0 turns them off);\n--checked asks for one whatever "
                        "QKV_CHECKED says, --unchecked for an unchecked one.\n"
                        "--vector-bits B compiles for B-bit vectors (128, 256 or 512; default: the "
                        "host's\nwidest), so that the IR printed does not depend on the host.\n"
                        "--target=cuda prints the CUDA pipeline's stages instead (no GPU needed; "
                        "docs/gpu.md):\n"
                        "  graph, qkv  as above\n"
                        "  linalg   attention -> the tiled GPU kernel (scf.forall blocks and "
                        "threads), the\n           other ops -> linalg\n"
                        "  loops    bufferized, linalg lowered to parallel loops\n"
                        "  gpu      kernels outlined into gpu.modules, launched by the host "
                        "function\n"
                        "  nvvm     the kernels in the NVVM dialect for the chip\n"
                        "  ptx      the kernels' PTX\n"
                        "--chip=C picks the GPU (sm_70 ... sm_90; default sm_90). "
                        "--target=gpu-tiles-on-host\nprints the host stages of the CUDA "
                        "pipeline's tiled IR run on the CPU (what the tests check).\n"
                        "Compiled code works for every extent of the dynamic dims, so only the "
                        "static sizes\n(heads, head dim, window) of the shape options change "
                        "the IR.\n\nshape options:\n" QKV_SHAPE_HELP;

const char *kRunHelp =
    "usage: qkv run NAME [--check] [shape options] [--seed N] [--atol X] [--rtol Y]\n\n"
    "Compiles NAME for the host CPU and runs it on random inputs (fixed seed; values in\n"
    "[-1, 1), weights scaled by 1/sqrt(fan-in) as models initialise them) at the\n"
    "gallery's default shape, changed by the shape options (e.g. --seq 17, --dims B=2,L=17).\n"
    "With --check, also runs the reference interpreter (double precision) and prints\n"
    "max_abs_err= and max_rel_err= per output; exits 1 if any element is off by more than\n"
    "atol + rtol * |reference| (defaults 1e-4 and 1e-3: f32 accumulation over the "
    "reductions;\nat least two units in the last place for an f16 or bf16 output).\nThe kernel is then a checked one (CompileOptions::checked): a load in a mod "
    "outside its\ntensor is reported as the interpreter reports it instead of read.\n\n"
    "shape options:\n" QKV_SHAPE_HELP;

gallery::GraphShape shape_of(const gallery::Entry &e, const Args &a) {
  return cli::shape_from_opts(e, a, e.shape);
}

int cmd_list(const Args &a) {
  check_opts(a, {});
  if (!a.args.empty())
    user_error(cli::program() + " list: unexpected argument '" + a.args[0] +
               "' (list takes none; " + cli::program() + " dump " + a.args[0] +
               " prints a graph)");
  std::size_t width = 0;
  for (const auto &e : gallery::registered())
    width = std::max(width, e.name.size());
  if (gallery::registered().empty())
    std::cout << "(no graphs registered: add them with QKV_TOOL_GRAPH, <qkv/tool.hpp>)\n";
  for (const auto &e : gallery::registered())
    std::cout << std::left << std::setw(static_cast<int>(width)) << e.name << "  " << e.description
              << "  [" << e.sizes(e.shape) << "]\n";
  return 0;
}

/// --target and --chip: the host CPU by default.
Target target_of(const Args &a) {
  std::string t = a.opts.count("target") ? a.opts.at("target") : "host";
  if (a.opts.count("chip") && t != "cuda")
    user_error("--chip is for --target=cuda");
  if (t == "host")
    return Target::host();
  if (t == "cuda")
    return Target::cuda(a.opts.count("chip") ? a.opts.at("chip") : "sm_90");
  if (t == "gpu-tiles-on-host")
    return Target::gpu_tiles_on_host();
  user_error("--target must be host, cuda or gpu-tiles-on-host, got '" + t + "'");
}

int cmd_dump(const Args &a) {
  check_opts(a, {"stage", "checked", "unchecked", "target", "chip", "vector-bits",
                 QKV_SHAPE_OPTS});
  if (a.opts.count("checked") && a.opts.count("unchecked"))
    user_error("qkv dump: --checked and --unchecked are each other's opposite; give one");
  const auto &e = gallery::registered(a.name);
  std::string stage = a.opts.count("stage") ? a.opts.at("stage") : "qkv";
  Graph g = e.build(shape_of(e, a));
  CompileOptions o;
  if (a.opts.count("checked") || a.opts.count("unchecked"))
    o.checked = a.opts.count("checked") > 0; // else the default: checked on the CPU
  o.schedule.vector_bits = static_cast<int>(cli::int_opt(a, "vector-bits").value_or(0));
  std::cout << lower_to(g, target_of(a), stage, o);
  return 0;
}

int cmd_run(const Args &a) {
  check_opts(a, {"check", "seed", "atol", "rtol", QKV_SHAPE_OPTS});
  for (const char *tol : {"atol", "rtol"}) // bad values fail before anything runs
    cli::number_opt(a, tol, 0, 0.0);
  const auto &e = gallery::registered(a.name);
  gallery::GraphShape shape = shape_of(e, a);
  Graph g = e.build(shape);
  DimBindings dims = e.dims(shape);
  auto seed = static_cast<std::uint64_t>(cli::number_opt(a, "seed", 1));
  TensorMap in = e.inputs(g, shape, seed, /*scale_weights=*/true);
  CompileOptions o;
  if (a.opts.count("check"))
    o.checked = true; // as the default is on the CPU, whatever QKV_CHECKED says
  Kernel k = compile(g, Target::host(), o);
  TensorMap out = k.run(in);
  std::cout << "graph " << e.name << " [" << cli::dims_str(dims) << "] compiled in " << std::fixed
            << std::setprecision(1) << k.stats().total_ms << " ms"
            << (k.stats().from_cache ? " (from the kernel cache)" : "") << "\n";
  for (const auto &[name, t] : out)
    std::cout << "  output " << name << ": " << t.type_str() << "\n";
  if (!a.opts.count("check"))
    return 0;
  TensorMap ref = reference::run(g, in);
  bool ok = true;
  for (const auto &[name, t] : out) {
    // Two units in the last place of an f16/bf16 output, at least.
    double ulp = t.dtype() == DType::BF16 ? 0x1p-7 : t.dtype() == DType::F16 ? 0x1p-10 : 0;
    double atol = cli::number_opt(a, "atol", std::max(1e-4, 2 * ulp), 0.0);
    double rtol = cli::number_opt(a, "rtol", std::max(1e-3, 2 * ulp), 0.0);
    Comparison c = compare(t, ref.at(name), atol, rtol);
    std::cout << "  " << name << ": max_abs_err=" << std::scientific << std::setprecision(3)
              << c.max_abs_err << " max_rel_err=" << c.max_rel_err << " (atol=" << atol
              << ", rtol=" << rtol << ") " << (c.ok ? "ok" : "FAIL") << "\n";
    if (!c.ok) {
      std::cout << "    " << c.message << "\n";
      ok = false;
    }
  }
  return ok ? 0 : 1;
}

int dispatch(const Args &a) {
  const std::string p = cli::program();
  if (a.cmd == "list") {
    if (a.help) {
      std::cout << "usage: " << p << " list\n\nLists the graphs and their default shapes.\n";
      return 0;
    }
    return cmd_list(a);
  }
  const cli::Command *extra = nullptr;
  for (const cli::Command &c : commands())
    if (c.name == a.cmd)
      extra = &c;
  const char *help = a.cmd == "dump"     ? kDumpHelp
                     : a.cmd == "run"    ? kRunHelp
                     : a.cmd == "bench"  ? qkv::tool::kBenchHelp
                     : a.cmd == "show"   ? qkv::tool::kShowHelp
                     : a.cmd == "cache"  ? qkv::tool::kCacheHelp
                     : a.cmd == "export" ? qkv::tool::kExportHelp
                     : extra             ? extra->help
                                         : nullptr;
  if (!help) {
    std::cerr << p << ": unknown command '" << a.cmd << "'\n\n" << usage();
    return 2;
  }
  if (a.cmd == "bench" && a.name == "gemm")
    help = qkv::tool::kBenchGemmHelp;
  if (a.help) {
    std::cout << with_program(help);
    return 0;
  }
  if (extra)
    return extra->run(a);
  if (a.cmd == "cache")
    return qkv::tool::cmd_cache(a);
  if (a.args.size() > 1)
    user_error(p + " " + a.cmd + ": unexpected argument '" + a.args[1] + "'");
  if (a.name.empty()) {
    std::cerr << p << " " << a.cmd << ": which graph? (" << p << " list shows them)\n\n"
              << with_program(help);
    return 2;
  }
  if (a.cmd == "dump")
    return cmd_dump(a);
  if (a.cmd == "run")
    return cmd_run(a);
  if (a.cmd == "show")
    return qkv::tool::cmd_show(a);
  if (a.cmd == "export")
    return qkv::tool::cmd_export(a);
  if (a.name == "gemm")
    return qkv::tool::cmd_bench_gemm(a);
  return qkv::tool::cmd_bench(a);
}

} // namespace

namespace cli {

void add_command(Command c) { commands().push_back(std::move(c)); }
void set_about(std::string a) { about() = std::move(a); }

} // namespace cli

namespace tool {

int main(int argc, char **argv) {
  cli::set_program(argc > 0 ? argv[0] : "qkv");
  try {
    Args a = cli::parse(argc, argv);
    if (a.cmd.empty()) {
      std::cout << usage();
      return a.help ? 0 : 2;
    }
    return dispatch(a);
  } catch (const std::exception &e) { // qkv::Error, and anything else, say the same
    std::cerr << cli::program() << ": error: " << e.what() << "\n";
    return 1;
  }
}

} // namespace tool

} // namespace qkv
