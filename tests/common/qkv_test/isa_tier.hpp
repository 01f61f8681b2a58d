// The ISA tier a test binary runs its kernels on (docs/compiler.md, "ISA tiers"): ctest
// runs such a binary once per tier with QKV_TEST_ISA=<tier>, and on a host whose CPU
// lacks the tier it prints "skipped: no <cpu flag>" and exits 77, which ctest reports as
// skipped (SKIP_RETURN_CODE), never as passed. Include it in one source of the binary,
// which then gets this main() instead of gtest_main's.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include <qkv/compiler/compile.hpp>

namespace qkv::test {

/// The tier under test: QKV_TEST_ISA, else the host's best.
inline Isa tier_under_test() {
  const char *v = std::getenv("QKV_TEST_ISA");
  return v && *v ? parse_isa(v, "QKV_TEST_ISA") : host_isa();
}

/// The /proc/cpuinfo flag a tier needs.
inline const char *cpu_flag_of(Isa isa) {
  return isa == Isa::Amx ? "amx_bf16" : isa == Isa::Avx512Bf16 ? "avx512_bf16" : "fma";
}

/// Compile options on the tier under test, the cache off.
inline CompileOptions on_tier(int threads = 0) {
  CompileOptions o;
  o.isa = tier_under_test();
  o.schedule.threads = threads;
  o.cache = CacheOptions::off();
  return o;
}

} // namespace qkv::test

int main(int argc, char **argv) {
  using namespace qkv;
  Isa isa = test::tier_under_test();
  std::vector<Isa> have = host_isas();
  if (std::find(have.begin(), have.end(), isa) == have.end()) {
    std::printf("skipped: no %s (this host's CPU lacks the %s tier)\n", test::cpu_flag_of(isa),
                isa_name(isa).c_str());
    return 77;
  }
  std::printf("tier under test: %s\n", isa_name(isa).c_str());
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
