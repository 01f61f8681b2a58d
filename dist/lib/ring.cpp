// Ring attention over MPI (ring.hpp).
#include <qkv/dist/ring.hpp>

#include <array>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>
#include <tuple>

#include <qkv/compiler/kernel_cache.hpp>
#include <qkv/dsl/error.hpp>
#include <qkv/dsl/graph.hpp>

namespace qkv::dist {
namespace {

double now_s() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

/// The shapes a rank holds: B, H, Hkv, Dh, Dv, n.
struct Shard {
  std::int64_t B = 0, H = 0, Hkv = 0, Dh = 0, Dv = 0, n = 0;
  std::vector<std::int64_t> list() const { return {B, H, Hkv, Dh, Dv, n}; }
};

/// This rank's shard, or why it cannot be one.
std::pair<Shard, std::string> check_local(const Tensor &q, const Tensor &k, const Tensor &v) {
  for (auto [t, name] : {std::pair{&q, "q"}, {&k, "k"}, {&v, "v"}})
    if (t->dtype() != DType::F32 || t->shape().size() != 4)
      return {{}, std::string(name) + " must be f32 (B, heads, rows, dim), not " + t->type_str()};
  const Shape &sq = q.shape(), &sk = k.shape(), &sv = v.shape();
  if (sk[0] != sq[0] || sv[0] != sq[0] || sk[1] != sv[1] || sk[2] != sq[2] || sv[2] != sq[2] ||
      sk[3] != sq[3])
    return {{},
            "q " + q.type_str() + ", k " + k.type_str() + ", v " + v.type_str() +
                " must share B and rows, k and v their heads, q and k the head dim"};
  if (sk[1] == 0 || sq[1] % sk[1] != 0)
    return {{},
            std::to_string(sq[1]) + " query heads cannot share " + std::to_string(sk[1]) +
                " kv heads"};
  if (sq[2] < 1)
    return {{}, "each rank needs at least one row of the sequence; this one has none"};
  return {{sq[0], sq[1], sk[1], sq[3], sv[3], sq[2]}, ""};
}

/// Every rank's shard. A rank that cannot take part (its `why`), or ranks whose dims
/// disagree, make every rank throw: no rank is left waiting for another.
std::vector<Shard> gather_shards(Comm &comm, const Shard &mine, const std::string &why) {
  std::vector<std::int64_t> list = mine.list();
  list.push_back(why.empty() ? 1 : 0);
  std::vector<std::int64_t> all = comm.all_gather(list, "the ranks' shard shapes");
  std::string me = "ring_attention (rank " + std::to_string(comm.rank()) + "): ";
  if (!why.empty())
    user_error(me + why);
  std::vector<Shard> s;
  for (int r = 0; r < comm.size(); ++r) {
    const std::int64_t *x = &all[static_cast<std::size_t>(r) * 7];
    if (!x[6])
      user_error(me + "rank " + std::to_string(r) +
                 " was called with tensors it cannot use (its own error says why)");
    s.push_back({x[0], x[1], x[2], x[3], x[4], x[5]});
  }
  auto dims = [](const Shard &x) {
    std::ostringstream os;
    os << "B=" << x.B << " H=" << x.H << " Hkv=" << x.Hkv << " Dh=" << x.Dh << " Dv=" << x.Dv;
    return os.str();
  };
  for (int r = 1; r < comm.size(); ++r)
    if (std::tie(s[r].B, s[r].H, s[r].Hkv, s[r].Dh, s[r].Dv) !=
        std::tie(s[0].B, s[0].H, s[0].Hkv, s[0].Dh, s[0].Dv))
      user_error(me + "rank " + std::to_string(r) + " holds " + dims(s[r]) + " but rank 0 holds " +
                 dims(s[0]) + "; every rank must hold the same dims");
  return s;
}

/// The kernels of one call's dims: partial attention (with and without the causal mask)
/// with its log-sum-exp, and the merge of two partials. B and the row counts are bound at
/// run time.
struct RingKernels {
  Kernel full, causal, merge;
};

Graph partial_graph(const Shard &s, bool causal, std::optional<double> scale) {
  Graph g(causal ? "ring_partial_causal" : "ring_partial");
  Dim B = g.dim("B"), L = g.dim("L"), S = g.dim("S"), H = g.dim("H", s.H),
      Hk = s.Hkv == s.H ? H : g.dim("Hkv", s.Hkv), Dh = g.dim("Dh", s.Dh),
      Dv = s.Dv == s.Dh ? Dh : g.dim("Dv", s.Dv);
  Value q = g.input("q", DType::F32, {B, H, L, Dh});
  Value k = g.input("k", DType::F32, {B, Hk, S, Dh});
  Value v = g.input("v", DType::F32, {B, Hk, S, Dv});
  Attention a = attention(q, k, v);
  if (scale)
    a.scale(*scale);
  if (causal)
    a.mask(causal_mask());
  Value lse = a.lse();
  g.output("out", a.value());
  g.output("lse", lse);
  return g;
}

Graph merge_graph(const Shard &s) {
  Graph g("ring_merge");
  Dim B = g.dim("B"), L = g.dim("L"), H = g.dim("H", s.H), Dv = g.dim("Dv", s.Dv);
  Value oa = g.input("oa", DType::F32, {B, H, L, Dv}),
        ob = g.input("ob", DType::F32, {B, H, L, Dv});
  Value la = g.input("la", DType::F32, {B, H, L}), lb = g.input("lb", DType::F32, {B, H, L});
  g.output("out", merge_attention(oa, la, ob, lb));
  g.output("lse", merge_lse(la, lb));
  return g;
}

/// Compiled once per process for each set of dims, scale (exact) and the compile options
/// that change the code (the on-disk kernel cache would relink them on every call).
const RingKernels &kernels_for(const Shard &s, const RingOptions &o) {
  static std::mutex m;
  static std::map<std::string, RingKernels> cache;
  std::lock_guard<std::mutex> lock(m);
  std::ostringstream key;
  key << std::hexfloat << s.H << ' ' << s.Hkv << ' ' << s.Dh << ' ' << s.Dv << ' '
      << (o.scale ? *o.scale : -1.0) << ' ' << kernel_cache::options_text(o.compile);
  auto it = cache.find(key.str());
  if (it == cache.end()) {
    RingKernels k{compile(partial_graph(s, false, o.scale), Target::host(), o.compile),
                  compile(partial_graph(s, true, o.scale), Target::host(), o.compile),
                  compile(merge_graph(s), Target::host(), o.compile)};
    it = cache.emplace(key.str(), std::move(k)).first;
  }
  return it->second;
}

} // namespace

std::array<std::pair<std::int64_t, std::int64_t>, 2> zigzag_rows(std::int64_t length, int rank,
                                                                 int ranks) {
  std::int64_t chunks = 2 * static_cast<std::int64_t>(ranks);
  auto begin = [&](std::int64_t c) { return c * (length / chunks) + std::min(c, length % chunks); };
  std::int64_t a = rank, b = chunks - 1 - rank;
  return {{{begin(a), begin(a + 1)}, {begin(b), begin(b + 1)}}};
}

namespace {

/// Rows [first, last) of t (B, H, n, D).
Tensor rows(const Tensor &t, std::int64_t first, std::int64_t last) {
  const Shape &s = t.shape();
  if (first == 0 && last == s[2])
    return t;
  Tensor out = Tensor::uninitialized(DType::F32, {s[0], s[1], last - first, s[3]});
  std::size_t row = static_cast<std::size_t>(s[3]);
  for (std::int64_t x = 0; x < s[0] * s[1]; ++x)
    std::memcpy(out.data_as<float>() + x * (last - first) * s[3],
                t.data_as<float>() + (x * s[2] + first) * s[3],
                (static_cast<std::size_t>(last - first)) * row * sizeof(float));
  return out;
}

/// One run of a rank's rows: where its rows are in the rank's tensors, and its place in the
/// sequence (chunks compare in sequence order: contiguous shards by rank, zigzag chunks by
/// chunk number).
struct Chunk {
  std::int64_t first, last, order;
};

std::vector<Chunk> chunks_of(std::int64_t rows, int rank, int ranks, bool zigzag) {
  if (!zigzag)
    return {{0, rows, rank}};
  std::int64_t half = (rows + 1) / 2;
  std::vector<Chunk> c{{0, half, rank}};
  if (half < rows)
    c.push_back({half, rows, 2 * static_cast<std::int64_t>(ranks) - 1 - rank});
  return c;
}

/// A query chunk's running result.
struct Partial {
  Tensor q;
  std::optional<Tensor> out, lse;
};

/// The partials of `queries` over the key chunks of the shard in hand, merged into each.
void attend(const RingKernels &kern, const RingOptions &o, std::vector<Partial> &queries,
            const std::vector<Chunk> &mine, const Tensor &k, const Tensor &v,
            const std::vector<Chunk> &theirs, RingStats &st) {
  std::vector<Tensor> ks, vs; // each key chunk's rows, copied once for every query chunk
  for (const Chunk &kc : theirs) {
    ks.push_back(rows(k, kc.first, kc.last));
    vs.push_back(rows(v, kc.first, kc.last));
  }
  for (std::size_t i = 0; i < queries.size(); ++i)
    for (std::size_t j = 0; j < theirs.size(); ++j) {
      const Chunk &kc = theirs[j];
      std::int64_t qo = mine[i].order;
      if (o.causal && kc.order > qo) // every key after every query
        continue;
      double c0 = now_s();
      const Kernel &kernel = o.causal && kc.order == qo ? kern.causal : kern.full;
      TensorMap part = kernel.run({{"q", queries[i].q}, {"k", ks[j]}, {"v", vs[j]}});
      double c1 = now_s();
      st.compute_s += c1 - c0;
      Partial &p = queries[i];
      if (!p.out) {
        p.out = part.at("out");
        p.lse = part.at("lse");
      } else {
        TensorMap merged = kern.merge.run(
            {{"oa", *p.out}, {"la", *p.lse}, {"ob", part.at("out")}, {"lb", part.at("lse")}});
        p.out = merged.at("out");
        p.lse = merged.at("lse");
        st.merge_s += now_s() - c1;
      }
      ++st.computed;
    }
}

/// The query chunks' outputs, one after another along the rows.
Tensor joined(const std::vector<Partial> &parts) {
  if (parts.size() == 1)
    return *parts[0].out;
  const Shape &a = parts[0].out->shape();
  std::int64_t total = 0;
  for (const Partial &p : parts)
    total += p.out->shape()[2];
  Tensor out = Tensor::uninitialized(DType::F32, {a[0], a[1], total, a[3]});
  std::int64_t at = 0;
  for (const Partial &p : parts) {
    std::int64_t n = p.out->shape()[2];
    for (std::int64_t x = 0; x < a[0] * a[1]; ++x)
      std::memcpy(out.data_as<float>() + (x * total + at) * a[3],
                  p.out->data_as<float>() + x * n * a[3],
                  static_cast<std::size_t>(n * a[3]) * sizeof(float));
    at += n;
  }
  return out;
}

} // namespace

Tensor ring_attention(Comm &comm, const Tensor &q, const Tensor &k, const Tensor &v,
                      const RingOptions &o, RingStats *stats) {
  double t0 = now_s();
  RingStats st;
  auto [mine, why] = check_local(q, k, v);
  std::vector<Shard> shards = gather_shards(comm, mine, why);
  const RingKernels &kern = kernels_for(mine, o);
  int n = comm.size(), r = comm.rank();
  int next = (r + 1) % n, prev = (r - 1 + n) % n;
  std::int64_t sent0 = comm.stats().bytes_sent;
  double wait0 = comm.stats().wait_s;

  std::vector<Chunk> my_chunks = chunks_of(mine.n, r, n, o.zigzag);
  std::vector<Partial> queries;
  for (const Chunk &c : my_chunks)
    queries.push_back({rows(q, c.first, c.last), {}, {}});
  Tensor cur_k = k, cur_v = v; // the shard in hand: rank (r - t) mod n's at step t
  for (int t = 0; t < n; ++t) {
    int src = (r - t + n) % n, from = (src - 1 + n) % n;
    Exchange x;
    Tensor next_k, next_v;
    if (t + 1 < n) { // pass this shard on and take the previous rank's, behind the compute
      const Shard &in = shards[static_cast<std::size_t>(from)];
      next_k = Tensor::uninitialized(DType::F32, {in.B, in.Hkv, in.n, in.Dh});
      next_v = Tensor::uninitialized(DType::F32, {in.B, in.Hkv, in.n, in.Dv});
      x = comm.exchange({&cur_k, &cur_v}, next, {&next_k, &next_v}, prev,
                        "the k and v shard of rank " + std::to_string(from) + " (ring step " +
                            std::to_string(t + 1) + ")");
    }
    attend(kern, o, queries, my_chunks, cur_k, cur_v,
           chunks_of(shards[static_cast<std::size_t>(src)].n, src, n, o.zigzag), st);
    ++st.steps;
    if (x.pending()) {
      comm.wait(x);
      cur_k = std::move(next_k);
      cur_v = std::move(next_v);
    }
  }
  st.bytes_sent = comm.stats().bytes_sent - sent0;
  st.wait_s = comm.stats().wait_s - wait0;
  st.total_s = now_s() - t0;
  if (stats)
    *stats = st;
  return joined(queries);
}

} // namespace qkv::dist
