// qkv-lower-matmul-to-microkernels: linalg.matmul and linalg.batch_matmul on buffers
// (after bufferization) -> the blocked, packed GEMM of Gemm.h, in parallel tasks.
//
// B is packed into panels of nr columns (a scratch buffer, parallel over panels); C is
// cut into tasks of at most mc rows by a range of panels, each calling the block
// function, whose register tiles read packed B as one stream and broadcast A. The pack
// and block functions are private functions of the module, one per element type and
// blocking, called by every matmul's tasks on 2-D views of their operands: a block's or
// a model's projections compile one copy of the micro-kernel, not one each. A, B and C
// need unit stride along their last dim (they always have it in the CPU pipeline:
// operands are fresh buffers or identity-layout arguments); a matmul that does not is
// left to qkv-linalg-to-loops (convert-linalg-to-parallel-loops).
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/Utils/MemRefUtils.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/StringSet.h"

#include "Gemm.h"
#include "GemmFusion.h"
#include "qkv/compiler/transforms/Passes.h"
#include <qkv/runtime/kernel_abi.hpp>

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

/// The buffer that `v` is a view of (through subviews, casts, reshapes): two values of
/// one root may overlap.
Value rootOf(Value v) { return memref::skipViewLikeOps(cast<MemrefValue>(v)); }

/// Whether a 3-D buffer's first two dims can be collapsed into one (rows of rows).
bool denseRows(Value v) {
  auto mt = cast<MemRefType>(v.getType());
  return mt.getRank() == 3 && mt.getLayout().isIdentity();
}

struct MatmulOperands {
  Value a, b, c; // B is (K, N) for a batch_matmul whose B serves every batch
  bool batched;
  Type elem; // C's, the accumulators'

  Type aElem() const { return getElementTypeOrSelf(a.getType()); }
  Type bElem() const { return getElementTypeOrSelf(b.getType()); }
};

/// Whether A and B, of types `a` and `b`, can feed a GEMM accumulating in `acc`: the same
/// type, or f16/bf16 into f32.
bool operandTypesTaken(Type a, Type b, Type acc) {
  auto taken = [&](Type t) { return t == acc || (acc.isF32() && (t.isBF16() || t.isF16())); };
  return (acc.isF32() || acc.isF64()) && taken(a) && taken(b);
}

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

/// What a matmul lowers to: B packed into a scratch buffer, then tasks calling the block
/// function on 2-D views of A and C (Gemm.h), so every matmul of a module with the same
/// element type shares one copy of the micro-kernel (MLIR and LLVM compile it once).
class MatmulLowering {
public:
  MatmulLowering(ModuleOp module, const LowerMatmulToMicrokernelsOptions &o)
      : module(module), options(o) {}

  /// One matmul of a group: its operands (A and C collapsed to rows when its batches share
  /// B), how it starts, its epilogue, and C as the epilogue sees it.
  struct Member {
    linalg::LinalgOp op;
    MatmulOperands o;
    GemmStart start;
    std::optional<GemmEpilogue> epilogue;
    Value full;
    Operation *oldC = nullptr; ///< C's f32 allocation, replaced by roundInTiles
    // Made where the group is emitted:
    Value packed, size, panels, n, fill, fromC;
    bool param = false, bias = false, batchedB = false;
    func::FuncOp fn, skinny;
  };

  /// `op`'s operands when it can become the blocked GEMM (on buffers, unit inner strides,
  /// operand types the tiers take); nothing is changed.
  std::optional<MatmulOperands> analyse(linalg::LinalgOp op) const {
    auto bmm = dyn_cast<linalg::BatchMatmulOp>(op.getOperation());
    std::optional<bool> shared = bmm ? sharedBMaps(bmm) : std::optional<bool>(false);
    if (!op.hasPureBufferSemantics() || !shared)
      return std::nullopt;
    if (auto mm = dyn_cast<linalg::MatmulOp>(op.getOperation()); mm && mm.hasUserDefinedMaps())
      return std::nullopt;
    MatmulOperands o{op.getDpsInputs()[0], op.getDpsInputs()[1], op.getDpsInits()[0],
                     bmm != nullptr, getElementTypeOrSelf(op.getDpsInits()[0].getType())};
    if (!operandTypesTaken(o.aElem(), o.bElem(), o.elem) || !unitInnerStride(o.a) ||
        !unitInnerStride(o.b) || !unitInnerStride(o.c))
      return std::nullopt;
    return o;
  }

  /// Whether `o` is one matmul over rows: not batched, or batched over a weight shared by
  /// every batch with A and C dense (one matmul over all the batches' rows, so that a
  /// panel of B serves a block of rows of any batch: a batch of 32 sentences of 20 tokens
  /// is 640 rows, not 32 matmuls of 20).
  static bool overRows(const MatmulOperands &o) {
    return !o.batched ||
           (cast<MemRefType>(o.b.getType()).getRank() == 2 && denseRows(o.a) && denseRows(o.c));
  }

