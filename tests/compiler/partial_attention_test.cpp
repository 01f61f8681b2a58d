// Partial attention compiled for the CPU against the interpreter: attention with its
// log-sum-exp (Attention::lse) from every kernel (tiled, decode, short tiles, merged-heads
// output; masks, score mods, GQA, ranks 2-4, odd and dynamic lengths, fully masked rows),
// merge_attention and merge_lse, and the property ring attention rests on: attention over
// keys split in two, merged, is attention over all of them.
#include "differential.hpp"

#include <limits>
#include <optional>
#include <tuple>

namespace qkv::test {
namespace {

using DB = DimBindings;

/// q (B, H, L, Dh) (or `q` when given), k/v (B, Hkv, S<suffix>, Dh) inputs; fewer leading
/// dims for lower ranks.
std::vector<Value> inputs(Graph &g, int rank, std::int64_t h, std::int64_t hkv, std::int64_t dh,
                          std::string suffix = "", std::optional<Value> q = std::nullopt) {
  Dim B = g.dim("B"), L = g.dim("L"), S = g.dim("S" + suffix);
  Dim H = g.dim("H", h), Hk = hkv == h ? H : g.dim("Hkv", hkv), D = g.dim("Dh", dh);
  auto dims = [&](Dim heads, Dim seq) {
    std::vector<Dim> d;
    if (rank == 4)
      d.push_back(B);
    if (rank >= 3)
      d.push_back(heads);
    d.push_back(seq);
    d.push_back(D);
    return d;
  };
  if (!q)
    q = g.input("q", DType::F32, dims(H, L));
  return {*q, g.input("k" + suffix, DType::F32, dims(Hk, S)),
          g.input("v" + suffix, DType::F32, dims(Hk, S))};
}

/// a and b (B, H, S_a|S_b, D) joined along their third axis.
Tensor join_keys(const Tensor &a, const Tensor &b) {
  const Shape &sa = a.shape(), &sb = b.shape();
  Shape so{sa[0], sa[1], sa[2] + sb[2], sa[3]};
  Tensor out(DType::F32, so);
  for (std::int64_t x = 0; x < sa[0] * sa[1]; ++x)
    for (std::int64_t j = 0; j < so[2]; ++j)
      for (std::int64_t d = 0; d < so[3]; ++d) {
        bool first = j < sa[2];
        const Tensor &src = first ? a : b;
        std::int64_t rows = first ? sa[2] : sb[2], row = first ? j : j - sa[2];
        out.set((x * so[2] + j) * so[3] + d, src.get((x * rows + row) * so[3] + d));
      }
  return out;
}

/// A case with outputs "out" and "lse" of the attention `body` makes.
DiffCase with_lse(std::string name, std::function<Attention(Graph &)> body,
                  std::vector<DB> shapes) {
  DiffCase c;
  c.name = name;
  c.build = [name, body] {
    Graph g(name);
    Attention a = body(g);
    Value lse = a.lse();
    g.output("out", a.value());
    g.output("lse", lse);
    return g;
  };
  c.shapes = std::move(shapes);
  return c;
}

const std::vector<DB> kShapes = {{{"B", 1}, {"L", 1}, {"S", 1}},
                                 {{"B", 2}, {"L", 7}, {"S", 33}},
                                 {{"B", 1}, {"L", 33}, {"S", 7}},
                                 {{"B", 1}, {"L", 100}, {"S", 257}}};

std::vector<DiffCase> lse_cases() {
  std::vector<DiffCase> c;
  c.push_back(with_lse(
                  "rank4_gqa",
                  [](Graph &g) {
                    auto x = inputs(g, 4, 4, 2, 16);
                    return attention(x[0], x[1], x[2]);
                  },
                  kShapes)
                  .sums({"Dh", "S"})
                  .large_inputs(20, 400, {"q", "k"}));
  c.push_back(with_lse(
                  "rank3_causal_scaled",
                  [](Graph &g) {
                    auto x = inputs(g, 3, 3, 3, 8);
                    Attention a = attention(x[0], x[1], x[2]);
                    a.scale(0.7).mask(causal_mask());
                    return a;
                  },
                  kShapes)
                  .sums({"Dh", "S"}));
  // Queries before position 5 see no key: out 0, lse -inf.
  c.push_back(with_lse("rank2_fully_masked_rows",
                       [](Graph &g) {
                         auto x = inputs(g, 2, 1, 1, 8);
                         Attention a = attention(x[0], x[1], x[2]);
                         a.mask([](auto, auto, auto q, auto kv) { return kv + 5 <= q; });
                         return a;
                       },
                       {{{"L", 9}, {"S", 9}}, {{"L", 40}, {"S", 40}}})
                  .sums({"Dh", "S"})
                  .may_be_zero()
                  .may_be_infinite());
  c.push_back(with_lse(
                  "rank4_softcap_sliding",
                  [](Graph &g) {
                    auto x = inputs(g, 4, 2, 1, 8);
                    Attention a = attention(x[0], x[1], x[2]);
                    a.score_mod([](auto s, auto, auto, auto, auto) {
                       return 5.0 * tanh(s / 5.0);
                     }).mask(sliding_window_mask(4));
                    return a;
                  },
                  kShapes)
                  .sums({"Dh", "S"})
                  .may_be_zero() // L > S: the last queries' windows hold no key
                  .may_be_infinite());
  // One query over many keys: the split-KV decode kernel.
  c.push_back(with_lse("rank4_decode",
                       [](Graph &g) {
                         auto x = inputs(g, 4, 8, 2, 32);
                         return attention(x[0], x[1], x[2]);
                       },
                       {{{"B", 2}, {"L", 1}, {"S", 3000}}, {{"B", 1}, {"L", 2}, {"S", 517}}})
                  .sums({"Dh", "S"}));
  return c;
}

class Lse : public ::testing::TestWithParam<DiffCase> {};
TEST_P(Lse, MatchesInterpreter) { run_differential(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Compiled, Lse, ::testing::ValuesIn(lse_cases()),
                         [](const auto &i) { return i.param.name; });

/// The heads merged after the attention (the kernel writes the merged layout) and its
/// log-sum-exp beside it.
TEST(Lse, BesideAMergedHeadsOutput) {
  DiffCase c;
  c.name = "merged_heads";
  c.build = [] {
    Graph g("merged_heads");
    auto x = inputs(g, 4, 4, 4, 8);
    Attention a = attention(x[0], x[1], x[2]);
    Value lse = a.lse();
    g.output("out", merge_heads(a.value()));
    g.output("lse", lse);
    return g;
  };
  c.shapes = kShapes;
  c.sums({"Dh", "S"});
  run_differential(c);
}

/// merge_attention and merge_lse alone, on random partials, one of them fully masked in
/// some rows (-inf) and both in others.
TEST(Merge, MatchesInterpreter) {
  DiffCase c;
  c.name = "merge";
  c.build = [] {
    Graph g("merge");
    Dim B = g.dim("B"), H = g.dim("H", 3), L = g.dim("L"), Dv = g.dim("Dv", 5);
    Value oa = g.input("oa", DType::F32, {B, H, L, Dv}),
          ob = g.input("ob", DType::F32, {B, H, L, Dv});
    Value la = g.input("la", DType::F32, {B, H, L}), lb = g.input("lb", DType::F32, {B, H, L});
    g.output("out", merge_attention(oa, la, ob, lb));
    g.output("lse", merge_lse(la, lb));
    return g;
  };
  c.shapes = {{{"B", 1}, {"L", 1}}, {{"B", 2}, {"L", 37}}};
  c.inputs([](TensorMap &in) {
    double ninf = -std::numeric_limits<double>::infinity();
    Tensor &la = in.at("la"), &lb = in.at("lb");
    for (std::int64_t i = 0; i < la.numel(); ++i) {
      la.set(i, la.get(i) * 30);
      lb.set(i, lb.get(i) * 30);
      if (i % 5 == 1)
        la.set(i, ninf);
      if (i % 7 == 2)
        lb.set(i, ninf);
      if (i % 11 == 3)
        la.set(i, ninf), lb.set(i, ninf);
    }
  });
  c.sums({}, 30).may_be_zero().may_be_infinite();
  run_differential(c);
}

/// Attention over keys [0, S1) and [S1, S1 + S2) separately, each with its log-sum-exp,
/// merged in the same kernel: the attention over all S1 + S2 keys (interpreter), and the
/// merged log-sum-exp that of all of them.
TEST(Merge, SplitKeysMergeToTheWholeAttention) {
  Graph g("split_keys");
  auto a = inputs(g, 4, 4, 2, 16, "1");
  auto b = inputs(g, 4, 4, 2, 16, "2", a[0]);
  Attention pa = attention(a[0], a[1], a[2]), pb = attention(b[0], b[1], b[2]);
  Value la = pa.lse(), lb = pb.lse();
  g.output("out", merge_attention(pa.value(), la, pb.value(), lb));
  g.output("lse", merge_lse(la, lb));
  Kernel k = compile(g);

  Graph whole("whole");
  Dim B = whole.dim("B"), L = whole.dim("L"), S = whole.dim("S");
  Dim H = whole.dim("H", 4), Hk = whole.dim("Hkv", 2), D = whole.dim("Dh", 16);
  Value q = whole.input("q", DType::F32, {B, H, L, D});
  Value kk = whole.input("k", DType::F32, {B, Hk, S, D}),
        vv = whole.input("v", DType::F32, {B, Hk, S, D});
  Attention w = attention(q, kk, vv);
  Value wl = w.lse();
  whole.output("out", w.value());
  whole.output("lse", wl);

  for (auto [l, s1, s2] : {std::tuple{1, 1, 1}, {7, 33, 5}, {64, 100, 157}}) {
    SCOPED_TRACE("L=" + std::to_string(l) + " S1=" + std::to_string(s1) +
                 " S2=" + std::to_string(s2));
    TensorMap in = random_inputs(g, {{"B", 2}, {"L", l}, {"S1", s1}, {"S2", s2}}, 7);
    TensorMap all{{"q", in.at("q")},
                  {"k", join_keys(in.at("k1"), in.at("k2"))},
                  {"v", join_keys(in.at("v1"), in.at("v2"))}};
    TensorMap want = reference::run(whole, all), got = k.run(in);
    Tolerance tol = tolerance(DType::F32, 1 + 16 + s1 + s2, 1);
    for (const char *name : {"out", "lse"}) {
      Comparison cmp = compare(got.at(name), want.at(name), tol.atol, tol.rtol);
      EXPECT_TRUE(cmp.ok) << name << ": " << cmp.message;
    }
  }
}

TEST(LseErrors, TheCudaKernelRefusesIt) {
  Graph g("cuda_lse");
  Dim H = g.dim("H", 2), L = g.dim("L", 16), D = g.dim("D", 16);
  Value q = g.input("q", DType::F32, {H, L, D});
  Attention a = attention(q, q, q);
  Value lse = a.lse();
  g.output("out", a.value());
  g.output("lse", lse);
  try {
    lower_to(g, Target::cuda(), "gpu");
    ADD_FAILURE() << "the CUDA pipeline lowered an attention with its log-sum-exp";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("does not compute the log-sum-exp"), std::string::npos)
        << e.what();
  }
}

TEST(LseErrors, NameTheNodesAndSayWhy) {
  Graph g("errors");
  Dim L = g.dim("L", 4), D = g.dim("D", 8);
  Value q = g.input("q", DType::F32, {L, D}), k = g.input("k", DType::F32, {L, D});
  Attention a = attention(q, k, k);
  Value lse = a.lse();
  auto throws = [](auto f, const std::string &part) {
    try {
      f();
      ADD_FAILURE() << "no error; expected one with: " << part;
    } catch (const Error &e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  throws([&] { a.mask(causal_mask()); }, "must come before the result is used");
  Value hq = g.input("hq", DType::BF16, {L, D});
  throws([&] { attention(hq, hq, hq).lse(); }, "f32 and f64 attention only");
  Value o = a.value();
  Value l2 = g.input("l2", DType::F32, {g.dim("L2", 5)});
  throws([&] { merge_attention(o, lse, o, l2); }, "'l2'");
  throws([&] { merge_attention(o, o, o, o); }, "must be its log-sum-exp's dims");
  throws([&] { merge_lse(lse, l2); }, "must have exactly the same dims");
}

} // namespace
} // namespace qkv::test
