// The seed walkthrough: attention on "I love GPU programming", step by step, with qkv.
//
// qkv grew from a (Chinese) worked example of attention: 4 tokens (I, love, GPU, prog),
// d_model = 6, an input X (4x6) and a query weight W^Q (6x6). This program follows it:
//
//   1. the seed's pipeline X -> Q, K, V -> Q.K^T -> /sqrt(6) -> softmax -> A.V, written in
//      the typed DSL and run on the reference interpreter, printing every step;
//   2. the numbers the seed works out by hand, checked; and where the seed only
//      illustrated (its "assumed" matrices), what its own inputs really give;
//   3. the same graph compiled with qkv::compile: the matmul/softmax/matmul became one
//      qkv.attention op, and the kernel agrees with the interpreter;
//   4. two heads (split_heads / merge_heads), 5. a causal mask, 6. cross-attention.
//
// Every number printed is computed by qkv, except those labelled "the seed says", which are
// quoted from the seed for comparison. Every check that fails is reported and makes the
// program exit with status 1, so `ctest` runs this file as a test.
#include <qkv/qkv.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

namespace {

using qkv::Tensor;
using qkv::TensorMap;
using Values = std::vector<double>;

// ---- the seed's numbers -------------------------------------------------------------

const std::vector<std::string> kTokens = {"I", "love", "GPU", "prog"};

// Inputs the seed gives: X (after embedding + positions) and W^Q.
const Values kX = {1.0, 0.2, 0.3, 0.5, 0.1, 0.4,  // I
                   0.4, 0.9, 0.1, 0.2, 0.3, 0.5,  // love
                   0.3, 0.1, 0.8, 0.6, 0.2, 0.1,  // GPU
                   0.2, 0.5, 0.7, 0.9, 0.4, 0.3}; // prog
const Values kWq = {0.1, 0.2, 0.0, 0.3, 0.1, 0.2, 0.0, 0.1, 0.4, 0.2, 0.3, 0.0,
                    0.3, 0.0, 0.1, 0.1, 0.2, 0.3, 0.2, 0.3, 0.2, 0.0, 0.1, 0.2,
                    0.1, 0.2, 0.3, 0.1, 0.0, 0.2, 0.2, 0.1, 0.0, 0.3, 0.2, 0.1};

// What the seed prints, quoted for comparison. Its Q, K, V are "assumed" (假设) results.
const Values kSeedQ = {0.38, 0.42, 0.28, 0.47, 0.29, 0.44, 0.32, 0.43, 0.50, 0.45, 0.39, 0.34,
                       0.47, 0.34, 0.33, 0.38, 0.32, 0.49, 0.51, 0.46, 0.43, 0.40, 0.34, 0.51};
const Values kSeedK = {0.45, 0.22, 0.30, 0.55, 0.24, 0.40, 0.31, 0.39, 0.20, 0.43, 0.37, 0.28,
                       0.34, 0.29, 0.44, 0.33, 0.28, 0.46, 0.49, 0.38, 0.46, 0.33, 0.35, 0.51};
const Values kSeedV = {0.45, 0.30, 0.40, 0.29, 0.38, 0.25, 0.41, 0.25, 0.46, 0.23, 0.32, 0.44,
                       0.31, 0.52, 0.26, 0.39, 0.48, 0.30, 0.35, 0.49, 0.33, 0.47, 0.44, 0.38};
const double kSeedLoveDotProg = 0.90; // "q_love . k_prog ~ 0.90"
const Values kSeedScores = {0.85, 0.68, 0.72, 0.88, 0.78, 0.72, 0.75, 0.90,
                            0.82, 0.70, 0.76, 0.91, 0.93, 0.75, 0.82, 1.02};
const Values kSeedScaledLove = {0.318, 0.294, 0.306, 0.367};
const Values kSeedSoftmaxLove = {0.249, 0.243, 0.246, 0.262};
// The attention matrix the seed sets by hand ("我手动设定"), and its output for love, worked
// term by term: 0.25 v_I + 0.15 v_love + 0.10 v_GPU + 0.50 v_prog (printed rounded to 3
// decimals as [0.380, 0.410, 0.360, 0.381, 0.411, 0.349]).
const Values kSeedA = {0.60, 0.15, 0.10, 0.15, 0.25, 0.15, 0.10, 0.50,
                       0.10, 0.10, 0.30, 0.50, 0.10, 0.20, 0.55, 0.15};
const Values kSeedOutLove = {0.380, 0.4095, 0.360, 0.381, 0.411, 0.3485};
const Values kSeedOut = {0.42, 0.32, 0.40, 0.30, 0.38, 0.29, 0.38, 0.41, 0.36, 0.38, 0.41, 0.35,
                         0.36, 0.43, 0.34, 0.40, 0.42, 0.35, 0.35, 0.44, 0.32, 0.38, 0.44, 0.32};

// ---- the dims: the same names in every graph below ----------------------------------

constexpr auto L = qkv::dim<"L">;      // tokens: bound at run time from X (4 here)
constexpr auto D = qkv::dim<"D", 6>;   // d_model, static
constexpr auto H = qkv::dim<"H", 2>;   // heads
constexpr auto Dk = qkv::dim<"Dk", 3>; // d_k = d_model / heads
constexpr auto T = qkv::dim<"T">;      // target-sequence tokens (cross-attention)

// ---- helpers: checks, printing ------------------------------------------------------

/// Counts failed checks; each check prints one line.
struct Checks {
  int run = 0, failed = 0;
  void expect(bool ok, const std::string &what) {
    ++run;
    failed += ok ? 0 : 1;
    std::cout << (ok ? "  [ok]   " : "  [FAIL] ") << what << "\n";
  }
};

Tensor f32(qkv::Shape shape, const Values &v) {
  return Tensor::from_values(qkv::DType::F32, std::move(shape), v);
}

std::string fmt(double v, int precision = 3) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(precision) << v;
  return s.str();
}
std::string fmt(const Values &v, int precision = 3) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + fmt(v[i], precision);
  return s + "]";
}

