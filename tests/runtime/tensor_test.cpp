// Tensor: storage, element access, half-precision rounding, random(), str(), compare().
#include <qkv/runtime/tensor.hpp>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <set>

#include "test_util.hpp"

namespace qkv {
namespace {

using test::expect_error;

constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(Tensor, ZeroFilledAndAligned) {
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32, DType::I64})
    for (Shape s : {Shape{}, Shape{0}, Shape{3}, Shape{5, 7}, Shape{2, 0, 3}}) {
      Tensor x(t, s);
      EXPECT_FALSE(x.empty());
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(x.data()) % 64, 0u) << x.type_str();
      EXPECT_EQ(x.nbytes(), static_cast<std::size_t>(x.numel()) * dtype_size(t));
      for (std::int64_t i = 0; i < x.numel(); ++i)
        EXPECT_EQ(x.get(i), 0.0);
    }
  EXPECT_TRUE(Tensor().empty());
  EXPECT_EQ(Tensor(DType::F32, {}).numel(), 1); // a scalar has one element
}

TEST(Tensor, CopiesShareStorageClonesDoNot) {
  Tensor a = Tensor::from_f32({2}, {1, 2});
  Tensor b = a;
  Tensor c = a.clone();
  a.set(0, 7);
  EXPECT_EQ(b.get(0), 7);
  EXPECT_EQ(c.get(0), 1);
  EXPECT_NE(c.data(), a.data());
}

TEST(Tensor, StridesAndAt) {
  Tensor x = Tensor::from_i64({2, 3, 4}, std::vector<std::int64_t>(24));
  EXPECT_EQ(x.strides(), (Shape{12, 4, 1}));
  Tensor y = Tensor::from_f64({2, 3}, {0, 1, 2, 3, 4, 5});
  EXPECT_EQ(y.at({1, 2}), 5);
  EXPECT_EQ(y.at(std::vector<std::int64_t>{1, 0}), 3);
  expect_error([&] { y.at({2, 0}); }, {"f64[2, 3]", "[2, 0]", "out of bounds on axis 0"});
  expect_error([&] { y.at({1}); }, {"f64[2, 3]", "1 indices", "2 dims"});
}

TEST(Tensor, FactoryChecksCount) {
  expect_error(
      [] {
        Tensor::from_f32({2, 3}, {1, 2});
      },
      {"from_f32", "[2, 3]", "needs 6", "got 2"});
  expect_error([] { Tensor::from_values(DType::I32, {2}, {1}); }, {"from_values", "needs 2"});
  expect_error([] { Tensor(DType::F32, {2, -1}); }, {"negative extent", "[2, -1]"});
  // 2^32 * 2^32 wraps to 0 in int64 arithmetic; it must not pass for an empty tensor.
  expect_error([] { Tensor(DType::F32, {1ll << 32, 1ll << 32}); }, {"more elements than fit"});
  EXPECT_EQ(Tensor(DType::F32, {1ll << 62, 1ll << 62, 0}).numel(), 0);
}

/// Sets QKV_MEMORY_LIMIT for one scope.
struct MemoryLimit {
  explicit MemoryLimit(const char *v) { setenv("QKV_MEMORY_LIMIT", v, 1); }
  ~MemoryLimit() { unsetenv("QKV_MEMORY_LIMIT"); }
};

