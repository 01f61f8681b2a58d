// Ahead-of-time bundles: the manifest, its checks, and loading the code with dlopen.
#include <qkv/runtime/bundle.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <dlfcn.h>

#include <nlohmann/json.hpp>

#include <qkv/dsl/error.hpp>
#include <qkv/runtime/amx.hpp>
#include <qkv/runtime/cuda.hpp>
#include <qkv/runtime/graph_json.hpp>
#include <qkv/runtime/kernel_abi.hpp>

#ifndef QKV_VERSION
#define QKV_VERSION "unknown"
#endif

namespace qkv {

using json = nlohmann::json;

namespace {

constexpr const char *kFormat = "qkv-bundle";

json tensor_json(const BundleManifest::Tensor &t) {
  json dims = json::array();
  for (const Dim &d : t.dims)
    dims.push_back(json::array({d.name, d.is_dynamic() ? json(nullptr) : json(d.extent)}));
  return {{"name", t.name}, {"dtype", std::string(dtype_name(t.dtype))}, {"dims", dims}};
}

BundleManifest::Tensor tensor_of(const json &j) {
  BundleManifest::Tensor t;
  t.name = j.at("name").get<std::string>();
  t.dtype = parse_dtype(j.at("dtype").get<std::string>());
  for (const json &d : j.at("dims"))
    t.dims.emplace_back(d.at(0).get<std::string>(),
                        d.at(1).is_null() ? kDynamic : d.at(1).get<std::int64_t>());
  return t;
}

std::string read_file(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  if (!f)
    user_error("cannot read '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/// The manifest's fields, from JSON that has been checked to be a qkv bundle's.
BundleManifest manifest_of(const json &j) {
  BundleManifest m;
  m.qkv_version = j.at("qkv_version").get<std::string>();
  m.target = j.at("target").get<std::string>();
  m.graph_name = j.at("graph_name").get<std::string>();
  m.graph_file = j.at("graph_file").get<std::string>();
  const json &code = j.at("code");
  m.library = code.at("library").get<std::string>();
  m.symbol = code.at("symbol").get<std::string>();
  m.triple = code.at("triple").get<std::string>();
  m.cpu = code.at("cpu").get<std::string>();
  m.cpu_flags = code.at("cpu_flags").get<std::vector<std::string>>();
  m.runtime_libraries = code.at("runtime_libraries").get<std::vector<std::string>>();
  m.inits = code.at("inits").get<std::vector<std::string>>();
  m.finis = code.at("finis").get<std::vector<std::string>>();
  m.isa = code.at("isa").get<std::string>();
  m.matmul_precision = code.at("matmul_precision").get<std::string>();
  m.checked = code.at("checked").get<bool>();
  for (const json &t : j.at("arguments"))
    m.arguments.push_back(tensor_of(t));
  for (const json &t : j.at("outputs"))
    m.outputs.push_back(tensor_of(t));
  for (const auto &[name, f] : j.at("files").items())
    m.files[name] = {f.at("bytes").get<std::int64_t>(), f.at("fnv1a64").get<std::string>()};
  return m;
}

} // namespace

std::string manifest_to_json(const BundleManifest &m) {
  json args = json::array(), outs = json::array(), files = json::object();
  for (const auto &t : m.arguments)
    args.push_back(tensor_json(t));
  for (const auto &t : m.outputs)
    outs.push_back(tensor_json(t));
  for (const auto &[name, f] : m.files)
    files[name] = {{"bytes", f.bytes}, {"fnv1a64", f.fnv1a64}};
  json code = {{"library", m.library},
               {"symbol", m.symbol},
               {"triple", m.triple},
               {"cpu", m.cpu},
               {"cpu_flags", m.cpu_flags},
               {"runtime_libraries", m.runtime_libraries},
               {"inits", m.inits},
               {"finis", m.finis},
               {"isa", m.isa},
               {"matmul_precision", m.matmul_precision},
               {"checked", m.checked}};
  json j = {{"format", kFormat},
            {"format_version", BundleManifest::kFormatVersion},
            {"qkv_version", m.qkv_version},
            {"target", m.target},
            {"graph_name", m.graph_name},
            {"graph_file", m.graph_file},
            {"code", code},
            {"arguments", args},
            {"outputs", outs},
            {"files", files}};
  return j.dump(1) + "\n";
}

BundleManifest read_manifest(const std::string &dir) {
  std::string path = dir + "/manifest.json";
  std::ifstream probe(path);
  if (!probe)
    user_error("bundle '" + dir + "': no manifest.json, so not a qkv bundle");
  json j = json::parse(read_file(path), nullptr, /*allow_exceptions=*/false);
  auto refuse = [&](const std::string &why) -> void {
    user_error("bundle '" + dir + "': manifest.json " + why);
  };
  if (j.is_discarded())
    refuse("is not JSON (corrupted?)");
  if (!j.is_object() || !j.contains("format") || j["format"] != kFormat)
    refuse("is not a qkv bundle's (its \"format\" is " +
           (j.is_object() && j.contains("format") ? j["format"].dump() : std::string("missing")) +
           ", not \"" + kFormat + "\")");
  if (j.value("format_version", -1) != BundleManifest::kFormatVersion)
    refuse("has format version " + j.value("format_version", json(nullptr)).dump() +
           "; this runtime reads version " + std::to_string(BundleManifest::kFormatVersion));
  if (j.value("qkv_version", std::string()) != QKV_VERSION)
    refuse("was written by qkv " + j.value("qkv_version", std::string("?")) +
           "; this runtime is qkv " QKV_VERSION " (export the graph again)");
  try {
    return manifest_of(j);
  } catch (const json::exception &e) {
    refuse(std::string("is missing a field or has one of the wrong type: ") + e.what());
  }
  return {};
}

BundleManifest::File file_sum(const std::string &path) {
  std::string bytes = read_file(path);
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : bytes)
    h = (h ^ c) * 1099511628211ull;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return {static_cast<std::int64_t>(bytes.size()), hex};
}

std::vector<std::string> host_cpu_flags() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("flags", 0) != 0 || line.find(':') == std::string::npos)
      continue;
    std::stringstream words(line.substr(line.find(':') + 1));
    std::vector<std::string> out;
    for (std::string w; words >> w;)
      out.push_back(w);
    return out;
  }
  return {};
}

