// The examples of docs/runtime.md. Each region between `// [doc:<name>]` and `// [/doc]` is
// a ```cpp block of the guide's KV cache section, word for word, in order, and what each
// prints is the section's next ```text block, so every example there compiles and runs
// here. The error messages the guide quotes are raised here too.
#include <qkv/runtime/kv_cache.hpp>

#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

using namespace qkv;

namespace {

std::string read_file(const char *path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot open " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// The blocks of a Markdown file fenced as ```lang.
std::vector<std::string> blocks(const std::string &text, const std::string &lang) {
  std::istringstream in(text);
  std::vector<std::string> out;
  std::string line, block;
  bool inside = false;
  while (std::getline(in, line)) {
    if (!inside && line == "```" + lang) {
      inside = true;
      block.clear();
    } else if (inside && line == "```") {
      out.push_back(block);
      inside = false;
    } else if (inside) {
      block += line + "\n";
    }
  }
  return out;
}

/// The guide's "## KV cache" section, up to the next "## " heading (the CUDA driver
/// section's example is checked by tests/runtime/cuda_test.cpp).
std::string kv_section(const std::string &guide) {
  std::size_t begin = guide.find("\n## KV cache\n");
  EXPECT_NE(begin, std::string::npos) << "docs/runtime.md has no '## KV cache' section";
  if (begin == std::string::npos)
    return "";
  std::size_t end = guide.find("\n## ", begin + 1);
  return guide.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

/// The regions of this file, each dedented by its common indentation.
std::vector<std::string> regions() {
  std::istringstream in(read_file(QKV_RUNTIME_EXAMPLES_SOURCE));
  std::vector<std::string> out, lines;
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    std::size_t first = line.find_first_not_of(' ');
    std::string trimmed = first == std::string::npos ? "" : line.substr(first);
    if (!inside && trimmed.rfind("// [doc:", 0) == 0) {
      inside = true;
      lines.clear();
    } else if (inside && trimmed == "// [/doc]") {
      std::size_t indent = std::string::npos;
      for (const std::string &l : lines)
        if (l.find_first_not_of(' ') != std::string::npos)
          indent = std::min(indent, l.find_first_not_of(' '));
      std::string code;
      for (const std::string &l : lines)
        code += (l.size() > indent ? l.substr(indent) : "") + "\n";
      out.push_back(code);
      inside = false;
    } else if (inside) {
      lines.push_back(line);
    }
  }
  return out;
}

std::vector<Tensor> new_rows(std::int64_t n, std::uint64_t seed) {
  std::vector<Tensor> t;
  for (std::uint64_t l = 0; l < 2; ++l)
    t.push_back(Tensor::random(DType::F32, {2, 2, n, 4}, seed + l));
  return t;
}

/// What the examples print.
std::string examples_output() {
  testing::internal::CaptureStdout();
  // [doc:contiguous]
  KVCache cache(
      {.name = "decoder", .layers = 2, .batch = 2, .kv_heads = 2, .head_dim = 4, .capacity = 64});
  // Prefill: prompts of 5 and 3 tokens, padded to 5. ks[l], vs[l] are (B, Hkv, 5, Dh).
  std::vector<Tensor> ks = new_rows(5, 1), vs = new_rows(5, 3);
  cache.append_step(ks, vs, {5, 3});
  // A decode step, layer by layer: layer l's kernel reads cache.keys(l), cache.values(l)
  // and cache.lengths(), and returns its new rows (B, Hkv, 1, Dh).
  for (int l = 0; l < 2; ++l) {
    std::vector<Tensor> k = new_rows(1, 10 + l), v = new_rows(1, 20 + l);
    cache.append(l, k[0], v[0]);
  }
  cache.advance(); // every length moves once
  std::cout << cache.lengths().str() << "\n";
  cache.truncate(0, 5);              // sequence 0's last token was rejected
  Tensor k0 = cache.read_keys(1, 0); // dense (Hkv, 5, Dh)
  std::cout << k0.type_str() << "\n";
  // [/doc]
  // [doc:paged]
  PagedKVCache paged({.name = "pool",
                      .layers = 2,
                      .batch = 2,
                      .kv_heads = 2,
                      .head_dim = 4,
                      .page_size = 4,
                      .num_pages = 16,
                      .max_pages_per_seq = 4});
  paged.append_step(ks, vs, {5, 0}); // sequence 0: 5 rows on pages 0 and 1
  paged.fork(0, 1);                  // sequence 1 shares both pages
  std::cout << paged.block_table().str() << "\n" << paged.pages_used() << " pages used\n";
  std::vector<Tensor> k = new_rows(1, 30), v = new_rows(1, 40);
  paged.append_step(k, v, {0, 1}); // row 5 of sequence 1 lands in shared page 1: copied
  std::cout << paged.block_table().str() << "\n" << paged.pages_used() << " pages used\n";
  // [/doc]
  return testing::internal::GetCapturedStdout();
}

TEST(RuntimeGuide, IsInSyncWithTheExamples) {
  std::string guide = kv_section(read_file(QKV_RUNTIME_GUIDE));
  std::vector<std::string> code = regions(), shown = blocks(guide, "cpp");
  ASSERT_EQ(code.size(), 2u);
  EXPECT_EQ(shown, code) << "docs/runtime.md's ```cpp blocks are not the examples of "
                            "tests/runtime/kv_cache_docs_test.cpp, in order";
  std::vector<std::string> text = blocks(guide, "text"); // each example's output, then errors
  ASSERT_GE(text.size(), 2u);
  EXPECT_EQ(examples_output(), text[0] + text[1])
      << "the examples print something else than the guide shows";
}

/// The error messages the guide quotes, word for word.
TEST(RuntimeGuide, QuotesTheErrors) {
  std::string guide = read_file(QKV_RUNTIME_GUIDE);
  auto quoted = [&](const std::function<void()> &f) {
    try {
      f();
      ADD_FAILURE() << "no qkv::Error";
    } catch (const Error &e) {
      EXPECT_NE(guide.find(std::string(e.what()) + "\n"), std::string::npos)
          << "docs/runtime.md should quote, on a line of its own:\n"
          << e.what();
    }
  };
  KVCache c(
      {.name = "decoder", .layers = 2, .batch = 2, .kv_heads = 2, .head_dim = 4, .capacity = 8});
  c.append_step(new_rows(7, 1), new_rows(7, 3), {7, 2});
  quoted([&] { c.append_step(new_rows(2, 5), new_rows(2, 6)); });
  quoted([&] { c.append(1, new_rows(2, 5)[0], new_rows(1, 5)[0]); });
  quoted([&] { c.append(1, new_rows(1, 5)[0].to(DType::F64), new_rows(1, 5)[0]); });
  c.append(0, new_rows(1, 5)[0], new_rows(1, 6)[0]);
  quoted([&] { c.advance(); });

  PagedKVCache p({.name = "pool",
                  .layers = 2,
                  .batch = 2,
                  .kv_heads = 2,
                  .head_dim = 4,
                  .page_size = 4,
                  .num_pages = 3});
  p.append_step(new_rows(7, 1), new_rows(7, 3), {7, 2}); // pages 0 and 1; 2
  p.fork(0, 1, 6);                                       // page 2 is free again
  quoted([&] { p.append_step(new_rows(3, 5), new_rows(3, 6), {1, 3}); });
}

} // namespace
