// Builders shared by the qkv-to-linalg lowerings (LinalgBuilders.h).
#include "LinalgBuilders.h"

using namespace mlir;

namespace qkv::ir {

AffineMap dimsMap(MLIRContext *ctx, unsigned numLoops, ArrayRef<unsigned> dims) {
  SmallVector<AffineExpr> exprs;
  for (unsigned d : dims)
    exprs.push_back(getAffineDimExpr(d, ctx));
  return AffineMap::get(numLoops, 0, exprs, ctx);
}

/// The loops [from, to) as a list.
SmallVector<unsigned> range(unsigned from, unsigned to) {
  SmallVector<unsigned> r;
  for (unsigned i = from; i < to; ++i)
    r.push_back(i);
  return r;
}

SmallVector<utils::IteratorType> iterators(unsigned parallel, unsigned reduction, int reductionAt) {
  SmallVector<utils::IteratorType> it(parallel + reduction, utils::IteratorType::parallel);
  if (reduction) {
    unsigned at = reductionAt < 0 ? parallel : static_cast<unsigned>(reductionAt);
    for (unsigned i = 0; i < reduction; ++i)
      it[at + i] = utils::IteratorType::reduction;
  }
  return it;
}

Value emptyOf(OpBuilder &b, Location loc, ArrayRef<OpFoldResult> sizes, Type elem) {
  return tensor::EmptyOp::create(b, loc, sizes, elem);
}

Value filled(OpBuilder &b, Location loc, ArrayRef<OpFoldResult> sizes, Type elem, double v) {
  Value init = emptyOf(b, loc, sizes, elem);
  return linalg::FillOp::create(b, loc, ValueRange{floatConst(b, loc, elem, v)}, ValueRange{init})
      .getResult(0);
}

Value generic(OpBuilder &b, Location loc, Value init, ValueRange inputs, ArrayRef<AffineMap> inMaps,
              AffineMap outMap, ArrayRef<utils::IteratorType> iters, BodyFn body) {
  SmallVector<AffineMap> maps(inMaps.begin(), inMaps.end());
  maps.push_back(outMap);
  auto op =
      linalg::GenericOp::create(b, loc, TypeRange{init.getType()}, inputs, ValueRange{init}, maps,
                                iters, [&](OpBuilder &nb, Location nl, ValueRange args) {
                                  linalg::YieldOp::create(nb, nl, body(nb, nl, args));
                                });
  return op.getResult(0);
}

SmallVector<OpFoldResult> sizesOf(OpBuilder &b, Location loc, Value t) {
  return tensor::getMixedSizes(b, loc, t);
}

/// An elementwise op over `out`'s shape (taken from `shapeFrom`); each input is the full
/// shape or broadcast along leading dims (its dims end the output's).
Value elementwise(OpBuilder &b, Location loc, Value shapeFrom, Type elem, ValueRange inputs,
                  BodyFn body) {
  unsigned r = tensorType(shapeFrom).getRank();
  SmallVector<AffineMap> maps;
  for (Value in : inputs) {
    unsigned ri = tensorType(in).getRank();
    maps.push_back(dimsMap(b.getContext(), r, range(r - ri, r)));
  }
  Value init = emptyOf(b, loc, sizesOf(b, loc, shapeFrom), elem);
  return generic(b, loc, init, inputs, maps, dimsMap(b.getContext(), r, range(0, r)), iterators(r),
                 body);
}

} // namespace qkv::ir
