#include "Gemm.h"

#include "mlir/Dialect/AMX/AMXDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include "Microkernel.h"

using namespace mlir;

namespace qkv::ir {

GemmBlocking GemmBlocking::forTarget(Type acc, bool dot, bool amx, int64_t vectorBits,
                                     int64_t l1Bytes, int64_t l2Bytes, int64_t kcOverride,
                                     int64_t mcOverride) {
  GemmBlocking g;
  g.acc = acc;
  g.dot = dot || amx;
  g.amx = amx;
  g.packed = g.dot ? BFloat16Type::get(acc.getContext()) : acc;
  int64_t bytes = g.packed.getIntOrFloatBitWidth() / 8;
  g.lanes = std::max<int64_t>(1, vectorBits / acc.getIntOrFloatBitWidth());
  int64_t registers = vectorBits >= 512 ? 32 : 16;
  // 16 registers: a 6 x 2-vector tile (12 accumulators, 2 B vectors, 1 broadcast); 32: 6 x 4.
  g.nv = registers >= 32 ? 4 : 2;
  g.mr = gemmRowsFor(g.nv, registers);
  g.skinnyMr = g.mr;
  if (amx)
    return g.amxBlocking(l2Bytes, kcOverride, mcOverride);
  auto roundDown = [](int64_t v, int64_t m) { return std::max(m, v / m * m); };
  // kc: B's block (kc x nr) in half of L1, or in a sixteenth of L2 when that is more, and
  // at least kMinGemmKc rows. C's tiles are read and written once per block of K, 4 / kc
  // bytes per flop: with nr = 64 columns half of a 48 KiB L1 holds 96 f32 rows, and at
  // K = 4096 the passes over C took 40% of the time (Zen 5, 2 threads: 4096^3 f32 at 54%
  // of the FMA peak with kc = 96, 78% with 256; bf16 57% of the vdpbf16ps peak with 192,
  // 75% with 512). The block streams from L2 as well as from L1 at one tile row per 24
  // FMAs.
  if (kcOverride > 0)
    g.kc = (kcOverride + g.kGroup() - 1) / g.kGroup() * g.kGroup();
  else
    g.kc = std::max({roundDown(l1Bytes / 2 / (g.nr() * bytes), 16),
                     roundDown(l2Bytes / 16 / (g.nr() * bytes), 16), kMinGemmKc});
  if (mcOverride > 0)
    g.mc = (mcOverride + g.mr - 1) / g.mr * g.mr;
  else
    g.mc = roundDown(std::min<int64_t>(l2Bytes / 2 / (g.kc * bytes), 1024), g.mr);
  return g;
}

MemRefType gemmViewType(Type elem) {
  int64_t d = ShapedType::kDynamic;
  return MemRefType::get({d, d}, elem, StridedLayoutAttr::get(elem.getContext(), d, {d, 1}));
}

MemRefType gemmPackedType(Type elem) {
  int64_t d = ShapedType::kDynamic;
  return MemRefType::get({d}, elem, StridedLayoutAttr::get(elem.getContext(), d, {1}));
}

GemmBlocking GemmBlocking::amxBlocking(int64_t l2Bytes, int64_t kcOverride,
                                       int64_t mcOverride) const {
  GemmBlocking g = *this;
  // Panels of 64 columns in 16-lane vectors whatever Schedule::vector_bits says (an AMX
  // tile row is 16 f32; every AMX host has AVX-512), the skinny form's 6 x 4 vectors.
  g.lanes = kAmxRows;
  g.nv = 4;
  g.skinnyMr = gemmRowsFor(g.nv, 32);
  // Two A tiles by two B tiles: 32 rows by half a panel (the 16-column tiles of a
  // 64-column panel), four accumulators and four operand tiles of the eight.
  g.mr = 2 * kAmxRows;
  auto roundUp = [](int64_t v, int64_t m) { return (v + m - 1) / m * m; };
  // kc: a panel's kc x nr block of B (bf16) in an eighth of L2, at least 256 (C's tiles
  // go through memory once per block of K); mc: the task's A block in half of L2.
  g.kc = kcOverride > 0 ? roundUp(kcOverride, kAmxK)
                        : std::max<int64_t>(256, l2Bytes / 8 / (g.nr() * 2) / kAmxK * kAmxK);
  g.mc = mcOverride > 0 ? roundUp(mcOverride, g.mr)
                        : std::max(g.mr, std::min<int64_t>(l2Bytes / 2 / (g.kc * 2), 1024) / g.mr * g.mr);
  return g;
}

Value gemmPackedRows(KernelBuilder &kb, const GemmBlocking &g, Value k) {
  return g.kAlign() == 1 ? k : kb.mul(kb.ceilDiv(k, g.kAlign()), g.kAlign());
}

Value gemmPackedSize(KernelBuilder &kb, const GemmBlocking &g, Value panels, Value k) {
  return kb.mul(kb.mul(panels, gemmPackedRows(kb, g, k)), g.nr());
}

namespace {

std::string typeName(Type elem) {
  return elem.isF32() ? "f32" : elem.isF64() ? "f64" : elem.isBF16() ? "bf16" : elem.isF16() ? "f16" : "t";
}

/// How an operand stored as `src` is multiplied: "f32" (as it is, on FMAs), "bf16_f32"
/// (widened to f32 FMAs), "bf16_dot" (bf16 pairs on vdpbf16ps), "f32_dot" (rounded to
/// bf16 for vdpbf16ps: CompileOptions::matmul_precision medium).
std::string formName(Type src, const GemmBlocking &g) {
  if (g.amx)
    return typeName(src) + "_amx";
  if (g.dot)
    return typeName(src) + "_dot";
  return src == g.acc ? typeName(src) : typeName(src) + "_" + typeName(g.acc);
}

/// `v` (a scalar or vector of floats) converted to element type `to`: widened exactly, or
/// rounded to nearest even.
Value convertTo(KernelBuilder &kb, Value v, Type to) {
  Type from = getElementTypeOrSelf(v.getType());
  if (from == to)
    return v;
  Type t = to;
  if (auto vt = dyn_cast<VectorType>(v.getType()))
    t = VectorType::get(vt.getShape(), to);
  if (from.getIntOrFloatBitWidth() < to.getIntOrFloatBitWidth())
    return arith::ExtFOp::create(kb.builder(), t, v);
  return arith::TruncFOp::create(kb.builder(), t, v);
}

/// A's pair (i, 2 kp), (i, 2 kp + 1) read from A where it is, as vector<2xbf16>; `mask`
/// (vector<2xi1>) leaves the second off past an odd K.
Value readPair(KernelBuilder &kb, Value a, Value i, Value kp, Value mask = nullptr) {
  Type elem = cast<MemRefType>(a.getType()).getElementType();
  Value pair = kb.vload(kb.vec(elem, 2), a, {i, kb.mul(kp, 2)}, mask);
  return convertTo(kb, pair, BFloat16Type::get(kb.ctx()));
}

/// A private function of the module with an entry block, internal to LLVM (only this
/// module calls it) and kept a function there (inlined into each caller it would be
/// compiled once per matmul); or the existing one of that name.
std::pair<func::FuncOp, bool> privateFunction(ModuleOp module, StringRef name,
                                              ArrayRef<Type> args) {
  if (auto f = module.lookupSymbol<func::FuncOp>(name))
    return {f, false};
  OpBuilder ob = OpBuilder::atBlockEnd(module.getBody());
  auto f = func::FuncOp::create(ob, module.getLoc(), name, ob.getFunctionType(args, {}));
  f.setPrivate();
  f->setAttr("llvm.linkage",
             LLVM::LinkageAttr::get(ob.getContext(), LLVM::linkage::Linkage::Internal));
  f->setAttr("passthrough", ob.getArrayAttr({ob.getStringAttr("noinline")}));
  f.addEntryBlock();
  return {f, true};
}

/// The operands of the block function, by name.
struct BlockArgs {
  Value a, bp, c, i0, m, p0, p1, n, k, fill, fromC, bias;
  /// C's element type when it is narrower than the accumulators (bf16): each block is
  /// rounded to it as it is written, and C is never read (gemmFunction).
  Type narrowC;
  explicit BlockArgs(func::FuncOp f, Type acc) {
    auto x = f.getArguments();
    a = x[0], bp = x[1], c = x[2], i0 = x[3], m = x[4], p0 = x[5], p1 = x[6], n = x[7], k = x[8],
    fill = x[9], fromC = x[10];
    if (x.size() > 11)
      bias = x[11];
    Type ce = cast<MemRefType>(c.getType()).getElementType();
    if (ce != acc)
      narrowC = ce;
  }
  /// The value a vector of C's columns [col, col + lanes) starts from in the first K
  /// block without C: the bias there (lanes off `mask` not read; widened to C's type),
  /// else the fill.
  Value start(KernelBuilder &kb, const GemmBlocking &g, Value col, Value mask) const {
    if (!bias)
      return kb.splat(fill, kb.vec(g.acc, g.lanes));
    Type stored = cast<MemRefType>(bias.getType()).getElementType();
    return convertTo(kb, kb.vload(kb.vec(stored, g.lanes), bias, {col}, mask), g.acc);
  }
};

/// A prefetch into L1 of the line holding element `at` of `mem`, for writing it.
void prefetchForWrite(KernelBuilder &kb, Value mem, ValueRange at) {
  ImplicitLocOpBuilder &b = kb.builder();
  memref::PrefetchOp::create(b, mem, at, /*isWrite=*/true, /*localityHint=*/3,
                             /*isDataCache=*/true);
}

/// Where one register tile is: rows [row0, row0 + mr) of C (those past the task's last
/// row, `lastRow`, are clamped to it on reads and not written), columns [j0, j0 + nr) (those
/// from `cols` on are not read nor written), K rows [pc, pc + kcur) from packed offset bBase.
struct TilePlace {
  Value row0, lastRow, j0, cols, pc, kcur, bBase, filled;
  Value ap, aBase; ///< the packed rows of A, the tile's first at aBase
};

/// One mr x nr tile, `edge` when some of its rows or columns are outside C.
void emitTile(KernelBuilder &kb, const GemmBlocking &g, const BlockArgs &x, const TilePlace &t,
              bool edge) {
  Type elem = g.acc;
  VectorType vt = kb.vec(elem, g.lanes);
  auto row = [&](KernelBuilder &in, Value i) { return edge ? in.min(i, t.lastRow) : i; };
  auto mask = [&](KernelBuilder &in, Value i, int64_t c) -> Value {
    if (!edge)
      return nullptr;
    Value cols = in.firstLanes(in.sub(t.cols, in.idx(c * g.lanes)), g.lanes);
    Value rowOk = in.cmp(arith::CmpIPredicate::sle, i, t.lastRow);
    return arith::AndIOp::create(in.builder(), cols, in.splat(rowOk, cols.getType()));
  };
  GemmSpec s;
  s.elem = elem;
  s.lanes = g.lanes;
  s.nc = g.nv;
  s.mr = g.mr;
  s.dot = g.dot;
  // The dot tier steps over pairs of K (the packed block has an even number of columns).
  s.K = g.dot ? kb.ceilDiv(t.kcur, 2) : t.kcur;
  int64_t group = g.kGroup();
  VectorType bt = kb.vec(g.packed, g.lanes * group), at = kb.vec(g.packed, group);
  s.a = [&, group, at](KernelBuilder &in, Value i, Value kk) -> Value {
    Value off =
        in.add(in.add(t.aBase, in.mul(in.sub(i, t.row0), g.aRowStride())), in.mul(kk, group));
    return group == 1 ? in.load(t.ap, {off}) : in.vload(at, t.ap, {off});
  };
  s.b = [&, group, bt](KernelBuilder &in, Value kk, int64_t c) {
    Value off = in.add(t.bBase, in.mul(kk, g.nr() * group));
    return in.vload(bt, x.bp, {in.add(off, c * g.lanes * group)});
  };
  // The start of the first K block without C: the fill, or the bias row.
  SmallVector<Value> start;
  for (int64_t c = 0; c < g.nv; ++c) {
    Value cols = edge ? kb.firstLanes(kb.sub(t.cols, kb.idx(c * g.lanes)), g.lanes) : nullptr;
    start.push_back(x.start(kb, g, kb.add(t.j0, c * g.lanes), cols));
  }
  // Later K blocks add C at the end: the tile starts from zero and C's rows, prefetched
  // now, are loaded after the K loop, so that no FMA waits on them (starting from C
  // loaded here makes the first FMAs of every tile and K block wait on a cache miss; on
  // Zen 3 with 2 threads this way is 5-15% faster at 2048x512x2048, the same within the
  // noise at 8192x1536x384). The first K block starts from the fill or bias and stores
  // without reading C, whose lines the prefetch brings for the stores.
  for (int64_t r = 0; r < g.mr; ++r)
    prefetchForWrite(kb, x.c, {row(kb, kb.add(t.row0, r)), t.j0});
  Value zero = kb.fconst(vt, 0.0);
  s.init = [&](KernelBuilder &in, Value, int64_t c) -> Value {
    return arith::SelectOp::create(in.builder(), t.filled, start[c], zero);
  };
  s.store = [&](KernelBuilder &in, Value i, int64_t c, Value v) {
    SmallVector<Value> at = {row(in, i), in.add(t.j0, c * g.lanes)};
    Value old = in.vload(vt, x.c, at, mask(in, i, c));
    Value sum = arith::AddFOp::create(in.builder(), v, old);
    in.vstore(arith::SelectOp::create(in.builder(), t.filled, v, sum), x.c, at, mask(in, i, c));
  };
  emitGemmTile(kb, s, t.row0, g.mr);
}

/// Rows [i0, i0 + m) and columns [pc, pc + kcur) of A into `ap`, row i at i * kc, one
/// vector copy per row (the rows of the last tile past m copy A's last row: their
/// results are never stored), converted to the packed type; on the dot tier a zero past
/// an odd kcur completes the last pair. In the packed block a tile's broadcasts read mr
/// short rows a fixed distance apart, where A's own rows may be 16 KiB apart (K = 4096)
/// and fight for the same cache sets.
void emitPackA(KernelBuilder &kb, const GemmBlocking &g, const BlockArgs &x, Value ap, Value pc,
               Value kcur) {
  int64_t vl = g.lanes * g.kGroup();
  VectorType vt = kb.vec(cast<MemRefType>(x.a.getType()).getElementType(), vl);
  Value last = kb.sub(kb.add(x.i0, x.m), kb.idx(1));
  Value rows = kb.mul(kb.ceilDiv(x.m, g.mr), g.mr);
  Value main = kb.mul(kb.divu(kcur, kb.idx(vl)), vl);
  Value rest = kb.sub(kcur, main);
  Value odd = g.dot ? kb.cmp(arith::CmpIPredicate::ne, kb.remu(kcur, kb.idx(2)), kb.idx(0)) : nullptr;
  // AMX reads whole tiles of 32 columns: the last one's columns past kcur are zeros,
  // written first (the copy then overwrites those below kcur).
  Value tileTail = g.amx ? kb.mul(kb.divu(kcur, kb.idx(g.kAlign())), g.kAlign()) : nullptr;
  Value ragged = g.amx ? kb.cmp(arith::CmpIPredicate::ne, tileTail, kcur) : nullptr;
  kb.forLoop(kb.idx(0), rows, 1, [&](KernelBuilder &rl, Value i) {
    Value src = rl.min(rl.add(x.i0, i), last);
    Value base = rl.mul(i, g.aRowStride());
    if (ragged)
      rl.ifThen(ragged, [&](KernelBuilder &c) {
        c.vstore(c.fconst(c.vec(g.packed, g.kAlign()), 0.0), ap, {c.add(base, tileTail)});
      });
    rl.forLoop(rl.idx(0), main, vl, [&](KernelBuilder &c, Value kk) {
      Value v = convertTo(c, c.vload(vt, x.a, {src, c.add(pc, kk)}), g.packed);
      c.vstore(v, ap, {c.add(base, kk)});
    });
    rl.ifThen(rl.cmp(arith::CmpIPredicate::sgt, rest, rl.idx(0)), [&](KernelBuilder &c) {
      Value mask = c.firstLanes(rest, vl);
      Value v = convertTo(c, c.vload(vt, x.a, {src, c.add(pc, main)}, mask), g.packed);
      c.vstore(v, ap, {c.add(base, main)}, mask);
    });
    if (odd && !ragged) // on AMX, the ragged tile's zeros complete the pair
      rl.ifThen(odd, [&](KernelBuilder &c) {
        c.store(c.fconst(g.packed, 0.0), ap, {c.add(base, kcur)});
      });
  });
}

/// The block function's body: K blocks (A's rows packed for each), then panels, then
/// register tiles.
void emitBlockBody(KernelBuilder &kb, const GemmBlocking &g, const BlockArgs &x) {
  ImplicitLocOpBuilder &ib = kb.builder();
  // The packed rows of A: mc rounded up to whole tiles, kc columns, for one K block.
  Value ap = memref::AllocOp::create(ib, MemRefType::get({g.mc * g.aRowStride()}, g.packed),
                                     ib.getI64IntegerAttr(64));
  // Rows of B in a panel: K rounded up to whole groups (pairs on the dot tier).
  Value kRows = gemmPackedRows(kb, g, x.k);
  Value notFromC = arith::XOrIOp::create(ib, x.fromC, arith::ConstantOp::create(ib, ib.getBoolAttr(true)));
  Value lastRow = kb.sub(kb.add(x.i0, x.m), kb.idx(1));
  // At least one K block, so that with K = 0 the start value is still written.
  kb.forLoop(kb.idx(0), kb.max(x.k, kb.idx(1)), g.kc, [&](KernelBuilder &blk, Value pc) {
    TilePlace t;
    t.pc = pc;
    t.lastRow = lastRow;
    t.kcur = blk.min(blk.idx(g.kc), blk.sub(x.k, pc));
    t.filled = arith::AndIOp::create(blk.builder(), notFromC,
                                     blk.cmp(arith::CmpIPredicate::eq, pc, blk.idx(0)));
    t.ap = ap;
    emitPackA(blk, g, x, ap, pc, t.kcur);
    blk.forLoop(x.p0, x.p1, 1, [&](KernelBuilder &pl, Value p) {
      t.j0 = pl.mul(p, g.nr());
      t.cols = pl.sub(x.n, t.j0);
      t.bBase = pl.mul(pl.add(pl.mul(p, kRows), pc), g.nr());
      Value fullCols = pl.cmp(arith::CmpIPredicate::sge, t.cols, pl.idx(g.nr()));
      pl.forLoop(pl.idx(0), x.m, g.mr, [&](KernelBuilder &tl, Value t0) {
        t.row0 = tl.add(x.i0, t0);
        t.aBase = tl.mul(t0, g.aRowStride());
        Value fullRows = tl.cmp(arith::CmpIPredicate::sge, tl.sub(x.m, t0), tl.idx(g.mr));
        Value full = arith::AndIOp::create(tl.builder(), fullCols, fullRows);
        tl.ifThen(
            full, [&](KernelBuilder &in) { emitTile(in, g, x, t, false); },
            [&](KernelBuilder &in) { emitTile(in, g, x, t, true); });
      });
    });
  });
  memref::DeallocOp::create(ib, ap);
}

/// One half of a panel on AMX: the 32 x 32 tile of C that `init` holds (four accumulator
/// tiles, rows 16 apart by columns 16 apart: {top left, top right, bottom left, bottom
/// right}) plus A . B over the K block, carried through the loop over its `steps` tiles
/// of 32 K columns, each step two A tiles (packed A, rows kc apart) and two B tiles
/// (packed B, pairs of rows 2 * nr apart). Returns the accumulators.
SmallVector<Value> emitAmxTile(KernelBuilder &kb, const GemmBlocking &g, const BlockArgs &x,
                               Value ap, Value aBase, Value bBase, Value steps,
                               ValueRange init) {
  constexpr int64_t R = GemmBlocking::kAmxRows, K = GemmBlocking::kAmxK;
  auto operand = amx::TileType::get({R, K}, g.packed);
  Value aStride = kb.idx(g.aRowStride()), bStride = kb.idx(2 * g.nr());
  return emitAmxBlock(
      kb, steps, init,
      [&](KernelBuilder &in, int64_t r, Value s) {
        Value at = in.add(in.add(aBase, in.mul(s, K)), in.idx(r * R * g.aRowStride()));
        return amx::TileLoadOp::create(in.builder(), operand, ap, ValueRange{at}, aStride)
            .getResult();
      },
      [&](KernelBuilder &in, Value s, int64_t c) {
        Value at = in.add(in.add(bBase, in.mul(s, R * 2 * g.nr())), in.idx(c * 2 * R));
        return amx::TileLoadOp::create(in.builder(), operand, x.bp, ValueRange{at}, bStride)
            .getResult();
      });
}

/// The accumulators of emitAmxTile into C's rows [row0, row0 + rows) and columns
/// [c0, c0 + 32) (those from `cols` on not written), through `scratch` (32 x 32 f32):
/// C = start + acc in the first K block (`filled`: the fill or the bias row), else
/// C + acc.
void emitAmxStore(KernelBuilder &kb, const GemmBlocking &g, const BlockArgs &x, Value scratch,
                  ArrayRef<Value> acc, Value row0, Value rows, Value c0, Value cols, Value filled) {
  ImplicitLocOpBuilder &b = kb.builder();
  constexpr int64_t R = GemmBlocking::kAmxRows;
  Value stride = kb.idx(2 * R);
  for (int64_t t = 0; t < 4; ++t)
    amx::TileStoreOp::create(b, scratch, ValueRange{kb.idx((t / 2) * R * 2 * R + (t % 2) * R)},
                             acc[t], stride);
  VectorType vt = kb.vec(g.acc, g.lanes);
  SmallVector<Value> masks, start;
  for (int64_t c = 0; c < 2 * R / g.lanes; ++c) {
    masks.push_back(kb.firstLanes(kb.sub(cols, kb.idx(c * g.lanes)), g.lanes));
    start.push_back(x.start(kb, g, kb.add(c0, c * g.lanes), masks[c]));
  }
  kb.forLoop(kb.idx(0), rows, 1, [&](KernelBuilder &in, Value r) {
    for (int64_t c = 0; c < 2 * R / g.lanes; ++c) {
      SmallVector<Value> at = {in.add(row0, r), in.add(c0, c * g.lanes)};
      Value v = in.vload(vt, scratch, {in.add(in.mul(r, 2 * R), c * g.lanes)});
      if (x.narrowC) { // one K block, from the start: rounded as it is written
        Value sum = arith::AddFOp::create(in.builder(), start[c], v);
        in.vstore(convertTo(in, sum, x.narrowC), x.c, at, masks[c]);
        continue;
      }
      Value old = in.vload(vt, x.c, at, masks[c]);
      Value from = arith::SelectOp::create(in.builder(), filled, start[c], old);
      in.vstore(arith::AddFOp::create(in.builder(), from, v), x.c, at, masks[c]);
    }
  });
}

/// The four accumulator tiles of the 32 x 32 tile of C at (row0, c0), loaded from C
/// itself, or (`filled`) from the start row `start` (the bias row at c0, or the fill
/// splat) repeated by a stride of 0.
SmallVector<Value> emitAmxStart(KernelBuilder &kb, const GemmBlocking &g, const BlockArgs &x,
                                Value start, Value startAt, Value row0, Value c0, Value filled) {
  ImplicitLocOpBuilder &b = kb.builder();
  constexpr int64_t R = GemmBlocking::kAmxRows;
  auto accType = amx::TileType::get({R, R}, g.acc);
  SmallVector<Type> types(4, accType);
  auto ifOp = scf::IfOp::create(b, types, filled, /*withElseRegion=*/true);
  auto fill = [&](Block *block, bool fromStart) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(block);
    KernelBuilder in(b);
    SmallVector<Value> tiles;
    for (int64_t t = 0; t < 4; ++t) {
      int64_t r = (t / 2) * R, c = (t % 2) * R;
      tiles.push_back(fromStart ? amx::TileLoadOp::create(b, accType, start, ValueRange{in.add(startAt, c)}, in.idx(0))
                                : amx::TileLoadOp::create(b, accType, x.c, ValueRange{in.add(row0, r), in.add(c0, c)}));
    }
    scf::YieldOp::create(b, tiles);
  };
  fill(ifOp.thenBlock(), true);
  fill(ifOp.elseBlock(), false);
  return SmallVector<Value>(ifOp.getResults());
}

/// One half panel: a whole 32 x 32 tile of C starts from C or the start row and is
/// stored back as tiles; one at C's edges starts from zero and goes through `scratch`
/// (emitAmxStore), under masks.
void emitAmxHalf(KernelBuilder &kb, const GemmBlocking &g, const BlockArgs &x, Value ap,
                 Value aBase, Value bBase, Value steps, Value scratch, Value start, Value row0,
                 Value rows, Value c0, Value cols, Value filled) {
  constexpr int64_t R = GemmBlocking::kAmxRows;
  auto throughScratch = [&](KernelBuilder &in) {
    auto accType = amx::TileType::get({R, R}, g.acc);
    Value zero = amx::TileZeroOp::create(in.builder(), accType);
    SmallVector<Value> acc =
        emitAmxTile(in, g, x, ap, aBase, bBase, steps, {zero, zero, zero, zero});
    emitAmxStore(in, g, x, scratch, acc, row0, rows, c0, cols, filled);
  };
  // A narrow C (bf16) is never a tile's start nor a tile store's target: every tile goes
  // through the scratch, in L1, and is rounded as it is written.
  if (x.narrowC)
    return throughScratch(kb);
  Value whole = arith::AndIOp::create(kb.builder(), kb.cmp(arith::CmpIPredicate::eq, rows, kb.idx(g.mr)),
                                      kb.cmp(arith::CmpIPredicate::sge, cols, kb.idx(g.mr)));
  kb.ifThen(
      whole,
      [&](KernelBuilder &in) {
        // The bias row at c0, else the fill splat at 0.
        Value startAt = x.bias ? c0 : in.idx(0);
        SmallVector<Value> init = emitAmxStart(in, g, x, start, startAt, row0, c0, filled);
        SmallVector<Value> acc = emitAmxTile(in, g, x, ap, aBase, bBase, steps, init);
        for (int64_t t = 0; t < 4; ++t)
          amx::TileStoreOp::create(in.builder(), x.c,
                                   ValueRange{in.add(row0, (t / 2) * R), in.add(c0, (t % 2) * R)}, acc[t]);
      },
      throughScratch);
}

/// A bias narrower than C (a bf16 graph's) widened into a row of C's type, N long, for
/// the tiles' loads of stride 0: only the task's columns (its panels') are written.
Value widenedBias(KernelBuilder &kb, const GemmBlocking &g, const BlockArgs &x) {
  ImplicitLocOpBuilder &ib = kb.builder();
  Value row = memref::AllocOp::create(ib, MemRefType::get({ShapedType::kDynamic}, g.acc),
                                      ValueRange{x.n}, ValueRange{}, ib.getI64IntegerAttr(64));
  Value end = kb.min(kb.mul(x.p1, g.nr()), x.n);
  kb.forLoop(kb.mul(x.p0, g.nr()), end, g.lanes, [&](KernelBuilder &in, Value col) {
    Value mask = in.firstLanes(in.sub(end, col), g.lanes);
    in.vstore(x.start(in, g, col, mask), row, {col}, mask);
  });
  return row;
}

/// Write prefetches of the lines of C that the row tile at row0 (`rows` rows) writes in
/// the panel from column j0 (columns clamped to C's last), issued before its products: C
/// is written, never read, in the first K block, and a tile's rows are 32 lines a row
/// stride apart that no hardware prefetcher foresees, so without them every store missed
/// where C was not in cache (a layer's output, fresh after the layer's other work:
/// 4096 x 512 x 1376 bf16 on 1 thread with the caches flushed, 7.6 -> 6.8 ms).
void prefetchCTile(KernelBuilder &kb, const GemmBlocking &g, const BlockArgs &x, Value row0,
                   Value rows, Value j0) {
  Type stored = x.narrowC ? x.narrowC : g.acc;
  int64_t perLine = 64 / (stored.getIntOrFloatBitWidth() / 8);
  Value lastCol = kb.sub(x.n, kb.idx(1));
  SmallVector<Value> cols; // the first column of each line, the same on every row
  for (int64_t c = 0; c < g.nr(); c += perLine)
    cols.push_back(kb.min(kb.add(j0, c), lastCol));
  kb.forLoop(kb.idx(0), rows, 1, [&](KernelBuilder &in, Value r) {
    Value row = in.add(row0, r);
    for (Value col : cols)
      prefetchForWrite(in, x.c, {row, col});
  });
}

/// The block function's body on AMX: K blocks (A's rows packed for each, zeros to whole
/// tiles of K), then panels, then tiles of 32 rows, each half panel one emitAmxHalf.
void emitAmxBlockBody(KernelBuilder &kb, const GemmBlocking &g, const BlockArgs &x) {
  ImplicitLocOpBuilder &ib = kb.builder();
  Value ap = memref::AllocOp::create(ib, MemRefType::get({g.mc * g.aRowStride()}, g.packed),
                                     ib.getI64IntegerAttr(64));
  Value scratch = memref::AllocaOp::create(ib, MemRefType::get({g.mr * g.mr}, g.acc),
                                           ib.getI64IntegerAttr(64));
  // The start row of whole tiles: the bias (widened when narrower than C), else 32 copies
  // of the fill.
  Value start = x.bias, widened;
  if (start && !x.narrowC && cast<MemRefType>(start.getType()).getElementType() != g.acc)
    start = widened = widenedBias(kb, g, x);
  if (!start) {
    start = memref::AllocaOp::create(ib, MemRefType::get({g.mr}, g.acc), ib.getI64IntegerAttr(64));
    for (int64_t c = 0; c < g.mr; c += g.lanes)
      kb.vstore(kb.splat(x.fill, kb.vec(g.acc, g.lanes)), start, {kb.idx(c)});
  }
  Value kRows = gemmPackedRows(kb, g, x.k);
  Value notFromC = arith::XOrIOp::create(ib, x.fromC, arith::ConstantOp::create(ib, ib.getBoolAttr(true)));
  // At least one K block, so that with K = 0 the start value is still written.
  Value kEnd = kb.max(x.k, kb.idx(1));
  kb.forLoop(kb.idx(0), kEnd, g.kc, [&](KernelBuilder &blk, Value pc) {
    Value kcur = blk.min(blk.idx(g.kc), blk.sub(x.k, pc));
    Value steps = blk.ceilDiv(kcur, GemmBlocking::kAmxK);
    Value firstBlock = blk.cmp(arith::CmpIPredicate::eq, pc, blk.idx(0));
    Value filled = arith::AndIOp::create(blk.builder(), notFromC, firstBlock);
    emitPackA(blk, g, x, ap, pc, kcur);
    blk.forLoop(x.p0, x.p1, 1, [&](KernelBuilder &pl, Value p) {
      Value j0 = pl.mul(p, g.nr());
      Value bBase = pl.mul(pl.add(pl.mul(p, kRows), pc), g.nr());
      pl.forLoop(pl.idx(0), x.m, g.mr, [&](KernelBuilder &tl, Value t0) {
        Value rows = tl.min(tl.idx(g.mr), tl.sub(x.m, t0));
        prefetchCTile(tl, g, x, tl.add(x.i0, t0), rows, j0);
        for (int64_t half = 0; half < g.nr() / g.mr; ++half) {
          Value c0 = tl.add(j0, half * g.mr), cols = tl.sub(x.n, c0);
          tl.ifThen(tl.cmp(arith::CmpIPredicate::sgt, cols, tl.idx(0)), [&](KernelBuilder &in) {
            emitAmxHalf(in, g, x, ap, in.mul(t0, g.aRowStride()), in.add(bBase, half * 2 * g.mr),
                        steps, scratch, start, in.add(x.i0, t0), rows, c0, cols, filled);
          });
        }
      });
    });
  });
  memref::DeallocOp::create(ib, ap);
  if (widened)
    memref::DeallocOp::create(ib, widened);
}

} // namespace

