//===- QkvOps.td - the qkv dialect -------------------------------------------------===//
//
// One op per graph op (OpKind), same name everywhere: OpKind::SplitHeads is
// qkv.split_heads. Operands and results are ranked tensors; `?` marks a dim bound at run
// time. Mods (mask_mod, score_mod) are regions whose block arguments are the positions
// (b, h, q, kv), the extents of the q and kv axes, and the captured tensors; the body is
// arith/math/tensor.extract ops ending in qkv.yield. The semantics of every op is the
// reference interpreter's (runtime/lib/interpreter.cpp).
//
//===----------------------------------------------------------------------------------===//

#ifndef QKV_OPS_TD
#define QKV_OPS_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/IR/OpAsmInterface.td"

def Qkv_Dialect : Dialect {
  let name = "qkv";
  let cppNamespace = "::qkv::ir";
  let summary = "Attention pipelines: projections, heads, positions, masks, mods, attention";
  let description = [{
    The qkv dialect mirrors qkv's graph IR op for op. It is the stage where attention is
    recognised (qkv-recognize-attention) and from which the CPU pipeline lowers to
    linalg, scf and LLVM.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
                           "::mlir::tensor::TensorDialect"];
}

class Qkv_Op<string mnemonic, list<Trait> traits = []> :
    Op<Qkv_Dialect, mnemonic, traits>;

def Qkv_FloatTensor : RankedTensorOf<[F32, F64, F16, BF16]>;
def Qkv_IntTensor : RankedTensorOf<[I32, I64]>;

// The op's operands, attributes and result are checked by its op-table row's shape rule,
// the one the DSL's builders and Graph::verify call (dsl/lib/op_table.cpp): each shape
// rule is written once. A `?` dim equals any dim there; the attributes are read back by
// the names the row's IrAttr list gives (ShapeRuleVerifier.cpp).
def Qkv_ShapeRule : NativeOpTrait<"ShapeRule"> { let cppNamespace = "::qkv::ir"; }

// ---- unary elementwise-shaped ops: $x -> same shape ----------------------------------

class Qkv_UnaryOp<string mnemonic, list<Trait> traits = []> :
    Qkv_Op<mnemonic, !listconcat(traits, [Pure, Qkv_ShapeRule])> {
  let results = (outs Qkv_FloatTensor:$result);
}

// Elementwise: the result has x's shape and element type, which the traits check.
class Qkv_ElementwiseOp<string mnemonic> :
    Qkv_Op<mnemonic, [Pure, SameOperandsAndResultShape, SameOperandsAndResultElementType,
                      Qkv_ShapeRule]> {
  let results = (outs Qkv_FloatTensor:$result);
}

def Qkv_ScaleOp : Qkv_ElementwiseOp<"scale"> {
  let summary = "x * factor";
  let arguments = (ins Qkv_FloatTensor:$x, F64Attr:$factor);
  let assemblyFormat = "$x `by` $factor attr-dict `:` type($x) `->` type($result)";
}

def Qkv_SoftmaxOp : Qkv_UnaryOp<"softmax"> {
  let summary = "softmax over one axis; max-subtracted; an all -inf row gives 0";
  let arguments = (ins Qkv_FloatTensor:$x, I64Attr:$axis);
  let assemblyFormat = "$x `axis` $axis attr-dict `:` type($x) `->` type($result)";
}

def Qkv_TransposeOp : Qkv_UnaryOp<"transpose"> {
  let summary = "swap two axes";
  let arguments = (ins Qkv_FloatTensor:$x, I64Attr:$axis_a, I64Attr:$axis_b);
  let assemblyFormat =
      "$x `axes` `(` $axis_a `,` $axis_b `)` attr-dict `:` type($x) `->` type($result)";
}

def Qkv_SinusoidalPEOp : Qkv_UnaryOp<"sinusoidal_pe"> {
  let summary = "x + sinusoidal positional encoding over the last two axes";
  let arguments = (ins Qkv_FloatTensor:$x, F64Attr:$base, I64Attr:$offset);
  let assemblyFormat =
      "$x `base` $base `offset` $offset attr-dict `:` type($x) `->` type($result)";
}

def Qkv_RopeOp : Qkv_UnaryOp<"rope"> {
  let summary = "rotary position embedding over the last two axes (L, Dh)";
  let description = [{
    Row i is at position offset + i, or at positions[i] / positions[b, i] when the
    optional positions tensor ((L) or (B, L), B the first dim of x) is given.
  }];
  let arguments = (ins Qkv_FloatTensor:$x, Optional<Qkv_IntTensor>:$positions, F64Attr:$base,
                   I64Attr:$offset, UnitAttr:$interleaved);
  let assemblyFormat = "$x (`positions` $positions^ `:` type($positions))? `base` $base "
                       "`offset` $offset (`interleaved` $interleaved^)? "
                       "attr-dict `:` type($x) `->` type($result)";
}

def Qkv_GeluOp : Qkv_ElementwiseOp<"gelu"> {
  let summary = "GELU, exact (erf) or tanh approximation";
  let arguments = (ins Qkv_FloatTensor:$x, UnitAttr:$approximate);
  let assemblyFormat =
      "$x (`approximate` $approximate^)? attr-dict `:` type($x) `->` type($result)";
}

// The activations with one scalar attribute (elu's alpha, softcap's cap): one `def` each,
// generated from the op table's list (QKV_SCALAR_ACTIVATIONS in <qkv/dsl/op_lists.hpp>):
// `qkv.elu %x alpha 1.000000e+00 : ...`.
include "QkvScalarActivationOps.td"

// The activations without attributes (silu, softplus, sigmoid, ...): one `def` each,
// generated from the op table's list (QKV_PLAIN_ACTIVATIONS in <qkv/dsl/op_lists.hpp>).
class Qkv_ActivationOp<string mnemonic, string opSummary> : Qkv_ElementwiseOp<mnemonic> {
  let summary = opSummary;
  let arguments = (ins Qkv_FloatTensor:$x);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
}

include "QkvActivationOps.td"

// Its own verifier, not the ShapeRule trait: the head dim is the result's last dim here,
// while the op table's row takes it as an attribute (Attrs::dims[1]) the op does not have.
def Qkv_SplitHeadsOp : Qkv_Op<"split_heads", [Pure]> {
  let summary = "(..., L, H*Dh) -> (..., H, L, Dh); feature h*Dh + d goes to head h";
  let arguments = (ins Qkv_FloatTensor:$x, I64Attr:$heads);
  let results = (outs Qkv_FloatTensor:$result);
  let hasVerifier = 1;
  let assemblyFormat = "$x `heads` $heads attr-dict `:` type($x) `->` type($result)";
}

def Qkv_MergeHeadsOp : Qkv_UnaryOp<"merge_heads"> {
  let summary = "(..., H, L, Dh) -> (..., L, H*Dh), the inverse of split_heads";
  let arguments = (ins Qkv_FloatTensor:$x);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
}

// ---- binary ----------------------------------------------------------------------------

class Qkv_BinaryOp<string mnemonic> : Qkv_Op<mnemonic, [Pure, Qkv_ShapeRule]> {
  let arguments = (ins Qkv_FloatTensor:$lhs, Qkv_FloatTensor:$rhs);
  let results = (outs Qkv_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
}

// add, sub, mul, div, ...: one `def` each, generated from the op table's list
// (QKV_BROADCAST_BINARY in <qkv/dsl/op_lists.hpp>); their verifiers check the broadcast.
class Qkv_BroadcastOp<string mnemonic, string opSummary> : Qkv_BinaryOp<mnemonic> {
  let summary = opSummary;
}

include "QkvBroadcastOps.td"

// swiglu, linformer_project, merge_lse, ...: the other ops of two float tensors without
// attributes, one `def` each, generated from the op table's list (QKV_TENSOR_PAIR_OPS in
// <qkv/dsl/op_lists.hpp>); their verifier is the row's shape rule, which evaluates the
// list's rule of <qkv/dsl/shape_rules.hpp>.
class Qkv_PairOp<string mnemonic, string opSummary> : Qkv_BinaryOp<mnemonic> {
  let summary = opSummary;
}

include "QkvPairOps.td"

def Qkv_MatMulOp : Qkv_BinaryOp<"matmul"> {
  let summary = "(..., M, K) x (..., K, N) -> (..., M, N); a 2-D operand broadcasts";
}

def Qkv_LinearOp : Qkv_Op<"linear", [Pure, Qkv_ShapeRule]> {
  let summary = "x (..., K) . w (K, N) [+ bias (N)]";
  let arguments = (ins Qkv_FloatTensor:$x, Qkv_FloatTensor:$weight,
                   Optional<Qkv_FloatTensor>:$bias);
  let results = (outs Qkv_FloatTensor:$result);
  let assemblyFormat = "$x `,` $weight (`bias` $bias^)? attr-dict `:` "
                       "type($x) `,` type($weight) (`,` type($bias)^)? `->` type($result)";
}

def Qkv_LayerNormOp : Qkv_Op<"layer_norm", [Pure, AttrSizedOperandSegments, Qkv_ShapeRule]> {
  let summary = "(x - mean) / sqrt(var + eps) over the last axis, then * gamma + beta";
  let arguments = (ins Qkv_FloatTensor:$x, Optional<Qkv_FloatTensor>:$gamma,
                   Optional<Qkv_FloatTensor>:$beta, F64Attr:$eps);
  let results = (outs Qkv_FloatTensor:$result);
  let assemblyFormat = "$x (`gamma` $gamma^ `:` type($gamma))? (`beta` $beta^ `:` type($beta))? "
                       "`eps` $eps attr-dict `:` type($x) `->` type($result)";
}

def Qkv_RmsNormOp : Qkv_Op<"rms_norm", [Pure, Qkv_ShapeRule]> {
  let summary = "x / sqrt(mean(x^2) + eps) over the last axis, then * gamma";
  let arguments = (ins Qkv_FloatTensor:$x, Optional<Qkv_FloatTensor>:$gamma, F64Attr:$eps);
  let results = (outs Qkv_FloatTensor:$result);
  let assemblyFormat = "$x (`gamma` $gamma^ `:` type($gamma))? `eps` $eps attr-dict `:` "
                       "type($x) `->` type($result)";
}

def Qkv_ConcatOp : Qkv_Op<"concat", [Pure, Qkv_ShapeRule]> {
  let summary = "join along one axis";
  let arguments = (ins Variadic<Qkv_FloatTensor>:$inputs, I64Attr:$axis);
  let results = (outs Qkv_FloatTensor:$result);
  let assemblyFormat = "$inputs `axis` $axis attr-dict `:` functional-type($inputs, results)";
}

def Qkv_EmbeddingOp : Qkv_Op<"embedding", [Pure, Qkv_ShapeRule]> {
  let summary = "table[ids]: ids (...) integer, table (V, D) -> (..., D)";
  let arguments = (ins Qkv_IntTensor:$ids, Qkv_FloatTensor:$table);
  let results = (outs Qkv_FloatTensor:$result);
  let assemblyFormat = "$table `[` $ids `]` attr-dict `:` functional-type(operands, results)";
}

// ---- KV caches -----------------------------------------------------------------------------

def Qkv_CacheViewOp : Qkv_Op<"cache_view", [Pure, Qkv_ShapeRule]> {
  let summary = "a KV cache's rows read in place, then this step's new rows, then zeros";
  let description = [{
    past (B, Hkv, C, Dh), lengths (B), fresh (B, Hkv, n, Dh) -> (B, Hkv, C+n, Dh): for
    sequence b, past's rows [0, lengths[b]), fresh's n rows, then zeros.
  }];
  let arguments = (ins Qkv_FloatTensor:$past, Qkv_IntTensor:$lengths, Qkv_FloatTensor:$fresh);
  let results = (outs Qkv_FloatTensor:$result);
  let assemblyFormat = "$past `[` $lengths `]` `,` $fresh attr-dict `:` "
                       "functional-type(operands, results)";
}

def Qkv_PagedCacheViewOp : Qkv_Op<"paged_cache_view", [Pure, Qkv_ShapeRule]> {
  let summary = "a paged KV cache's rows read through a block table, then new rows, then zeros";
  let description = [{
    pool (P, Hkv, page, Dh), table (B, M), lengths (B), fresh (B, Hkv, n, Dh) ->
    (B, Hkv, M*page+n, Dh): row j < lengths[b] of sequence b is row j % page of page
    table[b, j / page]; then fresh's n rows, then zeros.
  }];
  let arguments = (ins Qkv_FloatTensor:$pool, Qkv_IntTensor:$table, Qkv_IntTensor:$lengths,
                   Qkv_FloatTensor:$fresh);
  let results = (outs Qkv_FloatTensor:$result);
  let assemblyFormat = "$pool `[` $table `,` $lengths `]` `,` $fresh attr-dict `:` "
                       "functional-type(operands, results)";
}

// ---- checked compiles ------------------------------------------------------------------

def Qkv_CheckOp : Qkv_Op<"check", [MemoryEffects<[MemWrite]>]> {
  let summary = "reports a failed bounds check of a checked compile";
  let description = [{
    When `ok` is false, the kernel reports site `site` with `values` to the runtime
    (qkv_check_failed), which raises the interpreter's error for it after the run. The
    values of a load in a mod: b, h, q, kv, the load's indices, then the captured
    tensor's dims. Emitted by import in a checked compile next to the load it guards
    (whose indices are then clamped into bounds); qkv-lower-checks turns it into a
    call.
  }];
  let arguments = (ins I1:$ok, I64Attr:$site, Variadic<Index>:$values);
  let assemblyFormat = "$ok `,` `site` $site ` ` `[` $values `]` attr-dict";
}

// ---- mods and attention ----------------------------------------------------------------

def Qkv_YieldOp : Qkv_Op<"yield", [Pure, Terminator, ReturnLike,
                                   ParentOneOf<["MaskOp", "ScoreModOp", "AttentionOp"]>]> {
  let summary = "the value of a mod region: i1 for a mask, the score's type for a score mod";
  let arguments = (ins AnyType:$value);
  let assemblyFormat = "$value attr-dict `:` type($value)";
}

def Qkv_MaskOp : Qkv_Op<"mask", [Pure, IsolatedFromAbove,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmBlockArgumentNames"]>]> {
  let summary = "scores where the mask region yields false become -inf";
  let description = [{
    Scores are (L, S), (H, L, S) or (B, H, L, S). The region's block arguments are
    (b, h, q, kv, len_q, len_kv : index, captures...); it yields an i1.
  }];
  let arguments = (ins Qkv_FloatTensor:$scores, Variadic<AnyRankedTensor>:$captures);
  let results = (outs Qkv_FloatTensor:$result);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$scores (`captures` `(` $captures^ `:` type($captures) `)`)? attr-dict "
                       "`:` type($scores) `->` type($result) $body";
  let hasRegionVerifier = 1;
}

def Qkv_ScoreModOp : Qkv_Op<"score_mod", [Pure, IsolatedFromAbove,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmBlockArgumentNames"]>]> {
  let summary = "scores replaced by what the region yields";
  let description = [{
    The region's block arguments are (score, b, h, q, kv, len_q, len_kv : index,
    captures...); it yields the new score.
  }];
  let arguments = (ins Qkv_FloatTensor:$scores, Variadic<AnyRankedTensor>:$captures);
  let results = (outs Qkv_FloatTensor:$result);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$scores (`captures` `(` $captures^ `:` type($captures) `)`)? attr-dict "
                       "`:` type($scores) `->` type($result) $body";
  let hasRegionVerifier = 1;
}

def Qkv_AttentionOp : Qkv_Op<"attention", [Pure, IsolatedFromAbove, Qkv_ShapeRule,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmBlockArgumentNames"]>]> {
  let summary = "softmax(mask(score_mod(scale q.k^T))) . v, with GQA/MQA and cross-attention";
  let description = [{
    q (..., Hq, L, Dh), k (..., Hkv, S, Dh), v (..., Hkv, S, Dv) with rank 2, 3 or 4;
    query head h reads kv head h / (Hq / Hkv). Without `scale` it is 1/sqrt(Dh). The
    optional `score` region maps (score, b, h, q, kv, len_q, len_kv, captures...) to a
    new score; the optional `mask` region maps (b, h, q, kv, len_q, len_kv,
    captures...) to an i1 (false: the score becomes -inf). A fully masked row gives 0.
    The optional second result `lse` (..., Hq, L) is each row's log-sum-exp of the
    scores the softmax sees (-inf for a fully masked row): the attention is then a
    partial result, which qkv.merge_attention combines with another.
    Nothing here fixes a schedule: lowerings may tile over S (online softmax).
  }];
  let arguments = (ins Qkv_FloatTensor:$q, Qkv_FloatTensor:$k, Qkv_FloatTensor:$v,
                   Variadic<AnyRankedTensor>:$captures, OptionalAttr<F64Attr>:$scale);
  let results = (outs Qkv_FloatTensor:$result, Optional<Qkv_FloatTensor>:$lse);
  let regions = (region MaxSizedRegion<1>:$score, MaxSizedRegion<1>:$mask);
  let assemblyFormat = "$q `,` $k `,` $v (`scale` $scale^)? "
                       "(`captures` `(` $captures^ `:` type($captures) `)`)? attr-dict `:` "
                       "type($q) `,` type($k) `,` type($v) `->` type($result) "
                       "(`lse` type($lse)^)? (`score` $score^)? (`mask` $mask^)?";
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
}

def Qkv_MergeAttentionOp : Qkv_Op<"merge_attention", [Pure,
    AllTypesMatch<["oa", "ob", "result"]>, AllTypesMatch<["la", "lb"]>,
    AllElementTypesMatch<["oa", "la"]>, Qkv_ShapeRule]> {
  let summary = "two partial attentions (output, log-sum-exp) merged exactly";
  let description = [{
    oa, ob (..., H, L, Dv) and their log-sum-exps la, lb (..., H, L), partial attentions
    of the same queries over disjoint keys: the result is (e^(la - m) oa + e^(lb - m) ob) /
    (e^(la - m) + e^(lb - m)), m = max(la, lb), per row; 0 where both are -inf.
  }];
  let arguments = (ins Qkv_FloatTensor:$oa, Qkv_FloatTensor:$la, Qkv_FloatTensor:$ob,
                   Qkv_FloatTensor:$lb);
  let results = (outs Qkv_FloatTensor:$result);
  let assemblyFormat = "$oa `,` $la `,` $ob `,` $lb attr-dict `:` type($oa) `,` type($la)";
}

def Qkv_LinearAttentionOp : Qkv_Op<"linear_attention", [Pure, Qkv_ShapeRule]> {
  let summary = "phi(q) (phi(k)^T v) / (phi(q) . sum phi(k)); phi = elu+1 or relu";
  let arguments = (ins Qkv_FloatTensor:$q, Qkv_FloatTensor:$k, Qkv_FloatTensor:$v,
                   StrAttr:$feature_map);
  let results = (outs Qkv_FloatTensor:$result);
  let assemblyFormat = "$q `,` $k `,` $v `feature_map` $feature_map attr-dict `:` "
                       "type($q) `,` type($k) `,` type($v) `->` type($result)";
}

#endif // QKV_OPS_TD
