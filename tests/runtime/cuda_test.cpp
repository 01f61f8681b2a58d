// Loading the CUDA driver (qkv/runtime/cuda.hpp): on this machine, whatever it has, and in
// fresh processes (cuda_probe) given a library that does not exist, the fake driver with no
// device or with zero devices, and a fake that lacks a symbol. The driver is loaded once
// per process, so each of those needs its own process.
#include <qkv/runtime/cuda.hpp>

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <regex>
#include <string>

#include <gtest/gtest.h>

#include <qkv_test/errors.hpp>

namespace {

using qkv::test::error_of;

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

} // namespace
