// Every gallery graph, every listed shape: compiled vs interpreter.
#include "differential.hpp"
#include "gallery.hpp"

namespace qkv::test {
namespace {

std::vector<DiffCase> cases() {
  std::vector<DiffCase> out;
  for (const auto &e : gallery::entries()) {
    DiffCase c;
    c.name = e.name;
    c.build = [&e] { return e.build(); };
    c.shapes = e.shapes;
    // The chain of sums: the projections over D, q.k over the head dim, the softmax-weighted
    // sum over the keys, the output projection over D. Weights in [-1, 1) over D=64 make
    // terms of a few units and scores in the tens (M); the large set makes x ten times
    // larger: scores a hundred times larger. The attention-only entries sum over Dh and S
    // of inputs in [-1, 1): scores of a few units, a hundred times more in the large set.
    if (e.name == "seed")
      c.sums({"D", "D", "L"}, 10).large_inputs(10, 1000);
    else if (e.workload.form == gallery::Workload::Form::Attention)
      c.sums({"Dh", "S"}, 1).large_inputs(10, 100);
    else
      c.sums({"D", "Dh", e.name == "cross" ? "S" : "L", "D"}, 10).large_inputs(10, 10000);
    out.push_back(c);
  }
  return out;
}

class Gallery : public ::testing::TestWithParam<DiffCase> {};

TEST_P(Gallery, MatchesInterpreter) { run_differential(GetParam()); }

INSTANTIATE_TEST_SUITE_P(All, Gallery, ::testing::ValuesIn(cases()),
                         [](const auto &info) { return info.param.name; });

} // namespace
} // namespace qkv::test

namespace qkv::test {
namespace {

// Each entry's default shape is its first test shape, and its benchmark shape builds a
// valid graph whose dynamic dims are the entry's.
TEST(GalleryShapes, DefaultAndBenchShapes) {
  for (const auto &e : gallery::entries()) {
    SCOPED_TRACE(e.name);
    EXPECT_EQ(e.dims(e.shape), e.shapes.front());
    Graph g = e.build(e.bench_shape);
    g.verify();
    DimBindings dims = e.dims(e.bench_shape);
    EXPECT_NO_THROW(complete_dims(g, dims));
    for (const auto &[name, def] : g.dim_defs())
      if (def.kind == DimDef::Kind::Atomic && def.extent == kDynamic)
        EXPECT_TRUE(dims.count(name)) << "dynamic dim " << name << " has no extent";
  }
}

// Static sizes come from the shape: heads, head dim and window change the graph.
TEST(GalleryShapes, StaticSizesFromShape) {
  const auto &e = gallery::find("attn_window");
  gallery::GraphShape s = e.shape;
  s.heads = s.kv_heads = 3;
  s.head_dim = 8;
  s.window = 5;
  Graph g = e.build(s);
  EXPECT_EQ(g.dim_defs().at("H").extent, 3);
  EXPECT_EQ(g.dim_defs().at("Dh").extent, 8);
  EXPECT_NE(g.str().find("q - kv < 5"), std::string::npos);
  EXPECT_NE(g.hash(), e.build().hash());
  EXPECT_EQ(e.sizes(s), "B=2 H=3 L=16 S=16 Dh=8 W=5");
}

} // namespace
} // namespace qkv::test
