// Graph -> qkv dialect. One op per node; mod expression trees become region bodies of
// arith/math/tensor.extract ops.
#include "Import.h"

#include <cmath>
#include <limits>
#include <optional>
#include <unordered_map>

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Verifier.h"

#include "qkv/compiler/ir/QkvDialect.h"
#include <qkv/dsl/op_table.hpp>
#include <qkv/dsl/repeats.hpp>
#include <qkv/runtime/checks.hpp>
#include <qkv/runtime/kernel_abi.hpp>

namespace qkv::ir {

using mlir::OpBuilder;

std::string function_name(const Graph &g) { return abi::function_name(g.name()); }

namespace {

mlir::Type element_type(mlir::MLIRContext &ctx, DType t) {
  switch (t) {
  case DType::F32: return mlir::Float32Type::get(&ctx);
  case DType::F64: return mlir::Float64Type::get(&ctx);
  case DType::F16: return mlir::Float16Type::get(&ctx);
  case DType::BF16: return mlir::BFloat16Type::get(&ctx);
  case DType::I32: return mlir::IntegerType::get(&ctx, 32);
  case DType::I64: return mlir::IntegerType::get(&ctx, 64);
  }
  internal_error("element_type");
}

mlir::RankedTensorType tensor_type(mlir::MLIRContext &ctx, const Node &n) {
  llvm::SmallVector<int64_t> shape;
  for (const Dim &d : n.dims)
    shape.push_back(d.is_static() ? d.extent : mlir::ShapedType::kDynamic);
  return mlir::RankedTensorType::get(shape, element_type(ctx, n.dtype));
}

/// The type an op computes in: f16 and bf16 tensors widened to f32.
mlir::RankedTensorType compute_type(mlir::Type t) {
  auto tt = mlir::cast<mlir::RankedTensorType>(t);
  if (!tt.getElementType().isF16() && !tt.getElementType().isBF16())
    return tt;
  return tt.clone(mlir::Float32Type::get(tt.getContext()));
}

mlir::ArrayAttr dims_attr(OpBuilder &b, const std::vector<Dim> &dims) {
  llvm::SmallVector<mlir::Attribute> names;
  for (const Dim &d : dims)
    names.push_back(b.getStringAttr(d.name));
  return b.getArrayAttr(names);
}

/// The check sites of a checked compile that are not proved safe, by their expression
/// (qkv::checks::sites' numbering); empty for an unchecked one.
using SiteIds = std::unordered_map<const ExprNode *, int64_t>;

SiteIds site_ids(const Graph &g, bool checked) {
  SiteIds ids;
  if (!checked)
    return ids;
  std::vector<checks::Site> sites = checks::sites(g);
  // A proved site is not checked. An expression two ops share is checked if either site
  // is unproved (it is emitted once per op, under the id of its last unproved site).
  for (std::size_t i = 0; i < sites.size(); ++i)
    if (!sites[i].proven)
      ids[sites[i].expr] = static_cast<int64_t>(i);
  return ids;
}

/// Emits a mod expression into the current block of `b`.
class ModEmitter {
public:
  ModEmitter(OpBuilder &b, mlir::Location loc, mlir::Type float_type, mlir::Value score,
             llvm::ArrayRef<mlir::Value> positions, // b, h, q, kv, len_q, len_kv
             const std::unordered_map<NodeId, mlir::Value> &captures, const SiteIds &sites)
      : b_(b), loc_(loc), ft_(float_type), score_(score), pos_(positions), caps_(captures),
        sites_(sites) {}

  mlir::Value emit(const ExprPtr &e) {
    auto it = memo_.find(e.get());
    if (it != memo_.end())
      return it->second;
    mlir::Value v = emit_new(*e);
    memo_[e.get()] = v;
    return v;
  }

private:
  mlir::Value cst_index(int64_t v) { return mlir::arith::ConstantIndexOp::create(b_, loc_, v); }

