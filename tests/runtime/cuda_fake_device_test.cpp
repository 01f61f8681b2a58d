// qkv::cuda's objects against the fake driver (fake_cuda.c) with two devices: ctest runs
// this with QKV_LIBCUDA naming the fake and QKV_FAKE_CUDA_DEVICES=2, and every test fails
// without them. The fake checks what the real driver checks (a context current on the
// calling thread, copies inside their allocation, frees and releases that match), so these
// test qkv's side of each call: the arguments, the context binding, the RAII releases, the
// error messages. Whether real kernels run on a real GPU is not tested here.
#include <qkv/runtime/cuda.hpp>

#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <qkv_test/errors.hpp>

#include "cuda_guide_example.hpp"

namespace {

using namespace qkv;
using namespace qkv::cuda;
using qkv::test::error_of;

const char kPtx[] = "// fake PTX\n.entry add_one\n";

class FakeCuda : public testing::Test {
protected:
  void SetUp() override {
    const char *lib = std::getenv("QKV_LIBCUDA");
    ASSERT_TRUE(lib && *lib) << "run through ctest, which sets QKV_LIBCUDA to the fake driver";
    std::string why;
    ASSERT_TRUE(available(&why)) << why;
    void *handle = dlopen(lib, RTLD_NOW | RTLD_NOLOAD); // the copy qkv loaded
    ASSERT_TRUE(handle) << lib << " is not loaded";
    count_ = reinterpret_cast<int (*)(const char *)>(dlsym(handle, "fake_cuda_count"));
    ASSERT_TRUE(count_) << lib << " is not the fake driver";
    launches_ = count("launches");
  }
  // Every object released what it took, exactly once.
  void TearDown() override {
    if (!count_)
      return;
    for (const char *what : {"contexts", "allocations", "modules", "streams", "misuse"})
      EXPECT_EQ(count(what), 0) << what << " left after the test";
  }
  int count(const char *what) const { return count_(what); }
  int launches() const { return count("launches") - launches_; }

