// qkv::tile_map: the fused kernel's tile classification, outside a kernel.
//
// The graph goes through import and the `qkv` stage, as in qkv::compile, so the mask
// region is the one qkv-lower-attention-to-flash sees. The kernel's own classifier
// (conversion/TileClassifier.h, used read-only here) emits its interval evaluation into a
// small function of (b, h, q_lo, q_hi, kv_lo, kv_hi, len_q, len_kv) returning (full,
// empty); each tile is then evaluated by folding that function's ops on constants with
// MLIR's own folders, so no arithmetic is re-implemented here.
#include <qkv/compiler/tile_map.hpp>

#include <qkv/compiler/compile.hpp>

#include <algorithm>
#include <functional>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

#include "Import.h"
#include "conversion/TileClassifier.h"
#include "qkv/compiler/ir/QkvDialect.h"
#include "qkv/compiler/transforms/Passes.h"

namespace qkv {

std::int64_t TileMap::count(TileKind k) const {
  return static_cast<std::int64_t>(std::count(tiles.begin(), tiles.end(), k));
}

namespace {

using mlir::Value;

/// The graph's attention node named `name` (or its only one).
const Node &attention_node(const Graph &g, const std::string &name) {
  std::vector<const Node *> found;
  for (const Node &n : g.nodes())
    if (n.op == OpKind::Attention && (name.empty() || n.name == name))
      found.push_back(&n);
  if (found.size() != 1)
    user_error("tile_map: graph '" + g.name() + "' has " + std::to_string(found.size()) +
               " attention nodes" + (name.empty() ? "" : " named '" + name + "'") +
               (name.empty() && !found.empty() ? "; name the one to classify" : ""));
  return *found.front();
}

/// The node name import gave a location (as its file name), or "".
std::string node_name(mlir::Location loc) {
  auto file = mlir::dyn_cast<mlir::FileLineColLoc>(loc);
  return file ? file.getFilename().str() : "";
}

/// The qkv.attention op that node `name` became.
ir::AttentionOp find_op(mlir::ModuleOp m, const std::string &name) {
  std::vector<ir::AttentionOp> ops;
  ir::AttentionOp named;
  m.walk([&](ir::AttentionOp op) {
    ops.push_back(op);
    if (node_name(op.getLoc()) == name)
      named = op;
  });
  if (named)
    return named;
  if (ops.size() == 1)
    return ops.front();
  internal_error("tile_map: no qkv.attention op for node '" + name + "'");
}

/// func @classify(b, h, q_lo, q_hi, kv_lo, kv_hi, len_q, len_kv) -> (full, empty), or
/// null when the classifier can say nothing about any tile.
mlir::func::FuncOp build_classifier(mlir::ModuleOp holder, mlir::Region &mask) {
  mlir::MLIRContext *ctx = holder.getContext();
  mlir::Location loc = mlir::UnknownLoc::get(ctx);
  mlir::Builder types(ctx);
  auto fnType = types.getFunctionType(llvm::SmallVector<mlir::Type>(8, types.getIndexType()),
                                      {types.getI1Type(), types.getI1Type()});
  auto fn = mlir::func::FuncOp::create(loc, "classify", fnType);
  holder.push_back(fn);
  mlir::Block *entry = fn.addEntryBlock();
  auto b = mlir::ImplicitLocOpBuilder::atBlockEnd(loc, entry);
  ir::KernelBuilder kb(b);
  auto a = entry->getArguments();
  llvm::SmallVector<ir::Interval> ranges = {{a[0], a[0]}, {a[1], a[1]}, {a[2], a[3]},
                                            {a[4], a[5]}, {a[6], a[6]}, {a[7], a[7]}};
  std::optional<ir::TileClass> cls = ir::classifyTile(kb, mask, ranges);
  if (!cls) {
    fn.erase();
    return nullptr;
  }
  mlir::func::ReturnOp::create(b, mlir::ValueRange{cls->full, cls->empty});
  return fn;
}

/// Runs the classifier on constants: each op is folded by its own folder.
TileKind classify(mlir::func::FuncOp fn, llvm::ArrayRef<std::int64_t> args) {
  mlir::Block &entry = fn.front();
  mlir::Builder b(fn.getContext());
  llvm::DenseMap<Value, mlir::Attribute> vals;
  for (unsigned i = 0; i < args.size(); ++i)
    vals[entry.getArgument(i)] = b.getIndexAttr(args[i]);
  for (mlir::Operation &op : entry.without_terminator()) {
    llvm::SmallVector<mlir::Attribute> operands;
    for (Value v : op.getOperands())
      operands.push_back(vals.lookup(v));
    llvm::SmallVector<mlir::OpFoldResult> results;
    if (mlir::failed(op.fold(operands, results)) || results.size() != op.getNumResults())
      internal_error("tile_map: cannot fold " + op.getName().getStringRef().str() +
                     " on constants");
    for (auto [r, folded] : llvm::zip(op.getResults(), results)) {
      mlir::Attribute v = mlir::isa<mlir::Attribute>(folded)
                              ? mlir::cast<mlir::Attribute>(folded)
                              : vals.lookup(mlir::cast<Value>(folded));
      if (!v)
        internal_error("tile_map: " + op.getName().getStringRef().str() +
                       " did not fold to a constant");
      vals[r] = v;
    }
  }
  auto ret = mlir::cast<mlir::func::ReturnOp>(entry.getTerminator());
  auto truth = [&](Value v) {
    return mlir::cast<mlir::IntegerAttr>(vals.lookup(v)).getValue().getBoolValue();
  };
  if (truth(ret.getOperand(1)))
    return TileKind::Empty;
  return truth(ret.getOperand(0)) ? TileKind::Full : TileKind::Partial;
}

/// The qkv stage of the CPU pipeline on g.
mlir::OwningOpRef<mlir::ModuleOp> qkv_stage(mlir::MLIRContext &ctx, const Graph &g) {
  ir::registerUpstreamPassesUsedByQkv();
  ir::registerQkvPassesAndPipelines();
  mlir::OwningOpRef<mlir::ModuleOp> m = ir::import_graph(ctx, g);
  mlir::PassManager pm(&ctx);
  std::string pipeline = ir::cpuStagePipeline("qkv");
  if (mlir::failed(mlir::parsePassPipeline(pipeline, pm)) || mlir::failed(pm.run(*m)))
    internal_error("tile_map: the qkv stage failed on graph '" + g.name() + "'");
  return m;
}

/// The kernel's tile sizes for a masked attention (AttentionToFlash's resolveSchedule):
/// two vectors of queries unless given, rounded down to whole vectors; keys as many.
void resolve_tiles(TileMap &t, const TileMapOptions &o, mlir::Type elem, bool masked) {
  int bits = o.vector_bits ? o.vector_bits : host_vector_bits();
  std::int64_t lanes = std::max<std::int64_t>(1, bits / elem.getIntOrFloatBitWidth());
  std::int64_t q = o.q_tile > 0 ? o.q_tile : (masked ? 2 : 4) * lanes;
  t.q_tile = std::max(lanes, q / lanes * lanes);
  t.kv_tile = o.kv_tile > 0 ? o.kv_tile : t.q_tile;
}

} // namespace

TileMap tile_map(const Graph &g, const DimBindings &dims, const TileMapOptions &o) {
  g.verify();
  user_check(o.q_tile >= 0 && o.kv_tile >= 0, "tile_map: tile sizes must be 0 or positive");
  user_check(o.one_by_one >= 0, "tile_map: one_by_one must not be negative");
  const Node &node = attention_node(g, o.attention);
  DimBindings all = complete_dims(g, dims);
  Shape q = resolve(g.node(node.inputs[0]).dims, all),
        k = resolve(g.node(node.inputs[1]).dims, all);
  TileMap t;
  t.len_q = q[q.size() - 2];
  t.len_kv = k[k.size() - 2];

  mlir::DialectRegistry registry;
  ir::registerQkvDialects(registry);
  mlir::MLIRContext ctx(registry, mlir::MLIRContext::Threading::DISABLED);
  ctx.loadAllAvailableDialects();
  mlir::ScopedDiagnosticHandler quiet(&ctx, [](mlir::Diagnostic &) { return mlir::success(); });
  mlir::OwningOpRef<mlir::ModuleOp> m = qkv_stage(ctx, g);
  ir::AttentionOp op = find_op(*m, node.name);
  mlir::Type elem = mlir::cast<mlir::RankedTensorType>(op.getQ().getType()).getElementType();
  bool masked = !op.getMask().empty();
  resolve_tiles(t, o, elem, masked);
  t.rows = (t.len_q + t.q_tile - 1) / t.q_tile;
  t.cols = (t.len_kv + t.kv_tile - 1) / t.kv_tile;
  t.tiles.assign(t.rows * t.cols, masked ? TileKind::Partial : TileKind::Full);
  if (!masked)
    return t;
  mlir::OwningOpRef<mlir::ModuleOp> holder = mlir::ModuleOp::create(mlir::UnknownLoc::get(&ctx));
  mlir::func::FuncOp fn = build_classifier(*holder, op.getMask());
  if (!fn)
    return t;
  t.analysed = true;
  // Tiles [r0, r1) x [c0, c1) as one box of queries and keys.
  auto box = [&](std::int64_t r0, std::int64_t r1, std::int64_t c0, std::int64_t c1) {
    return classify(fn, {o.batch, o.head, r0 * t.q_tile, std::min(t.len_q, r1 * t.q_tile) - 1,
                         c0 * t.kv_tile, std::min(t.len_kv, c1 * t.kv_tile) - 1, t.len_q,
                         t.len_kv});
  };
  if (t.rows * t.cols <= o.one_by_one) {
    for (std::int64_t r = 0; r < t.rows; ++r)
      for (std::int64_t c = 0; c < t.cols; ++c)
        t.tiles[r * t.cols + c] = box(r, r + 1, c, c + 1);
    return t;
  }
  // Past a million tiles (qkv show at L = 100000), boxes of tiles first: what the interval
  // analysis proves of a box it proves of every tile inside (the intervals only narrow),
  // so a proved box is filled and an unproved one is split, down to single tiles.
  std::function<void(std::int64_t, std::int64_t, std::int64_t, std::int64_t)> split =
      [&](std::int64_t r0, std::int64_t r1, std::int64_t c0, std::int64_t c1) {
        TileKind k = box(r0, r1, c0, c1);
        if (k != TileKind::Partial || (r1 - r0 == 1 && c1 - c0 == 1)) {
          for (std::int64_t r = r0; r < r1; ++r)
            std::fill_n(t.tiles.begin() + r * t.cols + c0, c1 - c0, k);
          return;
        }
        if (r1 - r0 >= c1 - c0) {
          split(r0, (r0 + r1) / 2, c0, c1);
          split((r0 + r1) / 2, r1, c0, c1);
        } else {
          split(r0, r1, c0, (c0 + c1) / 2);
          split(r0, r1, (c0 + c1) / 2, c1);
        }
      };
  split(0, t.rows, 0, t.cols);
  return t;
}

} // namespace qkv
