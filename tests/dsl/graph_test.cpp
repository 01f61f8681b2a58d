// The Graph itself: its printer (golden text), structural hash, verify(), dims, leaves and
// outputs, and run-time dim binding.
#include <qkv/dsl/graph.hpp>
#include <qkv/dsl/op_table.hpp>

#include <gtest/gtest.h>

#include "qkv_test/errors.hpp"

#include <bit>
#include <charconv>
#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <string>

namespace {

using namespace qkv;
using qkv::test::error_of;
using qkv::test::ErrorSays;

const Dim L("L"), S("S"), D("D", 8), H("H", 2), Dh("Dh", 4);

/// A small attention block with every printed feature: arguments, a constant, attrs,
/// a user name, a captured tensor, a mod and an output.
Graph small_block(const std::string &graph_name = "small", const std::string &y_name = "y") {
  Graph g(graph_name);
  Value x = g.input("x", DType::F32, {L, D});
  Value w = g.param("w", DType::F32, {D, product(H, Dh)});
  Value slopes = g.constant("slopes", {H}, {0.5, 0.25});
  Value q = split_heads(linear(x, w), H, Dh);
  Value o = attention(q, q, q)
                .scale(0.5)
                .mask(causal_mask())
                .score_mod([&](Expr s, Expr, Expr h, Expr qi, Expr ki) {
                  return s + slopes[h] * to_float(ki - qi);
                });
  Value y = merge_heads(o).named(y_name);
  g.output("y", y);
  return g;
}

TEST(GraphPrinter, GoldenText) {
  EXPECT_EQ(small_block().str(),
            R"(graph "small" {
  %0 = input "x" : f32 (L=?, D=8)
  %1 = param "w" : f32 (D=8, H*Dh=8)
  %2 = constant "slopes" {values = [0.5, 0.25]} : f32 (H=2)
  %3 = linear %0, %1 : f32 (L=?, H*Dh=8)
  %4 = split_heads %3 {heads = H=2, Dh=4} : f32 (H=2, L=?, Dh=4)
  %5 = attention %4, %4, %4 captures %2 {scale = 0.5, mask = {q >= kv}, score = {score + slopes[h] * float(kv - q)}} : f32 (H=2, L=?, Dh=4)
  %6 "y" = merge_heads %5 : f32 (L=?, H*Dh=8)
  output "y" = %6
}
)");
}

TEST(GraphPrinter, AttrsOfOtherOps) {
  Graph g("attrs");
  Value x = g.input("x", DType::F32, {L, D});
  Value e = g.param("e", DType::F32, {Dim("Kp", 2), L});
  g.output("a", softmax(transpose(x), 0));
  g.output("b", concat({x, x}, -1, Dim("D2", 16)));
  g.output("c", rope(sinusoidal_pe(x, 100.0, 1), {.base = 500, .interleaved = true, .offset = 3}));
  g.output("d", gelu(elu(layer_norm(rms_norm(x, 1e-6), 0.001), 0.5), true));
  g.output("f", linear_attention(x, x, x, FeatureMap::Relu));
  g.output("h", linformer_project(x, e));
  g.output("m", mask(matmul(x, transpose(x)), sliding_window_mask(3)));
  EXPECT_EQ(g.str(),
            R"(graph "attrs" {
  %0 = input "x" : f32 (L=?, D=8)
  %1 = param "e" : f32 (Kp=2, L=?)
  %2 = transpose %0 {axes = [-2, -1]} : f32 (D=8, L=?)
  %3 = softmax %2 {axis = 0} : f32 (D=8, L=?)
  %4 = concat %0, %0 {axis = -1, out = D2=16} : f32 (L=?, D2=16)
  %5 = sinusoidal_pe %0 {base = 100.0, offset = 1} : f32 (L=?, D=8)
  %6 = rope %5 {base = 500.0, offset = 3, interleaved = true} : f32 (L=?, D=8)
  %7 = rms_norm %0 {eps = 1e-06} : f32 (L=?, D=8)
  %8 = layer_norm %7 {eps = 0.001} : f32 (L=?, D=8)
  %9 = elu %8 {alpha = 0.5} : f32 (L=?, D=8)
  %10 = gelu %9 {approximate = tanh} : f32 (L=?, D=8)
  %11 = linear_attention %0, %0, %0 {feature_map = relu} : f32 (L=?, D=8)
  %12 = linformer_project %0, %1 : f32 (Kp=2, D=8)
  %13 = transpose %0 {axes = [-2, -1]} : f32 (D=8, L=?)
  %14 = matmul %0, %13 : f32 (L=?, L=?)
  %15 = mask %14 {mask = {q >= kv && q - kv < 3}} : f32 (L=?, L=?)
  output "a" = %3
  output "b" = %4
  output "c" = %6
  output "d" = %10
  output "f" = %11
  output "h" = %12
  output "m" = %15
}
)");
}

