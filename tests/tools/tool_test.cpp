// The tool's registry of a user's graphs (<qkv/tool.hpp>, entry.hpp), what it infers of a
// graph for the baselines, and the commands as C++ calls: qkv::tool::show (downsampled past
// 64 cells and 1024 pixels a side, evaluating only the unproved tiles of a huge mask) and
// qkv::tool::bench.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <qkv/qkv.hpp>
#include <qkv/tool.hpp>

#include "registry.hpp"
#include "qkv_test/errors.hpp"

namespace qkv::test {
namespace {

constexpr auto B = dim<"B">;
constexpr auto L = dim<"L">;
constexpr auto H = dim<"H", 2>;
constexpr auto Dh = dim<"Dh", 16>;
constexpr auto D = dim<"D", 32>;

Graph window(std::int64_t w) {
  Graph g("window");
  auto q = g.input<f32>("q", B, H, L, Dh), k = g.input<f32>("k", B, H, L, Dh);
  auto v = g.input<f32>("v", B, H, L, Dh);
  g.output("out", attention(q, k, v).mask(sliding_window_mask(w)).value());
  return g;
}

Graph block() {
  Graph g("block");
  auto x = g.input<f32>("x", B, L, D);
  auto wq = g.param<f32>("wq", D, H * Dh), wk = g.param<f32>("wk", D, H * Dh);
  auto wv = g.param<f32>("wv", D, H * Dh);
  auto wo = g.param<f32>("wo", D, D);
  auto heads = [&](auto w) { return split_heads(linear(x, w), H, Dh); };
  g.output("y", linear(merge_heads(attention(heads(wq), heads(wk), heads(wv)), D), wo));
  return g;
}

Graph renamed() { // attention alone, but its inputs are not q, k, v
  Graph g("renamed");
  auto a = g.input<f32>("a", B, H, L, Dh);
  g.output("out", attention(a, a, a).value());
  return g;
}

std::vector<std::string> lines(const std::string &text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    out.push_back(l);
  return out;
}

// A bad spec is an error when the tool first needs its graphs (not at static
// initialisation), naming the graph; the good ones stay.
TEST(ToolRegistry, BadSpecsAreErrorsNamingTheGraph) {
  auto spec = [](std::string name, DimBindings dims = {{"B", 1}, {"L", 8}}) {
    return tool::GraphSpec{.name = std::move(name), .build = [] { return window(4); },
                           .dims = std::move(dims)};
  };
  tool::add_graph(spec("bad name"));
  EXPECT_TRUE(ErrorSays([] { gallery::registered(); },
                        {"needs a name of letters, digits, '_' and '-', got 'bad name'"}));
  tool::add_graph({.name = "nobuild"});
  EXPECT_TRUE(ErrorSays([] { gallery::registered(); },
                        {"graph 'nobuild': GraphSpec::build is empty"}));
  tool::add_graph(spec("nodims", {{"B", 1}}));
  EXPECT_TRUE(ErrorSays([] { gallery::registered(); },
                        {"graph 'nodims': GraphSpec::dims gives no extent for its dynamic dim 'L'"}));
  tool::add_graph(spec("wrongdim", {{"B", 1}, {"L", 8}, {"S", 3}}));
  EXPECT_TRUE(ErrorSays([] { gallery::registered(); },
                        {"graph 'wrongdim': GraphSpec::dims: ", "has no dim 'S'"}));
  tool::add_graph(spec("ok"));
  tool::add_graph(spec("ok"));
  EXPECT_TRUE(ErrorSays([] { gallery::registered(); }, {"graph 'ok' is registered twice"}));
  tool::add_graph(spec("gemm"));
  EXPECT_TRUE(ErrorSays([] { gallery::registered(); }, {"the name is qkv bench gemm's"}));
  ASSERT_EQ(gallery::registered().size(), 1u);
  EXPECT_EQ(gallery::registered("ok").name, "ok");
  EXPECT_TRUE(ErrorSays([] { gallery::registered("nosuch"); },
                        {"no graph named 'nosuch'; try one of: ok"}));
}

// What a user's entry knows of its graph: dynamic and static dims, its default shapes,
// and the form the baselines compute (or why they do not).
TEST(ToolRegistry, UserEntriesInferTheBaselinesForm) {
  gallery::Entry att = gallery::user_entry(
      {.name = "w", .build = [] { return window(8); }, .dims = {{"B", 2}, {"L", 50}}});
  EXPECT_EQ(att.dynamic, (std::vector<std::string>{"B", "L"}));
  EXPECT_EQ(att.statics, "Dh=16 H=2");
  EXPECT_EQ(att.workload.form, gallery::Workload::Form::Attention);
  EXPECT_EQ(att.workload.mask, gallery::Workload::Mask::Expr);
  EXPECT_EQ(att.baseline_gap, "");
  EXPECT_EQ(att.shape.batch, 2);
  EXPECT_EQ(att.shape.seq, 50);
  EXPECT_EQ(att.shape.kv_len, 50);
  EXPECT_EQ(att.shape.heads, 2);
  EXPECT_EQ(att.shape.head_dim, 16);
  EXPECT_EQ(att.bench_shape.seq, 50); // no bench_dims: dims
  EXPECT_EQ(att.sizes(att.shape), "B=2 L=50 Dh=16 H=2");
  EXPECT_EQ(att.dims(att.with_dims(att.shape, {{"L", 7}})), (DimBindings{{"B", 2}, {"L", 7}}));

  gallery::Entry blk = gallery::user_entry({.name = "b",
                                            .build = block,
                                            .dims = {{"B", 1}, {"L", 5}},
                                            .bench_dims = {{"B", 1}, {"L", 300}}});
  EXPECT_EQ(blk.workload.form, gallery::Workload::Form::Block);
  EXPECT_TRUE(blk.workload.out_proj);
  EXPECT_EQ(blk.baseline_gap, "");
  EXPECT_EQ(blk.bench_shape.seq, 300);

  gallery::Entry other =
      gallery::user_entry({.name = "r", .build = renamed, .dims = {{"B", 1}, {"L", 5}}});
  EXPECT_NE(other.baseline_gap.find("they compute attention alone (inputs q, k, v"),
            std::string::npos)
      << other.baseline_gap;
  EXPECT_NE(other.baseline_gap.find("'r' is neither"), std::string::npos);
}

// Past 64 tiles a side the tile grid is drawn 64 a side, and every line stays short.
TEST(Show, TheTileGridIsDownsampled) {
  Graph g = window(32);
  TensorMap in = random_inputs(g, {{"B", 1}, {"L", 4096}}, 1);
  std::string text = tool::show(g, in, {.q_tile = 32, .kv_tile = 32});
  EXPECT_NE(text.find("tiles (32 queries x 32 keys, 128 x 128, drawn 64 x 64: a cell is 2 x 2 "
                      "tiles"),
            std::string::npos)
      << text;
  for (const std::string &l : lines(text))
    EXPECT_LE(l.size(), 2u + 64 + 3 + 64) << l;
  // W=32 over L=4096: 32 * 33 / 2 + (4096 - 32) * 32 kept pairs.
  EXPECT_NE(text.find("kept 130576 of 16777216 pairs\n"), std::string::npos) << text;
  EXPECT_NE(text.find("the analysis is exact here"), std::string::npos);
}

// A mask of 10^10 pairs: only the tiles the analysis does not prove are evaluated, the
// proved ones counted whole, and the output says so; the counts are still exact.
TEST(Show, AHugeMaskEvaluatesTheUnprovedTilesOnly) {
  Graph g = window(64);
  TensorMap in;
  for (const char *n : {"q", "k", "v"})
    in[n] = Tensor(DType::F32, {1, 2, 100000, 16});
  std::string text = tool::show(g, in, {.q_tile = 128, .kv_tile = 128});
  EXPECT_NE(text.find("kept 6397984 of 10000000000 pairs (the proved tiles counted whole)"),
            std::string::npos)
      << text; // 64 * 65 / 2 + (100000 - 64) * 64
  EXPECT_NE(text.find("(past 67108864 pairs the mask was evaluated only in the "),
            std::string::npos);
  EXPECT_NE(text.find("drawn 64 x 64"), std::string::npos);
}

// The PNG of a large mask is at most 1024 pixels a side per picture.
TEST(Show, ThePngIsDownsampled) {
  Graph g = window(100);
  TensorMap in = random_inputs(g, {{"B", 1}, {"L", 3000}}, 1);
  std::string png = (std::filesystem::temp_directory_path() /
                     ("qkv_show_" + std::to_string(::getpid()) + ".png"))
                        .string();
  std::string text = tool::show(g, in, {.q_tile = 64, .kv_tile = 64, .png = png});
  EXPECT_NE(text.find("wrote " + png), std::string::npos);
  std::ifstream f(png, std::ios::binary);
  std::string head(24, '\0');
  f.read(head.data(), 24);
  std::remove(png.c_str());
  auto be32 = [&](int at) {
    return (static_cast<unsigned char>(head[at]) << 24) |
           (static_cast<unsigned char>(head[at + 1]) << 16) |
           (static_cast<unsigned char>(head[at + 2]) << 8) | static_cast<unsigned char>(head[at + 3]);
  };
  EXPECT_EQ(be32(16), 2 * 1024 + 16); // IHDR width: two pictures and the gap
  EXPECT_EQ(be32(20), 1024);
}

TEST(Show, AGraphWithoutAttentionIsAnError) {
  Graph g("none");
  Value x = g.input("x", DType::F32, {g.dim("L")});
  g.output("y", gelu(x));
  EXPECT_TRUE(ErrorSays([&] { tool::show(g, {{"x", Tensor(DType::F32, {4})}}); },
                        {"graph 'none' has no attention op"}));
}

// qkv::tool::bench on a program's own graph and inputs: the report's numbers, the baselines on
// the same inputs, the table and the JSON.
TEST(Bench, AProgramsGraphAgainstTheBaselines) {
  Graph g = window(8);
  TensorMap in = random_inputs(g, {{"B", 1}, {"L", 40}}, 2);
  tool::BenchReport r = tool::bench(g, in, {.threads = 2, .repeat = 1});
  EXPECT_GT(r.ms, 0);
  EXPECT_EQ(r.runs, 1);
  EXPECT_GT(r.compile_ms, 0);
  // 4 * B * H * Dh * kept pairs, the window's pairs: 8 * 9 / 2 + 32 * 8.
  EXPECT_EQ(r.flops, 4.0 * 1 * 2 * 16 * (36 + 32 * 8));
  EXPECT_GT(r.peak_gflops, 0);
  EXPECT_GT(r.bandwidth_gbs, 0);
  ASSERT_FALSE(r.baselines.empty()) << r.baselines_not_run;
  EXPECT_EQ(r.baselines[0].name, "reference");
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.baselines_not_run, "");
  EXPECT_NE(r.table.find("qkv bench window: B=1 L=40 Dh=16 H=2, mask expr, 2 threads"),
            std::string::npos)
      << r.table;
  EXPECT_NE(r.json.find("\"name\": \"window\""), std::string::npos) << r.json;
  tool::BenchReport none = tool::bench(g, in, {.threads = 2, .repeat = 1, .baselines = false});
  EXPECT_TRUE(none.baselines.empty());
  EXPECT_EQ(none.baselines_not_run, "--no-baselines");
  EXPECT_EQ(none.table.find("openblas"), std::string::npos) << none.table;
}

} // namespace
} // namespace qkv::test
