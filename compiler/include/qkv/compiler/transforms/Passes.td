//===- Passes.td - qkv passes ------------------------------------------------------===//
// Each pass does one thing and says so in its name.
#ifndef QKV_PASSES_TD
#define QKV_PASSES_TD

include "mlir/Pass/PassBase.td"

def RecognizeAttention : Pass<"qkv-recognize-attention", "::mlir::func::FuncOp"> {
  let summary = "Fuse matmul(q, k^T) -> [scale] -> [score_mod] -> [mask] -> softmax -> "
                "matmul(., v) into one qkv.attention";
  let description = [{
    Users who write attention the seeds' way (three matmuls and a softmax) get the same
    fused op as users who call attention(q, k, v). The chain must be exactly that
    order, the softmax over the last axis, and each intermediate used only by the next
    step; anything else is left alone (it still runs, unfused).
  }];
  let dependentDialects = ["::qkv::ir::QkvDialect"];
}

def LowerToLinalg : Pass<"qkv-lower-to-linalg", "::mlir::func::FuncOp"> {
  let summary = "Lower every qkv op except attention to linalg/tensor/arith/math";
  let dependentDialects = ["::mlir::linalg::LinalgDialect", "::mlir::tensor::TensorDialect",
                           "::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
                           "::mlir::scf::SCFDialect"];
}

def LowerAttentionToLoops : Pass<"qkv-lower-attention-to-loops", "::mlir::func::FuncOp"> {
  let summary = "Lower qkv.attention to scf loops with an online softmax over the KV axis";
  let description = [{
    One pass over K/V per query row: running max m, running sum l and an accumulator
    row; each new score rescales them (FlashAttention's recurrence with a KV tile of 1).
    The mod regions are inlined in the innermost loop; no L x S tensor is made.
  }];
  let dependentDialects = ["::mlir::scf::SCFDialect", "::mlir::memref::MemRefDialect",
                           "::mlir::bufferization::BufferizationDialect",
                           "::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
                           "::mlir::tensor::TensorDialect"];
}

#endif // QKV_PASSES_TD
