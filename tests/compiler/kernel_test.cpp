// Kernel behaviour around the compiled code: argument checks (nothing written on a bad
// input), IR stages, QKV_DUMP, compile-time errors, and the ISA tier's choice.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include <gtest/gtest.h>

#include "qkv_test/errors.hpp"

#include <qkv/compiler/compile.hpp>
#include <qkv/runtime/cuda.hpp>
#include <qkv/runtime/interpreter.hpp>

#include <unistd.h>

namespace qkv {
namespace {

Graph small_graph() {
  Graph g("small");
  Dim L = g.dim("L"), D = g.dim("D", 4), V = g.dim("V", 6);
  Value ids = g.input("ids", DType::I32, {L});
  Value x = embedding(ids, g.param("table", DType::F32, {V, D}));
  g.output("y", linear(x, g.param("w", DType::F32, {D, D})));
  return g;
}

using test::error_of;

class KernelTest : public ::testing::Test {
protected:
  static void SetUpTestSuite() { kernel_ = new Kernel(compile(small_graph())); }
  static void TearDownTestSuite() { delete kernel_; }
  static TensorMap inputs(std::int64_t l = 5) {
    return random_inputs(kernel_->graph(), {{"L", l}}, 1);
  }
  static Kernel *kernel_;
};
Kernel *KernelTest::kernel_ = nullptr;

TEST_F(KernelTest, RunsAndAgreesWithInterpreter) {
  TensorMap in = inputs();
  Comparison c =
      compare(kernel_->run(in).at("y"), reference::run(kernel_->graph(), in).at("y"), 1e-5, 1e-4);
  EXPECT_TRUE(c.ok) << c.message;
}

TEST_F(KernelTest, MissingInputIsNamed) {
  TensorMap in = inputs();
  in.erase("w");
  EXPECT_NE(error_of([&] { kernel_->run(in); }).find("missing param 'w'"), std::string::npos);
}

TEST_F(KernelTest, UnknownInputIsNamed) {
  TensorMap in = inputs();
  in["wq"] = Tensor(DType::F32, {4, 4});
  std::string e = error_of([&] { kernel_->run(in); });
  EXPECT_NE(e.find("unknown input 'wq'"), std::string::npos) << e;
}

TEST_F(KernelTest, WrongDtypeIsNamed) {
  TensorMap in = inputs();
  in["w"] = in["w"].to(DType::F64);
  std::string e = error_of([&] { kernel_->run(in); });
  EXPECT_NE(e.find("'w' must be f32, got f64"), std::string::npos) << e;
}

TEST_F(KernelTest, WrongStaticDimIsNamed) {
  TensorMap in = inputs();
  in["w"] = Tensor(DType::F32, {4, 5});
  std::string e = error_of([&] { kernel_->run(in); });
  EXPECT_NE(e.find("dim 'D' must be 4, got 5"), std::string::npos) << e;
}

TEST_F(KernelTest, WrongRankIsNamed) {
  TensorMap in = inputs();
  in["ids"] = Tensor(DType::I32, {5, 1});
  std::string e = error_of([&] { kernel_->run(in); });
  EXPECT_NE(e.find("'ids'"), std::string::npos) << e;
  EXPECT_NE(e.find("[5, 1]"), std::string::npos) << e;
}

TEST_F(KernelTest, OutOfRangeEmbeddingIdIsAnErrorNotACrash) {
  TensorMap in = inputs();
  in["ids"].set(2, 6); // the table has 6 rows: 0..5
  std::string e = error_of([&] { kernel_->run(in); });
  EXPECT_NE(e.find("id 6"), std::string::npos) << e;
  EXPECT_NE(e.find("6 rows"), std::string::npos) << e;
}

TEST_F(KernelTest, NegativeEmbeddingIdIsAnError) {
  TensorMap in = inputs();
  in["ids"].set(4, -1);
  EXPECT_TRUE(test::ErrorSays([&] { kernel_->run(in); },
                              {"id -1 at flat position 4 of 'ids'", "outside the table's 6 rows"}));
}

TEST_F(KernelTest, EdgeEmbeddingIdsWork) {
  TensorMap in = inputs();
  in["ids"].set(0, 0);
  in["ids"].set(4, 5);
  Comparison c =
      compare(kernel_->run(in).at("y"), reference::run(kernel_->graph(), in).at("y"), 1e-5, 1e-4);
  EXPECT_TRUE(c.ok) << c.message;
}

/// ids (L) i64 into a table of 6 rows.
Graph i64_ids_graph() {
  Graph g("wide_ids");
  Dim L = g.dim("L"), D = g.dim("D", 3), V = g.dim("V", 6);
  g.output("y", embedding(g.input("ids", DType::I64, {L}), g.param("table", DType::F32, {V, D})));
  return g;
}

TEST(KernelIds, I64IdsAreCheckedExactly) {
  Kernel k = compile(i64_ids_graph());
  TensorMap in = random_inputs(k.graph(), {{"L", 4}}, 3);
  Comparison c = compare(k.run(in).at("y"), reference::run(k.graph(), in).at("y"), 0, 0);
  EXPECT_TRUE(c.ok) << c.message;
  // Ids a double cannot hold exactly must be named exactly.
  const std::int64_t big = (std::int64_t{1} << 53) + 1;
  const std::int64_t max = std::numeric_limits<std::int64_t>::max();
  const std::int64_t min = std::numeric_limits<std::int64_t>::min();
  for (std::int64_t id : {std::int64_t{-1}, std::int64_t{6}, big, max, min}) {
    TensorMap bad = in;
    bad["ids"] = Tensor::from_i64({4}, {0, 1, id, 2});
    EXPECT_TRUE(test::ErrorSays([&] { k.run(bad); },
                                {"id " + std::to_string(id) + " at flat position 2 of 'ids'",
                                 "outside the table's 6 rows"}))
        << id;
  }
}

// Ids from a constant are checked before the call like input ids (compiled code reads
// table rows unchecked); the vocab may be dynamic, so this waits for the run.
TEST(KernelIds, ConstantIdsAreCheckedToo) {
  Graph g("const_ids");
  Dim V = g.dim("V"), D = g.dim("D", 3);
  Value ids = g.constant("ids", {g.dim("N", 3)}, {0, 2, 4}, DType::I32);
  g.output("y", embedding(ids, g.param("table", DType::F32, {V, D})));
  Kernel k = compile(g);
  TensorMap fine = random_inputs(g, {{"V", 5}}, 1);
  Comparison c = compare(k.run(fine).at("y"), reference::run(g, fine).at("y"), 0, 0);
  EXPECT_TRUE(c.ok) << c.message;
  TensorMap small = random_inputs(g, {{"V", 4}}, 1);
  EXPECT_TRUE(test::ErrorSays([&] { k.run(small); },
                              {"id 4 at flat position 2 of 'ids'", "outside the table's 4 rows"}));
  EXPECT_NE(error_of([&] { reference::run(g, small); }).find("out of range"), std::string::npos);
}

TEST_F(KernelTest, EveryStageHasIr) {
  for (const std::string &s : Kernel::stage_names())
    EXPECT_FALSE(kernel_->ir(s).empty()) << s;
  EXPECT_NE(kernel_->ir("qkv").find("qkv.embedding"), std::string::npos);
  EXPECT_NE(kernel_->ir("linalg").find("linalg.generic"), std::string::npos);
  EXPECT_NE(kernel_->ir("loops").find("scf.for"), std::string::npos);
  EXPECT_NE(kernel_->ir("llvm").find("llvm.func"), std::string::npos);
  EXPECT_NE(kernel_->ir("llvm-ir").find("define"), std::string::npos);
  std::string as = kernel_->ir("asm");
  EXPECT_NE(as.find("ret"), std::string::npos) << as.substr(0, 500);
  EXPECT_NE(as.find(kernel_->symbol()), std::string::npos);
  std::string e = error_of([&] { kernel_->ir("ptx"); });
  EXPECT_NE(e.find("unknown IR stage 'ptx'"), std::string::npos) << e;
}

// The entry point (glue: descriptors unpacked, buffers allocated, regions called) is
// scheduled for a generic x86 CPU, which keeps the host's post-RA scheduler, quadratic in a
// block's length, off its one long block; every other function is tuned for the host.
TEST_F(KernelTest, EntryGlueIsTunedGenericKernelsForTheHost) {
  // The IR is one module per part, each with its own attribute groups.
  const std::string tuned = "\"tune-cpu\"=\"generic\"";
  int entries = 0, others = 0;
  std::istringstream parts(kernel_->ir("llvm-ir") + "\n; ModuleID");
  std::map<std::string, std::string> groups;            // "#N" -> its attributes
  std::vector<std::pair<std::string, std::string>> fns; // name, "#N"
  for (std::string line; std::getline(parts, line);) {
    if (line.rfind("; ModuleID", 0) == 0) {
      for (const auto &[name, group] : fns) {
        bool entry = name.rfind("_mlir_", 0) == 0;
        (entry ? entries : others)++;
        EXPECT_EQ(groups[group].find(tuned) != std::string::npos, entry)
            << name << ": " << groups[group];
      }
      groups.clear(), fns.clear();
    }
    if (line.rfind("attributes #", 0) == 0)
      groups[line.substr(11, line.find(' ', 11) - 11)] = line;
    if (line.rfind("define ", 0) == 0) {
      std::size_t at = line.find('@'), open = line.find('(', at), hash = line.rfind(" #");
      ASSERT_NE(hash, std::string::npos) << line;
      fns.emplace_back(line.substr(at + 1, open - at - 1),
                       line.substr(hash + 1, line.find(' ', hash + 1) - hash - 1));
    }
  }
  EXPECT_EQ(entries, 1); // the packed wrapper, the C interface inlined into it
  EXPECT_GT(others, 0);
}

TEST(Threads, SmallLoopsRunOnTheCallingThread) {
  // rms_norm over rows of 512: its loops fork only when there are rows enough
  // (qkv-serialize-small-parallel's if clause); 1 and 7 rows run on the calling thread,
  // 300 on both, all as the interpreter computes them.
  Graph g("rows");
  Dim B = g.dim("B"), D = g.dim("D", 512);
  g.output("y", rms_norm(g.input("x", DType::F32, {B, D}), g.param("w", DType::F32, {D})));
  CompileOptions o;
  o.schedule.threads = 2;
  Kernel k = compile(g, Target::host(), o);
  EXPECT_NE(k.ir("llvm").find("omp.parallel if("), std::string::npos);
  for (std::int64_t rows : {1, 7, 300}) {
    TensorMap in = random_inputs(g, {{"B", rows}}, 3);
    Comparison c = compare(k.run(in).at("y"), reference::run(g, in).at("y"), 1e-5, 1e-4);
    EXPECT_TRUE(c.ok) << rows << " rows: " << c.message;
  }
}

TEST_F(KernelTest, StagesByEnumAndByName) {
  // One name per stage, parsed back to it; the kernel's and lower_to's stages by either.
  for (Stage s : {Stage::Graph, Stage::Qkv, Stage::Linalg, Stage::Loops, Stage::Llvm, Stage::LlvmIr,
                  Stage::Asm, Stage::Gpu, Stage::Nvvm, Stage::Ptx})
    EXPECT_EQ(parse_stage(stage_name(s)), s) << stage_name(s);
  EXPECT_EQ(parse_stage("llvmir"), std::nullopt);
  std::vector<std::string> names;
  for (Stage s : kCpuStages)
    names.emplace_back(stage_name(s));
  EXPECT_EQ(names, Kernel::stage_names());
  EXPECT_EQ(kernel_->ir(Stage::Loops), kernel_->ir("loops"));
  EXPECT_EQ(lower_to(kernel_->graph(), Target::host(), Stage::Qkv),
            lower_to(kernel_->graph(), Target::host(), "qkv"));
}

TEST(Compile, StatsCoverTheStages) {
  // A real compile (the kernel cache not read): the pipeline's stages, in order.
  CompileOptions o;
  o.cache.read = false;
  Kernel k = compile(small_graph(), Target::host(), o);
  const CompileStats &s = k.stats();
  EXPECT_FALSE(s.from_cache);
  EXPECT_GT(s.total_ms, 0);
  ASSERT_EQ(s.stage_ms.size(), 6u);
  std::vector<std::string> want = {"graph", "qkv", "linalg", "loops", "llvm", "llvm-ir"};
  for (std::size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(s.stage_ms[i].first, want[i]);
}

TEST_F(KernelTest, StatsSayWhereTheKernelCameFrom) {
  // The suite's kernel may come from the kernel cache (ctest keeps one in the build tree):
  // either way the stats are consistent.
  const CompileStats &s = kernel_->stats();
  EXPECT_GT(s.total_ms, 0);
  if (s.from_cache) {
    ASSERT_EQ(s.stage_ms.size(), 1u);
    EXPECT_EQ(s.stage_ms[0].first, "cache");
    EXPECT_EQ(s.cache_note, "hit");
  } else {
    ASSERT_GE(s.stage_ms.size(), 5u);
    EXPECT_EQ(s.stage_ms[1].first, "qkv");
  }
}

TEST(Compile, StagesNotPrintedAreMadeOnDemand) {
  // compile() keeps only the stages it printed; kernel.ir() makes the others by compiling
  // again, and they are what lower_to() (one compile keeping every stage) gives.
  CompileOptions o;
  o.cache = CacheOptions::off();
  o.dump = {"linalg"};
  testing::internal::CaptureStderr();
  Kernel k = compile(small_graph(), Target::host(), o);
  std::string printed = testing::internal::GetCapturedStderr();
  o.dump.clear();
  for (const char *stage : {"qkv", "linalg", "loops", "llvm", "llvm-ir"})
    EXPECT_EQ(k.ir(stage), lower_to(small_graph(), Target::host(), stage, o)) << stage;
  EXPECT_NE(printed.find(k.ir("linalg")), std::string::npos);
}

TEST(Compile, DumpOptionPrintsStagesToStderr) {
  CompileOptions o;
  o.dump = {"qkv", "llvm"};
  testing::internal::CaptureStderr();
  compile(small_graph(), Target::host(), o);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("qkv stage 'qkv' of graph 'small'"), std::string::npos) << err;
  EXPECT_NE(err.find("qkv stage 'llvm' of graph 'small'"), std::string::npos);
  EXPECT_EQ(err.find("qkv stage 'loops'"), std::string::npos);
}

TEST(Compile, NegativeCompileThreadsIsAnError) {
  CompileOptions o;
  o.compile_threads = -1;
  EXPECT_TRUE(test::ErrorSays([&] { compile(small_graph(), Target::host(), o); },
                              {"CompileOptions::compile_threads must be 0", "got -1"}));
}

/// A graph compile() refuses: it has an input but no output.
Graph outputless_graph(const std::string &name) {
  Graph g(name);
  g.input("x", DType::F32, {g.dim("L")});
  return g;
}

TEST(Compile, CompileAllGivesEachGraphsKernelInOrder) {
  CompileOptions o;
  o.cache = CacheOptions::off();
  o.compile_threads = 2;
  Graph relu_graph("silu_only");
  relu_graph.output("y", silu(relu_graph.input("x", DType::F32, {relu_graph.dim("L")})));
  std::vector<Graph> graphs = {small_graph(), relu_graph, small_graph()};
  std::vector<Kernel> ks = compile_all(graphs, Target::host(), o);
  ASSERT_EQ(ks.size(), 3u);
  for (std::size_t i = 0; i < ks.size(); ++i) {
    EXPECT_EQ(ks[i].graph().name(), graphs[i].name()) << i;
    TensorMap in = random_inputs(graphs[i], {{"L", 9}}, 3);
    Tensor y = ks[i].run(in).at("y");
    Comparison c = compare(y, reference::run(graphs[i], in).at("y"), 1e-6, 1e-5);
    EXPECT_TRUE(c.ok) << i << ": " << c.message;
    // What compile() alone makes of the graph, bit for bit.
    Comparison same = compare(y, compile(graphs[i], Target::host(), o).run(in).at("y"), 0, 0);
    EXPECT_TRUE(same.ok) << i << ": " << same.message;
  }
}

TEST(Compile, CompileAllThrowsTheFirstFailingGraphsError) {
  CompileOptions o;
  o.cache = CacheOptions::off();
  o.compile_threads = 3;
  std::vector<Graph> graphs = {small_graph(), outputless_graph("first"),
                               outputless_graph("second")};
  EXPECT_TRUE(test::ErrorSays([&] { compile_all(graphs, Target::host(), o); },
                              {"graph 'first' has no outputs"}));
  o.compile_threads = -2;
  EXPECT_TRUE(test::ErrorSays([&] { compile_all({small_graph()}, Target::host(), o); },
                              {"compile_threads must be 0", "got -2"}));
  EXPECT_TRUE(compile_all({}, Target::host(), CompileOptions{}).empty());
}

TEST(Cuda, CompileNeedsAGpu) {
  Graph g("silu_gpu");
  g.output("y", silu(g.input("x", DType::F32, {g.dim("L")})));
  std::string why;
  if (cuda::available(&why))
    GTEST_SKIP() << "a CUDA device is here (compiler_cuda_kernel_test and tests/gpu/run.sh "
                    "cover compiling for it)";
  EXPECT_TRUE(test::ErrorSays([&] { compile(g, Target::cuda()); }, {"no CUDA device", why}));
}

TEST(Cuda, LowerToGivesEachStageWithoutAGpu) {
  Graph g("attn_gpu");
  Dim B = g.dim("B"), H = g.dim("H", 2), L = g.dim("L"), Dh = g.dim("Dh", 16);
  Value q = g.input("q", DType::F32, {B, H, L, Dh});
  Attention a = attention(q, g.input("k", DType::F32, {B, H, L, Dh}),
                          g.input("v", DType::F32, {B, H, L, Dh}));
  a.mask([](auto, auto, auto i, auto j) { return i >= j; });
  g.output("y", a.value());
  EXPECT_NE(lower_to(g, Target::cuda(), "linalg").find("mapping = [#gpu.block<x>"),
            std::string::npos);
  EXPECT_NE(lower_to(g, Target::cuda(), "gpu").find("gpu.launch_func"), std::string::npos);
  EXPECT_NE(lower_to(g, Target::cuda(), "nvvm").find("nvvm.barrier"), std::string::npos);
  // The softmax's exp2 comes from the CUDA toolkit's libdevice: without a toolkit the PTX
  // stage says so instead of giving PTX that calls an undefined function.
  bool toolkit = false;
  for (const char *v : {"CUDA_ROOT", "CUDA_HOME", "CUDA_PATH"})
    toolkit |= std::getenv(v) && std::filesystem::exists(std::string(std::getenv(v)) + "/nvvm/libdevice");
  toolkit |= std::filesystem::exists("/usr/local/cuda/nvvm/libdevice");
  if (toolkit) {
    std::string ptx = lower_to(g, Target::cuda("sm_80"), "ptx");
    EXPECT_NE(ptx.find(".target sm_80"), std::string::npos) << ptx.substr(0, 400);
    EXPECT_NE(ptx.find(".entry"), std::string::npos);
    EXPECT_NE(ptx.find("bar.sync"), std::string::npos);
    EXPECT_EQ(ptx.find(".extern .func"), std::string::npos);
  } else {
    EXPECT_TRUE(test::ErrorSays([&] { lower_to(g, Target::cuda("sm_80"), "ptx"); },
                                {"libdevice", "no CUDA toolkit"}));
  }
  EXPECT_TRUE(test::ErrorSays([&] { lower_to(g, Target::cuda("sm_35"), "ptx"); },
                              {"unknown chip 'sm_35'", "sm_80"}));
  EXPECT_TRUE(test::ErrorSays([&] { lower_to(g, Target::cuda(), "llvm-ir"); },
                              {"unknown CUDA stage 'llvm-ir'", "ptx"}));
  CompileOptions checked;
  checked.checked = true;
  EXPECT_TRUE(test::ErrorSays([&] { lower_to(g, Target::cuda(), "ptx", checked); },
                              {"checked kernels are compiled for Target::host() only"}));
  EXPECT_EQ(lower_to(g, Target::cuda(), "graph"), g.str());
}

// The error names where the stage came from: the option, or the environment.
TEST(Compile, UnknownDumpStageIsAnError) {
  CompileOptions o;
  o.dump = {"bogus"};
  EXPECT_TRUE(test::ErrorSays([&] { compile(small_graph(), Target::host(), o); },
                              {"CompileOptions::dump: unknown stage 'bogus'"}));
  EXPECT_EQ(error_of([&] { compile(small_graph(), Target::host(), o); }).find("QKV_DUMP"),
            std::string::npos);
  ::setenv("QKV_DUMP", "qkv,nosuch", 1);
  std::string e = error_of([&] { compile(small_graph(), Target::host(), CompileOptions{}); });
  ::unsetenv("QKV_DUMP");
  EXPECT_NE(e.find("QKV_DUMP: unknown stage 'nosuch'"), std::string::npos) << e;
}

// LLVM's levels are 0-3; 7 used to be taken (and clamped to 3 when optimising).
TEST(Compile, OptLevelOutOfRangeIsAnError) {
  for (int level : {7, -1}) {
    CompileOptions o;
    o.opt_level = level;
    EXPECT_TRUE(test::ErrorSays([&] { compile(small_graph(), Target::host(), o); },
                                {"CompileOptions::opt_level must be an LLVM optimisation level, "
                                 "0 to 3, got " + std::to_string(level)}));
    EXPECT_TRUE(test::ErrorSays([&] { lower_to(small_graph(), Target::cuda(), "ptx", o); },
                                {"CompileOptions::opt_level"}));
  }
}

// f16 and bf16 graphs compile (computed in f32, rounded at every node, as the interpreter
// does: compiler_ops_test's Half cases): inputs, params and outputs keep their dtypes.
TEST(Compile, HalfPrecisionGraphsCompile) {
  for (DType t : {DType::F16, DType::BF16}) {
    Graph g(std::string("half_") + std::string(dtype_name(t)));
    Dim L = g.dim("L"), D = g.dim("D", 4);
    Value w = g.param("w", t, {D, D});
    g.output("y", silu(linear(g.input("x", t, {L, D}), w)));
    TensorMap in = random_inputs(g, {{"L", 5}}, 3);
    Tensor got = compile(g).run(in).at("y");
    EXPECT_EQ(got.dtype(), t);
    Comparison c = compare(got, reference::run(g, in).at("y"), 1e-2, 1e-2);
    EXPECT_TRUE(c.ok) << dtype_name(t) << ": " << c.message;
  }
}

TEST(Compile, IntegerDivisionInModsTruncates) {
  // C++ semantics: -7 / 3 == -2 and -7 % 3 == -1, i.e. arith.divsi and arith.remsi, not
  // the floor variants (compiled and interpreted values: ops_test, attention_test).
  Graph g("div_rem");
  Dim L = g.dim("L"), S = g.dim("S");
  g.output("y", mask(g.input("s", DType::F32, {L, S}),
                     [](auto, auto, auto q, auto kv) { return (kv - q) / 3 + (kv - q) % 3 != 0; }));
  std::string ir = compile(g).ir("qkv");
  EXPECT_NE(ir.find("arith.divsi"), std::string::npos) << ir;
  EXPECT_NE(ir.find("arith.remsi"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("floordivsi"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("divui"), std::string::npos) << ir;
}

TEST(Compile, InvalidGraphIsRejectedBeforeMlir) {
  Graph g("no_outputs");
  g.input("x", DType::F32, {g.dim("L")});
  std::string e = error_of([&] { compile(g); });
  EXPECT_NE(e.find("has no outputs"), std::string::npos) << e;
}

TEST(Compile, PipelineStagesArePrintable) {
  EXPECT_NE(cpu_stage_pipeline("qkv").find("qkv-recognize-attention"), std::string::npos);
  EXPECT_NE(cpu_stage_pipeline("loops").find("one-shot-bufferize"), std::string::npos);
  EXPECT_NE(error_of([] { cpu_stage_pipeline("gpu"); }).find("unknown CPU pipeline stage"),
            std::string::npos);
}

// QKV_PERF_MAP=1 (the kernel_perf_map test runs this file with it): every kernel linked
// writes its functions to /tmp/perf-<pid>.map, where perf finds names for JIT code,
// internal ones (the GEMM's block functions) included; without it, no file.
TEST(KernelPerfMap, WrittenWhenAskedOnly) {
  std::string path = "/tmp/perf-" + std::to_string(::getpid()) + ".map";
  std::filesystem::remove(path);
  Graph g("perf_map_probe");
  Dim L = g.dim("L"), D = g.dim("D", 64);
  g.output("y", gelu(linear(g.input("x", DType::F32, {L, D}), g.param("w", DType::F32, {D, D}))));
  Kernel k = compile(g); // a cache hit links its object too
  k.run(random_inputs(g, {{"L", 3}}, 1));
  const char *env = std::getenv("QKV_PERF_MAP");
  bool asked = env && *env && std::string(env) != "0";
  ASSERT_EQ(std::filesystem::exists(path), asked) << path;
  if (!asked)
    return;
  std::ifstream in(path);
  std::string line;
  bool entry = false, gemm = false;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string start, size, name;
    ASSERT_TRUE(fields >> start >> size >> name) << "malformed line: " << line;
    EXPECT_GT(std::stoull(start, nullptr, 16), 0u) << line;
    EXPECT_GT(std::stoull(size, nullptr, 16), 0u) << line;
    entry = entry || name == "_mlir__mlir_ciface_perf_map_probe";
    gemm = gemm || name.rfind("qkv_gemm_", 0) == 0;
  }
  EXPECT_TRUE(entry) << path << " does not name the kernel's entry point";
  EXPECT_TRUE(gemm) << path << " does not name the GEMM's functions (internal linkage)";
  std::filesystem::remove(path);
}

} // namespace
} // namespace qkv

namespace qkv {
namespace {

/// CompileOptions::isa, then QKV_ISA, then the host's best tier (docs/compiler.md, "ISA
/// tiers"); names they cannot take are errors that say where the name came from.
TEST(IsaTiers, ChosenFromTheOptionsThenQkvIsaThenTheHost) {
  Graph g("isa_choice");
  Value x = g.input("x", DType::BF16, {g.dim("M"), g.dim("K", 8)});
  g.output("y", linear(x, g.param("w", DType::BF16, {g.dim("K", 8), g.dim("N", 8)})));
  CompileOptions o;
  o.cache = CacheOptions::off();
  std::vector<Isa> have = host_isas();
  ASSERT_FALSE(have.empty());
  EXPECT_EQ(have.front(), Isa::F32); // every host has the f32 tier
  EXPECT_EQ(host_isa(), have.back());
  ::unsetenv("QKV_ISA");
  EXPECT_EQ(compile(g, Target::host(), o).stats().isa, isa_name(host_isa()));
  ::setenv("QKV_ISA", "f32", 1);
  EXPECT_EQ(compile(g, Target::host(), o).stats().isa, "f32");
  CompileOptions host = o;
  host.isa = host_isa(); // an explicit tier wins over the environment
  EXPECT_EQ(compile(g, Target::host(), host).stats().isa, isa_name(host_isa()));
  ::setenv("QKV_ISA", "sse", 1);
  EXPECT_EQ(test::error_of([&] { compile(g, Target::host(), o); }),
            "QKV_ISA is 'sse'; the tiers are host (the best this CPU has), f32, avx512bf16, amx");
  ::unsetenv("QKV_ISA");
  // Each tier the host lacks is refused, naming the CPU flag; one it has compiles.
  for (auto [isa, flag] : {std::pair{Isa::Avx512Bf16, "avx512_bf16"}, {Isa::Amx, "amx_bf16"}}) {
    CompileOptions on = o;
    on.isa = isa;
    if (std::find(have.begin(), have.end(), isa) != have.end()) {
      EXPECT_EQ(compile(g, Target::host(), on).stats().isa, isa_name(isa));
      continue;
    }
    std::string names;
    for (Isa h : have)
      names += (names.empty() ? "" : ", ") + isa_name(h);
    EXPECT_EQ(test::error_of([&] { compile(g, Target::host(), on); }),
              "CompileOptions::isa asks for the " + isa_name(isa) +
                  " tier, which this host's CPU does not have (no " + flag + "); its tiers: " +
                  names);
  }
  for (Isa isa : {Isa::Host, Isa::F32, Isa::Avx512Bf16, Isa::Amx})
    EXPECT_EQ(parse_isa(isa_name(isa)), isa);
}

} // namespace
} // namespace qkv