  /// A checked compile's guard of a load's indices: qkv.check reports them (with the
  /// position and the tensor's dims) when any is out of bounds, and the load then reads
  /// element 0 of that axis instead.
  void check_indices(const ExprNode &e, mlir::Value tensor, llvm::SmallVector<mlir::Value> &idx) {
    auto site = sites_.find(&e);
    if (site == sites_.end() || idx.empty())
      return;
    if (4 + 2 * idx.size() > checks::kCheckValues)
      user_error("compile (checked): a mod loads from '" + e.graph->node(e.tensor).name +
                 "', of rank " + std::to_string(idx.size()) +
                 "; checked kernels check loads from tensors of rank 6 or less (the compiler "
                 "could not prove this one in bounds; CompileOptions::checked = false, or "
                 "QKV_CHECKED=0, compiles it unchecked)");
    using namespace mlir::arith;
    mlir::Value zero = cst_index(0), ok;
    llvm::SmallVector<mlir::Value> values(pos_.begin(), pos_.begin() + 4);
    values.append(idx.begin(), idx.end());
    for (std::size_t d = 0; d < idx.size(); ++d) {
      mlir::Value dim = mlir::tensor::DimOp::create(b_, loc_, tensor, static_cast<int64_t>(d));
      values.push_back(dim);
      // One statement each: the order of the printed IR must not depend on the order a
      // compiler evaluates function arguments in (g++ goes right to left).
      mlir::Value ge = CmpIOp::create(b_, loc_, CmpIPredicate::sge, idx[d], zero);
      mlir::Value lt = CmpIOp::create(b_, loc_, CmpIPredicate::slt, idx[d], dim);
      mlir::Value in = AndIOp::create(b_, loc_, ge, lt);
      ok = ok ? AndIOp::create(b_, loc_, ok, in).getResult() : in;
    }
    CheckOp::create(b_, loc_, ok, b_.getI64IntegerAttr(site->second), values);
    for (mlir::Value &i : idx)
      i = SelectOp::create(b_, loc_, ok, i, zero);
  }

  /// The divisor of an integer division or remainder, guarded: a divisor of 0 (and
  /// INT64_MIN / -1, whose quotient does not fit) would trap (SIGFPE), so the division
  /// divides by 1 instead, in every compile; a checked one reports it first (qkv.check,
  /// with the dividend and divisor), as the interpreter does. -1 becomes 1 for a
  /// remainder, which is exact (x % -1 == x % 1 == 0) and keeps INT64_MIN % -1 from
  /// trapping.
  mlir::Value safe_divisor(const ExprNode &e, mlir::Value a, mlir::Value d) {
    using namespace mlir::arith;
    mlir::Value one = cst_index(1), minus1 = cst_index(-1);
    mlir::Value ok = CmpIOp::create(b_, loc_, CmpIPredicate::ne, d, cst_index(0));
    mlir::Value isMinus1 = CmpIOp::create(b_, loc_, CmpIPredicate::eq, d, minus1);
    if (e.op == ExprOp::Div) {
      mlir::Value min = cst_index(std::numeric_limits<int64_t>::min());
      mlir::Value overflow = AndIOp::create(
          b_, loc_, CmpIOp::create(b_, loc_, CmpIPredicate::eq, a, min), isMinus1);
      ok = AndIOp::create(b_, loc_, ok, XOrIOp::create(b_, loc_, overflow, cst_bool(true)));
    }
    if (auto site = sites_.find(&e); site != sites_.end()) {
      llvm::SmallVector<mlir::Value> values(pos_.begin(), pos_.begin() + 4);
      values.append({a, d});
      CheckOp::create(b_, loc_, ok, b_.getI64IntegerAttr(site->second), values);
    }
    mlir::Value safe = SelectOp::create(b_, loc_, ok, d, one);
    return e.op == ExprOp::Mod ? SelectOp::create(b_, loc_, isMinus1, one, safe) : safe;
  }

  mlir::Value cst_bool(bool v) { return mlir::arith::ConstantIntOp::create(b_, loc_, v, 1); }

  mlir::Value to_float(mlir::Value v) {
    if (v.getType() == ft_)
      return v;
    mlir::Value i = mlir::arith::IndexCastOp::create(b_, loc_, b_.getI64Type(), v);
    return mlir::arith::SIToFPOp::create(b_, loc_, ft_, i);
  }

