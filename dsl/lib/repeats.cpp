// find_repeated_blocks: runs of structurally identical blocks of nodes.
//
// A candidate run (start, size) is first screened with each node's op, dtype and dims,
// compared as hashes; a run that passes is
// then compared block by block in full: each node's signature with its inputs written as
// places in the block or numbered externals (with their types), and its mods' loads
// through the same names.
#include <qkv/dsl/repeats.hpp>

#include <algorithm>
#include <functional>
#include <string>

namespace qkv {

namespace {

bool is_leaf(const Node &n) { return n.op == OpKind::Input || n.op == OpKind::Param; }

std::string type_text(const Node &n) {
  std::string s(dtype_name(n.dtype));
  for (const Dim &d : n.dims)
    s += "," + d.name + ":" + std::to_string(d.extent);
  return s;
}

/// A node's op and type, for the first screening (the full comparison sees the rest).
std::string local_signature(const Node &n) {
  return (is_leaf(n) ? std::string("leaf") : std::string(op_name(n.op))) + " " + type_text(n);
}

class Finder {
public:
  explicit Finder(const Graph &g) : g_(g), n_(static_cast<NodeId>(g.nodes().size())) {
    std::vector<std::string> anonymous(static_cast<std::size_t>(n_), "?");
    ops_before_.push_back(0);
    for (const Node &n : g.nodes()) {
      attrs_.push_back(attrs_key(n.attrs, &anonymous));
      local_.push_back(std::hash<std::string>{}(local_signature(n)));
      ops_before_.push_back(ops_before_.back() + (is_leaf(n) ? 0 : 1));
    }
    names_.resize(static_cast<std::size_t>(n_));
    users_.resize(static_cast<std::size_t>(n_));
    for (const Node &n : g.nodes())
      for (NodeId in : n.inputs)
        users_[static_cast<std::size_t>(in)].push_back(n.id);
    for (const auto &[name, id] : g.outputs())
      users_[static_cast<std::size_t>(id)].push_back(n_); // read "after" every block
  }

  std::vector<RepeatedBlocks> find(int min_ops) {
    std::vector<RepeatedBlocks> runs;
    std::vector<bool> taken(static_cast<std::size_t>(n_), false);
    while (true) {
      RepeatedBlocks best;
      std::int64_t best_saved = 0;
      for (NodeId size = 1; 2 * size <= n_; ++size)
        for (NodeId start = 0; start + 2 * size <= n_; ++start) {
          RepeatedBlocks r = run_at(start, size, min_ops, taken, best_saved);
          if (r.count < 2)
            continue;
          best_saved = static_cast<std::int64_t>(r.count - 1) * ops(start, size);
          // A later start inside this run finds at most as many blocks of this size.
          start += size * r.count - 1;
          best = std::move(r);
        }
      if (best.count < 2)
        break;
      std::fill(taken.begin() + best.start, taken.begin() + best.start + best.size * best.count,
                true);
      runs.push_back(std::move(best));
    }
    std::sort(runs.begin(), runs.end(),
              [](const RepeatedBlocks &a, const RepeatedBlocks &b) { return a.start < b.start; });
    return runs;
  }

private:
  NodeId ops(NodeId start, NodeId size) const {
    return ops_before_[static_cast<std::size_t>(start + size)] -
           ops_before_[static_cast<std::size_t>(start)];
  }

  bool screened_equal(NodeId a, NodeId b, NodeId size) const {
    for (NodeId i = 0; i < size; ++i)
      if (local_[static_cast<std::size_t>(a + i)] != local_[static_cast<std::size_t>(b + i)])
        return false;
    return true;
  }

  bool free(const std::vector<bool> &taken, NodeId start, NodeId end) const {
    return std::none_of(taken.begin() + start, taken.begin() + end, [](bool t) { return t; });
  }

  /// The longest run of identical blocks of `size` from `start`, when it leaves out more
  /// than `best_saved` ops (else count 0; also when a block has too few ops or overlaps a
  /// run already taken). The screening counts the blocks first, cheaply.
  RepeatedBlocks run_at(NodeId start, NodeId size, int min_ops, const std::vector<bool> &taken,
                        std::int64_t best_saved) {
    int screened = 1;
    while (start + (screened + 1) * size <= n_ &&
           screened_equal(start, start + screened * size, size) &&
           free(taken, start + (screened - 1) * size, start + (screened + 1) * size))
      ++screened;
    if (screened < 2 || ops(start, size) < min_ops ||
        static_cast<std::int64_t>(screened - 1) * ops(start, size) <= best_saved)
      return {};
    RepeatedBlocks r;
    std::vector<std::string> first = signatures(start, size, r.externals.emplace_back());
    int count = 1;
    while (count < screened) {
      std::vector<NodeId> ext;
      if (signatures(start + count * size, size, ext) != first)
        break;
      r.externals.push_back(std::move(ext));
      ++count;
    }
    if (count < 2 || static_cast<std::int64_t>(count - 1) * ops(start, size) <= best_saved)
      return {};
    r.start = start;
    r.size = size;
    r.count = count;
    r.results = results(r);
    return r;
  }

  /// Each op's signature in the block, its inputs as places in the block ("%k") or
  /// externals ("$k" with their types) numbered in order of first use; fills `externals`.
  std::vector<std::string> signatures(NodeId start, NodeId size, std::vector<NodeId> &externals) {
    std::vector<NodeId> touched;
    auto ref = [&](NodeId id) -> const std::string & {
      std::string &name = names_[static_cast<std::size_t>(id)];
      if (name.empty()) {
        touched.push_back(id);
        const Node &n = g_.node(id);
        if (id >= start && id < start + size && !is_leaf(n))
          name = "%" + std::to_string(id - start);
        else {
          name = "$" + std::to_string(externals.size()) + ":" + type_text(n);
          externals.push_back(id);
        }
      }
      return name;
    };
    std::vector<std::string> sigs;
    for (NodeId id = start; id < start + size; ++id) {
      const Node &n = g_.node(id);
      if (is_leaf(n))
        continue;
      std::string s = std::string(op_name(n.op)) + " " + type_text(n) + " (";
      for (NodeId in : n.inputs)
        s += ref(in) + " ";
      ref(id);
      bool mods = n.attrs.mask || n.attrs.score; // their loads print through names_
      sigs.push_back(s + ") " +
                     (mods ? attrs_key(n.attrs, &names_) : attrs_[static_cast<std::size_t>(id)]));
    }
    for (NodeId id : touched)
      names_[static_cast<std::size_t>(id)].clear();
    return sigs;
  }

  std::vector<NodeId> results(const RepeatedBlocks &r) const {
    std::vector<NodeId> out;
    for (NodeId k = 0; k < r.size; ++k)
      for (int j = 0; j < r.count; ++j) {
        NodeId id = r.start + j * r.size + k, end = r.start + (j + 1) * r.size;
        const auto &users = users_[static_cast<std::size_t>(id)];
        if (!is_leaf(g_.node(id)) &&
            std::any_of(users.begin(), users.end(), [&](NodeId u) { return u >= end; })) {
          out.push_back(k);
          break;
        }
      }
    return out;
  }

  const Graph &g_;
  NodeId n_;
  std::vector<std::size_t> local_;
  std::vector<std::string> attrs_; // each node's attributes, mods' loads as "?"
  std::vector<NodeId> ops_before_; // ops among nodes [0, i)
  std::vector<std::string> names_;
  std::vector<std::vector<NodeId>> users_;
};

} // namespace

std::vector<RepeatedBlocks> find_repeated_blocks(const Graph &g, int min_ops) {
  return Finder(g).find(min_ops);
}

} // namespace qkv
