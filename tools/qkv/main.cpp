// qkv: the command-line tool over the built-in gallery of graphs.
//
//   qkv list
//   qkv dump NAME [--stage=S] [--dims L=17,B=2]
//   qkv run NAME [--check] [--dims ...] [--seed N] [--atol X] [--rtol Y]
//   qkv bench NAME [--dims ...] [--repeat N]
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <qkv/compiler/compile.hpp>
#include <qkv/runtime/interpreter.hpp>

#include "gallery.hpp"

namespace {

using namespace qkv;

const char *kUsage = R"(qkv: compile, inspect and check attention graphs from the built-in gallery.

usage: qkv <command> [options]

commands:
  list                 the gallery's graphs, with their default shapes
  dump NAME            print NAME's IR at one stage (default: qkv)
  run NAME             compile NAME for the host CPU and run it on random inputs
  bench NAME           time compilation (median of --repeat) and one run

`qkv <command> --help` describes each command's options.
)";

const char *kDumpHelp = R"(usage: qkv dump NAME [--stage=S]

Prints graph NAME's IR at stage S, one of:
  graph    qkv's graph IR (the text Graph::str prints)
  qkv      the qkv dialect, after canonicalisation and attention recognition
  linalg   qkv ops lowered to linalg/tensor/arith/math, attention to scf loops
  loops    bufferized, linalg lowered to loops
  llvm     the LLVM dialect
  llvm-ir  LLVM IR after -O3 for the host
  asm      host machine code
Compiled code works for every extent of the dynamic dims, so no shape is needed.
)";

const char *kRunHelp =
    R"(usage: qkv run NAME [--check] [--dims D=N,...] [--seed N] [--atol X] [--rtol Y]

Compiles NAME for the host CPU and runs it on random inputs (fixed seed). Dynamic dims
take the gallery's default extents unless --dims gives them (e.g. --dims B=2,L=17).
With --check, also runs the reference interpreter (double precision) and prints
max_abs_err= and max_rel_err= per output; exits 1 if any element is off by more than
atol + rtol * |reference| (defaults 1e-4 and 1e-3: f32 accumulation over the reductions).
)";

const char *kBenchHelp = R"(usage: qkv bench NAME [--dims D=N,...] [--repeat N]

Compiles NAME --repeat times (default 5) and prints the median and min JIT compile time
with the per-stage split of the median run, then the median time of --repeat runs.
)";

struct Args {
  std::string cmd, name;
  std::map<std::string, std::string> opts;
  bool help = false;
};

Args parse(int argc, char **argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    if (s == "--help" || s == "-h") {
      a.help = true;
    } else if (s.rfind("--", 0) == 0) {
      auto eq = s.find('=');
      std::string key = s.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      std::string val;
      if (eq != std::string::npos)
        val = s.substr(eq + 1);
      else if (key != "check" && i + 1 < argc)
        val = argv[++i];
      a.opts[key] = val;
    } else if (a.cmd.empty()) {
      a.cmd = s;
    } else if (a.name.empty()) {
      a.name = s;
    } else {
      user_error("unexpected argument '" + s + "'");
    }
  }
  return a;
}

void check_opts(const Args &a, std::initializer_list<const char *> allowed) {
  for (const auto &[k, v] : a.opts)
    if (std::find_if(allowed.begin(), allowed.end(), [&](const char *s) { return k == s; }) ==
        allowed.end())
      user_error("qkv " + a.cmd + ": unknown option --" + k + " (see qkv " + a.cmd + " --help)");
}

DimBindings dims_for(const gallery::Entry &e, const Args &a) {
  DimBindings b = e.shapes.empty() ? DimBindings{} : e.shapes.front();
  auto it = a.opts.find("dims");
  if (it == a.opts.end())
    return b;
  std::stringstream ss(it->second);
  std::string kv;
  while (std::getline(ss, kv, ',')) {
    auto eq = kv.find('=');
    if (eq == std::string::npos)
      user_error("--dims: expected D=N, got '" + kv + "'");
    std::string d = kv.substr(0, eq);
    char *end = nullptr;
    long long n = std::strtoll(kv.c_str() + eq + 1, &end, 10);
    if (*end != '\0' || n < 1)
      user_error("--dims: extent of '" + d + "' must be a positive integer, got '" +
                 kv.substr(eq + 1) + "'");
    b[d] = n;
  }
  return b;
}

double number_opt(const Args &a, const char *key, double dflt) {
  auto it = a.opts.find(key);
  if (it == a.opts.end())
    return dflt;
  char *end = nullptr;
  double v = std::strtod(it->second.c_str(), &end);
  if (end == it->second.c_str() || *end != '\0')
    user_error(std::string("--") + key + ": not a number: '" + it->second + "'");
  return v;
}

std::string shape_str(const DimBindings &b) {
  std::string s;
  for (const auto &[k, v] : b)
    s += (s.empty() ? "" : ",") + k + "=" + std::to_string(v);
  return s.empty() ? "(static)" : s;
}

