// The qkv MLIR dialect (internal to the compiler and tools: includes MLIR headers).
#pragma once

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "qkv/compiler/ir/QkvOpsDialect.h.inc"

namespace qkv::ir {

/// Checks `op` by its op-table row's shape rule (ShapeRuleVerifier.cpp).
mlir::LogicalResult verifyShapeRule(mlir::Operation *op);

/// The ShapeRule trait (QkvOps.td): the op's operands, attributes and result are checked
/// by the shape rule the DSL calls (<qkv/dsl/op_table.hpp>), written once for both.
template <typename ConcreteType>
class ShapeRule : public mlir::OpTrait::TraitBase<ConcreteType, ShapeRule> {
public:
  static mlir::LogicalResult verifyTrait(mlir::Operation *op) { return verifyShapeRule(op); }
};

} // namespace qkv::ir

#define GET_OP_CLASSES
#include "qkv/compiler/ir/QkvOps.h.inc"