  std::string label() const { return std::string(std::getenv("QKV_LIBCUDA")) + " (QKV_LIBCUDA)"; }

private:
  int (*count_)(const char *) = nullptr;
  int launches_ = 0;
};

TEST_F(FakeCuda, Devices) {
  EXPECT_EQ(device_count(), 2);
  Device d0 = Device::get(), d1 = Device::get(1);
  EXPECT_EQ(d0.ordinal(), 0);
  EXPECT_EQ(d0.name(), "Fake GPU 0");
  EXPECT_EQ(d0.cc_major(), 9);
  EXPECT_EQ(d0.cc_minor(), 0);
  EXPECT_EQ(d0.arch(), "sm_90");
  EXPECT_EQ(d1.name(), "Fake GPU 1");
  EXPECT_EQ(d1.arch(), "sm_80");
  EXPECT_EQ(count("contexts"), 2);
  Device copy = d0; // shares the retained context
  EXPECT_EQ(count("contexts"), 2);
  Device moved = std::move(copy); // copies: a Device is never left without its context
  EXPECT_EQ(copy.name(), "Fake GPU 0");
  EXPECT_EQ(count("contexts"), 2);
  d0.synchronize();
  EXPECT_EQ(error_of([] { Device::get(2); }),
            "no CUDA device 2 (" + label() + " reports 2 devices)");
  EXPECT_EQ(error_of([] { Device::get(-1); }),
            "no CUDA device -1 (" + label() + " reports 2 devices)");
}

TEST_F(FakeCuda, ObjectsKeepTheContext) {
  std::optional<Buffer> b;
  {
    Device d = Device::get();
    b.emplace(d, 64);
  }
  EXPECT_EQ(count("contexts"), 1) << "the buffer holds the context";
  EXPECT_EQ(count("allocations"), 1);
  b.reset();
  EXPECT_EQ(count("contexts"), 0);
  EXPECT_EQ(count("allocations"), 0);
}

TEST_F(FakeCuda, BufferRoundTrip) {
  Device d = Device::get();
  Tensor t = Tensor::random(DType::F32, {3, 5}, 7);
  Buffer b(d, t);
  EXPECT_EQ(b.bytes(), 60u);
  EXPECT_NE(b.address(), 0u);
  Tensor back = Tensor::uninitialized(DType::F32, {3, 5});
  b.download(back);
  EXPECT_EQ(back.values(), t.values());

  // Part of it, at an offset, from plain host memory.
  float two[2] = {100, 200};
  b.upload(two, sizeof two, 4 * sizeof(float));
  float got[3] = {};
  b.download(got, sizeof got, 3 * sizeof(float));
  EXPECT_EQ(got[0], static_cast<float>(t.get(3)));
  EXPECT_EQ(got[1], 100);
  EXPECT_EQ(got[2], 200);

  b.fill(0xAB);
  std::vector<std::uint8_t> bytes(60);
  b.download(bytes.data(), bytes.size());
  EXPECT_EQ(bytes, std::vector<std::uint8_t>(60, 0xAB));
}

TEST_F(FakeCuda, BufferMovesFreeOnce) {
  Device d = Device::get();
  Buffer a(d, 16);
  std::uint64_t address = a.address();
  Buffer b(std::move(a));
  EXPECT_EQ(a.address(), 0u);
  EXPECT_EQ(a.bytes(), 0u);
  EXPECT_EQ(b.address(), address);
  Buffer c(d, 32);
  c = std::move(b); // frees c's own 32 bytes
  EXPECT_EQ(c.address(), address);
  EXPECT_EQ(count("allocations"), 1);
  Buffer empty(d, 0); // nothing allocated: the driver refuses 0 bytes
  EXPECT_EQ(empty.address(), 0u);
  empty.fill(1);
  empty.upload(nullptr, 0);
  EXPECT_EQ(count("allocations"), 1);
}

TEST_F(FakeCuda, BufferErrors) {
  Device d = Device::get();
  EXPECT_EQ(error_of([&] {
              Buffer{d, std::size_t{1} << 30};
            }),
            "cuMemAlloc_v2(1073741824 bytes) failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory)");
  Buffer b(d, 64);
  char host[128] = {};
  EXPECT_EQ(error_of([&] { b.upload(host, 80); }),
            "CUDA buffer of 64 bytes: upload of 80 bytes at offset 0 runs past its end");
  EXPECT_EQ(error_of([&] { b.download(host, 8, 60); }),
            "CUDA buffer of 64 bytes: download of 8 bytes at offset 60 runs past its end");
  EXPECT_EQ(error_of([&] { b.upload(host, 1, SIZE_MAX); }),
            "CUDA buffer of 64 bytes: upload of 1 bytes at offset " + std::to_string(SIZE_MAX) +
                " runs past its end");
  Tensor t = Tensor::random(DType::F32, {4, 5}, 1);
  EXPECT_EQ(error_of([&] { b.upload(t); }),
            "CUDA buffer of 64 bytes: cannot upload tensor f32[4, 5] (80 bytes): the sizes differ");
  EXPECT_EQ(error_of([&] { b.download(t); }),
            "CUDA buffer of 64 bytes: cannot download into tensor f32[4, 5] (80 bytes): the sizes "
            "differ");
  EXPECT_EQ(error_of([&] {
              Buffer{d, Tensor()};
            }),
            "CUDA buffer of 0 bytes: cannot upload an empty Tensor");
  // A driver error from a copy names the call: the fake refuses a null host pointer.
  EXPECT_EQ(error_of([&] { b.upload(nullptr, 8); }),
            "cuMemcpyHtoD_v2(8 bytes) failed: CUDA_ERROR_INVALID_VALUE (invalid argument)");
}

TEST_F(FakeCuda, ModulesAndFunctions) {
  Device d = Device::get();
  EXPECT_EQ(error_of([&] {
              Module{d, "junk", "junk.cubin"};
            }),
            "cuModuleLoadData(module 'junk.cubin', 4 bytes) failed: CUDA_ERROR_INVALID_IMAGE "
            "(device kernel image is invalid)");
  EXPECT_EQ(error_of([&] {
              Module{d, "", "empty.ptx"};
            }),
            "CUDA module 'empty.ptx': the image is empty (no PTX or cubin bytes)");
  EXPECT_EQ(count("modules"), 0);

  // A view that is not NUL-terminated: the driver must get a C string of exactly its bytes,
  // else it reads on and finds add_one_more where the view lists add_one.
  std::string image = "// fake PTX\n.entry add_one_more\n";
  std::string_view view(image.data(), image.size() - std::strlen("_more\n"));
  std::optional<Module> m(std::in_place, d, view, "fake.ptx");
  EXPECT_EQ(m->name(), "fake.ptx");
  EXPECT_EQ(error_of([&] { m->function("missing"); }),
            "cuModuleGetFunction(kernel 'missing' in module 'fake.ptx') failed: "
            "CUDA_ERROR_NOT_FOUND (named symbol not found)");
  Function f = m->function("add_one");
  EXPECT_EQ(f.name(), "add_one");
  EXPECT_EQ(f.module_name(), "fake.ptx");
  Module copy = std::move(*m); // copies: both name the same loaded module
  EXPECT_EQ(m->function("add_one").module_name(), "fake.ptx");
  EXPECT_EQ(count("modules"), 1);
  m.reset();
  copy = Module(d, kPtx, "other.ptx"); // the first module's last Module goes
  EXPECT_EQ(count("modules"), 2) << "the function keeps its module loaded";
}

TEST_F(FakeCuda, LaunchPassesArguments) {
  Device d = Device::get();
  Function add_one = Module(d, kPtx, "fake.ptx").function("add_one");
  Stream s(d);
  std::vector<float> host = {1, 2, 3, 4, 5, 6, 7, 8};
  Buffer b(d, host.size() * sizeof(float));
  b.upload(host.data(), b.bytes());
  int n = 5;
  void *args[] = {b.arg(), &n};
  launch(add_one, {2, 1, 1}, {32, 1, 1}, 0, s, args);
  s.synchronize();
  EXPECT_EQ(launches(), 1);
  b.download(host.data(), b.bytes());
  EXPECT_EQ(host, (std::vector<float>{2, 3, 4, 5, 6, 6, 7, 8}));
}

TEST_F(FakeCuda, LaunchErrors) {
  Device d0 = Device::get(), d1 = Device::get(1);
  Function add_one = Module(d0, kPtx, "fake.ptx").function("add_one");
  Stream s0(d0), s1(d1);
  Buffer b(d0, 4 * sizeof(float));
  int n = 4;
  void *args[] = {b.arg(), &n};
  std::string what = "CUDA launch of kernel 'add_one' in module 'fake.ptx': ";
  EXPECT_EQ(error_of([&] {
              launch(add_one, {1, 0, 1}, {32, 1, 1}, 0, s0, args);
            }),
            what + "the grid (1, 0, 1) has a dimension of 0");
  EXPECT_EQ(error_of([&] {
              launch(add_one, {1, 1, 1}, {32, 1, 0}, 0, s0, args);
            }),
            what + "the block (32, 1, 0) has a dimension of 0");
  EXPECT_EQ(error_of([&] {
              launch(add_one, {1, 1, 1}, {32, 1, 1}, 0, s1, args);
            }),
            what + "the kernel is on device 0, the stream on device 1");
  EXPECT_EQ(launches(), 0) << "qkv's own checks come before the driver";
  EXPECT_EQ(error_of([&] {
              launch(add_one, {1, 1, 1}, {2048, 1, 1}, 0, s0, args);
            }),
            "cuLaunchKernel(kernel 'add_one' in module 'fake.ptx', grid (1, 1, 1), block (2048, "
            "1, 1), 0 shared bytes) failed: CUDA_ERROR_INVALID_VALUE (invalid argument)");
  // A kernel's own fault surfaces at the next synchronize, not at the launch.
  n = 5; // one float past the buffer
  launch(add_one, {1, 1, 1}, {32, 1, 1}, 0, s0, args);
  EXPECT_EQ(error_of([&] { s0.synchronize(); }),
            "cuStreamSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was "
            "encountered)");
  Stream moved(std::move(s0));
  EXPECT_EQ(error_of([&] {
              launch(add_one, {1, 1, 1}, {32, 1, 1}, 0, s0, args);
            }),
            what + "the stream was moved from");
  EXPECT_EQ(error_of([&] { s0.synchronize(); }),
            "CUDA stream: synchronize() on a stream that was moved from");
  moved.synchronize();
}

TEST_F(FakeCuda, ObjectsWorkFromAnotherThread) {
  // The driver's current context is per thread: a thread that never made one current can
  // still use the objects, because each call makes its context current first.
  Device d = Device::get();
  Buffer b(d, 8);
  b.fill(7);
  std::vector<std::uint8_t> got(8);
  std::string error;
  std::thread t([&] {
    try {
      b.download(got.data(), got.size());
      Stream s(d);
      s.synchronize();
    } catch (const Error &e) {
      error = e.what();
    }
  });
  t.join();
  EXPECT_EQ(error, "");
  EXPECT_EQ(got, std::vector<std::uint8_t>(8, 7));
}

TEST_F(FakeCuda, GuideExample) {
  testing::internal::CaptureStdout();
  test::cuda_guide_example(kPtx);
  EXPECT_EQ(testing::internal::GetCapturedStdout(),
            "Fake GPU 0, sm_90\n[2, 3, 4, 5, 6, 6, 7, 8]\n");
}

// docs/runtime.md quotes these messages, each on a line of its own.
TEST_F(FakeCuda, GuideQuotesTheErrors) {
  std::ifstream in(QKV_RUNTIME_GUIDE);
  ASSERT_TRUE(in) << QKV_RUNTIME_GUIDE;
  std::stringstream guide;
  guide << in.rdbuf();
  Device d = Device::get();
  Module m(d, kPtx, "fake.ptx");
  Buffer b(d, 4);
  Stream s(d);
  int n = 2; // past the buffer's one float: a fault at synchronize
  void *args[] = {b.arg(), &n};
  for (const std::string &msg : {error_of([&] {
                                   Buffer{d, std::size_t{1} << 30};
                                 }),
                                 error_of([&] { m.function("missing"); }), error_of([&] {
                                   launch(m.function("add_one"), {}, {}, 0, s, args);
                                   s.synchronize();
                                 })})
    EXPECT_NE(guide.str().find("\n" + msg + "\n"), std::string::npos)
        << "docs/runtime.md should quote, on a line of its own:\n"
        << msg;
}

} // namespace
