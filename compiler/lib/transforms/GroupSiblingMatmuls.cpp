// qkv-group-sibling-matmuls: matmuls of one input moved next to each other, so that
// qkv-lower-matmul-to-microkernels runs them as one GEMM (docs/compiler.md, "The GEMM":
// siblings). A graph may compute Q's RoPE before K's projection; on tensors the
// projections are pure, so K's (with the ops it needs: its tensor.empty, its fill or
// bias) can move up to right after Q's.
#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/RegionUtils.h"

#include "qkv/compiler/transforms/Passes.h"

namespace qkv::ir {
#define GEN_PASS_DEF_GROUPSIBLINGMATMULS
#include "qkv/compiler/transforms/Passes.h.inc"
} // namespace qkv::ir

using namespace mlir;

namespace {

bool isMatmul(Operation *op) {
  auto l = dyn_cast<linalg::LinalgOp>(op);
  return isa<linalg::MatmulOp, linalg::BatchMatmulOp>(op) && l.hasPureTensorSemantics();
}

/// Whether `op`'s result feeds an elementwise generic directly: the GEMM's epilogue
/// candidate, which a sibling moved in between would separate from it.
bool hasEpilogue(Operation *op) {
  return llvm::any_of(op->getUsers(), [](Operation *u) {
    auto g = dyn_cast<linalg::GenericOp>(u);
    return g && g.getNumLoops() == g.getNumParallelLoops();
  });
}

/// The ops of `next`'s block that it depends on (its backward slice there).
SetVector<Operation *> dependencies(Operation *next) {
  BackwardSliceOptions options;
  options.inclusive = false;
  options.filter = [&](Operation *op) { return op->getBlock() == next->getBlock(); };
  SetVector<Operation *> slice;
  (void)getBackwardSlice(next, &slice, options);
  return slice;
}

/// Moves `next` (a matmul of the group's A) to right after `last`, the group's last
/// member, with what it depends on, when that changes nothing but the order: it does not
/// depend on a member, what it depends on between them is free of side effects, and
/// where ops of other work are between them, neither `last` nor `next` loses the
/// elementwise op right after it (its epilogue) to the move.
bool moveAfter(RewriterBase &rewriter, DominanceInfo &dom, ArrayRef<Operation *> group,
               Operation *next) {
  Operation *last = group.back();
  SetVector<Operation *> deps = dependencies(next);
  if (llvm::any_of(group, [&](Operation *m) { return deps.contains(m); }))
    return false;
  bool adjacent = true;
  for (Operation *x = last->getNextNode(); x != next; x = x->getNextNode())
    adjacent &= deps.contains(x);
  if (adjacent)
    return true;
  if (hasEpilogue(last) || hasEpilogue(next))
    return false;
  Operation *point = last->getNextNode();
  if (failed(moveOperationDependencies(rewriter, next, point, dom)))
    return false;
  rewriter.moveOpBefore(next, point);
  return true;
}

struct GroupSiblingMatmulsPass : qkv::ir::impl::GroupSiblingMatmulsBase<GroupSiblingMatmulsPass> {
  void runOnOperation() override {
    SmallVector<Operation *> matmuls;
    getOperation().walk([&](Operation *op) {
      if (isMatmul(op))
        matmuls.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    DominanceInfo dom(getOperation());
    llvm::DenseSet<Operation *> grouped;
    for (auto [i, first] : llvm::enumerate(matmuls)) {
      if (grouped.contains(first))
        continue;
      SmallVector<Operation *> group = {first};
      Value a = first->getOperand(0);
      for (Operation *next : llvm::drop_begin(matmuls, i + 1)) {
        if (grouped.contains(next) || next->getBlock() != first->getBlock() ||
            next->getName() != first->getName() || next->getOperand(0) != a)
          continue;
        if (!moveAfter(rewriter, dom, group, next))
          continue;
        group.push_back(next);
        grouped.insert(next);
      }
    }
  }
};

} // namespace
