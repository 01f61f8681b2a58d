// What qkv-lower-matmul-to-microkernels fuses into a GEMM, found on buffers around a
// linalg.matmul / batch_matmul writing C:
//
//   the start   a linalg.fill of C just before (the tiles start from the value), or a
//               generic broadcasting a row vector into C just before (a linear's bias,
//               widened when it is narrower than C, as a bf16 graph's is:
//               the tiles start from it), instead of a pass over C first;
//   the epilogue the elementwise linalg.generic that reads C next (GELU, SiLU, a residual
//               add, a scale), applied by each GEMM task to its block of C while the
//               block is in cache, writing the generic's output; C itself is then never
//               allocated: the GEMM writes the output buffer, and the epilogue updates it
//               in place. An epilogue whose output has another element type (a bf16
//               graph's rounding of the product), or whose output holds another of its
//               operands (SwiGLU bufferized in place on its gate), leaves C as it is and
//               writes the output from each task's block of it.
#pragma once

#include <optional>

#include "mlir/Dialect/Linalg/IR/Linalg.h"

#include "VectorizedGeneric.h"

namespace qkv::ir {

struct GemmStart {
  enum class Kind { FromC, Fill, Bias } kind = Kind::FromC;
  mlir::Value value;               ///< the fill value, or the bias buffer (1-D)
  mlir::Operation *op = nullptr;   ///< the fill or the broadcast, erased with the matmul
};

/// Whether `op` touches memory at most by allocating (a view, index math, an alloc).
bool onlyAllocates(mlir::Operation *op);

/// The generic that reads `c` right after `op` (only ops that at most allocate between),
/// or null: the candidate for `op`'s epilogue.
mlir::linalg::GenericOp gemmConsumer(mlir::Operation *op, mlir::Value c);

/// How the matmul `op` writing `c` starts.
GemmStart gemmStartOf(mlir::Operation *op, mlir::Value c);

struct GemmEpilogue {
  VectorizedGeneric generic;
  /// The generic's operands with C replaced by its output buffer (one that keeps C: as
  /// they are).
  llvm::SmallVector<mlir::Value> operands;
  mlir::Value out; ///< the buffer the GEMM writes instead of C (one that keeps C: C)
};

/// The elementwise generic that consumes the result of matmul `op` (whose C is `c` and
/// whose start is `start`), when it can be its epilogue: then the IR is rewired (the
/// start and the matmul write the generic's output instead of C, whose allocation and
/// deallocation are erased); the generic itself is left for the caller to erase once it
/// has emitted it. nullopt (and nothing changed) otherwise.
std::optional<GemmEpilogue> takeGemmEpilogue(mlir::Operation *op, mlir::Value c,
                                             const GemmStart &start, int64_t vectorBits);

} // namespace qkv::ir