TEST(GraphPrinter, OpNamesRoundTrip) {
  for (int i = 0; i < kNumOpKinds; ++i) {
    auto op = static_cast<OpKind>(i);
    EXPECT_EQ(parse_op_name(op_name(op)), op) << op_name(op);
  }
  EXPECT_EQ(parse_op_name("flash"), std::nullopt);
  EXPECT_EQ(op_name(OpKind::SplitHeads), "split_heads");
}

// The op table: a row per op, its facts consistent with one another (the rows' order is
// checked when op_table.cpp compiles, the names and attributes against the dialect by
// compiler_op_table_test).
TEST(OpTable, RowsAreConsistent) {
  ASSERT_EQ(op_table().size(), static_cast<std::size_t>(kNumOpKinds));
  std::set<std::string_view> names;
  for (const OpInfo &row : op_table()) {
    SCOPED_TRACE(std::string(row.name));
    EXPECT_EQ(&op_info(row.kind), &row);
    EXPECT_TRUE(names.insert(row.name).second) << "two ops share a name";
    EXPECT_EQ(row.shape == nullptr, is_leaf(row.kind)) << "leaves, and only they, have no rule";
    EXPECT_TRUE(row.max_inputs == kAnyNumber || row.min_inputs <= row.max_inputs);
    EXPECT_TRUE(row.operands == kAnyNumber || row.operands <= row.min_inputs);
    std::set<std::string_view> labels;
    bool ended = false;
    for (const AttrUse &use : row.attrs) {
      ended = ended || use.label.empty();
      EXPECT_TRUE(ended == use.label.empty()) << "a printed attribute after an empty label";
      EXPECT_TRUE(use.label.empty() || labels.insert(use.label).second) << use.label;
    }
  }
}

TEST(OpTable, InputCountsAreChecked) {
  Graph g("t");
  Value x = g.input("x", DType::F32, {Dim("L"), Dim("D", 8)});
  auto internal = [](auto f) -> std::string {
    try {
      f();
    } catch (const InternalError &e) {
      return e.what();
    }
    return "no InternalError";
  };
  EXPECT_NE(internal([&] { infer_type(g, OpKind::Gelu, {x.id(), x.id()}, {}); })
                .find("gelu: 2 inputs"),
            std::string::npos);
  EXPECT_NE(internal([&] { infer_type(g, OpKind::Input, {}, {}); }).find("leaf"),
            std::string::npos);
}

// ---- hash --------------------------------------------------------------------------------

TEST(GraphHash, NodeNamesAndTheGraphNameDoNotCount) {
  Graph a = small_block("one", "y"), b = small_block("two", "merged");
  EXPECT_NE(a.str(), b.str());
  EXPECT_EQ(a.hash(), b.hash());
}

TEST(GraphHash, AttrsCount) {
  auto build = [](double scale, std::int64_t axis, bool interleaved, std::int64_t window) {
    Graph g("g");
    Value x = rope(g.input("x", DType::F32, {L, Dh}), {.interleaved = interleaved});
    Value s = mask(matmul(x, transpose(x)), sliding_window_mask(window));
    g.output("y", softmax(scale * s, axis));
    return g.hash();
  };
  std::uint64_t base = build(0.5, -1, false, 4);
  EXPECT_EQ(base, build(0.5, -1, false, 4));
  EXPECT_NE(base, build(0.25, -1, false, 4));
  EXPECT_NE(base, build(0.5, 0, false, 4));
  EXPECT_NE(base, build(0.5, -1, true, 4));
  EXPECT_NE(base, build(0.5, -1, false, 5));
}

