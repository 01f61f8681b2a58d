// Vectorized math for the hand-scheduled kernels, in arith/math ops that LLVM turns into
// straight-line vector code (no library calls).
#pragma once

#include "KernelBuilder.h"

namespace qkv::ir {

/// 2^x, elementwise, for f32 or f64 scalars or vectors. Written for the online softmax:
/// x = -inf gives exactly 0; results below the smallest normal number flush to 0.
///
/// Method: n = round(x) (to nearest even) and f = x - n in [-1/2, 1/2]; 2^f by its Taylor polynomial in
/// f ln 2 (degree 7 for f32, 12 for f64: truncation error below 6e-9 and 2e-16 relative),
/// evaluated by Horner's rule with FMAs; 2^n by writing n + bias into the exponent bits.
/// Measured error against double-precision exp2 on [-126, 0]: see docs/compiler.md.
/// `degree` > 0 takes a shorter polynomial: 4 is within 4.2e-5 relative (2^-14.5), for
/// probabilities that are rounded to bf16 (2^-9) right after, at 3 FMAs less.
mlir::Value emitExp2(KernelBuilder &kb, mlir::Value x, int degree = 0);

} // namespace qkv::ir
