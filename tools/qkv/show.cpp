// `qkv show NAME`: a graph's attention mask at element level, and its tiles as the fused
// kernel classifies them next to what they really hold, in the terminal and as a PNG.
//
// Two sources, kept apart on purpose: the element-level mask and the true class of each
// tile come from evaluating the mask with the reference interpreter
// (reference::mask_map); the compiler's classes come from the compiler's own interval
// analysis (qkv::tile_map). Where they differ, the analysis is conservative: a tile it
// cannot prove empty is computed anyway, one it cannot prove full runs the mask per
// element.
#include "show.hpp"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <qkv/compiler/tile_map.hpp>
#include <qkv/runtime/interpreter.hpp>

#include "png.hpp"

namespace qkv::tool {

const char *const kShowHelp =
    "usage: qkv show NAME [--seq L] [--png FILE] [--q-tile T] [--kv-tile T] [--cols N]\n"
    "                     [shape options]\n"
    "\n"
    "Draws the mask of graph NAME's attention at batch 0, head 0, on the graph's inputs\n"
    "(random, with meaningful captured tensors such as document ids), at the gallery's\n"
    "default shape changed by the shape options (--seq L: L queries and, for\n"
    "self-attention, L keys):\n"
    "  mask   each element (downsampled to at most N cells a side, --cols, default 64):\n"
    "         '#' every pair of the cell kept, '+' most, '-' some, '.' none;\n"
    "  tiles  each (query tile, key tile) of the fused kernel, as the compiler's interval\n"
    "         analysis classifies it (qkv::tile_map) and as the mask really fills it:\n"
    "         '#' full (run without mask code), '+' partial (mask per element), '.'\n"
    "         empty (skipped). Tiles the analysis cannot prove empty or full are counted.\n"
    "Tile sizes default to the kernel's for a mask on this host (--q-tile, --kv-tile set\n"
    "them, as qkv::Schedule does). With --png FILE it also writes a PNG: the mask on the\n"
    "left (kept pairs dark); on the right the same pairs over the tiles, coloured by the\n"
    "compiler's class: grey skipped, green full, orange partial, red partial although\n"
    "empty (the analysis is conservative there); kept pairs are dark blue where the\n"
    "kernel runs no mask code, light blue where it evaluates the mask.\n"
    "\n"
    "shape options:\n" QKV_SHAPE_HELP;

namespace {

struct Picture {
  std::string title, mask_text;
  reference::MaskMap mask;
  TileMap tiles;               // the compiler's classes
  std::vector<TileKind> truth; // the tiles' true classes
};

TileKind true_kind(const reference::MaskMap &m, const TileMap &t, std::int64_t r, std::int64_t c) {
  std::int64_t kept = 0, all = 0;
  for (std::int64_t i = r * t.q_tile; i < std::min(m.len_q, (r + 1) * t.q_tile); ++i)
    for (std::int64_t j = c * t.kv_tile; j < std::min(m.len_kv, (c + 1) * t.kv_tile); ++j) {
      kept += m.at(i, j);
      ++all;
    }
  return kept == 0 ? TileKind::Empty : kept == all ? TileKind::Full : TileKind::Partial;
}

const Node &attention_of(const Graph &g) {
  for (const Node &n : g.nodes())
    if (n.op == OpKind::Attention)
      return n;
  user_error("qkv show: graph '" + g.name() + "' has no attention op, so no mask to draw");
}

Picture make_picture(const gallery::Entry &e, const gallery::GraphShape &s, const cli::Args &a) {
  Picture p;
  Graph g = e.build(s);
  DimBindings dims = e.dims(s);
  const Node &att = attention_of(g);
  TensorMap in = e.inputs(g, s);
  p.mask = reference::mask_map(g, in, att.id, 0, 0);
  std::vector<std::string> names;
  for (const Node &n : g.nodes())
    names.push_back(n.name);
  p.mask_text = att.attrs.mask ? to_string(att.attrs.mask, &names) : "(none: every pair kept)";
  TileMapOptions o;
  o.attention = att.name;
  o.q_tile = static_cast<int>(cli::int_opt(a, "q-tile").value_or(0));
  o.kv_tile = static_cast<int>(cli::int_opt(a, "kv-tile").value_or(0));
  p.tiles = tile_map(g, dims, o);
  for (std::int64_t r = 0; r < p.tiles.rows; ++r)
    for (std::int64_t c = 0; c < p.tiles.cols; ++c)
      p.truth.push_back(true_kind(p.mask, p.tiles, r, c));
  p.title = e.name + ": " + e.sizes(s) + ", batch 0, head 0";
  return p;
}

char kind_char(TileKind k) {
  return k == TileKind::Full ? '#' : k == TileKind::Partial ? '+' : '.';
}

void draw_mask(const reference::MaskMap &m, std::int64_t cols) {
  std::int64_t nr = std::min(m.len_q, cols), nc = std::min(m.len_kv, cols);
  std::cout << "mask (" << m.len_q << " x " << m.len_kv << "; a cell is " << (m.len_q + nr - 1) / nr
            << " x " << (m.len_kv + nc - 1) / nc
            << " pairs: '#' all kept, '+' most, '-' some, '.' none)\n";
  for (std::int64_t r = 0; r < nr; ++r) {
    std::string line;
    for (std::int64_t c = 0; c < nc; ++c) {
      std::int64_t kept = 0, all = 0;
      for (std::int64_t i = r * m.len_q / nr; i < (r + 1) * m.len_q / nr; ++i)
        for (std::int64_t j = c * m.len_kv / nc; j < (c + 1) * m.len_kv / nc; ++j) {
          kept += m.at(i, j);
          ++all;
        }
      line += kept == 0 ? '.' : kept == all ? '#' : 2 * kept >= all ? '+' : '-';
    }
    std::cout << "  " << line << "\n";
  }
}

void draw_tiles(const Picture &p) {
  const TileMap &t = p.tiles;
  std::cout << "tiles (" << t.q_tile << " queries x " << t.kv_tile << " keys, " << t.rows << " x "
            << t.cols << "; '#' full, '+' partial, '.' empty)\n";
  std::string pad(static_cast<std::size_t>(std::max<std::int64_t>(0, t.cols - 8)), ' ');
  std::cout << "  compiler" << pad << "   true\n";
  for (std::int64_t r = 0; r < t.rows; ++r) {
    std::string a, b;
    for (std::int64_t c = 0; c < t.cols; ++c) {
      a += kind_char(t.at(r, c));
      b += kind_char(p.truth[r * t.cols + c]);
    }
    std::cout << "  " << a << std::string(a.size() < 8 ? 8 - a.size() : 0, ' ') << "   " << b
              << "\n";
  }
}

/// "1 empty tile", "3 empty tiles".
std::string tiles(std::int64_t n, const char *kind) {
  return std::to_string(n) + " " + kind + (n == 1 ? " tile" : " tiles");
}

void summarize(const Picture &p) {
  const TileMap &t = p.tiles;
  auto truly = [&](TileKind k) { return std::count(p.truth.begin(), p.truth.end(), k); };
  std::int64_t unproved_empty = 0, unproved_full = 0;
  for (std::size_t i = 0; i < p.truth.size(); ++i) {
    unproved_empty += p.truth[i] == TileKind::Empty && t.tiles[i] != TileKind::Empty;
    unproved_full += p.truth[i] == TileKind::Full && t.tiles[i] != TileKind::Full;
  }
  std::cout << "compiler: " << t.count(TileKind::Empty) << " empty (skipped), "
            << t.count(TileKind::Full) << " full, " << t.count(TileKind::Partial)
            << " partial; true: " << truly(TileKind::Empty) << " empty, " << truly(TileKind::Full)
            << " full, " << truly(TileKind::Partial) << " partial\n";
  if (!t.analysed && p.mask_text.front() != '(')
    std::cout << "the interval analysis finds nothing to follow in this mask: every tile runs "
                 "it per element\n";
  if (unproved_empty + unproved_full == 0)
    std::cout << "the analysis is exact here: it proves every empty and every full tile\n";
  else
    std::cout << "conservative: " << tiles(unproved_empty, "empty") << " not proved empty "
              << "(computed anyway), " << tiles(unproved_full, "full")
              << " not proved full (mask per element)\n";
}

constexpr Rgb kKept{31, 58, 147}, kKeptMasked{96, 140, 220}, kGrid{160, 160, 160},
    kEmpty{236, 236, 236}, kFull{190, 228, 182}, kPartial{253, 205, 150}, kMissed{246, 120, 100};

/// Left: the mask; right: the mask over the tiles, coloured by the compiler's class.
Image render(const Picture &p) {
  const reference::MaskMap &m = p.mask;
  const TileMap &t = p.tiles;
  int scale = static_cast<int>(std::max<std::int64_t>(1, 512 / std::max(m.len_q, m.len_kv)));
  int w = static_cast<int>(m.len_kv) * scale, h = static_cast<int>(m.len_q) * scale, gap = 16;
  Image img(2 * w + gap, h);
  for (std::int64_t r = 0; r < t.rows; ++r)
    for (std::int64_t c = 0; c < t.cols; ++c) {
      TileKind k = t.at(r, c);
      bool missed = k != TileKind::Empty && p.truth[r * t.cols + c] == TileKind::Empty;
      Rgb bg = missed                 ? kMissed
               : k == TileKind::Empty ? kEmpty
               : k == TileKind::Full  ? kFull
                                      : kPartial;
      int x0 = w + gap + static_cast<int>(c * t.kv_tile) * scale;
      int y0 = static_cast<int>(r * t.q_tile) * scale;
      img.fill(x0, y0, std::min(x0 + static_cast<int>(t.kv_tile) * scale, 2 * w + gap),
               y0 + static_cast<int>(t.q_tile) * scale, bg);
    }
  for (std::int64_t i = 0; i < m.len_q; ++i)
    for (std::int64_t j = 0; j < m.len_kv; ++j)
      if (m.at(i, j)) {
        int x = static_cast<int>(j) * scale, y = static_cast<int>(i) * scale;
        bool full = t.at(i / t.q_tile, j / t.kv_tile) == TileKind::Full;
        img.fill(x, y, x + scale, y + scale, kKept);
        img.fill(w + gap + x, y, w + gap + x + scale, y + scale, full ? kKept : kKeptMasked);
      }
  for (std::int64_t r = 1; r < t.rows; ++r)
    img.fill(w + gap, static_cast<int>(r * t.q_tile) * scale, 2 * w + gap,
             static_cast<int>(r * t.q_tile) * scale + 1, kGrid);
  for (std::int64_t c = 1; c < t.cols; ++c) {
    int x = w + gap + static_cast<int>(c * t.kv_tile) * scale;
    img.fill(x, 0, x + 1, h, kGrid);
  }
  return img;
}

} // namespace

int cmd_show(const cli::Args &a) {
  cli::check_opts(a, {"png", "q-tile", "kv-tile", "cols", QKV_SHAPE_OPTS});
  const gallery::Entry &e = gallery::find(a.name);
  gallery::GraphShape s = cli::shape_from_opts(e, a, e.shape);
  std::int64_t cols = cli::int_opt(a, "cols", 8).value_or(64);
  Picture p = make_picture(e, s, a);
  std::cout << "qkv show " << p.title << "\n"
            << "mask_mod: " << p.mask_text << "\n"
            << "kept " << p.mask.kept() << " of " << p.mask.len_q * p.mask.len_kv << " pairs\n\n";
  draw_mask(p.mask, cols);
  std::cout << "\n";
  draw_tiles(p);
  summarize(p);
  if (a.opts.count("png")) {
    write_png(render(p), a.opts.at("png"));
    std::cout << "wrote " << a.opts.at("png") << "\n";
  }
  return 0;
}

} // namespace qkv::tool
