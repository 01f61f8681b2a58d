#include "TileClassifier.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/SmallPtrSet.h"

#include "qkv/compiler/ir/QkvDialect.h"

using namespace mlir;
using arith::CmpIPredicate;

namespace qkv::ir {

namespace {

/// Interval arithmetic over the ops a mask expression is made of. Index intervals may be
/// unknown (no entry); i1 intervals are always known ("unknown" is [false, true]).
class IntervalEval {
public:
  /// `guarded`: the mask checks its loads (a checked compile's qkv.check), so the
  /// classifier must not read outside a tensor nor skip a tile where the mask would.
  IntervalEval(KernelBuilder &kb, bool guarded) : kb_(kb), b_(kb.builder()), guarded_(guarded) {}

  /// An i1: no interval's ends wrapped, checked from the operands' ends (sums and
  /// differences of i64 values within +-2^62, products within +-2^31, a cast to a
  /// narrower integer of values that fit). The ends of a sum or a product that passes
  /// i64 wrap where the values between them need not: neither a tile's class nor a proof
  /// that a check passes may rest on them.
  Value inRange() { return inRange_ ? inRange_ : boolean(true); }

  void bind(Value v, Interval i) { map_[v] = i; }
  void bindCapture(Value arg, Value mem, std::optional<RangeTable> table) {
    captures_[arg] = mem;
    if (table)
      tables_[arg] = *table;
  }
  std::optional<Interval> get(Value v) {
    auto it = map_.find(v);
    if (it != map_.end())
      return it->second;
    if (v.getType().isInteger(1))
      return Interval{boolean(false), boolean(true)};
    return std::nullopt;
  }

  void eval(Operation &op) {
    if (auto r = evalOp(op))
      map_[op.getResult(0)] = *r;
  }

private:
  Value boolean(bool v) { return arith::ConstantOp::create(b_, b_.getBoolAttr(v)); }
  Value andi(Value a, Value c) { return arith::AndIOp::create(b_, a, c); }
  /// An integer constant of the type of `like` (index, i32 or i64).
  Value cst(Value like, int64_t v) {
    return arith::ConstantOp::create(b_, b_.getIntegerAttr(like.getType(), v));
  }
  // Folding as we go keeps a mask the analysis cannot follow down to constants.
  Value notI1(Value v) { return b_.createOrFold<arith::XOrIOp>(v, boolean(true)); }
  Value andI1(Value a, Value c) { return b_.createOrFold<arith::AndIOp>(a, c); }
  Value orI1(Value a, Value c) { return b_.createOrFold<arith::OrIOp>(a, c); }
  Value cmp(CmpIPredicate p, Value a, Value c) { return b_.createOrFold<arith::CmpIOp>(p, a, c); }
  Value sel(Value c, Value a, Value d) { return b_.createOrFold<arith::SelectOp>(c, a, d); }

  static std::optional<int64_t> constantOf(Value v) {
    APInt c;
    if (matchPattern(v, m_ConstantInt(&c)))
      return c.getSExtValue();
    return std::nullopt;
  }

  std::optional<Interval> evalOp(Operation &op) {
    if (op.getNumResults() != 1)
      return std::nullopt;
    if (auto c = dyn_cast<arith::ConstantOp>(op)) {
      if (!c.getType().isIntOrIndex())
        return std::nullopt;
      Value v = b_.clone(op)->getResult(0);
      return Interval{v, v};
    }
    if (isa<arith::IndexCastOp, arith::ExtSIOp>(op)) {
      auto in = get(op.getOperand(0));
      if (!in)
        return std::nullopt;
      Type t = op.getResult(0).getType();
      if (!t.isIndex() && t.getIntOrFloatBitWidth() < 64)
        requireWithin(*in, false, t.getIntOrFloatBitWidth());
      auto cast = [&](Value v) -> Value {
        if (isa<arith::IndexCastOp>(op))
          return arith::IndexCastOp::create(b_, t, v);
        return arith::ExtSIOp::create(b_, t, v);
      };
      return Interval{cast(in->lo), cast(in->hi)};
    }
    if (isa<arith::CmpIOp>(op))
      return evalCmp(cast<arith::CmpIOp>(op));
    if (isa<arith::AndIOp, arith::OrIOp, arith::XOrIOp>(op) &&
        op.getResult(0).getType().isInteger(1))
      return evalLogic(op);
    if (auto s = dyn_cast<arith::SelectOp>(op))
      return evalSelect(s);
    if (auto ex = dyn_cast<tensor::ExtractOp>(op))
      return evalLoad(ex);
    if (auto dim = dyn_cast<tensor::DimOp>(op))
      return evalDim(dim);
    return evalArith(op);
  }

