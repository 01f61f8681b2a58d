// The on-disk kernel cache: a hit gives the cold kernel's outputs bit for bit and its IR
// stages on demand; anything that changes the code misses; a truncated, corrupt, foreign
// or other-version entry is rebuilt, never loaded; an unwritable folder compiles in
// memory with one warning; two processes compiling the same graph at once both succeed;
// the size cap removes the least recently used entries. Every test uses a cache folder of
// its own (CompileOptions::cache.dir).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <set>
#include <thread>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "llvm/Support/Endian.h"
#include "llvm/Support/xxhash.h"

#include <qkv/compiler/compile.hpp>
#include <qkv/compiler/kernel_cache.hpp>
#include <qkv/runtime/interpreter.hpp>
#include <qkv/runtime/kernel_abi.hpp>

#include "kernel_cache_graph.hpp"
#include "qkv_test/errors.hpp"

extern char **environ;

namespace qkv {
namespace {

namespace fs = std::filesystem;
using test::attention_graph;

TensorMap inputs_for(const Graph &g, std::int64_t b = 2, std::int64_t l = 19) {
  return random_inputs(g, {{"B", b}, {"L", l}}, 7);
}

/// The output, bit for bit.
std::string bytes_of(const Tensor &t) {
  return std::string(static_cast<const char *>(t.data()), t.nbytes());
}

std::string read_all(const fs::path &p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_all(const fs::path &p, const std::string &bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << bytes;
}

void expect_matches_reference(const Kernel &k, const Graph &g) {
  TensorMap in = inputs_for(g);
  Comparison c = compare(k.run(in).at("y"), reference::run(g, in).at("y"), 1e-5, 1e-4);
  EXPECT_TRUE(c.ok) << c.message;
}

class KernelCache : public ::testing::Test {
protected:
  void SetUp() override {
    ::setenv("QKV_CACHE", "1", 1); // whatever the caller's environment says
    ::unsetenv("QKV_CACHE_MAX_MB");
    std::string tmpl = (fs::temp_directory_path() / "qkv-kernel-cache-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(dir_, ec);
  }
  CompileOptions options() const {
    CompileOptions o;
    o.cache.dir = dir_.string();
    return o;
  }
  Kernel compile_here(const Graph &g, CompileOptions o) {
    o.cache.dir = dir_.string();
    return compile(g, Target::host(), o);
  }
  Kernel compile_here(const Graph &g) { return compile_here(g, CompileOptions{}); }
  std::size_t entries() const {
    std::size_t n = 0;
    for (const auto &e : fs::directory_iterator(dir_))
      n += e.path().extension() == ".qkvk";
    return n;
  }

  fs::path dir_;
};

TEST_F(KernelCache, HitGivesTheColdKernelsOutputsBitForBit) {
  Graph g = attention_graph();
  Kernel cold = compile_here(g);
  EXPECT_FALSE(cold.stats().from_cache);
  EXPECT_EQ(cold.stats().cache_note, "miss, stored");
  EXPECT_EQ(entries(), 1u);
  Kernel warm = compile_here(g);
  const CompileStats &s = warm.stats();
  ASSERT_TRUE(s.from_cache) << s.cache_note;
  EXPECT_EQ(s.cache_note, "hit");
  EXPECT_EQ(s.cache_key, cold.stats().cache_key);
  EXPECT_EQ(s.cache_key.size(), 16u);
  EXPECT_EQ(s.cache_path, (dir_ / (s.cache_key + ".qkvk")).string());
  ASSERT_EQ(s.stage_ms.size(), 1u);
  EXPECT_EQ(s.stage_ms[0].first, "cache");
  EXPECT_LT(s.total_ms, cold.stats().total_ms);
  EXPECT_EQ(warm.symbol(), cold.symbol());
  for (std::int64_t l : {1, 19, 64}) {
    TensorMap in = inputs_for(g, 2, l);
    EXPECT_EQ(bytes_of(warm.run(in).at("y")), bytes_of(cold.run(in).at("y"))) << "L=" << l;
  }
  expect_matches_reference(warm, g);
}

TEST_F(KernelCache, HitShowsEveryIrStageOnDemand) {
  Graph g = attention_graph();
  CompileOptions no_read;
  no_read.cache.read = false;
  Kernel cold = compile_here(g, no_read);
  Kernel warm = compile_here(g);
  ASSERT_TRUE(warm.stats().from_cache);
  for (const char *stage : {"graph", "qkv", "linalg", "loops", "llvm", "llvm-ir"})
    EXPECT_EQ(warm.ir(stage), cold.ir(stage)) << stage;
  EXPECT_NE(warm.ir("asm").find(warm.symbol()), std::string::npos);
  EXPECT_NE(warm.ir("qkv").find("qkv.attention"), std::string::npos);
  // Asking for the IR compiled the graph again, without touching the cache.
  EXPECT_EQ(entries(), 1u);
}

TEST_F(KernelCache, AnythingThatChangesTheCodeMisses) {
  Graph g = attention_graph();
  Kernel base = compile_here(g);
  std::vector<std::pair<std::string, std::function<Kernel()>>> variants = {
      {"opt_level 2",
       [&] {
         CompileOptions o;
         o.opt_level = 2;
         return compile_here(g, o);
       }},
      {"1 thread",
       [&] {
         CompileOptions o;
         o.schedule.threads = 1;
         return compile_here(g, o);
       }},
      // More than the default's at most 4, so it differs from the default on any host.
      {"5 compile threads",
       [&] {
         CompileOptions o;
         o.compile_threads = 5;
         return compile_here(g, o);
       }},
      {"128-bit vectors",
       [&] {
         CompileOptions o;
         o.schedule.vector_bits = 128;
         return compile_here(g, o);
       }},
      {"q tile 8",
       [&] {
         CompileOptions o;
         o.schedule.q_tile = 8;
         return compile_here(g, o);
       }},
      {"no attention recognition",
       [&] {
         CompileOptions o;
         o.recognize_attention = false;
         return compile_here(g, o);
       }},
      // The entry holds the deferred parts' bitcode, the eager kernel's their objects.
      {"every schedule compiled at once",
       [&] {
         CompileOptions o;
         o.defer_schedules = false;
         return compile_here(g, o);
       }},
      {"layers not shared",
       [&] {
         CompileOptions o;
         o.share_repeated_layers = false;
         return compile_here(g, o);
       }},
      {"static dim Dh=32", [&] { return compile_here(attention_graph("cached_attn", 32)); }},
      {"no mask", [&] { return compile_here(attention_graph("cached_attn", 16, false)); }},
      {"another graph name", [&] { return compile_here(attention_graph("renamed_attn")); }},
      {"matmul precision medium",
       [&] {
         CompileOptions o;
         o.matmul_precision = MatmulPrecision::Medium;
         return compile_here(g, o);
       }},
  };
  // Another tier, where the host has more than one (the default is its best).
  if (host_isa() != Isa::F32)
    variants.push_back({"the f32 tier", [&] {
                          CompileOptions o;
                          o.isa = Isa::F32;
                          return compile_here(g, o);
                        }});
  std::set<std::string> keys = {base.stats().cache_key};
  for (auto &[what, make] : variants) {
    Kernel k = make();
    EXPECT_FALSE(k.stats().from_cache) << what;
    EXPECT_TRUE(keys.insert(k.stats().cache_key).second) << what << ": key seen before";
    Kernel again = make();
    EXPECT_TRUE(again.stats().from_cache) << what << ": " << again.stats().cache_note;
    // Medium precision rounds the projections' operands to bf16 on purpose.
    if (what != "matmul precision medium" || host_isa() == Isa::F32)
      expect_matches_reference(again, again.graph());
  }
  EXPECT_EQ(entries(), variants.size() + 1);
}

/// Attention with an explicit scale and a score_mod constant, then an RMSNorm: three numbers
/// in the graph's text, the key.
Graph numbers_graph(double scale, double bias, double eps) {
  Graph g("numbers");
  Dim B = g.dim("B"), H = g.dim("H", 2), L = g.dim("L"), Dh = g.dim("Dh", 16);
  Value q = g.input("q", DType::F32, {B, H, L, Dh});
  Value o = attention(q, q, q).scale(scale).score_mod(
      [bias](Expr s, Expr, Expr, Expr, Expr) { return s + bias; });
  g.output("y", rms_norm(o, eps));
  return g;
}

TEST_F(KernelCache, NumbersThatDifferInTheLastBitMiss) {
  // Printed with fewer digits, each pair would share one text and so one kernel.
  Kernel base = compile_here(numbers_graph(0.1, 1.0 / 3, 1e-5));
  std::set<std::string> keys = {base.stats().cache_key};
  std::vector<std::pair<std::string, Graph>> variants = {
      {"scale", numbers_graph(std::nextafter(0.1, 1.0), 1.0 / 3, 1e-5)},
      {"score_mod constant", numbers_graph(0.1, std::nextafter(1.0 / 3, 0.0), 1e-5)},
      {"eps", numbers_graph(0.1, 1.0 / 3, std::nextafter(1e-5, 1.0))},
  };
  for (const auto &[what, g] : variants) {
    Kernel k = compile_here(g);
    EXPECT_FALSE(k.stats().from_cache) << what << ": " << k.stats().cache_note;
    EXPECT_TRUE(keys.insert(k.stats().cache_key).second) << what << ": key seen before";
    EXPECT_TRUE(compile_here(g).stats().from_cache) << what;
  }
  EXPECT_TRUE(compile_here(numbers_graph(0.1, 1.0 / 3, 1e-5)).stats().from_cache);
}

TEST_F(KernelCache, PartsCompiledOnThreadsComputeTheSameBitForBit) {
  // The graph's module has five groups of functions that do not call one another (the
  // entry; for its query length bound at run time, the decode kernel's split tasks, their
  // merge and the tiled kernel's tasks; the projections' tasks with the micro-kernel
  // function they all call), so at most five parts. Two parts are deferred, compiled when a
  // call first needs them: the decode kernel (taken out of the module as MLIR after the
  // linalg stage, a stub), and the projection's skinny function (the form of tasks of a few
  // rows: the rows are bound at run time). So at most three are compiled at once; a compile
  // that keeps the optimised IR (k.ir's, made again) compiles all five.
  Graph g = attention_graph();
  TensorMap in = inputs_for(g, 2, 37);
  std::string one;
  for (int threads : {1, 2, 3, 8}) {
    CompileOptions o;
    o.compile_threads = threads;
    Kernel k = compile_here(g, o);
    EXPECT_EQ(k.stats().codegen_parts, std::min(threads, 3)) << threads;
    EXPECT_EQ(k.stats().deferred_parts, 2) << threads;
    int parts = std::min(threads, 5); // the IR text's: one per group of functions, none empty
    std::string ir = k.ir("llvm-ir");
    std::string last = "; ===== part " + std::to_string(parts) + " of " + std::to_string(parts);
    if (parts == 1)
      EXPECT_EQ(ir.find("; ===== part"), std::string::npos);
    else
      EXPECT_TRUE(ir.rfind("; ===== part 1 of", 0) == 0 && ir.find(last) != ir.npos) << threads;
    // Every part compiles functions of its own: none is an empty module.
    for (std::size_t at = 0; (at = ir.find("; ===== part", at)) != std::string::npos;) {
      std::size_t next = ir.find("; ===== part", at + 1);
      std::string part = ir.substr(at, next == std::string::npos ? std::string::npos : next - at);
      EXPECT_NE(part.find("\ndefine "), std::string::npos) << part.substr(0, part.find('\n'));
      at = next;
    }
    // The entry's body is compiled once, inlined into its C interface: the function it
    // was, internal and used in its own part only, is not kept in any part.
    std::string inner = "@" + k.symbol().substr(abi::kCInterfacePrefix.size()) + "(";
    EXPECT_EQ(ir.find("define hidden void " + inner), std::string::npos) << threads;
    EXPECT_EQ(ir.find("define internal void " + inner), std::string::npos) << threads;
    EXPECT_NE(k.ir("asm").find(k.symbol()), std::string::npos) << threads;
    std::string y = bytes_of(k.run(in).at("y"));
    if (threads == 1)
      one = y;
    EXPECT_EQ(y, one) << threads << " compile threads";
    expect_matches_reference(k, g);
    // The entry holds every part's object, and a hit links them all.
    Kernel warm = compile_here(g, o);
    ASSERT_TRUE(warm.stats().from_cache) << warm.stats().cache_note;
    EXPECT_EQ(bytes_of(warm.run(in).at("y")), one) << threads;
  }
  EXPECT_EQ(entries(), 4u);
}

TEST_F(KernelCache, DeferredSchedulesCompileWhenACallFirstNeedsThem) {
  // A query length bound at run time: every schedule but the longest tiles is deferred,
  // compiled by the first call that takes it, cold or loaded from the cache, and so is the
  // projection's skinny function. Each length below takes another schedule (the decode
  // kernel, the short tiles, the default tiles), the shortest the skinny function too; the
  // loaded kernel's first calls come from two threads at once.
  Graph g = attention_graph("deferred_attn", 16, /*causal=*/false);
  Kernel cold = compile_here(g);
  ASSERT_FALSE(cold.stats().from_cache);
  std::size_t schedules = cold.schedule_runs().size();
  // One part per schedule but the longest tiles, which are compiled at once, and the
  // projection's skinny function (which the shortest lengths' few rows take).
  EXPECT_EQ(cold.stats().deferred_parts, static_cast<int>(schedules));
  const std::vector<std::int64_t> lengths = {1, 3, 12, 20, 40};
  auto check = [&](const Kernel &k, std::int64_t l) {
    TensorMap in = inputs_for(g, 1, l);
    Comparison c = compare(k.run(in).at("y"), reference::run(g, in).at("y"), 1e-5, 1e-4);
    EXPECT_TRUE(c.ok) << "L=" << l << ": " << c.message;
  };
  for (std::int64_t l : lengths)
    check(cold, l);
  for (const auto &[name, runs] : cold.schedule_runs())
    EXPECT_GE(runs, 1) << name << " never ran: the lengths do not cover the schedules";
  Kernel warm = compile_here(g);
  ASSERT_TRUE(warm.stats().from_cache) << warm.stats().cache_note;
  std::vector<std::thread> callers;
  for (int t = 0; t < 2; ++t)
    callers.emplace_back([&] {
      for (std::int64_t l : lengths)
        check(warm, l);
    });
  for (std::thread &t : callers)
    t.join();
}

TEST_F(KernelCache, DynamicExtentsShareOneEntry) {
  // Compiled code takes every extent of a dynamic dim: the key has none.
  Graph g = attention_graph();
  compile_here(g);
  Kernel k = compile_here(g);
  ASSERT_TRUE(k.stats().from_cache);
  for (std::int64_t l : {3, 40}) {
    TensorMap in = inputs_for(g, 1, l);
    Comparison c = compare(k.run(in).at("y"), reference::run(g, in).at("y"), 1e-5, 1e-4);
    EXPECT_TRUE(c.ok) << c.message;
  }
}

// ---- damaged entries ----------------------------------------------------------------------

/// The entry layout docs/compiler.md describes: a 56-byte header (checksum at 16, version
/// length at 32), then the version, the key text, the symbol and the object.
constexpr std::size_t kHeader = 56;

void rechecksum(std::string &bytes) {
  std::uint64_t sum = llvm::xxh3_64bits(llvm::StringRef(bytes).drop_front(24));
  llvm::support::endian::write64le(bytes.data() + 16, sum);
}

/// Where the payload (the objects, each after its u64 length) starts.
std::size_t payload_at(const std::string &b) {
  using llvm::support::endian::read32le;
  using llvm::support::endian::read64le;
  return kHeader + read32le(b.data() + 32) + read32le(b.data() + 36) + read64le(b.data() + 40);
}

struct Damage {
  const char *name;
  const char *reason; // in cache_note
  std::function<void(std::string &)> apply;
};

class DamagedEntry : public KernelCache, public ::testing::WithParamInterface<Damage> {};

TEST_P(DamagedEntry, IsRebuiltNeverLoaded) {
  Graph g = attention_graph();
  Kernel first = compile_here(g);
  fs::path path = first.stats().cache_path;
  std::string bytes = read_all(path);
  ASSERT_GT(bytes.size(), kHeader);
  GetParam().apply(bytes);
  write_all(path, bytes);

  Kernel k = compile_here(g);
  const CompileStats &s = k.stats();
  EXPECT_FALSE(s.from_cache);
  EXPECT_EQ(s.cache_note.rfind("rebuilt (", 0), 0u) << s.cache_note;
  EXPECT_NE(s.cache_note.find(GetParam().reason), std::string::npos) << s.cache_note;
  EXPECT_NE(s.cache_note.find(", stored"), std::string::npos) << s.cache_note;
  expect_matches_reference(k, g);
  // Overwritten with a good entry: the next compile loads it.
  Kernel again = compile_here(g);
  EXPECT_TRUE(again.stats().from_cache) << again.stats().cache_note;
  expect_matches_reference(again, g);
}

INSTANTIATE_TEST_SUITE_P(
    KernelCache, DamagedEntry,
    ::testing::Values(
        Damage{"empty", "truncated", [](std::string &b) { b.clear(); }},
        Damage{"header_cut", "truncated", [](std::string &b) { b.resize(kHeader - 10); }},
        Damage{"payload_cut", "truncated", [](std::string &b) { b.resize(b.size() / 2); }},
        Damage{"last_byte_cut", "truncated", [](std::string &b) { b.pop_back(); }},
        Damage{"trailing_bytes", "trailing bytes", [](std::string &b) { b += "xx"; }},
        Damage{"payload_bytes_flipped", "checksum mismatch",
               [](std::string &b) {
                 b[b.size() - 100] ^= 0x5a;
                 b[b.size() / 2] ^= 0x01;
               }},
        Damage{"key_byte_flipped", "checksum mismatch",
               [](std::string &b) { b[kHeader + 40] ^= 0x20; }},
        Damage{"bad_magic", "not a qkv kernel cache entry", [](std::string &b) { b[0] = 'X'; }},
        Damage{"other_format", "entry format 99",
               [](std::string &b) { llvm::support::endian::write32le(b.data() + 8, 99); }},
        // A well-formed entry from another qkv version, its checksum valid.
        Damage{"other_version", "written by qkv 9",
               [](std::string &b) {
                 b[kHeader] = '9';
                 rechecksum(b);
               }},
        // A well-formed entry for another key (copied, or a hash collision).
        Damage{"other_key", "for another key",
               [](std::string &b) {
                 std::size_t at = b.find("recognize_attention=1");
                 ASSERT_NE(at, std::string::npos);
                 b[at + 20] = '0';
                 rechecksum(b);
               }},
        // Checksum valid, the object not an object: it fails to link and is rebuilt.
        Damage{"object_not_elf", "did not link",
               [](std::string &b) {
                 using llvm::support::endian::read32le;
                 using llvm::support::endian::read64le;
                 std::size_t object = payload_at(b) + 8; // after the first object's length
                 ASSERT_EQ(b.compare(object, 4, "\x7f" "ELF"), 0);
                 b[object + 1] = 'X';
                 rechecksum(b);
               }},
        // Checksum valid, the first object's length past the end of the entry.
        Damage{"object_length_too_long", "malformed object list",
               [](std::string &b) {
                 llvm::support::endian::write64le(b.data() + payload_at(b), b.size());
                 rechecksum(b);
               }}),
    [](const ::testing::TestParamInfo<Damage> &i) { return std::string(i.param.name); });

TEST_F(KernelCache, EntryFromAnotherGraphIsNotLoaded) {
  // The file of one graph's key holding another graph's entry (a copy, a collision).
  Graph a = attention_graph("graph_a"), b = attention_graph("graph_b", 16, false);
  Kernel ka = compile_here(a), kb = compile_here(b);
  fs::copy_file(kb.stats().cache_path, ka.stats().cache_path,
                fs::copy_options::overwrite_existing);
  Kernel k = compile_here(a);
  EXPECT_FALSE(k.stats().from_cache);
  EXPECT_NE(k.stats().cache_note.find("for another key"), std::string::npos)
      << k.stats().cache_note;
  expect_matches_reference(k, a);
}

// ---- folders that cannot be written ---------------------------------------------------------

TEST_F(KernelCache, UnwritableFolderCompilesInMemoryWithOneWarning) {
  // A folder under a regular file cannot be made, by root either.
  write_all(dir_ / "file", "not a folder");
  CompileOptions o;
  o.cache.dir = (dir_ / "file" / "kernels").string();
  testing::internal::CaptureStderr();
  Kernel k1 = compile(attention_graph(), Target::host(), o);
  Kernel k2 = compile(attention_graph("another"), Target::host(), o);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_FALSE(k1.stats().from_cache);
  EXPECT_NE(k1.stats().cache_note.find("not stored"), std::string::npos) << k1.stats().cache_note;
  expect_matches_reference(k1, k1.graph());
  expect_matches_reference(k2, k2.graph());
  std::size_t lines = 0;
  for (std::size_t at = 0; (at = err.find("qkv: warning: kernel cache:", at)) != std::string::npos;
       ++at)
    ++lines;
  EXPECT_EQ(lines, 1u) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_NE(err.find("cannot create the folder"), std::string::npos) << err;
}

TEST_F(KernelCache, FailedRenameLeavesNoTemporaryFile) {
  // The entry's name taken by a folder: the write fails at the rename, the temporary file
  // goes, and the folder is treated as an unreadable entry.
  Graph g = attention_graph();
  CompileOptions no_write;
  no_write.cache.write = false;
  std::string path = compile_here(g, no_write).stats().cache_path;
  fs::create_directory(path);
  testing::internal::CaptureStderr();
  Kernel k = compile_here(g);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_FALSE(k.stats().from_cache);
  EXPECT_NE(k.stats().cache_note.find("unreadable"), std::string::npos) << k.stats().cache_note;
  EXPECT_NE(k.stats().cache_note.find("cannot rename"), std::string::npos) << k.stats().cache_note;
  EXPECT_NE(err.find("qkv: warning: kernel cache: cannot rename"), std::string::npos) << err;
  expect_matches_reference(k, g);
  for (const auto &e : fs::directory_iterator(dir_))
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
}

TEST_F(KernelCache, ReadOnlyFolderCompilesInMemory) {
  if (::geteuid() == 0)
    GTEST_SKIP() << "root writes to read-only folders (UnwritableFolder... covers the case)";
  fs::permissions(dir_, fs::perms::owner_read | fs::perms::owner_exec);
  testing::internal::CaptureStderr();
  Kernel k = compile_here(attention_graph());
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(k.stats().cache_note.find("not stored"), std::string::npos);
  EXPECT_NE(err.find("qkv: warning: kernel cache:"), std::string::npos) << err;
  expect_matches_reference(k, k.graph());
}

// ---- two processes ---------------------------------------------------------------------------

/// Runs the helper (kernel_cache_child.cpp) `n` times at once on one cache folder; every
/// one must compile or load a correct kernel.
TEST_F(KernelCache, ProcessesCompilingTheSameGraphAtOnceAllSucceed) {
  for (int round = 0; round < 2; ++round) {
    fs::path dir = dir_ / ("round" + std::to_string(round));
    std::vector<pid_t> pids;
    for (int i = 0; i < 3; ++i) {
      std::string d = dir.string();
      char *argv[] = {const_cast<char *>(QKV_CACHE_CHILD), d.data(), nullptr};
      pid_t pid = 0;
      ASSERT_EQ(::posix_spawn(&pid, QKV_CACHE_CHILD, nullptr, nullptr, argv, environ), 0);
      pids.push_back(pid);
    }
    for (pid_t pid : pids) {
      int status = 0;
      ASSERT_EQ(::waitpid(pid, &status, 0), pid);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
    }
    std::size_t n = 0;
    for (const auto &e : fs::directory_iterator(dir)) {
      EXPECT_EQ(e.path().extension(), ".qkvk") << e.path(); // no temporary file left
      ++n;
    }
    EXPECT_EQ(n, 1u);
    CompileOptions o;
    o.cache.dir = dir.string();
    Kernel k = compile(attention_graph("child"), Target::host(), o);
    EXPECT_TRUE(k.stats().from_cache) << k.stats().cache_note;
  }
}

// ---- switches, folders, errors --------------------------------------------------------------

TEST_F(KernelCache, EnvironmentTurnsItOffAndChoosesTheFolder) {
  std::string saved = std::getenv("QKV_CACHE_DIR") ? std::getenv("QKV_CACHE_DIR") : "";
  ::setenv("QKV_CACHE_DIR", dir_.c_str(), 1);
  EXPECT_EQ(kernel_cache::default_dir(), dir_.string());
  Kernel k = compile(attention_graph()); // no folder in the options: $QKV_CACHE_DIR
  EXPECT_EQ(fs::path(k.stats().cache_path).parent_path(), dir_);
  EXPECT_EQ(entries(), 1u);

  for (const char *off : {"0", "off", "false"}) {
    ::setenv("QKV_CACHE", off, 1);
    EXPECT_FALSE(kernel_cache::enabled_by_env());
    Kernel o = compile(attention_graph("while_off"));
    EXPECT_FALSE(o.stats().from_cache);
    EXPECT_EQ(o.stats().cache_note, std::string("off (QKV_CACHE=") + off + ")");
    EXPECT_TRUE(o.stats().cache_path.empty());
    expect_matches_reference(o, o.graph());
  }
  EXPECT_EQ(entries(), 1u); // nothing written while off
  ::setenv("QKV_CACHE", "1", 1);
  if (saved.empty())
    ::unsetenv("QKV_CACHE_DIR");
  else
    ::setenv("QKV_CACHE_DIR", saved.c_str(), 1);
}

TEST_F(KernelCache, OptionsTurnReadingAndWritingOff) {
  Graph g = attention_graph();
  CompileOptions off;
  off.cache = CacheOptions::off();
  EXPECT_EQ(compile_here(g, off).stats().cache_note, "off (CompileOptions::cache)");
  EXPECT_EQ(entries(), 0u);
  CompileOptions no_write;
  no_write.cache.write = false;
  EXPECT_EQ(compile_here(g, no_write).stats().cache_note, "miss");
  EXPECT_EQ(entries(), 0u);
  compile_here(g);
  CompileOptions no_read;
  no_read.cache.read = false;
  Kernel k = compile_here(g, no_read);
  EXPECT_FALSE(k.stats().from_cache);
  EXPECT_EQ(k.stats().cache_note, "not read (CompileOptions::cache.read), stored");
}

TEST_F(KernelCache, DumpingStagesCompilesForReal) {
  Graph g = attention_graph();
  compile_here(g);
  CompileOptions o;
  o.dump = {"loops"};
  testing::internal::CaptureStderr();
  Kernel k = compile_here(g, o);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_FALSE(k.stats().from_cache);
  EXPECT_NE(err.find("qkv stage 'loops' of graph 'cached_attn'"), std::string::npos);
}

TEST_F(KernelCache, FailedCompilesStoreNothing) {
  Graph g("outputless");
  g.input("x", DType::F32, {g.dim("L")});
  EXPECT_TRUE(test::ErrorSays([&] { compile_here(g); }, {"graph 'outputless' has no outputs"}));
  EXPECT_EQ(entries(), 0u);
}

TEST_F(KernelCache, InfoCountsAndClearRemovesOnlyCacheFiles) {
  compile_here(attention_graph("one"));
  compile_here(attention_graph("two"));
  write_all(dir_ / "notes.txt", "mine");
  write_all(dir_ / "0123456789abcdef.qkvk.tmp.1.0", "half written");
  kernel_cache::Info i = kernel_cache::info(dir_.string());
  EXPECT_TRUE(i.exists);
  EXPECT_EQ(i.entries, 2u);
  EXPECT_EQ(i.temporary, 1u);
  std::uint64_t bytes = 0;
  for (const auto &e : fs::directory_iterator(dir_))
    if (e.path().extension() == ".qkvk")
      bytes += e.file_size();
  EXPECT_EQ(i.bytes, bytes);
  EXPECT_EQ(kernel_cache::clear(dir_.string()), 3u);
  EXPECT_TRUE(fs::exists(dir_ / "notes.txt"));
  EXPECT_EQ(kernel_cache::info(dir_.string()).entries, 0u);
  EXPECT_FALSE(kernel_cache::info((dir_ / "nowhere").string()).exists);
  EXPECT_EQ(kernel_cache::clear((dir_ / "nowhere").string()), 0u);
}

/// The entry files of a folder, by name (the key's hex).
std::set<std::string> entry_names(const fs::path &dir) {
  std::set<std::string> names;
  for (const auto &e : fs::directory_iterator(dir))
    if (e.path().extension() == ".qkvk")
      names.insert(e.path().stem().string());
  return names;
}

TEST_F(KernelCache, CapRemovesLeastRecentlyUsedEntriesAfterAStore) {
  Kernel a = compile_here(attention_graph("lru_a"));
  Kernel b = compile_here(attention_graph("lru_b"));
  std::string ka = a.stats().cache_key, kb = b.stats().cache_key;
  ASSERT_EQ(entry_names(dir_), (std::set<std::string>{ka, kb}));
  std::uint64_t size_a = fs::file_size(dir_ / (ka + ".qkvk"));
  std::uint64_t size_b = fs::file_size(dir_ / (kb + ".qkvk"));
  // a older than b; then a hit on a renews it, so b is the least recently used.
  auto now = fs::file_time_type::clock::now();
  fs::last_write_time(dir_ / (ka + ".qkvk"), now - std::chrono::hours(2));
  fs::last_write_time(dir_ / (kb + ".qkvk"), now - std::chrono::hours(1));
  ASSERT_TRUE(compile_here(attention_graph("lru_a")).stats().from_cache);
  EXPECT_GT(fs::last_write_time(dir_ / (ka + ".qkvk")), now - std::chrono::minutes(1));
  // Room for two entries of about this size, not three: storing c removes b.
  CompileOptions o;
  o.cache.max_bytes = size_a + size_b + std::max(size_a, size_b) / 2;
  Kernel c = compile_here(attention_graph("lru_c"), o);
  EXPECT_EQ(c.stats().cache_note, "miss, stored");
  EXPECT_EQ(entry_names(dir_), (std::set<std::string>{ka, c.stats().cache_key}));
  // The survivors still load, and what was removed compiles again.
  EXPECT_TRUE(compile_here(attention_graph("lru_a"), o).stats().from_cache);
  EXPECT_FALSE(compile_here(attention_graph("lru_b"), o).stats().from_cache);
  // A cap below one entry keeps nothing, not even the entry just stored.
  o.cache.max_bytes = 1;
  compile_here(attention_graph("lru_d"), o);
  EXPECT_EQ(entries(), 0u);
}

TEST_F(KernelCache, TrimLeavesOtherFilesAndStopsAtTheCap) {
  compile_here(attention_graph("trim_a"));
  compile_here(attention_graph("trim_b"));
  write_all(dir_ / "notes.txt", std::string(1 << 20, 'x')); // not the cache's: never counted
  write_all(dir_ / "0123456789abcdef.qkvk.tmp.1.0", "half written");
  kernel_cache::Info before = kernel_cache::info(dir_.string());
  EXPECT_EQ(kernel_cache::trim(dir_.string(), before.bytes), 0u);
  EXPECT_EQ(kernel_cache::trim(dir_.string(), before.bytes - 1), 1u);
  EXPECT_EQ(entries(), 1u);
  EXPECT_EQ(kernel_cache::trim(dir_.string(), 0), 1u);
  EXPECT_TRUE(fs::exists(dir_ / "notes.txt"));
  EXPECT_TRUE(fs::exists(dir_ / "0123456789abcdef.qkvk.tmp.1.0"));
  EXPECT_EQ(kernel_cache::trim((dir_ / "nowhere").string(), 0), 0u);
}

TEST_F(KernelCache, CapComesFromOptionsThenEnvironment) {
  ::unsetenv("QKV_CACHE_MAX_MB");
  EXPECT_EQ(kernel_cache::max_bytes(), kernel_cache::kDefaultMaxBytes);
  EXPECT_EQ(kernel_cache::max_bytes(123), 123u);
  ::setenv("QKV_CACHE_MAX_MB", "3", 1);
  EXPECT_EQ(kernel_cache::max_bytes(), 3u << 20);
  EXPECT_EQ(kernel_cache::max_bytes(123), 123u);
  for (const char *bad : {"0", "-1", "1.5", "lots", "99999999999999999999"}) {
    ::setenv("QKV_CACHE_MAX_MB", bad, 1);
    std::string named = "QKV_CACHE_MAX_MB='" + std::string(bad) + "'";
    EXPECT_TRUE(test::ErrorSays([] { kernel_cache::max_bytes(); }, {named, "positive whole number"}));
    // compile() says so too.
    EXPECT_TRUE(test::ErrorSays([&] { compile_here(attention_graph("bad_cap")); }, {named}));
  }
  ::unsetenv("QKV_CACHE_MAX_MB");
}

} // namespace
} // namespace qkv