  /// <, <=, >, >=, ==, != of two ints (signed) or two floats (ordered, except !=, which
  /// is true for NaN as in C++).
  mlir::Value emit_compare(const ExprNode &e) {
    using namespace mlir::arith;
    mlir::Value a = emit(e.args[0]), b = emit(e.args[1]);
    if (e.args[0]->type == ExprType::Int) {
      CmpIPredicate p = e.op == ExprOp::Lt   ? CmpIPredicate::slt
                        : e.op == ExprOp::Le ? CmpIPredicate::sle
                        : e.op == ExprOp::Gt ? CmpIPredicate::sgt
                        : e.op == ExprOp::Ge ? CmpIPredicate::sge
                        : e.op == ExprOp::Eq ? CmpIPredicate::eq
                                             : CmpIPredicate::ne;
      return CmpIOp::create(b_, loc_, p, a, b);
    }
    CmpFPredicate p = e.op == ExprOp::Lt   ? CmpFPredicate::OLT
                      : e.op == ExprOp::Le ? CmpFPredicate::OLE
                      : e.op == ExprOp::Gt ? CmpFPredicate::OGT
                      : e.op == ExprOp::Ge ? CmpFPredicate::OGE
                      : e.op == ExprOp::Eq ? CmpFPredicate::OEQ
                                           : CmpFPredicate::UNE;
    return CmpFOp::create(b_, loc_, p, a, b);
  }

  /// A captured tensor's element, its indices checked where the op is checked, as an
  /// index (int tensors) or in the mod's float type.
  mlir::Value emit_load(const ExprNode &e) {
    using namespace mlir::arith;
    auto it = caps_.find(e.tensor);
    if (it == caps_.end())
      internal_error("mod loads a tensor that is not captured");
    llvm::SmallVector<mlir::Value> idx;
    for (const ExprPtr &i : e.args)
      idx.push_back(emit(i));
    check_indices(e, it->second, idx);
    mlir::Value v = mlir::tensor::ExtractOp::create(b_, loc_, it->second, idx);
    mlir::Type t = v.getType();
    if (e.type == ExprType::Int)
      return IndexCastOp::create(b_, loc_, b_.getIndexType(), v);
    if (t != ft_) {
      if (t.getIntOrFloatBitWidth() > ft_.getIntOrFloatBitWidth())
        return TruncFOp::create(b_, loc_, ft_, v);
      return ExtFOp::create(b_, loc_, ft_, v);
    }
    return v;
  }

  mlir::Value emit_new(const ExprNode &e) {
    using namespace mlir::arith;
    bool is_int = e.type == ExprType::Int;
    auto arg = [&](int i) { return emit(e.args[i]); };
    // Binary operands of a float op were already promoted by the expression builder, but
    // an Int-typed Load or leaf may still feed a float op through ToFloat: handled there.
    switch (e.op) {
    case ExprOp::IndexB: return pos_[0];
    case ExprOp::IndexH: return pos_[1];
    case ExprOp::IndexQ: return pos_[2];
    case ExprOp::IndexKV: return pos_[3];
    case ExprOp::LenQ: return pos_[4];
    case ExprOp::LenKV: return pos_[5];
    case ExprOp::Score:
      if (!score_)
        internal_error("score used outside a score_mod");
      return score_;
    case ExprOp::ConstInt: return cst_index(e.ival);
    case ExprOp::ConstFloat: return ConstantOp::create(b_, loc_, b_.getFloatAttr(ft_, e.fval));
    case ExprOp::ConstBool: return ConstantOp::create(b_, loc_, b_.getBoolAttr(e.ival != 0));
    case ExprOp::Neg:
      if (is_int)
        return SubIOp::create(b_, loc_, cst_index(0), arg(0));
      return NegFOp::create(b_, loc_, arg(0));
    case ExprOp::Not:
      return XOrIOp::create(b_, loc_, arg(0), ConstantOp::create(b_, loc_, b_.getBoolAttr(true)));
    case ExprOp::Exp: return mlir::math::ExpOp::create(b_, loc_, arg(0));
    case ExprOp::Log: return mlir::math::LogOp::create(b_, loc_, arg(0));
    case ExprOp::Tanh: return mlir::math::TanhOp::create(b_, loc_, arg(0));
    case ExprOp::Sqrt: return mlir::math::SqrtOp::create(b_, loc_, arg(0));
    case ExprOp::Abs:
      if (is_int)
        return mlir::math::AbsIOp::create(b_, loc_, arg(0));
      return mlir::math::AbsFOp::create(b_, loc_, arg(0));
    case ExprOp::ToFloat: return to_float(arg(0));
    case ExprOp::Add:
      return is_int ? mlir::Value(AddIOp::create(b_, loc_, arg(0), arg(1)))
                    : mlir::Value(AddFOp::create(b_, loc_, arg(0), arg(1)));
    case ExprOp::Sub:
      return is_int ? mlir::Value(SubIOp::create(b_, loc_, arg(0), arg(1)))
                    : mlir::Value(SubFOp::create(b_, loc_, arg(0), arg(1)));
    case ExprOp::Mul:
      return is_int ? mlir::Value(MulIOp::create(b_, loc_, arg(0), arg(1)))
                    : mlir::Value(MulFOp::create(b_, loc_, arg(0), arg(1)));
    case ExprOp::Div:
      if (!is_int)
        return DivFOp::create(b_, loc_, arg(0), arg(1));
      return DivSIOp::create(b_, loc_, arg(0), safe_divisor(e, arg(0), arg(1)));
    case ExprOp::Mod: return RemSIOp::create(b_, loc_, arg(0), safe_divisor(e, arg(0), arg(1)));
    case ExprOp::Min:
      return is_int ? mlir::Value(MinSIOp::create(b_, loc_, arg(0), arg(1)))
                    : mlir::Value(MinimumFOp::create(b_, loc_, arg(0), arg(1)));
    case ExprOp::Max:
      return is_int ? mlir::Value(MaxSIOp::create(b_, loc_, arg(0), arg(1)))
                    : mlir::Value(MaximumFOp::create(b_, loc_, arg(0), arg(1)));
    case ExprOp::Pow: return mlir::math::PowFOp::create(b_, loc_, arg(0), arg(1));
    case ExprOp::Lt:
    case ExprOp::Le:
    case ExprOp::Gt:
    case ExprOp::Ge:
    case ExprOp::Eq:
    case ExprOp::Ne: return emit_compare(e);
    case ExprOp::And: return AndIOp::create(b_, loc_, arg(0), arg(1));
    case ExprOp::Or: return OrIOp::create(b_, loc_, arg(0), arg(1));
    case ExprOp::Select: return SelectOp::create(b_, loc_, arg(0), arg(1), arg(2));
    case ExprOp::Load: return emit_load(e);
    }
    internal_error("ModEmitter: unhandled expression op");
  }