  /// Whether matmul `next` (operands `n`, start `start`) can join `group` (matmuls that
  /// run as one GEMM over their weights' panels: Q, K and V of one input; SwiGLU's gate
  /// and up): the same A as its last member, both over rows with the same types and tier,
  /// in the same block with nothing between them but `next`'s start, ops that at most
  /// allocate and the last member's epilogue (a bf16 graph's rounding of its product,
  /// taken here: takeBetween), and `next` neither reading nor writing what a member or a
  /// member's epilogue writes.
  bool joins(MutableArrayRef<Member> group, linalg::LinalgOp next, const MatmulOperands &n,
             const GemmStart &start) {
    Member &prev = group.back();
    const MatmulOperands &p = prev.o;
    if (prev.op->getBlock() != next->getBlock() || p.a != n.a || !overRows(p) || !overRows(n) ||
        p.aElem() != n.aElem() || p.bElem() != n.bElem() || p.elem != n.elem ||
        onPairs(p) != onPairs(n))
      return false;
    for (const Member &m : group)
      if (n.b == m.o.c || n.c == m.o.c ||
          (m.epilogue && overlaps(m.epilogue->generic.op(), n, start)))
        return false;
    linalg::GenericOp epilogue = prev.epilogue ? nullptr : gemmConsumer(prev.op, p.c);
    bool between = false;
    for (Operation *x = prev.op->getNextNode(); x && x != next.getOperation();
         x = x->getNextNode()) {
      if (epilogue && x == epilogue.getOperation())
        between = true;
      else if (x != start.op && !onlyAllocates(x))
        return false;
    }
    return !between || takeBetween(group, epilogue, n, start);
  }

  /// Takes `g`, the elementwise op that reads the result of the group's last member and
  /// lies between it and the next member `n`, as that member's epilogue (each task runs
  /// it on its block right after computing it), so that `n` can join: when every task
  /// can run it there (runsPerTask), it does not touch what `n` reads or writes
  /// (overlaps), and it is an epilogue the GEMM can take (takeGemmEpilogue).
  bool takeBetween(MutableArrayRef<Member> group, linalg::GenericOp g, const MatmulOperands &n,
                   const GemmStart &start) {
    Member &prev = group.back();
    if (overlaps(g, n, start) || !runsPerTask(g, group.drop_back(), prev))
      return false;
    prev.epilogue = takeGemmEpilogue(prev.op, prev.o.c, prev.start, options.vectorBits);
    if (!prev.epilogue)
      return false;
    prev.o.c = prev.full = prev.epilogue->out;
    return true;
  }

  /// Whether epilogue `g` and matmul `n` (with its start) may touch the same memory where
  /// one of them writes: the epilogue then cannot run interleaved with `n`'s tasks.
  static bool overlaps(linalg::GenericOp g, const MatmulOperands &n, const GemmStart &start) {
    SmallVector<Value> reads = {rootOf(n.a), rootOf(n.b)}, writes = {rootOf(n.c)};
    if (start.kind == GemmStart::Kind::Bias)
      reads.push_back(rootOf(start.value));
    for (Value x : g.getDpsInits())
      if (llvm::is_contained(reads, rootOf(x)) || llvm::is_contained(writes, rootOf(x)))
        return true;
    return llvm::any_of(g.getDpsInputs(),
                        [&](Value x) { return llvm::is_contained(writes, rootOf(x)); });
  }

  /// Lowers `ops` (matmuls in program order): runs of siblings (joins) as one GEMM each,
  /// the others alone.
  void lowerAll(ArrayRef<linalg::LinalgOp> ops) {
    SmallVector<Member, 3> group;
    for (linalg::LinalgOp op : ops) {
      std::optional<MatmulOperands> o = analyse(op);
      if (!o)
        continue;
      GemmStart start = gemmStartOf(op, o->c);
      if (!group.empty() && !joins(group, op, *o, start)) {
        lowerGroup(group);
        group.clear();
      }
      group.emplace_back();
      group.back().op = op;
      group.back().o = *o;
      group.back().start = start;
    }
    if (!group.empty())
      lowerGroup(group);
    markDeferredSkinny();
  }

private:
  /// Gives each skinny function that only matmuls with a row count bound at run time call
  /// (behind a test of their task's rows) the LLVM attribute of a deferred function
  /// (abi::kDeferredFunctionAttr): a JIT compile leaves it to the first call that takes it,
  /// as a prefill or an encoder batch of more rows than its register tile never does.
  void markDeferredSkinny() {
    for (llvm::StringRef name : skinnyMaybe.keys()) {
      if (skinnyOnly.contains(name))
        continue;
      auto f = module.lookupSymbol<func::FuncOp>(name);
      SmallVector<Attribute> passthrough(f->getAttrOfType<ArrayAttr>("passthrough").getValue());
      passthrough.push_back(StringAttr::get(f.getContext(), qkv::abi::kDeferredFunctionAttr));
      f->setAttr("passthrough", ArrayAttr::get(f.getContext(), passthrough));
    }
  }

