// qkv-lower-checks: a checked compile's qkv.check ops -> scf.if + a call of the runtime's
// qkv_check_failed (qkv/runtime/checks.hpp), by DialectConversion.
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Transforms/DialectConversion.h"

#include <qkv/runtime/checks.hpp>

#include "qkv/compiler/transforms/Passes.h"

namespace qkv::ir {
#define GEN_PASS_DEF_LOWERCHECKS
#include "qkv/compiler/transforms/Passes.h.inc"
} // namespace qkv::ir

using namespace mlir;
using namespace qkv::ir;
using qkv::checks::kCheckValues;

namespace {

constexpr const char *kReport = "qkv_check_failed";

/// The report's type: (site, count, values x kCheckValues: i64) -> (); unused values are 0.
FunctionType reportType(MLIRContext *ctx) {
  SmallVector<Type> args(2 + kCheckValues, IntegerType::get(ctx, 64));
  return FunctionType::get(ctx, args, {});
}

struct CheckLowering : OpConversionPattern<CheckOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(CheckOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rw) const override {
    Location loc = op.getLoc();
    ValueRange values = adaptor.getValues();
    if (values.size() > kCheckValues)
      return rw.notifyMatchFailure(op, "more values than qkv_check_failed takes");
    Value failed = arith::XOrIOp::create(rw, loc, adaptor.getOk(),
                                         arith::ConstantOp::create(rw, loc, rw.getBoolAttr(true)));
    scf::IfOp::create(rw, loc, failed, [&](OpBuilder &b, Location l) {
      Type i64 = b.getI64Type();
      SmallVector<Value> args{arith::ConstantIntOp::create(b, l, i64, op.getSite()),
                              arith::ConstantIntOp::create(b, l, i64, values.size())};
      for (Value v : values)
        args.push_back(arith::IndexCastOp::create(b, l, i64, v));
      Value zero = arith::ConstantIntOp::create(b, l, i64, 0);
      args.resize(2 + kCheckValues, zero);
      func::CallOp::create(b, l, kReport, TypeRange{}, args);
      scf::YieldOp::create(b, l);
    });
    rw.eraseOp(op);
    return success();
  }
};

struct LowerChecksPass : qkv::ir::impl::LowerChecksBase<LowerChecksPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!module.walk([](CheckOp) { return WalkResult::interrupt(); }).wasInterrupted())
      return;
    MLIRContext *ctx = &getContext();
    if (!module.lookupSymbol<func::FuncOp>(kReport)) {
      OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
      auto decl = func::FuncOp::create(b, module.getLoc(), kReport, reportType(ctx));
      decl.setPrivate();
    }
    ConversionTarget target(*ctx);
    target.addIllegalOp<CheckOp>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    RewritePatternSet patterns(ctx);
    patterns.add<CheckLowering>(ctx);
    if (failed(applyPartialConversion(module, target, std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
