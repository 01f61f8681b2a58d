// The worked example of the first seed document ("I love GPU programming", d_model 6; see
// examples/README.md),
// checked through the interpreter. Only the numbers the seed derives by hand are checked:
// its later matrices (the rest of Q, K, V, A) are illustrative, not computed.
#include "test_util.hpp"

namespace qkv {
namespace {

using test::expect_values;
using test::run1;

// X: 4 tokens x 6 features (seed, "起点：输入矩阵 X").
const std::vector<double> kX = {1.0, 0.2, 0.3, 0.5, 0.1, 0.4,  // I
                                0.4, 0.9, 0.1, 0.2, 0.3, 0.5,  // love
                                0.3, 0.1, 0.8, 0.6, 0.2, 0.1,  // GPU
                                0.2, 0.5, 0.7, 0.9, 0.4, 0.3}; // programming
// W^Q: 6 x 6.
const std::vector<double> kWq = {0.1, 0.2, 0.0, 0.3, 0.1, 0.2, //
                                 0.0, 0.1, 0.4, 0.2, 0.3, 0.0, //
                                 0.3, 0.0, 0.1, 0.1, 0.2, 0.3, //
                                 0.2, 0.3, 0.2, 0.0, 0.1, 0.2, //
                                 0.1, 0.2, 0.3, 0.1, 0.0, 0.2, //
                                 0.2, 0.1, 0.0, 0.3, 0.2, 0.1};

TEST(Seed, QueryProjectionFirstElement) {
  // Q = X W^Q; Q[I][0] = 1.0*0.1 + 0.2*0.0 + 0.3*0.3 + 0.5*0.2 + 0.1*0.1 + 0.4*0.2 = 0.38
  Graph g("seed");
  Dim L = g.dim("L"), D = g.dim("d_model", 6);
  Value x = g.input("X", DType::F64, {L, D});
  Value wq = g.param("WQ", DType::F64, {D, D});
  g.output("Q", linear(x, wq));
  Tensor q = run1(g, {{"X", Tensor::from_f64({4, 6}, kX)}, {"WQ", Tensor::from_f64({6, 6}, kWq)}});
  EXPECT_NEAR(q.at({0, 0}), 0.38, 1e-12);
}

TEST(Seed, SoftmaxOfTheLoveRow) {
  // softmax([0.318, 0.294, 0.306, 0.367]): e^x = 1.374, 1.342, 1.358, 1.443, sum 5.517
  // -> [0.249, 0.243, 0.246, 0.262] to 3 decimals.
  Graph g("seed");
  Value s = g.input("scaled", DType::F64, {g.dim("L"), g.dim("S")});
  g.output("A", softmax(s));
  Tensor a = run1(g, {{"scaled", Tensor::from_f64({1, 4}, {0.318, 0.294, 0.306, 0.367})}});
  expect_values(a, {1, 4}, {0.249, 0.243, 0.246, 0.262}, 0.0005);
}

TEST(Seed, WeightedSumOfValues) {
  // out_love = 0.25 v_I + 0.15 v_love + 0.10 v_GPU + 0.50 v_prog
  //          = [0.380, 0.4095, 0.360, 0.381, 0.411, 0.3485]
  Graph g("seed");
  Dim L = g.dim("L"), D = g.dim("d_model", 6);
  Value a = g.input("A", DType::F64, {L, L});
  Value v = g.input("V", DType::F64, {L, D});
  g.output("out", matmul(a, v));
  Tensor out = run1(g, {{"A", Tensor::from_f64({4, 4}, {0.60, 0.15, 0.10, 0.15, //
                                                        0.25, 0.15, 0.10, 0.50, //
                                                        0.10, 0.10, 0.30, 0.50, //
                                                        0.10, 0.20, 0.55, 0.15})},
                        {"V", Tensor::from_f64({4, 6}, {0.45, 0.30, 0.40, 0.29, 0.38, 0.25, //
                                                        0.41, 0.25, 0.46, 0.23, 0.32, 0.44, //
                                                        0.31, 0.52, 0.26, 0.39, 0.48, 0.30, //
                                                        0.35, 0.49, 0.33, 0.47, 0.44, 0.38})}});
  std::vector<double> want = {0.380, 0.4095, 0.360, 0.381, 0.411, 0.3485};
  for (int j = 0; j < 6; ++j)
    EXPECT_NEAR(out.at({1, j}), want[j], 1e-12) << "column " << j;
}

} // namespace
} // namespace qkv
