// CUDA bundles (qkv::export_kernel with Target::cuda): exported on a machine without a GPU,
// loaded and run on the fake driver (tests/runtime/fake_cuda.c, which ctest points
// QKV_LIBCUDA at: it loads the real PTX and launches its kernels as no-ops). So, as in
// cuda_kernel_test.cpp, the plumbing: the bundle's kernel modules load when it does and
// unload with the kernel, run() uploads, launches and downloads, device memory is freed.
#include <cstdlib>
#include <filesystem>

#include <dlfcn.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <qkv/compiler/export.hpp>
#include <qkv/runtime/cuda.hpp>

namespace qkv {
namespace {

class CudaBundle : public ::testing::Test {
protected:
  void SetUp() override {
    const char *lib = std::getenv("QKV_LIBCUDA");
    ASSERT_TRUE(lib && *lib) << "run through ctest, which sets QKV_LIBCUDA to the fake driver";
    ASSERT_TRUE(cuda::available());
    void *handle = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
    ASSERT_TRUE(handle);
    count_ = reinterpret_cast<int (*)(const char *)>(dlsym(handle, "fake_cuda_count"));
    ASSERT_TRUE(count_);
    dir_ = std::filesystem::temp_directory_path() /
           ("qkv-cuda-bundle-test-" + std::to_string(::getpid()));
  }
  void TearDown() override {
    for (const char *what : {"contexts", "allocations", "modules", "streams", "misuse"})
      EXPECT_EQ(count_(what), 0) << what << " left after the test";
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  int (*count_)(const char *) = nullptr;
  std::filesystem::path dir_;
};

/// Attention then a projection: two kernel modules, dynamic B and L.
Graph block() {
  Graph g("cuda_bundle_block");
  Dim B = g.dim("B"), H = g.dim("H", 2), L = g.dim("L"), Dh = g.dim("Dh", 16), N = g.dim("N", 16);
  Attention a =
      attention(g.input("q", DType::F32, {B, H, L, Dh}), g.input("k", DType::F32, {B, H, L, Dh}),
                g.input("v", DType::F32, {B, H, L, Dh}));
  a.mask([](auto, auto, auto i, auto j) { return i >= j; });
  g.output("y", linear(a.value(), g.param("w", DType::F32, {Dh, N})));
  return g;
}

TEST_F(CudaBundle, LoadsItsModulesLaunchesAndFreesEverything) {
  Graph g = block();
  ExportOptions o;
  o.target = Target::cuda("sm_80");
  int before_export = count_("modules");
  ExportResult r = export_kernel(g, dir_.string(), o);
  EXPECT_EQ(count_("modules"), before_export) << "exporting loads nothing on the device";
  EXPECT_EQ(r.manifest.target, "cuda-sm_80");
  EXPECT_FALSE(r.manifest.inits.empty());
  {
    Kernel k = load_bundle(dir_.string());
    EXPECT_GE(count_("modules"), 2) << "the attention's and the projection's kernel modules";
    int launches = count_("launches");
    TensorMap in = random_inputs(g, {{"B", 2}, {"L", 37}}, 1);
    TensorMap out = k.run(in);
    EXPECT_GT(count_("launches"), launches);
    EXPECT_EQ(out.at("y").shape(), (std::vector<std::int64_t>{2, 2, 37, 16}));
    EXPECT_EQ(count_("allocations"), 0) << "run() frees what it allocated";
  }
  EXPECT_EQ(count_("modules"), 0) << "the modules unload with the kernel";
}

TEST_F(CudaBundle, TimesCallsOnTheDeviceWithoutCopies) {
  Graph g = block();
  ExportOptions o;
  o.target = Target::cuda("sm_90");
  export_kernel(g, dir_.string(), o);
  Kernel k = load_bundle(dir_.string());
  TensorMap in = random_inputs(g, {{"B", 1}, {"L", 20}}, 2);
  int launches = count_("launches");
  k.run(in);
  int per_call = count_("launches") - launches;
  EXPECT_GT(per_call, 0);
  std::vector<double> ms = k.time_on_device(in, 3);
  EXPECT_EQ(ms.size(), 3u);
  EXPECT_EQ(count_("launches") - launches, 4 * per_call);
  EXPECT_EQ(count_("allocations"), 0);
  try {
    k.time_on_device(in, 0);
    ADD_FAILURE() << "no error for 0 calls";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("at least 1"), std::string::npos) << e.what();
  }
}

} // namespace
} // namespace qkv
