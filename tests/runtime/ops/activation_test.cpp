// gelu, silu, elu, softcap, softplus, sigmoid, relu, swiglu and geglu.
#include "test_util.hpp"

namespace qkv {
namespace {

using test::expect_values;
using test::run1;

Tensor unary(Value (*build)(Value), const std::vector<double> &xs) {
  Graph g("activation");
  Value x = g.input("x", DType::F64, {g.dim("N")});
  g.output("y", build(x));
  return run1(g, {{"x", Tensor::from_f64({static_cast<std::int64_t>(xs.size())}, xs)}});
}

TEST(Gelu, ExactUsesErf) {
  // 0.5 x (1 + erf(x / sqrt 2)); erf(1/sqrt 2) = 0.6826894921370859 (the 1-sigma mass)
  Tensor y = unary([](Value x) { return gelu(x); }, {0, 1, -1});
  expect_values(y, {3}, {0, 0.5 * 1.6826894921370859, -0.5 * (1 - 0.6826894921370859)}, 1e-15);
}

TEST(Gelu, TanhApproximation) {
  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) at x = 1: sqrt(2/pi) * 1.044715 =
  // 0.8335565596, tanh of it 0.6823839812 -> 0.8411919906. At -1 it is -(1 - that) =
  // -0.1588080094.
  Tensor y = unary([](Value x) { return gelu(x, true); }, {0, 1, -1});
  expect_values(y, {3}, {0, 0.8411919906, -0.1588080094}, 1e-10);
}

TEST(Silu, TimesSigmoid) {
  // sigmoid(1) = 1 / (1 + e^-1) = 0.7310585786300049; silu(-1) = -(1 - sigmoid(1)).
  // Very negative x gives -0, not NaN (e^1000 is inf).
  Tensor y = unary(silu, {0, 1, -1, -1000});
  expect_values(y, {4}, {0, 0.7310585786300049, -0.2689414213699951, 0}, 1e-15);
}

TEST(Elu, AlphaScalesTheNegativeSide) {
  // x > 0: x; else alpha (e^x - 1); e^-1 - 1 = -0.6321205588285577
  expect_values(unary([](Value x) { return elu(x); }, {2, 0, -1}), {3}, {2, 0, -0.6321205588285577},
                1e-15);
  expect_values(unary([](Value x) { return elu(x, 2.0); }, {-1}), {1}, {-1.2642411176571153},
                1e-15);
}

TEST(Softcap, CapTimesTanhOfXOverCap) {
  // 30 tanh(x / 30): about x near 0 (30 tanh(1/30) = 0.99962979...), 30 tanh(1) at 30 with
  // tanh(1) = 0.7615941559557649, 30 far out; odd.
  Tensor y = unary([](Value x) { return softcap(x, 30.0); }, {0, 1, 30, -30, 1e6});
  expect_values(y, {5},
                {0, 0.9996297941646859, 30 * 0.7615941559557649, -30 * 0.7615941559557649, 30},
                1e-13);
}

TEST(Softcap, CapMustBeFiniteAndAboveZero) {
  Graph g("softcap");
  Value logits = g.input("logits", DType::F32, {g.dim("N")});
  // The value is spelled as Graph::str spells attributes: shortest round trip, ".0" after
  // a whole number.
  const std::pair<double, const char *> refused[] = {
      {0.0, "0.0"}, {-1.0, "-1.0"}, {-2.5e-300, "-2.5e-300"}, {double(INFINITY), "inf"},
      {std::nan(""), "nan"}};
  for (const auto &[cap, spelled] : refused) {
    try {
      softcap(logits, cap);
      ADD_FAILURE() << "softcap with cap " << cap << " was accepted";
    } catch (const Error &e) {
      EXPECT_EQ(std::string(e.what()),
                std::string("softcap of 'logits': cap must be a finite number above 0, not ") +
                    spelled);
    }
  }
  // elu's alpha may be 0 or negative, not NaN or infinite.
  EXPECT_NO_THROW(elu(logits, 0.0));
  EXPECT_NO_THROW(elu(logits, -0.5));
  EXPECT_THROW(
      {
        try {
          elu(logits, INFINITY);
        } catch (const Error &e) {
          EXPECT_STREQ(e.what(), "elu of 'logits': alpha must be a finite number, not inf");
          throw;
        }
      },
      Error);
}

TEST(Softplus, LogOfOnePlusExp) {
  // log 2; log(1 + e) = 1.3132616875182228; log(1 + 1/e) = that - 1. Large x gives x (e^1000
  // would overflow), very negative x gives e^x's digits, not 0.
  Tensor y = unary(softplus, {0, 1, -1, 1000, -40});
  expect_values(y, {5}, {0.6931471805599453, 1.3132616875182228, 0.31326168751822286, 1000, 0},
                1e-15);
  EXPECT_NEAR(y.get(4) / std::exp(-40.0), 1.0, 1e-15);
}

TEST(Sigmoid, OneOverOnePlusExp) {
  // 1/2; 1 / (1 + 1/e) = 0.7310585786300049 and 1 minus that; very negative x gives e^x's
  // digits, and below -709 (e^-x overflows) 0, never NaN.
  Tensor y = unary(sigmoid, {0, 1, -1, 40, -40, -1000});
  expect_values(y, {6}, {0.5, 0.7310585786300049, 0.2689414213699951, 1, 0, 0}, 1e-15);
  EXPECT_NEAR(y.get(4) / std::exp(-40.0), 1.0, 1e-15);
  EXPECT_EQ(y.get(5), 0.0);
}

TEST(Relu, MaxWithZeroKeepsNaN) {
  Tensor y = unary(relu, {2.5, 0, -3, -0.0, 1e300, -INFINITY, std::nan("")});
  ASSERT_EQ(y.numel(), 7);
  std::vector<double> want = {2.5, 0, 0, 0, 1e300, 0};
  for (std::int64_t i = 0; i < 6; ++i)
    EXPECT_EQ(y.get(i), want[static_cast<std::size_t>(i)]) << "at " << i;
  EXPECT_TRUE(std::isnan(y.get(6))); // as arith.maximumf: a NaN input gives NaN, not 0
}

TEST(Swiglu, SiluOfGateTimesUp) {
  Graph g("swiglu");
  Dim N = g.dim("N");
  Value gate = g.input("gate", DType::F64, {N}), up = g.input("up", DType::F64, {N});
  g.output("y", swiglu(gate, up));
  // silu(1) * 2, silu(0) * 5, silu(-1) * -1
  Tensor y = run1(
      g, {{"gate", Tensor::from_f64({3}, {1, 0, -1})}, {"up", Tensor::from_f64({3}, {2, 5, -1})}});
  expect_values(y, {3}, {2 * 0.7310585786300049, 0, 0.2689414213699951}, 1e-15);
}

TEST(Geglu, ExactGeluOfGateTimesUp) {
  Graph g("geglu");
  Dim N = g.dim("N");
  Value gate = g.input("gate", DType::F64, {N}), up = g.input("up", DType::F64, {N});
  g.output("y", geglu(gate, up));
  // gelu(1) * 2, gelu(0) * 5, gelu(-1) * -1, gelu(-3) * 1: 0.5 x (1 + erf(x / sqrt 2))
  Tensor y = run1(g, {{"gate", Tensor::from_f64({4}, {1, 0, -1, -3})},
                      {"up", Tensor::from_f64({4}, {2, 5, -1, 1})}});
  expect_values(y, {4}, {2 * 0.8413447460685429, 0, 0.15865525393145707, -0.00404969409489031},
                1e-13);
}

} // namespace
} // namespace qkv
