// Every op compiled for the CPU against the interpreter, on several shapes each: 1, odd
// sizes and dynamic dims. One graph per op (or per variant), compiled once.
#include "differential.hpp"
#include "half_cases.hpp"

#include <cmath>

namespace qkv::test {
namespace {

using DB = DimBindings;

const std::vector<DB> kRows = {{{"L", 1}}, {{"L", 3}}, {{"L", 17}}, {{"L", 129}}};

std::vector<DiffCase> cases() {
  std::vector<DiffCase> c;
  // ---- matmul / linear ----
  c.push_back(
      one_output(
          "matmul_2d",
          [](Graph &g) {
            Dim M = g.dim("M"), K = g.dim("K"), N = g.dim("N");
            return matmul(g.input("a", DType::F32, {M, K}), g.input("b", DType::F32, {K, N}));
          },
          {{{"M", 1}, {"K", 1}, {"N", 1}},
           {{"M", 3}, {"K", 17}, {"N", 5}},
           {{"M", 33}, {"K", 64}, {"N", 7}}})
          .sums({"K"}));
  c.push_back(
      one_output(
          "matmul_batched",
          [](Graph &g) {
            Dim B = g.dim("B"), M = g.dim("M"), K = g.dim("K", 6), N = g.dim("N");
            return matmul(g.input("a", DType::F32, {B, M, K}), g.input("b", DType::F32, {B, K, N}));
          },
          {{{"B", 1}, {"M", 1}, {"N", 1}}, {{"B", 3}, {"M", 5}, {"N", 9}}})
          .sums({"K"}));
  c.push_back(
      one_output(
          "matmul_broadcast_rhs",
          [](Graph &g) {
            Dim B = g.dim("B"), M = g.dim("M"), K = g.dim("K", 8), N = g.dim("N", 3);
            return matmul(g.input("a", DType::F32, {B, M, K}), g.param("w", DType::F32, {K, N}));
          },
          {{{"B", 2}, {"M", 7}}, {{"B", 1}, {"M", 1}}})
          .sums({"K"}));
  c.push_back(
      one_output(
          "matmul_broadcast_lhs",
          [](Graph &g) {
            Dim B = g.dim("B"), M = g.dim("M", 4), K = g.dim("K"), N = g.dim("N");
            return matmul(g.param("e", DType::F32, {M, K}), g.input("b", DType::F32, {B, K, N}));
          },
          {{{"B", 2}, {"K", 5}, {"N", 3}}, {{"B", 1}, {"K", 1}, {"N", 1}}})
          .sums({"K"}));
  c.push_back(
      one_output(
          "linear",
          [](Graph &g) {
            Dim L = g.dim("L"), D = g.dim("D", 12), F = g.dim("F", 5);
            return linear(g.input("x", DType::F32, {L, D}), g.param("w", DType::F32, {D, F}));
          },
          kRows)
          .sums({"D"}));
  c.push_back(one_output("linear_bias_3d",
                         [](Graph &g) {
                           Dim B = g.dim("B"), L = g.dim("L"), D = g.dim("D", 7), F = g.dim("F", 9);
                           return linear(g.input("x", DType::F32, {B, L, D}),
                                         g.param("w", DType::F32, {D, F}),
                                         g.param("b", DType::F32, {F}));
                         },
                         {{{"B", 1}, {"L", 1}}, {{"B", 2}, {"L", 17}}})
                  .sums({"D"}));
  // ---- shape ops ----
  c.push_back(one_output("transpose",
                         [](Graph &g) {
                           Dim A = g.dim("A"), B = g.dim("B", 3), C = g.dim("C");
                           return transpose(g.input("x", DType::F32, {A, B, C}), 0, 2);
                         },
                         {{{"A", 1}, {"C", 1}}, {{"A", 5}, {"C", 17}}}));
  c.push_back(one_output(
      "split_heads",
      [](Graph &g) {
        Dim B = g.dim("B"), L = g.dim("L"), D = g.dim("D", 12);
        return split_heads(g.input("x", DType::F32, {B, L, D}), g.dim("H", 3), g.dim("Dh", 4));
      },
      {{{"B", 1}, {"L", 1}}, {{"B", 2}, {"L", 17}}}));
  c.push_back(one_output(
      "merge_heads",
      [](Graph &g) {
        Dim H = g.dim("H", 3), L = g.dim("L"), Dh = g.dim("Dh", 5);
        return merge_heads(g.input("x", DType::F32, {H, L, Dh}));
      },
      kRows));
  // Found by the graph fuzzer (tests/fuzz): merge_heads whose heads or head dim is
  // dynamic, so that H*Dh is bound at run time, failed import ("invalid IR": the verifier
  // demanded static dims). (B, L, D) merges B "heads" of D features.
  c.push_back(one_output(
      "merge_heads_dynamic",
      [](Graph &g) {
        Dim B = g.dim("B"), L = g.dim("L", 4), D = g.dim("D");
        return merge_heads(g.input("x", DType::F32, {B, L, D}));
      },
      {{{"B", 1}, {"D", 1}}, {{"B", 3}, {"D", 5}}, {{"B", 2}, {"D", 17}}}));
  c.push_back(one_output(
      "merge_heads_dynamic_head_dim",
      [](Graph &g) {
        Dim H = g.dim("H", 3), L = g.dim("L"), Dh = g.dim("Dh");
        return merge_heads(g.input("x", DType::F32, {H, L, Dh}));
      },
      {{{"L", 1}, {"Dh", 1}}, {{"L", 5}, {"Dh", 7}}}));
  // Found by the graph fuzzer: one value under two output names, directly or through an
  // op that folds away (a transpose of an axis with itself, a scale by 1), crashed
  // buffer-results-to-out-params (qkv-copy-repeated-results now copies the repeats).
  for (int how = 0; how < 3; ++how) {
    DiffCase d;
    d.name = "repeated_output_" + std::to_string(how);
    d.build = [how] {
      Graph g("repeated_output");
      Dim L = g.dim("L"), D = g.dim("D", 5);
      Value s = softmax(g.input("x", DType::F32, {L, D}));
      g.output("a", s);
      g.output("b", how == 0 ? s : how == 1 ? transpose(s, 1, -1) : scale(s, 1.0));
      g.output("c", s);
      return g;
    };
    d.shapes = kRows;
    d.sums({"D"});
    c.push_back(d);
  }
  c.push_back(one_output(
                  "split_merge_roundtrip",
                  [](Graph &g) {
                    Dim L = g.dim("L"), D = g.dim("D", 6);
                    Value x = g.input("x", DType::F32, {L, D});
                    return merge_heads(split_heads(x, g.dim("H", 2), g.dim("Dk", 3)), D) -
                           x; // exactly 0
                  },
                  kRows)
                  .may_be_zero());
  c.push_back(one_output(
      "concat_features",
      [](Graph &g) {
        Dim L = g.dim("L"), A = g.dim("A", 3), B = g.dim("B", 5);
        return concat({g.input("a", DType::F32, {L, A}), g.input("b", DType::F32, {L, B})}, -1);
      },
      kRows));
  c.push_back(one_output(
      "concat_dynamic_axis",
      [](Graph &g) {
        Dim L = g.dim("L"), S = g.dim("S"), D = g.dim("D", 4);
        return concat({g.input("a", DType::F32, {L, D}), g.input("b", DType::F32, {S, D})}, 0);
      },
      {{{"L", 1}, {"S", 1}}, {{"L", 3}, {"S", 17}}}));
  // ---- elementwise ----
  c.push_back(one_output(
      "scale",
      [](Graph &g) {
        Dim L = g.dim("L"), D = g.dim("D", 5);
        return scale(g.input("x", DType::F32, {L, D}), -0.375);
      },
      kRows));
  c.push_back(one_output(
      "add_sub_mul_div_broadcast",
      [](Graph &g) {
        Dim B = g.dim("B"), L = g.dim("L"), D = g.dim("D", 6);
        Value x = g.input("x", DType::F32, {B, L, D}), y = g.input("y", DType::F32, {L, D});
        Value bias = g.param("bias", DType::F32, {D});
        // keep the divisor away from 0: 2 + bias*bias
        Value den = add(mul(bias, bias), g.constant("two", {D}, std::vector<double>(6, 2.0)));
        return div(sub(mul(add(x, y), x), bias), den);
      },
      {{{"B", 1}, {"L", 1}}, {{"B", 2}, {"L", 17}}}));
  c.push_back(one_output(
                  "gelu_exact",
                  [](Graph &g) {
                    Dim L = g.dim("L"), D = g.dim("D", 7);
                    return gelu(scale(g.input("x", DType::F32, {L, D}), 4.0));
                  },
                  kRows)
                  .sums({}, 4));
  // |x / sqrt 2| up to 8.5: past the f32 erf approximation's clamp at 4.
  c.push_back(one_output(
                  "gelu_exact_wide",
                  [](Graph &g) {
                    Dim L = g.dim("L"), D = g.dim("D", 7);
                    return gelu(scale(g.input("x", DType::F32, {L, D}), 12.0));
                  },
                  kRows)
                  .sums({}, 12));
  c.push_back(one_output(
                  "gelu_tanh",
                  [](Graph &g) {
                    Dim L = g.dim("L"), D = g.dim("D", 7);
                    return gelu(scale(g.input("x", DType::F32, {L, D}), 4.0), true);
                  },
                  kRows)
                  .sums({}, 4));
  c.push_back(one_output(
                  "silu_elu_swiglu",
                  [](Graph &g) {
                    Dim L = g.dim("L"), D = g.dim("D", 5);
                    Value x = scale(g.input("x", DType::F32, {L, D}), 3.0);
                    Value y = g.input("y", DType::F32, {L, D});
                    return add(swiglu(x, y), add(silu(y), elu(x, 0.7)));
                  },
                  kRows)
                  .sums({}, 3));
  // GeGLU's gate over both signs (scaled by 3): the exact GELU's erf, inline in f32.
  c.push_back(one_output(
                  "geglu",
                  [](Graph &g) {
                    Dim L = g.dim("L"), D = g.dim("D", 9);
                    Value gate = scale(g.input("gate", DType::F32, {L, D}), 3.0);
                    return geglu(gate, g.input("up", DType::F32, {L, D}));
                  },
                  kRows)
                  .sums({}, 3));
  // Logits up to +-90 capped at 30 (Gemma 2's final cap): tanh's linear part near 0, its
  // saturation past +-3 cap, both signs.
  c.push_back(one_output(
                  "softcap",
                  [](Graph &g) {
                    Dim L = g.dim("L"), D = g.dim("D", 11);
                    return softcap(scale(g.input("logits", DType::F32, {L, D}), 90.0), 30.0);
                  },
                  kRows)
                  .sums({}, 91));
  // Inputs up to +-40: e^x overflows nowhere and very negative x keeps e^x's digits.
  c.push_back(one_output(
                  "softplus",
                  [](Graph &g) {
                    Dim L = g.dim("L"), D = g.dim("D", 7);
                    return softplus(scale(g.input("x", DType::F32, {L, D}), 40.0));
                  },
                  kRows)
                  .sums({}, 41));
  // Inputs up to +-100: e^-x overflows nowhere in f32 below 88.7, and gives 0 past it.
  c.push_back(one_output(
                  "sigmoid",
                  [](Graph &g) {
                    Dim L = g.dim("L"), D = g.dim("D", 9);
                    return sigmoid(scale(g.input("x", DType::F32, {L, D}), 100.0));
                  },
                  kRows)
                  .sums({}, 1));
  // Both signs and zeros (inputs scaled by 3): the max is exact, so is the kernel.
  c.push_back(one_output(
                  "relu",
                  [](Graph &g) {
                    Dim L = g.dim("L"), D = g.dim("D", 6);
                    return relu(scale(g.input("x", DType::F32, {L, D}), 3.0));
                  },
                  kRows)
                  .sums({}, 3));
  // ---- softmax ----
  c.push_back(one_output("softmax_last",
                         [](Graph &g) {
                           Dim L = g.dim("L"), S = g.dim("S");
                           return softmax(scale(g.input("x", DType::F32, {L, S}), 5.0));
                         },
                         {{{"L", 1}, {"S", 1}}, {{"L", 3}, {"S", 17}}, {{"L", 2}, {"S", 129}}})
                  .sums({"S"}, 5)
                  .large_inputs(200, 1000));
  c.push_back(one_output(
                  "softmax_axis0",
                  [](Graph &g) {
                    Dim L = g.dim("L"), S = g.dim("S", 3);
                    return softmax(g.input("x", DType::F32, {L, S}), 0);
                  },
                  kRows)
                  .sums({"L"})
                  .large_inputs(1000, 1000));
  c.push_back(one_output("softmax_fully_masked_rows",
                         [](Graph &g) {
                           // Rows q < 2 are masked entirely: softmax must give 0 there, not NaN.
                           Dim L = g.dim("L"), S = g.dim("S");
                           Value m = mask(g.input("x", DType::F32, {L, S}),
                                          [](auto, auto, auto q, auto) { return q >= 2; });
                           return softmax(m);
                         },
                         {{{"L", 3}, {"S", 1}}, {{"L", 5}, {"S", 17}}})
                  .sums({"S"})
                  .large_inputs(1000, 1000));
  // ---- mods on score tensors ----
  c.push_back(
      one_output("mask_sliding_window_4d",
                 [](Graph &g) {
                   Dim B = g.dim("B"), H = g.dim("H", 2), L = g.dim("L"), S = g.dim("S");
                   return mask(g.input("s", DType::F32, {B, H, L, S}), sliding_window_mask(3));
                 },
                 {{{"B", 1}, {"L", 1}, {"S", 1}}, {{"B", 2}, {"L", 9}, {"S", 17}}})
          .may_be_infinite());
  c.push_back(one_output(
                  "mask_document_ids",
                  [](Graph &g) {
                    Dim L = g.dim("L");
                    Value doc = g.input("doc", DType::I32, {L});
                    Value s = g.input("s", DType::F32, {L, L});
                    return softmax(mask(s, [&](auto, auto, auto q, auto kv) {
                      return doc[q] == doc[kv] && q >= kv;
                    }));
                  },
                  kRows)
                  .sums({"L"})
                  .large_inputs(1000, 1000));
  c.push_back(one_output("score_mod_alibi_softcap",
                         [](Graph &g) {
                           Dim H = g.dim("H", 3), L = g.dim("L"), S = g.dim("S");
                           Value slopes = g.param("slopes", DType::F32, {H});
                           Value s = scale(g.input("s", DType::F32, {H, L, S}), 10.0);
                           return score_mod(s, [&](auto sc, auto, auto h, auto q, auto kv) {
                             return 5.0 * tanh(sc / 5.0) + slopes[h] * abs(kv - q) -
                                    select(q % 2 == 0, 0.5, 0.0) +
                                    max(to_float(len_kv() - len_q()), 0.0) +
                                    min(exp(sc * 0.1), log(abs(sc) + 1.0)) +
                                    sqrt(pow(abs(sc), 1.5));
                           });
                         },
                         {{{"L", 1}, {"S", 1}}, {{"L", 4}, {"S", 17}}})
                  .sums({}, 10));
  // ---- positions ----
  c.push_back(one_output("sinusoidal_pe_odd_d",
                         [](Graph &g) {
                           Dim B = g.dim("B"), L = g.dim("L"), D = g.dim("D", 7);
                           return sinusoidal_pe(g.input("x", DType::F32, {B, L, D}), 10000, 3);
                         },
                         {{{"B", 1}, {"L", 1}}, {{"B", 2}, {"L", 129}}}));
  c.push_back(one_output(
      "rope_halves",
      [](Graph &g) {
        Dim H = g.dim("H", 2), L = g.dim("L"), Dh = g.dim("Dh", 8);
        return rope(g.input("x", DType::F32, {H, L, Dh}), {10000, false, 5});
      },
      kRows));
  c.push_back(one_output(
      "rope_interleaved",
      [](Graph &g) {
        Dim L = g.dim("L"), Dh = g.dim("Dh", 6);
        return rope(g.input("x", DType::F32, {L, Dh}), {500, true, 0});
      },
      kRows));
  // ---- norms ----
  c.push_back(one_output(
                  "layer_norm_affine",
                  [](Graph &g) {
                    Dim L = g.dim("L"), D = g.dim("D", 9);
                    return layer_norm(g.input("x", DType::F32, {L, D}),
                                      g.param("gamma", DType::F32, {D}),
                                      g.param("beta", DType::F32, {D}), 1e-5);
                  },
                  kRows)
                  .sums({"D"})
                  .large_inputs(1000, 1));
  c.push_back(one_output("layer_norm_plain_dynamic_d",
                         [](Graph &g) {
                           Dim L = g.dim("L"), D = g.dim("D");
                           return layer_norm(g.input("x", DType::F32, {L, D}), 1e-3);
                         },
                         {{{"L", 1}, {"D", 2}}, {{"L", 3}, {"D", 17}}})
                  .sums({"D"})
                  .large_inputs(1000, 1));
  c.push_back(one_output("rms_norm",
                         [](Graph &g) {
                           Dim B = g.dim("B"), L = g.dim("L"), D = g.dim("D", 16);
                           Value x = g.input("x", DType::F32, {B, L, D});
                           return add(rms_norm(x, g.param("gamma", DType::F32, {D})), rms_norm(x));
                         },
                         {{{"B", 1}, {"L", 1}}, {{"B", 2}, {"L", 17}}})
                  .sums({"D"})
                  .large_inputs(1000, 1));
  // Epsilon must be visible: a variance of about 3e-5 (x / 100) next to eps 1e-5, or eps
  // 1e-2 next to a variance of 1/3. Dropping eps changes these outputs by percents.
  c.push_back(one_output(
                  "layer_norm_small_variance",
                  [](Graph &g) {
                    Dim L = g.dim("L"), D = g.dim("D", 16);
                    return layer_norm(g.input("x", DType::F32, {L, D}),
                                      g.param("gamma", DType::F32, {D}),
                                      g.param("beta", DType::F32, {D}), 1e-5);
                  },
                  kRows)
                  .sums({"D"})
                  .inputs(times("x", 0.01))
                  .large_inputs(1000, 1));
  c.push_back(one_output(
                  "layer_norm_large_eps",
                  [](Graph &g) {
                    Dim L = g.dim("L"), D = g.dim("D", 16);
                    return layer_norm(g.input("x", DType::F32, {L, D}), 1e-2);
                  },
                  kRows)
                  .sums({"D"})
                  .large_inputs(1000, 1));
  c.push_back(one_output(
                  "rms_norm_small_variance",
                  [](Graph &g) {
                    Dim L = g.dim("L"), D = g.dim("D", 16);
                    return rms_norm(g.input("x", DType::F32, {L, D}),
                                    g.param("gamma", DType::F32, {D}), 1e-5);
                  },
                  kRows)
                  .sums({"D"})
                  .inputs(times("x", 0.01))
                  .large_inputs(1000, 1));
  c.push_back(one_output(
                  "rms_norm_large_eps",
                  [](Graph &g) {
                    Dim L = g.dim("L"), D = g.dim("D", 16);
                    return rms_norm(g.input("x", DType::F32, {L, D}), 1e-2);
                  },
                  kRows)
                  .sums({"D"})
                  .large_inputs(1000, 1));
  // ---- lookups and projections ----
  c.push_back(one_output(
      "embedding",
      [](Graph &g) {
        Dim B = g.dim("B"), L = g.dim("L"), V = g.dim("V", 11), D = g.dim("D", 6);
        return embedding(g.input("ids", DType::I32, {B, L}), g.param("table", DType::F32, {V, D}));
      },
      {{{"B", 1}, {"L", 1}}, {{"B", 3}, {"L", 17}}}));
  c.push_back(one_output(
      "embedding_i64",
      [](Graph &g) {
        Dim L = g.dim("L"), V = g.dim("V", 5), D = g.dim("D", 3);
        return embedding(g.input("ids", DType::I64, {L}), g.param("table", DType::F32, {V, D}));
      },
      kRows));
  c.push_back(one_output("linformer_project",
                         [](Graph &g) {
                           Dim H = g.dim("H", 2), S = g.dim("S"), Dh = g.dim("Dh", 4),
                               Kp = g.dim("Kp", 3);
                           return linformer_project(g.input("k", DType::F32, {H, S, Dh}),
                                                    g.param("e", DType::F32, {Kp, S}));
                         },
                         {{{"S", 1}}, {{"S", 17}}})
                  .sums({"S"}));
  c.push_back(one_output(
      "constant",
      [](Graph &g) {
        Dim L = g.dim("L"), D = g.dim("D", 3);
        return add(g.input("x", DType::F32, {L, D}), g.constant("c", {D}, {0.5, -1.25, 3.0}));
      },
      kRows));
  // ---- integer / and % in mods: C++ truncation (arith.divsi / arith.remsi) ----
  // kv - q is negative below the diagonal: -7 / 3 is -2 and -7 % 3 is -1 in C++, where a
  // floor division would give -3 and 2.
  c.push_back(one_output("mod_negative_div_rem",
                         [](Graph &g) {
                           Dim H = g.dim("H", 2), L = g.dim("L"), S = g.dim("S");
                           Value s = g.input("s", DType::F32, {H, L, S});
                           s = score_mod(s, [](auto sc, auto, auto h, auto q, auto kv) {
                             return sc + to_float((kv - q) / 3) + 0.25 * to_float((kv - q) % 3) +
                                    to_float((q - kv - h) / (h - 2));
                           });
                           return mask(
                               s, [](auto, auto, auto q, auto kv) { return (kv - q) % 4 != -1; });
                         },
                         {{{"L", 1}, {"S", 1}}, {{"L", 9}, {"S", 7}}, {{"L", 17}, {"S", 17}}})
                  .may_be_infinite());
  // ---- f64 graphs: the same lowerings in double precision ----
  c.push_back(one_output(
                  "f64_linear_softmax",
                  [](Graph &g) {
                    Dim L = g.dim("L"), D = g.dim("D", 12), S = g.dim("S", 5);
                    Value x = g.input("x", DType::F64, {L, D});
                    return softmax(scale(linear(x, g.param("w", DType::F64, {D, S})), 3.0));
                  },
                  kRows)
                  .sums({"D", "S"}, 3)
                  .large_inputs(300, 1000));
  c.push_back(one_output(
                  "f64_norms_activations",
                  [](Graph &g) {
                    Dim L = g.dim("L"), D = g.dim("D", 8);
                    Value x = g.input("x", DType::F64, {L, D});
                    Value ln = layer_norm(x, g.param("gamma", DType::F64, {D}),
                                          g.param("beta", DType::F64, {D}), 1e-2);
                    return add(add(gelu(ln), silu(rms_norm(x, 1e-2))), elu(scale(x, 2.0), 0.5));
                  },
                  kRows)
                  .sums({"D"}, 2)
                  .large_inputs(1000, 1000));
  c.push_back(one_output(
                  "f64_rope_pe_heads",
                  [](Graph &g) {
                    Dim L = g.dim("L"), D = g.dim("D", 8), H = g.dim("H", 2), Dh = g.dim("Dh", 4);
                    Value x = sinusoidal_pe(g.input("x", DType::F64, {L, D}), 10000, 2);
                    return merge_heads(rope(split_heads(x, H, Dh), {100, false, 1}), D);
                  },
                  kRows)
                  .sums({}, 200)); // in f64 the angles' rounding shows: positions reach 131
  c.push_back(one_output(
                  "f64_embedding_matmul",
                  [](Graph &g) {
                    Dim L = g.dim("L"), V = g.dim("V", 7), D = g.dim("D", 5);
                    Value e = embedding(g.input("ids", DType::I64, {L}),
                                        g.param("table", DType::F64, {V, D}));
                    return matmul(e, transpose(e));
                  },
                  kRows)
                  .sums({"D"}));
  return c;
}

// Dims bound to 0 at run time: empty outputs, and sums over nothing (0, not garbage).
std::vector<DiffCase> zero_length_cases() {
  std::vector<DiffCase> c;
  c.push_back(one_output("linear_no_rows",
                         [](Graph &g) {
                           Dim L = g.dim("L"), D = g.dim("D", 4), F = g.dim("F", 3);
                           return linear(g.input("x", DType::F32, {L, D}),
                                         g.param("w", DType::F32, {D, F}),
                                         g.param("b", DType::F32, {F}));
                         },
                         {{{"L", 0}}, {{"L", 2}}}));
  c.push_back(
      one_output(
          "matmul_empty_contraction", // every element is a sum over nothing: 0
          [](Graph &g) {
            Dim M = g.dim("M"), K = g.dim("K"), N = g.dim("N");
            return matmul(g.input("a", DType::F32, {M, K}), g.input("b", DType::F32, {K, N}));
          },
          {{{"M", 3}, {"K", 0}, {"N", 2}},
           {{"M", 0}, {"K", 4}, {"N", 2}},
           {{"M", 2}, {"K", 3}, {"N", 0}}})
          .may_be_zero());
  // The product is an intermediate buffer (malloc'd; MALLOC_PERTURB_ in this test's
  // environment fills fresh allocations with junk), so a kernel that skipped writing the
  // sums over nothing would add junk, not 0.
  c.push_back(one_output("matmul_empty_contraction_into_an_op",
                         [](Graph &g) {
                           Dim M = g.dim("M"), K = g.dim("K"), N = g.dim("N", 3);
                           Value p = matmul(g.input("a", DType::F32, {M, K}),
                                            g.input("b", DType::F32, {K, N}));
                           return add(p, g.input("c", DType::F32, {M, N}));
                         },
                         {{{"M", 5}, {"K", 0}}, {{"M", 70}, {"K", 0}}}));
  c.push_back(one_output("softmax_empty_axis_and_rows",
                         [](Graph &g) {
                           Dim L = g.dim("L"), S = g.dim("S");
                           return softmax(g.input("x", DType::F32, {L, S}));
                         },
                         {{{"L", 3}, {"S", 0}}, {{"L", 0}, {"S", 5}}})
                  .large_inputs(1000, 1000));
  c.push_back(one_output("norms_heads_no_rows",
                         [](Graph &g) {
                           Dim B = g.dim("B"), L = g.dim("L"), D = g.dim("D", 8);
                           Value x = g.input("x", DType::F32, {B, L, D});
                           Value y = add(layer_norm(x), rms_norm(x));
                           return merge_heads(rope(split_heads(y, g.dim("H", 2), g.dim("Dh", 4))),
                                              D);
                         },
                         {{{"B", 0}, {"L", 3}}, {{"B", 2}, {"L", 0}}})
                  .large_inputs(1000, 1000));
  c.push_back(one_output(
      "concat_with_an_empty_part",
      [](Graph &g) {
        Dim L = g.dim("L"), S = g.dim("S"), D = g.dim("D", 3);
        return concat({g.input("a", DType::F32, {L, D}), g.input("b", DType::F32, {S, D})}, 0);
      },
      {{{"L", 2}, {"S", 0}}, {{"L", 0}, {"S", 3}}}));
  c.push_back(one_output(
      "embedding_no_ids",
      [](Graph &g) {
        Dim L = g.dim("L"), V = g.dim("V", 4), D = g.dim("D", 3);
        return embedding(g.input("ids", DType::I32, {L}), g.param("table", DType::F32, {V, D}));
      },
      {{{"L", 0}}}));
  c.push_back(one_output("mask_score_mod_no_keys",
                         [](Graph &g) {
                           Dim L = g.dim("L"), S = g.dim("S");
                           Value s = score_mod(g.input("s", DType::F32, {L, S}),
                                               [](auto sc, auto, auto, auto q, auto kv) {
                                                 return sc * to_float(q - kv);
                                               });
                           return softmax(mask(s, causal_mask()));
                         },
                         {{{"L", 3}, {"S", 0}}, {{"L", 0}, {"S", 3}}})
                  .large_inputs(1000, 1000));
  return c;
}

class Ops : public ::testing::TestWithParam<DiffCase> {};

TEST_P(Ops, MatchesInterpreter) { run_differential(GetParam()); }

// Rounding happens at every half-precision node, not only at the outputs: (1 + 3 * 2^-9)
// - 1 is 2^-7 in bf16, whose sum rounds up first (computed in f32 throughout it would be
// 3 * 2^-9), and exact in f16. Compiled and interpreted agree bit for bit.
TEST(HalfPrecision, CompiledKernelsRoundAtEveryNode) {
  for (auto [t, want] : {std::pair{DType::BF16, 0x1p-7}, std::pair{DType::F16, 3.0 / 512}}) {
    Graph g(std::string(dtype_name(t)) + "_rounding");
    Dim N = g.dim("N");
    Value x = g.input("x", t, {N}), y = g.input("y", t, {N});
    g.output("d", sub(add(x, y), x));
    TensorMap in{{"x", Tensor::from_values(t, {2}, {1.0, -1.0})},
                 {"y", Tensor::from_values(t, {2}, {3.0 / 512, -3.0 / 512})}};
    Tensor got = compile(g).run(in).at("d");
    Tensor ref = reference::run(g, in).at("d");
    ASSERT_EQ(got.dtype(), t);
    for (std::int64_t i = 0; i < 2; ++i) {
      EXPECT_EQ(got.get(i), (i == 0 ? 1 : -1) * want) << dtype_name(t) << " element " << i;
      EXPECT_EQ(got.get(i), ref.get(i)) << dtype_name(t) << " element " << i;
    }
  }
}

// softplus of very negative x is e^x, tiny: the compiled kernel keeps its digits (relative
// error of a few f32 ulps), where log(1 + e^x) would round it to 0 below x = -17 and the
// tolerance rule (absolute, at the inputs' magnitude) would not notice. Large x is x.
TEST(Softplus, CompiledKeepsTheDigitsOfTinyResults) {
  Graph g("softplus_tails");
  g.output("y", softplus(g.input("x", DType::F32, {g.dim("N")})));
  std::vector<double> xs = {-87, -60, -40, -20, -17, -10, -1e-3, 0, 1e-3, 10, 20, 40, 88.5};
  TensorMap in{{"x", Tensor::from_values(DType::F32, {static_cast<std::int64_t>(xs.size())}, xs)}};
  Tensor got = compile(g).run(in).at("y");
  Tensor ref = reference::run(g, in).at("y");
  for (std::int64_t i = 0; i < got.numel(); ++i)
    EXPECT_NEAR(got.get(i) / ref.get(i), 1.0, 8 * 0x1p-24) << "softplus(" << xs[i] << ")";
}

INSTANTIATE_TEST_SUITE_P(Compiled, Ops, ::testing::ValuesIn(cases()),
                         [](const auto &info) { return info.param.name; });
INSTANTIATE_TEST_SUITE_P(ZeroLength, Ops, ::testing::ValuesIn(zero_length_cases()),
                         [](const auto &info) { return info.param.name; });
INSTANTIATE_TEST_SUITE_P(Half, Ops, ::testing::ValuesIn(half_cases()),
                         [](const auto &info) { return info.param.name; });

} // namespace
} // namespace qkv::test