TEST(GraphHash, ArgumentAndOutputNamesCount) {
  auto build = [](const char *in, const char *out, DType t) {
    Graph g("g");
    g.output(out, silu(g.input(in, t, {L})));
    return g.hash();
  };
  std::uint64_t base = build("x", "y", DType::F32);
  EXPECT_NE(base, build("z", "y", DType::F32));
  EXPECT_NE(base, build("x", "z", DType::F32));
  EXPECT_NE(base, build("x", "y", DType::F64));
}

TEST(GraphHash, ModsCountButCapturedNodeNamesDoNot) {
  auto build = [](const char *slopes_node, double c) {
    Graph g("g");
    Value x = g.input("x", DType::F32, {H, L, Dh});
    Value s = scale(g.param("s", DType::F32, {H}), 1.0).named(slopes_node);
    g.output("y", attention(x, x, x).score_mod(
                      [&](Expr sc, Expr, Expr h, Expr, Expr) { return sc + s[h] * c; }));
    return g.hash();
  };
  EXPECT_EQ(build("a", 2.0), build("b", 2.0));
  EXPECT_NE(build("a", 2.0), build("a", 3.0));
}

// ---- exactness: the text keys the kernel cache --------------------------------------------
// Graph::str() is the kernel cache's key and Graph::hash() hashes the same text, so a
// number printed with fewer digits than it has would let two graphs share one kernel.
// Every floating-point attribute and constant must print in the shortest form that reads
// back to the same double, and two graphs that differ in its last bit must differ.

/// One floating-point attribute or constant: `build(v)` makes a graph that holds v, whose
/// text shows it right after `printed`.
struct FloatAttr {
  std::string what, printed;
  std::function<Graph(double)> build;
  bool f32_constant = false; // the value is an f32 constant's: its neighbours are floats'
  bool in_mod = false;       // a mod's constant: refused outside f32's range
};

Graph one_output(const std::function<Value(Graph &, Value)> &body, DType t = DType::F32) {
  Graph g("g");
  Value x = g.input("x", t, {L, D});
  g.output("y", body(g, x));
  return g;
}

std::vector<FloatAttr> float_attrs() {
  auto op = [](std::function<Value(Value, double)> f) {
    return [f](double v) { return one_output([&](Graph &, Value x) { return f(x, v); }); };
  };
  auto heads = [](Value x) { return split_heads(x, H, Dh); };
  auto scores = [](Value x) { return matmul(x, transpose(x)); };
  auto constant = [](DType t) {
    return [t](double v) {
      return one_output(
          [&](Graph &g, Value x) {
            return add(x, g.constant("c", {D}, {v, 1, 2, 3, 4, 5, 6, 7}, t));
          },
          t);
    };
  };
  return {
      {"scale", "scale = ", op([](Value x, double v) { return scale(x, v); })},
      {"attention scale", "scale = ", op([=](Value x, double v) {
         return merge_heads(attention(heads(x), heads(x), heads(x)).scale(v));
       })},
      {"sinusoidal_pe base", "base = ", op([](Value x, double v) { return sinusoidal_pe(x, v); })},
      {"rope base", "base = ", op([](Value x, double v) { return rope(x, {.base = v}); })},
      {"layer_norm eps", "eps = ", op([](Value x, double v) { return layer_norm(x, v); })},
      {"rms_norm eps", "eps = ", op([](Value x, double v) { return rms_norm(x, v); })},
      {"elu alpha", "alpha = ", op([](Value x, double v) { return elu(x, v); })},
      {"f64 constant", "values = [", constant(DType::F64)},
      {"f32 constant", "values = [", constant(DType::F32), true},
      {"mask constant", "float(q - kv) < ", op([=](Value x, double v) {
         return mask(scores(x), [v](Expr, Expr, Expr q, Expr kv) { return to_float(q - kv) < v; });
       }), false, true},
      {"score_mod constant", "score * ", op([=](Value x, double v) {
         return score_mod(scores(x), [v](Expr s, Expr, Expr, Expr, Expr) { return s * v; });
       }), false, true},
      {"attention mask constant", "float(kv) < ", op([=](Value x, double v) {
         return merge_heads(
             attention(heads(x), heads(x), heads(x)).mask([v](Expr, Expr, Expr, Expr kv) {
               return to_float(kv) < v;
             }));
       }), false, true},
      {"attention score_mod constant", "score + ", op([=](Value x, double v) {
         return merge_heads(
             attention(heads(x), heads(x), heads(x)).score_mod([v](Expr s, Expr, Expr, Expr, Expr) {
               return s + v;
             }));
       }), false, true},
  };
}

