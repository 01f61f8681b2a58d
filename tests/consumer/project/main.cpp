// A user's program: typed DSL -> compile -> run -> check against the interpreter.
#include <iostream>

#include <qkv/qkv.hpp>

int main() {
  using namespace qkv;
  constexpr auto L = dim<"L">;
  constexpr auto D = dim<"D", 8>;
  Graph g("consumer");
  auto x = g.input<f32>("x", L, D);
  auto w = g.param<f32>("w", D, D);
  auto q = linear(x, w);
  auto y = attention(q, q, q).mask(causal_mask());
  g.output("y", y.value());

  Kernel k = compile(g);
  TensorMap in = random_inputs(g, {{"L", 5}}, 42);
  Tensor got = k.run(in).at("y");
  Tensor want = reference::run(g, in).at("y");
  Comparison c = compare(got, want, 1e-5, 1e-4);
  if (!c.ok) {
    std::cout << "consumer: mismatch: " << c.message << "\n";
    return 1;
  }
  std::cout << "consumer: compiled kernel agrees with the interpreter (max_abs_err="
            << c.max_abs_err << ", " << got.type_str() << ")\n";
  return 0;
}
