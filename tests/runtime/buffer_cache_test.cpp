// The buffer cache (qkv/runtime/buffer_cache.hpp): large buffers come back for the next
// allocation of their size class and alignment, within the limit; compiled kernels take
// their scratch buffers from it.
#include <qkv/qkv.hpp>
#include <qkv/runtime/buffer_cache.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

namespace qkv {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

class BufferCache : public ::testing::Test {
protected:
  void SetUp() override {
    buffer_cache_trim();
    set_buffer_cache_limit(64 * kMiB);
  }
  void TearDown() override { set_buffer_cache_limit(512 * kMiB); }
};

TEST_F(BufferCache, ALargeBufferComesBackForItsClass) {
  void *a = buffer_alloc(3 * kMiB);
  std::memset(a, 1, 3 * kMiB);
  buffer_free(a);
  EXPECT_EQ(buffer_cache_stats().kept_buffers, 1u);
  BufferCacheStats before = buffer_cache_stats();
  void *b = buffer_alloc(3 * kMiB - 1000); // the same class: 3 MiB is a class boundary
  EXPECT_EQ(a, b);
  EXPECT_EQ(buffer_cache_stats().hits, before.hits + 1);
  EXPECT_EQ(buffer_cache_stats().kept_buffers, 0u);
  void *c = buffer_alloc(3 * kMiB); // not kept: b holds it
  EXPECT_NE(b, c);
  buffer_free(b);
  buffer_free(c);
  EXPECT_EQ(buffer_cache_stats().kept_buffers, 2u);
}

TEST_F(BufferCache, OtherClassesAndAlignmentsAreNotMixed) {
  void *a = buffer_alloc(kMiB);
  buffer_free(a);
  void *b = buffer_alloc(2 * kMiB); // another class
  EXPECT_NE(a, b);
  void *c = buffer_alloc(kMiB, 2 * kMiB); // the class of a, another alignment
  EXPECT_NE(a, c);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(c) % (2 * kMiB), 0u);
  void *d = buffer_alloc(kMiB);
  EXPECT_EQ(a, d);
  for (void *p : {b, c, d})
    buffer_free(p);
}

TEST_F(BufferCache, SmallBuffersAreNotKept) {
  void *a = buffer_alloc(1000);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a) % 64, 0u);
  buffer_free(a);
  EXPECT_EQ(buffer_cache_stats().kept_buffers, 0u);
  void *z = buffer_alloc(0); // never null
  EXPECT_NE(z, nullptr);
  buffer_free(z);
  buffer_free(nullptr);
}

TEST_F(BufferCache, KeepsAtMostTheLimitOldestGoingFirst) {
  set_buffer_cache_limit(5 * kMiB);
  void *a = buffer_alloc(2 * kMiB), *b = buffer_alloc(2 * kMiB), *c = buffer_alloc(2 * kMiB);
  buffer_free(a);
  buffer_free(b);
  buffer_free(c); // 6 MiB > 5: a goes
  BufferCacheStats s = buffer_cache_stats();
  EXPECT_EQ(s.kept_buffers, 2u);
  EXPECT_EQ(s.kept_bytes, 4 * kMiB);
  void *big = buffer_alloc(6 * kMiB); // over the limit: never kept
  buffer_free(big);
  EXPECT_EQ(buffer_cache_stats().kept_bytes, 4 * kMiB);
  set_buffer_cache_limit(2 * kMiB); // b goes
  EXPECT_EQ(buffer_cache_stats().kept_buffers, 1u);
  set_buffer_cache_limit(0);
  EXPECT_EQ(buffer_cache_stats().kept_buffers, 0u);
  void *d = buffer_alloc(2 * kMiB);
  buffer_free(d);
  EXPECT_EQ(buffer_cache_stats().kept_buffers, 0u);
}

TEST_F(BufferCache, CompiledKernelsTakeTheirBuffersHere) {
  // y = p . gelu(x . w): gelu's result is the kernel's own buffer (M x K floats, 512 KiB),
  // the output a small tensor, never kept.
  Dim M("M"), K("K", 256), P("P", 1);
  Graph g("scratch");
  Value x = g.input("x", DType::F32, {M, K});
  Value p = g.input("p", DType::F32, {P, M});
  Value w = g.param("w", DType::F32, {K, K});
  g.output("y", matmul(p, gelu(matmul(x, w))));
  // One thread: with two, the GEMM's tasks may or may not hold their packed rows of A at
  // the same time, so that a call may need one buffer more than the call before.
  CompileOptions one;
  one.schedule.threads = 1;
  Kernel k = compile(g, Target::host(), one);
  TensorMap in = random_inputs(g, {{"M", 512}}, 3);
  Tensor first = k.run(in).at("y"); // frees its buffers into the cache
  BufferCacheStats before = buffer_cache_stats();
  Tensor again = k.run(in).at("y");
  BufferCacheStats after = buffer_cache_stats();
  EXPECT_GE(after.hits, before.hits + 1) << "the kernel's buffers are not the cache's";
  EXPECT_EQ(after.misses, before.misses) << "the second call allocated fresh memory";
  EXPECT_EQ(std::memcmp(first.data(), again.data(), first.nbytes()), 0);
}

TEST_F(BufferCache, TensorsTakeTheirStorageHere) {
  const void *first = nullptr;
  {
    Tensor a = Tensor::uninitialized(DType::F32, {512, 256});
    first = a.data();
  }
  Tensor b(DType::F32, {512, 256}); // zeroed, in the same buffer
  EXPECT_EQ(b.data(), first);
  EXPECT_EQ(b.data_as<float>()[512 * 256 - 1], 0.0f);
}

} // namespace
} // namespace qkv