TEST(Tensor, MemoryLimitIsAnErrorBeforeAllocating) {
  // Over the memory available: an error naming the type and size, not std::bad_alloc.
  expect_error([] { Tensor(DType::F32, {100000, 100000, 64}); },
               {"tensor f32[100000, 100000, 64] needs 2.6 TB", "more than the memory limit",
                "QKV_MEMORY_LIMIT"});
  expect_error([] { Tensor::uninitialized(DType::F64, {1ll << 40}); }, {"f64[", "8.8 TB"});
  {
    MemoryLimit limit("1M");
    EXPECT_NO_THROW(Tensor(DType::F32, {1024, 256})); // exactly 1 MiB
    expect_error([] { Tensor(DType::F32, {1024, 257}); },
                 {"f32[1024, 257] needs 1.1 MB", "memory limit of 1.0 MB (QKV_MEMORY_LIMIT)"});
    expect_error([] { Tensor::random(DType::F32, {1024, 257}, 1); }, {"f32[1024, 257]"});
  }
  for (const char *bad : {"abc", "-5", "0", "12Q", "3GBx", ""}) {
    MemoryLimit limit(bad);
    expect_error([] { Tensor(DType::F32, {4}); },
                 {"QKV_MEMORY_LIMIT: expected a positive number of bytes", "got '"});
  }
  {
    MemoryLimit limit("2GB");
    EXPECT_EQ(memory_limit(), std::size_t{2} << 30);
  }
  EXPECT_GT(memory_limit(), std::size_t{64} << 20); // the machine's available memory
}

TEST(Tensor, DataAsChecksDtype) {
  Tensor x = Tensor::from_f32({2}, {1.5f, 2.5f});
  EXPECT_EQ(x.data_as<float>()[1], 2.5f);
  expect_error([&] { x.data_as<double>(); }, {"f32[2]", "8 bytes", "dtype f32"});
  Tensor h(DType::BF16, {1});
  EXPECT_NO_THROW(h.data_as<std::uint16_t>());
  expect_error([] { Tensor().data_as<float>(); }, {"empty tensor"});
  expect_error([] { Tensor().to(DType::F64); }, {"empty tensor"});
}

TEST(Tensor, IntegerConversionRoundsAndChecksRange) {
  Tensor t = Tensor::from_values(DType::I32, {4}, {2.5, -2.5, 1.4, -0.6});
  EXPECT_EQ(t.values(), (std::vector<double>{3, -3, 1, -1})); // halves away from zero
  expect_error([] { Tensor::from_values(DType::I32, {1}, {3e9}); },
               {"3e+09", "does not fit in i32"});
  expect_error([] { Tensor::from_values(DType::I64, {1}, {NAN}); }, {"nan", "i64"});
  Tensor big = Tensor::from_values(DType::I64, {1}, {0x1p62});
  EXPECT_EQ(big.data_as<std::int64_t>()[0], std::int64_t{1} << 62);
}

// ---- f16 ---------------------------------------------------------------------------------
// Bit patterns: sign(1) exponent(5, bias 15) mantissa(10). 1.0 = 0x3C00; one unit in the
// last place of 1.0 is 2^-10; the smallest subnormal is 2^-24 (0x0001).

TEST(Half, F16RoundsToNearestEven) {
  EXPECT_EQ(float_to_f16(1.0f), 0x3C00);
  EXPECT_EQ(float_to_f16(-2.0f), 0xC000);
  EXPECT_EQ(float_to_f16(0.0f), 0x0000);
  EXPECT_EQ(float_to_f16(-0.0f), 0x8000);
  // 1 + 2^-11 is halfway between 0x3C00 and 0x3C01: ties go to the even mantissa, 0x3C00.
  EXPECT_EQ(float_to_f16(1.0f + 0x1p-11f), 0x3C00);
  // 1 + 3*2^-11 is halfway between 0x3C01 and 0x3C02: even is 0x3C02.
  EXPECT_EQ(float_to_f16(1.0f + 3 * 0x1p-11f), 0x3C02);
  // Just above the halfway point rounds up.
  EXPECT_EQ(float_to_f16(1.0f + 0x1p-11f + 0x1p-20f), 0x3C01);
  // 1/3 = 0x3555 (0.333251953125); 0.1 = 0x2E66.
  EXPECT_EQ(float_to_f16(1.0f / 3.0f), 0x3555);
  EXPECT_EQ(float_to_f16(0.1f), 0x2E66);
}