  /// A load at indices that are points (the same value at both ends) is made once for the
  /// tile: its value is a point too. At a range along the last dim (points elsewhere), the
  /// values lie between the range's min and max, which the capture's table gives.
  std::optional<Interval> evalLoad(tensor::ExtractOp ex) {
    auto mem = captures_.find(ex.getTensor());
    if (mem == captures_.end() || !ex.getType().isIntOrIndex())
      return std::nullopt;
    SmallVector<Interval> idx;
    for (Value i : ex.getIndices()) {
      auto in = get(i);
      if (!in)
        return std::nullopt;
      idx.push_back(*in);
    }
    auto point = [](const Interval &i) { return i.lo == i.hi; };
    if (llvm::all_of(idx, point)) {
      SmallVector<Value> at;
      Value inside = boolean(true);
      for (auto [d, i] : llvm::enumerate(idx)) {
        at.push_back(i.lo);
        if (guarded_)
          inside = andi(inside, within(i.lo, memref::DimOp::create(b_, mem->second, d)));
      }
      if (!guarded_) { // the mask reads the same element at every position of the tile
        Value v = kb_.load(mem->second, at);
        return Interval{v, v};
      }
      return anyIfOutside(inside, loadIf(inside, mem->second, at));
    }
    auto table = tables_.find(ex.getTensor());
    if (table == tables_.end() || !llvm::all_of(ArrayRef(idx).drop_back(), point))
      return std::nullopt;
    return rangeOf(table->second, idx.size() == 2 ? idx[0].lo : kb_.idx(0), idx.back());
  }

  Value within(Value i, Value n) {
    return andi(kb_.cmp(arith::CmpIPredicate::sge, i, kb_.idx(0)),
                    kb_.cmp(arith::CmpIPredicate::slt, i, n));
  }

