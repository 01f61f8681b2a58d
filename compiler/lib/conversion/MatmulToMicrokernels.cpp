// qkv-lower-matmul-to-microkernels: linalg.matmul and linalg.batch_matmul on buffers
// (after bufferization) -> the register-tiled vector micro-kernel, in parallel tasks.
//
// C (M x N) is cut into panels of nc vectors of columns and blocks of rows; each task
// (batch, panel, row block) runs the micro-kernel over the whole K, so the panel of B it
// reads (K x nc vectors) stays in cache across the block's register tiles, and A's rows
// are read as broadcasts. Columns past the last whole panel are done one masked vector
// at a time. The micro-kernel is a private function of the module, one per element type
// and kind (whole panel, masked vector), called by every matmul's tasks on 2-D views of
// their operands: a block's or a model's projections compile one copy of it, not one
// each. A, B and C need unit stride along their last dim (they always have it in the CPU
// pipeline: operands are fresh buffers or identity-layout arguments); a matmul that does
// not is left to convert-linalg-to-parallel-loops.
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "Microkernel.h"
#include "qkv/compiler/transforms/Passes.h"

namespace qkv::ir {
#define GEN_PASS_DEF_LOWERMATMULTOMICROKERNELS
#include "qkv/compiler/transforms/Passes.h.inc"
} // namespace qkv::ir

using namespace mlir;
using namespace qkv::ir;

namespace {

bool unitInnerStride(Value v) {
  auto mt = dyn_cast<MemRefType>(v.getType());
  if (!mt)
    return false;
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(mt.getStridesAndOffset(strides, offset)))
    return false;
  return !strides.empty() && strides.back() == 1;
}

struct MatmulOperands {
  Value a, b, c; // B is (K, N) for a batch_matmul whose B serves every batch
  bool batched;
  Type elem;
};

/// batch_matmul's indexing maps: the default ones, or B (k, n) shared by all batches.
std::optional<bool> sharedBMaps(linalg::BatchMatmulOp op) {
  if (!op.hasUserDefinedMaps())
    return false;
  MLIRContext *ctx = op.getContext();
  auto map = [&](ArrayRef<unsigned> dims) {
    SmallVector<AffineExpr> e;
    for (unsigned d : dims)
      e.push_back(getAffineDimExpr(d, ctx));
    return AffineMap::get(4, 0, e, ctx);
  };
  SmallVector<AffineMap> want = {map({0, 1, 3}), map({3, 2}), map({0, 1, 2})};
  if (op.getIndexingMapsArray() == ArrayRef<AffineMap>(want))
    return true;
  return std::nullopt;
}

/// Keys of the K loop per block: a block of the B panel (kBlock x nc vectors) stays in
/// the L1 cache while every register tile of the row block passes over it.
constexpr int64_t kBlock = 128;