/// "(L=4, D=6)": a value's named dims with the extents this run bound them to.
std::string shape(const qkv::Value &v, const Tensor &t) {
  std::string s = "(";
  for (std::size_t i = 0; i < v.dims().size(); ++i)
    s += (i ? ", " : "") + v.dims()[i].name + "=" + std::to_string(t.shape()[i]);
  return s + ")";
}

/// Row r of the matrix number `slice` held in t's last two axes.
Values row(const Tensor &t, std::int64_t r, std::int64_t slice = 0) {
  std::int64_t rows = t.shape()[t.rank() - 2], cols = t.shape()[t.rank() - 1];
  Values all = t.values();
  auto first = all.begin() + (slice * rows + r) * cols;
  return Values(first, first + cols);
}

/// Prints "title  (dims)" and the matrix (slice `slice` of a 3-D tensor), rows labelled.
void print(const std::string &title, const qkv::Value &v, const Tensor &t,
           const std::vector<std::string> &labels = kTokens, std::int64_t slice = 0,
           int precision = 3) {
  std::cout << "\n  " << title << "  " << shape(v, t) << "\n";
  for (std::int64_t r = 0; r < t.shape()[t.rank() - 2]; ++r) {
    std::cout << "    " << std::left << std::setw(5) << labels[r] << std::right << "[";
    for (double x : row(t, r, slice))
      std::cout << std::setw(precision + 4) << fmt(x, precision);
    std::cout << " ]\n";
  }
}

