// The ShapeRule trait's verifier: a qkv op is checked by its op-table row's shape rule, the
// one the DSL's builders and Graph::verify call (dsl/lib/op_table.cpp), so that each shape
// rule is written once. MLIR's dims have no names: infer_unnamed takes a static dim by its
// extent and a `?` as equal to any dim, and the op's result must be compatible with what
// the rule gives. The attributes are read back through the table's IrAttr list, as import
// writes them. This file includes the DSL's headers, whose qkv::Value would shadow
// mlir::Value in the dialect's own sources (QkvDialect.cpp).
#include "qkv/compiler/ir/QkvDialect.h"

#include <qkv/dsl/op_table.hpp>

#include <algorithm>
#include <optional>
#include <string>
#include <type_traits>

namespace {

std::optional<qkv::DType> dtype_of(mlir::Type t) {
  if (t.isF32())
    return qkv::DType::F32;
  if (t.isF64())
    return qkv::DType::F64;
  if (t.isF16())
    return qkv::DType::F16;
  if (t.isBF16())
    return qkv::DType::BF16;
  if (t.isSignlessInteger(32))
    return qkv::DType::I32;
  if (t.isSignlessInteger(64))
    return qkv::DType::I64;
  return std::nullopt;
}

/// t as the table sees it; `other`: the dtype of an element type the table has not.
std::optional<qkv::UnnamedType> unnamed(mlir::Type t,
                                        std::optional<qkv::DType> other = std::nullopt) {
  auto rt = mlir::dyn_cast<mlir::RankedTensorType>(t);
  std::optional<qkv::DType> dt = rt ? dtype_of(rt.getElementType()) : std::nullopt;
  if (rt && !dt)
    dt = other;
  if (!dt)
    return std::nullopt;
  qkv::UnnamedType out{*dt, {}};
  for (int64_t e : rt.getShape())
    out.extents.push_back(mlir::ShapedType::isDynamic(e) ? qkv::kDynamic : e);
  return out;
}

/// Sets the field of `attrs` that `ia` names from the op's attribute `a` (null: absent),
/// the inverse of import's ir_attribute. Returns an error message, or "" when it fits.
std::string set_field(qkv::Attrs &attrs, const qkv::IrAttr &ia, mlir::Attribute a) {
  std::string error;
  qkv::visit_field(attrs, ia.field, [&](const char *, auto &v) {
    using T = std::decay_t<decltype(v)>;
    auto f = mlir::dyn_cast_or_null<mlir::FloatAttr>(a);
    auto i = mlir::dyn_cast_or_null<mlir::IntegerAttr>(a);
    if constexpr (std::is_same_v<T, double>)
      v = f ? f.getValueAsDouble() : v;
    else if constexpr (std::is_same_v<T, std::optional<double>>)
      v = f ? std::optional<double>(f.getValueAsDouble()) : std::nullopt;
    else if constexpr (std::is_same_v<T, std::int64_t>)
      v = i ? i.getInt() : v;
    else if constexpr (std::is_same_v<T, bool>)
      v = a != nullptr;
    else if constexpr (std::is_same_v<T, qkv::FeatureMap>) {
      auto s = mlir::dyn_cast_or_null<mlir::StringAttr>(a);
      std::optional<qkv::FeatureMap> m = s ? qkv::parse_feature_map(s.getValue()) : std::nullopt;
      if (m)
        v = *m;
      else
        error = std::string(ia.name) + " must be \"" +
                std::string(qkv::feature_map_name(qkv::FeatureMap::EluPlusOne)) + "\" or \"" +
                std::string(qkv::feature_map_name(qkv::FeatureMap::Relu)) + "\"";
    } else if constexpr (std::is_same_v<T, std::vector<std::int64_t>>) {
      v.resize(std::max<std::size_t>(v.size(), ia.index + 1));
      v[ia.index] = i ? i.getInt() : 0;
    } else if constexpr (std::is_same_v<T, std::vector<qkv::Dim>>) {
      v.resize(std::max<std::size_t>(v.size(), ia.index + 1), qkv::unknown_dim());
      if (i)
        v[ia.index] = qkv::Dim(std::to_string(i.getInt()), i.getInt());
    } else {
      error = std::string("attribute ") + std::string(ia.name) + " has no op-table field";
    }
  });
  return error;
}

std::string type_text(const qkv::UnnamedType &t) {
  std::string s = "tensor<";
  for (int64_t e : t.extents)
    s += (e == qkv::kDynamic ? std::string("?") : std::to_string(e)) + "x";
  return s + std::string(qkv::dtype_name(t.dtype)) + ">";
}

/// Whether the result's type fits what the rule gives: rank, dtype and each extent known
/// to both.
bool fits(const qkv::UnnamedType &got, const qkv::UnnamedType &want) {
  if (got.dtype != want.dtype || got.extents.size() != want.extents.size())
    return false;
  for (std::size_t i = 0; i < got.extents.size(); ++i)
    if (got.extents[i] != qkv::kDynamic && want.extents[i] != qkv::kDynamic &&
        got.extents[i] != want.extents[i])
      return false;
  return true;
}

} // namespace

mlir::LogicalResult qkv::ir::verifyShapeRule(mlir::Operation *op) {
  std::optional<qkv::OpKind> kind = qkv::parse_op_name(op->getName().stripDialect());
  if (!kind)
    return op->emitOpError("has the ShapeRule trait but no row in the op table");
  const qkv::OpInfo &info = qkv::op_info(*kind);
  std::vector<qkv::UnnamedType> operands;
  for (auto [i, t] : llvm::enumerate(op->getOperandTypes())) {
    // A tensor captured by a mod may have any element type; the rule reads only its dims.
    bool captured = info.operands != qkv::kAnyNumber && static_cast<int>(i) >= info.operands;
    std::optional<qkv::UnnamedType> u =
        unnamed(t, captured ? std::optional(qkv::DType::F32) : std::nullopt);
    if (!u)
      return mlir::success(); // not a tensor the table knows: the ODS constraints say so
    operands.push_back(*u);
  }
  // An op of f32 result reads a half-precision operand widened: the products take theirs
  // as stored and widen each element as they multiply (import, half precision).
  auto result = mlir::dyn_cast<mlir::RankedTensorType>(op->getResult(0).getType());
  if (result && result.getElementType().isF32())
    for (qkv::UnnamedType &u : operands)
      if (u.dtype == qkv::DType::F16 || u.dtype == qkv::DType::BF16)
        u.dtype = qkv::DType::F32;
  qkv::Attrs attrs;
  for (const qkv::IrAttr &ia : info.ir_attrs)
    if (!ia.name.empty())
      if (std::string e = set_field(attrs, ia, op->getAttr(ia.name)); !e.empty())
        return op->emitOpError(e);
  try {
    qkv::UnnamedType want = qkv::infer_unnamed(*kind, operands, attrs);
    std::optional<qkv::UnnamedType> got = unnamed(op->getResult(0).getType());
    if (!got || !fits(*got, want))
      return op->emitOpError() << "result " << op->getResult(0).getType() << " does not fit "
                               << type_text(want) << ", what the op's shape rule gives";
  } catch (const qkv::Error &e) {
    return op->emitOpError(e.what());
  } catch (const qkv::InternalError &e) { // a verifier reports; it does not throw
    return op->emitOpError(e.what());
  }
  return mlir::success();
}
