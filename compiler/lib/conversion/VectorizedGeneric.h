// A linalg.generic on buffers as vector code along its innermost loop: the elementwise
// ops of a graph (activations, residual adds, scales, the normalisation step of a norm)
// and reductions along the innermost loop (a norm's sums, a softmax's max and sum),
// vectors of `lanes` elements with a masked tail. Used by qkv-vectorize-elementwise (one
// parallel task per point of the outer loops) and by the GEMM for fused epilogues (over a
// task's block of C).
#pragma once

#include <optional>
#include <string>

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/IRMapping.h"

#include "KernelBuilder.h"

namespace qkv::ir {

class VectorizedGeneric {
public:
  /// The form this handles: pure buffer semantics, one output; every loop parallel, or
  /// the last one a reduction whose body combines the output with one op (addf, mulf,
  /// maximumf, minimumf, maxnumf, minnumf); projected-permutation maps in which the
  /// innermost loop, where a map has it, is the last result and the operand's last
  /// (unit-stride) dimension (outer dims may be permuted: a transpose of rows); the output's map is the identity
  /// (less the reduced loop); a body of elementwise arith/math ops and constants (no
  /// linalg.index, no regions). Otherwise nullopt, `why` saying what failed.
  static std::optional<VectorizedGeneric> analyse(mlir::linalg::GenericOp op, int64_t vectorBits,
                                                  std::string *why = nullptr);

  mlir::linalg::GenericOp op() const { return op_; }
  unsigned loops() const { return loops_; }
  bool reduction() const { return combiner_ != nullptr; }
  int64_t lanes() const { return lanes_; }

  /// Emits the generic at the point `outer` of its outer loops (all but the innermost),
  /// over the innermost loop's range [j0, j1). `operands` replaces op's operands (same
  /// order: inputs, then the output), e.g. with the buffer a fused producer writes.
  void emitRow(KernelBuilder &kb, mlir::ValueRange outer, mlir::Value j0, mlir::Value j1,
               mlir::ValueRange operands) const;

private:
  /// The vector values of the body's block arguments and of the values it uses from
  /// outside at one step, then the body's yield (a parallel op) or its combined value (a
  /// reduction, the output's argument standing for the accumulator).
  mlir::Value emitBody(KernelBuilder &kb, mlir::IRMapping &map) const;

  /// One step at innermost index j: the body's value (or, with `acc`, the combined value).
  using Step = llvm::function_ref<mlir::Value(KernelBuilder &, mlir::Value j, mlir::Value mask,
                                              mlir::Value acc)>;
  /// A reduction's row: vector steps over [j0, main), a masked step over [main, main +
  /// rest), the lanes reduced and combined with the output at `out[outAt]`.
  void emitReduction(KernelBuilder &kb, Step step, mlir::Value j0, mlir::Value main,
                     mlir::Value rest, mlir::Value out, mlir::ValueRange outAt) const;

  mutable mlir::linalg::GenericOp op_;
  unsigned loops_ = 0;
  int64_t lanes_ = 0;
  mlir::Operation *combiner_ = nullptr; ///< the reduction's combining op
  mlir::vector::CombiningKind kind_ = mlir::vector::CombiningKind::ADD;
};

} // namespace qkv::ir
