// qkv-serialize-small-parallel: an OpenMP parallel region whose loop does too little work
// to pay for its fork and join runs on the calling thread (docs/compiler.md, "Threads").
// A decode step's RMSNorm of one row, its RoPE of 8 heads or a table of 32 frequencies
// forked both threads for well under a microsecond of work each.
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/OpenMP/OpenMPDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"

#include "qkv/compiler/transforms/Passes.h"

namespace qkv::ir {
#define GEN_PASS_DEF_SERIALIZESMALLPARALLEL
#include "qkv/compiler/transforms/Passes.h.inc"
} // namespace qkv::ir

using namespace mlir;

namespace {

/// Ops one run of `region` executes, each op counted once, a scf.for of constant bounds
/// as its trips times its body's, an scf.if as its larger branch; nullopt when it runs a
/// loop of unknown length, a while loop or a call (work the count cannot see), or when the
/// count reaches `cap` (enough to know).
std::optional<int64_t> workOf(Region &region, int64_t cap);

std::optional<int64_t> workOfOp(Operation &op, int64_t cap) {
  if (isa<CallOpInterface, scf::WhileOp>(op))
    return std::nullopt;
  if (auto loop = dyn_cast<scf::ForOp>(op)) {
    std::optional<APInt> trips = loop.getStaticTripCount();
    std::optional<int64_t> body = workOf(loop.getRegion(), cap);
    if (!trips || trips->getActiveBits() > 32 || !body)
      return std::nullopt;
    int64_t all = static_cast<int64_t>(trips->getZExtValue()) * *body;
    return all < cap ? std::optional<int64_t>(1 + all) : std::nullopt;
  }
  int64_t most = 0;
  for (Region &r : op.getRegions()) {
    std::optional<int64_t> w = workOf(r, cap);
    if (!w)
      return std::nullopt;
    // scf.if runs one branch; other ops with regions (alloca scopes) run theirs once.
    most = isa<scf::IfOp>(op) ? std::max(most, *w) : most + *w;
  }
  return 1 + most;
}

std::optional<int64_t> workOf(Region &region, int64_t cap) {
  int64_t total = 0;
  for (Block &block : region)
    for (Operation &op : block) {
      std::optional<int64_t> w = workOfOp(op, cap);
      if (!w || (total += *w) >= cap)
        return std::nullopt;
    }
  return total;
}

/// Whether every bound of `nest` is defined outside `par` (where the clause is computed).
bool boundsOutside(omp::LoopNestOp nest, omp::ParallelOp par) {
  return llvm::none_of(nest->getOperands(), [&](Value v) {
    return par->isAncestor(v.getParentRegion()->getParentOp());
  });
}

/// The iterations of `nest`, when its bounds are constants.
std::optional<int64_t> staticTrips(omp::LoopNestOp nest) {
  // Saturated there: only whether trips * work reaches min-work matters.
  constexpr int64_t kMany = int64_t{1} << 40;
  int64_t trips = 1;
  for (auto [lb, ub, step] :
       llvm::zip(nest.getLoopLowerBounds(), nest.getLoopUpperBounds(), nest.getLoopSteps())) {
    std::optional<int64_t> l = getConstantIntValue(lb), u = getConstantIntValue(ub),
                           s = getConstantIntValue(step);
    if (!l || !u || !s || *s <= 0 || *s > kMany || *l < -kMany || *u > kMany)
      return std::nullopt;
    int64_t n = std::max<int64_t>(0, (*u - *l + *s - 1) / *s);
    trips = n != 0 && trips > kMany / n ? kMany : trips * n;
  }
  return trips;
}

/// The iterations of `nest` as an index, computed before `par`.
Value tripCount(OpBuilder &b, omp::LoopNestOp nest, Location loc) {
  Value trips = arith::ConstantIndexOp::create(b, loc, 1);
  for (auto [lb, ub, step] :
       llvm::zip(nest.getLoopLowerBounds(), nest.getLoopUpperBounds(), nest.getLoopSteps())) {
    Value span = b.createOrFold<arith::SubIOp>(loc, ub, lb);
    Value n = b.createOrFold<arith::CeilDivSIOp>(loc, span, step);
    n = b.createOrFold<arith::MaxSIOp>(loc, n, arith::ConstantIndexOp::create(b, loc, 0));
    trips = b.createOrFold<arith::MulIOp>(loc, trips, n);
  }
  return trips;
}

/// Gives `par` its if clause, unless its work cannot be counted or is always enough.
void serializeWhenSmall(omp::ParallelOp par, int64_t minWork) {
  SmallVector<omp::LoopNestOp> nests;
  par.walk([&](omp::LoopNestOp n) { nests.push_back(n); });
  if (par.getIfExpr() || nests.size() != 1 || !boundsOutside(nests[0], par))
    return;
  omp::LoopNestOp nest = nests[0];
  std::optional<int64_t> perTrip = workOf(nest.getRegion(), minWork);
  if (!perTrip)
    return;
  int64_t work = std::max<int64_t>(1, *perTrip);
  std::optional<int64_t> trips = staticTrips(nest);
  if (trips && *trips >= (minWork + work - 1) / work)
    return; // worth its fork whatever the sizes
  OpBuilder b(par);
  Location loc = par.getLoc();
  Value worth;
  if (trips) {
    worth = arith::ConstantIntOp::create(b, loc, b.getI1Type(), 0);
  } else {
    Value all = arith::MulIOp::create(b, loc, tripCount(b, nest, loc),
                                      arith::ConstantIndexOp::create(b, loc, work));
    worth = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, all,
                                  arith::ConstantIndexOp::create(b, loc, minWork));
  }
  par.getIfExprMutable().assign(worth);
}

struct SerializeSmallParallelPass
    : qkv::ir::impl::SerializeSmallParallelBase<SerializeSmallParallelPass> {
  using Base::Base;

  void runOnOperation() override {
    getOperation()->walk([&](omp::ParallelOp par) { serializeWhenSmall(par, minWork); });
  }
};

} // namespace
