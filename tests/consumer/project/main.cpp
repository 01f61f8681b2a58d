// A user's program: typed DSL -> compile -> run -> check against the interpreter, and the
// qkv tool's commands as C++ calls (<qkv/tool.hpp>).
#include <iostream>

#include <qkv/qkv.hpp>
#include <qkv/tool.hpp>

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
  TensorMap in = random_inputs(g, {{"L", 5}}, {.seed = 42, .scale_params = true});
  ReferenceCheck c = check_against_reference(k, g, in);
  if (!c.ok) {
    std::cout << "consumer: mismatch: " << c.message;
    return 1;
  }
  std::cout << c.message;
  std::cout << "consumer: compiled kernel agrees with the interpreter (max_abs_err="
            << c.outputs.at(0).comparison.max_abs_err << ")\n";
  // <qkv/qkv.hpp> has the .safetensors reader too.
  try {
    SafeTensors::open("/nonexistent/model.safetensors");
    return 1;
  } catch (const Error &e) {
    std::cout << "consumer: SafeTensors says: " << e.what() << "\n";
  }
  std::string picture = tool::show(g, in);
  std::cout << picture.substr(0, picture.find('\n')) << "\n";
  return 0;
}
