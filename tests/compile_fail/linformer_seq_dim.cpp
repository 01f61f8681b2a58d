// Must not compile: linformer_project's projection must end in the input's sequence dim: S vs L.
// EXPECT: Rule::linformer_projection_ends_in_seq_dim,
// EXPECT: "S"}
// EXPECT: "L"}
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  auto x = g.input<f32>("x", dim<"L">, dim<"D", 512>);
  auto e = g.param<f32>("e", dim<"Kp", 64>, dim<"S">);
  auto y = linformer_project(x, e);
}