/// C[rows [i0, i0 + m)][cols [n0, n0 + nc * lanes)] = start + A . B, in place, K in
/// blocks of kBlock, where start is C itself when `fromC` (an i1) is set, else `fill`
/// (the value of a linalg.fill of C folded into the matmul).
void emitPanel(KernelBuilder &kb, Value a, Value b, Value c, Value i0, Value m, Value n0, Value k,
               Value fill, Value fromC, int64_t lanes, int64_t nc, int64_t regs, Value mask) {
  ImplicitLocOpBuilder &ib = kb.builder();
  Type elem = fill.getType();
  VectorType vt = kb.vec(elem, lanes);
  auto load = [&](KernelBuilder &in, Value mem, SmallVector<Value> idx) -> Value {
    if (!mask)
      return in.vload(vt, mem, idx);
    return vector::MaskedLoadOp::create(in.builder(), vt, mem, idx, mask, in.fconst(vt, 0.0));
  };
  Value fillV = kb.splat(fill, vt);
  Value fillFirst = arith::XOrIOp::create(ib, fromC, arith::ConstantOp::create(ib, ib.getBoolAttr(true)));
  // At least one block, so that with K = 0 the fill is still written.
  kb.forLoop(kb.idx(0), kb.max(k, kb.idx(1)), kBlock, [&](KernelBuilder &blk, Value k0) {
    Value filled = arith::AndIOp::create(
        blk.builder(), fillFirst, blk.cmp(arith::CmpIPredicate::eq, k0, blk.idx(0)));
    GemmSpec g;
    g.elem = elem;
    g.lanes = lanes;
    g.nc = nc;
    g.mr = gemmRowsFor(nc, regs);
    g.M = m;
    g.K = blk.min(blk.idx(kBlock), blk.sub(k, k0));
    g.a = [&](KernelBuilder &in, Value i, Value kk) {
      return in.load(a, {in.add(i0, i), in.add(k0, kk)});
    };
    g.b = [&](KernelBuilder &in, Value kk, int64_t c) {
      return load(in, b, {in.add(k0, kk), in.add(n0, c * lanes)});
    };
    g.init = [&](KernelBuilder &in, Value i, int64_t col) -> Value {
      Value v = load(in, c, {in.add(i0, i), in.add(n0, col * lanes)});
      return arith::SelectOp::create(in.builder(), filled, fillV, v);
    };
    g.store = [&](KernelBuilder &in, Value i, int64_t col, Value v) {
      SmallVector<Value> idx = {in.add(i0, i), in.add(n0, col * lanes)};
      if (!mask)
        return in.vstore(v, c, idx);
      vector::MaskedStoreOp::create(in.builder(), c, idx, mask, v);
    };
    emitGemm(blk, g);
  });
}

/// The linalg.fill of buffer `c` before `op` with nothing but ops free of memory effects
/// (views such as the collapse of an operand, index math) between them, or null.
linalg::FillOp fillJustBefore(Operation *op, Value c) {
  for (Operation *p = op->getPrevNode(); p; p = p->getPrevNode()) {
    if (auto fill = dyn_cast<linalg::FillOp>(p))
      return fill.hasPureBufferSemantics() && fill.getDpsInits()[0] == c ? fill : nullptr;
    if (!isMemoryEffectFree(p))
      return nullptr;
  }
  return nullptr;
}

/// What a matmul lowers to: tasks calling the panel functions (panelFunction) on 2-D
/// views of its operands, so every matmul of a module with the same element type shares
/// one copy of the micro-kernel (MLIR and LLVM compile it once).
class MatmulLowering {
public:
  MatmulLowering(ModuleOp module, int64_t vectorBits) : module(module), vectorBits(vectorBits) {}

  /// Replaces `op` (a matmul or batch_matmul on buffers) when it qualifies.
  void lower(linalg::LinalgOp op) {
    auto bmm = dyn_cast<linalg::BatchMatmulOp>(op.getOperation());
    std::optional<bool> shared = bmm ? sharedBMaps(bmm) : std::optional<bool>(false);
    if (!op.hasPureBufferSemantics() || !shared)
      return;
    if (auto mm = dyn_cast<linalg::MatmulOp>(op.getOperation()); mm && mm.hasUserDefinedMaps())
      return;
    MatmulOperands o{op.getDpsInputs()[0], op.getDpsInputs()[1], op.getDpsInits()[0],
                     bmm != nullptr, getElementTypeOrSelf(op.getDpsInits()[0].getType())};
    if ((!o.elem.isF32() && !o.elem.isF64()) || !unitInnerStride(o.a) || !unitInnerStride(o.b) ||
        !unitInnerStride(o.c))
      return;
    ImplicitLocOpBuilder ib(op->getLoc(), op);
    KernelBuilder kb(ib);
    // A linalg.fill of C just before (what a matmul's tensor.empty + fill bufferizes to):
    // the micro-kernel starts its tiles from the fill value instead, saving a pass over C
    // and a loop nest to compile.
    linalg::FillOp fill = fillJustBefore(op, o.c);
    Value fromC = arith::ConstantOp::create(ib, ib.getBoolAttr(!fill));
    Value start = fill ? fill.getDpsInputs()[0] : kb.fconst(o.elem, 0.0);
    emitTasks(kb, o, start, fromC);
    op->erase();
    if (fill)
      fill->erase();
  }

private:
  int64_t lanesOf(Type elem) const {
    return std::max<int64_t>(1, vectorBits / elem.getIntOrFloatBitWidth());
  }
  int64_t registers() const { return vectorBits >= 512 ? 32 : 16; }