namespace {

/// Panels [p0, p1) of B row by row, converted to the packed type.
void emitPackRows(KernelBuilder &kb, const GemmBlocking &g, Value b, Value bp, Value p0, Value p1,
                  Value n, Value k) {
  VectorType vt = kb.vec(cast<MemRefType>(b.getType()).getElementType(), g.lanes);
  kb.forLoop(p0, p1, 1, [&](KernelBuilder &pl, Value p) {
    Value j0 = pl.mul(p, g.nr()), cols = pl.sub(n, j0);
    Value base = pl.mul(pl.mul(p, k), g.nr());
    auto copy = [&](KernelBuilder &in, bool masked) {
      in.forLoop(in.idx(0), k, 1, [&](KernelBuilder &r, Value kk) {
        Value to = r.add(base, r.mul(kk, g.nr()));
        for (int64_t c = 0; c < g.nv; ++c) {
          Value mask = masked ? r.firstLanes(r.sub(cols, r.idx(c * g.lanes)), g.lanes) : nullptr;
          Value v = convertTo(r, r.vload(vt, b, {kk, r.add(j0, c * g.lanes)}, mask), g.packed);
          r.vstore(v, bp, {r.add(to, c * g.lanes)});
        }
      });
    };
    pl.ifThen(
        pl.cmp(arith::CmpIPredicate::sge, cols, pl.idx(g.nr())),
        [&](KernelBuilder &in) { copy(in, false); }, [&](KernelBuilder &in) { copy(in, true); });
  });
}

/// Panels [p0, p1) of B in pairs of rows for the dot and AMX tiers: pair kp of panel p at
/// (p * k' + 2 kp) * nr, rows 2 kp and 2 kp + 1 interleaved column by column (zero rows
/// past k up to k', zero columns past n), rounded to bf16.
void emitPackPairs(KernelBuilder &kb, const GemmBlocking &g, Value b, Value bp, Value p0, Value p1,
                   Value n, Value k) {
  VectorType vt = kb.vec(cast<MemRefType>(b.getType()).getElementType(), g.lanes);
  Value rows = gemmPackedRows(kb, g, k), lastRow = kb.sub(k, kb.idx(1));
  kb.forLoop(p0, p1, 1, [&](KernelBuilder &pl, Value p) {
    Value j0 = pl.mul(p, g.nr()), cols = pl.sub(n, j0);
    Value base = pl.mul(pl.mul(p, rows), g.nr());
    pl.forLoop(pl.idx(0), pl.divu(rows, pl.idx(2)), 1, [&](KernelBuilder &r, Value kp) {
      Value r0 = r.mul(kp, 2), r1 = r.add(r0, 1);
      // On AMX the rows up to k' past k are zeros too (elsewhere r0 < k always).
      Value first = g.amx ? r.cmp(arith::CmpIPredicate::slt, r0, k) : nullptr;
      Value second = r.cmp(arith::CmpIPredicate::slt, r1, k);
      Value to = r.add(base, r.mul(r0, g.nr()));
      for (int64_t c = 0; c < g.nv; ++c) {
        Value mask = r.firstLanes(r.sub(cols, r.idx(c * g.lanes)), g.lanes);
        Value mask0 = first ? arith::AndIOp::create(r.builder(), mask, r.splat(first, mask.getType()))
                            : mask;
        Value mask1 = arith::AndIOp::create(r.builder(), mask, r.splat(second, mask.getType()));
        Value col = r.add(j0, c * g.lanes);
        Value v0 = convertTo(r, r.vload(vt, b, {r.min(r0, lastRow), col}, mask0), g.packed);
        Value v1 = convertTo(r, r.vload(vt, b, {r.min(r1, lastRow), col}, mask1), g.packed);
        Value both = vector::InterleaveOp::create(r.builder(), v0, v1);
        r.vstore(both, bp, {r.add(to, c * 2 * g.lanes)});
      }
    });
  });
}

} // namespace

