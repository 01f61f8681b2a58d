// qkv::tile_map: the fused kernel's tile classification, outside a kernel.
//
// The graph goes through import and the `qkv` stage, as in qkv::compile, so the mask
// region is the one qkv-lower-attention-to-flash sees. The kernel's own classifier
// (conversion/TileClassifier.h, used read-only here) emits its interval evaluation into a
// small function of (b, h, q_lo, q_hi, kv_lo, kv_hi, len_q, len_kv) returning (full,
// empty); each tile is then evaluated by folding that function's ops on constants with
// MLIR's own folders, so no arithmetic is re-implemented here. Given the call's inputs,
// the function also takes the mask's captured tensors and their range tables (built here
// in the layout the kernel builds them in) as memrefs, and their loads and dims are read
// from the host values: the per-call map.
#include <qkv/compiler/tile_map.hpp>

#include <qkv/compiler/compile.hpp>

#include <algorithm>
#include <bit>
#include <functional>
#include <memory>
#include <optional>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
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

/// The values of one memref argument of the classifier, to fold its loads and dims: a
/// captured tensor's, or a range table of one.
struct HostArray {
  std::string name; ///< for errors
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> values; ///< row-major
};

/// What the classifier reads: per capture of the mask, its values (null: none, so a load
/// from it leaves the tile partial) and, for those that need one, the range tables.
struct MaskData {
  std::vector<std::unique_ptr<HostArray>> captures;
  std::vector<unsigned> ranged; ///< the captures with tables, in order
  std::vector<HostArray> tables; ///< min and max of each ranged capture, in that order
};

/// The sparse min/max tables of `a` ((rows, n) or (n)) in buildTable's layout: (levels,
/// rows, max(n, 1)), level k the min (max) of the 2^k values from each position; a row of
/// n = 0 holds one 0.
std::pair<HostArray, HostArray> range_tables(const HostArray &a) {
  std::int64_t n = a.shape.back(), rows = a.shape.size() == 2 ? a.shape[0] : 1;
  std::int64_t n1 = std::max<std::int64_t>(n, 1);
  auto levels = static_cast<std::int64_t>(std::bit_width(static_cast<std::uint64_t>(n1)));
  HostArray mn{a.name + " (its min table)", {levels, rows, n1},
               std::vector<std::int64_t>(static_cast<std::size_t>(levels * rows * n1))};
  HostArray mx{a.name + " (its max table)", mn.shape, mn.values};
  auto at = [&](std::int64_t k, std::int64_t r, std::int64_t i) {
    return static_cast<std::size_t>((k * rows + r) * n1 + i);
  };
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t i = 0; i < n; ++i)
      mn.values[at(0, r, i)] = mx.values[at(0, r, i)] = a.values[static_cast<std::size_t>(r * n + i)];
  for (std::int64_t k = 1; k < levels; ++k) {
    std::int64_t half = std::int64_t{1} << (k - 1);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t i = 0; i + 2 * half <= n1; ++i) {
        mn.values[at(k, r, i)] = std::min(mn.values[at(k - 1, r, i)], mn.values[at(k - 1, r, i + half)]);
        mx.values[at(k, r, i)] = std::max(mx.values[at(k - 1, r, i)], mx.values[at(k - 1, r, i + half)]);
      }
  }
  return {std::move(mn), std::move(mx)};
}

std::string dims_str(const Shape &s) {
  std::string out = "(";
  for (std::size_t i = 0; i < s.size(); ++i)
    out += (i ? ", " : "") + std::to_string(s[i]);
  return out + ")";
}

std::string type_str(mlir::Type t) {
  std::string out;
  llvm::raw_string_ostream os(out);
  t.print(os);
  return out;
}

/// The argument's name import gave it (qkv.name), or "" for a value computed in the graph.
std::string capture_name(Value v) {
  auto arg = mlir::dyn_cast<mlir::BlockArgument>(v);
  auto fn = arg ? mlir::dyn_cast<mlir::func::FuncOp>(arg.getOwner()->getParentOp()) : nullptr;
  auto name = fn ? fn.getArgAttrOfType<mlir::StringAttr>(arg.getArgNumber(), "qkv.name") : nullptr;
  return name ? name.str() : "";
}