  /// The 2-D view type the panel functions take: any offset and row stride, unit stride
  /// along the rows.
  static MemRefType viewType(Type elem) {
    int64_t d = ShapedType::kDynamic;
    return MemRefType::get({d, d}, elem, StridedLayoutAttr::get(elem.getContext(), d, {d, 1}));
  }

  /// `mem` as the 2-D view of batch `batch` (or as it is when it has no batch dim).
  Value view2d(KernelBuilder &kb, Value mem, Value batch) {
    ImplicitLocOpBuilder &b = kb.builder();
    auto mt = cast<MemRefType>(mem.getType());
    MemRefType want = viewType(mt.getElementType());
    if (mt.getRank() == 3) {
      SmallVector<OpFoldResult> offsets = {batch, b.getIndexAttr(0), b.getIndexAttr(0)};
      SmallVector<OpFoldResult> sizes = {b.getIndexAttr(1),
                                         memref::getMixedSize(b, b.getLoc(), mem, 1),
                                         memref::getMixedSize(b, b.getLoc(), mem, 2)};
      SmallVector<OpFoldResult> strides(3, b.getIndexAttr(1));
      // The subview's own type, less its unit batch dim.
      MemRefType full = memref::SubViewOp::inferResultType(mt, offsets, sizes, strides);
      auto [fs, fo] = full.getStridesAndOffset();
      auto t = MemRefType::get(full.getShape().drop_front(), mt.getElementType(),
                               StridedLayoutAttr::get(b.getContext(), fo, ArrayRef(fs).drop_front()));
      mem = memref::SubViewOp::create(b, t, mem, offsets, sizes, strides);
    }
    if (mem.getType() == want)
      return mem;
    return memref::CastOp::create(b, want, mem);
  }

