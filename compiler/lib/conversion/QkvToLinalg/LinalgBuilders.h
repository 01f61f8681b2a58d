// Builders shared by the qkv-to-linalg lowerings: affine maps over loop lists, empty and
// filled tensors, linalg.generic from a body function, and elementwise ops over a shape.
#pragma once

#include "../../transforms/LoweringUtils.h"

namespace qkv::ir {

using BodyFn = mlir::function_ref<mlir::Value(mlir::OpBuilder &, mlir::Location, mlir::ValueRange)>;

/// (d_dims[0], d_dims[1], ...) over `numLoops` loops.
mlir::AffineMap dimsMap(mlir::MLIRContext *ctx, unsigned numLoops, llvm::ArrayRef<unsigned> dims);
/// The loops [from, to) as a list.
llvm::SmallVector<unsigned> range(unsigned from, unsigned to);
/// `parallel` parallel loops, with `reduction` reduction loops at `reductionAt` (default:
/// after them).
llvm::SmallVector<mlir::utils::IteratorType> iterators(unsigned parallel, unsigned reduction = 0,
                                                       int reductionAt = -1);
mlir::Value emptyOf(mlir::OpBuilder &b, mlir::Location loc, llvm::ArrayRef<mlir::OpFoldResult> sizes,
                    mlir::Type elem);
mlir::Value filled(mlir::OpBuilder &b, mlir::Location loc, llvm::ArrayRef<mlir::OpFoldResult> sizes,
                   mlir::Type elem, double v);
/// linalg.generic writing `init`, its body from `body`; returns its result.
mlir::Value generic(mlir::OpBuilder &b, mlir::Location loc, mlir::Value init, mlir::ValueRange inputs,
                    llvm::ArrayRef<mlir::AffineMap> inMaps, mlir::AffineMap outMap,
                    llvm::ArrayRef<mlir::utils::IteratorType> iters, BodyFn body);
llvm::SmallVector<mlir::OpFoldResult> sizesOf(mlir::OpBuilder &b, mlir::Location loc, mlir::Value t);
/// An elementwise op over `shapeFrom`'s shape; each input is the full shape or broadcast
/// along leading dims (its dims end the output's).
mlir::Value elementwise(mlir::OpBuilder &b, mlir::Location loc, mlir::Value shapeFrom, mlir::Type elem,
                        mlir::ValueRange inputs, BodyFn body);

} // namespace qkv::ir