TEST(Half, F16OverflowAndSubnormals) {
  EXPECT_EQ(float_to_f16(65504.0f), 0x7BFF); // the largest f16
  EXPECT_EQ(float_to_f16(65519.0f), 0x7BFF); // below 65520, halfway to 2^16: stays finite
  EXPECT_EQ(float_to_f16(65520.0f), 0x7C00); // halfway, odd mantissa 0x3FF: rounds to inf
  EXPECT_EQ(float_to_f16(1e6f), 0x7C00);
  EXPECT_EQ(float_to_f16(-INFINITY), 0xFC00);
  EXPECT_EQ(float_to_f16(0x1p-24f), 0x0001);        // the smallest subnormal
  EXPECT_EQ(float_to_f16(0x1p-25f), 0x0000);        // half of it: tie to even, 0
  EXPECT_EQ(float_to_f16(1.5f * 0x1p-25f), 0x0001); // above the tie
  EXPECT_EQ(float_to_f16(3 * 0x1p-25f), 0x0002);    // 1.5 units: tie to even, 2
  EXPECT_EQ(float_to_f16(0x1p-30f), 0x0000);
  // 1023.5 units is halfway between the largest subnormal and 2^-14: even is 0x0400.
  EXPECT_EQ(float_to_f16(1023.5f * 0x1p-24f), 0x0400);
  EXPECT_EQ(float_to_f16(0x1p-14f), 0x0400); // the smallest normal
  EXPECT_EQ(float_to_f16(FLT_TRUE_MIN), 0x0000);
  std::uint16_t nan = float_to_f16(NAN);
  EXPECT_EQ(nan & 0x7C00, 0x7C00);
  EXPECT_NE(nan & 0x03FF, 0);
}

TEST(Half, F16ToFloat) {
  EXPECT_EQ(f16_to_float(0x3555), 0.333251953125f);
  EXPECT_EQ(f16_to_float(0x0001), 0x1p-24f);
  EXPECT_EQ(f16_to_float(0x03FF), 1023 * 0x1p-24f);
  EXPECT_EQ(f16_to_float(0x7BFF), 65504.0f);
  EXPECT_EQ(f16_to_float(0xFC00), -INFINITY);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(f16_to_float(0x8000)), 0x80000000u);
  EXPECT_TRUE(std::isnan(f16_to_float(0x7E00)));
}