  /// func.func private @qkv_matmul_panel_<T>_<cols>[_masked](A, B, C, i0, m, n0, k, fill,
  /// fromC[, n]): C[i0 .. i0 + m)[n0 .. n0 + cols) = (fromC ? C : fill) + A . B over the
  /// whole K; the masked form does one vector of columns, those below n. Made once per
  /// module and kind.
  func::FuncOp panelFunction(Type elem, int64_t nc, bool masked) {
    int64_t lanes = lanesOf(elem);
    std::string name = "qkv_matmul_panel_" + std::string(elem.isF32() ? "f32_" : "f64_") +
                       std::to_string(nc * lanes) + (masked ? "_masked" : "");
    if (auto f = module.lookupSymbol<func::FuncOp>(name))
      return f;
    OpBuilder ob = OpBuilder::atBlockEnd(module.getBody());
    Type index = ob.getIndexType();
    SmallVector<Type> args = {viewType(elem), viewType(elem), viewType(elem), index,   index,
                              index,          index,          elem,           ob.getI1Type()};
    if (masked)
      args.push_back(index);
    auto f = func::FuncOp::create(ob, module.getLoc(), name, ob.getFunctionType(args, {}));
    f.setPrivate();
    // Internal in LLVM (only this module calls it), and kept a function there: inlined
    // into each task it would be compiled once per matmul again.
    f->setAttr("llvm.linkage",
               LLVM::LinkageAttr::get(ob.getContext(), LLVM::linkage::Linkage::Internal));
    f->setAttr("passthrough", ob.getArrayAttr({ob.getStringAttr("noinline")}));
    ImplicitLocOpBuilder ib(module.getLoc(), ob);
    ib.setInsertionPointToStart(f.addEntryBlock());
    KernelBuilder kb(ib);
    auto a = f.getArguments();
    Value mask;
    if (masked) {
      auto mt = VectorType::get({lanes}, ib.getI1Type());
      mask = vector::CreateMaskOp::create(ib, mt, ValueRange{kb.sub(a[9], a[5])});
    }
    emitPanel(kb, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], lanes, nc, registers(),
              mask);
    func::ReturnOp::create(ib);
    return f;
  }

  void emitTasks(KernelBuilder &kb, const MatmulOperands &o, Value fill, Value fromC) {
    ImplicitLocOpBuilder &ib = kb.builder();
    int64_t r = o.batched ? 1 : 0;
    Value nBatch = o.batched ? Value(memref::DimOp::create(ib, o.c, 0)) : kb.idx(1);
    Value m = memref::DimOp::create(ib, o.c, r), n = memref::DimOp::create(ib, o.c, r + 1);
    Value k = memref::DimOp::create(ib, o.a, r + 1);
    int64_t lanes = lanesOf(o.elem), nc = 4, panel = nc * lanes;
    int64_t rowBlock = 8 * gemmRowsFor(nc, registers());
    Value panels = kb.divu(n, kb.idx(panel));
    Value blocks = kb.ceilDiv(m, rowBlock);
    // One task per (batch, columns, row block), calling `fn` on the batch's 2-D views.
    auto tasks = [&](Value columns, func::FuncOp fn, int64_t width, bool masked) {
      kb.parallel({nBatch, columns, blocks}, [&](KernelBuilder &in, ValueRange iv) {
        Value i0 = in.mul(iv[2], rowBlock);
        Value rows = in.min(in.idx(rowBlock), in.sub(m, i0));
        Value n0 = in.add(masked ? in.mul(panels, panel) : in.idx(0), in.mul(iv[1], width));
        SmallVector<Value> args = {view2d(in, o.a, iv[0]), view2d(in, o.b, iv[0]),
                                   view2d(in, o.c, iv[0]), i0, rows, n0, k, fill, fromC};
        if (masked)
          args.push_back(n);
        func::CallOp::create(in.builder(), fn, args);
      });
    };
    // A static N says which of the two kinds of task there are: a function no task calls
    // would still be compiled.
    auto nType = cast<MemRefType>(o.c.getType());
    std::optional<int64_t> staticN;
    if (!nType.isDynamicDim(r + 1))
      staticN = nType.getDimSize(r + 1);
    if (!staticN || *staticN >= panel)
      tasks(panels, panelFunction(o.elem, nc, false), panel, false);
    // Columns past the whole panels: one vector at a time, the last one masked.
    Value vecs = kb.ceilDiv(kb.sub(n, kb.mul(panels, panel)), lanes);
    if (!staticN || *staticN % panel != 0)
      tasks(vecs, panelFunction(o.elem, 1, true), lanes, true);
  }

  ModuleOp module;
  int64_t vectorBits;
};

struct LowerMatmulToMicrokernelsPass
    : qkv::ir::impl::LowerMatmulToMicrokernelsBase<LowerMatmulToMicrokernelsPass> {
  using LowerMatmulToMicrokernelsBase::LowerMatmulToMicrokernelsBase;
  void runOnOperation() override {
    SmallVector<linalg::LinalgOp> matmuls;
    getOperation().walk([&](Operation *op) {
      if (isa<linalg::MatmulOp, linalg::BatchMatmulOp>(op))
        matmuls.push_back(cast<linalg::LinalgOp>(op));
    });
    MatmulLowering lowering(getOperation(), vectorBits);
    for (linalg::LinalgOp op : matmuls)
      lowering.lower(op);
  }
};

} // namespace