double max_abs_diff(const Values &a, const Values &b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

/// The seed's printed rows next to qkv's: a row that agrees to the seed's 2 printed
/// decimals was computed from its inputs, one that does not was illustrated.
void compare_rows(const Values &seed, const Tensor &got) {
  for (std::int64_t r = 0; r < got.shape()[0]; ++r) {
    Values want(seed.begin() + r * got.shape()[1], seed.begin() + (r + 1) * got.shape()[1]);
    double d = max_abs_diff(want, row(got, r));
    std::cout << "    " << std::left << std::setw(5) << kTokens[r] << std::right << "the seed says "
              << fmt(want, 2) << "\n         qkv computes  " << fmt(row(got, r), 2) << "  max diff "
              << fmt(d, 3) << (d <= 0.005 + 1e-6 ? "  (computed)" : "  (illustrated)") << "\n";
  }
}

void section(const std::string &title) {
  const std::string rule(78, '=');
  std::cout << "\n" + rule + "\n" + title + "\n" + rule + "\n";
}

// Tolerances. The interpreter computes in double from f32 inputs: its values are the exact
// ones to ~1e-7, far inside the seed's 3 printed decimals (half a unit = 5e-4).
constexpr double kThreeDecimals = 5e-4 + 1e-6;
// Compiled kernels compute in f32; sums of 6 products and a softmax of values near 1 stay
// within a few ulps of 1.0 (~1e-7), so 1e-5 leaves room for any accumulation order.
constexpr double kCompiledTol = 1e-5;

// ---- 1. the pipeline -----------------------------------------------------------------

/// Builds part 1's graph into g and its inputs into `inputs`; returns the Q, K, V it computes.
TensorMap single_head(Checks &checks, qkv::Graph &g, TensorMap &inputs) {
  section("1. Single-head self-attention, from X (the seed's Step 1 to Step 3)");
  // The graph: what is computed. Every op checks its dims at compile time (matmul's
  // contraction dims must be the same named dim, ...), so a shape error does not build.
  auto x = g.input<qkv::f32>("X", L, D);
  auto wq = g.param<qkv::f32>("WQ", D, D);
  auto wk = g.param<qkv::f32>("WK", D, D);
  auto wv = g.param<qkv::f32>("WV", D, D);
  auto q = matmul(x, wq).named("Q"); // (L, D) x (D, D) -> (L, D)
  auto k = matmul(x, wk).named("K");
  auto v = matmul(x, wv).named("V");
  auto scores = matmul(q, transpose(k)).named("scores"); // (L, D) x (D, L) -> (L, L)
  auto scaled = scale(scores, 1.0 / std::sqrt(6.0)).named("scaled");
  auto a = softmax(scaled).named("A");  // over the last axis: each row sums to 1
  auto out = matmul(a, v).named("out"); // (L, L) x (L, D) -> (L, D)
  g.output("out", out.value());

  // W^K and W^V are never given by the seed. We use two fixed matrices of our own, made
  // from what it does give: W^K = (W^Q)^T and W^V = I (so V = X).
  Values wk_t(36), wv_t(36, 0.0);
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j) {
      wk_t[j * 6 + i] = kWq[i * 6 + j];
      wv_t[i * 6 + j] = i == j ? 1.0 : 0.0;
    }
  inputs = {{"X", f32({4, 6}, kX)},
            {"WQ", f32({6, 6}, kWq)},
            {"WK", f32({6, 6}, wk_t)},
            {"WV", f32({6, 6}, wv_t)}};
  // run_all returns every node's value (f64), indexed by node id: a step-by-step trace.
  std::vector<Tensor> val = qkv::reference::run_all(g, inputs);
  auto at = [&](const auto &typed) { return val[typed.value().id()]; };

  std::cout << "W^K and W^V are not given by the seed; here W^K = (W^Q)^T and W^V = I (so\n"
               "V = X). These are our choice, not the seed's.\n";
  print("X  (input)", x.value(), at(x));
  print("Q = X.W^Q", q.value(), at(q));
  print("K = X.W^K", k.value(), at(k));
  print("V = X.W^V", v.value(), at(v));
  print("scores = Q.K^T  (token x token)", scores.value(), at(scores));
  print("scaled = scores / sqrt(6)", scaled.value(), at(scaled));
  print("A = softmax(scaled)  (each row sums to 1)", a.value(), at(a));
  print("out = A.V  (the same shape as X)", out.value(), at(out));
  std::cout << "\n  As the seed itself notes in its Step 2.3, such small inputs give scores that\n"
               "  differ little, so A is nearly uniform; trained models give peakier rows.\n";

  std::cout << "\nStep 1 check: the seed works out Q[I][0] = 1.0*0.1 + 0.2*0.0 + 0.3*0.3 + "
               "0.5*0.2 + 0.1*0.1 + 0.4*0.2 = 0.38\n";
  double q00 = at(q).at({0, 0});
  checks.expect(std::fabs(q00 - 0.38) < 1e-6, "Q[I][0] = " + fmt(q00, 4) + " (the seed says 0.38)");

  std::cout << "\nThe rest of the seed's Q is 'assumed' (假设), not X.W^Q:\n";
  compare_rows(kSeedQ, at(q));
  return {{"Q", at(q).to(qkv::DType::F32)},
          {"K", at(k).to(qkv::DType::F32)},
          {"V", at(v).to(qkv::DType::F32)}};
}