int cmd_list() {
  std::size_t width = 0;
  for (const auto &e : gallery::entries())
    width = std::max(width, e.name.size());
  for (const auto &e : gallery::entries())
    std::cout << std::left << std::setw(static_cast<int>(width)) << e.name << "  "
              << e.description << "  [" << shape_str(e.shapes.front()) << "]\n";
  return 0;
}

int cmd_dump(const Args &a) {
  check_opts(a, {"stage"});
  const auto &e = gallery::find(a.name);
  std::string stage = a.opts.count("stage") ? a.opts.at("stage") : "qkv";
  Graph g = e.build();
  if (stage == "graph") {
    std::cout << g.str();
    return 0;
  }
  Kernel k = compile(g);
  std::cout << k.ir(stage);
  return 0;
}

int cmd_run(const Args &a) {
  check_opts(a, {"check", "dims", "seed", "atol", "rtol"});
  const auto &e = gallery::find(a.name);
  Graph g = e.build();
  DimBindings dims = dims_for(e, a);
  auto seed = static_cast<std::uint64_t>(number_opt(a, "seed", 1));
  TensorMap in = random_inputs(g, dims, seed);
  Kernel k = compile(g);
  TensorMap out = k.run(in);
  std::cout << "graph " << e.name << " [" << shape_str(dims) << "] compiled in " << std::fixed
            << std::setprecision(1) << k.stats().total_ms << " ms\n";
  for (const auto &[name, t] : out)
    std::cout << "  output " << name << ": " << t.type_str() << "\n";
  if (!a.opts.count("check"))
    return 0;
  double atol = number_opt(a, "atol", 1e-4), rtol = number_opt(a, "rtol", 1e-3);
  TensorMap ref = reference::run(g, in);
  bool ok = true;
  for (const auto &[name, t] : out) {
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

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int cmd_bench(const Args &a) {
  check_opts(a, {"dims", "repeat"});
  const auto &e = gallery::find(a.name);
  Graph g = e.build();
  int repeat = static_cast<int>(number_opt(a, "repeat", 5));
  if (repeat < 1)
    user_error("--repeat must be at least 1");
  std::vector<double> ms;
  std::vector<CompileStats> stats;
  std::optional<Kernel> kernel;
  for (int i = 0; i < repeat; ++i) {
    Kernel k = compile(g);
    ms.push_back(k.stats().total_ms);
    stats.push_back(k.stats());
    kernel.emplace(std::move(k));
  }
  double med = median(ms);
  std::cout << "graph " << e.name << ": JIT compile time over " << repeat
            << " runs: median=" << std::fixed << std::setprecision(1) << med
            << " ms min=" << *std::min_element(ms.begin(), ms.end()) << " ms\n";
  const CompileStats &s = *std::min_element(stats.begin(), stats.end(), [&](auto &x, auto &y) {
    return std::abs(x.total_ms - med) < std::abs(y.total_ms - med);
  });
  std::cout << "  stages (median run):";
  for (const auto &[stage, t] : s.stage_ms)
    if (stage != "graph")
      std::cout << " " << stage << "=" << t << "ms";
  std::cout << "\n";
  DimBindings dims = dims_for(e, a);
  TensorMap in = random_inputs(g, dims, 1);
  std::vector<double> run_ms;
  for (int i = 0; i < repeat; ++i) {
    auto t = std::chrono::steady_clock::now();
    kernel->run(in);
    run_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count());
  }
  std::cout << "  run [" << shape_str(dims) << "]: median=" << std::setprecision(3)
            << median(run_ms) << " ms over " << repeat << " runs\n";
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  try {
    Args a = parse(argc, argv);
    if (a.cmd.empty()) {
      std::cout << kUsage;
      return a.help ? 0 : 2;
    }
    if (a.cmd == "list") {
      if (a.help) {
        std::cout << "usage: qkv list\n\nLists the gallery's graphs and their default shapes.\n";
        return 0;
      }
      return cmd_list();
    }
    const char *help = a.cmd == "dump"    ? kDumpHelp
                       : a.cmd == "run"   ? kRunHelp
                       : a.cmd == "bench" ? kBenchHelp
                                          : nullptr;
    if (!help) {
      std::cerr << "qkv: unknown command '" << a.cmd << "'\n\n" << kUsage;
      return 2;
    }
    if (a.help) {
      std::cout << help;
      return 0;
    }
    if (a.name.empty()) {
      std::cerr << "qkv " << a.cmd << ": which graph? (qkv list shows them)\n\n" << help;
      return 2;
    }
    if (a.cmd == "dump")
      return cmd_dump(a);
    if (a.cmd == "run")
      return cmd_run(a);
    return cmd_bench(a);
  } catch (const qkv::Error &e) {
    std::cerr << "qkv: error: " << e.what() << "\n";
    return 1;
  }
}