func::FuncOp gemmPackBFunction(ModuleOp module, Type bElem, const GemmBlocking &g) {
  Type index = IndexType::get(module.getContext());
  std::string name = "qkv_gemm_pack_b_" + formName(bElem, g) + "_" + std::to_string(g.nr());
  auto [f, fresh] = privateFunction(
      module, name, {gemmViewType(bElem), gemmPackedType(g.packed), index, index, index, index});
  if (!fresh)
    return f;
  ImplicitLocOpBuilder ib(module.getLoc(), module.getContext());
  ib.setInsertionPointToStart(&f.getBody().front());
  KernelBuilder kb(ib);
  auto a = f.getArguments();
  if (g.dot)
    emitPackPairs(kb, g, a[0], a[1], a[2], a[3], a[4], a[5]);
  else
    emitPackRows(kb, g, a[0], a[1], a[2], a[3], a[4], a[5]);
  func::ReturnOp::create(ib);
  return f;
}

namespace {

/// The skinny function's body: for each panel, one tile of exactly m (<= mr) rows over
/// the whole K, reading A where it is and the panel as one stream.
void emitSkinnyBody(KernelBuilder &kb, const GemmBlocking &g, const BlockArgs &x) {
  Type elem = g.acc;
  VectorType vt = kb.vec(elem, g.lanes);
  Value notFromC = arith::XOrIOp::create(kb.builder(), x.fromC,
                                         arith::ConstantOp::create(kb.builder(), kb.builder().getBoolAttr(true)));
  int64_t group = g.kGroup();
  VectorType bt = kb.vec(g.packed, g.lanes * group);
  // The dot tier: whole pairs in the loop, an odd K's last column after it.
  Value kRows = gemmPackedRows(kb, g, x.k);
  Value steps = group == 1 ? x.k : kb.divu(x.k, kb.idx(2));
  Value odd = group == 1 ? nullptr : kb.cmp(arith::CmpIPredicate::ne, kb.remu(x.k, kb.idx(2)), kb.idx(0));
  Value tailMask = group == 1 ? nullptr : kb.firstLanes(kb.idx(1), 2);
  kb.forLoop(x.p0, x.p1, 1, [&](KernelBuilder &pl, Value p) {
    Value j0 = pl.mul(p, g.nr()), cols = pl.sub(x.n, j0);
    Value base = pl.mul(pl.mul(p, kRows), g.nr());
    SmallVector<Value> masks, start;
    for (int64_t c = 0; c < g.nv; ++c) {
      masks.push_back(pl.firstLanes(pl.sub(cols, pl.idx(c * g.lanes)), g.lanes));
      start.push_back(x.start(pl, g, pl.add(j0, c * g.lanes), masks[c]));
    }
    for (int64_t rows = 1; rows <= g.skinnyMr; ++rows) {
      pl.ifThen(pl.cmp(arith::CmpIPredicate::eq, x.m, pl.idx(rows)), [&](KernelBuilder &in) {
        GemmSpec s;
        s.elem = elem;
        s.lanes = g.lanes;
        s.nc = g.nv;
        s.mr = rows;
        s.dot = g.dot;
        s.K = steps;
        if (g.dot) {
          s.a = [&](KernelBuilder &b, Value i, Value kp) { return readPair(b, x.a, i, kp); };
          s.tail = odd;
          s.aTail = [&](KernelBuilder &b, Value i) { return readPair(b, x.a, i, steps, tailMask); };
        } else {
          s.a = [&](KernelBuilder &b, Value i, Value kk) {
            return convertTo(b, b.load(x.a, {i, kk}), g.packed);
          };
        }
        s.b = [&](KernelBuilder &b, Value kk, int64_t c) {
          Value off = b.add(base, b.mul(kk, g.nr() * group));
          return b.vload(bt, x.bp, {b.add(off, c * g.lanes * group)});
        };
        s.init = [&](KernelBuilder &b, Value i, int64_t c) -> Value {
          if (x.narrowC)
            return start[c];
          Value v = b.vload(vt, x.c, {i, b.add(j0, c * g.lanes)}, masks[c]);
          return arith::SelectOp::create(b.builder(), notFromC, start[c], v);
        };
        s.store = [&](KernelBuilder &b, Value i, int64_t c, Value v) {
          if (x.narrowC)
            v = convertTo(b, v, x.narrowC);
          b.vstore(v, x.c, {i, b.add(j0, c * g.lanes)}, masks[c]);
        };
        emitGemmTile(in, s, x.i0, rows);
      });
    }
  });
}

func::FuncOp gemmFunction(ModuleOp module, Type aElem, const GemmBlocking &g, Type bias, Type c,
                          bool skinny) {
  Type index = IndexType::get(module.getContext());
  if (!c)
    c = g.acc;
  assert((c == g.acc || g.amx) && "a narrow C only on AMX");
  std::string name = std::string(skinny ? "qkv_gemm_skinny_" : "qkv_gemm_block_") +
                     formName(aElem, g) + "_" + std::to_string(skinny ? g.skinnyMr : g.mr) + "x" +
                     std::to_string(g.nr()) + (skinny ? "" : "_k" + std::to_string(g.kc)) +
                     (bias ? "_bias" : "") + (bias && bias != g.acc ? "_" + typeName(bias) : "") +
                     (c != g.acc ? "_c_" + typeName(c) : "");
  // A, packed B, C; i0, m, p0, p1, n, k; fill, fromC.
  SmallVector<Type> args = {gemmViewType(aElem), gemmPackedType(g.packed), gemmViewType(c)};
  args.append(6, index);
  args.append({g.acc, IntegerType::get(module.getContext(), 1)});
  if (bias)
    args.push_back(gemmPackedType(bias));
  auto [f, fresh] = privateFunction(module, name, args);
  if (!fresh)
    return f;
  ImplicitLocOpBuilder ib(module.getLoc(), module.getContext());
  ib.setInsertionPointToStart(&f.getBody().front());
  KernelBuilder kb(ib);
  BlockArgs x(f, g.acc);
  if (skinny)
    emitSkinnyBody(kb, g, x);
  else if (g.amx)
    emitAmxBlockBody(kb, g, x);
  else
    emitBlockBody(kb, g, x);
  func::ReturnOp::create(ib);
  return f;
}

} // namespace

func::FuncOp gemmBlockFunction(ModuleOp module, Type aElem, const GemmBlocking &g, Type bias,
                               Type c) {
  return gemmFunction(module, aElem, g, bias, c, false);
}

func::FuncOp gemmSkinnyFunction(ModuleOp module, Type aElem, const GemmBlocking &g, Type bias,
                                Type c) {
  return gemmFunction(module, aElem, g, bias, c, true);
}

} // namespace qkv::ir