// ---- 2. the seed's hand calculations -------------------------------------------------

void seed_numbers(Checks &checks) {
  section("2. The seed's own numbers: what it computed, and what it illustrated");
  std::cout << "The seed never gives W^K or W^V, so its K and V are illustrations. Taking its\n"
               "assumed Q and K as inputs, does Q.K^T / sqrt(6) give its scores?\n";
  qkv::Graph g("seed_assumed");
  auto q = g.input<qkv::f32>("Q", L, D);
  auto k = g.input<qkv::f32>("K", L, D);
  auto a = g.input<qkv::f32>("A", L, L);
  auto v = g.input<qkv::f32>("V", L, D);
  auto seed_scores = g.input<qkv::f32>("scores", L, L); // the seed's scores table itself
  auto scores = matmul(q, transpose(k)).named("Q.K^T");
  auto scaled = scale(scores, 1.0 / std::sqrt(6.0)).named("scaled");
  auto seed_scaled = scale(seed_scores, 1.0 / std::sqrt(6.0)).named("seed_scaled");
  auto out = matmul(a, v).named("out");
  for (const auto &o : {scaled.value(), seed_scaled.value(), out.value()})
    g.output(o.name(), o);
  std::vector<Tensor> val = qkv::reference::run_all(g, {{"Q", f32({4, 6}, kSeedQ)},
                                                        {"K", f32({4, 6}, kSeedK)},
                                                        {"A", f32({4, 4}, kSeedA)},
                                                        {"V", f32({4, 6}, kSeedV)},
                                                        {"scores", f32({4, 4}, kSeedScores)}});
  auto at = [&](const auto &typed) { return val[typed.value().id()]; };

  std::cout << "  The seed's scores table vs Q.K^T of its own Q and K:\n";
  compare_rows(kSeedScores, at(scores));
  std::cout << "  q_love . k_prog: the seed says ~" << fmt(kSeedLoveDotProg, 2)
            << "; the six products it writes out sum to " << fmt(at(scores).at({1, 3}), 4) << "\n";
  Values love = row(at(scaled), 1);
  bool same = max_abs_diff(love, kSeedScaledLove) <= kThreeDecimals;
  std::cout << "  scaled row love: the seed says " << fmt(kSeedScaledLove) << "\n"
            << "                   its Q, K give  " << fmt(love) << "\n  -> "
            << (same ? "matches"
                     : "does NOT match: the seed's scores (and scaled) are illustrative")
            << "\n  (Its Step 2.2 itself: its scores row / sqrt(6) = "
            << fmt(row(at(seed_scaled), 1))
            << (max_abs_diff(row(at(seed_scaled), 1), kSeedScaledLove) <= kThreeDecimals
                    ? ", as it says.)\n"
                    : ", not what it says.)\n");

  // The softmax the seed does work out, on its scaled row for love: a 1x4 input.
  std::cout << "\nStep 2.3 check: softmax of the seed's scaled row for love\n";
  qkv::Graph sg("seed_softmax");
  auto s = sg.input<qkv::f32>("scaled", qkv::dim<"Row">, L);
  auto p = softmax(s).named("A_love");
  sg.output("A_love", p.value());
  Tensor got = qkv::reference::run(sg, {{"scaled", f32({1, 4}, kSeedScaledLove)}}).at("A_love");
  Values probs = row(got, 0);
  checks.expect(max_abs_diff(probs, kSeedSoftmaxLove) <= kThreeDecimals,
                "softmax" + fmt(kSeedScaledLove) + " = " + fmt(probs, 4) + " (the seed says " +
                    fmt(kSeedSoftmaxLove) + ")");
  std::cout << "  Nearly uniform, so the seed then sets A by hand (it says so): A is an\n"
               "  illustration, not softmax(scaled).\n";

  std::cout << "\nStep 3 check: out = A.V with the seed's hand-set A and assumed V\n";
  print("out = A.V  (seed's A, seed's V)", out.value(), at(out), kTokens, 0, 4);
  Values out_love = row(at(out), 1);
  checks.expect(max_abs_diff(out_love, kSeedOutLove) <= 1e-4,
                "out_love = " + fmt(out_love, 4) +
                    "\n         the seed: 0.25 v_I + 0.15 v_love + 0.10 v_GPU + 0.50 v_prog = " +
                    fmt(kSeedOutLove, 4));
  std::cout << "  The seed's full output matrix (2 decimals) vs its A.V:\n";
  compare_rows(kSeedOut, at(out));
}