namespace {

/// Every file the manifest lists, as it was exported.
void check_files(const std::string &dir, const BundleManifest &m) {
  std::vector<std::string> needed = m.runtime_libraries;
  needed.push_back(m.graph_file);
  needed.push_back(m.library);
  for (const std::string &name : needed)
    if (!m.files.count(name))
      user_error("bundle '" + dir + "': manifest.json lists no file '" + name + "'");
  for (const auto &[name, want] : m.files) {
    if (name.find('/') != std::string::npos || name == "." || name == "..")
      user_error("bundle '" + dir + "': manifest.json names a file outside the bundle: '" + name +
                 "'");
    BundleManifest::File have = file_sum(dir + "/" + name);
    if (have.bytes != want.bytes || have.fnv1a64 != want.fnv1a64)
      user_error("bundle '" + dir + "': " + name + " is not the file exported (" +
                 std::to_string(have.bytes) + " bytes, hash " + have.fnv1a64 +
                 "; the manifest says " + std::to_string(want.bytes) + " bytes, hash " +
                 want.fnv1a64 + "): the bundle is corrupted or was changed");
  }
}

/// The host runs the code: the target is the CPU, and it has every CPU flag the code needs.
void check_host(const std::string &dir, const BundleManifest &m) {
  if (m.target != "host-cpu" && m.target.rfind("cuda-", 0) != 0)
    user_error("bundle '" + dir + "': its target is " + m.target +
               "; this runtime loads host-cpu and cuda-<chip> bundles");
  std::vector<std::string> have = host_cpu_flags(), missing;
  for (const std::string &flag : m.cpu_flags)
    if (std::find(have.begin(), have.end(), flag) == have.end())
      missing.push_back(flag);
  if (missing.empty())
    return;
  std::string list;
  for (const std::string &f : missing)
    list += (list.empty() ? "" : ", ") + f;
  user_error("bundle '" + dir + "': its code was compiled for " + m.cpu + " (" + m.triple +
             ") and needs CPU flags this host lacks: " + list +
             " (export the graph on, or for, a CPU like this one)");
}

/// The graph matches what the manifest says of it.
void check_graph(const std::string &dir, const BundleManifest &m, const Graph &g) {
  auto same = [](const BundleManifest::Tensor &t, const Node &n) {
    return t.name == n.name && t.dtype == n.dtype && t.dims == n.dims;
  };
  bool ok = g.name() == m.graph_name && g.arguments().size() == m.arguments.size() &&
            g.outputs().size() == m.outputs.size();
  for (std::size_t i = 0; ok && i < m.arguments.size(); ++i)
    ok = same(m.arguments[i], g.node(g.arguments()[i]));
  for (std::size_t i = 0; ok && i < m.outputs.size(); ++i) {
    BundleManifest::Tensor t = m.outputs[i];
    const Node &n = g.node(g.outputs()[i].second);
    ok = t.name == g.outputs()[i].first && t.dtype == n.dtype && t.dims == n.dims;
  }
  if (!ok)
    user_error("bundle '" + dir + "': " + m.graph_file + " is not the graph the manifest " +
               "describes (graph '" + g.name() + "', manifest '" + m.graph_name + "')");
}

/// The runtime libraries loaded before kernel.so, which then finds them by their sonames:
/// the process's or the system's copy first (a second OpenMP runtime in one process is an
/// error of OpenMP's), else the bundle's. They stay loaded (OpenMP's runtime is not made to
/// be unloaded).
void load_runtime_libraries(const std::string &dir, const BundleManifest &m) {
  for (const std::string &lib : m.runtime_libraries) {
    if (::dlopen(lib.c_str(), RTLD_NOW | RTLD_GLOBAL))
      continue;
    std::string path = dir + "/" + lib;
    if (!::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL))
      user_error("bundle '" + dir + "': cannot load " + lib + ": " + ::dlerror());
  }
}

