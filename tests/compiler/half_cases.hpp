// Differential cases of f16 and bf16 graphs, shared by compiler_ops_test (the CPU
// pipeline) and compiler_gallery_test (the CUDA pipeline's tiled kernels on the CPU, and on
// a GPU where there is one).
#pragma once

#include "differential.hpp"

namespace qkv::test {

// f16 and bf16 graphs: each op computes in f32 and its result is rounded to the node's
// dtype, as the interpreter rounds it (docs/compiler.md, "Half precision"); the
// tolerance is that dtype's.
inline std::vector<DiffCase> half_cases() {
  std::vector<DiffCase> c;
  for (DType t : {DType::BF16, DType::F16}) {
    std::string d(dtype_name(t));
    c.push_back(one_output(d + "_projection_block",
                           [t](Graph &g) {
                             Dim B = g.dim("B"), L = g.dim("L"), D = g.dim("D", 24);
                             Dim F = g.dim("F", 40);
                             Value x = g.input("x", t, {B, L, D});
                             Value h = gelu(linear(x, g.param("w1", t, {D, F}),
                                                   g.param("b1", t, {F})));
                             Value y = linear(h, g.param("w2", t, {F, D}));
                             return layer_norm(add(x, y), g.param("gamma", t, {D}),
                                               g.param("beta", t, {D}));
                           },
                           {{{"B", 1}, {"L", 1}}, {{"B", 2}, {"L", 17}}, {{"B", 3}, {"L", 70}}})
                    .sums({"D", "F"}));
    c.push_back(one_output(d + "_causal_attention",
                           [t](Graph &g) {
                             Dim B = g.dim("B"), H = g.dim("H", 2), L = g.dim("L");
                             Dim Dh = g.dim("Dh", 16);
                             auto in = [&](const char *name) {
                               return g.input(name, t, {B, H, L, Dh});
                             };
                             return attention(in("q"), in("k"), in("v")).mask(causal_mask()).value();
                           },
                           {{{"B", 1}, {"L", 1}}, {{"B", 2}, {"L", 33}}, {{"B", 1}, {"L", 130}}})
                    .sums({"Dh", "L"})
                    .within_half_ulps(2));
    // A user's scale of zero or below with a mask: the bf16 tier's query tiles took the
    // max of unscaled scores and scaled it, which only a positive scale commutes with
    // (masked -inf times -0.5 is +inf: every row NaN); L past the decode kernel's rows.
    for (double sc : {-0.5, 0.0})
      c.push_back(
          one_output(
              d + (sc < 0 ? "_masked_attention_negative_scale" : "_masked_attention_zero_scale"),
              [t, sc](Graph &g) {
                Dim H = g.dim("H", 2), L = g.dim("L"), Dh = g.dim("Dh", 16);
                auto in = [&](const char *name) { return g.input(name, t, {H, L, Dh}); };
                return attention(in("q"), in("k"), in("v")).scale(sc).mask(causal_mask()).value();
              },
              {{{"L", 17}}, {{"L", 40}}})
              .sums({"Dh", "L"}));
    // q's and k's RoPE over the same positions, as a Llama layer has them: one table, each
    // half read and written in the node's dtype (qkv-fuse-casts moves the casts through
    // the halves' slices).
    c.push_back(one_output(d + "_rope_q_and_k",
                           [t](Graph &g) {
                             Dim B = g.dim("B"), L = g.dim("L"), H = g.dim("H", 2);
                             Dim Dh = g.dim("Dh", 8), D = g.dim("D", 16);
                             Value pos = g.input("positions", DType::I64, {B, L});
                             auto rotated = [&](const char *name) {
                               Value x = split_heads(g.input(name, t, {B, L, D}), H, Dh);
                               return merge_heads(rope(x, pos), D);
                             };
                             return add(rotated("q"), rotated("k"));
                           },
                           {{{"B", 1}, {"L", 1}}, {{"B", 2}, {"L", 17}}, {{"B", 1}, {"L", 40}}}));
    c.push_back(one_output(d + "_constant_and_mixed_ops",
                           [t](Graph &g) {
                             Dim L = g.dim("L"), D = g.dim("D", 3);
                             Value x = g.input("x", t, {L, D});
                             Value c3 = g.constant("c", {D}, {0.5, -1.25, 3.0}, t);
                             return softmax(mul(add(x, c3), scale(x, 0.75)), -1);
                           },
                           {{{"L", 1}}, {{"L", 9}}})
                    .sums({"D"}, 4));
  }
  return c;
}

} // namespace qkv::test
