#include "cli.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace qkv::cli {

Args parse(int argc, char **argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    if (s == "-o") // `qkv export NAME -o DIR`
      s = "--out";
    if (s == "--help" || s == "-h") {
      a.help = true;
    } else if (s.rfind("--", 0) == 0) {
      auto eq = s.find('=');
      std::string key = s.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      std::string val;
      bool flag = key == "check" || key == "json" || key == "no-baselines" || key == "bench" ||
                  key == "reference" || key == "paged" || key == "checked" || key == "unchecked" ||
                  key == "bias" || key == "eager";
      if (eq != std::string::npos)
        val = s.substr(eq + 1);
      else if (!flag && i + 1 < argc)
        val = argv[++i];
      else if (!flag)
        a.valueless.insert(key);
      a.opts[key] = val;
    } else if (a.cmd.empty()) {
      a.cmd = s;
    } else {
      if (a.args.empty())
        a.name = s;
      a.args.push_back(s);
    }
  }
  return a;
}

void check_opts(const Args &a, std::initializer_list<const char *> allowed) {
  for (const auto &[k, v] : a.opts)
    if (std::find_if(allowed.begin(), allowed.end(), [&](const char *s) { return k == s; }) ==
        allowed.end())
      user_error(program() + " " + a.cmd + ": unknown option --" + k + " (see " + program() + " " +
                 a.cmd + " --help)");
  if (!a.valueless.empty())
    user_error("option --" + *a.valueless.begin() + " needs a value");
}

double number_opt(const Args &a, const char *key, double dflt, std::optional<double> min) {
  auto it = a.opts.find(key);
  if (it == a.opts.end())
    return dflt;
  char *end = nullptr;
  double v = std::strtod(it->second.c_str(), &end);
  if (end == it->second.c_str() || *end != '\0' || std::isnan(v))
    user_error(std::string("--") + key + ": not a number: '" + it->second + "'");
  if (min && !(v >= *min)) {
    std::ostringstream m;
    m << *min;
    user_error(std::string("--") + key + ": expected a number of at least " + m.str() + ", got '" +
               it->second + "'");
  }
  return v;
}

namespace {
std::string g_program = "qkv";
} // namespace

const std::string &program() { return g_program; }

void set_program(const std::string &argv0) {
  std::string p = argv0.substr(argv0.find_last_of('/') + 1);
  g_program = p.empty() ? "qkv" : p;
}

std::optional<std::int64_t> int_opt(const Args &a, const char *key, std::int64_t min) {
  auto it = a.opts.find(key);
  if (it == a.opts.end())
    return std::nullopt;
  const std::string &s = it->second;
  char *end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || v < min)
    user_error(std::string("--") + key + ": expected an integer of at least " +
               std::to_string(min) + ", got '" + s + "'");
  return v;
}

namespace {

DimBindings parse_dims(const std::string &text) {
  DimBindings b;
  std::stringstream ss(text);
  std::string kv;
  while (std::getline(ss, kv, ',')) {
    auto eq = kv.find('=');
    if (eq == std::string::npos)
      user_error("--dims: expected D=N, got '" + kv + "'");
    std::string d = kv.substr(0, eq);
    char *end = nullptr;
    long long n = std::strtoll(kv.c_str() + eq + 1, &end, 10);
    if (*end != '\0' || n < 1)
      user_error("--dims: extent of '" + d + "' must be a positive integer, got '" +
                 kv.substr(eq + 1) + "'");
    b[d] = n;
  }
  return b;
}

/// A user's graph: the static sizes and the dtype are in its code, and a shape option
/// sets the dynamic dim it names when the graph has it.
void check_user_graph_opts(const gallery::Entry &e, const Args &a) {
  for (const char *key : {"heads", "kv-heads", "head-dim", "dtype"})
    if (a.opts.count(key))
      user_error(std::string("--") + key + ": graph '" + e.name +
                 "' has its static sizes and dtype in its own code (" +
                 (e.statics.empty() ? std::string("no static dims") : e.statics) +
                 "); only its dynamic dims take options");
  const std::pair<const char *, const char *> sets[] = {
      {"batch", "B"}, {"seq", "L"}, {"kv-len", "S"}};
  for (auto [key, dim] : sets)
    if (a.opts.count(key) &&
        std::find(e.dynamic.begin(), e.dynamic.end(), dim) == e.dynamic.end()) {
      std::string names;
      for (const std::string &x : e.dynamic)
        names += (names.empty() ? "" : ",") + x + "=N";
      user_error(std::string("--") + key + " sets dim " + dim + ", which graph '" + e.name +
                 "' does not have" +
                 (names.empty() ? std::string(" (it has no dynamic dims)")
                                : "; set its dynamic dims with --dims " + names));
    }
}

} // namespace

