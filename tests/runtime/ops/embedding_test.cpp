// embedding: out[..., :] = table[ids[...], :].
#include "test_util.hpp"

namespace qkv {
namespace {

using test::expect_error;
using test::expect_values;
using test::run1;

// table rows: [0, 1], [10, 11], [20, 21]
const Tensor kTable = Tensor::from_f64({3, 2}, {0, 1, 10, 11, 20, 21});

Graph embed(DType ids_dtype, std::vector<Dim> (*dims)(Graph &)) {
  Graph g("embedding");
  Value ids = g.input("ids", ids_dtype, dims(g));
  Value table = g.param("table", DType::F64, {g.dim("V", 3), g.dim("D", 2)});
  g.output("y", embedding(ids, table));
  return g;
}

std::vector<Dim> one_axis(Graph &g) { return {g.dim("L")}; }
std::vector<Dim> two_axes(Graph &g) { return {g.dim("B"), g.dim("L")}; }

TEST(Embedding, LooksUpRows) {
  Tensor y = run1(embed(DType::I32, one_axis),
                  {{"ids", Tensor::from_i32({4}, {2, 0, 2, 1})}, {"table", kTable}});
  expect_values(y, {4, 2}, {20, 21, 0, 1, 20, 21, 10, 11});
}

TEST(Embedding, I64IdsWithBatch) {
  Tensor y = run1(embed(DType::I64, two_axes),
                  {{"ids", Tensor::from_i64({2, 1}, {1, 2})}, {"table", kTable}});
  expect_values(y, {2, 1, 2}, {10, 11, 20, 21});
}

TEST(Embedding, OutOfRangeIdIsAnError) {
  Graph g = embed(DType::I32, one_axis);
  expect_error(
      [&] {
        run1(g, {{"ids", Tensor::from_i32({3}, {0, 3, 1})}, {"table", kTable}});
      },
      {"embedding", "ids 'ids'[1] = 3", "out of range", "'table'", "vocab size 3"});
  expect_error(
      [&] {
        run1(g, {{"ids", Tensor::from_i32({1}, {-1})}, {"table", kTable}});
      },
      {"ids 'ids'[0] = -1", "vocab size 3"});
}

} // namespace
} // namespace qkv
