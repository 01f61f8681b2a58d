// The op table (<qkv/dsl/op_table.hpp>) against the qkv dialect's ODS: each graph op is a
// qkv.<name> op whose attributes are the ones the table names, and each qkv op is a row
// of the table or one of the dialect's own (check, yield). An op added to one side only,
// or an attribute renamed on one side only, fails here.
#include <algorithm>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"

#include "qkv/compiler/ir/QkvDialect.h"
#include "qkv/compiler/transforms/Passes.h"
#include <qkv/compiler/compile.hpp>
#include <qkv/dsl/op_table.hpp>

namespace qkv {
namespace {

/// Attributes the ODS adds on its own (AttrSizedOperandSegments) are not the op's.
std::set<std::string> ods_attributes(mlir::RegisteredOperationName op) {
  std::set<std::string> names;
  for (mlir::StringAttr a : op.getAttributeNames())
    if (a.getValue() != "operandSegmentSizes")
      names.insert(a.getValue().str());
  return names;
}

TEST(OpTable, EveryGraphOpIsAQkvOpWithTheTablesAttributes) {
  mlir::DialectRegistry registry;
  ir::registerQkvDialects(registry);
  mlir::MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  for (const OpInfo &row : op_table()) {
    if (is_leaf(row.kind) || row.kind == OpKind::AttentionLse)
      continue; // inputs are the function's arguments, constants arith.constant, and an
                // attention's log-sum-exp the qkv.attention's second result (`lse`)
    std::string name = "qkv." + std::string(row.name);
    auto op = mlir::RegisteredOperationName::lookup(name, &ctx);
    ASSERT_TRUE(op.has_value()) << name << " is in the op table but not in QkvOps.td";
    std::set<std::string> table;
    for (const IrAttr &a : row.ir_attrs)
      if (!a.name.empty())
        table.insert(std::string(a.name));
    EXPECT_EQ(ods_attributes(*op), table) << name << ": the attributes differ";
  }
}

TEST(OpTable, EveryQkvOpIsInTheTable) {
  mlir::DialectRegistry registry;
  ir::registerQkvDialects(registry);
  mlir::MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  const std::set<std::string> dialect_only = {"qkv.check", "qkv.yield"};
  int seen = 0;
  for (mlir::RegisteredOperationName op : ctx.getRegisteredOperations()) {
    std::string name = op.getStringRef().str();
    if (name.rfind("qkv.", 0) != 0 || dialect_only.count(name))
      continue;
    ++seen;
    auto kind = parse_op_name(name.substr(4));
    EXPECT_TRUE(kind.has_value()) << name << " is in QkvOps.td but not in the op table";
  }
  auto graph_ops = std::count_if(op_table().begin(), op_table().end(), [](const OpInfo &r) {
    return !is_leaf(r.kind) && r.kind != OpKind::AttentionLse;
  });
  EXPECT_EQ(seen, graph_ops);
}

// Each op with a shape rule is verified by it (the ShapeRule trait), so that the dialect
// has no shape checks of its own to drift from the DSL's; the exceptions say why.
TEST(OpTable, EveryQkvOpWithAShapeRuleIsVerifiedByIt) {
  mlir::DialectRegistry registry;
  ir::registerQkvDialects(registry);
  mlir::MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  const std::set<std::string> own_verifier = {
      "qkv.split_heads",            // its head dim is the result's; the row has it as an attribute
      "qkv.mask", "qkv.score_mod"}; // their expressions are regions, not the row's Exprs
  for (const OpInfo &row : op_table()) {
    if (is_leaf(row.kind) || row.kind == OpKind::AttentionLse)
      continue;
    std::string name = "qkv." + std::string(row.name);
    auto op = mlir::RegisteredOperationName::lookup(name, &ctx);
    ASSERT_TRUE(op.has_value()) << name;
    EXPECT_EQ(op->hasTrait<ir::ShapeRule>(), !own_verifier.count(name))
        << name
        << (own_verifier.count(name) ? " has its own verifier"
                                     : " lacks the ShapeRule trait in QkvOps.td");
  }
}

// The import builds these ops from the table: an axis the user gave from the end arrives
// counted from the front, as the lowerings and the tile analyses expect it.
TEST(OpTable, ImportedAxesCountFromTheFront) {
  Graph g("axes");
  Value x = g.input("x", DType::F32, {g.dim("L"), Dim("D", 4)});
  g.output("y", transpose(softmax(x, -1), -1, -2));
  std::string ir = lower_to(g, Target::host(), Stage::Qkv);
  EXPECT_NE(ir.find("qkv.softmax %arg0 axis 1 :"), std::string::npos) << ir;
  EXPECT_NE(ir.find("axes(1, 0)"), std::string::npos) << ir;
}

} // namespace
} // namespace qkv
