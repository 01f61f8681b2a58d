// split_heads: (..., L, H*Dh) -> (..., H, L, Dh), feature f = h*Dh + d; merge_heads is
// its inverse.
#include "test_util.hpp"

namespace qkv {
namespace {

using test::expect_values;
using test::run1;

TEST(SplitHeads, HeadIsABlockOfConsecutiveFeatures) {
  Graph g("split_heads");
  Value x = g.input("x", DType::F64, {g.dim("L"), g.dim("D", 4)});
  g.output("heads", split_heads(x, g.dim("H", 2), g.dim("Dh", 2)));
  // x = [[0, 1, 2, 3], [4, 5, 6, 7]]: head 0 is columns 0-1, head 1 columns 2-3.
  Tensor y = run1(g, {{"x", Tensor::from_f64({2, 4}, {0, 1, 2, 3, 4, 5, 6, 7})}});
  expect_values(y, {2, 2, 2}, {0, 1, 4, 5, /* head 1 */ 2, 3, 6, 7});
}

TEST(SplitHeads, KeepsLeadingBatchDims) {
  Graph g("split_heads");
  Value x = g.input("x", DType::F64, {g.dim("B"), g.dim("L", 1), g.dim("D", 6)});
  g.output("heads", split_heads(x, g.dim("H", 3), g.dim("Dh", 2)));
  // (B=2, L=1, 6) -> (2, 3, 1, 2): each batch row splits into pairs.
  std::vector<double> v = {0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15};
  Tensor y = run1(g, {{"x", Tensor::from_f64({2, 1, 6}, v)}});
  expect_values(y, {2, 3, 1, 2}, v);
}

TEST(SplitHeads, DerivedHeadDimIsBoundFromTheInput) {
  // x ends in the product dim H*Dh; Dh is dynamic and bound as 6 / 3 = 2.
  Graph g("split_heads");
  Dim H = g.dim("H", 3), Dh = g.dim("Dh");
  Value x = g.input("x", DType::F64, {g.dim("L"), product(H, Dh)});
  g.output("heads", split_heads(x, H, Dh));
  Tensor y = run1(g, {{"x", Tensor::from_f64({1, 6}, {0, 1, 2, 3, 4, 5})}});
  expect_values(y, {3, 1, 2}, {0, 1, 2, 3, 4, 5});
}

TEST(MergeHeads, PutsHeadsSideBySide) {
  Graph g("merge_heads");
  Value x = g.input("x", DType::F64, {g.dim("H", 2), g.dim("L"), g.dim("Dh", 2)});
  g.output("y", merge_heads(x));
  // x[h][l] = [4h + 2l, 4h + 2l + 1]; row l of y is x[0][l] then x[1][l].
  Tensor y = run1(g, {{"x", Tensor::from_f64({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7})}});
  expect_values(y, {2, 4}, {0, 1, 4, 5, 2, 3, 6, 7});
}

TEST(MergeHeads, InvertsSplitHeads) {
  Graph g("merge_heads");
  Dim D = g.dim("D", 6);
  Value x = g.input("x", DType::F64, {g.dim("B"), g.dim("L"), D});
  g.output("y", merge_heads(split_heads(x, g.dim("H", 3), g.dim("Dh", 2)), D));
  Tensor in = Tensor::random(DType::F64, {2, 5, 6}, 3);
  Tensor y = run1(g, {{"x", in}});
  expect_values(y, {2, 5, 6}, in.values(), 0);
}

} // namespace
} // namespace qkv