  /// The epilogue (GemmFusion.h) of a group's last member, its members' starts found as
  /// they joined (a fill or a bias row instead of a pass over C before), and the other
  /// members' epilogues taken as the next one joined (takeBetween): the elementwise op
  /// after the last member, applied per task, when every task can run it there
  /// (runsPerTask).
  void fuse(MutableArrayRef<Member> group) {
    for (Member &m : group)
      if (!m.epilogue)
        m.full = m.o.c;
    Member &last = group.back();
    if (linalg::GenericOp g = gemmConsumer(last.op, last.o.c))
      if (!runsPerTask(g, group.drop_back(), last))
        return;
    last.epilogue = takeGemmEpilogue(last.op, last.o.c, last.start, options.vectorBits);
    if (last.epilogue)
      last.o.c = last.full = last.epilogue->out;
  }

  /// Whether epilogue candidate `g` of `owner` can run in each task right after the
  /// owner's block, after the blocks of the members before it (`earlier`) in the same
  /// task and interleaved with other tasks: what it reads or writes of an earlier
  /// member's result, or of what an earlier member's epilogue writes, it takes element by
  /// element at the owner's width (sameTile: the block its own task wrote); it touches
  /// no other view of those, and writes nothing that an earlier epilogue reads.
  static bool runsPerTask(linalg::GenericOp g, ArrayRef<Member> earlier, const Member &owner) {
    for (const Member &m : earlier) {
      SmallVector<Value> blocks = {m.o.c}, written = {rootOf(m.o.c)}, read;
      if (m.epilogue) {
        linalg::GenericOp e = m.epilogue->generic.op();
        for (Value x : e.getDpsInits()) {
          blocks.push_back(x);
          written.push_back(rootOf(x));
        }
        for (Value x : e.getDpsInputs())
          read.push_back(rootOf(x));
      }
      for (OpOperand &x : g->getOpOperands()) {
        if (llvm::is_contained(blocks, x.get())) {
          if (!sameTile(g, x.get(), owner.o.c))
            return false;
        } else if (llvm::is_contained(written, rootOf(x.get())) ||
                   (g.isDpsInit(&x) && llvm::is_contained(read, rootOf(x.get())))) {
          return false;
        }
      }
    }
    return true;
  }

  /// Whether `g` takes `v` element for element with `c`, the result of the member whose
  /// epilogue it is (the identity map, the same static width; the rows are A's for
  /// both), so that a task's block of it is the block the task wrote.
  static bool sameTile(linalg::GenericOp g, Value v, Value c) {
    auto vt = cast<MemRefType>(v.getType()), ct = cast<MemRefType>(c.getType());
    if (vt.getRank() != ct.getRank() || vt.isDynamicDim(vt.getRank() - 1) ||
        vt.getShape().back() != ct.getShape().back())
      return false;
    for (OpOperand &x : g->getOpOperands())
      if (x.get() == v && !g.getMatchingIndexingMap(&x).isIdentity())
        return false;
    return true;
  }

  /// Replaces the matmuls of `group` (one, or siblings that join) by one parallel loop of
  /// tasks, emitted where the last one was: each task runs its block of rows over its
  /// share of every member's panels, in order.
  void lowerGroup(MutableArrayRef<Member> group) {
    fuse(group);
    Member &last = group.back();
    bool pairs = onPairs(last.o), amx = onAmx(last.o);
    GemmBlocking g =
        GemmBlocking::forTarget(last.o.elem, pairs, amx, options.vectorBits, options.l1Bytes,
                                options.l2Bytes, options.kc, options.mc);
    for (Member &m : group)
      roundInTiles(m, g);
    ImplicitLocOpBuilder ib(last.op->getLoc(), last.op);
    KernelBuilder kb(ib);
    Value a = group.front().o.a;
    bool collapse = group.front().o.batched && overRows(group.front().o);
    SmallVector<ReassociationIndices> rows = {{0, 1}, {2}};
    if (collapse)
      a = memref::CollapseShapeOp::create(ib, a, rows);
    for (Member &m : group) {
      m.o.a = a;
      if (collapse) {
        m.o.c = memref::CollapseShapeOp::create(ib, m.o.c, rows);
        m.o.batched = false;
      }
    }
    emitGemm(kb, group, g);
    for (Member &m : group) {
      m.op->erase();
      if (m.start.op)
        m.start.op->erase();
      if (m.epilogue)
        m.epilogue->generic.op()->erase();
      if (m.oldC)
        m.oldC->erase();
    }
  }