  OpBuilder &b_;
  mlir::Location loc_;
  mlir::Type ft_;
  mlir::Value score_;
  llvm::ArrayRef<mlir::Value> pos_;
  const std::unordered_map<NodeId, mlir::Value> &caps_;
  const SiteIds &sites_;
  std::unordered_map<const ExprNode *, mlir::Value> memo_;
};

/// Fills `region` with one block: [score,] b, h, q, kv, len_q, len_kv, captures...,
/// the expression, and qkv.yield.
void build_mod_region(OpBuilder &b, mlir::Location loc, mlir::Region &region, const ExprPtr &expr,
                      bool with_score, mlir::Type float_type,
                      const std::vector<NodeId> &capture_ids, mlir::ValueRange capture_values,
                      const SiteIds &sites) {
  OpBuilder::InsertionGuard guard(b);
  llvm::SmallVector<mlir::Type> types;
  if (with_score)
    types.push_back(float_type);
  for (int i = 0; i < 6; ++i)
    types.push_back(b.getIndexType());
  for (mlir::Value c : capture_values)
    types.push_back(c.getType());
  llvm::SmallVector<mlir::Location> locs(types.size(), loc);
  mlir::Block *block = b.createBlock(&region, {}, types, locs);
  unsigned i = 0;
  mlir::Value score = with_score ? block->getArgument(i++) : mlir::Value();
  llvm::SmallVector<mlir::Value> pos;
  for (int j = 0; j < 6; ++j)
    pos.push_back(block->getArgument(i++));
  std::unordered_map<NodeId, mlir::Value> caps;
  for (NodeId id : capture_ids)
    caps[id] = block->getArgument(i++);
  ModEmitter em(b, loc, float_type, score, pos, caps, sites);
  mlir::Value v = em.emit(expr);
  if (with_score && v.getType().isIndex()) // an integer-valued score_mod
    v = mlir::arith::SIToFPOp::create(b, loc, float_type,
                                      mlir::arith::IndexCastOp::create(b, loc, b.getI64Type(), v));
  YieldOp::create(b, loc, v);
}

int64_t norm_axis(int64_t a, int rank) { return a < 0 ? a + rank : a; }

/// The location of what graph `name` (or node `name`) became: the name as a file name,
/// for diagnostics, and not a NameLoc, which the stages print as the value's name (they
/// name the fused kernel's loops that way) and which would rename every value after its
/// node.
mlir::Location node_loc(OpBuilder &b, const std::string &name) {
  return mlir::FileLineColLoc::get(b.getStringAttr(name), 0, 0);
}

/// The MLIR attribute the op table's `ia` makes from node `n`'s attributes; null when
/// the field holds nothing (an optional scale unset, a false unit attribute).
mlir::Attribute ir_attribute(OpBuilder &b, const IrAttr &ia, const Node &n) {
  mlir::Attribute out;
  visit_field(n.attrs, ia.field, [&](const char *name, const auto &v) {
    using T = std::decay_t<decltype(v)>;
    if constexpr (std::is_same_v<T, double>)
      out = b.getF64FloatAttr(v);
    else if constexpr (std::is_same_v<T, std::optional<double>>)
      out = v ? b.getF64FloatAttr(*v) : mlir::Attribute();
    else if constexpr (std::is_same_v<T, std::int64_t>)
      out = b.getI64IntegerAttr(v);
    else if constexpr (std::is_same_v<T, bool>)
      out = v ? b.getUnitAttr() : mlir::Attribute();
    else if constexpr (std::is_same_v<T, FeatureMap>)
      out = b.getStringAttr(feature_map_name(v));
    else if constexpr (std::is_same_v<T, std::vector<std::int64_t>>)
      out = b.getI64IntegerAttr(norm_axis(v.at(ia.index), n.rank()));
    else if constexpr (std::is_same_v<T, std::vector<Dim>>)
      out = b.getI64IntegerAttr(v.at(ia.index).extent);
    else
      internal_error(std::string("import: attribute field ") + name + " has no MLIR form");
  });
  return out;
}

/// qkv.<name> from the op table: the operands, the result type and the attributes it
/// names. For every op without regions or segmented optional operands whose operands all
/// take the compute width.
mlir::Value create_from_table(OpBuilder &b, mlir::Location loc, const Node &n, mlir::Type ty,
                              mlir::ValueRange operands) {
  const OpInfo &info = op_info(n.op);
  mlir::OperationState state(loc, "qkv." + std::string(info.name));
  state.addOperands(operands);
  state.addTypes(ty);
  for (const IrAttr &ia : info.ir_attrs)
    if (!ia.name.empty())
      if (mlir::Attribute a = ir_attribute(b, ia, n))
        state.addAttribute(ia.name, a);
  return b.create(state)->getResult(0);
}

/// Emits nodes as qkv ops at `b`'s insertion point, into the function whose values `vals`
/// holds (by node id; the caller sets its arguments'). f16 and bf16 values are computed in
/// f32 and rounded at the node (the interpreter's semantics): an op reads its
/// half-precision operands widened to f32, and its result is truncated back to the node's
/// dtype. An op that only moves elements (a view, a copy) moves them in their own dtype
/// instead: rounding its result would change nothing, and the kernels then read a
/// half-precision cache or head view in place, at its own width.
class NodeImporter {
public:
  NodeImporter(mlir::MLIRContext &ctx, OpBuilder &b, const Graph &g, const SiteIds &sites)
      : ctx(ctx), b(b), g(g), sites(sites), vals(g.nodes().size()), wide(g.nodes().size()) {}