/// The inputs' values of the integer tensors op's mask captures, checked against their
/// types, and the range tables of those the mask loads at a range of positions.
MaskData mask_data(ir::AttentionOp op, const TensorMap &inputs, const std::string &graph) {
  MaskData d;
  llvm::SmallDenseSet<unsigned> ranged = ir::rangedCaptures(op.getMask());
  for (auto [i, c] : llvm::enumerate(op.getCaptures())) {
    auto type = mlir::cast<mlir::RankedTensorType>(c.getType());
    std::string name = capture_name(c);
    if (name.empty() || !type.getElementType().isIntOrIndex()) {
      d.captures.push_back(nullptr);
      continue;
    }
    auto t = inputs.find(name);
    if (t == inputs.end())
      user_error("tile_map: the mask of graph '" + graph + "' reads '" + name +
                 "'; TileMapOptions::inputs has no tensor of that name");
    const Shape &shape = t->second.shape();
    bool fits = static_cast<std::int64_t>(shape.size()) == type.getRank();
    for (std::int64_t a = 0; fits && a < type.getRank(); ++a)
      fits = type.isDynamicDim(a) || type.getDimSize(a) == shape[static_cast<std::size_t>(a)];
    user_check(fits, "tile_map: input '" + name + "' has shape " + dims_str(shape) +
                         "; graph '" + graph + "' takes it as " + type_str(type));
    auto a = std::make_unique<HostArray>(HostArray{name, shape, {}});
    for (std::int64_t e = 0; e < t->second.numel(); ++e)
      a->values.push_back(static_cast<std::int64_t>(t->second.get(e)));
    if (ranged.contains(static_cast<unsigned>(i))) {
      auto [mn, mx] = range_tables(*a);
      d.ranged.push_back(static_cast<unsigned>(i));
      d.tables.push_back(std::move(mn));
      d.tables.push_back(std::move(mx));
    }
    d.captures.push_back(std::move(a));
  }
  return d;
}

/// func @classify(b, h, q_lo, q_hi, kv_lo, kv_hi, len_q, len_kv[, captures..., tables...])
/// -> (full, empty), or null when the classifier can say nothing about any tile. With
/// `data`, the captures are memrefs of op's capture types and each ranged capture has its
/// min and max tables after them.
mlir::func::FuncOp build_classifier(mlir::ModuleOp holder, ir::AttentionOp op,
                                    const MaskData *data) {
  mlir::MLIRContext *ctx = holder.getContext();
  mlir::Location loc = mlir::UnknownLoc::get(ctx);
  mlir::Builder types(ctx);
  llvm::SmallVector<mlir::Type> args(8, types.getIndexType());
  if (data) {
    for (Value c : op.getCaptures()) {
      auto t = mlir::cast<mlir::RankedTensorType>(c.getType());
      args.push_back(mlir::MemRefType::get(t.getShape(), t.getElementType()));
    }
    std::int64_t d = mlir::ShapedType::kDynamic;
    for (unsigned i : data->ranged) {
      auto t = mlir::cast<mlir::RankedTensorType>(op.getCaptures()[i].getType());
      args.append(2, mlir::MemRefType::get({d, d, d}, t.getElementType()));
    }
  }
  auto fnType = types.getFunctionType(args, {types.getI1Type(), types.getI1Type()});
  auto fn = mlir::func::FuncOp::create(loc, "classify", fnType);
  holder.push_back(fn);
  mlir::Block *entry = fn.addEntryBlock();
  auto b = mlir::ImplicitLocOpBuilder::atBlockEnd(loc, entry);
  ir::KernelBuilder kb(b);
  auto a = entry->getArguments();
  llvm::SmallVector<ir::Interval> ranges = {{a[0], a[0]}, {a[1], a[1]}, {a[2], a[3]},
                                            {a[4], a[5]}, {a[6], a[6]}, {a[7], a[7]}};
  llvm::SmallVector<Value> mems;
  llvm::SmallVector<std::optional<ir::RangeTable>> tables;
  if (data) {
    std::size_t n = op.getCaptures().size();
    mems.append(a.begin() + 8, a.begin() + 8 + static_cast<std::ptrdiff_t>(n));
    tables.resize(n);
    for (auto [j, i] : llvm::enumerate(data->ranged)) {
      auto rank = mlir::cast<mlir::MemRefType>(mems[i].getType()).getRank();
      Value extent = mlir::memref::DimOp::create(b, mems[i], rank - 1);
      Value rows = rank == 2 ? Value(mlir::memref::DimOp::create(b, mems[i], 0)) : kb.idx(1);
      tables[i] = ir::RangeTable{a[8 + n + 2 * j], a[8 + n + 2 * j + 1], extent, rows};
    }
  }
  std::optional<ir::TileClass> cls = ir::classifyTile(kb, op.getMask(), ranges, mems, tables);
  if (!cls) {
    fn.erase();
    return nullptr;
  }
  mlir::func::ReturnOp::create(b, mlir::ValueRange{cls->full, cls->empty});
  return fn;
}

