// `qkv export`: the graph at a shape's static sizes, exported for the host CPU.
#include "export_cmd.hpp"

#include <iomanip>
#include <iostream>

#include <qkv/compiler/export.hpp>

#include "registry.hpp"

namespace qkv::tool {

const char *const kExportHelp =
    "usage: qkv export NAME -o DIR|--out DIR [--target=host|cuda [--chip=C]] "
    "[--checked|--unchecked] [shape options]\n\n"
    "Compiles graph NAME for the host CPU, as `qkv run` does, and writes an ahead-of-time\n"
    "bundle to folder DIR (made if missing; an earlier bundle there is replaced):\n"
    "manifest.json, graph.json, kernel.so and the OpenMP runtime it calls. A program that\n"
    "links qkv_runtime alone, without LLVM or MLIR, runs it: qkv::load_bundle(DIR), or\n"
    "`qkv-bundle run DIR`. Its results equal the JIT's bit for bit on this host; a host\n"
    "without one of the CPU flags the code uses refuses it, naming them. --target=cuda\n"
    "[--chip=C] writes a CUDA bundle instead (no GPU needed here): the kernels' PTX for chip\n"
    "C (default sm_90) in host code for any x86-64 CPU, run on device 0 where it is loaded.\n"
    "--cpu=NAME compiles a host bundle for another CPU than this one, by LLVM's name\n"
    "(x86-64-v3: any AVX2 host; x86-64-v4, znver4, sapphirerapids, ...): its features,\n"
    "vector width and tier only.\n"
    "The dynamic dims stay dynamic: the shape options set the static sizes.\n\n"
    "shape options:\n" QKV_SHAPE_HELP;

int cmd_export(const cli::Args &a) {
  cli::check_opts(a, {"out", "target", "chip", "cpu", "checked", "unchecked", QKV_SHAPE_OPTS});
  if (!a.opts.count("out") || a.opts.at("out").empty())
    user_error(cli::program() + " export: -o DIR (or --out DIR) names the bundle's folder");
  if (a.opts.count("checked") && a.opts.count("unchecked"))
    user_error(cli::program() + " export: --checked and --unchecked are each other's "
                                "opposite; give one");
  const auto &e = gallery::registered(a.name);
  Graph g = e.build(cli::shape_from_opts(e, a, e.shape));
  ExportOptions o;
  std::string target = a.opts.count("target") ? a.opts.at("target") : "host";
  if (a.opts.count("chip") && target != "cuda")
    user_error("--chip is for --target=cuda");
  if (target == "cuda")
    o.target = Target::cuda(a.opts.count("chip") ? a.opts.at("chip") : "sm_90");
  else if (target != "host")
    user_error("--target must be host or cuda, got '" + target + "'");
  if (a.opts.count("checked") || a.opts.count("unchecked"))
    o.compile.checked = a.opts.count("checked") > 0;
  if (a.opts.count("cpu"))
    o.cpu = a.opts.at("cpu");
  ExportResult r = export_kernel(g, a.opts.at("out"), o);
  std::cout << "graph " << e.name << " exported to " << a.opts.at("out") << " for "
            << r.manifest.target << ", host code for " << r.manifest.cpu
            << (r.manifest.isa.empty() ? "" : " (" + r.manifest.isa + ")") << ": compiled in "
            << std::fixed << std::setprecision(1) << r.compile_ms << " ms, linked in " << r.link_ms
            << " ms, " << (r.bytes + 1023) / 1024 << " KiB\n";
  for (const auto &[name, f] : r.manifest.files)
    std::cout << "  " << name << "  " << f.bytes << " bytes\n";
  return 0;
}

} // namespace qkv::tool
