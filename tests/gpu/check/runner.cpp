// qkv-gpu-check CASES_DIR [--json FILE] [--repeat N]: the GPU check bundle's runner
// (docs/gpu.md). It links qkv_runtime alone (built on the GPU machine from the sources the
// bundle carries: no LLVM or MLIR there) and, for every case of make_bundle.cpp: loads its
// CUDA bundle on device 0, draws its inputs (random_inputs at the case's dims and seed,
// then the saved .npy files over them), runs it and checks every output against the
// reference interpreter under qkv's tolerance rule; a case with bench shapes is then timed
// there on the device (Kernel::time_on_device: no copies in or out), median of --repeat.
// Without a CUDA device it says so and exits 77 before anything else.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include <qkv/runtime/bundle.hpp>
#include <qkv/runtime/check_reference.hpp>
#include <qkv/runtime/cuda.hpp>

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

qkv::DimBindings dims_of(const json &j) {
  qkv::DimBindings d;
  for (const auto &[name, extent] : j.items())
    d[name] = extent.get<std::int64_t>();
  return d;
}

qkv::TensorMap inputs_of(const qkv::Graph &g, const fs::path &dir, const json &c,
                         const qkv::DimBindings &dims) {
  auto seed = c.at("seed").get<std::uint64_t>();
  qkv::TensorMap in = qkv::random_inputs(g, dims, {.seed = seed, .scale_params = true});
  for (const json &name : c.at("saved"))
    in[name.get<std::string>()] =
        qkv::load_npy((dir / (name.get<std::string>() + ".npy")).string());
  return in;
}

/// Flops of attention q (B, H, L, Dh) . k (B, H, S, Dh) then . v: 4 B H L S Dh.
double attention_flops(const qkv::DimBindings &d, std::int64_t h, std::int64_t dh) {
  return 4.0 * static_cast<double>(d.at("B") * h * d.at("L") * d.at("S") * dh);
}

/// Bytes a decode step must read at least: k and v.
double attention_bytes(const qkv::DimBindings &d, std::int64_t h, std::int64_t dh,
                       std::size_t elem) {
  return 2.0 * static_cast<double>(d.at("B") * h * d.at("S") * dh) * static_cast<double>(elem);
}

json bench(const qkv::Kernel &k, const fs::path &dir, const json &c, int repeat) {
  json out = json::array();
  for (const json &shape : c.at("bench")) {
    qkv::DimBindings d = dims_of(shape);
    qkv::TensorMap in = inputs_of(k.graph(), dir, c, d);
    k.time_on_device(in, 2); // warm up: the driver's first launches, allocations
    std::vector<double> ms = k.time_on_device(in, repeat);
    std::sort(ms.begin(), ms.end());
    const qkv::Tensor &q = in.at("q");
    std::int64_t h = q.shape()[1], dh = q.shape()[3];
    json r = {{"dims", shape},
              {"median_ms", ms[ms.size() / 2]},
              {"min_ms", ms.front()},
              {"flops", attention_flops(d, h, dh)},
              {"bytes", attention_bytes(d, h, dh, qkv::dtype_size(q.dtype()))},
              {"dtype", std::string(qkv::dtype_name(q.dtype()))}};
    std::cout << "  bench " << shape.dump() << ": median " << std::fixed << std::setprecision(3)
              << r["median_ms"].get<double>() << " ms of " << repeat << "\n";
    out.push_back(r);
  }
  return out;
}

/// One case: its bundle loaded, checked against the interpreter, then benchmarked.
json run_case(const fs::path &dir, int repeat) {
  json c = json::parse(std::ifstream(dir / "case.json"));
  json r = {{"name", c.at("name")}};
  try {
    qkv::Kernel k = qkv::load_bundle((dir / "bundle").string());
    qkv::DimBindings dims = dims_of(c.at("dims"));
    qkv::ReferenceCheck check =
        qkv::check_against_reference(k, k.graph(), inputs_of(k.graph(), dir, c, dims));
    r["ok"] = check.ok;
    r["check"] = check.message;
    std::cout << (check.ok ? "ok    " : "FAIL  ") << c.at("name").get<std::string>() << "\n";
    if (!check.ok)
      std::cout << check.message << "\n";
    if (check.ok && !c.at("bench").empty())
      r["bench"] = bench(k, dir, c, repeat);
  } catch (const std::exception &e) {
    r["ok"] = false;
    r["check"] = std::string("error: ") + e.what();
    std::cout << "FAIL  " << c.at("name").get<std::string>() << ": " << e.what() << "\n";
  }
  return r;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2) {
    std::cerr << "usage: qkv-gpu-check CASES_DIR [--json FILE] [--repeat N]\n";
    return 2;
  }
  fs::path cases = argv[1];
  std::string json_path;
  int repeat = 10;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string key = argv[i];
    if (key == "--json")
      json_path = argv[i + 1];
    else if (key == "--repeat")
      repeat = std::max(1, std::stoi(argv[i + 1]));
  }
  std::string why;
  if (!qkv::cuda::available(&why)) {
    std::cout << "qkv-gpu-check: no CUDA device: " << why
              << "\nqkv-gpu-check: nothing was run (the cases need a GPU)\n";
    return 77;
  }
  qkv::cuda::Device device = qkv::cuda::Device::get(0);
  std::cout << "qkv-gpu-check: device 0 is " << device.name() << " (" << device.arch() << ")\n";
  std::vector<fs::path> dirs;
  for (const auto &entry : fs::directory_iterator(cases))
    if (fs::exists(entry.path() / "case.json"))
      dirs.push_back(entry.path());
  std::sort(dirs.begin(), dirs.end());
  json results = {{"device", device.name()}, {"arch", device.arch()}, {"cases", json::array()}};
  int failed = 0;
  for (const fs::path &d : dirs) {
    json r = run_case(d, repeat);
    failed += r["ok"].get<bool>() ? 0 : 1;
    results["cases"].push_back(r);
  }
  std::cout << dirs.size() - static_cast<std::size_t>(failed) << " of " << dirs.size()
            << " cases match the interpreter\n";
  if (!json_path.empty())
    std::ofstream(json_path) << results.dump(1) << "\n";
  return failed == 0 ? 0 : 1;
}
