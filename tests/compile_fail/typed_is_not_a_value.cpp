// Must not compile: A typed value does not silently become an untyped Value (that would skip the checks).
// EXPECT: no viable conversion|cannot convert|no matching|conversion from .* to non-scalar type
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  auto x = g.input<f32>("x", dim<"L">);
  Value v = x; // an untyped op would take v without the typed checks
  (void)v;
}
