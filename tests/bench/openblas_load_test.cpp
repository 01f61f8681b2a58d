// The openblas baseline opens OpenBLAS when it first runs, not when the program loads: a
// linked OpenBLAS starts a thread pool whose idle workers spin for ~0.1 s, beside every
// `qkv` command's compile and the FMA peak `qkv bench` measures (bench/common/openblas.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "qkv_bench/baselines.hpp"

namespace {

/// Whether an OpenBLAS library (libopenblas*) is mapped into this process.
bool openblas_mapped() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find("/libopenblas") != std::string::npos)
      return true;
  return false;
}

TEST(OpenBlasBaseline, IsOpenedWhenItFirstRunsAndComputesTheProduct) {
  namespace qb = qkv::bench;
  auto all = qb::available_baselines();
  if (std::find(all.begin(), all.end(), qb::Baseline::OpenBlas) == all.end())
    GTEST_SKIP() << "skipped: built without OpenBLAS (" << qb::missing_baselines_reason() << ")";
  EXPECT_FALSE(openblas_mapped()) << "OpenBLAS was loaded before any baseline ran";
  // x (2, 3) . w (3, 2), worked by hand.
  const float x[] = {1, 2, 3, 4, 5, 6};
  const float w[] = {7, 8, 9, 10, 11, 12};
  float y[4] = {};
  qb::matmul(qb::Baseline::OpenBlas, 2, 3, 2, x, w, y, 1);
  EXPECT_TRUE(openblas_mapped());
  EXPECT_FLOAT_EQ(y[0], 58);
  EXPECT_FLOAT_EQ(y[1], 64);
  EXPECT_FLOAT_EQ(y[2], 139);
  EXPECT_FLOAT_EQ(y[3], 154);
  EXPECT_NE(qb::blas_config().find("OpenBLAS"), std::string_view::npos) << qb::blas_config();
}

} // namespace
