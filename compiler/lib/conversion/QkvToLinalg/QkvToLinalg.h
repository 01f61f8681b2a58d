// qkv-lower-to-linalg's patterns, one family per file: every qkv op except attention (which
// qkv-lower-attention-to-flash lowers) and the checks (qkv-lower-checks) as linalg named
// ops, linalg.generic and tensor reshapes on tensors, computing exactly what the
// interpreter computes.
#pragma once

#include "mlir/IR/PatternMatch.h"

#include "LinalgBuilders.h"

namespace qkv::ir {

/// matmul, linear, linformer_project, linear_attention.
void populateQkvProductsToLinalgPatterns(mlir::RewritePatternSet &patterns);
/// add, sub, mul, div, swiglu, scale, the activations (gelu, elu and every one of
/// QKV_PLAIN_ACTIVATIONS), softmax, layer_norm, rms_norm.
void populateQkvElementwiseToLinalgPatterns(mlir::RewritePatternSet &patterns);
/// transpose, split_heads, merge_heads, concat, embedding, cache_view, paged_cache_view.
void populateQkvLayoutToLinalgPatterns(mlir::RewritePatternSet &patterns);
/// mask, score_mod, sinusoidal_pe, rope.
void populateQkvPositionsAndModsToLinalgPatterns(mlir::RewritePatternSet &patterns);
/// merge_attention, merge_lse.
void populateQkvPartialsToLinalgPatterns(mlir::RewritePatternSet &patterns);

} // namespace qkv::ir
