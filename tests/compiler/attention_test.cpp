// attention and linear_attention compiled for the CPU against the interpreter: ranks 2-4,
// GQA/MQA, cross-attention, masks and score mods with captured tensors, fully masked
// rows, dynamic head dims; and the recognised seeds'-way attention.
#include "differential.hpp"

namespace qkv::test {
namespace {

using DB = DimBindings;

struct Qkv {
  Value q, k, v;
};

/// q (B, H, L, Dh), k/v (B, Hkv, S, Dh|Dv) inputs; fewer leading dims for lower ranks.
Qkv qkv_inputs(Graph &g, int rank, std::int64_t h, std::int64_t hkv, bool cross,
               std::int64_t dh = 8, std::int64_t dv = 8) {
  Dim B = g.dim("B"), L = g.dim("L"), S = cross ? g.dim("S") : L;
  Dim H = g.dim("H", h), Hk = hkv == h ? H : g.dim("Hkv", hkv);
  Dim Dh = g.dim("Dh", dh), Dv = dv == dh ? Dh : g.dim("Dv", dv);
  auto dims = [&](Dim heads, Dim seq, Dim feat) {
    std::vector<Dim> d;
    if (rank == 4)
      d.push_back(B);
    if (rank >= 3)
      d.push_back(heads);
    d.push_back(seq);
    d.push_back(feat);
    return d;
  };
  return {g.input("q", DType::F32, dims(H, L, Dh)), g.input("k", DType::F32, dims(Hk, S, Dh)),
          g.input("v", DType::F32, dims(Hk, S, Dv))};
}

const std::vector<DB> kSelf = {
    {{"B", 1}, {"L", 1}}, {{"B", 2}, {"L", 3}}, {{"B", 1}, {"L", 17}}, {{"B", 2}, {"L", 64}}};
const std::vector<DB> kCross = {{{"B", 1}, {"L", 1}, {"S", 1}},
                                {{"B", 2}, {"L", 3}, {"S", 17}},
                                {{"B", 1}, {"L", 17}, {"S", 5}}};

std::vector<DiffCase> cases() {
  std::vector<DiffCase> c;
  c.push_back(one_output(
                  "rank2_single_head",
                  [](Graph &g) {
                    auto [q, k, v] = qkv_inputs(g, 2, 1, 1, false, 6, 6);
                    return attention(q, k, v).value();
                  },
                  kSelf)
                  .sums({"Dh", "L"})
                  .large_inputs(40, 1000, {"q", "k"}));
  c.push_back(one_output(
                  "rank3_heads_explicit_scale",
                  [](Graph &g) {
                    auto [q, k, v] = qkv_inputs(g, 3, 3, 3, false, 5, 7);
                    return attention(q, k, v).scale(0.9).value();
                  },
                  kSelf)
                  .sums({"Dh", "L"})
                  .large_inputs(40, 1000, {"q", "k"}));
  c.push_back(one_output(
                  "rank4_causal",
                  [](Graph &g) {
                    auto [q, k, v] = qkv_inputs(g, 4, 2, 2, false);
                    return attention(q, k, v).mask(causal_mask()).value();
                  },
                  kSelf)
                  .sums({"Dh", "L"})
                  .large_inputs(40, 1000, {"q", "k"}));
  c.push_back(one_output(
                  "gqa_sliding_window",
                  [](Graph &g) {
                    auto [q, k, v] = qkv_inputs(g, 4, 4, 2, false);
                    return attention(q, k, v).mask(sliding_window_mask(4)).value();
                  },
                  kSelf)
                  .sums({"Dh", "L"})
                  .large_inputs(40, 1000, {"q", "k"}));
  c.push_back(one_output(
                  "mqa_alibi",
                  [](Graph &g) {
                    auto [q, k, v] = qkv_inputs(g, 4, 4, 1, false);
                    Value slopes = g.param("slopes", DType::F32, {g.dim("H", 4)});
                    return attention(q, k, v)
                        .mask(causal_mask())
                        .score_mod([&](auto s, auto, auto h, auto qi, auto ki) {
                          return s + slopes[h] * (ki - qi);
                        })
                        .value();
                  },
                  kSelf)
                  .sums({"Dh", "L"})
                  .large_inputs(40, 1000, {"q", "k"}));
  c.push_back(one_output(
                  "cross_attention",
                  [](Graph &g) {
                    auto [q, k, v] = qkv_inputs(g, 4, 2, 2, true, 8, 3);
                    return attention(q, k, v).value();
                  },
                  kCross)
                  .sums({"Dh", "S"})
                  .large_inputs(40, 1000, {"q", "k"}));
  c.push_back(
      one_output(
          "cross_causal_bottom_right",
          [](Graph &g) {
            // causal aligned to the last query: q + (len_kv - len_q) >= kv; rows with nothing
            // visible (S < L) must come out 0.
            auto [q, k, v] = qkv_inputs(g, 3, 2, 2, true);
            return attention(q, k, v)
                .mask([](auto, auto, auto qi, auto ki) { return qi + (len_kv() - len_q()) >= ki; })
                .value();
          },
          kCross)
          .sums({"Dh", "S"})
          .large_inputs(40, 1000, {"q", "k"}));
  c.push_back(
      one_output(
          "document_mask_and_softcap",
          [](Graph &g) {
            auto [q, k, v] = qkv_inputs(g, 4, 2, 2, false);
            Value doc = g.input("doc", DType::I32, {g.dim("B"), g.dim("L")});
            return attention(q, k, v)
                .mask([&](auto b, auto, auto qi, auto ki) { return doc(b, qi) == doc(b, ki); })
                .score_mod([](auto s, auto, auto, auto, auto) { return 2.0 * tanh(s / 2.0); })
                .value();
          },
          kSelf)
          .sums({"Dh", "L"})
          .large_inputs(40, 1000, {"q", "k"}));
  c.push_back(one_output(
                  "relative_bias_table",
                  [](Graph &g) {
                    auto [q, k, v] = qkv_inputs(g, 3, 2, 2, false);
                    // bias[h, clamp(kv - q + 8, 0, 16)]
                    Value bias = g.param("bias", DType::F32, {g.dim("H", 2), g.dim("R", 17)});
                    return attention(q, k, v)
                        .score_mod([&](auto s, auto, auto h, auto qi, auto ki) {
                          return s + bias(h, min(max(ki - qi + 8, 0), 16));
                        })
                        .value();
                  },
                  kSelf)
                  .sums({"Dh", "L"})
                  .large_inputs(40, 1000, {"q", "k"}));
  c.push_back(one_output("fully_masked",
                         [](Graph &g) {
                           auto [q, k, v] = qkv_inputs(g, 3, 2, 2, false);
                           return attention(q, k, v)
                               .mask([](auto, auto, auto qi, auto) { return qi < 0; })
                               .value();
                         },
                         {{{"L", 1}}, {{"L", 5}}})
                  .may_be_zero()
                  .large_inputs(40, 1000, {"q", "k"}));
  c.push_back(one_output("score_mod_to_minus_inf",
                         [](Graph &g) {
                           // A score_mod may drop scores itself by returning -inf; odd rows keep
                           // only kv == 0.
                           auto [q, k, v] = qkv_inputs(g, 2, 1, 1, false);
                           return attention(q, k, v)
                               .score_mod([](auto s, auto, auto, auto qi, auto ki) {
                                 return select(qi % 2 == 1 && ki > 0,
                                               -std::numeric_limits<double>::infinity(), s);
                               })
                               .value();
                         },
                         {{{"L", 1}}, {{"L", 7}}})
                  .sums({"Dh", "L"})
                  .large_inputs(40, 1000, {"q", "k"}));
  c.push_back(one_output("dynamic_head_dim",
                         [](Graph &g) {
                           // Dh bound at run time: the default scale 1/sqrt(Dh) is computed in the
                           // kernel.
                           Dim L = g.dim("L"), Dh = g.dim("Dh");
                           Value q = g.input("q", DType::F32, {L, Dh}),
                                 k = g.input("k", DType::F32, {L, Dh}),
                                 v = g.input("v", DType::F32, {L, Dh});
                           return attention(q, k, v).value();
                         },
                         {{{"L", 1}, {"Dh", 1}}, {{"L", 9}, {"Dh", 3}}, {{"L", 4}, {"Dh", 17}}})
                  .sums({"Dh", "L"})
                  .large_inputs(40, 1000, {"q", "k"}));
  c.push_back(one_output(
                  "linear_attention_elu",
                  [](Graph &g) {
                    auto [q, k, v] = qkv_inputs(g, 4, 2, 2, false, 6, 5);
                    return linear_attention(q, k, v);
                  },
                  kSelf)
                  .sums({"Dh", "L"})
                  .large_inputs(40, 1, {"q", "k"}));
  c.push_back(one_output(
                  "linear_attention_gqa_relu",
                  [](Graph &g) {
                    auto [q, k, v] = qkv_inputs(g, 3, 4, 2, true);
                    return linear_attention(q, k, v, FeatureMap::Relu);
                  },
                  kCross)
                  .sums({"Dh", "S"})
                  .large_inputs(40, 1, {"q", "k"}));
  c.push_back(
      one_output("linformer_then_attention",
                 [](Graph &g) {
                   auto [q, k, v] = qkv_inputs(g, 3, 2, 2, false);
                   Value e = g.param("e", DType::F32, {g.dim("Kp", 4), g.dim("L")});
                   return attention(q, linformer_project(k, e), linformer_project(v, e)).value();
                 },
                 {{{"L", 1}}, {{"L", 17}}})
          .sums({"Dh", "L", "Kp"})
          .large_inputs(40, 1000, {"q", "k"}));
  c.push_back(one_output(
                  "seeds_way_masked",
                  [](Graph &g) {
                    // matmul -> scale -> score_mod -> mask -> softmax -> matmul: recognised as
                    // attention.
                    auto [q, k, v] = qkv_inputs(g, 4, 2, 2, false);
                    Value s = scale(matmul(q, transpose(k)), 0.5);
                    s = score_mod(
                        s, [](auto sc, auto, auto h, auto, auto) { return sc - to_float(h); });
                    s = mask(s, causal_mask());
                    return matmul(softmax(s), v);
                  },
                  kSelf)
                  .sums({"Dh", "L"})
                  .large_inputs(40, 1000, {"q", "k"}));
  c.push_back(one_output(
                  "negative_div_rem_in_mods",
                  [](Graph &g) {
                    // C++ truncation on negative operands: (kv - q) / 2 and (kv - q) % 3 below the
                    // diagonal; a floor division would move both the bias and the mask.
                    auto [q, k, v] = qkv_inputs(g, 4, 2, 2, false);
                    return attention(q, k, v)
                        .score_mod([](auto s, auto, auto h, auto qi, auto ki) {
                          return s + 0.5 * to_float((ki - qi) / 2) - to_float((ki - qi - h) % 3);
                        })
                        .mask([](auto, auto, auto qi, auto ki) { return (ki - qi) % 3 != -1; })
                        .value();
                  },
                  kSelf)
                  .sums({"Dh", "L"})
                  .large_inputs(40, 1000, {"q", "k"}));
  c.push_back(one_output(
                  "f64_gqa_causal_alibi",
                  [](Graph &g) {
                    Dim B = g.dim("B"), H = g.dim("H", 4), Hk = g.dim("Hkv", 2), L = g.dim("L"),
                        Dh = g.dim("Dh", 8);
                    Value q = g.input("q", DType::F64, {B, H, L, Dh});
                    Value k = g.input("k", DType::F64, {B, Hk, L, Dh}),
                          v = g.input("v", DType::F64, {B, Hk, L, Dh});
                    Value slopes = g.param("slopes", DType::F64, {H});
                    return attention(q, k, v)
                        .mask(causal_mask())
                        .score_mod([&](auto s, auto, auto h, auto qi, auto ki) {
                          return s + slopes[h] * (ki - qi);
                        })
                        .value();
                  },
                  kSelf)
                  .sums({"Dh", "L"})
                  .large_inputs(40, 1000, {"q", "k"}));
  c.push_back(one_output(
                  "f64_linear_attention",
                  [](Graph &g) {
                    Dim H = g.dim("H", 2), L = g.dim("L"), Dh = g.dim("Dh", 4);
                    Value q = g.input("q", DType::F64, {H, L, Dh}),
                          k = g.input("k", DType::F64, {H, L, Dh}),
                          v = g.input("v", DType::F64, {H, L, Dh});
                    return linear_attention(q, k, v);
                  },
                  {{{"L", 1}}, {{"L", 3}}, {{"L", 17}}, {{"L", 64}}}) // no batch dim
                  .sums({"Dh", "L"})
                  .large_inputs(40, 1, {"q", "k"}));
  return c;
}

// Dims bound to 0: no queries (an empty output), no keys (every row is fully masked: 0).
std::vector<DiffCase> zero_length_cases() {
  std::vector<DiffCase> c;
  c.push_back(one_output("no_queries_or_no_keys",
                         [](Graph &g) {
                           auto [q, k, v] = qkv_inputs(g, 4, 4, 2, true);
                           return attention(q, k, v).mask(causal_mask()).value();
                         },
                         {{{"B", 2}, {"L", 0}, {"S", 3}},
                          {{"B", 2}, {"L", 3}, {"S", 0}},
                          {{"B", 0}, {"L", 2}, {"S", 2}}})
                  .may_be_zero()
                  .large_inputs(40, 1000, {"q", "k"}));
  c.push_back(one_output("linear_attention_no_keys",
                         [](Graph &g) {
                           auto [q, k, v] = qkv_inputs(g, 3, 2, 2, true);
                           return linear_attention(q, k, v);
                         },
                         {{{"L", 3}, {"S", 0}}, {{"L", 0}, {"S", 3}}})
                  .may_be_zero()
                  .large_inputs(40, 1000, {"q", "k"}));
  return c;
}

class Attn : public ::testing::TestWithParam<DiffCase> {};

TEST_P(Attn, MatchesInterpreter) { run_differential(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Compiled, Attn, ::testing::ValuesIn(cases()),
                         [](const auto &info) { return info.param.name; });
INSTANTIATE_TEST_SUITE_P(ZeroLength, Attn, ::testing::ValuesIn(zero_length_cases()),
                         [](const auto &info) { return info.param.name; });

TEST(Recognition, SeedsWayBecomesOneAttentionOp) {
  Graph g("seeds_way");
  Dim L = g.dim("L"), D = g.dim("D", 6);
  Value x = g.input("x", DType::F32, {L, D});
  Value q = matmul(x, g.param("wq", DType::F32, {D, D}));
  Value k = matmul(x, g.param("wk", DType::F32, {D, D}));
  Value v = matmul(x, g.param("wv", DType::F32, {D, D}));
  g.output("out", matmul(softmax(mask(scale(matmul(q, transpose(k)), 0.25), causal_mask())), v));
  Kernel on = compile(g);
  std::string ir = on.ir("qkv");
  EXPECT_NE(ir.find("qkv.attention"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("qkv.softmax"), std::string::npos) << ir;
  CompileOptions off;
  off.recognize_attention = false;
  Kernel plain = compile(g, Target::host(), off);
  EXPECT_EQ(plain.ir("qkv").find("qkv.attention"), std::string::npos);
  // Both agree with each other and with the interpreter.
  TensorMap in = random_inputs(g, {{"L", 9}}, 7);
  TensorMap want = reference::run(g, in);
  for (Kernel *kern : {&on, &plain}) {
    Comparison c = compare(kern->run(in).at("out"), want.at("out"), 1e-5, 1e-4);
    EXPECT_TRUE(c.ok) << c.message;
  }
}

TEST(Recognition, LeavesSharedIntermediatesAlone) {
  // The softmax output is also an output: fusing would compute it twice, so no fusion.
  Graph g("shared");
  Dim L = g.dim("L"), D = g.dim("D", 4);
  Value q = g.input("q", DType::F32, {L, D}), k = g.input("k", DType::F32, {L, D}),
        v = g.input("v", DType::F32, {L, D});
  Value a = softmax(matmul(q, transpose(k)));
  g.output("a", a);
  g.output("out", matmul(a, v));
  Kernel kern = compile(g);
  EXPECT_EQ(kern.ir("qkv").find("qkv.attention"), std::string::npos);
  TensorMap in = random_inputs(g, {{"L", 5}}, 3);
  TensorMap got = kern.run(in), want = reference::run(g, in);
  for (const char *o : {"a", "out"}) {
    Comparison c = compare(got.at(o), want.at(o), 1e-5, 1e-4);
    EXPECT_TRUE(c.ok) << o << ": " << c.message;
  }
}

} // namespace
} // namespace qkv::test

namespace qkv::test {
namespace {

/// Rows of `t` (L, D) that hold a NaN.
std::vector<bool> nan_rows(const Tensor &t) {
  std::int64_t rows = t.shape()[0], cols = t.shape()[1];
  std::vector<bool> out(static_cast<std::size_t>(rows), false);
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j)
      if (std::isnan(t.at({i, j})))
        out[static_cast<std::size_t>(i)] = true;
  return out;
}

// One semantics for NaN scores (docs/dsl.md): a NaN among the scores a row keeps makes
// that row's output NaN; a NaN the mask removes does not count. The interpreter, the
// fused kernel and the unfused softmax agree.
TEST(NaN, PropagatesThroughEveryPathTheSameWay) {
  Graph g("nan_scores");
  Dim L = g.dim("L"), D = g.dim("D", 4);
  Value q = g.input("q", DType::F32, {L, D}), k = g.input("k", DType::F32, {L, D}),
        v = g.input("v", DType::F32, {L, D});
  g.output("out", matmul(softmax(mask(scale(matmul(q, transpose(k)), 0.5), causal_mask())), v));
  TensorMap in = random_inputs(g, {{"L", 40}}, 11);
  float *kd = in.at("k").data_as<float>();
  kd[2 * 4 + 1] = std::nanf(""); // key 2: every query from 2 on keeps a NaN score
  kd[39 * 4 + 0] = std::nanf(""); // key 39: only query 39 keeps it
  Tensor want = reference::run(g, in).at("out");
  std::vector<bool> expect(40, false);
  for (int i = 2; i < 40; ++i)
    expect[static_cast<std::size_t>(i)] = true;
  ASSERT_EQ(nan_rows(want), expect) << "the interpreter defines it";
  CompileOptions off;
  off.recognize_attention = false;
  for (bool fused : {true, false}) {
    SCOPED_TRACE(fused ? "fused attention" : "unfused softmax");
    Kernel kern = fused ? compile(g) : compile(g, Target::host(), off);
    Tensor got = kern.run(in).at("out");
    EXPECT_EQ(nan_rows(got), expect);
    for (std::int64_t i = 0; i < 2; ++i)
      for (std::int64_t j = 0; j < 4; ++j)
        EXPECT_NEAR(got.at({i, j}), want.at({i, j}), 1e-5);
  }
}

// The split-KV decode kernel (one static query) merges its splits' sums: a NaN key in
// one split makes the head's output NaN; the other head stays finite.
TEST(NaN, PropagatesThroughTheDecodeKernel) {
  Graph g("nan_decode");
  Dim H = g.dim("H", 2), one = g.dim("one", 1), S = g.dim("S"), D = g.dim("D", 8);
  Value q = g.input("q", DType::F32, {H, one, D}), k = g.input("k", DType::F32, {H, S, D}),
        v = g.input("v", DType::F32, {H, S, D});
  g.output("out", attention(q, k, v).value());
  TensorMap in = random_inputs(g, {{"S", 5000}}, 5);
  in.at("k").data_as<float>()[(1 * 5000 + 4321) * 8 + 3] = std::nanf(""); // head 1, key 4321
  Kernel kern = compile(g);
  ASSERT_NE(kern.ir("loops").find("omp_get_max_threads"), std::string::npos)
      << "the decode kernel (split over the keys) runs";
  Tensor got = kern.run(in).at("out"), want = reference::run(g, in).at("out");
  for (std::int64_t d = 0; d < 8; ++d) {
    EXPECT_TRUE(std::isnan(want.at({1, 0, d})) && std::isnan(got.at({1, 0, d}))) << d;
    EXPECT_NEAR(got.at({0, 0, d}), want.at({0, 0, d}), 1e-5) << d;
  }
}

} // namespace
} // namespace qkv::test
