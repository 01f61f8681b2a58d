// Compiled kernels that outlive main: one in a namespace-scope object made before main, one
// in a function-local static made after the first compile, both destroyed during static
// destruction. The process must exit 0 with nothing reported (the sanitize build runs it
// under ASan + UBSan, LeakSanitizer included): a kernel's code, its JIT and the graph it
// keeps may not depend on objects that static destruction has already torn down.
#include <cstdio>
#include <optional>

#include <qkv/qkv.hpp>

namespace {

std::optional<qkv::Kernel> early; // constructed before main, destroyed last

qkv::Graph make_graph() {
  using namespace qkv;
  constexpr auto L = dim<"L">;
  constexpr auto D = dim<"D", 8>;
  Graph g("static_exit");
  auto x = g.input<f32>("x", L, D);
  auto w = g.param<f32>("w", D, D);
  auto q = linear(x, w);
  auto y = attention(q, q, q).mask(causal_mask());
  g.output("y", y.value());
  return g;
}

qkv::Kernel &late() {
  static qkv::Kernel k = qkv::compile(make_graph()); // after the compiler's own statics
  return k;
}

} // namespace

int main() {
  qkv::Graph g = make_graph();
  early.emplace(qkv::compile(g));
  qkv::TensorMap in = qkv::random_inputs(g, {{"L", 5}}, 7);
  qkv::Tensor a = early->run(in).at("y");
  qkv::Tensor b = late().run(in).at("y");
  (void)early->ir("llvm"); // a lazy stage, so its cache is alive at exit too
  if (!qkv::compare(a, b, 1e-6, 1e-6).ok) {
    std::puts("static_kernel_exit: the two kernels disagree");
    return 1;
  }
  std::puts("static_kernel_exit: ok");
  return 0;
}
