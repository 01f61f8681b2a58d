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
  // Random inputs in [-1, 1), the weights scaled by 1/sqrt(fan-in) as a model's are.
  TensorMap inputs = random_inputs(g, {{"B", 2}, {"L", 33}}, {.seed = 1, .scale_params = true});
  TensorMap out = kernel.run(inputs);
  std::cout << kernel.ir("qkv"); // or "linalg", "loops", "llvm", "llvm-ir", "asm"
  // Against the interpreter, under the test suite's tolerance rule (no atol to pick):
  // require() throws a qkv::Error naming the worst element if one is off.
  std::cout << check_against_reference(kernel, g, inputs).require().message;
  // [readme]
  std::cout << "attention_block: y " << out.at("y").type_str()
            << " agrees with the interpreter (the tolerance rule of docs/compiler.md)\n";
  return 0;
}
