// Loading the CUDA driver (qkv/runtime/cuda.hpp): on this machine, whatever it has, and in
// fresh processes (cuda_probe) given a library that does not exist, the fake driver with no
// device or with zero devices, and a fake that lacks a symbol. The driver is loaded once
// per process, so each of those needs its own process.
#include <qkv/runtime/cuda.hpp>

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include <qkv_test/errors.hpp>

#include "cuda_guide_example.hpp"

namespace {

using qkv::test::error_of;

std::string read_file(const std::string &path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot open " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Runs cuda_probe with QKV_LIBCUDA and QKV_FAKE_CUDA_DEVICES as given ("" leaves one
/// unset) and returns its "key: value" lines.
std::map<std::string, std::string> probe(const std::string &libcuda,
                                         const std::string &devices = "") {
  std::string cmd = "env -u QKV_LIBCUDA -u QKV_FAKE_CUDA_DEVICES";
  if (!libcuda.empty())
    cmd += " 'QKV_LIBCUDA=" + libcuda + "'";
  if (!devices.empty())
    cmd += " QKV_FAKE_CUDA_DEVICES=" + devices;
  cmd += " '" QKV_CUDA_PROBE "' 2>&1";
  std::map<std::string, std::string> out;
  FILE *p = popen(cmd.c_str(), "r");
  if (!p) {
    ADD_FAILURE() << "cannot run " << cmd;
    return out;
  }
  char line[4096];
  while (std::fgets(line, sizeof line, p)) {
    std::string s(line);
    if (!s.empty() && s.back() == '\n')
      s.pop_back();
    auto colon = s.find(": ");
    out[colon == std::string::npos ? s : s.substr(0, colon)] =
        colon == std::string::npos ? "" : s.substr(colon + 2);
  }
  EXPECT_EQ(pclose(p), 0) << cmd;
  EXPECT_EQ(out.count("threads"), 0u) << "threads racing to load the driver saw different results";
  return out;
}

// This machine, through the default library name: without a loadable driver (the build
// machine), unavailable with dlopen's reason; with one, consistent with what it reports.
TEST(CudaDriver, ThisMachine) {
  std::string library = qkv::cuda::driver_library();
  std::string why = "not set";
  bool avail = qkv::cuda::available(&why);
  void *lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    EXPECT_FALSE(avail);
    EXPECT_EQ(why.rfind(library, 0), 0u) << why;
    EXPECT_NE(why.find(" (dlopen: "), std::string::npos) << why;
    EXPECT_EQ(error_of([] { qkv::cuda::Device::get(); }), "no CUDA device: " + why);
    EXPECT_EQ(error_of([] { qkv::cuda::device_count(); }), why);
  } else if (avail) {
    EXPECT_EQ(why, "");
    qkv::cuda::Device d = qkv::cuda::Device::get();
    EXPECT_FALSE(d.name().empty());
    EXPECT_TRUE(std::regex_match(d.arch(), std::regex("sm_[0-9]+"))) << d.arch();
    EXPECT_GE(qkv::cuda::device_count(), 1);
    // A real kernel on the real GPU: docs/runtime.md's example with add_one.ptx.
    testing::internal::CaptureStdout();
    qkv::test::cuda_guide_example(read_file(QKV_TEST_DATA_DIR "/add_one.ptx"));
    EXPECT_EQ(testing::internal::GetCapturedStdout(),
              d.name() + ", " + d.arch() + "\n[2, 3, 4, 5, 6, 6, 7, 8]\n");
  } else {
    EXPECT_FALSE(why.empty());
    EXPECT_EQ(error_of([] { qkv::cuda::Device::get(); }).rfind("no CUDA device", 0), 0u);
  }
}

TEST(CudaDriver, MissingLibraryGivesDlopensReason) {
  std::string path = std::string(QKV_FAKE_CUDA) + ".absent";
  auto out = probe(path);
  std::string why = path + " (QKV_LIBCUDA) not found (dlopen: " + path +
                    ": cannot open shared object file: No such file or directory)";
  EXPECT_EQ(out["available"], "0");
  EXPECT_EQ(out["why"], why);
  EXPECT_EQ(out["device_error"], "no CUDA device: " + why);
}

TEST(CudaDriver, NotADriverCannotBeLoaded) {
  // A file that exists but is no shared library: "cannot be loaded", not "not found".
  auto out = probe(QKV_CUDA_PROBE_SOURCE);
  EXPECT_EQ(out["available"], "0");
  EXPECT_NE(out["why"].find(" (QKV_LIBCUDA) cannot be loaded (dlopen: "), std::string::npos)
      << out["why"];
}

TEST(CudaDriver, DriverWithoutDevicesFailsInit) {
  auto out = probe(QKV_FAKE_CUDA);
  std::string why = "cuInit failed: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)";
  EXPECT_EQ(out["available"], "0");
  EXPECT_EQ(out["why"], why);
  EXPECT_EQ(out["device_error"], "no CUDA device: " + why);
  EXPECT_EQ(out["init_calls"], "1") << "8 threads asked; the driver must be loaded once";
}

TEST(CudaDriver, DriverWithZeroDevices) {
  auto out = probe(QKV_FAKE_CUDA, "0");
  std::string label = std::string(QKV_FAKE_CUDA) + " (QKV_LIBCUDA)";
  EXPECT_EQ(out["available"], "0");
  EXPECT_EQ(out["why"], "no CUDA device (" + label + " reports 0 devices)");
  EXPECT_EQ(out["device_error"], "no CUDA device 0 (" + label + " reports 0 devices)");
  EXPECT_EQ(out["init_calls"], "1");
}

TEST(CudaDriver, DriverWithADevice) {
  auto out = probe(QKV_FAKE_CUDA, "1");
  EXPECT_EQ(out["available"], "1");
  EXPECT_EQ(out["why"], "");
  EXPECT_EQ(out["device"], "Fake GPU 0 sm_90");
  EXPECT_EQ(out.count("device_error"), 0u);
}

TEST(CudaDriver, MissingSymbolIsNamed) {
  auto out = probe(QKV_FAKE_CUDA_NO_LAUNCH, "1");
  std::string why = out["why"];
  EXPECT_EQ(out["available"], "0");
  EXPECT_EQ(why.rfind(std::string(QKV_FAKE_CUDA_NO_LAUNCH) +
                          " (QKV_LIBCUDA) lacks cuLaunchKernel " + "(dlsym: ",
                      0),
            0u)
      << why;
  EXPECT_NE(why.find("): not a CUDA driver, or one older than CUDA 11"), std::string::npos) << why;
  EXPECT_EQ(out["device_error"], "no CUDA device: " + why);
  // A driver that lacks an entry point is not initialised at all.
  EXPECT_EQ(out["init_calls"], "0");
}

TEST(CudaDriver, EmptyVariableMeansTheDefault) {
  // probe("") would unset QKV_LIBCUDA; here it is set, to "".
  std::string cmd = "env QKV_LIBCUDA= QKV_FAKE_CUDA_DEVICES=1 '" QKV_CUDA_PROBE "'";
  FILE *p = popen(cmd.c_str(), "r");
  ASSERT_TRUE(p);
  char buf[8192] = {};
  std::size_t n = std::fread(buf, 1, sizeof buf - 1, p);
  ASSERT_EQ(pclose(p), 0);
  std::string text(buf, n);
  EXPECT_EQ(text.find("QKV_LIBCUDA"), std::string::npos) << text;
  // Unless this test runs with QKV_LIBCUDA set, it loaded the default driver too.
  const char *env = std::getenv("QKV_LIBCUDA");
  if (env && *env)
    GTEST_SKIP() << "QKV_LIBCUDA is set for this test: no default to compare with";
  std::string why;
  bool avail = qkv::cuda::available(&why);
  EXPECT_NE(text.find("available: " + std::to_string(avail) + "\nwhy: " + why + "\n"),
            std::string::npos)
      << text;
}

/// The lines between the first line that is `open` and the next that is `close` (ignoring
/// indentation), less the indentation of the `open` line.
std::string between(const std::string &text, const std::string &open, const std::string &close) {
  std::istringstream in(text);
  std::string line, out;
  bool inside = false;
  std::size_t indent = 0;
  while (std::getline(in, line)) {
    std::size_t first = line.find_first_not_of(' ');
    std::string trimmed = first == std::string::npos ? "" : line.substr(first);
    if (!inside && trimmed == open) {
      inside = true;
      indent = first;
    } else if (inside && trimmed == close) {
      return out;
    } else if (inside) {
      out += (line.size() > indent ? line.substr(indent) : "") + "\n";
    }
  }
  ADD_FAILURE() << "no '" << open << "' ... '" << close << "'";
  return "";
}

// The guide's CUDA example is the code the tests run, word for word.
TEST(CudaGuide, ShowsTheExample) {
  std::string guide = read_file(QKV_RUNTIME_GUIDE);
  std::size_t section = guide.find("\n## CUDA driver\n");
  ASSERT_NE(section, std::string::npos) << "docs/runtime.md has no '## CUDA driver' section";
  std::string code = between(read_file(QKV_CUDA_GUIDE_EXAMPLE), "// [doc:cuda]", "// [/doc]");
  EXPECT_EQ(between(guide.substr(section), "```cpp", "```"), code)
      << "docs/runtime.md's CUDA driver example is not tests/runtime/cuda_guide_example.hpp's";
}

} // namespace
