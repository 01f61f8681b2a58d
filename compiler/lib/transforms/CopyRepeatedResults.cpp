// qkv-copy-repeated-results: a function that returns one tensor value twice (a graph's
// output under two names, or one folded into another) returns a copy in each repeat, so
// that buffer-results-to-out-params gets one buffer per result.
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/DenseSet.h"

#include "qkv/compiler/transforms/Passes.h"

namespace qkv::ir {
#define GEN_PASS_DEF_COPYREPEATEDRESULTS
#include "qkv/compiler/transforms/Passes.h.inc"
} // namespace qkv::ir

using namespace mlir;

namespace {

struct CopyRepeatedResultsPass
    : qkv::ir::impl::CopyRepeatedResultsBase<CopyRepeatedResultsPass> {
  void runOnOperation() override {
    getOperation().walk([&](func::ReturnOp ret) {
      OpBuilder b(ret);
      llvm::DenseSet<Value> seen;
      for (OpOperand &o : ret->getOpOperands()) {
        Value v = o.get();
        auto ty = dyn_cast<RankedTensorType>(v.getType());
        if (!ty || seen.insert(v).second)
          continue;
        Location loc = ret.getLoc();
        SmallVector<Value> dyn;
        for (int64_t i = 0; i < ty.getRank(); ++i)
          if (ty.isDynamicDim(i))
            dyn.push_back(tensor::DimOp::create(b, loc, v, i));
        Value init = tensor::EmptyOp::create(b, loc, ty, dyn);
        o.set(linalg::CopyOp::create(b, loc, v, init).getResult(0));
      }
    });
  }
};

} // namespace