// ---- 3. compiling -------------------------------------------------------------------

void compile_and_compare(Checks &checks, const qkv::Graph &g, const TensorMap &inputs,
                         const std::string &what, bool show_ir) {
  qkv::Kernel kernel = qkv::compile(g);
  std::string ir = kernel.ir("qkv");
  if (show_ir) {
    auto show = [](const std::string &text, bool ops_only) {
      std::istringstream lines(text);
      for (std::string line; std::getline(lines, line);)
        if (!ops_only || line.find(" = qkv.") != std::string::npos)
          std::cout << "    " << line.substr(ops_only ? line.find('%') : 0) << "\n";
    };
    std::cout << "\n  The graph you wrote, g.str() (= kernel.ir(\"graph\")):\n";
    show(g.str(), false);
    std::cout
        << "\n  Its ops in the qkv dialect after qkv-recognize-attention, kernel.ir(\"qkv\"):\n";
    show(ir, true);
    checks.expect(ir.find("qkv.attention") != std::string::npos &&
                      ir.find("qkv.softmax") == std::string::npos,
                  "Q.K^T -> scale -> softmax -> .V became one qkv.attention op");
  }
  TensorMap want = qkv::reference::run(g, inputs);
  TensorMap got = kernel.run(inputs);
  for (const auto &[name, w] : want) {
    qkv::Comparison c = qkv::compare(got.at(name), w, kCompiledTol, 0);
    checks.expect(c.ok, what + ": compiled '" + name + "' vs interpreter, max abs error " +
                            fmt(c.max_abs_err, 9));
  }
}

// ---- 4. two heads --------------------------------------------------------------------

