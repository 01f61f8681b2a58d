// matmul: (..., M, K) x (..., K, N), batch dims equal or one side 2-D.
#include "test_util.hpp"

namespace qkv {
namespace {

using test::expect_values;
using test::run1;

TEST(MatMul, TwoByTwo) {
  Graph g("matmul");
  Dim M = g.dim("M", 2), K = g.dim("K", 2), N = g.dim("N", 2);
  Value a = g.input("a", DType::F64, {M, K}), b = g.input("b", DType::F64, {K, N});
  g.output("c", matmul(a, b));
  // [[1,2],[3,4]] . [[5,6],[7,8]] = [[1*5+2*7, 1*6+2*8], [3*5+4*7, 3*6+4*8]]
  Tensor c = run1(g, {{"a", Tensor::from_f64({2, 2}, {1, 2, 3, 4})},
                      {"b", Tensor::from_f64({2, 2}, {5, 6, 7, 8})}});
  expect_values(c, {2, 2}, {19, 22, 43, 50});
}

TEST(MatMul, NonSquareWithDynamicDims) {
  Graph g("matmul");
  Dim M = g.dim("M"), K = g.dim("K"), N = g.dim("N");
  Value a = g.input("a", DType::F32, {M, K}), b = g.input("b", DType::F32, {K, N});
  g.output("c", matmul(a, b));
  // (1, 3) . (3, 2): [1, 2, 3] . [[1, 0], [0, 1], [1, 1]] = [1+3, 2+3]
  Tensor c = run1(g, {{"a", Tensor::from_f32({1, 3}, {1, 2, 3})},
                      {"b", Tensor::from_f32({3, 2}, {1, 0, 0, 1, 1, 1})}});
  expect_values(c, {1, 2}, {4, 5});
}

TEST(MatMul, RightSide2DBroadcastsOverBatch) {
  Graph g("matmul");
  Dim B = g.dim("B"), M = g.dim("M", 1), K = g.dim("K", 2), N = g.dim("N", 2);
  Value a = g.input("a", DType::F64, {B, M, K}), b = g.input("b", DType::F64, {K, N});
  g.output("c", matmul(a, b));
  // b = [[1, 0], [1, 1]]: [1, 2] . b = [3, 2]; [3, 4] . b = [7, 4].
  Tensor c = run1(g, {{"a", Tensor::from_f64({2, 1, 2}, {1, 2, 3, 4})},
                      {"b", Tensor::from_f64({2, 2}, {1, 0, 1, 1})}});
  expect_values(c, {2, 1, 2}, {3, 2, 7, 4});
}

TEST(MatMul, LeftSide2DBroadcastsOverBatch) {
  Graph g("matmul");
  Dim B = g.dim("B"), M = g.dim("M", 1), K = g.dim("K", 2), N = g.dim("N", 2);
  Value a = g.input("a", DType::F64, {M, K}), b = g.input("b", DType::F64, {B, K, N});
  g.output("c", matmul(a, b));
  // [1, 1] . b sums b's rows: [1+3, 2+4] = [4, 6]; [5+7, 6+8] = [12, 14].
  Tensor c = run1(g, {{"a", Tensor::from_f64({1, 2}, {1, 1})},
                      {"b", Tensor::from_f64({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8})}});
  expect_values(c, {2, 1, 2}, {4, 6, 12, 14});
}

TEST(MatMul, EqualBatchDimsPairUp) {
  Graph g("matmul");
  Dim B = g.dim("B"), H = g.dim("H", 2), L = g.dim("L", 1), S = g.dim("S", 2), D = g.dim("D", 1);
  Value q = g.input("q", DType::F64, {B, H, L, D}), k = g.input("k", DType::F64, {B, H, S, D});
  g.output("scores", matmul(q, transpose(k))); // (B, H, L, S)
  // Batch (b, h) multiplies q[b, h] (1x1) by k[b, h]^T (1x2): q * [k0, k1].
  // q = [1, 2 | 3, 4] over (b, h); k = [[1, 2] | [3, 4] | [5, 6] | [7, 8]].
  Tensor s = run1(g, {{"q", Tensor::from_f64({2, 2, 1, 1}, {1, 2, 3, 4})},
                      {"k", Tensor::from_f64({2, 2, 2, 1}, {1, 2, 3, 4, 5, 6, 7, 8})}});
  expect_values(s, {2, 2, 1, 2}, {1, 2, 6, 8, 15, 18, 28, 32});
}

} // namespace
} // namespace qkv
