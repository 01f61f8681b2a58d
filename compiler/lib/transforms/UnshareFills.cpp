// qkv-unshare-fills: one linalg.fill (and tensor.empty) per destination use, so that
// bufferization gives every writer its own buffer instead of copying a shared one.
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include "qkv/compiler/transforms/Passes.h"

namespace qkv::ir {
#define GEN_PASS_DEF_UNSHAREFILLS
#include "qkv/compiler/transforms/Passes.h.inc"
} // namespace qkv::ir

using namespace mlir;

namespace {

/// The uses of `fill`'s result as the destination of an op that writes into it, in
/// program order where they share a block.
SmallVector<OpOperand *> destinationUses(linalg::FillOp fill) {
  SmallVector<OpOperand *> uses;
  for (OpOperand &u : fill->getResult(0).getUses()) {
    auto dps = dyn_cast<DestinationStyleOpInterface>(u.getOwner());
    if (dps && dps.isDpsInit(&u))
      uses.push_back(&u);
  }
  llvm::stable_sort(uses, [](OpOperand *a, OpOperand *b) {
    Operation *x = a->getOwner(), *y = b->getOwner();
    return x->getBlock() == y->getBlock() && x->isBeforeInBlock(y);
  });
  return uses;
}

/// Gives the op that starts a matmul's C (a linalg.generic broadcasting its bias, written
/// into its init) a tensor.empty of its own when that empty is shared: else bufferization
/// may reuse one buffer for the C of several matmuls whose results die early (a bf16
/// graph's products, each rounded right away), and no GEMM could then take its rounding
/// as its epilogue (C's buffer would have other users).
void unshareStartEmpties(Operation *root) {
  root->walk([](linalg::LinalgOp mm) {
    if (!isa<linalg::MatmulOp, linalg::BatchMatmulOp>(mm) || !mm.hasPureTensorSemantics())
      return;
    auto start = mm.getDpsInits()[0].getDefiningOp<linalg::GenericOp>();
    if (!start || start.getNumDpsInits() != 1)
      return;
    OpOperand &init = start.getDpsInitsMutable()[0];
    auto empty = init.get().getDefiningOp<tensor::EmptyOp>();
    if (!empty || empty->hasOneUse())
      return;
    OpBuilder b(start);
    init.set(b.clone(*empty)->getResult(0));
  });
}

struct UnshareFillsPass : qkv::ir::impl::UnshareFillsBase<UnshareFillsPass> {
  void runOnOperation() override {
    unshareStartEmpties(getOperation());
    SmallVector<linalg::FillOp> fills;
    getOperation().walk([&](linalg::FillOp f) {
      if (f.hasPureTensorSemantics())
        fills.push_back(f);
    });
    for (linalg::FillOp fill : fills) {
      SmallVector<OpOperand *> uses = destinationUses(fill);
      // The first writer may keep the original, unless someone also reads the fill.
      bool read = uses.size() < static_cast<size_t>(
                                    std::distance(fill->use_begin(), fill->use_end()));
      if (uses.size() < (read ? 1u : 2u))
        continue;
      for (OpOperand *use : llvm::drop_begin(uses, read ? 0 : 1)) {
        OpBuilder b(use->getOwner());
        IRMapping map;
        Value init = fill.getDpsInitOperand(0)->get();
        if (auto empty = init.getDefiningOp<tensor::EmptyOp>())
          map.map(init, b.clone(*empty)->getResult(0));
        use->set(b.clone(*fill, map)->getResult(0));
      }
    }
  }
};

} // namespace
