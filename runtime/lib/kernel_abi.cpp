// The kernel calling convention's functions (qkv/runtime/kernel_abi.hpp).
#include <qkv/runtime/kernel_abi.hpp>

#include <cctype>
#include <cstring>
#include <sstream>

#include <qkv/runtime/kernel.hpp>
#include <qkv/runtime/tensor.hpp>

namespace qkv::abi {

std::string function_name(std::string_view graph_name) {
  std::string s(graph_name);
  for (char &c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_')
      c = '_';
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0])))
    s = "g_" + s;
  return s;
}

namespace {

/// The packed params of a kPackedParams list: "<argument>:<panel columns>:<panel rows>:
/// <dtype>:<row multiple>" per packed argument, separated by ','.
std::vector<PackedParam> parse_packed_params(const std::string &text) {
  std::vector<PackedParam> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::vector<std::string> f;
    std::stringstream fields(item);
    for (std::string v; std::getline(fields, v, ':');)
      f.push_back(v);
    auto number = [](const std::string &v) {
      return !v.empty() && v.find_first_not_of("0123456789") == std::string::npos;
    };
    if (f.size() != 5 || !number(f[0]) || !number(f[1]) || !number(f[2]) || !number(f[4]) ||
        (f[3] != "f32" && f[3] != "f64" && f[3] != "bf16"))
      user_error("kernel: malformed packed param list '" + text + "' in its code");
    PackedParam p;
    p.argument = std::stoi(f[0]);
    p.panel_columns = std::stoi(f[1]);
    p.panel_rows = std::stoi(f[2]);
    p.dtype = f[3] == "bf16" ? DType::BF16 : f[3] == "f64" ? DType::F64 : DType::F32;
    p.row_multiple = std::stoi(f[4]);
    out.push_back(p);
  }
  return out;
}

std::vector<std::string> split_names(const char *list) {
  std::vector<std::string> out;
  std::stringstream names(list ? list : "");
  for (std::string name; std::getline(names, name, ',');)
    out.push_back(name);
  return out;
}

} // namespace

void apply_globals(const Globals &globals, KernelEntry &entry) {
  entry.packed_params = parse_packed_params(globals.packed_params ? globals.packed_params : "");
  if (globals.schedules && globals.schedule_runs) {
    entry.schedules = split_names(globals.schedules);
    entry.schedule_runs = globals.schedule_runs;
  }
  if (globals.attentions && globals.tile_counts) {
    entry.attentions = split_names(globals.attentions);
    entry.tile_counts = globals.tile_counts;
  }
}

std::vector<std::int64_t> descriptor(const Tensor &t) {
  std::vector<std::int64_t> d;
  auto p = reinterpret_cast<std::int64_t>(t.data());
  d.push_back(p);
  d.push_back(p);
  d.push_back(0);
  for (std::int64_t s : t.shape())
    d.push_back(s);
  for (std::int64_t s : t.strides())
    d.push_back(s);
  return d;
}

} // namespace qkv::abi

namespace {

/// An unranked memref as MLIR passes one: the rank and a pointer to the ranked descriptor
/// {allocated, aligned, offset, sizes[rank], strides[rank]}.
struct UnrankedMemref {
  std::int64_t rank;
  void *descriptor;
};

struct StridedView {
  char *data;
  const std::int64_t *sizes, *strides;
};

StridedView view_of(const UnrankedMemref &m, std::int64_t element_bytes) {
  auto *words = static_cast<std::int64_t *>(m.descriptor);
  char *aligned = reinterpret_cast<char *>(words[1]);
  return {aligned + words[2] * element_bytes, words + 3, words + 3 + m.rank};
}

} // namespace

extern "C" void qkv_memref_copy(std::int64_t element_bytes, void *source, void *destination) {
  const auto &src = *static_cast<const UnrankedMemref *>(source);
  const auto &dst = *static_cast<const UnrankedMemref *>(destination);
  StridedView s = view_of(src, element_bytes), d = view_of(dst, element_bytes);
  const std::int64_t rank = src.rank;
  std::int64_t count = 1;
  for (std::int64_t i = 0; i < rank; ++i)
    count *= s.sizes[i];
  if (count == 0)
    return;
  // Walk every element in row-major order, an index per dim (the last one fastest),
  // copying the innermost dim as one block where both sides are contiguous along it.
  bool rows = rank > 0 && s.strides[rank - 1] == 1 && d.strides[rank - 1] == 1;
  std::int64_t inner = rank == 0 ? 1 : s.sizes[rank - 1];
  std::vector<std::int64_t> index(static_cast<std::size_t>(rank), 0);
  for (;;) {
    std::int64_t so = 0, dof = 0;
    for (std::int64_t i = 0; i + (rows ? 1 : 0) < rank; ++i) {
      so += index[i] * s.strides[i];
      dof += index[i] * d.strides[i];
    }
    std::memcpy(d.data + dof * element_bytes, s.data + so * element_bytes,
                static_cast<std::size_t>(element_bytes * (rows ? inner : 1)));
    std::int64_t i = rank - (rows ? 2 : 1);
    for (; i >= 0; --i) {
      if (++index[i] < s.sizes[i])
        break;
      index[i] = 0;
    }
    if (i < 0)
      return;
  }
}