  /// mem[at] when `inside`, else 0 (and nothing read).
  Value loadIf(Value inside, Value mem, ArrayRef<Value> at) {
    Type t = cast<MemRefType>(mem.getType()).getElementType();
    auto op = scf::IfOp::create(b_, TypeRange{t}, inside, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPointToStart(op.thenBlock());
    scf::YieldOp::create(b_, ValueRange{memref::LoadOp::create(b_, mem, at).getResult()});
    b_.setInsertionPointToStart(op.elseBlock());
    scf::YieldOp::create(b_, ValueRange{arith::ConstantOp::create(b_, b_.getZeroAttr(t)).getResult()});
    return op.getResult(0);
  }

  /// [lo, hi], or every value of the type where a load is out of bounds: nothing is
  /// known of what the mask reads there, so the tile is partial and the mask itself meets
  /// the load (a checked kernel reports it; an unchecked one reads what is there).
  Interval anyIfOutside(Value inside, Value lo, Value hi) {
    auto t = cast<IntegerType>(lo.getType());
    Value min = arith::ConstantOp::create(
        b_, b_.getIntegerAttr(t, llvm::APInt::getSignedMinValue(t.getWidth())));
    Value max = arith::ConstantOp::create(
        b_, b_.getIntegerAttr(t, llvm::APInt::getSignedMaxValue(t.getWidth())));
    return Interval{arith::SelectOp::create(b_, inside, lo, min),
                    arith::SelectOp::create(b_, inside, hi, max)};
  }
  Interval anyIfOutside(Value inside, Value v) { return anyIfOutside(inside, v, v); }

  /// The min and max of row `row` over [at.lo, at.hi] from the sparse tables: the runs
  /// of 2^k from lo and to hi, k = floor(log2(length)), cover it. The tables are read at
  /// clamped positions, never outside them; where the row or the positions leave the
  /// tensor, a guarded mask's range is every value (anyIfOutside), an unguarded one's
  /// that of the clamped positions.
  Interval rangeOf(const RangeTable &t, Value row, Interval at) {
    Value zero = kb_.idx(0), one = kb_.idx(1);
    Value inside = andi(within(row, t.rows), andi(within(at.lo, t.n), within(at.hi, t.n)));
    row = kb_.min(kb_.max(row, zero), kb_.max(kb_.sub(t.rows, one), zero));
    Value last = kb_.max(kb_.sub(t.n, one), zero);
    Value lo = kb_.min(kb_.max(at.lo, zero), last);
    Value hi = kb_.max(kb_.min(at.hi, last), lo);
    Value len = arith::IndexCastOp::create(b_, b_.getI64Type(), kb_.add(kb_.sub(hi, lo), one));
    Value clz = math::CountLeadingZerosOp::create(b_, len);
    Value k = kb_.sub(kb_.idx(63), arith::IndexCastOp::create(b_, b_.getIndexType(), clz));
    Value from = kb_.add(kb_.sub(hi, arith::ShLIOp::create(b_, one, k)), one);
    Value mn = kb_.min(kb_.load(t.min, {k, row, lo}), kb_.load(t.min, {k, row, from}));
    Value mx = kb_.max(kb_.load(t.max, {k, row, lo}), kb_.load(t.max, {k, row, from}));
    return guarded_ ? anyIfOutside(inside, mn, mx) : Interval{mn, mx};
  }

  /// A capture's extent (a checked compile's bounds) is the same for the whole tile.
  std::optional<Interval> evalDim(tensor::DimOp dim) {
    auto mem = captures_.find(dim.getSource());
    auto axis = get(dim.getIndex());
    if (mem == captures_.end() || !axis || axis->lo != axis->hi)
      return std::nullopt;
    Value v = memref::DimOp::create(b_, mem->second, axis->lo);
    return Interval{v, v};
  }

  std::optional<Interval> evalArith(Operation &op) {
    SmallVector<Interval> in;
    for (Value v : op.getOperands()) {
      auto i = get(v);
      if (!i)
        return std::nullopt;
      in.push_back(*i);
    }
    if (isa<arith::AddIOp>(op))
      return Interval{kb_.add(in[0].lo, in[1].lo), kb_.add(in[0].hi, in[1].hi)};
    if (isa<arith::SubIOp>(op))
      return Interval{kb_.sub(in[0].lo, in[1].hi), kb_.sub(in[0].hi, in[1].lo)};
    if (isa<arith::MinSIOp>(op))
      return Interval{kb_.min(in[0].lo, in[1].lo), kb_.min(in[0].hi, in[1].hi)};
    if (isa<arith::MaxSIOp>(op))
      return Interval{kb_.max(in[0].lo, in[1].lo), kb_.max(in[0].hi, in[1].hi)};
    if (!op.getResult(0).getType().isInteger(1))
      requireWithin(in, isa<arith::MulIOp>(op));
    if (isa<arith::MulIOp>(op))
      return mulInterval(in[0], in[1]);
    if (isa<arith::DivSIOp, arith::FloorDivSIOp>(op))
      return divInterval(op, in[0], constantOf(op.getOperand(1)));
    if (isa<arith::RemSIOp>(op))
      return remInterval(in[0], constantOf(op.getOperand(1)));
    if (isa<math::AbsIOp>(op)) {
      Value zero = cst(in[0].lo, 0);
      Value negLo = kb_.sub(zero, in[0].lo), negHi = kb_.sub(zero, in[0].hi);
      Value nonNeg = cmp(CmpIPredicate::sge, in[0].lo, zero);
      Value nonPos = cmp(CmpIPredicate::sle, in[0].hi, zero);
      Value lo = sel(nonNeg, in[0].lo, sel(nonPos, negHi, zero));
      Value hi = sel(nonNeg, in[0].hi, sel(nonPos, negLo, kb_.max(negLo, in[0].hi)));
      return Interval{lo, hi};
    }
    return std::nullopt;
  }

  /// inRange() &= every interval of `in` lies where a sum of two (`product`: a product
  /// of two) such values cannot wrap in `width` bits (default: the values' own width):
  /// within +-2^(width - 2) (+-2^(width / 2 - 1)).
  void requireWithin(ArrayRef<Interval> in, bool product, int width = 0) {
    for (const Interval &i : in) {
      Type t = i.lo.getType();
      int w = width ? width : t.isIndex() ? 64 : static_cast<int>(t.getIntOrFloatBitWidth());
      int bits = product ? w / 2 - 1 : w - 2;
      Value limit = cst(i.lo, int64_t{1} << bits), neg = cst(i.lo, -(int64_t{1} << bits));
      Value within =
          andI1(cmp(CmpIPredicate::sge, i.lo, neg), cmp(CmpIPredicate::sle, i.hi, limit));
      inRange_ = inRange_ ? andI1(inRange_, within) : within;
    }
  }

  Interval mulInterval(Interval a, Interval c) {
    Value p[4] = {kb_.mul(a.lo, c.lo), kb_.mul(a.lo, c.hi), kb_.mul(a.hi, c.lo),
                  kb_.mul(a.hi, c.hi)};
    return Interval{kb_.min(kb_.min(p[0], p[1]), kb_.min(p[2], p[3])),
                    kb_.max(kb_.max(p[0], p[1]), kb_.max(p[2], p[3]))};
  }

  /// Division by a constant is monotone (non-decreasing for a positive divisor).
  std::optional<Interval> divInterval(Operation &op, Interval a, std::optional<int64_t> c) {
    if (!c || *c == 0)
      return std::nullopt;
    auto div = [&](Value v) -> Value {
      Value d = cst(v, *c);
      if (isa<arith::DivSIOp>(op))
        return arith::DivSIOp::create(b_, v, d);
      return arith::FloorDivSIOp::create(b_, v, d);
    };
    Value lo = div(a.lo), hi = div(a.hi);
    return *c > 0 ? Interval{lo, hi} : Interval{hi, lo};
  }

  /// x % c for c > 0: exact when the interval lies within one period of non-negative
  /// values, otherwise the range of all remainders of that sign.
  std::optional<Interval> remInterval(Interval a, std::optional<int64_t> c) {
    if (!c || *c <= 0)
      return std::nullopt;
    Value cv = cst(a.lo, *c), zero = cst(a.lo, 0);
    Value nonNeg = cmp(CmpIPredicate::sge, a.lo, zero);
    Value samePeriod = andI1(nonNeg, cmp(CmpIPredicate::eq, arith::DivSIOp::create(b_, a.lo, cv),
                                         arith::DivSIOp::create(b_, a.hi, cv)));
    Value lo =
        sel(samePeriod, arith::RemSIOp::create(b_, a.lo, cv), sel(nonNeg, zero, cst(a.lo, 1 - *c)));
    Value negative = cmp(CmpIPredicate::slt, a.hi, zero);
    Value hi = sel(samePeriod, arith::RemSIOp::create(b_, a.hi, cv),
                   sel(negative, zero, cst(a.lo, *c - 1)));
    return Interval{lo, hi};
  }

  std::optional<Interval> evalCmp(arith::CmpIOp op) {
    auto a = get(op.getLhs()), c = get(op.getRhs());
    if (!a || !c)
      return Interval{boolean(false), boolean(true)};
    // x >= y certainly when x.lo >= y.hi, possibly when x.hi >= y.lo (likewise for >).
    auto ge = [&](Interval x, Interval y, bool strict) {
      CmpIPredicate p = strict ? CmpIPredicate::sgt : CmpIPredicate::sge;
      return Interval{cmp(p, x.lo, y.hi), cmp(p, x.hi, y.lo)};
    };
    auto eq = [&]() {
      Value points =
          andI1(cmp(CmpIPredicate::eq, a->lo, a->hi), cmp(CmpIPredicate::eq, c->lo, c->hi));
      Value lo = andI1(points, cmp(CmpIPredicate::eq, a->lo, c->lo));
      Value hi =
          andI1(cmp(CmpIPredicate::sge, a->hi, c->lo), cmp(CmpIPredicate::sge, c->hi, a->lo));
      return Interval{lo, hi};
    };
    switch (op.getPredicate()) {
    case CmpIPredicate::sge: return ge(*a, *c, false);
    case CmpIPredicate::sgt: return ge(*a, *c, true);
    case CmpIPredicate::sle: return ge(*c, *a, false);
    case CmpIPredicate::slt: return ge(*c, *a, true);
    case CmpIPredicate::eq: return eq();
    case CmpIPredicate::ne: {
      Interval e = eq();
      return Interval{notI1(e.hi), notI1(e.lo)};
    }
    default: return Interval{boolean(false), boolean(true)};
    }
  }

  std::optional<Interval> evalLogic(Operation &op) {
    Interval a = *get(op.getOperand(0)), c = *get(op.getOperand(1));
    if (isa<arith::AndIOp>(op))
      return Interval{andI1(a.lo, c.lo), andI1(a.hi, c.hi)};
    if (isa<arith::OrIOp>(op))
      return Interval{orI1(a.lo, c.lo), orI1(a.hi, c.hi)};
    // xor: certainly true when one is certainly true and the other certainly false;
    // possibly true unless both are certainly equal.
    Value lo = orI1(andI1(a.lo, notI1(c.hi)), andI1(notI1(a.hi), c.lo));
    Value same = orI1(andI1(a.lo, c.lo), andI1(notI1(a.hi), notI1(c.hi)));
    return Interval{lo, notI1(same)};
  }

  std::optional<Interval> evalSelect(arith::SelectOp op) {
    Interval c = *get(op.getCondition());
    auto x = get(op.getTrueValue()), y = get(op.getFalseValue());
    if (!x || !y)
      return std::nullopt;
    if (op.getType().isInteger(1)) {
      Value lo = orI1(orI1(andI1(c.lo, x->lo), andI1(notI1(c.hi), y->lo)), andI1(x->lo, y->lo));
      Value hi = orI1(andI1(c.hi, x->hi), andI1(notI1(c.lo), y->hi));
      return Interval{lo, hi};
    }
    // Certainly true: x; certainly false: y; otherwise their union.
    Value lo = sel(c.lo, x->lo, sel(c.hi, kb_.min(x->lo, y->lo), y->lo));
    Value hi = sel(c.lo, x->hi, sel(c.hi, kb_.max(x->hi, y->hi), y->hi));
    return Interval{lo, hi};
  }

  KernelBuilder &kb_;
  ImplicitLocOpBuilder &b_;
  llvm::DenseMap<Value, Interval> map_;
  llvm::DenseMap<Value, Value> captures_;
  llvm::DenseMap<Value, RangeTable> tables_;
  bool guarded_;
  Value inRange_;
};

bool isConstant(Value v, bool expected) {
  APInt c;
  return matchPattern(v, m_ConstantInt(&c)) && c.getBoolValue() == expected;
}

/// The sparse tables of `mem` ((rows, n) or (n)): level 0 its values, level k the min
/// (max) of levels k-1 at i and i + 2^(k-1). A row of n = 0 gets one 0.
RangeTable buildTable(KernelBuilder &kb, Value mem) {
  ImplicitLocOpBuilder &b = kb.builder();
  auto mt = cast<MemRefType>(mem.getType());
  int64_t rank = mt.getRank();
  Value one = kb.idx(1);
  RangeTable t;
  t.n = memref::DimOp::create(b, mem, rank - 1);
  Value rows = rank == 2 ? Value(memref::DimOp::create(b, mem, 0)) : one;
  t.rows = rows;
  Value n1 = kb.max(t.n, one);
  Value n64 = arith::IndexCastOp::create(b, b.getI64Type(), n1);
  Value levels = kb.sub(kb.idx(64), arith::IndexCastOp::create(
                                        b, b.getIndexType(), math::CountLeadingZerosOp::create(b, n64)));
  int64_t d = ShapedType::kDynamic;
  auto type = MemRefType::get({d, d, d}, mt.getElementType());
  Value rows1 = kb.max(rows, one); // a row to read (never used) when the tensor has none
  t.min = memref::AllocOp::create(b, type, ValueRange{levels, rows1, n1});
  t.max = memref::AllocOp::create(b, type, ValueRange{levels, rows1, n1});
  Value zero = kb.idx(0);
  kb.forLoop(zero, rows, 1, [&](KernelBuilder &rl, Value r) {
    Value z = arith::ConstantOp::create(rl.builder(), rl.builder().getIntegerAttr(mt.getElementType(), 0));
    memref::StoreOp::create(rl.builder(), z, t.min, ValueRange{zero, r, zero});
    memref::StoreOp::create(rl.builder(), z, t.max, ValueRange{zero, r, zero});
    rl.forLoop(zero, t.n, 1, [&](KernelBuilder &il, Value i) {
      Value v = il.load(mem, rank == 2 ? SmallVector<Value>{r, i} : SmallVector<Value>{i});
      memref::StoreOp::create(il.builder(), v, t.min, ValueRange{zero, r, i});
      memref::StoreOp::create(il.builder(), v, t.max, ValueRange{zero, r, i});
    });
  });
  kb.forLoop(one, levels, 1, [&](KernelBuilder &kl, Value k) {
    Value half = arith::ShLIOp::create(kl.builder(), one, kl.sub(k, one));
    Value prev = kl.sub(k, one);
    Value count = kl.add(kl.sub(n1, kl.add(half, half)), one);
    kl.forLoop(zero, rows, 1, [&](KernelBuilder &rl, Value r) {
      rl.forLoop(zero, count, 1, [&](KernelBuilder &il, Value i) {
        Value j = il.add(i, half);
        Value mn = il.min(il.load(t.min, {prev, r, i}), il.load(t.min, {prev, r, j}));
        Value mx = il.max(il.load(t.max, {prev, r, i}), il.load(t.max, {prev, r, j}));
        memref::StoreOp::create(il.builder(), mn, t.min, ValueRange{k, r, i});
        memref::StoreOp::create(il.builder(), mx, t.max, ValueRange{k, r, i});
      });
    });
  });
  return t;
}

} // namespace

llvm::SmallDenseSet<unsigned> rangedCaptures(Region &mask) {
  Block &block = mask.front();
  DenseSet<Value> moving = {block.getArgument(2), block.getArgument(3)};
  llvm::SmallDenseSet<unsigned> out;
  for (Operation &op : block.without_terminator()) {
    if (llvm::any_of(op.getOperands(), [&](Value v) { return moving.contains(v); }))
      for (Value r : op.getResults())
        moving.insert(r);
    auto ex = dyn_cast<tensor::ExtractOp>(op);
    auto arg = ex ? dyn_cast<BlockArgument>(ex.getTensor()) : BlockArgument();
    if (!arg || arg.getOwner() != &block || arg.getArgNumber() < 6 ||
        !ex.getType().isIntOrIndex() || ex.getIndices().empty() || ex.getIndices().size() > 2)
      continue;
    auto idx = ex.getIndices();
    if (moving.contains(idx.back()) &&
        llvm::none_of(idx.drop_back(), [&](Value v) { return moving.contains(v); }))
      out.insert(arg.getArgNumber() - 6);
  }
  return out;
}

SmallVector<std::optional<RangeTable>> buildRangeTables(KernelBuilder &kb, Region &mask,
                                                        ValueRange captures) {
  SmallVector<std::optional<RangeTable>> tables(captures.size());
  for (unsigned i : rangedCaptures(mask))
    tables[i] = buildTable(kb, captures[i]);
  return tables;
}

void freeRangeTables(KernelBuilder &kb, ArrayRef<std::optional<RangeTable>> tables) {
  for (const std::optional<RangeTable> &t : tables)
    if (t) {
      memref::DeallocOp::create(kb.builder(), t->min);
      memref::DeallocOp::create(kb.builder(), t->max);
    }
}

std::optional<TileClass> classifyTile(KernelBuilder &kb, Region &mask, ArrayRef<Interval> ranges,
                                      ValueRange captures,
                                      ArrayRef<std::optional<RangeTable>> tables) {
  Block &block = mask.front();
  bool guarded = mask.walk([](CheckOp) { return WalkResult::interrupt(); }).wasInterrupted();
  IntervalEval ev(kb, guarded);
  for (unsigned i = 0; i < ranges.size(); ++i)
    ev.bind(block.getArgument(i), ranges[i]);
  for (unsigned i = 0; i < captures.size(); ++i)
    ev.bindCapture(block.getArgument(ranges.size() + i), captures[i],
                   i < tables.size() ? tables[i] : std::nullopt);
  for (Operation &op : block.without_terminator())
    ev.eval(op);
  auto r = ev.get(cast<YieldOp>(block.getTerminator()).getValue());
  if (!r || (isConstant(r->lo, false) && isConstant(r->hi, true)))
    return std::nullopt;
  // Where an interval's ends wrapped, the tile is partial: neither full nor empty.
  ImplicitLocOpBuilder &b = kb.builder();
  Value sure = ev.inRange();
  Value empty = arith::XOrIOp::create(b, r->hi, arith::ConstantOp::create(b, b.getBoolAttr(true)));
  return TileClass{b.createOrFold<arith::AndIOp>(r->lo, sure),
                   b.createOrFold<arith::AndIOp>(empty, sure)};
}

Value checksPass(KernelBuilder &kb, Region &mod, unsigned first, ArrayRef<Interval> ranges,
                 ValueRange captures, ArrayRef<std::optional<RangeTable>> tables) {
  SmallVector<CheckOp> checks;
  mod.walk([&](CheckOp c) { checks.push_back(c); });
  if (checks.empty())
    return {};
  Block &block = mod.front();
  IntervalEval ev(kb, /*guarded=*/true);
  for (unsigned i = 0; i < ranges.size(); ++i)
    ev.bind(block.getArgument(first + i), ranges[i]);
  unsigned c0 = first + ranges.size();
  for (unsigned i = 0; i < captures.size(); ++i)
    ev.bindCapture(block.getArgument(c0 + i), captures[i],
                   i < tables.size() ? tables[i] : std::nullopt);
  // Only what the checks' conditions depend on: the rest of the mod (its float math,
  // loads whose values no index uses) would be evaluated per tile for nothing.
  llvm::SmallPtrSet<Operation *, 32> needed;
  SmallVector<Value> work;
  for (CheckOp c : checks)
    work.push_back(c.getOk());
  while (!work.empty()) {
    Operation *def = work.pop_back_val().getDefiningOp();
    if (def && def->getBlock() == &block && needed.insert(def).second)
      llvm::append_range(work, def->getOperands());
  }
  for (Operation &op : block.without_terminator())
    if (needed.contains(&op))
      ev.eval(op);
  Value all = ev.inRange();
  for (CheckOp c : checks) {
    Value lo = ev.get(c.getOk())->lo; // i1: always known, "certainly true" at worst false
    if (isConstant(lo, false))
      return {};
    all = kb.builder().createOrFold<arith::AndIOp>(all, lo);
  }
  return all;
}

} // namespace qkv::ir
