// Every gallery graph, every listed shape: compiled vs interpreter.
#include "differential.hpp"
#include "gallery.hpp"

namespace qkv::test {
namespace {

std::vector<DiffCase> cases() {
  std::vector<DiffCase> out;
  for (const auto &e : gallery::entries())
    out.push_back({e.name, [&e] { return e.build(); }, e.shapes});
  return out;
}

class Gallery : public ::testing::TestWithParam<DiffCase> {};

TEST_P(Gallery, MatchesInterpreter) {
  // Gallery blocks sum over D=64 with random weights in [-1, 1): outputs reach ~40, so
  // the relative term dominates.
  DiffCase c = GetParam();
  c.rtol = 2e-3;
  run_differential(c);
}

INSTANTIATE_TEST_SUITE_P(All, Gallery, ::testing::ValuesIn(cases()),
                         [](const auto &info) { return info.param.name; });

} // namespace
} // namespace qkv::test