  /// A member on AMX whose epilogue reads its f32 result only rounded to bf16 (a bf16
  /// graph's rounding of the product, maybe followed by an activation), with one K block
  /// (K static, at most kc) and a start that is not C: the GEMM rounds each tile itself
  /// as it writes it, from the f32 scratch tile in L1 (the `_c_bf16` block function), into
  /// a bf16 buffer that replaces C, and the epilogue reads that; an epilogue that was the
  /// rounding alone goes, the GEMM writing its output. No f32 C is made (it went to
  /// memory and back: the tiles' stores into it cost the AMX GEMM ~40%).
  void roundInTiles(Member &m, const GemmBlocking &g) {
    auto alloc = m.o.c.getDefiningOp<memref::AllocOp>();
    int64_t k = cast<MemRefType>(m.o.a.getType()).getShape().back();
    if (!g.amx || !m.epilogue || m.epilogue->out != m.o.c || !alloc ||
        m.start.kind == GemmStart::Kind::FromC || ShapedType::isDynamic(k) || k > g.kc)
      return;
    linalg::GenericOp e = m.epilogue->generic.op();
    OpOperand *cIn = nullptr;
    for (OpOperand &x : e->getOpOperands())
      if (x.get() == m.o.c) {
        if (cIn || e.isDpsInit(&x))
          return;
        cIn = &x;
      }
    if (!cIn)
      return;
    Type bf16 = BFloat16Type::get(e.getContext());
    auto rounded = [&](Operation *u) {
      auto t = dyn_cast<arith::TruncFOp>(u);
      return t && t.getType() == bf16;
    };
    BlockArgument arg = e.getMatchingBlockArgument(cIn);
    if (!llvm::all_of(arg.getUsers(), rounded))
      return;
    // The epilogue on the rounded values: a copy of it, kept only if it still vectorizes.
    OpBuilder b(e);
    auto copy = cast<linalg::GenericOp>(b.clone(*e));
    BlockArgument carg =
        copy.getMatchingBlockArgument(&copy->getOpOperand(cIn->getOperandNumber()));
    carg.setType(bf16);
    for (Operation *u : llvm::make_early_inc_range(carg.getUsers())) {
      u->getResult(0).replaceAllUsesWith(carg);
      u->erase();
    }
    std::optional<VectorizedGeneric> v = VectorizedGeneric::analyse(copy, options.vectorBits);
    if (!v) {
      copy->erase();
      return;
    }
    Value out = copy.getDpsInits()[0];
    auto ot = cast<MemRefType>(out.getType()), ct = cast<MemRefType>(m.o.c.getType());
    bool alone = copy.getNumDpsInputs() == 1 && copy.getNumDpsInits() == 1 &&
                 copy.getRegion().front().getTerminator()->getOperand(0) == carg &&
                 ot.getShape() == ct.getShape() && ot.getLayout().isIdentity() &&
                 ot.getElementType() == bf16 && !llvm::is_contained(m.op->getOperands(), out);
    Value c16 = out;
    if (!alone) {
      b.setInsertionPoint(alloc);
      c16 = memref::AllocOp::create(b, alloc.getLoc(), MemRefType::get(ct.getShape(), bf16),
                                    alloc.getDynamicSizes(), alloc.getSymbolOperands(),
                                    alloc.getAlignmentAttr());
      copy->setOperand(cIn->getOperandNumber(), c16);
    }
    e->erase();
    for (Operation *u : llvm::make_early_inc_range(alloc->getUsers()))
      if (isa<memref::DeallocOp>(u)) {
        if (!alone) {
          OpBuilder d(u);
          memref::DeallocOp::create(d, u->getLoc(), c16);
        }
        u->erase();
      }
    m.oldC = alloc;
    m.o.c = m.full = c16;
    if (alone) {
      copy->erase();
      m.epilogue.reset();
    } else {
      m.epilogue = GemmEpilogue{*v, SmallVector<Value>(copy->getOperands()), c16};
    }
  }

private:
  /// Whether the matmul's blocks run on AMX tiles. AMX tiles hold rows of 16 f32: its
  /// GEMMs (their packing and epilogues in 16-lane vectors) need 512-bit vectors; narrower
  /// ones (Schedule::vector_bits) keep the avx512bf16 form at that width.
  bool onAmx(const MatmulOperands &o) const {
    return onPairs(o) && options.isaTier == "amx" && options.vectorBits >= 512;
  }

  /// Whether the matmul runs on bf16 pairs (vdpbf16ps, or AMX tiles on the amx tier): on
  /// the avx512bf16 and amx tiers, when A and B are bf16, or f32 or bf16 under medium
  /// precision (rounded to bf16 as packed).
  bool onPairs(const MatmulOperands &o) const {
    if (options.isaTier == "f32" || !o.elem.isF32())
      return false;
    auto bf16 = [](Type t) { return t.isBF16(); };
    auto roundable = [](Type t) { return t.isBF16() || t.isF32(); };
    return (bf16(o.aElem()) && bf16(o.bElem())) ||
           (options.matmulPrecision == "medium" && roundable(o.aElem()) && roundable(o.bElem()));
  }

