// `qkv show NAME`: a graph's attention mask at element level, and its tiles as the fused
// kernel classifies them next to what they really hold, in the terminal and as a PNG;
// qkv::show, the same for a graph and inputs of a program's own.
//
// Two sources, kept apart on purpose: the element-level mask and the true class of each
// tile come from evaluating the mask with the reference interpreter (reference::MaskRows);
// the compiler's classes come from the compiler's own interval analysis (qkv::tile_map),
// on the same inputs, as the kernel classifies them on that call.
// Where they differ, the analysis is conservative: a tile it cannot prove empty is
// computed anyway, one it cannot prove full runs the mask per element.
//
// Nothing of size L x S is held: the mask is evaluated row by row into counts per tile,
// per cell of the terminal picture and per pixel of the PNG (at most kPixels a side).
// Past kExactPairs pairs only the tiles the analysis did not prove are evaluated (a proof
// is sound: tile_map_test checks it against every pair), and the output says so.
#include "show.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <qkv/compiler/tile_map.hpp>
#include <qkv/runtime/interpreter.hpp>
#include <qkv/tool.hpp>

#include "png.hpp"

namespace qkv::tool {

const char *const kShowHelp =
    "usage: qkv show NAME [--seq L] [--png FILE] [--q-tile T] [--kv-tile T] [--cols N]\n"
    "                     [shape options]\n"
    "\n"
    "Draws the mask of graph NAME's attention at batch 0, head 0, on the graph's inputs\n"
    "(random, with meaningful captured tensors such as document ids), at the graph's\n"
    "default shape changed by the shape options (--seq L: L queries and, for\n"
    "self-attention, L keys):\n"
    "  mask   each element (downsampled to at most N cells a side, --cols, default 64):\n"
    "         '#' every pair of the cell kept, '+' most, '-' some, '.' none;\n"
    "  tiles  each (query tile, key tile) of the fused kernel, as the kernel classifies\n"
    "         it on these inputs (qkv::tile_map with the inputs: the mask's interval\n"
    "         analysis, captured tensors read through their range tables) and as the mask\n"
    "         really fills it:\n"
    "         '#' full (run without mask code), '+' partial (mask per element), '.'\n"
    "         empty (skipped); more than N tiles a side are drawn N a side, a cell '#' or\n"
    "         '.' when all its tiles are, '+' otherwise. Tiles the analysis cannot prove\n"
    "         empty or full are counted.\n"
    "Tile sizes default to the kernel's for a mask on this host (--q-tile, --kv-tile set\n"
    "them, as qkv::Schedule does). With --png FILE it also writes a PNG: the mask on the\n"
    "left (kept pairs dark); on the right the same pairs over the tiles, coloured by the\n"
    "compiler's class: grey skipped, green full, orange partial, red partial although\n"
    "empty (the analysis is conservative there); kept pairs are dark blue where the\n"
    "kernel runs no mask code, light blue where it evaluates the mask. Past 1024 pairs a\n"
    "side a pixel is a block of pairs, shaded by the share it keeps.\n"
    "Past 8192 x 8192 pairs only the tiles the analysis does not prove empty or full are\n"
    "evaluated (the proofs are sound); progress goes to stderr when that is slow.\n"
    "\n"
    "shape options:\n" QKV_SHAPE_HELP;

namespace {

constexpr std::int64_t kExactPairs = std::int64_t{8192} * 8192; // every pair evaluated
constexpr std::int64_t kPixels = 1024; // the PNG's mask is at most this many pixels a side

/// Counts of kept pairs over an nr x nc partition of len_q x len_kv pairs: cell (r, c)
/// holds the rows [r * len_q / nr, (r + 1) * len_q / nr) and the keys likewise.
class Grid {
public:
  Grid(std::int64_t len_q, std::int64_t len_kv, std::int64_t nr, std::int64_t nc)
      : rows_{len_q, nr, cells(len_q, nr)}, cols_{len_kv, nc, cells(len_kv, nc)},
        kept_(static_cast<std::size_t>(nr * nc), 0) {}