/// The number printed right after `printed` in `text` (the first occurrence), read back.
double number_after(const std::string &text, const std::string &printed) {
  std::size_t at = text.find(printed);
  if (at == std::string::npos) {
    ADD_FAILURE() << "no '" << printed << "' in\n" << text;
    return NAN;
  }
  const char *begin = text.data() + at + printed.size();
  double v = NAN;
  auto [end, ec] = std::from_chars(begin, text.data() + text.size(), v);
  EXPECT_EQ(ec, std::errc()) << "at '" << begin << "'";
  return v;
}

/// Doubles whose shortest forms need up to 17 digits, tiny and large ones.
const std::vector<double> kAwkward = {
    0.1, 1.0 / 3, 2.0 / 3, 1e-12, 1e-5, 0.7071067811865476, 123456.789, 500000.0, 3e-300};

TEST(GraphText, FloatAttributesAndConstantsRoundTripExactly) {
  for (const FloatAttr &a : float_attrs())
    for (double v : kAwkward) {
      if (a.f32_constant)
        v = static_cast<float>(v);
      std::string text = a.build(v).str();
      double back = number_after(text, a.printed);
      EXPECT_EQ(std::bit_cast<std::uint64_t>(back), std::bit_cast<std::uint64_t>(v))
          << a.what << ": " << v << " printed as " << text;
    }
}

TEST(GraphText, TheLastBitChangesTheTextAndTheHash) {
  for (const FloatAttr &a : float_attrs())
    for (double v : kAwkward) {
      double up = std::nextafter(v, INFINITY), down = std::nextafter(v, 0.0);
      if (a.f32_constant) { // an f32 constant holds floats (3e-300 is none: skipped)
        float f = static_cast<float>(v);
        if (f == 0)
          continue;
        v = f;
        up = std::nextafter(f, INFINITY);
        down = std::nextafter(f, 0.0f);
      }
      Graph g = a.build(v);
      for (double w : {up, down}) {
        Graph h = a.build(w);
        EXPECT_NE(g.str(), h.str()) << a.what << ": " << v << " and its neighbour " << w;
        EXPECT_NE(g.hash(), h.hash()) << a.what << ": " << v << " and its neighbour " << w;
      }
    }
}

TEST(GraphText, SignedZeroAndTheExtremesStayDistinct) {
  for (const FloatAttr &a : float_attrs()) {
    if (a.printed == "base = " || a.printed == "eps = ")
      continue; // those must be positive
    std::vector<double> vs = {0.0, -0.0, std::numeric_limits<double>::denorm_min(),
                              std::numeric_limits<double>::max()};
    if (a.f32_constant)
      vs = {0.0, -0.0, std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max()};
    if (a.in_mod) // ShapeRules.ModConstantsOutsideF32sRangeAreRefused: f32's largest at most
      vs.back() = std::numeric_limits<float>::max();
    std::set<std::string> texts;
    std::set<std::uint64_t> hashes;
    for (double v : vs) {
      Graph g = a.build(v);
      EXPECT_EQ(std::bit_cast<std::uint64_t>(number_after(g.str(), a.printed)),
                std::bit_cast<std::uint64_t>(v))
          << a.what << ": " << v;
      texts.insert(g.str());
      hashes.insert(g.hash());
    }
    EXPECT_EQ(texts.size(), vs.size()) << a.what;
    EXPECT_EQ(hashes.size(), vs.size()) << a.what;
  }
}

/// Two graphs that differ in one attribute that is not a float.
struct AttrPair {
  std::string what;
  std::function<Value(Graph &, Value)> a, b;
};

