// Every gallery graph, every listed shape: compiled vs interpreter.
#include "differential.hpp"
#include "gallery.hpp"
#include "half_cases.hpp"

#include <qkv/runtime/checks.hpp>
#include <qkv/runtime/cuda.hpp>

#include <map>
#include <memory>
#include <utility>

namespace qkv::test {
namespace {

/// The reductions of a variant (examples/gallery/): as the blocks below, with the keys
/// of self-attention on L; Linformer also sums over L (its projection) and attends over
/// Kp; linear attention sums phi(k)^T v over L.
///
/// The variants' blocks have D = 512: their projection weights (w*) are scaled by
/// 1/sqrt(fan-in), as models initialise them, so that every term stays O(1) (M = 1) and
/// scores are a tenth or so; the large set multiplies x (and memory) by 10, scores by
/// 100. Linformer's E and F stay in [-1, 1): its outputs would shrink to the tolerance.
DiffCase &variant_sums(DiffCase &c, const gallery::Entry &e) {
  const std::string &n = e.name;
  if (e.variant->form == gallery::Form::Attention)
    // ALiBi adds up to slope_0 * (L - 1) = 0.5 * 127 to the scores of the test shapes.
    return c.sums({"Dh", "L"}, n == "alibi" ? 64 : 1).large_inputs(10, n == "alibi" ? 164 : 100);
  std::vector<std::string> params;
  Graph g = e.build();
  for (NodeId id : g.arguments())
    if (g.node(id).op == OpKind::Param && g.node(id).name[0] == 'w')
      params.push_back(g.node(id).name);
  c.prepare = [params](TensorMap &in) {
    for (const std::string &p : params)
      times(p, 1 / std::sqrt(static_cast<double>(in.at(p).shape().front())))(in);
  };
  if (n == "linformer")
    return c.sums({"D", "L", "Dh", "Kp", "D"}, 1).large_inputs(10, 100);
  if (n == "linear_attn")
    return c.sums({"D", "L", "Dh", "D"}, 1).large_inputs(10, 100);
  return c.sums({"D", "Dh", n == "cross_attention" ? "S" : "L", "D"}, 1).large_inputs(10, 100);
}

/// A KV-cache entry's paged form (--paged) at its test shapes. Its dims (B, M, P) do not
/// say how many rows are cached (M = ceil(S / 16) pages hold them), so the prepare looks
/// S up by (B, M), which the test shapes keep distinct. The keys sum over M pages of 16
/// rows: M in n, and 16 in the magnitude (as tests/compiler/cache_test.cpp does).
DiffCase paged(const gallery::Entry &e, const gallery::GraphShape &base, const std::string &name) {
  std::map<std::pair<std::int64_t, std::int64_t>, gallery::GraphShape> by_pages;
  DiffCase c;
  c.name = name + "_paged";
  for (const DimBindings &d : e.shapes) {
    gallery::GraphShape s = e.with_dims(base, d);
    s.paged = true;
    c.shapes.push_back(e.dims(s));
    by_pages[{s.batch, s.pages_per_seq()}] = s;
  }
  gallery::GraphShape first = e.with_dims(base, e.shapes.front());
  first.paged = true;
  c.build = [&e, first] { return e.build(first); };
  c.prepare = [&e, by_pages](TensorMap &in) {
    const Tensor &table = in.at("block_table");
    e.prepare(in, by_pages.at({table.shape()[0], table.shape()[1]}));
  };
  c.sums({"Dh", "M"}, gallery::GraphShape::kPageRows)
      .large_inputs(10, 100 * gallery::GraphShape::kPageRows);
  return c;
}

/// The kernel benchmarks' entries, or the variants of examples/gallery/; with a half
/// dtype, the kernel benchmarks' entries built with it (`qkv --dtype`), named NAME_dtype
/// (the variants have f32 in their types).
std::vector<DiffCase> cases(bool variants, DType dtype = DType::F32) {
  std::vector<DiffCase> out;
  for (const auto &e : gallery::entries()) {
    if ((e.variant != nullptr) != variants || (variants && dtype != DType::F32))
      continue;
    gallery::GraphShape base = e.shape;
    base.dtype = dtype;
    DiffCase c;
    c.name = dtype == DType::F32 ? e.name : e.name + "_" + std::string(dtype_name(dtype));
    c.build = [&e, base] { return e.build(base); };
    c.shapes = e.shapes;
    if (e.prepare)
      // The entry's shape at this run's extents of its dynamic dims, read off the inputs.
      c.prepare = [&e, base, g = std::make_shared<Graph>(e.build(base))](TensorMap &in) {
        DimBindings all = bind_dims(*g, signature(in)), d;
        for (const std::string &name : e.dynamic)
          d[name] = all.at(name);
        e.prepare(in, e.with_dims(base, d));
      };
    if (e.variant) {
      out.push_back(variant_sums(c, e));
      continue;
    }
    // The chain of sums: the projections over D, q.k over the head dim, the softmax-weighted
    // sum over the keys, the output projection over D. Weights in [-1, 1) over D=64 make
    // terms of a few units and scores in the tens (M); the large set makes x ten times
    // larger: scores a hundred times larger. The attention-only entries sum over Dh and S
    // of inputs in [-1, 1): scores of a few units, a hundred times more in the large set.
    if (e.name == "seed")
      c.sums({"D", "D", "L"}, 10).large_inputs(10, 1000);
    else if (e.workload.form == gallery::Workload::Form::Attention)
      // In f16/bf16: one attention node over exact half inputs, within 2 half-type ulps.
      c.sums({"Dh", e.workload.cache ? "C" : "S"}, 1).large_inputs(10, 100).within_half_ulps(2);
    else
      c.sums({"D", "Dh", e.name == "cross" ? "S" : "L", "D"}, 10).large_inputs(10, 10000);
    out.push_back(c);
    if (e.workload.cache)
      out.push_back(paged(e, base, c.name));
  }
  return out;
}

class Gallery : public ::testing::TestWithParam<DiffCase> {};

TEST_P(Gallery, MatchesInterpreter) { run_differential(GetParam()); }

// Two ctest entries run them (tests/compiler/CMakeLists.txt): Kernels/* and Variants/*.
INSTANTIATE_TEST_SUITE_P(Kernels, Gallery, ::testing::ValuesIn(cases(false)),
                         [](const auto &info) { return info.param.name; });
INSTANTIATE_TEST_SUITE_P(Variants, Gallery, ::testing::ValuesIn(cases(true)),
                         [](const auto &info) { return info.param.name; });
// The kernel benchmarks' entries in bf16 on the CPU: the kernels read the half-precision
// operands, caches and head views in place (docs/compiler.md, "Half precision").
INSTANTIATE_TEST_SUITE_P(KernelsBf16, Gallery, ::testing::ValuesIn(cases(false, DType::BF16)),
                         [](const auto &info) { return info.param.name; });

// The CUDA pipeline's kernels before they are mapped to blocks and threads, run on the
// CPU (Target::gpu_tiles_on_host()): the GPU kernels' logic, checked without a GPU. The
// same cases and tolerances as above.
class GpuTiles : public ::testing::TestWithParam<DiffCase> {};

TEST_P(GpuTiles, MatchesInterpreter) {
  check_kernel(compile(GetParam().build(), Target::gpu_tiles_on_host()), GetParam());
}

/// Every gallery graph (f32), the kernel benchmarks' entries in bf16 (the attention ones
/// take the tensor-core kernel), then the f16 and bf16 cases of compiler_ops_test.
std::vector<DiffCase> all_cases() {
  std::vector<DiffCase> out = cases(false), more = cases(true), bf16 = cases(false, DType::BF16),
                        half = half_cases();
  for (const auto *part : {&more, &bf16, &half})
    out.insert(out.end(), part->begin(), part->end());
  return out;
}

INSTANTIATE_TEST_SUITE_P(All, GpuTiles, ::testing::ValuesIn(all_cases()),
                         [](const auto &info) { return info.param.name; });

// The tensor-core form of the attention kernel (f16/bf16 q, k, v) within a few units in
// the last place of the half type. The differential rule above allows C·eps·n, which in
// bf16 over n = Dh + S terms is looser than the outputs themselves; but an f16/bf16
// attention node differs from the interpreter only by its output rounding (half an ulp,
// for the kernel and for the interpreter each), the rounding of P to the half type before
// P V (at most 2^-9 of max |v| in bf16, 2^-12 in f16) and f32 sums. With q, k, v in
// [-1, 1) and |out| < 1, that is under 1.5 units in the last place of [0.5, 1); allowed:
// 2. Shapes with several
// warps, key tiles (full and partial), n and k steps of both products, and head dim 64.
void check_tensor_core_attention(const Target &target) {
  struct Case {
    const char *name;
    DType dtype;
    std::int64_t head_dim;
  };
  for (const Case &tc : {Case{"attn_causal", DType::BF16, 64}, Case{"attn_causal", DType::F16, 64},
                         Case{"attn_window", DType::BF16, 16}}) {
    double ulp = tc.dtype == DType::BF16 ? 0x1p-8 : 0x1p-11; // in [0.5, 1)
    const gallery::Entry &e = gallery::find(tc.name);
    gallery::GraphShape shape = e.shape;
    shape.dtype = tc.dtype;
    shape.head_dim = tc.head_dim;
    shape.window = 37;
    Graph g = e.build(shape);
    Kernel k = compile(g, target);
    ASSERT_NE(k.ir("linalg").find("#gpu.warp<x>"), std::string::npos)
        << tc.name << ": not the tensor-core form";
    for (const DimBindings &d : std::vector<DimBindings>{{{"B", 2}, {"L", 70}, {"S", 130}},
                                                         {{"B", 1}, {"L", 33}, {"S", 17}}}) {
      SCOPED_TRACE(std::string(tc.name) + " " + std::string(dtype_name(tc.dtype)) +
                   " Dh=" + std::to_string(tc.head_dim) + " [" + shape_name(d) + "]");
      TensorMap in = random_inputs(g, d, 7);
      TensorMap want = reference::run(g, deep_copy(in));
      Comparison c = compare(k.run(in).at("out"), want.at("out"), 2 * ulp, 0);
      EXPECT_TRUE(c.ok) << c.message;
    }
  }
}

TEST(TensorCoreTiles, AttentionWithinHalfUlps) {
  check_tensor_core_attention(Target::gpu_tiles_on_host());
}

// The same on a GPU (mma.sync), where there is one.
TEST(TensorCoreDevice, AttentionWithinHalfUlps) {
  std::string why;
  if (!cuda::available(&why))
    GTEST_SKIP() << why;
  std::string chip = cuda_chip_for(cuda::Device::get(0).arch());
  if (std::stoi(chip.substr(3)) < 80)
    GTEST_SKIP() << chip << ": mma.sync m16n8k16 needs sm_80 or later";
  check_tensor_core_attention(Target::cuda(chip));
}

// The same cases on a GPU (Target::cuda() for device 0), where there is one: what
// tests/gpu/run.sh runs on a GPU machine. Skipped, saying why, everywhere else.
class CudaDevice : public ::testing::TestWithParam<DiffCase> {};

TEST_P(CudaDevice, MatchesInterpreter) {
  std::string why;
  if (!cuda::available(&why))
    GTEST_SKIP() << why;
  std::string chip = cuda_chip_for(cuda::Device::get(0).arch());
  check_kernel(compile(GetParam().build(), Target::cuda(chip)), GetParam());
}

INSTANTIATE_TEST_SUITE_P(All, CudaDevice, ::testing::ValuesIn(all_cases()),
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
      if (def.kind == DimDef::Kind::Atomic && def.extent == kDynamic) {
        EXPECT_TRUE(dims.count(name)) << "dynamic dim " << name << " has no extent";
      }
  }
}

// Kernels are checked by default, and a checked kernel costs nothing where every load and
// division in its mods is proved safe from the dims (docs/compiler.md, "Checked kernels"):
// then it is the unchecked kernel. Every gallery entry is so, at its default and its
// benchmark shape; an entry that needs checks must say why here, with what they cost.
TEST(GalleryChecks, EveryEntryIsProvedSoCheckedCostsNothing) {
  for (const auto &e : gallery::entries())
    for (const gallery::GraphShape &s : {e.shape, e.bench_shape}) {
      Graph g = e.build(s);
      std::string unproved;
      for (const checks::Site &site : checks::sites(g))
        if (!site.proven)
          unproved += std::string(" ") + site.mod + " of node " + std::to_string(site.node);
      EXPECT_FALSE(checks::needs_checks(g)) << e.name << " at " << e.sizes(s)
                                            << " has unproved sites:" << unproved;
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
