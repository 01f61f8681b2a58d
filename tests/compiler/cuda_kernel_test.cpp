// Compiled CUDA kernels' host side, on any machine: ctest points QKV_LIBCUDA at the fake
// driver (tests/runtime/fake_cuda.c) with QKV_FAKE_CUDA_ANY_PTX=1, which loads the real
// PTX and launches its kernels as no-ops. So these tests check the plumbing, not the
// numbers: the kernel modules load at compile time and unload with the kernel, run()
// uploads, launches and downloads, device memory is freed, and driver failures (in run()
// or inside the host code) are errors naming the call. The numbers are checked on the
// CPU (Target::gpu_tiles_on_host()) and on a GPU by tests/gpu/run.sh.
#include <cstdlib>

#include <dlfcn.h>

#include <gtest/gtest.h>

#include <qkv/compiler/compile.hpp>
#include <qkv/runtime/cuda.hpp>

#include "qkv_test/errors.hpp"

namespace qkv {
namespace {

class CudaKernel : public ::testing::Test {
protected:
  void SetUp() override {
    const char *lib = std::getenv("QKV_LIBCUDA");
    ASSERT_TRUE(lib && *lib) << "run through ctest, which sets QKV_LIBCUDA to the fake driver";
    ASSERT_TRUE(cuda::available());
    void *handle = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
    ASSERT_TRUE(handle);
    count_ = reinterpret_cast<int (*)(const char *)>(dlsym(handle, "fake_cuda_count"));
    ASSERT_TRUE(count_);
  }
  void TearDown() override {
    for (const char *what : {"contexts", "allocations", "modules", "streams", "misuse"})
      EXPECT_EQ(count_(what), 0) << what << " left after the test";
  }
  int (*count_)(const char *) = nullptr;
};

/// Attention then a projection: two kernel modules, dynamic B and L.
Graph block(std::int64_t n = 16) {
  Graph g("cuda_block");
  Dim B = g.dim("B"), H = g.dim("H", 2), L = g.dim("L"), Dh = g.dim("Dh", 16), N = g.dim("N", n);
  Attention a = attention(g.input("q", DType::F32, {B, H, L, Dh}),
                          g.input("k", DType::F32, {B, H, L, Dh}),
                          g.input("v", DType::F32, {B, H, L, Dh}));
  a.mask([](auto, auto, auto i, auto j) { return i >= j; });
  g.output("y", linear(a.value(), g.param("w", DType::F32, {Dh, N})));
  return g;
}

TEST_F(CudaKernel, LoadsLaunchesAndFreesEverything) {
  Graph g = block();
  {
    Kernel k = compile(g, Target::cuda("sm_80"));
    int modules = count_("modules");
    EXPECT_GE(modules, 2) << "the attention's and the projection's kernel modules";
    int before = count_("launches");
    TensorMap in = random_inputs(g, {{"B", 2}, {"L", 37}}, 1);
    TensorMap out = k.run(in);
    EXPECT_EQ(out.at("y").shape(), (Shape{2, 2, 37, 16}));
    int per_run = count_("launches") - before;
    EXPECT_GE(per_run, 2);
    k.run(in);
    EXPECT_EQ(count_("launches") - before, 2 * per_run);
    EXPECT_EQ(count_("allocations"), 0) << "run() frees its device buffers";
    EXPECT_EQ(count_("modules"), modules);
    EXPECT_NE(k.ir("ptx").find(".entry"), std::string::npos);
  }
  EXPECT_EQ(count_("modules"), 0) << "the kernel's modules unload with it";
}

TEST_F(CudaKernel, OutOfDeviceMemoryInRunIsAnError) {
  Graph g = block();
  Kernel k = compile(g, Target::cuda("sm_80"));
  // q, k, v of 2 x 2 x 4096 x 16 floats: 1 MiB each, past the fake's 1 MiB.
  TensorMap in = random_inputs(g, {{"B", 2}, {"L", 4096}}, 1);
  EXPECT_TRUE(test::ErrorSays([&] { k.run(in); },
                              {"cuMemAlloc_v2", "CUDA_ERROR_OUT_OF_MEMORY"}));
}

TEST_F(CudaKernel, FailureInsideTheHostCodeIsAnError) {
  // Small inputs and weights, but the projection's 600 x 1024 result (2.4 MB) is a buffer
  // the host code allocates: its mgpuMemAlloc fails inside the compiled code.
  Graph g("cuda_wide");
  Dim L = g.dim("L"), D = g.dim("D", 4), N = g.dim("N", 1024);
  Value wide = linear(g.input("x", DType::F32, {L, D}), g.param("w1", DType::F32, {D, N}));
  g.output("y", linear(silu(wide), g.param("w2", DType::F32, {N, D})));
  Kernel k = compile(g, Target::cuda("sm_80"));
  TensorMap in = random_inputs(g, {{"L", 600}}, 1);
  EXPECT_TRUE(test::ErrorSays([&] { k.run(in); },
                              {"graph 'cuda_wide' on Fake GPU 0", "allocating device memory",
                               "CUDA_ERROR_OUT_OF_MEMORY"}));
  // The failure is not left behind: a run that fits works.
  EXPECT_NO_THROW(k.run(random_inputs(g, {{"L", 2}}, 1)));
}

} // namespace
} // namespace qkv