  mlir::MLIRContext &ctx;
  OpBuilder &b;
  const Graph &g;
  const SiteIds &sites;
  std::vector<mlir::Value> vals, wide;

  mlir::Value widened(NodeId id) {
    mlir::Value v = vals[id];
    if (!is_half(g.node(id).dtype))
      return v;
    if (!wide[id])
      wide[id] = mlir::arith::ExtFOp::create(b, v.getLoc(), compute_type(v.getType()), v);
    return wide[id];
  }

  /// The type of attention node n's log-sum-exp when a node reads it (attention_lse),
  /// else null: the qkv.attention then has that second result.
  mlir::Type lse_type(const Node &n) {
    for (NodeId u : g.users(n.id))
      if (g.node(u).op == OpKind::AttentionLse)
        return tensor_type(ctx, g.node(u));
    return {};
  }

  void emit(const Node &n) {
    mlir::Location nloc = node_loc(b, n.name);
    bool in_place = is_half(n.dtype) && op_info(n.op).moves_elements;
    mlir::RankedTensorType ty = in_place ? tensor_type(ctx, n) : compute_type(tensor_type(ctx, n));
    mlir::Type ft = ty.getElementType();
    auto in = [&](int i) { return in_place ? vals[n.inputs[i]] : widened(n.inputs[i]); };
    const Attrs &a = n.attrs;
    mlir::Value out;
    switch (n.op) {
    case OpKind::Input:
    case OpKind::Param: break;
    case OpKind::Constant: {
      llvm::SmallVector<mlir::Attribute> elems;
      for (double v : *a.data)
        elems.push_back(is_int(n.dtype) ? mlir::Attribute(b.getIntegerAttr(ft, (int64_t)v))
                                        : mlir::Attribute(b.getFloatAttr(ft, v)));
      out = mlir::arith::ConstantOp::create(b, nloc, ty, mlir::DenseElementsAttr::get(ty, elems));
      break;
    }
    // The products read half-precision operands as they are (linalg.matmul widens each
    // element, exactly, as it multiplies): the GEMM then packs them in their own width, or
    // multiplies bf16 pairs on the bf16 tier, instead of reading widened copies.
    case OpKind::MatMul:
      out = MatMulOp::create(b, nloc, ty, vals[n.inputs[0]], vals[n.inputs[1]]);
      break;
    case OpKind::Linear:
      out = LinearOp::create(b, nloc, ty, vals[n.inputs[0]], vals[n.inputs[1]],
                             n.inputs.size() > 2 ? in(2) : mlir::Value());
      break;
    case OpKind::Mask:
    case OpKind::ScoreMod: {
      std::vector<NodeId> cap_ids(n.inputs.begin() + 1, n.inputs.end());
      llvm::SmallVector<mlir::Value> caps;
      for (NodeId id : cap_ids)
        caps.push_back(widened(id));
      bool is_mask = n.op == OpKind::Mask;
      mlir::Operation *op;
      if (is_mask)
        op = MaskOp::create(b, nloc, ty, in(0), caps);
      else
        op = ScoreModOp::create(b, nloc, ty, in(0), caps);
      build_mod_region(b, nloc, op->getRegion(0), is_mask ? a.mask : a.score, !is_mask, ft, cap_ids,
                       caps, sites);
      out = op->getResult(0);
      break;
    }
    case OpKind::LayerNorm:
      out = LayerNormOp::create(b, nloc, ty, in(0), a.has_gamma ? in(1) : mlir::Value(),
                                a.has_beta ? in(2) : mlir::Value(), llvm::APFloat(a.eps));
      break;
    case OpKind::Attention: {
      std::vector<NodeId> cap_ids(n.inputs.begin() + 3, n.inputs.end());
      llvm::SmallVector<mlir::Value> caps;
      for (NodeId id : cap_ids)
        caps.push_back(widened(id));
      mlir::FloatAttr scale;
      if (a.scale)
        scale = b.getF64FloatAttr(*a.scale);
      auto op = AttentionOp::create(b, nloc, ty, lse_type(n), in(0), in(1), in(2), caps, scale);
      if (a.score)
        build_mod_region(b, nloc, op.getScore(), a.score, true, ft, cap_ids, caps, sites);
      if (a.mask)
        build_mod_region(b, nloc, op.getMask(), a.mask, false, ft, cap_ids, caps, sites);
      out = op.getResult();
      break;
    }
    case OpKind::AttentionLse: // the second result of the attention it reads
      out = mlir::cast<AttentionOp>(vals[n.inputs[0]].getDefiningOp()).getLse();
      break;
    default: {
      llvm::SmallVector<mlir::Value> operands;
      for (std::size_t i = 0; i < n.inputs.size(); ++i)
        operands.push_back(in(static_cast<int>(i)));
      out = create_from_table(b, nloc, n, ty, operands);
    }
    }
    if (is_half(n.dtype) && !in_place)
      out = mlir::arith::TruncFOp::create(b, nloc, tensor_type(ctx, n), out);
    vals[n.id] = out;
  }
};

/// Where a block's result finds its dynamic extent `dim`: the first of the block's
/// externals, else of the graph's arguments, that has that dim, and its axis there.
struct DimSource {
  NodeId node = -1;
  unsigned axis = 0;
};

std::optional<DimSource> find_dim_source(const Graph &g, const std::vector<NodeId> &externals,
                                         const Dim &dim) {
  for (const std::vector<NodeId> &ids : {externals, g.arguments()})
    for (NodeId id : ids) {
      const std::vector<Dim> &dims = g.node(id).dims;
      for (unsigned a = 0; a < dims.size(); ++a)
        if (dims[a].name == dim.name)
          return DimSource{id, a};
    }
  return std::nullopt;
}

/// Whether every dynamic extent of the run's results can be read at the call: the caller
/// makes the buffers the block writes its results into.
bool results_sized_at_call(const Graph &g, const RepeatedBlocks &run) {
  for (NodeId k : run.results)
    for (const Dim &d : g.node(run.start + k).dims)
      if (d.is_dynamic() && !find_dim_source(g, run.externals[0], d))
        return false;
  return true;
}

/// Block 0 of `run` as a private function (placed before `entry`): its externals are the
/// arguments, then one destination per result, which the block writes its results into
/// (bufferization.materialize_in_destination), so that the caller allocates them whatever
/// their extents. Marked noinline: LLVM would otherwise paste it back into every call site,
/// and compile it once per block.
mlir::func::FuncOp import_block(mlir::MLIRContext &ctx, const Graph &g, const SiteIds &sites,
                                const RepeatedBlocks &run, const std::string &name,
                                mlir::func::FuncOp entry) {
  OpBuilder b(&ctx);
  b.setInsertionPoint(entry);
  llvm::SmallVector<mlir::Type> arg_types, result_types;
  for (NodeId id : run.externals[0])
    arg_types.push_back(tensor_type(ctx, g.node(id)));
  for (NodeId k : run.results)
    result_types.push_back(tensor_type(ctx, g.node(run.start + k)));
  arg_types.append(result_types);
  auto fn = mlir::func::FuncOp::create(b, node_loc(b, g.node(run.start).name), name,
                                       b.getFunctionType(arg_types, result_types));
  fn.setPrivate();
  fn->setAttr("passthrough", b.getArrayAttr({b.getStringAttr("noinline")}));
  std::size_t n_ext = run.externals[0].size();
  for (std::size_t k = 0; k < run.results.size(); ++k)
    fn.setArgAttr(n_ext + k, "bufferization.writable", b.getBoolAttr(true));
  mlir::Block *body = fn.addEntryBlock();
  b.setInsertionPointToStart(body);
  NodeImporter im(ctx, b, g, sites);
  for (std::size_t i = 0; i < n_ext; ++i)
    im.vals[run.externals[0][i]] = body->getArgument(i);
  for (NodeId id = run.start; id < run.start + run.size; ++id)
    if (const Node &n = g.node(id); n.op != OpKind::Input && n.op != OpKind::Param)
      im.emit(n);
  llvm::SmallVector<mlir::Value> results;
  for (std::size_t k = 0; k < run.results.size(); ++k)
    results.push_back(
        mlir::bufferization::MaterializeInDestinationOp::create(
            b, fn.getLoc(), im.vals[run.start + run.results[k]], body->getArgument(n_ext + k))
            .getResult());
  mlir::func::ReturnOp::create(b, fn.getLoc(), results);
  return fn;
}

/// One call of `callee` per block of `run`, at the importer's insertion point, with a new
/// tensor per result for it to write; the results become the values of their nodes.
void call_blocks(NodeImporter &im, const RepeatedBlocks &run, mlir::func::FuncOp callee) {
  for (int j = 0; j < run.count; ++j) {
    NodeId first = run.start + j * run.size;
    mlir::Location loc = node_loc(im.b, im.g.node(first).name);
    llvm::SmallVector<mlir::Value> operands;
    for (NodeId id : run.externals[j])
      operands.push_back(im.vals[id]);
    for (NodeId k : run.results) {
      const Node &n = im.g.node(first + k);
      llvm::SmallVector<mlir::Value> sizes;
      for (const Dim &d : n.dims)
        if (d.is_dynamic()) {
          DimSource src = *find_dim_source(im.g, run.externals[j], d);
          sizes.push_back(mlir::tensor::DimOp::create(im.b, loc, im.vals[src.node], src.axis));
        }
      mlir::RankedTensorType t = tensor_type(im.ctx, n);
      operands.push_back(
          mlir::tensor::EmptyOp::create(im.b, loc, t.getShape(), t.getElementType(), sizes));
    }
    auto call = mlir::func::CallOp::create(im.b, loc, callee, operands);
    for (std::size_t k = 0; k < run.results.size(); ++k)
      im.vals[first + run.results[k]] = call.getResult(k);
  }
}

} // namespace

mlir::OwningOpRef<mlir::ModuleOp> import_graph(mlir::MLIRContext &ctx, const Graph &g, bool checked,
                                               bool share_layers) {
  g.verify();
  SiteIds sites = site_ids(g, checked);
  ctx.loadDialect<QkvDialect, mlir::func::FuncDialect, mlir::arith::ArithDialect,
                  mlir::math::MathDialect, mlir::tensor::TensorDialect,
                  mlir::bufferization::BufferizationDialect>();

  OpBuilder b(&ctx);
  mlir::Location loc = node_loc(b, g.name());
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());

