// Compiled kernels that outlive main, destroyed during static destruction: one in a
// namespace-scope object made before main, one in a function-local static made after the
// first compile, and a function-local static map of kernels made before the first compile
// (bench_attention's old cache, which crashed at exit), its kernel multi-threaded (OpenMP). The process must exit 0 with nothing reported (the sanitize build runs it
// under ASan + UBSan, LeakSanitizer included): a kernel's code, its JIT and the graph it
// keeps may not depend on objects that static destruction has already torn down.
#include <cstdio>
#include <map>
#include <memory>
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

std::map<int, std::unique_ptr<qkv::Kernel>> &cache() {
  static std::map<int, std::unique_ptr<qkv::Kernel>> all; // before the compiler's statics
  return all;
}

qkv::Graph wide_graph() {
  using namespace qkv;
  Graph g("static_exit_wide");
  Dim B = g.dim("B", 2), H = g.dim("H", 4), L = g.dim("L"), Dh = g.dim("Dh", 32);
  auto q = g.input("q", DType::F32, {B, H, L, Dh});
  auto k = g.input("k", DType::F32, {B, H, L, Dh});
  auto v = g.input("v", DType::F32, {B, H, L, Dh});
  g.output("o", attention(q, k, v).mask(causal_mask()).value());
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
  qkv::Graph wide = wide_graph();
  qkv::CompileOptions opts;
  opts.schedule.threads = 4;
  auto &slot = cache()[0];
  slot = std::make_unique<qkv::Kernel>(qkv::compile(wide, qkv::Target::host(), opts));
  qkv::TensorMap win = qkv::random_inputs(wide, {{"L", 200}}, 9);
  if (!qkv::compare(slot->run(win).at("o"), qkv::reference::run(wide, win).at("o"), 1e-4, 1e-4)
           .ok) {
    std::puts("static_kernel_exit: the multi-threaded kernel disagrees with the interpreter");
    return 1;
  }
  if (!qkv::compare(a, b, 1e-6, 1e-6).ok) {
    std::puts("static_kernel_exit: the two kernels disagree");
    return 1;
  }
  std::puts("static_kernel_exit: ok");
  return 0;
}