TEST(GraphText, EveryOtherAttributeCounts) {
  // Attributes that also show in the result's type (transpose's axes, concat's axis and
  // out, split_heads' heads, merge_heads' out) are left out: the type tells those apart.
  auto heads = [](Value x) { return split_heads(x, H, Dh); };
  auto scores = [](Value x) { return matmul(x, transpose(x)); };
  auto attend = [=](Value x) { return attention(heads(x), heads(x), heads(x)); };
  std::vector<AttrPair> pairs = {
      {"softmax axis", [](Graph &, Value x) { return softmax(x, 0); },
       [](Graph &, Value x) { return softmax(x, -1); }},
      {"sinusoidal_pe offset", [](Graph &, Value x) { return sinusoidal_pe(x, 10000, 0); },
       [](Graph &, Value x) { return sinusoidal_pe(x, 10000, 1); }},
      {"rope offset", [](Graph &, Value x) { return rope(x, {.offset = 2}); },
       [](Graph &, Value x) { return rope(x, {.offset = 3}); }},
      {"rope interleaved", [](Graph &, Value x) { return rope(x, {.interleaved = false}); },
       [](Graph &, Value x) { return rope(x, {.interleaved = true}); }},
      {"gelu approximate", [](Graph &, Value x) { return gelu(x, false); },
       [](Graph &, Value x) { return gelu(x, true); }},
      {"linear_attention feature map",
       [](Graph &, Value x) { return linear_attention(x, x, x, FeatureMap::EluPlusOne); },
       [](Graph &, Value x) { return linear_attention(x, x, x, FeatureMap::Relu); }},
      {"mask integer constant",
       [=](Graph &, Value x) { return mask(scores(x), sliding_window_mask(3)); },
       [=](Graph &, Value x) { return mask(scores(x), sliding_window_mask(4)); }},
      {"score_mod expression",
       [=](Graph &, Value x) {
         return score_mod(scores(x),
                          [](Expr s, Expr, Expr, Expr q, Expr kv) { return s + to_float(q - kv); });
       },
       [=](Graph &, Value x) {
         return score_mod(scores(x),
                          [](Expr s, Expr, Expr, Expr q, Expr kv) { return s + to_float(kv - q); });
       }},
      {"attention mask", [=](Graph &, Value x) { return merge_heads(attend(x)); },
       [=](Graph &, Value x) { return merge_heads(attend(x).mask(causal_mask())); }},
      {"attention score_mod", [=](Graph &, Value x) { return merge_heads(attend(x)); },
       [=](Graph &, Value x) {
         return merge_heads(attend(x).score_mod([](Expr s, Expr, Expr, Expr, Expr) { return -s; }));
       }},
  };
  for (const AttrPair &p : pairs) {
    Graph a = one_output(p.a), b = one_output(p.b);
    EXPECT_NE(a.str(), b.str()) << p.what;
    EXPECT_NE(a.hash(), b.hash()) << p.what;
  }
}

// ---- verify ------------------------------------------------------------------------------

TEST(GraphVerify, AValidGraphPasses) { EXPECT_NO_THROW(small_block().verify()); }

TEST(GraphVerify, NeedsAnOutput) {
  Graph g("g");
  silu(g.input("x", DType::F32, {L}));
  EXPECT_EQ(error_of([&] { g.verify(); }), "graph 'g' has no outputs (call g.output(name, value))");
}

TEST(GraphVerify, StoredTypeMustBeTheRulesType) {
  Graph g = small_block();
  g.mutable_node(6).dims = {L, D};
  EXPECT_EQ(error_of([&] { g.verify(); }),
            "graph 'small', node %6 'y': stored type f32 (L=?, D=8) is not what merge_heads "
            "gives, f32 (L=?, H*Dh=8)");
  Graph g2 = small_block();
  g2.mutable_node(3).dtype = DType::F64;
  EXPECT_TRUE(error_of([&] { g2.verify(); }).find("node %3 'linear#3': stored type f64") !=
              std::string::npos);
}

TEST(GraphVerify, InputsComeFirst) {
  Graph g = small_block();
  g.mutable_node(3).inputs = {0, 4};
  EXPECT_EQ(error_of([&] { g.verify(); }),
            "graph 'small', node %3 'linear#3': input %4 does not come before it (the graph must "
            "be a DAG in creation order)");
}