  std::vector<NodeId> args = g.arguments();
  llvm::SmallVector<mlir::Type> arg_types, result_types;
  for (NodeId id : args)
    arg_types.push_back(tensor_type(ctx, g.node(id)));
  for (const auto &[name, id] : g.outputs())
    result_types.push_back(tensor_type(ctx, g.node(id)));
  auto fn = mlir::func::FuncOp::create(b, loc, function_name(g),
                                       b.getFunctionType(arg_types, result_types));
  fn->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  fn->setAttr("qkv.graph", b.getStringAttr(g.name()));
  for (std::size_t i = 0; i < args.size(); ++i) {
    const Node &n = g.node(args[i]);
    fn.setArgAttr(i, "qkv.name", b.getStringAttr(n.name));
    fn.setArgAttr(i, "qkv.dims", dims_attr(b, n.dims));
    if (n.op == OpKind::Param)
      fn.setArgAttr(i, "qkv.param", b.getUnitAttr());
  }
  for (std::size_t i = 0; i < g.outputs().size(); ++i) {
    const Node &n = g.node(g.outputs()[i].second);
    fn.setResultAttr(i, "qkv.name", b.getStringAttr(g.outputs()[i].first));
    fn.setResultAttr(i, "qkv.dims", dims_attr(b, n.dims));
  }

