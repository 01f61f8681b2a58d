// Named dimensions (untyped). A dim is a name plus a static extent or kDynamic ("bound at
// run time from the tensors the user passes in"). Two tensor axes are the same dim iff
// they carry the same name; a graph keeps one extent per name. Derived dims such as
// H*Dh (merge_heads) or Dh1+Dh2 (concat) carry their formula in the name and their
// factors, so run-time binding can compute them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace qkv {

inline constexpr std::int64_t kDynamic = -1;

struct Dim {
  std::string name;
  std::int64_t extent = kDynamic;

  Dim() = default;
  Dim(std::string n, std::int64_t e = kDynamic) : name(std::move(n)), extent(e) {}

  bool is_static() const { return extent != kDynamic; }
  bool is_dynamic() const { return extent == kDynamic; }
  friend bool operator==(const Dim &a, const Dim &b) {
    return a.name == b.name && a.extent == b.extent;
  }
};

/// A dim of unknown name and extent: what the MLIR dialect's verifier gives the shape
/// rules for a `?` there (infer_unnamed, <qkv/dsl/op_table.hpp>), where dims have no names.
/// The rules take it as equal to any dim. No graph holds one: its name is not an
/// identifier, and Graph::dim and Graph::input refuse it.
Dim unknown_dim();
bool is_unknown(const Dim &d);

/// 'Dh'(64) or 'L'(dynamic): the form every error message uses (64 or ? for a dim without
/// a name, as the dialect's verifier has them).
std::string describe(const Dim &d);
/// (B, L, H*Dh) -- names only, for messages about a whole shape.
std::string describe(const std::vector<Dim> &dims);
/// (B=?, L=?, D=512) -- names and extents.
std::string describe_full(const std::vector<Dim> &dims);

/// The dim named "a*b": extent a*b, dynamic if either factor is; unknown if either is.
Dim product(const Dim &a, const Dim &b);
/// The dim named "a+b+...": the extents summed, dynamic if any is; unknown if any is.
Dim sum(const std::vector<Dim> &parts);

} // namespace qkv
