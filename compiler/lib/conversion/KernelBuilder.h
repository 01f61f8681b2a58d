// KernelBuilder: a thin layer over ImplicitLocOpBuilder for the hand-scheduled kernels
// (flash attention, register-tiled contractions). Index arithmetic, constants, vector
// types and structured loops read like the math they build instead of like ODS builders.
#pragma once

#include <functional>

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace qkv::ir {

class KernelBuilder {
public:
  explicit KernelBuilder(mlir::ImplicitLocOpBuilder &b) : b_(b) {}

  mlir::ImplicitLocOpBuilder &builder() { return b_; }
  mlir::MLIRContext *ctx() { return b_.getContext(); }
  /// Names `v` in the printed IR (a NameLoc on the block argument or on the op that makes
  /// it; the stages print NameLocs as value names). Returns v.
  mlir::Value name(mlir::Value v, llvm::StringRef name);

  // ---- index arithmetic -------------------------------------------------------------
  mlir::Value idx(int64_t v) { return mlir::arith::ConstantIndexOp::create(b_, v); }
  mlir::Value add(mlir::Value a, mlir::Value c) { return mlir::arith::AddIOp::create(b_, a, c); }
  mlir::Value sub(mlir::Value a, mlir::Value c) { return mlir::arith::SubIOp::create(b_, a, c); }
  mlir::Value mul(mlir::Value a, mlir::Value c) { return mlir::arith::MulIOp::create(b_, a, c); }
  mlir::Value add(mlir::Value a, int64_t c) { return c == 0 ? a : add(a, idx(c)); }
  mlir::Value mul(mlir::Value a, int64_t c) { return c == 1 ? a : mul(a, idx(c)); }
  mlir::Value divu(mlir::Value a, mlir::Value c) { return mlir::arith::DivUIOp::create(b_, a, c); }
  mlir::Value remu(mlir::Value a, mlir::Value c) { return mlir::arith::RemUIOp::create(b_, a, c); }
  mlir::Value min(mlir::Value a, mlir::Value c) { return mlir::arith::MinSIOp::create(b_, a, c); }
  mlir::Value max(mlir::Value a, mlir::Value c) { return mlir::arith::MaxSIOp::create(b_, a, c); }
  /// ceil(a / c) for a >= 0, c > 0.
  mlir::Value ceilDiv(mlir::Value a, int64_t c) { return divu(add(a, c - 1), idx(c)); }
  mlir::Value ceilDiv(mlir::Value a, mlir::Value c) { return divu(sub(add(a, c), idx(1)), c); }
  mlir::Value cmp(mlir::arith::CmpIPredicate p, mlir::Value a, mlir::Value c) {
    return mlir::arith::CmpIOp::create(b_, p, a, c);
  }

  // ---- floats and vectors -----------------------------------------------------------
  mlir::Value fconst(mlir::Type t, double v);
  mlir::VectorType vec(mlir::Type elem, int64_t lanes) {
    return mlir::VectorType::get({lanes}, elem);
  }
  /// A scalar broadcast to `t` (or returned as is when `t` is not a vector type).
  mlir::Value splat(mlir::Value scalar, mlir::Type t);
  mlir::Value vload(mlir::VectorType t, mlir::Value mem, mlir::ValueRange at) {
    return mlir::vector::LoadOp::create(b_, t, mem, at);
  }
  void vstore(mlir::Value v, mlir::Value mem, mlir::ValueRange at) {
    mlir::vector::StoreOp::create(b_, v, mem, at);
  }
  /// Masked forms: lanes off in `mask` are not read (they come back 0) or not written;
  /// a null mask means every lane.
  mlir::Value vload(mlir::VectorType t, mlir::Value mem, mlir::ValueRange at, mlir::Value mask);
  void vstore(mlir::Value v, mlir::Value mem, mlir::ValueRange at, mlir::Value mask);
  /// Strided forms: lane i reads or writes the element `offsets[i]` elements past `at`
  /// (the buffer's last dim must have unit stride); lanes off in `mask` are not touched
  /// (they read 0).
  mlir::Value gather(mlir::VectorType t, mlir::Value mem, mlir::ValueRange at, mlir::Value offsets,
                     mlir::Value mask);
  void scatter(mlir::Value v, mlir::Value mem, mlir::ValueRange at, mlir::Value offsets,
               mlir::Value mask);
  /// The mask of the first `n` lanes (n may exceed the vector: all lanes; n <= 0: none).
  mlir::Value firstLanes(mlir::Value n, int64_t lanes);
  mlir::Value load(mlir::Value mem, mlir::ValueRange at) {
    return mlir::memref::LoadOp::create(b_, mem, at);
  }
  void store(mlir::Value v, mlir::Value mem, mlir::ValueRange at) {
    mlir::memref::StoreOp::create(b_, v, mem, at);
  }
  /// Lane ids offset by `base`, clamped to `last`: min(base + [0, 1, ..., n-1], last).
  mlir::Value laneIds(mlir::Value base, mlir::Value last, int64_t lanes);

  // ---- structured control flow --------------------------------------------------------
  using Body = std::function<void(KernelBuilder &, mlir::Value)>;
  using CarriedBody =
      std::function<llvm::SmallVector<mlir::Value>(KernelBuilder &, mlir::Value, mlir::ValueRange)>;
  /// for (i = lb; i < ub; i += step) body(i).
  void forLoop(mlir::Value lb, mlir::Value ub, mlir::Value step, const Body &body);
  void forLoop(mlir::Value lb, mlir::Value ub, int64_t step, const Body &body) {
    forLoop(lb, ub, idx(step), body);
  }
  /// A loop carrying values: returns the values after the last iteration.
  llvm::SmallVector<mlir::Value> forLoop(mlir::Value lb, mlir::Value ub, mlir::Value step,
                                         mlir::ValueRange init, const CarriedBody &body);
  /// if (cond) then(); else otherwise() (when given).
  void ifThen(mlir::Value cond, const std::function<void(KernelBuilder &)> &then,
              const std::function<void(KernelBuilder &)> &otherwise = nullptr);
  /// An scf.parallel over [0, ub_i) for each i: one task per point, run on OpenMP
  /// threads once the pipeline converts it.
  void parallel(mlir::ValueRange ubs,
                const std::function<void(KernelBuilder &, mlir::ValueRange)> &body);

  /// A stack buffer (memref.alloca) of `elem` with the given static/dynamic sizes, for
  /// one task's tiles. Aligned for vector loads.
  mlir::Value stackBuffer(mlir::Type elem, llvm::ArrayRef<int64_t> shape,
                          mlir::ValueRange dynSizes);

private:
  mlir::ImplicitLocOpBuilder &b_;
};

} // namespace qkv::ir