bool is_cuda(const BundleManifest &m) { return m.target.rfind("cuda-", 0) == 0; }

/// The functions named, looked up in the bundle's code.
std::vector<void (*)()> functions(const std::string &dir, void *handle,
                                  const std::vector<std::string> &names) {
  std::vector<void (*)()> out;
  for (const std::string &name : names) {
    auto f = reinterpret_cast<void (*)()>(::dlsym(handle, name.c_str()));
    if (!f)
      user_error("bundle '" + dir + "': kernel.so has no function " + name);
    out.push_back(f);
  }
  return out;
}

/// A CUDA bundle's kernel modules loaded on device 0 (its inits), unloaded when the code
/// goes (its finis, then dlclose).
KernelEntry start_cuda(const std::string &dir, const BundleManifest &m, KernelEntry entry) {
  void *handle = entry.owner.get();
  std::vector<void (*)()> inits = functions(dir, handle, m.inits),
                          finis = functions(dir, handle, m.finis);
  std::shared_ptr<void> code = entry.owner;
  entry.owner = std::shared_ptr<void>(handle, [code, finis](void *) {
    for (void (*f)() : finis)
      abi::call_generated(f);
  });
  entry.on_cuda = true;
  for (void (*f)() : inits)
    abi::call_generated(f);
  if (std::optional<std::string> e = cuda::take_host_error())
    user_error("bundle '" + dir + "': loading its kernels on the device: " + *e);
  return entry;
}

/// kernel.so opened, its entry and globals looked up.
KernelEntry open_code(const std::string &dir, const BundleManifest &m) {
  load_runtime_libraries(dir, m);
  std::string path = dir + "/" + m.library;
  void *handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    user_error("bundle '" + dir + "': cannot load " + m.library + ": " + ::dlerror());
  KernelEntry entry;
  entry.owner = std::shared_ptr<void>(handle, [](void *h) { ::dlclose(h); });
  std::string packed = std::string(abi::kPackedPrefix) + m.symbol;
  entry.packed = reinterpret_cast<void (*)(void **)>(::dlsym(handle, packed.c_str()));
  if (!entry.packed)
    user_error("bundle '" + dir + "': " + m.library + " has no entry point " + packed);
  entry.symbol = m.symbol;
  entry.checked = m.checked;
  auto find = [&](const char *name) { return ::dlsym(handle, name); };
  if (is_cuda(m))
    return start_cuda(dir, m, std::move(entry));
  abi::Globals globals;
  globals.packed_params = static_cast<const char *>(find(abi::kPackedParams));
  globals.schedules = static_cast<const char *>(find(abi::kSchedules));
  globals.schedule_runs = static_cast<std::int64_t *>(find(abi::kScheduleRuns));
  globals.attentions = static_cast<const char *>(find(abi::kAttentions));
  globals.tile_counts = static_cast<std::int64_t *>(find(abi::kTileCounts));
  abi::apply_globals(globals, entry);
  return entry;
}

} // namespace

Kernel load_bundle(const std::string &dir) {
  auto t0 = std::chrono::steady_clock::now();
  BundleManifest m = read_manifest(dir);
  check_files(dir, m);
  check_host(dir, m);
  if (is_cuda(m) && !cuda::available()) {
    std::string why;
    cuda::available(&why);
    user_error("bundle '" + dir + "' (" + m.target + "): no CUDA device: " + why);
  }
  Graph g = graph_from_json(read_file(dir + "/" + m.graph_file));
  check_graph(dir, m, g);
  if (m.isa == "amx") // before any of its tile instructions can run: else SIGILL
    request_amx_tile_state();
  KernelEntry entry = open_code(dir, m);
  CompileStats stats;
  stats.isa = m.isa;
  stats.matmul_precision = m.matmul_precision;
  stats.bundle = dir;
  stats.total_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  stats.stage_ms = {{"bundle", stats.total_ms}};
  auto no_ir = [dir](const std::string &stage) -> std::string {
    user_error("IR stage '" + stage + "' is not in bundle '" + dir +
               "' (it carries the code only): compile the graph to see it");
  };
  std::string text = g.str();
  return Kernel(std::move(g), std::move(entry), {{"graph", std::move(text)}}, no_ir,
                std::move(stats));
}

} // namespace qkv
