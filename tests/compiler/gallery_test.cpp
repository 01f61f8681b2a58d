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
    c.build = e.build;
    c.shapes = e.shapes;
    // The chain of sums: the projections over D, q.k over the head dim, the softmax-weighted
    // sum over the keys, the output projection over D. Weights in [-1, 1) over D=64 make
    // terms of a few units and scores in the tens (M); the large set makes x ten times
    // larger: scores a hundred times larger.
    if (e.name == "seed")
      c.sums({"D", "D", "L"}, 10).large_inputs(10, 1000);
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