gallery::GraphShape shape_from_opts(const gallery::Entry &e, const Args &a,
                                    const gallery::GraphShape &base) {
  gallery::GraphShape s = base;
  auto set = [&](const char *key, std::int64_t &field) {
    if (auto v = int_opt(a, key))
      field = *v;
  };
  set("batch", s.batch);
  set("seq", s.seq);
  set("heads", s.heads);
  set("kv-len", s.kv_len);
  set("kv-heads", s.kv_heads);
  set("head-dim", s.head_dim);
  set("window", s.window);
  if (!a.opts.count("kv-len") && base.kv_len == base.seq)
    s.kv_len = s.seq;
  if (!a.opts.count("kv-heads") && base.kv_heads == base.heads)
    s.kv_heads = s.heads;
  if (a.opts.count("dims"))
    s = e.with_dims(s, parse_dims(a.opts.at("dims")));
  if (a.opts.count("window") && !e.uses_window())
    user_error("--window: graph '" + e.name + "' has no sliding-window mask (attn_window has)");
  if (a.opts.count("paged")) {
    if (!a.opts.at("paged").empty())
      user_error("--paged takes no value, got '" + a.opts.at("paged") + "'");
    if (!e.workload.cache)
      user_error("--paged: graph '" + e.name + "' reads no KV cache (decode does)");
    s.paged = true;
  }
  if (e.user)
    check_user_graph_opts(e, a);
  if (a.opts.count("dtype")) {
    const std::string &t = a.opts.at("dtype");
    if (t != "f32" && t != "f16" && t != "bf16")
      user_error("--dtype must be f32, f16 or bf16, got '" + t + "'");
    s.dtype = parse_dtype(t);
    if (e.variant && s.dtype != DType::F32)
      user_error("--dtype: graph '" + e.name + "' is written in the typed DSL with f32 in its "
                 "types (examples/gallery/" + e.name + ".cpp)");
  }
  if (e.variant)
    for (const char *key : {"heads", "kv-heads", "head-dim"}) {
      std::int64_t fixed = std::string(key) == "heads"      ? base.heads
                           : std::string(key) == "kv-heads" ? base.kv_heads
                                                            : base.head_dim;
      if (auto v = int_opt(a, key); v && *v != fixed)
        user_error(std::string("--") + key + ": graph '" + e.name +
                   "' is written in the typed DSL with " + std::to_string(fixed) +
                   " in its types (examples/gallery/" + e.name + ".cpp); it cannot be " +
                   std::to_string(*v));
    }
  if (e.self_attention()) {
    if (a.opts.count("kv-len") && s.kv_len != s.seq)
      user_error("--kv-len: graph '" + e.name +
                 "' is self-attention (keys come from the queries' sequence), so its key "
                 "length is --seq (" +
                 std::to_string(s.seq) + "), not " + std::to_string(s.kv_len));
    s.kv_len = s.seq;
  }
  if (s.heads % s.kv_heads != 0)
    user_error("--kv-heads: " + std::to_string(s.kv_heads) + " kv heads must divide the " +
               std::to_string(s.heads) + " query heads of graph '" + e.name + "'");
  return s;
}

std::string dims_str(const DimBindings &b) {
  std::string s;
  for (const auto &[k, v] : b)
    s += (s.empty() ? "" : ",") + k + "=" + std::to_string(v);
  return s.empty() ? "(static)" : s;
}

} // namespace qkv::cli