TEST(GraphVerify, DimsAreTheGraphs) {
  Graph g = small_block();
  g.mutable_node(0).dims = {L, Dim("Z")};
  EXPECT_EQ(error_of([&] { g.verify(); }),
            "graph 'small', node %0 'x': dim 'Z' is not declared in the graph");
  Graph g2 = small_block();
  g2.mutable_node(0).dims = {L, Dim("D", 9)};
  EXPECT_EQ(error_of([&] { g2.verify(); }),
            "graph 'small', node %0 'x': dim 'D'(9) disagrees with the graph's 'D'(8)");
}

TEST(GraphVerify, Arguments) {
  Graph g = small_block();
  g.mutable_node(1).name = "x";
  EXPECT_EQ(error_of([&] { g.verify(); }),
            "graph 'small', node %1 'x': argument name 'x' is used twice");
  Graph g2 = small_block();
  g2.mutable_node(1).inputs = {0};
  EXPECT_EQ(error_of([&] { g2.verify(); }), "graph 'small', node %1 'w': an argument has inputs");
  Graph g3 = small_block();
  g3.mutable_node(2).attrs.data = std::make_shared<const std::vector<double>>(3, 0.0);
  EXPECT_EQ(error_of([&] { g3.verify(); }),
            "graph 'small', node %2 'slopes': constant data does not match its dims");
}

TEST(GraphVerify, ModsLoadOnlyCapturedTensors) {
  Graph g = small_block();
  g.mutable_node(5).inputs = {4, 4, 4}; // drop the captured slopes
  EXPECT_EQ(error_of([&] { g.verify(); }),
            "graph 'small', node %5 'attention#5': attention: score_mod loads %2, which is not "
            "captured by this op");
}

// ---- dims, leaves, outputs ---------------------------------------------------------------

TEST(GraphDims, Declarations) {
  Graph g("g");
  EXPECT_EQ(g.dim("L"), Dim("L"));
  EXPECT_EQ(g.dim("D", 8), Dim("D", 8));
  EXPECT_EQ(g.dim("D", 8), Dim("D", 8)); // again, same extent: fine
  EXPECT_EQ(error_of([&] { g.dim("D", 16); }),
            "dim 'D' is already declared as 'D'(8); it cannot also be 'D'(16)");
  EXPECT_EQ(error_of([&] { g.dim("H*Dh"); }),
            "dim name 'H*Dh' is not an identifier (letters, digits, _ ; derived dims like H*Dh "
            "are made by ops)");
  EXPECT_EQ(error_of([&] { g.dim("X", 0); }), "dim 'X': extent must be positive or dynamic, got 0");
  EXPECT_TRUE(error_of([&] { g.input("x", DType::F32, {Dim("2x")}); }).find("not an identifier") !=
              std::string::npos);
}

TEST(GraphDims, DescribeAndDerivedNames) {
  EXPECT_EQ(describe(Dim("Dh", 64)), "'Dh'(64)");
  EXPECT_EQ(describe(Dim("L")), "'L'(dynamic)");
  EXPECT_EQ(describe(std::vector<Dim>{L, D}), "(L, D)");
  EXPECT_EQ(describe_full(std::vector<Dim>{L, D}), "(L=?, D=8)");
  EXPECT_EQ(product(H, Dh), Dim("H*Dh", 8));
  EXPECT_EQ(product(sum({H, Dh}), L), Dim("(H+Dh)*L"));
  EXPECT_EQ(sum({H, Dh, D}), Dim("H+Dh+D", 14));
}

