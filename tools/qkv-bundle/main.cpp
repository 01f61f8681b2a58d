// qkv-bundle: runs ahead-of-time bundles (qkv export, qkv::export_kernel) with the runtime
// library alone; it links neither LLVM nor MLIR (a ctest checks with ldd).
//
//   qkv-bundle info DIR
//   qkv-bundle run DIR [--dims B=2,L=17] [--seed N] [--repeat N] [--check]
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <qkv/runtime/bundle.hpp>
#include <qkv/runtime/check_reference.hpp>

namespace {

const char *kUsage =
    "usage: qkv-bundle info DIR\n"
    "       qkv-bundle run DIR [--dims B=2,L=17] [--seed N] [--repeat N] [--check]\n\n"
    "info prints what the bundle in DIR is: its graph's inputs and outputs, the CPU it was\n"
    "compiled for and the flags it needs, its files.\n"
    "run loads it (qkv::load_bundle: without LLVM or MLIR), runs it on random inputs (a\n"
    "fixed seed; values in [-1, 1), weights scaled by 1/sqrt(fan-in)) at the dynamic dims'\n"
    "extents given by --dims, --repeat times (default 1), and prints the median time and\n"
    "the outputs' types; --check also runs the reference interpreter and compares every\n"
    "output under qkv's tolerance rule (exit 1 when one is off).\n";

struct Options {
  std::string cmd, dir;
  std::map<std::string, std::string> opts;
};

Options parse(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    if (s.rfind("--", 0) != 0) {
      (o.cmd.empty()   ? o.cmd
       : o.dir.empty() ? o.dir
                       : throw qkv::Error("unexpected '" + s + "'")) = s;
      continue;
    }
    std::string key = s.substr(2), value;
    if (key == "check" || key == "help") {
      o.opts[key] = "";
      continue;
    }
    if (auto eq = key.find('='); eq != std::string::npos) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      throw qkv::Error("--" + key + " needs a value");
    }
    if (key != "dims" && key != "seed" && key != "repeat")
      throw qkv::Error("unknown option --" + key + "\n\n" + kUsage);
    o.opts[key] = value;
  }
  return o;
}

qkv::DimBindings parse_dims(const std::string &text) {
  qkv::DimBindings out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    auto eq = item.find('=');
    char *end = nullptr;
    long long v = eq == std::string::npos ? 0 : std::strtoll(item.c_str() + eq + 1, &end, 10);
    if (eq == std::string::npos || end == item.c_str() + eq + 1 || *end != '\0' || v < 1)
      throw qkv::Error("--dims: '" + item + "' is not NAME=EXTENT with a positive extent");
    out[item.substr(0, eq)] = v;
  }
  return out;
}

std::string dims_text(const std::vector<qkv::Dim> &dims) {
  std::string s = "(";
  for (const qkv::Dim &d : dims)
    s += (s.size() > 1 ? ", " : "") + d.name +
         (d.is_dynamic() ? "=?" : "=" + std::to_string(d.extent));
  return s + ")";
}

int info(const std::string &dir) {
  qkv::BundleManifest m = qkv::read_manifest(dir);
  std::cout << "bundle " << dir << ": graph '" << m.graph_name << "', qkv " << m.qkv_version
            << ", target " << m.target << "\n  code: " << m.library << " for " << m.cpu << " ("
            << m.triple << "), tier " << m.isa << (m.checked ? ", checked" : "") << "\n  needs:";
  for (const std::string &f : m.cpu_flags)
    std::cout << " " << f;
  std::cout << "\n";
  for (const auto &t : m.arguments)
    std::cout << "  argument " << t.name << " " << qkv::dtype_name(t.dtype) << dims_text(t.dims)
              << "\n";
  for (const auto &t : m.outputs)
    std::cout << "  output " << t.name << " " << qkv::dtype_name(t.dtype) << dims_text(t.dims)
              << "\n";
  for (const auto &[name, f] : m.files)
    std::cout << "  file " << name << " " << f.bytes << " bytes, fnv1a64 " << f.fnv1a64 << "\n";
  return 0;
}

int run(const Options &o) {
  qkv::Kernel k = qkv::load_bundle(o.dir);
  qkv::DimBindings dims = o.opts.count("dims") ? parse_dims(o.opts.at("dims")) : qkv::DimBindings{};
  auto seed =
      static_cast<std::uint64_t>(std::stoull(o.opts.count("seed") ? o.opts.at("seed") : "1"));
  int repeat = std::stoi(o.opts.count("repeat") ? o.opts.at("repeat") : "1");
  if (repeat < 1)
    throw qkv::Error("--repeat must be at least 1");
  qkv::TensorMap in = qkv::random_inputs(k.graph(), dims, {.seed = seed, .scale_params = true});
  std::vector<double> ms;
  qkv::TensorMap out;
  for (int i = 0; i < repeat; ++i) {
    auto t = std::chrono::steady_clock::now();
    out = k.run(in);
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count());
  }
  std::sort(ms.begin(), ms.end());
  std::cout << "bundle " << o.dir << " (graph '" << k.graph().name() << "') loaded in "
            << std::fixed << std::setprecision(1) << k.stats().total_ms << " ms; run: median "
            << std::setprecision(3) << ms[ms.size() / 2] << " ms of " << repeat << "\n";
  for (const auto &[name, t] : out)
    std::cout << "  output " << name << ": " << t.type_str() << "\n";
  if (!o.opts.count("check"))
    return 0;
  qkv::ReferenceCheck c = qkv::check_against_reference(k, k.graph(), in);
  std::cout << c.message << (c.message.empty() || c.message.back() == '\n' ? "" : "\n");
  return c.ok ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
  try {
    Options o = parse(argc, argv);
    if (o.opts.count("help") || o.cmd.empty()) {
      std::cout << kUsage;
      return o.cmd.empty() && !o.opts.count("help") ? 2 : 0;
    }
    if (o.dir.empty())
      throw qkv::Error("which bundle? give its folder\n\n" + std::string(kUsage));
    if (o.cmd == "info")
      return info(o.dir);
    if (o.cmd == "run")
      return run(o);
    std::cerr << "qkv-bundle: unknown command '" << o.cmd << "'\n\n" << kUsage;
    return 2;
  } catch (const std::exception &e) {
    std::cerr << "qkv-bundle: error: " << e.what() << "\n";
    return 1;
  }
}