void two_heads(Checks &checks) {
  section("4. Multi-head attention: 2 heads, d_k = 3 (the seed's 切头 section)");
  std::cout << "The seed splits its assumed Q (first row 0.39 ...) and its K, V into 2 heads\n"
               "along the features: head 1 takes columns 1-3, head 2 columns 4-6.\n";
  Values q_heads = kSeedQ; // the seed's multi-head Q: the assumed one, but 0.39 first
  q_heads[0] = 0.39;
  qkv::Graph g("two_heads");
  auto q = g.input<qkv::f32>("Q", L, D);
  auto k = g.input<qkv::f32>("K", L, D);
  auto v = g.input<qkv::f32>("V", L, D);
  auto qh = split_heads(q, H, Dk).named("Qh"); // (L, D=H*Dk) -> (H, L, Dk)
  auto kh = split_heads(k, H, Dk).named("Kh");
  auto vh = split_heads(v, H, Dk).named("Vh");
  // Per-head weights, written out to print them; attention() below fuses the same math.
  auto ah = softmax(scale(matmul(qh, transpose(kh)), 1.0 / std::sqrt(3.0))).named("A_h");
  auto heads = attention(qh, kh, vh).named("heads");   // scale defaults to 1/sqrt(Dk)
  auto merged = merge_heads(heads, D).named("concat"); // (H, L, Dk) -> (L, D)
  g.output("concat", merged.value());
  TensorMap inputs = {
      {"Q", f32({4, 6}, q_heads)}, {"K", f32({4, 6}, kSeedK)}, {"V", f32({4, 6}, kSeedV)}};
  std::vector<Tensor> val = qkv::reference::run_all(g, inputs);
  auto at = [&](const auto &typed) { return val[typed.value().id()]; };

  print("Q^(1) = split_heads(Q)[head 1]", qh.value(), at(qh), kTokens, 0);
  print("Q^(2) = split_heads(Q)[head 2]", qh.value(), at(qh), kTokens, 1);
  bool halves = true; // head c / 3 holds column c of Q, at c % 3
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 6; ++c)
      halves = halves && row(at(qh), r, c / 3)[c % 3] == at(q).at({r, c});
  checks.expect(halves, "Q^(1) and Q^(2) are Q's first and last 3 columns");
  print("A_1 = softmax(Q^(1).K^(1)^T / sqrt(3))", ah.value(), at(ah), kTokens, 0);
  print("A_2 = softmax(Q^(2).K^(2)^T / sqrt(3))", ah.value(), at(ah), kTokens, 1);
  std::cout << "  (The seed's A_1, A_2 are assumed 'after training', to show two heads learning\n"
               "  two relations; its assumed Q, K give these near-uniform ones.)\n";
  print("Concat(head_1, head_2) = merge_heads(attention(Qh, Kh, Vh))", merged.value(), at(merged));
  std::cout << "  (The seed then multiplies by W^O, which it does not give; omitted here.)\n";
  compile_and_compare(checks, g, inputs, "two heads", false);
}

// ---- 5. causal mask ------------------------------------------------------------------

void causal(Checks &checks, const TensorMap &qkv) {
  section("5. Masked (causal) attention (the seed's Masked Multi-Head Attention)");
  std::cout << "A decoder must not see future tokens: scores above the diagonal become -inf\n"
               "before softmax, so e^-inf = 0. Q, K, V are the ones computed in part 1.\n";
  qkv::Graph g("causal");
  auto q = g.input<qkv::f32>("Q", L, D);
  auto k = g.input<qkv::f32>("K", L, D);
  auto v = g.input<qkv::f32>("V", L, D);
  // A mask_mod: a lambda over (batch, head, query position, key position), traced once into
  // an expression the interpreter evaluates and the compiler emits. (qkv::causal_mask() is
  // the same mask, ready-made.)
  auto see_past = [](auto /*b*/, auto /*h*/, auto qi, auto kv) { return qi >= kv; };
  auto masked = mask(scale(matmul(q, transpose(k)), 1.0 / std::sqrt(6.0)), see_past);
  auto a = softmax(masked).named("A_causal");
  auto out = attention(q, k, v).mask(see_past).named("out");
  g.output("out", out.value());
  const TensorMap &inputs = qkv;
  std::vector<Tensor> val = qkv::reference::run_all(g, inputs);
  auto at = [&](const auto &typed) { return val[typed.value().id()]; };

  print("masked scores", masked.value(), at(masked));
  print("A = softmax(masked scores)", a.value(), at(a));
  bool lower = true, sums = true;
  for (int r = 0; r < 4; ++r) {
    Values w = row(at(a), r);
    lower = lower && std::all_of(w.begin() + r + 1, w.end(), [](double x) { return x == 0.0; });
    sums = sums && std::fabs(std::accumulate(w.begin(), w.end(), 0.0) - 1.0) < 1e-12;
  }
  checks.expect(lower, "A is lower-triangular: no token attends to a later one");
  checks.expect(sums, "each row of A sums to 1");
  print("out = attention(Q, K, V).mask(q >= kv)", out.value(), at(out));
  checks.expect(max_abs_diff(row(at(out), 0), row(qkv.at("V"), 0)) < 1e-12,
                "out_I = v_I: the first token sees only itself");
  compile_and_compare(checks, g, inputs, "causal", false);
}