TEST(GraphLeaves, Errors) {
  EXPECT_EQ(error_of([] { Graph g(""); }), "Graph: empty name");
  Graph g("g");
  Value x = g.input("x", DType::F32, {L});
  EXPECT_EQ(error_of([&] { g.param("x", DType::F32, {L}); }),
            "param 'x': graph 'g' already has an input, param or constant with this name");
  EXPECT_EQ(error_of([&] { g.input("", DType::F32, {L}); }), "input: empty name");
  EXPECT_EQ(error_of([&] { g.constant("c", {L}, {1.0}); }),
            "constant 'c': dim 'L'(dynamic) is dynamic; a constant's dims must be static");
  EXPECT_EQ(error_of([&] {
              g.constant("c", {H, Dh}, {1.0, 2.0});
            }),
            "constant 'c' (H=2, Dh=4) needs 8 values, got 2");
  EXPECT_EQ(error_of([&] { x.named("y"); }),
            "named(): 'x' is an argument; its name is how it is bound");
  EXPECT_EQ(error_of([&] { silu(x).named(""); }), "named(): empty name");
  EXPECT_EQ(error_of([] { Value().graph(); }), "use of an empty qkv::Value (not made by a graph)");
}

TEST(GraphOutputs, Errors) {
  Graph g("g"), other("other");
  Value x = g.input("x", DType::F32, {L});
  Value y = other.input("y", DType::F32, {L});
  g.output("out", silu(x));
  EXPECT_EQ(error_of([&] { g.output("out", x); }),
            "output 'out': graph 'g' already has an output named so");
  EXPECT_EQ(error_of([&] { g.output("", x); }), "output: empty name");
  EXPECT_EQ(error_of([&] { g.output("o2", y); }), "output 'o2': the value is not from graph 'g'");
}

TEST(GraphInspection, ArgumentsUsersOutputs) {
  Graph g = small_block();
  EXPECT_EQ(g.arguments(), (std::vector<NodeId>{0, 1})); // constants are not arguments
  EXPECT_EQ(g.find_argument("w"), 1);
  EXPECT_EQ(g.find_argument("slopes"), std::nullopt);
  EXPECT_EQ(g.users(4), (std::vector<NodeId>{5}));
  EXPECT_EQ(g.users(2), (std::vector<NodeId>{5})); // captured by the mod
  EXPECT_TRUE(g.is_output(6));
  EXPECT_FALSE(g.is_output(5));
  EXPECT_EQ(g.node(5).num_operands(), 3);
  EXPECT_EQ(g.value(5).describe(), "'attention#5' (H, L, Dh)");
}

// ---- binding -----------------------------------------------------------------------------

using Args = std::map<std::string, std::pair<DType, Shape>>;

TEST(BindDims, BindsDynamicAndDerivedDims) {
  Graph g = small_block();
  DimBindings b = bind_dims(g, Args{{"x", {DType::F32, {5, 8}}}, {"w", {DType::F32, {8, 8}}}});
  EXPECT_EQ(b.at("L"), 5);
  EXPECT_EQ(b.at("H*Dh"), 8);
  EXPECT_EQ(resolve(g.node(4).dims, b), (Shape{2, 5, 4}));
}

TEST(BindDims, InfersAMissingFactorOfAProduct) {
  Graph g("g");
  Dim E("E");
  Value x = g.input("x", DType::F32, {L, product(H, E)});
  g.output("y", split_heads(x, H, E));
  DimBindings b = bind_dims(g, Args{{"x", {DType::F32, {3, 10}}}});
  EXPECT_EQ(b.at("E"), 5);
  EXPECT_EQ(error_of([&] {
              bind_dims(g, Args{{"x", {DType::F32, {3, 9}}}});
            }),
            "dim 'H*E' is 9 in 'x', which is not a multiple of 2");
}

