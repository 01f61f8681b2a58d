// Small helpers shared by the qkv lowerings.
#pragma once

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

#include "qkv/compiler/ir/QkvDialect.h"

namespace qkv::ir {

inline mlir::RankedTensorType tensorType(mlir::Value v) {
  return mlir::cast<mlir::RankedTensorType>(v.getType());
}

/// An axis attribute in [0, rank): the verifiers accept -rank..rank-1, Python-style.
inline int64_t normalizeAxis(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

inline mlir::Value floatConst(mlir::OpBuilder &b, mlir::Location loc, mlir::Type t, double v) {
  return mlir::arith::ConstantOp::create(b, loc, b.getFloatAttr(t, v));
}

inline mlir::Value indexConst(mlir::OpBuilder &b, mlir::Location loc, int64_t v) {
  return mlir::arith::ConstantIndexOp::create(b, loc, v);
}

/// The size of dim `d` of tensor `t`, static or `tensor.dim`.
inline mlir::OpFoldResult sizeOf(mlir::OpBuilder &b, mlir::Location loc, mlir::Value t, int64_t d) {
  return mlir::tensor::getMixedSize(b, loc, t, d);
}

inline mlir::Value sizeValue(mlir::OpBuilder &b, mlir::Location loc, mlir::Value t, int64_t d) {
  return mlir::getValueOrCreateConstantIndexOp(b, loc, sizeOf(b, loc, t, d));
}

/// index -> float of type `t` (through i64).
inline mlir::Value indexToFloat(mlir::OpBuilder &b, mlir::Location loc, mlir::Value i,
                                mlir::Type t) {
  mlir::Value w = mlir::arith::IndexCastOp::create(b, loc, b.getI64Type(), i);
  return mlir::arith::SIToFPOp::create(b, loc, t, w);
}

/// Inlines a mod region (qkv.mask / qkv.score_mod / an attention region) at the builder's
/// insertion point: the block arguments are replaced by `lead` (score?, b, h, q, kv,
/// len_q, len_kv) followed by `captures`; returns the value the region yields.
inline mlir::Value inlineModRegion(mlir::OpBuilder &b, mlir::Region &region, mlir::ValueRange lead,
                                   mlir::ValueRange captures) {
  mlir::Block &block = region.front();
  mlir::IRMapping map;
  unsigned i = 0;
  for (mlir::Value v : lead)
    map.map(block.getArgument(i++), v);
  for (mlir::Value v : captures)
    map.map(block.getArgument(i++), v);
  for (mlir::Operation &op : block.without_terminator())
    b.clone(op, map);
  auto yield = mlir::cast<YieldOp>(block.getTerminator());
  return map.lookupOrDefault(yield.getValue());
}

} // namespace qkv::ir
