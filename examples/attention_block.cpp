// The README's example, as a program: a causal attention block with ALiBi biases, written
// with the typed DSL, compiled for the CPU, run, and checked against the interpreter.
#include <iostream>

#include <qkv/qkv.hpp>

int main() {
  using namespace qkv;
  // [readme]
  constexpr auto B = dim<"B">; // bound at run time
  constexpr auto L = dim<"L">;
  constexpr auto D = dim<"D", 64>;
  constexpr auto H = dim<"H", 4>;
  constexpr auto Dh = dim<"Dh", 16>;

  Graph g("causal_alibi");
  auto x = g.input<f32>("x", B, L, D);
  auto wq = g.param<f32>("wq", D, H * Dh);
  auto wk = g.param<f32>("wk", D, H * Dh);
  auto wv = g.param<f32>("wv", D, H * Dh);
  auto wo = g.param<f32>("wo", D, D);
  auto slopes = g.param<f32>("slopes", H);

  auto q = split_heads(linear(x, wq), H, Dh); // (B, H, L, Dh)
  auto k = split_heads(linear(x, wk), H, Dh);
  auto v = split_heads(linear(x, wv), H, Dh);
  auto o = attention(q, k, v)
               .mask([](auto /*b*/, auto /*h*/, auto qi, auto ki) { return qi >= ki; })
               .score_mod([&](auto s, auto /*b*/, auto h, auto qi, auto ki) {
                 return s + slopes[h] * (ki - qi);
               });
  g.output("y", linear(merge_heads(o, D), wo));

  Kernel kernel = compile(g); // qkv dialect -> linalg -> loops -> LLVM -> JIT
  TensorMap inputs = random_inputs(g, {{"B", 2}, {"L", 33}}, /*seed=*/1);
  TensorMap out = kernel.run(inputs);
  std::cout << kernel.ir("qkv"); // or "linalg", "loops", "llvm", "llvm-ir", "asm"
  assert_close(out.at("y"), reference::run(g, inputs).at("y"), 1e-4, 1e-3);
  // [readme]
  std::cout << "attention_block: y " << out.at("y").type_str()
            << " agrees with the interpreter (atol 1e-4, rtol 1e-3)\n";
  return 0;
}