using Folded = llvm::DenseMap<Value, mlir::Attribute>;

/// The host values behind memref argument `mem` of the classifier (null: none).
const HostArray *host_of(Value mem, llvm::ArrayRef<const HostArray *> host) {
  auto arg = mlir::cast<mlir::BlockArgument>(mem);
  return host[arg.getArgNumber() - 8];
}

std::int64_t index_of(const Folded &vals, Value v) {
  return mlir::cast<mlir::IntegerAttr>(vals.lookup(v)).getValue().getSExtValue();
}

/// A load from host values; out of bounds is the inputs' fault (a point load at the
/// batch TileMapOptions names, past the tensor), reported with the tensor's name.
mlir::Attribute fold_load(mlir::memref::LoadOp load, const Folded &vals, const HostArray &a) {
  std::int64_t flat = 0;
  for (auto [d, i] : llvm::enumerate(load.getIndices())) {
    std::int64_t x = index_of(vals, i), n = a.shape[d];
    if (x < 0 || x >= n) {
      Shape at;
      for (Value j : load.getIndices())
        at.push_back(index_of(vals, j));
      user_error("tile_map: the mask loads " + a.name + " at " + dims_str(at) +
                 ", out of bounds of its shape " + dims_str(a.shape));
    }
    flat = flat * n + x;
  }
  return mlir::IntegerAttr::get(load.getType(), a.values[static_cast<std::size_t>(flat)]);
}

/// Runs the classifier on constants: each op is folded by its own folder, and loads and
/// dims of the memref arguments read `host` (one per memref argument); a load from one
/// without values leaves the tile partial.
TileKind classify(mlir::func::FuncOp fn, llvm::ArrayRef<std::int64_t> args,
                  llvm::ArrayRef<const HostArray *> host) {
  mlir::Block &entry = fn.front();
  mlir::Builder b(fn.getContext());
  Folded vals;
  for (unsigned i = 0; i < args.size(); ++i)
    vals[entry.getArgument(i)] = b.getIndexAttr(args[i]);
  for (mlir::Operation &op : entry.without_terminator()) {
    if (auto load = mlir::dyn_cast<mlir::memref::LoadOp>(op)) {
      const HostArray *a = host_of(load.getMemref(), host);
      if (!a)
        return TileKind::Partial;
      vals[load.getResult()] = fold_load(load, vals, *a);
      continue;
    }
    if (auto dim = mlir::dyn_cast<mlir::memref::DimOp>(op)) {
      const HostArray *a = host_of(dim.getSource(), host);
      if (!a)
        return TileKind::Partial;
      vals[dim.getResult()] = b.getIndexAttr(a->shape[index_of(vals, dim.getIndex())]);
      continue;
    }
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
  if (!ir::addCpuStage(pm, Stage::Qkv, {}) || mlir::failed(ir::runStage(pm, *m)))
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

  std::unique_ptr<mlir::MLIRContext> owned = ir::newCompileContext();
  mlir::MLIRContext &ctx = *owned;
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
  std::optional<MaskData> data;
  std::vector<const HostArray *> host;
  if (o.inputs) {
    data = mask_data(op, *o.inputs, g.name());
    for (const auto &c : data->captures)
      host.push_back(c.get());
    for (const HostArray &table : data->tables)
      host.push_back(&table);
  }
  mlir::func::FuncOp fn = build_classifier(*holder, op, data ? &*data : nullptr);
  if (!fn)
    return t;
  t.analysed = true;
  // Tiles [r0, r1) x [c0, c1) as one box of queries and keys.
  auto box = [&](std::int64_t r0, std::int64_t r1, std::int64_t c0, std::int64_t c1) {
    return classify(fn,
                    {o.batch, o.head, r0 * t.q_tile, std::min(t.len_q, r1 * t.q_tile) - 1,
                     c0 * t.kv_tile, std::min(t.len_kv, c1 * t.kv_tile) - 1, t.len_q, t.len_kv},
                    host);
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