TEST(BindDims, Errors) {
  Graph g("g");
  g.input("a", DType::F32, {L, D});
  g.input("b", DType::F32, {L, S});
  g.output("y", silu(g.input("c", DType::F32, {Dim("U")})));
  Args ok{{"a", {DType::F32, {3, 8}}}, {"b", {DType::F32, {3, 4}}}, {"c", {DType::F32, {2}}}};
  EXPECT_NO_THROW(bind_dims(g, ok));
  auto with = [&](const std::string &name, std::pair<DType, Shape> t) {
    Args a = ok;
    a[name] = t;
    return a;
  };
  EXPECT_EQ(error_of([&] {
              bind_dims(g, with("z", {DType::F32, {1}}));
            }),
            "unknown input 'z': graph 'g' takes a, b, c");
  Args missing = ok;
  missing.erase("b");
  EXPECT_EQ(error_of([&] { bind_dims(g, missing); }), "missing input 'b': f32 (L=?, S=?)");
  EXPECT_EQ(error_of([&] {
              bind_dims(g, with("a", {DType::F64, {3, 8}}));
            }),
            "input 'a' must be f32, got f64");
  EXPECT_EQ(error_of([&] {
              bind_dims(g, with("a", {DType::F32, {3}}));
            }),
            "input 'a' has dims (L=?, D=8), got a tensor of shape [3]");
  EXPECT_EQ(error_of([&] {
              bind_dims(g, with("a", {DType::F32, {3, 9}}));
            }),
            "input 'a': dim 'D' must be 8, got 9 (shape [3, 9])");
  EXPECT_EQ(error_of([&] {
              bind_dims(g, with("b", {DType::F32, {4, 4}}));
            }),
            "dim 'L' is 3 in 'a' but 4 in 'b' (shape [4, 4])");
  EXPECT_EQ(error_of([&] {
              bind_dims(g, with("c", {DType::F32, {-1}}));
            }),
            "input 'c': negative extent in shape [-1]");
}

TEST(BindDims, UnboundDim) {
  // The builders derive every dim from the arguments'; a hand-edited node can still hold
  // one that nothing binds, and binding says so rather than running with garbage.
  Graph g("g");
  Value x = g.input("x", DType::F32, {L});
  Value y = silu(x);
  g.output("y", y);
  g.dim("U");
  g.mutable_node(y.id()).dims = {Dim("U")};
  EXPECT_EQ(error_of([&] {
              bind_dims(g, Args{{"x", {DType::F32, {3}}}});
            }),
            "dim 'U' of 'silu#1' is not bound: no input has it, and it is dynamic");
}

// ---- the kernel cache's key: every attribute ------------------------------------------

/// A value unlike any default of its type, for each type an Attrs field has.
struct Perturb {
  void operator()(std::vector<std::int64_t> &v) const { v = {1, 0}; }
  void operator()(std::vector<Dim> &v) const { v = {Dim("H", 4)}; }
  void operator()(std::optional<double> &v) const { v = 0.5; }
  void operator()(double &v) const { v = v + 0.25; }
  void operator()(std::int64_t &v) const { v = v + 3; }
  void operator()(bool &v) const { v = !v; }
  void operator()(FeatureMap &v) const {
    v = v == FeatureMap::EluPlusOne ? FeatureMap::Relu : FeatureMap::EluPlusOne;
  }
  void operator()(ExprPtr &e) const { e = (len_q() < len_kv()).ptr(); }
  void operator()(std::shared_ptr<const std::vector<double>> &d) const {
    d = std::make_shared<const std::vector<double>>(std::vector<double>{1.5});
  }
};

// Two nodes that differ in one attribute, whichever, never share a key: every field of
// Attrs (visit_fields lists them all; graph.cpp counts them) changes attrs_key, which
// Graph::key_text appends to the graph's text.
TEST(CacheKey, EveryAttributeChangesTheKey) {
  int fields = 0;
  const Attrs defaults;
  visit_fields(defaults, [&](const char *, const auto &) { ++fields; });
  ASSERT_EQ(fields, 16);
  for (int f = 0; f < fields; ++f) {
    Attrs a;
    std::string name;
    int i = 0;
    visit_fields(a, [&](const char *n, auto &v) {
      if (i++ == f) {
        Perturb{}(v);
        name = n;
      }
    });
    std::string key = attrs_key(a);
    EXPECT_NE(key, attrs_key(Attrs{})) << name;
    EXPECT_EQ(key.rfind(name + "=", 0), 0u) << name << ": " << key;
  }
  EXPECT_EQ(attrs_key(Attrs{}), "");
}

TEST(CacheKey, KeyTextIsTheTextAndTheAttributes) {
  Graph g("g");
  Dim L = g.dim("L"), D = g.dim("D", 8);
  g.output("y", layer_norm(g.input("x", DType::F32, {L, D}), 1e-5));
  std::string k = g.key_text();
  EXPECT_EQ(k.rfind(g.str(), 0), 0u);
  EXPECT_NE(k.find("attrs %1 eps=1e-05"), std::string::npos) << k;
}

} // namespace
