// Repeated layers compiled once (CompileOptions::share_repeated_layers): one function per
// run of identical layers, called per layer, computing what the layers compiled one by one
// compute, bit for bit, each layer with its own packed weights.
#include <regex>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include <qkv/compiler/compile.hpp>
#include <qkv/runtime/interpreter.hpp>

#include "differential.hpp"
#include <qkv_test/layer_stack.hpp>

namespace qkv {
namespace {

using test::LayerOptions;

CompileOptions options(bool share) {
  CompileOptions o;
  o.cache = CacheOptions::off();
  o.share_repeated_layers = share;
  return o;
}

std::size_t count(const std::string &text, const std::string &what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

/// Each sequence's length in [1, L].
void lengths_within(TensorMap &in) {
  Tensor &lengths = in.at("lengths");
  std::int64_t l = in.at("x").shape()[1];
  for (std::int64_t b = 0; b < lengths.numel(); ++b)
    lengths.set(b, static_cast<double>(1 + (b * 5 + 3) % l));
}

test::DiffCase stack_case(const LayerOptions &o) {
  test::DiffCase c;
  c.name =
      std::string("stack") + (o.masked ? "_masked" : "") + "_" + std::string(dtype_name(o.dtype));
  c.build = [o] { return test::layer_stack(4, o); };
  c.shapes = {{{"B", 1}, {"L", 1}}, {{"B", 2}, {"L", 7}}, {{"B", 3}, {"L", 33}}};
  // Four layers, each through two projections (D, F), attention (Dh, L) and a LayerNorm.
  c.reduce = {"D", "F"};
  if (o.masked)
    c.reduce.insert(c.reduce.end(), {"L", "Dh"});
  c.magnitude = 16;
  c.prepare = lengths_within;
  return c;
}

TEST(RepeatedLayers, OneFunctionCalledPerLayer) {
  Graph g = test::layer_stack(4, {.masked = true});
  std::string shared = lower_to(g, Target::host(), "qkv", options(true));
  EXPECT_EQ(count(shared, "func.func private @stack_layer0("), 1u) << shared;
  EXPECT_EQ(count(shared, "call @stack_layer0("), 4u) << shared;
  EXPECT_EQ(count(shared, "qkv.layer_norm"), 1u) << "the layers' ops are in the function only";
  // After bufferization each call writes buffers its caller made (no results), and the
  // function takes its layer's weights packed.
  std::string loops = lower_to(g, Target::host(), "loops", options(true));
  EXPECT_EQ(count(loops, "call @stack_layer0("), 4u);
  std::istringstream lines(loops);
  for (std::string line; std::getline(lines, line);)
    if (line.find("call @stack_layer0(") != std::string::npos)
      EXPECT_TRUE(line.ends_with("-> ()")) << line;
  // The entry takes each of the 4 layers' 2 weights packed, the function its 2.
  EXPECT_EQ(count(loops, "qkv.packed_param"), 4u * 2 + 2) << loops;
  // In LLVM the function is internal (nothing outside the kernel calls it), so the
  // arguments it never reads are dropped from its calls; defined once, whatever the parts.
  std::string ir = lower_to(g, Target::host(), "llvm-ir", options(true));
  EXPECT_EQ(count(ir, "@stack_layer0("), 4u + 1) << "4 calls and one definition";
  EXPECT_EQ(count(ir, "define internal fastcc void @stack_layer0("), 1u) << ir;
  // It takes its 11 memrefs (all of identity layout) as a pointer each and their 7
  // dynamic sizes, not as descriptors of 3 + 2 * rank values (qkv-memref-args-to-pointers);
  // a packed weight's attributes stay on its pointer, the one its size follows.
  std::string llvm = lower_to(g, Target::host(), "llvm", options(true));
  std::string signature = llvm.substr(llvm.find("llvm.func @stack_layer0("));
  signature = signature.substr(0, signature.find('\n'));
  auto args_of_type = [&](const std::string &type) {
    std::regex arg("%arg[0-9]+: " + type);
    return std::distance(std::sregex_iterator(signature.begin(), signature.end(), arg),
                         std::sregex_iterator());
  };
  EXPECT_EQ(args_of_type("!llvm.ptr"), 11) << signature;
  EXPECT_EQ(args_of_type("i64"), 7) << signature;
  EXPECT_EQ(args_of_type("!llvm.ptr \\{qkv.packed_param = [^}]*\\}, %arg[0-9]+: i64"), 2)
      << signature;
  std::string unshared = lower_to(g, Target::host(), "qkv", options(false));
  EXPECT_EQ(count(unshared, "call @"), 0u);
  EXPECT_EQ(count(unshared, "qkv.layer_norm"), 4u);
}

TEST(RepeatedLayers, MatchTheInterpreterAndTheLayersCompiledOneByOne) {
  for (bool masked : {false, true})
    for (DType dtype : {DType::F32, DType::BF16}) {
      // The masked stack also outputs a value from inside its second layer.
      test::DiffCase c = stack_case({.output_middle = masked, .masked = masked, .dtype = dtype});
      SCOPED_TRACE(c.name);
      Graph g = c.build();
      Kernel shared = compile(g, Target::host(), options(true));
      Kernel unshared = compile(g, Target::host(), options(false));
      if (dtype == DType::F32)
        test::check_kernel(shared, c);
      for (std::size_t i = 0; i < c.shapes.size(); ++i) {
        TensorMap in = random_inputs(g, c.shapes[i], 7 + i);
        c.prepare(in);
        TensorMap a = shared.run(in), b = unshared.run(in);
        ASSERT_EQ(a.size(), b.size());
        for (const auto &[name, t] : b)
          EXPECT_TRUE(test::same_bits(a.at(name), t))
              << name << " " << test::shape_name(c.shapes[i]);
      }
    }
}

TEST(RepeatedLayers, EachLayerReadsItsOwnPackedWeights) {
  test::DiffCase c = stack_case({.masked = true});
  Graph g = c.build();
  Kernel k = compile(g, Target::host(), options(true));
  TensorMap in = random_inputs(g, c.shapes[1], 3);
  c.prepare(in);
  test::check_run(k, c, in, c.magnitude);
  // A new weight for the third layer only: that layer's packed copy must follow it.
  Tensor before = k.run(in).at("y");
  in["layer2.w2"] = Tensor::random(DType::F32, in.at("layer2.w2").shape(), 99, -1, 1);
  test::check_run(k, c, in, c.magnitude);
  EXPECT_FALSE(test::same_bits(k.run(in).at("y"), before)) << "the new weight changed nothing";
}

} // namespace
} // namespace qkv