  std::int64_t rows() const { return rows_.n; }
  std::int64_t cols() const { return cols_.n; }
  std::int64_t kept(std::int64_t r, std::int64_t c) const { return kept_[r * cols_.n + c]; }
  /// The pairs cell (r, c) holds.
  std::int64_t pairs(std::int64_t r, std::int64_t c) const {
    return (rows_.end(r) - rows_.begin(r)) * (cols_.end(c) - cols_.begin(c));
  }
  std::int64_t cell_of_row(std::int64_t i) const { return rows_.cell[i]; }
  std::int64_t cell_of_col(std::int64_t j) const { return cols_.cell[j]; }
  /// Query row i keeps keys [j0, j1) whose flags are keep[0 .. j1 - j0).
  void add_row(std::int64_t i, std::int64_t j0, std::int64_t j1, const std::uint8_t *keep) {
    std::int64_t *row = &kept_[rows_.cell[i] * cols_.n];
    for (std::int64_t j = j0; j < j1; ++j)
      row[cols_.cell[j]] += keep[j - j0];
  }
  /// Every pair of rows [i0, i1) x keys [j0, j1) kept.
  void add_block(std::int64_t i0, std::int64_t i1, std::int64_t j0, std::int64_t j1) {
    for (std::int64_t i = i0; i < i1;) {
      std::int64_t r = rows_.cell[i], i_end = std::min(i1, rows_.end(r));
      for (std::int64_t j = j0; j < j1;) {
        std::int64_t c = cols_.cell[j], j_end = std::min(j1, cols_.end(c));
        kept_[r * cols_.n + c] += (i_end - i) * (j_end - j);
        j = j_end;
      }
      i = i_end;
    }
  }

private:
  struct Axis {
    std::int64_t len, n;
    std::vector<std::int64_t> cell; // index -> its cell
    std::int64_t begin(std::int64_t r) const { return r * len / n; }
    std::int64_t end(std::int64_t r) const { return (r + 1) * len / n; }
  };
  static std::vector<std::int64_t> cells(std::int64_t len, std::int64_t n) {
    std::vector<std::int64_t> out(static_cast<std::size_t>(len));
    for (std::int64_t r = 0; r < n; ++r)
      for (std::int64_t i = r * len / n; i < (r + 1) * len / n; ++i)
        out[i] = r;
    return out;
  }

