// Ahead-of-time bundles (qkv/compiler/export.hpp, qkv/runtime/bundle.hpp) and the graph's
// JSON form (qkv/runtime/graph_json.hpp): every gallery graph round-trips, exports, loads
// and computes the JIT's bits; bad bundles are refused before their code is loaded.
#include "gallery.hpp"

#include <qkv/qkv.hpp>
#include <qkv/runtime/cuda.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <optional>
#include <regex>
#include <sstream>

#include <unistd.h>

namespace qkv::test {
namespace {

namespace fs = std::filesystem;

/// A fresh folder under the test's temporary directory, removed at the end.
struct TempDir {
  fs::path path;
  TempDir() {
    static int n = 0;
    path = fs::temp_directory_path() /
           ("qkv-bundle-test-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
    fs::remove_all(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string str(const std::string &sub = "") const { return (path / sub).string(); }
};

std::string read_text(const fs::path &p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_text(const fs::path &p, const std::string &text) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << text;
}

/// The message of the qkv::Error f throws (a failure if it throws none).
template <class F> std::string error_of(F &&f) {
  try {
    f();
  } catch (const Error &e) {
    return e.what();
  }
  ADD_FAILURE() << "no qkv::Error thrown";
  return "";
}

/// Every float and integer of the two maps equal byte for byte.
void expect_same_bits(const TensorMap &a, const TensorMap &b, const std::string &what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (const auto &[name, t] : a) {
    const Tensor &u = b.at(name);
    ASSERT_EQ(t.shape(), u.shape()) << what << " " << name;
    ASSERT_EQ(t.dtype(), u.dtype()) << what << " " << name;
    EXPECT_EQ(std::memcmp(t.data(), u.data(), t.nbytes()), 0)
        << what << ": output " << name << " differs from the JIT's";
  }
}

TEST(GraphJson, EveryGalleryGraphRoundTrips) {
  for (const auto &e : gallery::entries()) {
    Graph g = e.build();
    Graph back = graph_from_json(graph_to_json(g));
    EXPECT_EQ(back.key_text(), g.key_text()) << e.name;
    EXPECT_EQ(back.hash(), g.hash()) << e.name;
    EXPECT_EQ(back.str(), g.str()) << e.name;
  }
}

TEST(GraphJson, NonFiniteConstantsAndAttributesRoundTrip) {
  Graph g("nonfinite");
  auto n = g.dim("N", 4);
  auto x = g.input("x", DType::F32, {n});
  double inf = std::numeric_limits<double>::infinity();
  auto c = g.constant("c", {n}, {1.5, -inf, inf, 1e-300});
  g.output("y", scale(add(x, c), -0.1));
  Graph back = graph_from_json(graph_to_json(g));
  EXPECT_EQ(back.key_text(), g.key_text());
  const auto &data = *back.node(1).attrs.data;
  EXPECT_EQ(data[1], -inf);
  EXPECT_EQ(data[3], 1e-300);
}

TEST(GraphJson, MalformedTextIsRefusedSayingWhere) {
  Graph g = gallery::entries().front().build();
  std::string text = graph_to_json(g);
  EXPECT_NE(error_of([] { graph_from_json("{not json"); }).find("graph JSON:"), std::string::npos);
  EXPECT_NE(error_of([] { graph_from_json(R"({"format": "other"})"); }).find("not a qkv graph"),
            std::string::npos);
  std::string unknown = text;
  unknown.replace(unknown.find("\"matmul\""), 8, "\"matmol\"");
  EXPECT_NE(error_of([&] { graph_from_json(unknown); }).find("unknown op 'matmol'"),
            std::string::npos);
  std::string later = R"({"format": "qkv-graph", "version": 1, "name": "g", "dims": [],
    "nodes": [{"op": "scale", "name": "s", "inputs": [3], "dtype": "f32", "dims": [],
               "attrs": {}}], "outputs": []})";
  EXPECT_NE(error_of([&] { graph_from_json(later); }).find("not an earlier node"),
            std::string::npos);
  std::string version = text;
  version.replace(version.find("\"version\": 1"), 12, "\"version\": 7");
  EXPECT_NE(error_of([&] { graph_from_json(version); }).find("version"), std::string::npos);
}

TEST(GraphJson, AShapeRuleBrokenInTheTextIsRefusedAsInCpp) {
  Graph g("bad");
  auto l = g.dim("L", 3);
  auto d = g.dim("D", 4);
  auto x = g.input("x", DType::F32, {l, d});
  g.output("y", softmax(x));
  std::string text = graph_to_json(g);
  // softmax's result claims dims (L, L): verify() names the node.
  std::string bad = text;
  std::size_t at = bad.rfind("\"D\"");
  bad.replace(at, 3, "\"L\"");
  bad.replace(bad.find("4", at), 1, "3");
  EXPECT_FALSE(error_of([&] { graph_from_json(bad); }).empty());
}

/// Export, load, run against the JIT at the entry's first test shape: the same bits.
void check_bundle_matches_jit(const gallery::Entry &e) {
  SCOPED_TRACE(e.name);
  TempDir dir;
  Graph g = e.build();
  ExportResult r = export_kernel(g, dir.str());
  EXPECT_GT(r.bytes, 0);
  Kernel bundle = load_bundle(dir.str());
  Kernel jit = compile(g);
  TensorMap in = e.inputs(g, e.with_dims(e.shape, e.shapes.front()), 3, true);
  expect_same_bits(bundle.run(in), jit.run(in), e.name);
  EXPECT_EQ(bundle.stats().bundle, dir.str());
  EXPECT_EQ(bundle.schedule_runs().size(), jit.schedule_runs().size());
  EXPECT_EQ(bundle.packed_params().size(), jit.packed_params().size());
}

class GalleryBundle : public ::testing::TestWithParam<std::string> {};

TEST_P(GalleryBundle, LoadsAndComputesTheJitsBits) {
  for (const auto &e : gallery::entries())
    if (e.name == GetParam())
      return check_bundle_matches_jit(e);
  FAIL() << "no gallery entry " << GetParam();
}

std::vector<std::string> entry_names() {
  std::vector<std::string> out;
  for (const auto &e : gallery::entries())
    out.push_back(e.name);
  return out;
}

INSTANTIATE_TEST_SUITE_P(All, GalleryBundle, ::testing::ValuesIn(entry_names()),
                         [](const auto &info) { return info.param; });

/// A small exported bundle, shared by the refusal tests (each works on a copy).
const fs::path &exported() {
  static TempDir dir;
  static bool made = [] {
    for (const auto &e : gallery::entries())
      if (e.name == "causal")
        export_kernel(e.build(), dir.str());
    return true;
  }();
  (void)made;
  return dir.path;
}

/// A copy of the exported bundle with `edit` applied to it.
std::string refusal(const std::function<void(const fs::path &)> &edit) {
  TempDir copy;
  fs::copy(exported(), copy.path, fs::copy_options::recursive);
  edit(copy.path);
  return error_of([&] { load_bundle(copy.str()); });
}

void replace_in(const fs::path &file, const std::string &from, const std::string &to) {
  std::string text = read_text(file);
  std::size_t at = text.find(from);
  ASSERT_NE(at, std::string::npos) << from << " not in " << file;
  text.replace(at, from.size(), to);
  write_text(file, text);
}

TEST(Bundle, ACorruptedFileIsRefusedNamingIt) {
  std::string e = refusal([](const fs::path &d) {
    std::string so = read_text(d / "kernel.so");
    so[so.size() / 2] ^= 0x5a;
    write_text(d / "kernel.so", so);
  });
  EXPECT_NE(e.find("kernel.so is not the file exported"), std::string::npos) << e;
  e = refusal([](const fs::path &d) { replace_in(d / "graph.json", "\"causal\"", "\"causul\""); });
  EXPECT_NE(e.find("graph.json is not the file exported"), std::string::npos) << e;
  e = refusal([](const fs::path &d) { fs::remove(d / "kernel.so"); });
  EXPECT_NE(e.find("kernel.so"), std::string::npos) << e;
}

TEST(Bundle, AForeignOrBrokenManifestIsRefused) {
  std::string e = refusal([](const fs::path &d) { write_text(d / "manifest.json", "{\"forma"); });
  EXPECT_NE(e.find("is not JSON"), std::string::npos) << e;
  e = refusal([](const fs::path &d) {
    replace_in(d / "manifest.json", "\"qkv-bundle\"", "\"tvm-module\"");
  });
  EXPECT_NE(e.find("not a qkv bundle's"), std::string::npos) << e;
  e = refusal([](const fs::path &d) {
    replace_in(d / "manifest.json", "\"format_version\": 1", "\"format_version\": 2");
  });
  EXPECT_NE(e.find("format version 2"), std::string::npos) << e;
  e = refusal([](const fs::path &d) {
    replace_in(d / "manifest.json", "\"qkv_version\": \"", "\"qkv_version\": \"9");
  });
  EXPECT_NE(e.find("was written by qkv 9"), std::string::npos) << e;
  e = refusal([](const fs::path &d) { replace_in(d / "manifest.json", "\"symbol\"", "\"sym\""); });
  EXPECT_NE(e.find("missing a field"), std::string::npos) << e;
  e = refusal(
      [](const fs::path &d) { replace_in(d / "manifest.json", "\"host-cpu\"", "\"tpu-v5\""); });
  EXPECT_NE(e.find("its target is tpu-v5; this runtime loads host-cpu and cuda-<chip> bundles"),
            std::string::npos)
      << e;
  e = refusal([](const fs::path &d) { fs::remove(d / "manifest.json"); });
  EXPECT_NE(e.find("no manifest.json"), std::string::npos) << e;
}

TEST(Bundle, AHostWithoutTheCodesCpuFlagsIsRefusedNamingThem) {
  std::string e = refusal([](const fs::path &d) {
    replace_in(d / "manifest.json", "\"cpu_flags\": [", "\"cpu_flags\": [\"qkv_no_such_flag\",");
  });
  EXPECT_NE(e.find("needs CPU flags this host lacks: qkv_no_such_flag"), std::string::npos) << e;
  // The flags the exporter wrote are the host's own: the real bundle loads.
  BundleManifest m = read_manifest(exported().string());
  std::vector<std::string> have = host_cpu_flags();
  for (const std::string &f : m.cpu_flags)
    EXPECT_NE(std::find(have.begin(), have.end(), f), have.end()) << f;
  if (std::find(have.begin(), have.end(), "avx2") != have.end())
    EXPECT_NE(std::find(m.cpu_flags.begin(), m.cpu_flags.end(), "avx2"), m.cpu_flags.end());
}

TEST(Bundle, KeepsTheGraphStageOnly) {
  Kernel k = load_bundle(exported().string());
  EXPECT_NE(k.ir("graph").find("causal"), std::string::npos);
  EXPECT_NE(error_of([&] { k.ir("llvm"); }).find("compile the graph to see it"), std::string::npos);
  EXPECT_EQ(k.stats().stage_ms.front().first, "bundle");
  EXPECT_NE(error_of([&] { k.time_on_device({}, 1); }).find("runs on the CPU"), std::string::npos);
}

TEST(Bundle, AMissingInputIsTheErrorKernelRunGives) {
  Kernel k = load_bundle(exported().string());
  EXPECT_NE(error_of([&] { k.run({}); }).find("missing"), std::string::npos);
}

TEST(Export, RefusesAFolderThatHoldsSomethingElseAndCudaTargets) {
  TempDir dir;
  fs::create_directories(dir.path);
  write_text(dir.path / "notes.txt", "mine");
  Graph g = gallery::entries().front().build();
  EXPECT_NE(error_of([&] { export_kernel(g, dir.str()); }).find("holds no qkv bundle"),
            std::string::npos);
  EXPECT_EQ(read_text(dir.path / "notes.txt"), "mine");
  ExportOptions tiles;
  tiles.target = Target::gpu_tiles_on_host();
  EXPECT_NE(
      error_of([&] { export_kernel(g, dir.str("b"), tiles); }).find("export for host-cpu or cuda"),
      std::string::npos);
}

// Exported without a GPU; on a machine without one the loader says so (the runner's
// no-device message). compiler_cuda_bundle_test loads and runs one on the fake driver.
TEST(Bundle, ACudaBundleWithoutADeviceSaysSo) {
  if (cuda::available())
    GTEST_SKIP() << "skipped: a CUDA device is present (compiler_cuda_bundle_test and "
                    "tests/gpu cover it)";
  TempDir dir;
  ExportOptions o;
  o.target = Target::cuda("sm_90");
  export_kernel(gallery::entries().front().build(), dir.str(), o);
  BundleManifest m = read_manifest(dir.str());
  EXPECT_EQ(m.target, "cuda-sm_90");
  EXPECT_TRUE(m.cpu_flags.empty()) << "the host code of a CUDA bundle is for any x86-64";
  EXPECT_TRUE(m.runtime_libraries.empty());
  EXPECT_NE(read_text(dir.path / "kernels.ptx").find(".entry"), std::string::npos);
  int cubins = 0;
  for (const auto &[name, f] : m.files)
    cubins += name.ends_with(".sm_90.cubin") ? 1 : 0;
  bool ptxas = ::access("/usr/local/cuda/bin/ptxas", X_OK) == 0;
  if (ptxas)
    EXPECT_GT(cubins, 0) << "ptxas is here: every kernel module is assembled for sm_90";
  else
    std::cout << "(no ptxas in /usr/local/cuda/bin: the bundle has no cubin files)\n";
  std::string e = error_of([&] { load_bundle(dir.str()); });
  EXPECT_NE(e.find("(cuda-sm_90): no CUDA device: "), std::string::npos) << e;
}

/// The lines of a command's output (popen), or nullopt when it did not run.
std::optional<std::string> command_output(const std::string &cmd) {
  FILE *p = ::popen(cmd.c_str(), "r");
  if (!p)
    return std::nullopt;
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;)
    out.append(buf, n);
  return ::pclose(p) == 0 ? std::optional<std::string>(out) : std::nullopt;
}

TEST(Export, ABundleForAnotherCpuUsesItsFeaturesOnly) {
  TempDir dir;
  const gallery::Entry *causal = nullptr;
  for (const auto &e : gallery::entries())
    if (e.name == "causal")
      causal = &e;
  ASSERT_TRUE(causal);
  Graph g = causal->build();
  ExportOptions o;
  o.cpu = "x86-64-v3";
  ExportResult r = export_kernel(g, dir.str(), o);
  const BundleManifest &m = r.manifest;
  EXPECT_EQ(m.cpu, "x86-64-v3");
  EXPECT_EQ(m.isa, "f32");
  auto listed = [&](const char *flag) {
    return std::find(m.cpu_flags.begin(), m.cpu_flags.end(), flag) != m.cpu_flags.end();
  };
  EXPECT_TRUE(listed("avx2") && listed("fma"));
  EXPECT_FALSE(listed("avx512f"));
  if (auto text = command_output("objdump -d " + dir.str("kernel.so"))) {
    // AVX-512 shows as zmm registers, and at 256 bits as AVX-512VL's mask registers and
    // ymm16-31: none may appear in code for an AVX2 CPU.
    std::regex avx512(R"(zmm|%k[0-7]\b|[xy]mm(1[6-9]|2[0-9]|3[01])\b)");
    std::smatch hit;
    EXPECT_FALSE(std::regex_search(*text, hit, avx512))
        << "AVX-512 in code for AVX2: " << hit.str();
    EXPECT_NE(text->find("ymm"), std::string::npos) << "no 256-bit vectors at all";
  } else {
    std::cout << "(no objdump: the code's registers are not checked)\n";
  }
  std::vector<std::string> have = host_cpu_flags();
  if (std::find(have.begin(), have.end(), "avx2") == have.end())
    GTEST_SKIP() << "skipped: no avx2 here to run the x86-64-v3 bundle";
  Kernel k = load_bundle(dir.str());
  TensorMap in =
      causal->inputs(g, causal->with_dims(causal->shape, causal->shapes.front()), 5, true);
  check_against_reference(k, g, in).require();
}

TEST(Export, ANamedCpuIsCheckedAgainstWhatItHas) {
  TempDir dir;
  Graph g = gallery::entries().front().build();
  ExportOptions o;
  o.cpu = "nehalemx";
  EXPECT_NE(error_of([&] { export_kernel(g, dir.str(), o); }).find("unknown CPU 'nehalemx'"),
            std::string::npos);
  o.cpu = "x86-64-v3";
  o.compile.schedule.vector_bits = 512;
  EXPECT_NE(error_of([&] {
              export_kernel(g, dir.str(), o);
            }).find("Schedule::vector_bits is 512; x86-64-v3 has 256-bit vectors"),
            std::string::npos);
  o.compile.schedule.vector_bits = 0;
  o.compile.isa = Isa::Avx512Bf16;
  EXPECT_NE(error_of([&] {
              export_kernel(g, dir.str(), o);
            }).find("the avx512bf16 tier, which x86-64-v3 does not have"),
            std::string::npos);
  o.compile.isa = Isa::Host;
  o.target = Target::cuda();
  EXPECT_NE(error_of([&] { export_kernel(g, dir.str(), o); }).find("ExportOptions::cpu is for"),
            std::string::npos);
}

TEST(Export, ABundleIsReplacedByTheNextExport) {
  TempDir dir;
  const auto &entries = gallery::entries();
  export_kernel(entries.front().build(), dir.str());
  Graph second = entries.back().build();
  export_kernel(second, dir.str());
  EXPECT_EQ(load_bundle(dir.str()).graph().key_text(), second.key_text());
}

TEST(Export, ALinkerThatFailsIsQuoted) {
  TempDir dir;
  ExportOptions o;
  o.linker = "/bin/false";
  std::string e =
      error_of([&] { export_kernel(gallery::entries().front().build(), dir.str(), o); });
  EXPECT_NE(e.find("linking kernel.so failed (exit 1): /bin/false -shared"), std::string::npos)
      << e;
  EXPECT_FALSE(fs::exists(dir.path / "manifest.json"));
}

} // namespace
} // namespace qkv::test