  /// `mem` as the 2-D view of batch `batch` (or as it is when it has no batch dim).
  Value view2d(KernelBuilder &kb, Value mem, Value batch) {
    ImplicitLocOpBuilder &b = kb.builder();
    auto mt = cast<MemRefType>(mem.getType());
    MemRefType want = gemmViewType(mt.getElementType());
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

  /// The `size` elements of the flat buffer `packed` from `offset`, as gemmPackedType.
  static Value slice(KernelBuilder &kb, Value packed, Value offset, Value size) {
    ImplicitLocOpBuilder &b = kb.builder();
    SmallVector<OpFoldResult> offsets = {offset}, sizes = {size}, strides = {b.getIndexAttr(1)};
    auto t = gemmPackedType(cast<MemRefType>(packed.getType()).getElementType());
    return memref::SubViewOp::create(b, t, packed, offsets, sizes, strides);
  }

  /// omp_get_max_threads() as an index.
  Value maxThreads(KernelBuilder &kb) {
    ImplicitLocOpBuilder &ib = kb.builder();
    auto fnType = ib.getFunctionType({}, {ib.getI32Type()});
    if (!module.lookupSymbol<func::FuncOp>("omp_get_max_threads")) {
      OpBuilder mb(module.getBodyRegion());
      func::FuncOp::create(mb, module.getLoc(), "omp_get_max_threads", fnType).setPrivate();
    }
    Value t = func::CallOp::create(ib, "omp_get_max_threads", TypeRange{ib.getI32Type()},
                                   ValueRange{})
                  .getResult(0);
    return arith::IndexCastOp::create(ib, ib.getIndexType(), t);
  }

  /// B packed into panels (a scratch buffer, freed after the matmul), in parallel over
  /// (batch of B, panel). Returns the buffer and the elements of one batch's packing.
  std::pair<Value, Value> packB(KernelBuilder &kb, const MatmulOperands &o, const GemmBlocking &g,
                                Value nBatchB, Value panels, Value n, Value k) {
    ImplicitLocOpBuilder &ib = kb.builder();
    Value size = gemmPackedSize(kb, g, panels, k);
    auto flat = MemRefType::get({ShapedType::kDynamic}, g.packed);
    Value packed = memref::AllocOp::create(ib, flat, ValueRange{kb.mul(nBatchB, size)},
                                           ib.getI64IntegerAttr(64));
    func::FuncOp fn = gemmPackBFunction(module, o.bElem(), g);
    kb.parallel({nBatchB, panels}, [&](KernelBuilder &in, ValueRange iv) {
      Value bb = cast<MemRefType>(o.b.getType()).getRank() == 3 ? iv[0] : Value();
      func::CallOp::create(in.builder(), fn,
                           ValueRange{view2d(in, o.b, bb), slice(in, packed, in.mul(iv[0], size), size),
                                      iv[1], in.add(iv[1], 1), n, k});
    });
    return {packed, size};
  }

  /// The function argument that `b` is (through casts) when it is a 2-D param, else null:
  /// such a B is packed once by the runtime, not on every call. A param is an argument of
  /// the entry marked qkv.param, or of a private function (a repeated layer) that every
  /// call passes a param.
  BlockArgument paramOperand(Value b) {
    while (auto c = b.getDefiningOp<memref::CastOp>())
      b = c.getSource();
    auto arg = dyn_cast<BlockArgument>(b);
    if (!arg || cast<MemRefType>(arg.getType()).getRank() != 2)
      return {};
    auto fn = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
    if (!fn || arg.getOwner() != &fn.getBody().front())
      return {};
    if (fn.isPublic())
      return fn.getArgAttr(arg.getArgNumber(), "qkv.param") ? arg : BlockArgument();
    const std::optional<SmallVector<func::CallOp>> &calls = callsOf(fn);
    if (!calls || calls->empty())
      return {};
    for (func::CallOp call : *calls)
      if (!paramOperand(call.getOperand(arg.getArgNumber())))
        return {};
    return arg;
  }

  /// The calls of private function `fn`, found once per function: none when something
  /// other than a func.call uses its symbol.
  const std::optional<SmallVector<func::CallOp>> &callsOf(func::FuncOp fn) {
    auto [it, fresh] = callers.try_emplace(fn);
    if (!fresh)
      return it->second;
    SmallVector<func::CallOp> calls;
    if (std::optional<SymbolTable::UseRange> uses = SymbolTable::getSymbolUses(fn, module))
      for (const SymbolTable::SymbolUse &use : *uses) {
        auto call = dyn_cast<func::CallOp>(use.getUser());
        if (!call)
          return it->second; // nullopt
        calls.push_back(call);
      }
    it->second = std::move(calls);
    return it->second;
  }

  /// The argument that brings `param` packed (added to its function, after all others,
  /// the first time a matmul asks), and its entry in the list the runtime reads. For a
  /// private function's param, every call passes its own param's packed argument.
  Value packedArgument(BlockArgument param, const GemmBlocking &g) {
    auto fn = cast<func::FuncOp>(param.getOwner()->getParentOp());
    for (const PackedParam &p : packedParams)
      if (p.fn == fn && p.param == param.getArgNumber())
        return fn.getArgument(p.packedArg);
    MLIRContext *ctx = fn.getContext();
    Builder b(ctx);
    unsigned at = fn.getNumArguments();
    auto type = MemRefType::get({ShapedType::kDynamic}, g.packed);
    auto attrs = b.getDictionaryAttr(
        {b.getNamedAttr("qkv.packed_param", b.getI64IntegerAttr(param.getArgNumber())),
         b.getNamedAttr("qkv.panel_columns", b.getI64IntegerAttr(g.nr())),
         b.getNamedAttr("qkv.panel_rows", b.getI64IntegerAttr(g.kGroup())),
         b.getNamedAttr("qkv.row_multiple", b.getI64IntegerAttr(g.kAlign()))});
    // A private function's param: paramOperand saw every call pass an entry param.
    for (func::CallOp call : fn.isPublic() ? SmallVector<func::CallOp>() : *callsOf(fn)) {
      Value packed = packedArgument(paramOperand(call.getOperand(param.getArgNumber())), g);
      if (!packed)
        return {};
      call->insertOperands(call->getNumOperands(), packed);
    }
    if (failed(fn.insertArgument(at, type, attrs, fn.getLoc())))
      return {};
    packedParams.push_back({fn, param.getArgNumber(), at, g.nr(), g.kGroup(), g.kAlign(), g.packed});
    return fn.getArgument(at);
  }

  /// The epilogue over rows [i0, i0 + rows) and columns [j0, j1) of C, `full` being C
  /// before its batch and row dims were collapsed (the epilogue's own shape).
  static void emitEpilogue(KernelBuilder &kb, const GemmEpilogue &e, const MatmulOperands &o,
                           Value full, Value batch, Value i0, Value rows, Value j0, Value j1) {
    bool collapsed = cast<MemRefType>(full.getType()).getRank() == 3 && !o.batched;
    Value len = collapsed ? Value(memref::DimOp::create(kb.builder(), full, 1)) : Value();
    kb.forLoop(i0, kb.add(i0, rows), 1, [&](KernelBuilder &in, Value r) {
      SmallVector<Value> outer = {r};
      if (collapsed)
        outer = {in.divu(r, len), in.remu(r, len)};
      else if (o.batched)
        outer = {batch, r};
      e.generic.emitRow(in, outer, j0, j1, e.operands);
    });
  }

  /// How the tasks split C: `blocks` row blocks of `rows` rows by `ranges` ranges of
  /// `panels` panels.
  struct Partition {
    Value blocks, rows, ranges, panels;
  };

  /// Row blocks of equal size, at most mc rows, as many as make a multiple of the thread
  /// count (with all batches) where there are rows enough; the ranges split the panels so
  /// that the tasks divide among the threads: one range when the row blocks already do
  /// (each task then packs its rows of A once for all the panels), else one per thread
  /// (a decode step's few rows).
  Partition partition(KernelBuilder &kb, const GemmBlocking &g, Value nBatch, Value m,
                      Value panels) {
    ImplicitLocOpBuilder &ib = kb.builder();
    Value threads = maxThreads(kb);
    Value t = kb.max(threads, kb.idx(1));
    Value least = kb.ceilDiv(m, g.mc);
    Value want = kb.ceilDiv(kb.mul(nBatch, least), t);
    want = kb.max(kb.ceilDiv(kb.mul(want, t), kb.max(nBatch, kb.idx(1))), least);
    Partition p;
    p.rows = kb.mul(kb.ceilDiv(kb.ceilDiv(m, kb.max(want, kb.idx(1))), g.mr), g.mr);
    p.blocks = kb.ceilDiv(m, kb.max(p.rows, kb.idx(1)));
    Value divides = kb.cmp(arith::CmpIPredicate::eq, kb.remu(kb.mul(nBatch, p.blocks), t), kb.idx(0));
    Value ranges = arith::SelectOp::create(ib, divides, kb.idx(1), threads);
    p.panels = kb.max(kb.ceilDiv(panels, kb.max(kb.min(ranges, panels), kb.idx(1))), kb.idx(1));
    p.ranges = kb.ceilDiv(panels, p.panels);
    return p;
  }

  /// What member `m` needs before the tasks: B packed (or the param's packed argument),
  /// its panels, its start, and its block and skinny functions.
  void prepare(KernelBuilder &kb, Member &m, const GemmBlocking &g, Value nBatch, Value k) {
    ImplicitLocOpBuilder &ib = kb.builder();
    const MatmulOperands &o = m.o;
    m.fromC = arith::ConstantOp::create(ib, ib.getBoolAttr(m.start.kind == GemmStart::Kind::FromC));
    m.fill = m.start.kind == GemmStart::Kind::Fill ? m.start.value : kb.fconst(o.elem, 0.0);
    m.bias = m.start.kind == GemmStart::Kind::Bias;
    m.batchedB = cast<MemRefType>(o.b.getType()).getRank() == 3;
    m.n = memref::DimOp::create(ib, o.c, o.batched ? 2 : 1);
    m.panels = kb.ceilDiv(m.n, g.nr());
    BlockArgument param = paramOperand(o.b);
    if (param && !(m.packed = packedArgument(param, g)))
      param = {};
    m.param = bool(param);
    if (m.param)
      m.size = gemmPackedSize(kb, g, m.panels, k);
    else
      std::tie(m.packed, m.size) =
          packB(kb, o, g, m.batchedB ? nBatch : kb.idx(1), m.panels, m.n, k);
    Type biasElem = m.bias ? cast<MemRefType>(m.start.value.getType()).getElementType() : Type();
    Type cElem = cast<MemRefType>(o.c.getType()).getElementType();
    // A task of at most skinnyMr rows (a decode step's) takes the skinny form: A read in
    // place, each panel of B once. A static M that small takes it alone (no block
    // function), a larger one never; a dynamic M has both, the task's rows choosing.
    auto cType = cast<MemRefType>(o.c.getType());
    int64_t rowDim = cType.getRank() - 2;
    bool dynamicRows = cType.isDynamicDim(rowDim);
    if (!dynamicRows && cType.getDimSize(rowDim) <= g.skinnyMr) {
      m.fn = gemmSkinnyFunction(module, o.aElem(), g, biasElem, cElem);
      skinnyOnly.insert(m.fn.getName());
      return;
    }
    m.fn = gemmBlockFunction(module, o.aElem(), g, biasElem, cElem);
    if (dynamicRows) {
      m.skinny = gemmSkinnyFunction(module, o.aElem(), g, biasElem, cElem);
      skinnyMaybe.insert(m.skinny.getName());
    }
  }

  /// Member `m`'s part of a task: rows [i0, i0 + rows) of batch `batch` by panels
  /// [p0, p1), then its epilogue on that block.
  void emitTask(KernelBuilder &in, const Member &m, const GemmBlocking &g, Value batch, Value i0,
                Value rows, Value p0, Value p1, Value k) {
    const MatmulOperands &o = m.o;
    Value bp = slice(in, m.packed, m.batchedB ? in.mul(batch, m.size) : in.idx(0), m.size);
    SmallVector<Value> args = {view2d(in, o.a, batch), bp, view2d(in, o.c, batch)};
    args.append({i0, rows, p0, p1, m.n, k, m.fill, m.fromC});
    if (m.bias)
      args.push_back(memref::CastOp::create(
          in.builder(), gemmPackedType(cast<MemRefType>(m.start.value.getType()).getElementType()),
          m.start.value));
    if (m.skinny)
      in.ifThen(
          in.cmp(arith::CmpIPredicate::sle, rows, in.idx(g.skinnyMr)),
          [&](KernelBuilder &t) { func::CallOp::create(t.builder(), m.skinny, args); },
          [&](KernelBuilder &t) { func::CallOp::create(t.builder(), m.fn, args); });
    else
      func::CallOp::create(in.builder(), m.fn, args);
    if (m.epilogue)
      emitEpilogue(in, *m.epilogue, o, m.full, batch, i0, rows, in.mul(p0, g.nr()),
                   in.min(m.n, in.mul(p1, g.nr())));
  }

  /// The group's tasks: (batch, block of rows, range) each running every member on its
  /// rows and its range's share of the member's panels. The partition is the first
  /// member's; a member of as many panels gets the same ranges (so an epilogue that reads
  /// a sibling's result reads what its own task wrote), one of other width its own share.
  void emitGemm(KernelBuilder &kb, MutableArrayRef<Member> group, const GemmBlocking &g) {
    ImplicitLocOpBuilder &ib = kb.builder();
    const MatmulOperands &o = group.front().o;
    int64_t r = o.batched ? 1 : 0;
    Value nBatch = o.batched ? Value(memref::DimOp::create(ib, o.c, 0)) : kb.idx(1);
    Value m = memref::DimOp::create(ib, o.c, r), k = memref::DimOp::create(ib, o.a, r + 1);
    for (Member &x : group)
      prepare(kb, x, g, nBatch, k);
    Partition part = partition(kb, g, nBatch, m, group.front().panels);
    SmallVector<Value> share = {part.panels};
    for (const Member &x : group.drop_front())
      share.push_back(kb.max(kb.ceilDiv(x.panels, part.ranges), kb.idx(1)));
    kb.parallel({nBatch, part.blocks, part.ranges}, [&](KernelBuilder &in, ValueRange iv) {
      Value i0 = in.mul(iv[1], part.rows);
      Value rows = in.min(part.rows, in.sub(m, i0));
      for (auto [x, panels] : llvm::zip_equal(group, share)) {
        Value p0 = in.mul(iv[2], panels);
        Value p1 = in.min(x.panels, in.add(p0, panels));
        if (group.size() == 1)
          emitTask(in, x, g, iv[0], i0, rows, p0, p1, k);
        else // a narrower member's share can be empty
          in.ifThen(in.cmp(arith::CmpIPredicate::slt, p0, p1),
                    [&](KernelBuilder &t) { emitTask(t, x, g, iv[0], i0, rows, p0, p1, k); });
      }
    });
    for (const Member &x : group)
      if (!x.param)
        memref::DeallocOp::create(ib, x.packed);
  }

public:
  /// A param the runtime packs: function `fn`'s argument `param`, brought packed in panels
  /// of `columns` by argument `packedArg`, `rows` rows of B interleaved per packed row
  /// (2 on the dot and AMX tiers), its K rounded up to a multiple of `rowMultiple` (32
  /// on AMX, else `rows`), as `elem`.
  struct PackedParam {
    func::FuncOp fn;
    unsigned param, packedArg;
    int64_t columns, rows, rowMultiple;
    Type elem;
  };
  SmallVector<PackedParam> packedParams;

private:
  ModuleOp module;
  LowerMatmulToMicrokernelsOptions options;
  /// The skinny functions some matmul calls as its only form (static M of at most
  /// skinnyMr rows), and those called where a task's rows are few (dynamic M).
  llvm::StringSet<> skinnyOnly, skinnyMaybe;
  llvm::DenseMap<Operation *, std::optional<SmallVector<func::CallOp>>> callers;
};

/// The list of packed params the runtime reads from the compiled object (Kernel::run
/// packs each once and passes it after the outputs): a NUL-terminated string global
/// `qkv_packed_params`, "<param argument>:<panel columns>:<rows per packed row>:<packed
/// dtype>:<row multiple>" per packed argument, in argument order, separated by ','.
void recordPackedParams(ModuleOp module, ArrayRef<MatmulLowering::PackedParam> params) {
  std::string text;
  for (const MatmulLowering::PackedParam &p : params) {
    if (!func::FuncOp(p.fn).isPublic()) // a repeated layer's, brought by the entry's
      continue;
    std::string dtype = p.elem.isBF16() ? "bf16" : p.elem.isF64() ? "f64" : "f32";
    text += (text.empty() ? "" : ",") + std::to_string(p.param) + ":" + std::to_string(p.columns) +
            ":" + std::to_string(p.rows) + ":" + dtype + ":" + std::to_string(p.rowMultiple);
  }
  if (text.empty())
    return;
  text.push_back('\0');
  OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
  auto type = LLVM::LLVMArrayType::get(b.getI8Type(), text.size());
  LLVM::GlobalOp::create(b, module.getLoc(), type, /*isConstant=*/true, LLVM::Linkage::External,
                         qkv::abi::kPackedParams, b.getStringAttr(text));
}

struct LowerMatmulToMicrokernelsPass
    : qkv::ir::impl::LowerMatmulToMicrokernelsBase<LowerMatmulToMicrokernelsPass> {
  using LowerMatmulToMicrokernelsBase::LowerMatmulToMicrokernelsBase;
  void runOnOperation() override {
    SmallVector<linalg::LinalgOp> matmuls;
    getOperation().walk([&](Operation *op) {
      if (isa<linalg::MatmulOp, linalg::BatchMatmulOp>(op))
        matmuls.push_back(cast<linalg::LinalgOp>(op));
    });
    if (isaTier != "f32" && isaTier != "avx512bf16" && isaTier != "amx") {
      getOperation().emitError() << "qkv-lower-matmul-to-microkernels: unknown isa '"
                                 << isaTier << "' (f32, avx512bf16, amx)";
      return signalPassFailure();
    }
    if (matmulPrecision != "highest" && matmulPrecision != "medium") {
      getOperation().emitError() << "qkv-lower-matmul-to-microkernels: unknown precision '"
                                 << matmulPrecision << "' (highest, medium)";
      return signalPassFailure();
    }
    MatmulLowering lowering(getOperation(), {vectorBits, l1Bytes, l2Bytes, kc, mc, isaTier,
                                             matmulPrecision});
    lowering.lowerAll(matmuls);
    recordPackedParams(getOperation(), lowering.packedParams);
  }
};

} // namespace