  Axis rows_, cols_;
  std::vector<std::int64_t> kept_;
};

struct Picture {
  std::string title, mask_text;
  std::int64_t len_q = 0, len_kv = 0, kept = 0;
  TileMap tiles;                 // the compiler's classes
  std::vector<TileKind> truth;   // the tiles' true classes
  bool all_pairs = true;         // every pair evaluated (else: the unproved tiles' only)
  Grid cells{0, 0, 0, 0};        // the terminal picture
  Grid pixels{0, 0, 0, 0};       // the PNG's mask
};

const Node &attention_of(const Graph &g) {
  for (const Node &n : g.nodes())
    if (n.op == OpKind::Attention)
      return n;
  user_error("qkv show: graph '" + g.name() + "' has no attention op, so no mask to draw");
}

/// Prints progress to stderr every few seconds once the evaluation has run for a while.
class Progress {
public:
  explicit Progress(std::int64_t total) : total_(total), start_(now()), last_(start_) {}
  void at(std::int64_t done) {
    double t = now();
    if (t - last_ < 2.0)
      return;
    last_ = t;
    std::fprintf(stderr, "[qkv show] evaluating the mask: %.0f%% of %lld pairs, %.0f s\n",
                 100.0 * static_cast<double>(done) / static_cast<double>(total_),
                 static_cast<long long>(total_), t - start_);
  }

private:
  static double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  std::int64_t total_;
  double start_, last_;
};

Picture make_picture(const Graph &g, const DimBindings &dims, const TensorMap &in,
                     const std::string &title, const ShowOptions &o) {
  Picture p;
  const Node &att = attention_of(g);
  reference::MaskRows mask(g, in, att.id, 0, 0);
  p.len_q = mask.len_q();
  p.len_kv = mask.len_kv();
  std::vector<std::string> names;
  for (const Node &n : g.nodes())
    names.push_back(n.name);
  p.mask_text = att.attrs.mask ? to_string(att.attrs.mask, &names) : "(none: every pair kept)";
  TileMapOptions to;
  to.attention = att.name;
  to.q_tile = o.q_tile;
  to.kv_tile = o.kv_tile;
  to.inputs = &in; // the map the kernel makes on these inputs (block maps from the data)
  p.tiles = tile_map(g, dims, to);
  p.title = title;
  const TileMap &t = p.tiles;
  std::int64_t cols = std::max<std::int64_t>(8, o.cols);
  p.cells = Grid(p.len_q, p.len_kv, std::min(p.len_q, cols), std::min(p.len_kv, cols));
  p.pixels = Grid(p.len_q, p.len_kv, std::min(p.len_q, kPixels), std::min(p.len_kv, kPixels));
  p.all_pairs = p.len_q * p.len_kv <= kExactPairs;
  // The pairs to evaluate, for the progress lines.
  std::int64_t total = 0;
  auto bounds = [&](std::int64_t r, std::int64_t c) {
    return std::array<std::int64_t, 4>{r * t.q_tile, std::min(p.len_q, (r + 1) * t.q_tile),
                                       c * t.kv_tile, std::min(p.len_kv, (c + 1) * t.kv_tile)};
  };
  for (std::int64_t r = 0; r < t.rows; ++r)
    for (std::int64_t c = 0; c < t.cols; ++c)
      if (p.all_pairs || t.at(r, c) == TileKind::Partial) {
        auto [i0, i1, j0, j1] = bounds(r, c);
        total += (i1 - i0) * (j1 - j0);
      }
  Progress progress(total);
  std::int64_t done = 0;
  std::vector<std::uint8_t> keep(static_cast<std::size_t>(t.kv_tile));
  p.truth.assign(t.tiles.size(), TileKind::Empty);
  for (std::int64_t r = 0; r < t.rows; ++r)
    for (std::int64_t c = 0; c < t.cols; ++c) {
      auto [i0, i1, j0, j1] = bounds(r, c);
      std::int64_t all = (i1 - i0) * (j1 - j0), kept = 0;
      TileKind proved = t.at(r, c);
      if (!p.all_pairs && proved != TileKind::Partial) {
        kept = proved == TileKind::Full ? all : 0;
        if (kept) {
          p.cells.add_block(i0, i1, j0, j1);
          p.pixels.add_block(i0, i1, j0, j1);
        }
      } else {
        for (std::int64_t i = i0; i < i1; ++i) {
          mask.row(i, j0, j1, keep.data());
          kept += std::count(keep.begin(), keep.begin() + (j1 - j0), std::uint8_t{1});
          p.cells.add_row(i, j0, j1, keep.data());
          p.pixels.add_row(i, j0, j1, keep.data());
        }
        done += all;
        progress.at(done);
      }
      p.kept += kept;
      p.truth[r * t.cols + c] =
          kept == 0 ? TileKind::Empty : kept == all ? TileKind::Full : TileKind::Partial;
    }
  return p;
}

void draw_mask(std::ostream &os, const Picture &p) {
  const Grid &g = p.cells;
  os << "mask (" << p.len_q << " x " << p.len_kv << "; a cell is "
     << (p.len_q + g.rows() - 1) / g.rows() << " x " << (p.len_kv + g.cols() - 1) / g.cols()
     << " pairs: '#' all kept, '+' most, '-' some, '.' none)\n";
  for (std::int64_t r = 0; r < g.rows(); ++r) {
    std::string line;
    for (std::int64_t c = 0; c < g.cols(); ++c) {
      std::int64_t kept = g.kept(r, c), all = g.pairs(r, c);
      line += kept == 0 ? '.' : kept == all ? '#' : 2 * kept >= all ? '+' : '-';
    }
    os << "  " << line << "\n";
  }
}

/// The tile classes of `kinds` (rows x cols) drawn at most n cells a side: a cell is '#'
/// or '.' when all its tiles are full or empty, '+' otherwise.
std::vector<std::string> tile_lines(const std::vector<TileKind> &kinds, std::int64_t rows,
                                    std::int64_t cols, std::int64_t n) {
  std::int64_t nr = std::min(rows, n), nc = std::min(cols, n);
  std::vector<std::string> out;
  for (std::int64_t r = 0; r < nr; ++r) {
    std::string line;
    for (std::int64_t c = 0; c < nc; ++c) {
      bool full = true, empty = true;
      for (std::int64_t i = r * rows / nr; i < (r + 1) * rows / nr; ++i)
        for (std::int64_t j = c * cols / nc; j < (c + 1) * cols / nc; ++j) {
          full = full && kinds[i * cols + j] == TileKind::Full;
          empty = empty && kinds[i * cols + j] == TileKind::Empty;
        }
      line += full ? '#' : empty ? '.' : '+';
    }
    out.push_back(line);
  }
  return out;
}

void draw_tiles(std::ostream &os, const Picture &p, std::int64_t n) {
  const TileMap &t = p.tiles;
  std::int64_t nr = std::min(t.rows, n), nc = std::min(t.cols, n);
  os << "tiles (" << t.q_tile << " queries x " << t.kv_tile << " keys, " << t.rows << " x "
     << t.cols;
  if (nr < t.rows || nc < t.cols)
    os << ", drawn " << nr << " x " << nc << ": a cell is " << (t.rows + nr - 1) / nr << " x "
       << (t.cols + nc - 1) / nc << " tiles";
  os << "; '#' full, '+' partial, '.' empty)\n";
  std::string pad(static_cast<std::size_t>(std::max<std::int64_t>(0, nc - 8)), ' ');
  os << "  compiler" << pad << "   true\n";
  std::vector<std::string> a = tile_lines(t.tiles, t.rows, t.cols, n),
                           b = tile_lines(p.truth, t.rows, t.cols, n);
  for (std::size_t r = 0; r < a.size(); ++r)
    os << "  " << a[r] << std::string(a[r].size() < 8 ? 8 - a[r].size() : 0, ' ') << "   " << b[r]
       << "\n";
}

/// "1 empty tile", "3 empty tiles".
std::string tiles(std::int64_t n, const char *kind) {
  return std::to_string(n) + " " + kind + (n == 1 ? " tile" : " tiles");
}

void summarize(std::ostream &os, const Picture &p) {
  const TileMap &t = p.tiles;
  auto truly = [&](TileKind k) { return std::count(p.truth.begin(), p.truth.end(), k); };
  std::int64_t unproved_empty = 0, unproved_full = 0;
  for (std::size_t i = 0; i < p.truth.size(); ++i) {
    unproved_empty += p.truth[i] == TileKind::Empty && t.tiles[i] != TileKind::Empty;
    unproved_full += p.truth[i] == TileKind::Full && t.tiles[i] != TileKind::Full;
  }
  os << "compiler: " << t.count(TileKind::Empty) << " empty (skipped), " << t.count(TileKind::Full)
     << " full, " << t.count(TileKind::Partial) << " partial; true: " << truly(TileKind::Empty)
     << " empty, " << truly(TileKind::Full) << " full, " << truly(TileKind::Partial)
     << " partial\n";
  if (!p.all_pairs)
    os << "(past " << kExactPairs << " pairs the mask was evaluated only in the "
       << t.count(TileKind::Partial)
       << " tiles the analysis does not prove; the proved ones hold what it proves)\n";
  if (!t.analysed && p.mask_text.front() != '(')
    os << "the interval analysis finds nothing to follow in this mask: every tile runs it per "
          "element\n";
  if (unproved_empty + unproved_full == 0)
    os << "the analysis is exact here: it proves every empty and every full tile\n";
  else
    os << "conservative: " << tiles(unproved_empty, "empty") << " not proved empty "
       << "(computed anyway), " << tiles(unproved_full, "full")
       << " not proved full (mask per element)\n";
}

constexpr Rgb kKept{31, 58, 147}, kKeptMasked{96, 140, 220}, kGrid{160, 160, 160},
    kEmpty{236, 236, 236}, kFull{190, 228, 182}, kPartial{253, 205, 150}, kMissed{246, 120, 100};

/// a where `share` is 0, b where it is 1.
Rgb blend(Rgb a, Rgb b, double share) {
  auto mix = [&](std::uint8_t x, std::uint8_t y) {
    return static_cast<std::uint8_t>(x + (static_cast<double>(y) - x) * share + 0.5);
  };
  return {mix(a.r, b.r), mix(a.g, b.g), mix(a.b, b.b)};
}

/// Left: the mask; right: the same pairs over the tiles, coloured by the compiler's class.
/// A pixel (or a square of scale x scale pixels, below 512 pairs a side) is one cell of
/// the pixel grid: one pair up to kPixels a side, a block of pairs past it.
Image render(const Picture &p) {
  const Grid &px = p.pixels;
  const TileMap &t = p.tiles;
  int scale = static_cast<int>(std::max<std::int64_t>(1, 512 / std::max(p.len_q, p.len_kv)));
  int w = static_cast<int>(px.cols()) * scale, h = static_cast<int>(px.rows()) * scale, gap = 16;
  Image img(2 * w + gap, h);
  // The tile of the pair at a grid cell's start, and the pixel column of a key index.
  auto tile_at = [&](std::int64_t r, std::int64_t c) {
    std::int64_t i = r * p.len_q / px.rows(), j = c * p.len_kv / px.cols();
    return (i / t.q_tile) * t.cols + j / t.kv_tile;
  };
  for (std::int64_t r = 0; r < px.rows(); ++r)
    for (std::int64_t c = 0; c < px.cols(); ++c) {
      std::int64_t tile = tile_at(r, c);
      TileKind k = t.tiles[tile];
      bool missed = k != TileKind::Empty && p.truth[tile] == TileKind::Empty;
      Rgb bg = missed                 ? kMissed
               : k == TileKind::Empty ? kEmpty
               : k == TileKind::Full  ? kFull
                                      : kPartial;
      double share = static_cast<double>(px.kept(r, c)) / static_cast<double>(px.pairs(r, c));
      int x = static_cast<int>(c) * scale, y = static_cast<int>(r) * scale;
      img.fill(x, y, x + scale, y + scale, blend(Rgb{}, kKept, share));
      img.fill(w + gap + x, y, w + gap + x + scale, y + scale,
               blend(bg, k == TileKind::Full ? kKept : kKeptMasked, share));
    }
  // Tile edges, where tiles are at least 4 pixels apart.
  double q_px = static_cast<double>(t.q_tile) * px.rows() / p.len_q * scale,
         kv_px = static_cast<double>(t.kv_tile) * px.cols() / p.len_kv * scale;
  if (q_px >= 4)
    for (std::int64_t r = 1; r < t.rows; ++r) {
      int y = static_cast<int>(px.cell_of_row(r * t.q_tile)) * scale;
      img.fill(w + gap, y, 2 * w + gap, y + 1, kGrid);
    }
  if (kv_px >= 4)
    for (std::int64_t c = 1; c < t.cols; ++c) {
      int x = w + gap + static_cast<int>(px.cell_of_col(c * t.kv_tile)) * scale;
      img.fill(x, 0, x + 1, h, kGrid);
    }
  return img;
}

std::string draw(const Picture &p, const ShowOptions &o) {
  std::ostringstream os;
  std::int64_t n = std::max<std::int64_t>(8, o.cols);
  os << "qkv show " << p.title << "\n"
     << "mask_mod: " << p.mask_text << "\n"
     << "kept " << p.kept << " of " << p.len_q * p.len_kv << " pairs"
     << (p.all_pairs ? "" : " (the proved tiles counted whole)") << "\n\n";
  draw_mask(os, p);
  os << "\n";
  draw_tiles(os, p, n);
  summarize(os, p);
  if (!o.png.empty()) {
    write_png(render(p), o.png);
    os << "wrote " << o.png << "\n";
  }
  return os.str();
}

} // namespace

int cmd_show(const cli::Args &a) {
  cli::check_opts(a, {"png", "q-tile", "kv-tile", "cols", QKV_SHAPE_OPTS});
  const gallery::Entry &e = gallery::registered(a.name);
  gallery::GraphShape s = cli::shape_from_opts(e, a, e.shape);
  ShowOptions o;
  o.cols = cli::int_opt(a, "cols", 8).value_or(64);
  o.q_tile = static_cast<int>(cli::int_opt(a, "q-tile").value_or(0));
  o.kv_tile = static_cast<int>(cli::int_opt(a, "kv-tile").value_or(0));
  o.png = a.opts.count("png") ? a.opts.at("png") : "";
  Graph g = e.build(s);
  std::cout << draw(make_picture(g, e.dims(s), e.inputs(g, s),
                                 e.name + ": " + e.sizes(s) + ", batch 0, head 0", o),
                    o);
  return 0;
}

std::string show(const Graph &g, const TensorMap &inputs, const ShowOptions &options) {
  DimBindings dims = bind_dims(g, signature(inputs));
  std::string sizes;
  for (const auto &[d, n] : dims)
    sizes += (sizes.empty() ? "" : " ") + d + "=" + std::to_string(n);
  return draw(make_picture(g, dims, inputs, g.name() + ": " + sizes + ", batch 0, head 0", options),
              options);
}

} // namespace qkv::tool