  mlir::Block *entry = fn.addEntryBlock();
  b.setInsertionPointToStart(entry);
  NodeImporter im(ctx, b, g, sites);
  for (std::size_t i = 0; i < args.size(); ++i)
    im.vals[args[i]] = entry->getArgument(i);
  // Repeated layers become one function each, called per block. Not in a checked kernel
  // that checks some site: a failed check must name the op of its own block.
  std::vector<RepeatedBlocks> runs;
  if (share_layers && sites.empty())
    for (RepeatedBlocks &r : find_repeated_blocks(g))
      if (results_sized_at_call(g, r))
        runs.push_back(std::move(r));
  std::vector<mlir::func::FuncOp> callees;
  for (std::size_t r = 0; r < runs.size(); ++r)
    callees.push_back(import_block(ctx, g, sites, runs[r],
                                   fn.getName().str() + "_layer" + std::to_string(r), fn));
  std::size_t next = 0;
  for (NodeId id = 0; id < static_cast<NodeId>(g.nodes().size()); ++id) {
    if (next < runs.size() && id == runs[next].start) {
      call_blocks(im, runs[next], callees[next]);
      id += runs[next].size * runs[next].count - 1;
      ++next;
    } else if (const Node &n = g.node(id); n.op != OpKind::Input && n.op != OpKind::Param)
      im.emit(n);
  }
  llvm::SmallVector<mlir::Value> results;
  for (const auto &[name, id] : g.outputs())
    results.push_back(im.vals[id]);
  mlir::func::ReturnOp::create(b, loc, results);

  if (mlir::failed(mlir::verify(*module)))
    internal_error("import of graph '" + g.name() + "' produced invalid IR");
  return module;
}

std::string print_module(mlir::ModuleOp m) {
  std::string s;
  llvm::raw_string_ostream os(s);
  m.print(os, mlir::OpPrintingFlags().printNameLocAsPrefix());
  return s;
}

std::unique_ptr<mlir::ScopedDiagnosticHandler> collect_diagnostics(mlir::MLIRContext &ctx,
                                                                   std::string &diags) {
  return std::make_unique<mlir::ScopedDiagnosticHandler>(&ctx, [&diags](mlir::Diagnostic &d) {
    llvm::raw_string_ostream os(diags);
    os << d.getLocation() << ": " << d << "\n";
    for (auto &note : d.getNotes())
      os << "  note: " << note << "\n";
    return mlir::success();
  });
}

} // namespace qkv::ir