TEST(Half, F16EveryPatternRoundTrips) {
  for (std::uint32_t h = 0; h <= 0xFFFF; ++h) {
    bool is_nan = (h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0;
    if (!is_nan) {
      ASSERT_EQ(float_to_f16(f16_to_float(static_cast<std::uint16_t>(h))), h) << std::hex << h;
    }
  }
}

// bf16 is the top half of a float: 1.0 = 0x3F80, one ulp of 1.0 is 2^-7.
TEST(Half, Bf16RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(float_to_bf16(1.0f + 0x1p-8f), 0x3F80);     // tie, even
  EXPECT_EQ(float_to_bf16(1.0f + 3 * 0x1p-8f), 0x3F82); // tie, even
  EXPECT_EQ(float_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3F81);
  EXPECT_EQ(float_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(float_to_bf16(FLT_MAX), 0x7F80); // above the last bf16 by more than half: inf
  std::uint16_t nan = float_to_bf16(std::bit_cast<float>(0x7F800001u));
  EXPECT_TRUE(std::isnan(bf16_to_float(nan))) << std::hex << nan; // not rounded to inf
  EXPECT_EQ(bf16_to_float(0x3F81), 1.0f + 0x1p-7f);
  for (std::uint32_t h = 0; h <= 0xFFFF; ++h) {
    bool is_nan = (h & 0x7F80) == 0x7F80 && (h & 0x7F) != 0;
    if (!is_nan) {
      ASSERT_EQ(float_to_bf16(bf16_to_float(static_cast<std::uint16_t>(h))), h) << std::hex << h;
    }
  }
}

TEST(Half, TensorsStoreRoundedValues) {
  Tensor h = Tensor::from_values(DType::F16, {4}, {1.0 / 3.0, 1e5, 0x1p-25, -65504});
  EXPECT_EQ(h.values(), (std::vector<double>{0.333251953125, kInf, 0.0, -65504}));
  Tensor b = Tensor::from_f32({2}, {1.0f + 3 * 0x1p-8f, 3.0f}).to(DType::BF16);
  EXPECT_EQ(b.dtype(), DType::BF16);
  EXPECT_EQ(b.values(), (std::vector<double>{1.0 + 0x1p-6, 3.0}));
}

// ---- random --------------------------------------------------------------------------------

TEST(Tensor, RandomIsDeterministicAndInRange) {
  Tensor a = Tensor::random(DType::F32, {100}, 7, -2.0, 3.0);
  Tensor b = Tensor::random(DType::F32, {100}, 7, -2.0, 3.0);
  Tensor c = Tensor::random(DType::F32, {100}, 8, -2.0, 3.0);
  EXPECT_EQ(a.values(), b.values());
  EXPECT_NE(a.values(), c.values());
  for (double v : a.values()) {
    EXPECT_GE(v, -2.0);
    EXPECT_LT(v, 3.0);
  }
}

TEST(Tensor, RandomFollowsTheDocumentedMapping) {
  // std::mt19937_64's sequence is fixed by the C++ standard; the mapping is the top 53
  // bits as a fraction of 2^53. Together they make the values the same everywhere.
  std::mt19937_64 gen(123);
  Tensor t = Tensor::random(DType::F64, {3}, 123, 10.0, 14.0);
  for (int i = 0; i < 3; ++i) {
    double u = static_cast<double>(gen() >> 11) / 9007199254740992.0;
    EXPECT_EQ(t.get(i), 10.0 + 4.0 * u);
  }
}

TEST(Tensor, RandomIntegersCoverTheRange) {
  Tensor t = Tensor::random(DType::I32, {400}, 1, -2, 3); // -2, -1, 0, 1, 2
  std::vector<double> v = t.values();
  std::set<double> seen(v.begin(), v.end());
  EXPECT_EQ(seen, (std::set<double>{-2, -1, 0, 1, 2}));
  expect_error([] { Tensor::random(DType::F32, {1}, 0, 1.0, 1.0); }, {"lo < hi"});
}

// ---- printing -----------------------------------------------------------------------------

TEST(Tensor, StrPrintsNestedRows) {
  Tensor m = Tensor::from_f32({2, 3}, {1, 2, 3, 4, 5, 6.375f});
  EXPECT_EQ(m.str(), "[[1.0000, 2.0000, 3.0000],\n [4.0000, 5.0000, 6.3750]]");
  EXPECT_EQ(m.str(1), "[[1.0, 2.0, 3.0],\n [4.0, 5.0, 6.4]]");
  EXPECT_EQ(m.type_str(), "f32[2, 3]");
  Tensor c = Tensor::from_i32({2, 1, 2}, {1, -2, 3, 4});
  EXPECT_EQ(c.str(), "[[[1, -2]],\n\n [[3, 4]]]");
  EXPECT_EQ(Tensor::from_f64({}, {0.5}).str(2), "0.50");
  EXPECT_EQ(Tensor(DType::F32, {0}).str(), "[]");
  EXPECT_EQ(Tensor().str(), "<empty tensor>");
}

TEST(Tensor, StrElidesLargeTensors) {
  std::vector<std::int64_t> v(2000);
  for (int i = 0; i < 2000; ++i)
    v[i] = i;
  EXPECT_EQ(Tensor::from_i64({2000}, v).str(), "[0, 1, 2, ..., 1997, 1998, 1999]");
}

// ---- compare / assert_close ------------------------------------------------------------------

TEST(Compare, EqualTensorsPass) {
  Tensor a = Tensor::from_f32({2}, {1, 2});
  Comparison c = compare(a, a.to(DType::F64), 0, 0);
  EXPECT_TRUE(c.ok);
  EXPECT_EQ(c.mismatches, 0);
  EXPECT_EQ(c.worst, -1);
  EXPECT_TRUE(c.message.empty());
}

TEST(Compare, NamesTheWorstElement) {
  Tensor want = Tensor::from_f64({2, 3}, {0, 1, 2, 3, 4, 0.5});
  Tensor got = Tensor::from_f64({2, 3}, {0, 1.01, 2, 3, 4, 0.75});
  // |diff| 0.01 at [0, 1] and 0.25 at [1, 2]; with atol 0.001, rtol 0 both fail and
  // [1, 2] misses by more.
  Comparison c = compare(got, want, 1e-3, 0);
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.mismatches, 2);
  EXPECT_EQ(c.worst, 5);
  EXPECT_DOUBLE_EQ(c.max_abs_err, 0.25);
  EXPECT_DOUBLE_EQ(c.max_rel_err, 0.5); // 0.25 / 0.5
  for (const char *frag : {"2 of 6 elements differ", "worst at [1, 2]", "got 0.75", "want 0.5"})
    EXPECT_NE(c.message.find(frag), std::string::npos) << c.message;
}

TEST(Compare, ToleranceIsAtolPlusRtolTimesWant) {
  Tensor want = Tensor::from_f64({1}, {100});
  // allowed = 0.5 + 0.01 * 100 = 1.5
  EXPECT_TRUE(compare(Tensor::from_f64({1}, {101.5}), want, 0.5, 0.01).ok);
  EXPECT_FALSE(compare(Tensor::from_f64({1}, {101.51}), want, 0.5, 0.01).ok);
}

TEST(Compare, NaNAndInfinity) {
  Tensor nan = Tensor::from_f64({1}, {NAN}), one = Tensor::from_f64({1}, {1});
  Tensor inf = Tensor::from_f64({1}, {kInf}), ninf = Tensor::from_f64({1}, {-kInf});
  // NaN vs NaN is a mismatch: a NaN reference proves nothing about the kernel.
  EXPECT_FALSE(compare(nan, nan, 1e9, 1e9).ok);
  EXPECT_EQ(compare(nan, nan, 0, 0).mismatches, 1);
  EXPECT_NE(compare(nan, nan, 0, 0).message.find("got nan, want nan"), std::string::npos);
  EXPECT_FALSE(compare(nan, one, 1e9, 1e9).ok);
  EXPECT_FALSE(compare(one, nan, 1e9, 1e9).ok);
  EXPECT_TRUE(compare(inf, inf, 0, 0).ok);
  EXPECT_FALSE(compare(inf, ninf, 1e9, 1e9).ok);
  EXPECT_FALSE(compare(Tensor::from_f64({1}, {1e300}), inf, 1e9, 1e9).ok);
  Comparison c = compare(nan, one, 0, 0);
  EXPECT_NE(c.message.find("got nan, want 1"), std::string::npos) << c.message;
}

TEST(Compare, ShapesMustMatch) {
  Comparison c = compare(Tensor(DType::F32, {2, 3}), Tensor(DType::F64, {3, 2}), 1, 1);
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.message, "shapes differ: got f32[2, 3], want f64[3, 2]");
}

TEST(Compare, AssertCloseThrowsWithTheMessage) {
  Tensor want = Tensor::from_f64({2}, {1, 2});
  EXPECT_NO_THROW(assert_close(Tensor::from_f32({2}, {1, 2.00001f}), want, 1e-4, 0));
  expect_error(
      [&] {
        assert_close(Tensor::from_f64({2}, {1, 3}), want, 1e-5, 1e-4, "output 'y'");
      },
      {"output 'y'", "worst at [1]", "got 3", "want 2"});
}

TEST(Tensor, Signature) {
  TensorMap m{{"x", Tensor(DType::F16, {2, 3})}, {"ids", Tensor(DType::I64, {4})}};
  auto s = signature(m);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s["x"], (std::pair<DType, Shape>{DType::F16, {2, 3}}));
  EXPECT_EQ(s["ids"], (std::pair<DType, Shape>{DType::I64, {4}}));
}

} // namespace
} // namespace qkv
