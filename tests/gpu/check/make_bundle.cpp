// qkv-gpu-check-cases OUT [--chip C]: the cases of the GPU check bundle
// (scripts/gpu-check-bundle.sh, docs/gpu.md): every gallery graph exported as a CUDA bundle
// (f32; the built-in blocks and attention graphs in bf16 too), each with what its runner
// needs to draw the same inputs there, and the attention benchmark's graphs.
//
//   OUT/cases/<name>/bundle/      the CUDA bundle (qkv::export_kernel, Target::cuda(C))
//   OUT/cases/<name>/case.json    {"name", "dims", "seed", "saved": [...], "bench": [...]}
//   OUT/cases/<name>/<input>.npy  the inputs random_inputs(graph, dims, seed) does not draw
//                                 (document ids, cache lengths, block tables: the gallery's
//                                 `prepare`)
//
// The runner (tests/gpu/check/runner.cpp) draws the inputs with the same runtime code and
// seed, so the weights need not travel, and checks every output against the interpreter
// there. The benchmark cases are checked at a small shape and timed at the bench shapes.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include <qkv/qkv.hpp>

#include "gallery.hpp"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr std::uint64_t kSeed = 1;

json dims_json(const qkv::DimBindings &d) {
  json out = json::object();
  for (const auto &[name, extent] : d)
    out[name] = extent;
  return out;
}

/// The case's folder: the bundle, case.json and the inputs the runner cannot draw.
void write_case(const fs::path &out, const std::string &name, const qkv::Graph &g,
                const qkv::DimBindings &dims, const qkv::TensorMap &inputs, const json &bench,
                const std::string &chip) {
  fs::path dir = out / "cases" / name;
  fs::create_directories(dir);
  qkv::ExportOptions o;
  o.target = qkv::Target::cuda(chip);
  qkv::export_kernel(g, (dir / "bundle").string(), o);
  qkv::TensorMap drawn = qkv::random_inputs(g, dims, {.seed = kSeed, .scale_params = true});
  json saved = json::array();
  for (const auto &[input, t] : inputs) {
    const qkv::Tensor &d = drawn.at(input);
    if (d.shape() == t.shape() && std::memcmp(d.data(), t.data(), t.nbytes()) == 0)
      continue;
    qkv::save_npy((dir / (input + ".npy")).string(), t);
    saved.push_back(input);
  }
  json c = {{"name", name},
            {"dims", dims_json(dims)},
            {"seed", kSeed},
            {"saved", saved},
            {"bench", bench}};
  std::ofstream(dir / "case.json") << c.dump(1) << "\n";
  std::cout << "case " << name << ": " << g.nodes().size() << " nodes, dims "
            << dims_json(dims).dump() << (saved.empty() ? "" : ", saved " + saved.dump()) << "\n";
}

/// Attention alone, q (B, H, L, Dh) over k, v (B, H, S, Dh): the benchmark's graph.
qkv::Graph attention_graph(qkv::DType dtype) {
  qkv::Graph g(std::string("bench_attention_") + std::string(qkv::dtype_name(dtype)));
  qkv::Dim B = g.dim("B"), H = g.dim("H", 32), L = g.dim("L"), S = g.dim("S"),
           Dh = g.dim("Dh", 128);
  auto q = g.input("q", dtype, {B, H, L, Dh});
  auto k = g.input("k", dtype, {B, H, S, Dh});
  auto v = g.input("v", dtype, {B, H, S, Dh});
  g.output("o", qkv::attention(q, k, v).value());
  return g;
}

/// The forward at L = S = 4096 and 8192, and a decode step (L = 1) over 32768 keys; B = 1,
/// so B * H = 32. Checked at L = S = 64.
void bench_cases(const fs::path &out, const std::string &chip) {
  json bench = json::array({json{{"B", 1}, {"L", 4096}, {"S", 4096}},
                            json{{"B", 1}, {"L", 8192}, {"S", 8192}},
                            json{{"B", 1}, {"L", 1}, {"S", 32768}}});
  for (qkv::DType dtype : {qkv::DType::BF16, qkv::DType::F32}) {
    qkv::Graph g = attention_graph(dtype);
    qkv::DimBindings dims = {{"B", 1}, {"L", 64}, {"S", 64}};
    qkv::TensorMap in = qkv::random_inputs(g, dims, {.seed = kSeed, .scale_params = true});
    write_case(out, g.name(), g, dims, in, bench, chip);
  }
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 2 && !(argc == 4 && std::string(argv[2]) == "--chip")) {
    std::cerr << "usage: qkv-gpu-check-cases OUT [--chip sm_90]\n";
    return 2;
  }
  fs::path out = argv[1];
  std::string chip = argc == 4 ? argv[3] : "sm_90";
  try {
    for (const auto &e : qkv::gallery::entries()) {
      std::vector<qkv::DType> dtypes = {qkv::DType::F32};
      if (!e.variant) // the built-in graphs take a dtype; the variants have f32 in their types
        dtypes.push_back(qkv::DType::BF16);
      for (qkv::DType dtype : dtypes) {
        qkv::gallery::GraphShape s = e.with_dims(e.shape, e.shapes.front());
        s.dtype = dtype;
        qkv::Graph g = e.build(s);
        std::string name = e.name + (dtype == qkv::DType::F32 ? "" : "_bf16");
        write_case(out, name, g, e.dims(s), e.inputs(g, s, kSeed, true), json::array(), chip);
      }
    }
    bench_cases(out, chip);
  } catch (const std::exception &e) {
    std::cerr << "qkv-gpu-check-cases: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
