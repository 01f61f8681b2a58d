// Checked kernels' sites, their failures' words, and the report function compiled code
// calls (qkv/runtime/checks.hpp).
#include <qkv/runtime/checks.hpp>

#include <algorithm>
#include <array>
#include <mutex>
#include <tuple>
#include <unordered_set>

#include "bounds_messages.hpp"
#include "check_proofs.hpp"

namespace qkv {

namespace detail {

namespace {

/// `e` as the graph's text shows it.
std::string expr_text(const Graph &g, const ExprNode &e) {
  std::vector<std::string> names;
  for (const Node &n : g.nodes())
    names.push_back(n.name);
  // to_string takes a shared pointer; the node is owned by the graph's expression tree.
  return to_string(ExprPtr(ExprPtr(), &e), &names);
}

std::string who(const Node &op, std::string_view mod) {
  return std::string(op_name(op.op)) + " '" + op.name + "': " + std::string(mod);
}

} // namespace

std::string mod_position(const ModAt &at) {
  return "(b=" + std::to_string(at.b) + ", h=" + std::to_string(at.h) +
         ", q=" + std::to_string(at.q) + ", kv=" + std::to_string(at.kv) + ")";
}

std::string mod_load_out_of_bounds(const Graph &g, const Node &op, std::string_view mod,
                                   const ExprNode &load, const Shape &idx, const Shape &shape,
                                   const ModAt &at) {
  const Node &t = g.node(load.tensor);
  std::size_t i = 0;
  while (i + 1 < idx.size() && idx[i] >= 0 && idx[i] < shape[i])
    ++i;
  return who(op, mod) + " loads '" + t.name + "'" + shape_str(idx) +
         " out of bounds: index " + std::to_string(idx[i]) + " on dim " +
         describe(Dim(t.dims[i].name, shape[i])) + " of '" + t.name + "' " + shape_str(shape) +
         ", in `" + expr_text(g, load) + "` at " + mod_position(at);
}

std::string mod_division_error(const Graph &g, const Node &op, std::string_view mod,
                               const ExprNode &e, std::int64_t divisor, const ModAt &at) {
  if (divisor != 0)
    return who(op, mod) + ": integer division overflows in `" + expr_text(g, e) + "` at " +
           mod_position(at);
  return who(op, mod) + ": integer " + (e.op == ExprOp::Div ? "division" : "remainder") +
         " by zero in `" + expr_text(g, e) + "` at " + mod_position(at);
}

} // namespace detail

namespace checks {

namespace {

/// Whether `e` is a site: a load, or an integer division or remainder whose divisor is
/// not a constant other than 0 and -1 (those cannot fail).
bool is_site(const ExprNode &e) {
  if (e.op == ExprOp::Load)
    return true;
  if ((e.op != ExprOp::Div && e.op != ExprOp::Mod) || e.type != ExprType::Int)
    return false;
  const ExprNode &d = *e.args.at(1);
  return d.op != ExprOp::ConstInt || d.ival == 0 || d.ival == -1;
}

/// The sites of `e` in evaluation order (arguments first), each once.
void collect_sites(const ExprNode &e, std::unordered_set<const ExprNode *> &seen,
                   std::vector<const ExprNode *> &out) {
  if (!seen.insert(&e).second)
    return;
  for (const ExprPtr &a : e.args)
    collect_sites(*a, seen, out);
  if (is_site(e))
    out.push_back(&e);
}

void add_mod(std::vector<Site> &out, const Graph &g, const Node &n, const ExprPtr &e,
             const char *mod) {
  if (!e)
    return;
  std::unordered_set<const ExprNode *> seen;
  std::vector<const ExprNode *> found;
  collect_sites(*e, seen, found);
  std::optional<proofs::Positions> p = proofs::positions_of(g, n);
  for (const ExprNode *s : found)
    out.push_back(Site{n.id, s, mod, p && proofs::proven(g, *p, *s)});
}

} // namespace

std::vector<Site> sites(const Graph &g) {
  std::vector<Site> out;
  for (const Node &n : g.nodes()) {
    add_mod(out, g, n, n.attrs.score, "score_mod");
    add_mod(out, g, n, n.attrs.mask, "mask_mod");
  }
  return out;
}

bool needs_checks(const Graph &g) {
  std::vector<Site> all = sites(g);
  return std::any_of(all.begin(), all.end(), [](const Site &s) { return !s.proven; });
}

namespace {

/// A reported failure: the site and its values (b, h, q, kv, indices, dims).
struct Failure {
  std::int64_t site;
  std::vector<std::int64_t> values;
};

/// The run in progress: its graph and sites, and the first failure so far.
struct Current {
  const Graph *g = nullptr;
  std::vector<Site> sites;
  std::optional<Failure> first;
};

std::mutex run_mutex;    // held by a Run: one checked run at a time
std::mutex report_mutex; // guards `current` against the kernel's threads
Current current;

/// Where the interpreter meets a failure first: its node, then the position (b, h, q,
/// kv), then score_mod before mask_mod (an attention evaluates both per position), then
/// the site's order.
std::tuple<NodeId, std::array<std::int64_t, 4>, int, std::int64_t> order(const Failure &f) {
  const Site &s = current.sites.at(static_cast<std::size_t>(f.site));
  const std::vector<std::int64_t> &v = f.values;
  int mod = std::string_view(s.mod) == "mask_mod" ? 1 : 0;
  return {s.node, {v[0], v[1], v[2], v[3]}, mod, f.site};
}

std::string message(const Graph &g, const Site &s, const std::vector<std::int64_t> &v) {
  detail::ModAt at{v[0], v[1], v[2], v[3]};
  if (s.expr->op != ExprOp::Load)
    return detail::mod_division_error(g, g.node(s.node), s.mod, *s.expr, v.at(5), at);
  auto r = static_cast<long>((v.size() - 4) / 2);
  Shape idx(v.begin() + 4, v.begin() + 4 + r), shape(v.begin() + 4 + r, v.end());
  return detail::mod_load_out_of_bounds(g, g.node(s.node), s.mod, *s.expr, idx, shape, at);
}

} // namespace

Run::Run(const Graph &g) {
  std::vector<Site> s = sites(g);
  run_mutex.lock();
  std::lock_guard<std::mutex> lock(report_mutex);
  current = Current{&g, std::move(s), std::nullopt};
}

Run::~Run() {
  {
    std::lock_guard<std::mutex> lock(report_mutex);
    current = Current{};
  }
  run_mutex.unlock();
}

std::optional<std::string> Run::failure() const {
  std::lock_guard<std::mutex> lock(report_mutex);
  if (!current.first)
    return std::nullopt;
  const Failure &f = *current.first;
  return message(*current.g, current.sites.at(static_cast<std::size_t>(f.site)), f.values);
}

} // namespace checks
} // namespace qkv

extern "C" void qkv_check_failed(std::int64_t site, std::int64_t count, std::int64_t v0,
                                 std::int64_t v1, std::int64_t v2, std::int64_t v3,
                                 std::int64_t v4, std::int64_t v5, std::int64_t v6,
                                 std::int64_t v7, std::int64_t v8, std::int64_t v9,
                                 std::int64_t v10, std::int64_t v11, std::int64_t v12,
                                 std::int64_t v13, std::int64_t v14, std::int64_t v15) {
  using namespace qkv::checks;
  const std::int64_t all[kCheckValues] = {v0, v1, v2,  v3,  v4,  v5,  v6,  v7,
                                          v8, v9, v10, v11, v12, v13, v14, v15};
  if (count < 4 || count > kCheckValues || count % 2)
    return; // not a check this runtime knows
  Failure f{site, std::vector<std::int64_t>(all, all + count)};
  std::lock_guard<std::mutex> lock(report_mutex);
  if (!current.g || site < 0 || static_cast<std::size_t>(site) >= current.sites.size())
    return; // not from the run in progress: nothing to attribute it to
  if (!current.first || order(f) < order(*current.first))
    current.first = std::move(f);
}
