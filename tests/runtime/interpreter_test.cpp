// The interpreter as a whole: outputs, run_all, input dtypes, binding errors, mod errors.
#include <cmath>
#include <tuple>

#include <qkv/runtime/kernel.hpp>

#include "test_util.hpp"

namespace qkv {
namespace {

using test::expect_error;
using test::expect_values;
using test::run1;

// x (L, D=3) . w (D, E=2): the graph most binding tests use.
struct Proj {
  Graph g{"proj"};
  Dim L = g.dim("L"), D = g.dim("D", 3), E = g.dim("E", 2);
  Value x = g.input("x", DType::F32, {L, D});
  Value w = g.param("w", DType::F32, {D, E});
  Proj() { g.output("y", linear(x, w)); }
  TensorMap good() const {
    return {{"x", Tensor::from_f32({2, 3}, {1, 2, 3, 4, 5, 6})},
            {"w", Tensor::from_f32({3, 2}, {1, 0, 0, 1, 1, 1})}};
  }
};

TEST(Interpreter, OutputsAreF64AndNamed) {
  Proj p;
  p.g.output("y_twice", scale(p.g.value(p.g.outputs()[0].second), 2.0));
  TensorMap out = reference::run(p.g, p.good());
  ASSERT_EQ(out.size(), 2u);
  // rows [1,2,3], [4,5,6] times w: [x0 + x2, x1 + x2]
  expect_values(out.at("y"), {2, 2}, {4, 5, 10, 11});
  expect_values(out.at("y_twice"), {2, 2}, {8, 10, 20, 22});
}

// Buffers over the memory limit are errors naming what they were for, not std::bad_alloc.
TEST(Interpreter, BuffersOverTheMemoryLimitNameTheirNode) {
  Graph g("scores");
  Dim L = g.dim("L"), D = g.dim("D", 4);
  Value q = g.input("q", DType::F32, {L, D});
  g.output("s", matmul(q, transpose(q)));
  expect_error([&] { random_inputs(g, {{"L", 1ll << 40}}, 1); },
               {"random_inputs: 'q' of graph 'scores'", "f32[1099511627776, 4] needs 17.6 TB",
                "memory limit"});
  TensorMap in = random_inputs(g, {{"L", 20000}}, 1); // 320 KB; the scores take 3.2 GB in f64
  setenv("QKV_MEMORY_LIMIT", "1G", 1);
  expect_error([&] { reference::run(g, in); },
               {"interpreter: the result of matmul", "of graph 'scores'",
                "f64[20000, 20000] needs 3.2 GB", "memory limit of 1.1 GB (QKV_MEMORY_LIMIT)"});
  unsetenv("QKV_MEMORY_LIMIT");
}

TEST(Interpreter, RunAllReturnsEveryNode) {
  Proj p;
  std::vector<Tensor> all = reference::run_all(p.g, p.good());
  ASSERT_EQ(all.size(), p.g.nodes().size());
  expect_values(all[p.x.id()], {2, 3}, {1, 2, 3, 4, 5, 6}); // inputs too, as f64
  expect_values(all[p.g.outputs()[0].second], {2, 2}, {4, 5, 10, 11});
}

TEST(Interpreter, ReadsInputsOfEveryDtype) {
  for (DType t : {DType::F16, DType::BF16, DType::F32, DType::F64}) {
    Graph g("dtypes");
    Value x = g.input("x", t, {g.dim("N")});
    g.output("y", scale(x, 1.0));
    // 1/3 rounded to the input's dtype comes through exactly.
    Tensor in = Tensor::from_values(t, {2}, {1.0 / 3, -2});
    expect_values(run1(g, {{"x", in}}), {2}, {in.get(0), -2}, 0);
  }
}

// An f16 or bf16 node's result is rounded to its dtype, and the next node reads the
// rounded value: (1 + 3 * 2^-9) - 1 in bf16 (7 fraction bits) is 2^-7, since the sum rounds
// up to 1 + 2^-7 first; f16 (10 fraction bits) and f32 hold the sum exactly.
TEST(Interpreter, HalfPrecisionNodesAreRoundedToTheirDtype) {
  const double y = 3.0 / 512;
  for (auto [t, sum, diff] : {std::tuple{DType::BF16, 1.0078125, 0.0078125},
                              std::tuple{DType::F16, 1 + y, y}, std::tuple{DType::F32, 1 + y, y}}) {
    Graph g("rounding");
    Dim N = g.dim("N");
    Value x = g.input("x", t, {N}), yv = g.input("y", t, {N});
    Value s = add(x, yv);
    g.output("sum", s);
    g.output("diff", sub(s, x));
    TensorMap in{{"x", Tensor::from_values(t, {1}, {1.0})}, {"y", Tensor::from_values(t, {1}, {y})}};
    TensorMap out = reference::run(g, in);
    EXPECT_EQ(out.at("sum").get(0), sum) << dtype_name(t);
    EXPECT_EQ(out.at("diff").get(0), diff) << dtype_name(t);
    // run_all shows the rounded values too.
    EXPECT_EQ(reference::run_all(g, in)[s.id()].get(0), sum) << dtype_name(t);
  }
  // Past f16's range: inf, as a GPU stores it.
  Graph g("overflow");
  Value x = g.input("x", DType::F16, {g.dim("N")});
  g.output("y", scale(x, 1000.0));
  EXPECT_TRUE(std::isinf(
      reference::run(g, {{"x", Tensor::from_values(DType::F16, {1}, {100.0})}}).at("y").get(0)));
}

TEST(Interpreter, OnlyWhatOutputsNeedIsComputedByRun) {
  Graph g("dead");
  Dim L = g.dim("L");
  Value ids = g.input("ids", DType::I32, {L});
  Value table = g.param("table", DType::F32, {g.dim("V", 2), g.dim("D", 1)});
  Value unused = embedding(ids, table); // id 5 is out of range, but nothing reads it
  (void)unused;
  g.output("t", scale(table, 1.0));
  TensorMap in{{"ids", Tensor::from_i32({1}, {5})}, {"table", Tensor::from_f32({2, 1}, {1, 2})}};
  expect_values(run1(g, in), {2, 1}, {1, 2});
  expect_error([&] { reference::run_all(g, in); }, {"ids 'ids'[0] = 5", "vocab size 2"});
}

// ---- binding errors -----------------------------------------------------------------------

// random_inputs and complete_dims take extents for the graph's dims only: a name the
// graph lacks or another extent for a static dim is an error naming the graph's dims.
TEST(Bind, GivenExtentsMustBeTheGraphsDims) {
  Proj p;
  expect_error([&] { random_inputs(p.g, {{"L", 2}, {"len", 8}}, 1); },
               {"graph 'proj' has no dim 'len' (its dynamic dims: L)"});
  expect_error([&] { random_inputs(p.g, {{"L", 2}, {"D", 4}}, 1); },
               {"dim 'D' of graph 'proj' is static, 3; it cannot be bound to 4",
                "dynamic dims: L"});
  EXPECT_NO_THROW(random_inputs(p.g, {{"L", 2}, {"D", 3}}, 1)); // its own extent is fine
  expect_error([&] { complete_dims(p.g, {{"X", 1}}); }, {"has no dim 'X'"});
}

TEST(Bind, RandomInputsTakeRangesPerInput) {
  Graph g("docs");
  Dim T = g.dim("T");
  Value x = g.input("x", DType::F32, {T}), doc = g.input("doc", DType::I32, {T});
  g.output("y", scale(x, 2.0));
  (void)doc;
  TensorMap d = random_inputs(g, {{"T", 1000}}, 1);
  auto range = [](const Tensor &t) {
    auto v = t.values();
    return std::pair(*std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end()));
  };
  EXPECT_EQ(range(d.at("doc")), std::pair(0.0, 3.0)); // the default integer range [0, 4)
  TensorMap r = random_inputs(g, {{"T", 1000}}, 1, {{"doc", {10, 13}}, {"x", {5, 6}}});
  EXPECT_EQ(range(r.at("doc")), std::pair(10.0, 12.0));
  EXPECT_GE(range(r.at("x")).first, 5.0);
  EXPECT_LT(range(r.at("x")).second, 6.0);
  expect_error([&] { random_inputs(g, {{"T", 4}}, 1, {{"ids", {0, 9}}}); },
               {"graph 'docs' has no input or param 'ids'"});
  expect_error([&] { random_inputs(g, {{"T", 4}}, 1, {{"doc", {3, 3}}}); },
               {"the range of 'doc' is empty"});
}

TEST(Bind, MissingInput) {
  Proj p;
  TensorMap in = p.good();
  in.erase("w");
  expect_error([&] { reference::run(p.g, in); }, {"missing param 'w'", "f32 (D=3, E=2)"});
}

TEST(Bind, UnknownInput) {
  Proj p;
  TensorMap in = p.good();
  in["wq"] = Tensor(DType::F32, {3, 2});
  expect_error([&] { reference::run(p.g, in); }, {"unknown input 'wq'", "graph 'proj' takes x, w"});
}

TEST(Bind, WrongDtype) {
  Proj p;
  TensorMap in = p.good();
  in["x"] = in["x"].to(DType::F64);
  expect_error([&] { reference::run(p.g, in); }, {"input 'x' must be f32, got f64"});
}

TEST(Bind, WrongRank) {
  Proj p;
  TensorMap in = p.good();
  in["x"] = Tensor(DType::F32, {6});
  expect_error([&] { reference::run(p.g, in); }, {"input 'x' has dims (L=?, D=3)", "shape [6]"});
}

TEST(Bind, StaticDimMismatch) {
  Proj p;
  TensorMap in = p.good();
  in["w"] = Tensor(DType::F32, {4, 2});
  expect_error([&] { reference::run(p.g, in); },
               {"param 'w'", "dim 'D' must be 3, got 4", "[4, 2]"});
}

TEST(Bind, DynamicDimBoundInconsistently) {
  Graph g("two");
  Dim L = g.dim("L"), D = g.dim("D", 2);
  Value a = g.input("a", DType::F32, {L, D}), b = g.input("b", DType::F32, {L, D});
  g.output("y", a + b);
  expect_error(
      [&] {
        reference::run(g, {{"a", Tensor(DType::F32, {2, 2})}, {"b", Tensor(DType::F32, {3, 2})}});
      },
      {"dim 'L' is 2 in 'a' but 3 in 'b'"});
}

TEST(Bind, DerivedDimMustBeAMultiple) {
  Graph g("heads");
  Dim H = g.dim("H", 4), Dh = g.dim("Dh");
  Value x = g.input("x", DType::F32, {g.dim("L"), product(H, Dh)});
  g.output("y", split_heads(x, H, Dh));
  expect_error(
      [&] {
        reference::run(g, {{"x", Tensor(DType::F32, {1, 10})}});
      },
      {"dim 'H*Dh' is 10 in 'x'", "not a multiple of 4"});
  // 8 = 4 * 2 binds Dh = 2
  Tensor y = run1(g, {{"x", Tensor(DType::F32, {1, 8})}});
  EXPECT_EQ(y.shape(), (Shape{4, 1, 2}));
}

TEST(Bind, DerivedDimMustMatchItsParts) {
  Graph g("heads");
  Dim H = g.dim("H", 2), Dh = g.dim("Dh");
  Value x = g.input("x", DType::F32, {g.dim("L"), product(H, Dh)});
  Value w = g.param("w", DType::F32, {Dh, g.dim("E", 1)});
  g.output("y", linear(split_heads(x, H, Dh), w));
  // Dh = 3 from 'w', so H*Dh must be 6; 'x' says 8.
  expect_error(
      [&] {
        reference::run(g, {{"x", Tensor(DType::F32, {1, 8})}, {"w", Tensor(DType::F32, {3, 1})}});
      },
      {"dim 'H*Dh' is 8 in 'x' but its parts make 6"});
}

TEST(Bind, EmptyTensor) {
  Proj p;
  TensorMap in = p.good();
  in["x"] = Tensor();
  expect_error([&] { reference::run(p.g, in); }, {"input 'x'", "empty tensor"});
}

TEST(Bind, GraphIsVerifiedFirst) {
  Graph g("no_outputs");
  g.input("x", DType::F32, {g.dim("N")});
  expect_error(
      [&] {
        reference::run(g, {{"x", Tensor(DType::F32, {1})}});
      },
      {"graph 'no_outputs' has no outputs"});
}

// ---- mod errors -------------------------------------------------------------------------------

TEST(ModErrors, OutOfBoundsLoadNamesOpTensorIndexAndPosition) {
  Graph g("alibi");
  Dim H = g.dim("H", 3), L = g.dim("L"), Dh = g.dim("Dh", 1);
  Value q = g.input("q", DType::F32, {H, L, Dh});
  Value k = g.input("k", DType::F32, {H, L, Dh});
  Value v = g.input("v", DType::F32, {H, L, Dh});
  Value slopes = g.param("slopes", DType::F32, {g.dim("NS", 2)}); // one slope short
  Value o = attention(q, k, v)
                .score_mod(
                    [&](auto s, auto, auto h, auto q, auto kv) { return s + slopes[h] * (kv - q); })
                .value()
                .named("attn");
  g.output("o", o);
  TensorMap in{{"q", Tensor(DType::F32, {3, 1, 1})},
               {"k", Tensor(DType::F32, {3, 1, 1})},
               {"v", Tensor(DType::F32, {3, 1, 1})},
               {"slopes", Tensor(DType::F32, {2})}};
  expect_error([&] { reference::run(g, in); },
               {"attention 'attn'", "score_mod loads 'slopes'[2] out of bounds", "index 2",
                "'NS'(2)", "(b=0, h=2, q=0, kv=0)"});
}

TEST(ModErrors, NegativeIndexInAScoreModOp) {
  Graph g("bias");
  Dim L = g.dim("L");
  Value s = g.input("s", DType::F32, {L, L});
  Value bias = g.param("bias", DType::F32, {L});
  g.output("y", score_mod(s, [&](auto s, auto, auto, auto q, auto kv) {
                  return s + bias[q - kv];
                }).named("biased"));
  expect_error(
      [&] {
        reference::run(g, {{"s", Tensor(DType::F32, {2, 2})}, {"bias", Tensor(DType::F32, {2})}});
      },
      {"score_mod 'biased'", "loads 'bias'[-1]", "index -1", "bias[q - kv]",
       "(b=0, h=0, q=0, kv=1)"});
}

TEST(ModErrors, IntegerDivisionByZero) {
  Graph g("div0");
  Dim L = g.dim("L");
  Value q = g.input("q", DType::F32, {L, g.dim("Dh", 1)});
  Value o = attention(q, q, q)
                .mask([](auto, auto, auto q, auto kv) { return q / (kv - 1) >= 0; })
                .value()
                .named("attn");
  g.output("o", o);
  expect_error(
      [&] {
        reference::run(g, {{"q", Tensor(DType::F32, {2, 1})}});
      },
      {"attention 'attn'", "mask_mod", "integer division by zero", "`q / (kv - 1)`",
       "(b=0, h=0, q=0, kv=1)"});
}

TEST(ModErrors, RemainderByZeroInAMaskOp) {
  Graph g("mod0");
  Value s = g.input("s", DType::F32, {g.dim("H", 2), g.dim("L", 1), g.dim("S", 1)});
  g.output("y", mask(s, [](auto, auto h, auto q, auto) { return q % h == 0; }).named("m"));
  expect_error(
      [&] {
        reference::run(g, {{"s", Tensor(DType::F32, {2, 1, 1})}});
      },
      {"mask 'm'", "mask_mod", "integer remainder by zero", "`q % h`", "(b=0, h=0, q=0, kv=0)"});
}

} // namespace
} // namespace qkv