// ---- 6. cross-attention --------------------------------------------------------------

void cross(Checks &checks, const TensorMap &qkv) {
  section("6. Cross-attention: a target sequence attends to the English tokens");
  std::cout << "Queries come from one sequence, keys and values from another, of another\n"
               "length: 3 target tokens (我 爱 GPU, written wo ai GPU) attend to the 4\n"
               "English ones. The target embedding Y is illustrative data of our own; its\n"
               "queries use the seed's W^Q, and K, V are part 1's.\n";
  const std::vector<std::string> target = {"wo", "ai", "GPU"};
  const Values y = {0.9, 0.1, 0.4, 0.6, 0.2, 0.3,  // wo (我)
                    0.5, 0.8, 0.2, 0.3, 0.4, 0.4,  // ai (爱)
                    0.3, 0.2, 0.7, 0.5, 0.3, 0.2}; // GPU
  qkv::Graph g("cross");
  auto yt = g.input<qkv::f32>("Y", T, D);
  auto wq = g.param<qkv::f32>("WQ", D, D);
  auto k = g.input<qkv::f32>("K", L, D);
  auto v = g.input<qkv::f32>("V", L, D);
  auto q = matmul(yt, wq).named("Q_target");                             // (T, D)
  auto a = softmax(matmul(q, transpose(k)) / std::sqrt(6.0)).named("A"); // (T, L)
  auto out = attention(q, k, v).named("out");                            // (T, D)
  g.output("out", out.value());
  TensorMap inputs = {
      {"Y", f32({3, 6}, y)}, {"WQ", f32({6, 6}, kWq)}, {"K", qkv.at("K")}, {"V", qkv.at("V")}};
  std::vector<Tensor> val = qkv::reference::run_all(g, inputs);
  auto at = [&](const auto &typed) { return val[typed.value().id()]; };

  print("Q_target = Y.W^Q", q.value(), at(q), target);
  print("A = softmax(Q_target.K^T / sqrt(6))  (target x English)", a.value(), at(a), target);
  print("out = attention(Q_target, K, V)", out.value(), at(out), target);
  checks.expect(at(a).shape() == qkv::Shape{3, 4} && at(out).shape() == qkv::Shape{3, 6},
                "A is (T=3, L=4) and out is (T=3, D=6): one row per target token");
  compile_and_compare(checks, g, inputs, "cross", false);
}

} // namespace

int main() {
  Checks checks;
  try {
    std::cout << "qkv seed walkthrough: attention on \"I love GPU programming\" (4 tokens, "
                 "d_model 6)\n";
    qkv::Graph g("seed");
    TensorMap inputs;
    TensorMap qkv = single_head(checks, g, inputs); // the Q, K, V that parts 5 and 6 reuse
    seed_numbers(checks);

    section("3. Compiling part 1's graph with qkv::compile (MLIR, JIT on the host CPU)");
    std::cout << "The graph is written the seed's way, matmul -> scale -> softmax -> matmul;\n"
                 "the compiler recognises attention and fuses it into one op.\n";
    compile_and_compare(checks, g, inputs, "single head", true);
    std::cout << "  (Set QKV_DUMP=qkv,loops,llvm to print every stage while compiling.)\n";

    two_heads(checks);
    causal(checks, qkv);
    cross(checks, qkv);
  } catch (const std::exception &e) {
    std::cerr << "\nqkv seed walkthrough: error: " << e.what() << "\n";
    return 2;
  }
  std::cout << "\n" << std::string(78, '=') << "\n";
  if (checks.failed > 0) {
    std::cout << "FAILED: " << checks.failed << " of " << checks.run
              << " checks (see [FAIL] above)\n";
    return 1;
  }
  std::cout << "All " << checks.run << " checks passed.\n";
  return 0;
}
