// The CPU pipeline's pass lists per ISA tier (ir::cpuStagePipeline): what a tier adds and
// what no tier runs. The IR the passes make is checked by the lit tests and the
// differential tests; these guard the lists themselves, where a pass run twice or one
// conversion split into several costs compile time without changing any result.
#include <string>

#include <gtest/gtest.h>

#include "qkv/compiler/transforms/Passes.h"

namespace qkv {
namespace {

std::string llvm_stage(const std::string &isa) {
  ir::CpuPipelineOptions o;
  o.isa = isa;
  return ir::cpuStagePipeline(Stage::Llvm, o);
}

// One closing conversion on every tier: arith, index, func, cf, omp, vector, x86vector and
// amx all go through qkv-convert-to-llvm's one walk (and one type converter, which the amx
// tier's tiles need).
TEST(CpuPipeline, EveryTierClosesWithOneConversion) {
  for (const char *isa : {"f32", "avx512bf16", "amx"}) {
    SCOPED_TRACE(isa);
    std::string p = llvm_stage(isa);
    EXPECT_NE(p.find("qkv-convert-to-llvm"), std::string::npos) << p;
    for (const char *apart :
         {"convert-arith-to-llvm", "convert-index-to-llvm", "convert-func-to-llvm",
          "convert-openmp-to-llvm", "convert-vector-to-llvm", "expand-strided-metadata"})
      EXPECT_EQ(p.find(apart), std::string::npos) << apart << " in " << p;
  }
}

// The tiers' instructions (x86vector's dot, amx's tiles) are converted by that same pass,
// so the bf16 tiers' llvm stage is the f32 tier's without its bf16 expansion.
TEST(CpuPipeline, TiersShareOneLlvmStage) {
  std::string f32 = llvm_stage("f32");
  std::string expand = "qkv-expand-bf16-conversions,";
  std::size_t at = f32.find(expand);
  ASSERT_NE(at, std::string::npos) << f32;
  f32.erase(at, expand.size());
  EXPECT_EQ(llvm_stage("avx512bf16"), f32);
  EXPECT_EQ(llvm_stage("amx"), f32);
}

// Empty tensors inserted into a destination become slices of it before bufferization, so
// that an op written by parts (RoPE's halves) writes them in place.
TEST(CpuPipeline, EmptyTensorsEliminatedBeforeBufferizing) {
  std::string p = ir::cpuStagePipeline(Stage::Loops, {});
  std::size_t eliminate = p.find("eliminate-empty-tensors"),
              bufferize = p.find("one-shot-bufferize");
  ASSERT_NE(eliminate, std::string::npos) << p;
  ASSERT_NE(bufferize, std::string::npos) << p;
  EXPECT_LT(eliminate, bufferize) << p;
}

// The canonicalizations between and after the lowerings leave regions as they are (the
// code is in one-block structured regions until the llvm stage), and visit ops top down,
// as the canonicalize pass does by default.
TEST(CpuPipeline, LoweringsCanonicalizeWithoutRegionSimplification) {
  for (Stage stage : {Stage::Linalg, Stage::Loops}) {
    std::string p = ir::cpuStagePipeline(stage, {});
    std::size_t at = p.find("canonicalize{");
    ASSERT_NE(at, std::string::npos) << p;
    for (; at != std::string::npos; at = p.find("canonicalize{", at + 1))
      for (const char *option : {"region-simplify=disabled", "top-down=true"})
        EXPECT_NE(p.substr(at, p.find('}', at) - at).find(option), std::string::npos)
            << option << " in " << p;
  }
}

} // namespace
} // namespace qkv
