// The qkv CLI's argument handling, shared by its commands.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "registry.hpp"

namespace qkv::cli {

struct Args {
  std::string cmd, name;         // name: the first positional argument after the command
  std::vector<std::string> args; // every positional argument after the command
  std::map<std::string, std::string> opts;
  /// Options that take a value but came last, without one (check_opts reports them, after
  /// the options the command does not take).
  std::set<std::string> valueless;
  bool help = false;
};

/// `qkv CMD NAME... --key value --key=value --flag`; -o is --out; --check, --checked, --json,
/// --no-baselines, --bench, --reference, --paged and --bias take no value.
Args parse(int argc, char **argv);
/// Throws qkv::Error naming an option that `a.cmd` does not take, then one that needs a
/// value and came without.
void check_opts(const Args &a, std::initializer_list<const char *> allowed);
/// --key as a number, not NaN, at least `min` when given (dflt when absent); throws
/// qkv::Error naming the option otherwise.
double number_opt(const Args &a, const char *key, double dflt,
                  std::optional<double> min = std::nullopt);
/// --key as an integer >= min, if given; throws qkv::Error naming the option otherwise.
std::optional<std::int64_t> int_opt(const Args &a, const char *key, std::int64_t min = 1);

/// The program's name in messages and usage: argv[0]'s last part ("qkv", "mytool").
const std::string &program();
void set_program(const std::string &argv0);

/// A command besides the tool's own (list, dump, run, bench, show, cache): the qkv binary
/// adds `embed`.
struct Command {
  std::string name;
  std::string summary; ///< its line in the usage: "SENTENCE...    sentence embeddings ..."
  const char *help = nullptr;
  std::function<int(const Args &)> run;
};
void add_command(Command c);
/// The usage's first line after the program's name ("compile, inspect and check ...").
void set_about(std::string about);

/// The options that set a graph's shape: batch, heads, kv-heads, seq, kv-len, head-dim,
/// window, paged, dims.
#define QKV_SHAPE_OPTS                                                                             \
  "batch", "heads", "kv-heads", "seq", "kv-len", "head-dim", "window", "paged", "dtype", "dims"

// The shape options, as dump, run and bench describe them.
#define QKV_SHAPE_HELP                                                                             \
  "  --batch B       batch size (dynamic dim B)\n"                                                 \
  "  --heads H       query heads (static)\n"                                                       \
  "  --kv-heads K    key/value heads, dividing H (static; default: H, or the graph's\n"            \
  "                  own ratio for gqa)\n"                                                         \
  "  --seq L         query length (dynamic dim L; static for attn_decode, 1 for decode)\n"         \
  "  --kv-len S      key/value length (dynamic dim S; default: L, or the graph's own for\n"        \
  "                  attn_decode and decode, where S is the rows cached; self-attention\n"         \
  "                  blocks have S = L)\n"                                                         \
  "  --head-dim Dh   head dim (static); the blocks' model dim is D = H * Dh; the variants\n"       \
  "                  of examples/gallery/ have heads, kv heads and head dim in their types\n"      \
  "  --window W      keys a sliding window sees, itself included (static; attn_window,\n"          \
  "                  sliding_window, dilated_window, longformer)\n"                                \
  "  --paged         decode: the KV cache in pages of 16 rows through a block table\n"             \
  "                  (paged_cache_view), each sequence's pages scattered over the pool,\n"         \
  "                  instead of one contiguous buffer of C = S rows (cache_view)\n"                \
  "  --dtype T      element type of the float inputs and weights: f32 (default), f16\n"       \
  "                  or bf16 (computed in f32, each node rounded to T); not the variants\n"       \
  "  --dims D=N,...  set dynamic dims by name (B, L, S; C for decode; any dim of a graph\n"       \
  "                  a tool registered), after the options above\n"

/// `base` with the shape options applied (--dims last: B=, L=, S= (C= for decode) set
/// batch, seq, kv_len; --paged sets paged, for graphs over a KV cache only). --seq also
/// sets kv_len and --heads kv_heads when base has them equal and the option for the other
/// is absent. Throws qkv::Error naming the option and the graph when a value does not fit
/// the graph.
gallery::GraphShape shape_from_opts(const gallery::Entry &e, const Args &a,
                                    const gallery::GraphShape &base);

/// "B=2,L=16" (the dynamic dims), or "(static)".
std::string dims_str(const DimBindings &b);

} // namespace qkv::cli
