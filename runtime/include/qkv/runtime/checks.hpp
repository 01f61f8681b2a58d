// Checks in compiled code (CompileOptions::checked, on by default on the CPU; QKV_CHECKED=0
// turns them off). A checked kernel guards every load a mod makes from a captured tensor
// and every integer division in a mod by a divisor that is not a constant, unless the
// compiler proves it safe from the dims (Site::proven): an index out of bounds is clamped
// (nothing is read outside a tensor), a divisor of 0 replaced, and either reported through
// qkv_check_failed. Kernel::run then raises the error the reference interpreter gives for
// the same load. The compiler numbers the sites with check_sites(),
// so the site a kernel reports is an index into it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <qkv/dsl/graph.hpp>

namespace qkv::checks {

/// The most values one check reports: b, h, q, kv, then the indices and dims of a
/// captured tensor of rank <= 6 (a checked compile refuses a load from a higher rank),
/// or the dividend and divisor.
inline constexpr int kCheckValues = 16;

/// One place a checked kernel checks: a load, or an integer division, in a mod.
struct Site {
  NodeId node = -1;               ///< the op whose mod it is
  const ExprNode *expr = nullptr; ///< the Load, or the integer Div or Mod
  const char *mod = nullptr;      ///< "score_mod" or "mask_mod"
  /// Proved safe when compiling: the ranges of the mod's integers, from the op's dims
  /// alone, keep every index of the load within its tensor (or the divisor away from 0)
  /// at every position, whatever the captured tensors hold. Compiled code carries no check
  /// for a proved site (docs/compiler.md, "Checked kernels").
  bool proven = false;
};

/// Every site of g in a fixed order: nodes in order; an attention's score_mod before its
/// mask; a mod's sites in the order the interpreter evaluates them (arguments first).
std::vector<Site> sites(const Graph &g);

/// Whether a checked kernel of g checks anything: a site that is not proved. A kernel
/// with none is the unchecked one.
bool needs_checks(const Graph &g);

/// Collects what a checked kernel reports during one run. Checked runs in a process take
/// turns (a lock held for the Run's lifetime): the kernel's report function has no other
/// way to find its run.
class Run {
public:
  explicit Run(const Graph &g);
  ~Run();
  Run(const Run &) = delete;
  Run &operator=(const Run &) = delete;
  /// The interpreter's message for the first failure in its evaluation order, if any.
  std::optional<std::string> failure() const;
};

} // namespace qkv::checks

/// What a checked kernel calls for a failed check: the site, how many values it has, and
/// the values (kCheckValues slots; those past `count` are 0). Safe to call from the
/// kernel's threads at once.
extern "C" void qkv_check_failed(std::int64_t site, std::int64_t count, std::int64_t v0,
                                 std::int64_t v1, std::int64_t v2, std::int64_t v3,
                                 std::int64_t v4, std::int64_t v5, std::int64_t v6,
                                 std::int64_t v7, std::int64_t v8, std::int64_t v9,
                                 std::int64_t v10, std::int64_t v11, std::int64_t v12,
                                 std::int64_t v13, std::int64_t v14, std::int64_t v15);
