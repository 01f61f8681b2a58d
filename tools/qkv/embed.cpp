// `qkv embed`: sentence embeddings, their cosine similarities, and the model's speed.
#include "embed.hpp"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include <qkv/compiler/compile.hpp>
#include <qkv/dist/tensor_parallel.hpp>
#include <qkv/models/bert.hpp>
#include <qkv/models/sentence_encoder.hpp>
#include <qkv_bench/machine.hpp>
#include <qkv_bench/timing.hpp>

namespace qkv::tool {

const char *const kEmbedHelp =
    "usage: qkv embed [--model DIR] [--json] [--reference] [--threads T] [--batch N]\n"
    "                 [--plan P] [--dtype T] [--isa TIER] [--tp N] SENTENCE...\n"
    "       qkv embed --bench [--model DIR] [--threads T] [--plan P] [--json] [--repeat R]\n"
    "                 [--dtype T] [--isa TIER] [--sentences N --words W --batch N]\n\n"
    "Embeds each SENTENCE with a sentence-transformers model: WordPiece ids, the BERT\n"
    "encoder JIT-compiled for the host CPU, mean pooling and L2 normalization as the\n"
    "model's modules.json says. Prints each sentence's tokens, dims, norm and first values,\n"
    "then the cosine-similarity matrix.\n\n"
    "  --model DIR    the model directory (default: all-MiniLM-L6-v2 in the model cache,\n"
    "                 $QKV_MODEL_CACHE or ~/.cache/qkv/models; scripts/fetch-model.sh minilm\n"
    "                 downloads it there)\n"
    "  --json         print one JSON object: per sentence its token ids, norm and\n"
    "                 embedding, then the cosine matrix\n"
    "  --reference    also run the reference interpreter (double precision, slow) and print\n"
    "                 each embedding's cosine and max abs diff against it\n"
    "  --threads T    OpenMP threads of the kernels (default: all cores)\n"
    "  --batch N      sentences per batch, each padded to its longest (default 32)\n"
    "  --plan P       per-layer (default: an embeddings kernel, one layer kernel run once per\n"
    "                 layer, a pooling kernel) or whole (one kernel for the model)\n"
    "  --dtype T      f32 (default) or bf16: the weights kept in bf16 and every node rounded\n"
    "                 to it, as the model cast to bf16 computes (docs/models.md)\n"
    "  --isa TIER     the tier the products run on: host (default), f32, avx512bf16, amx\n"
    "  --tp N         tensor parallelism over the N ranks of mpirun (mpirun -np N qkv embed\n"
    "                 --tp N ...): each rank holds 1/N of the heads, FFN columns and word\n"
    "                 embeddings (f32); rank 0 prints (docs/distributed.md)\n\n"
    "--bench times the model on generated sentences instead, reporting sentences/s: 256\n"
    "sentences of 18 words (20 tokens) at batch 32, then 256 of 300 words (truncated to\n"
    "256 tokens) at batch 16; --sentences, --words and --batch set one case instead.\n"
    "Each case runs once untimed, then --repeat times (default 3); the median is reported.\n"
    "With the per-layer plan it also reports what OpenMP costs a layer call: the layer\n"
    "kernel's parallel loops (counted in its llvm stage) times one loop's fork and join\n"
    "(what 33 tiny elementwise ops take over 1, per op), as a share of a layer call at the\n"
    "first case (JSON: openmp).\n"
    "bench/embed_peer.py times sentence-transformers (PyTorch) on the same sentences.\n";

namespace {

using json = nlohmann::ordered_json;

constexpr const char *kWords[64] = {
    "the",    "of",    "and",   "to",    "in",    "is",    "was",   "for",    "on",    "that",
    "with",   "as",    "by",    "at",    "from",  "his",   "her",   "an",     "which", "or",
    "are",    "be",    "this",  "had",   "not",   "but",   "new",   "first",  "one",   "their",
    "after",  "also",  "two",   "time",  "were",  "city",  "world", "school", "state", "team",
    "people", "music", "year",  "film",  "war",   "house", "game",  "water",  "life",  "family",
    "book",   "road",  "night", "light", "river", "small", "great", "long",   "train", "paper",
    "north",  "south", "king",  "power"};

struct Options {
  std::string model;
  DType dtype = DType::F32;
  CompileOptions compile;
  KernelPlan plan = KernelPlan::PerLayer;
  std::int64_t batch = 32;
  bool json = false;
  std::shared_ptr<const TensorParallel> tp; // --tp
};

Options options_of(const cli::Args &a) {
  Options o;
  o.model = a.opts.count("model") ? a.opts.at("model") : default_minilm_dir();
  if (auto t = cli::int_opt(a, "threads"))
    o.compile.schedule.threads = static_cast<int>(*t);
  o.batch = cli::int_opt(a, "batch").value_or(o.batch);
  o.json = a.opts.count("json") > 0;
  if (a.opts.count("dtype")) {
    const std::string &d = a.opts.at("dtype");
    if (d != "f32" && d != "bf16")
      user_error("--dtype: expected f32 or bf16, got '" + d + "'");
    o.dtype = d == "bf16" ? DType::BF16 : DType::F32;
  }
  if (a.opts.count("isa"))
    o.compile.isa = parse_isa(a.opts.at("isa"), "--isa");
  if (a.opts.count("plan")) {
    const std::string &p = a.opts.at("plan");
    if (p != "per-layer" && p != "whole")
      user_error("--plan: expected per-layer or whole, got '" + p + "'");
    o.plan = p == "whole" ? KernelPlan::WholeModel : KernelPlan::PerLayer;
  }
  for (const char *flag : {"json", "reference", "bench"})
    if (a.opts.count(flag) && !a.opts.at(flag).empty())
      user_error(std::string("--") + flag + " takes no value, got '" + a.opts.at(flag) + "'");
  return o;
}

SentenceEncoder load_model(const Options &o) {
  SentenceEncoder m = SentenceEncoder::load(o.model, o.dtype);
  if (o.tp)
    m.parallelize(o.tp);
  m.compile(o.compile, o.plan);
  return m;
}

double dot(const Tensor &e, std::int64_t i, std::int64_t j) {
  double s = 0;
  for (std::int64_t k = 0; k < e.shape()[1]; ++k)
    s += e.get(i * e.shape()[1] + k) * e.get(j * e.shape()[1] + k);
  return s;
}

/// 0 for a zero vector; NaN when either vector holds a NaN (as its norm then is), never a
/// plausible number.
double cosine(const Tensor &e, std::int64_t i, std::int64_t j) {
  double d = std::sqrt(dot(e, i, i) * dot(e, j, j));
  return d > 0 || std::isnan(d) ? dot(e, i, j) / d : 0.0;
}

/// Cosine and max abs diff of row i of a (f32) and of b (f64).
std::pair<double, double> agreement(const Tensor &a, const Tensor &b, std::int64_t i) {
  std::int64_t d = a.shape()[1];
  double ab = 0, aa = 0, bb = 0, diff = 0;
  for (std::int64_t k = 0; k < d; ++k) {
    double x = a.get(i * d + k), y = b.get(i * d + k);
    ab += x * y, aa += x * x, bb += y * y;
    diff = std::max(diff, std::abs(x - y));
  }
  return {ab / std::sqrt(aa * bb), diff};
}

void print_text(const SentenceEncoder &m, const std::vector<std::string> &s,
                const std::vector<std::vector<std::int32_t>> &ids, const Tensor &e,
                const Tensor *ref) {
  auto n = static_cast<std::int64_t>(s.size());
  const BertConfig &c = m.config();
  std::cout << "BERT, " << c.num_hidden_layers << " layers, dim " << m.dim() << ", at most "
            << m.max_seq_length() << " tokens" << (m.normalizes() ? ", normalized" : "")
            << "; compiled and weights packed in " << std::fixed << std::setprecision(0) << m.compile_ms() << " ms\n";
  for (std::int64_t i = 0; i < n; ++i) {
    std::cout << "[" << i << "] \"" << s[i] << "\"\n    " << ids[i].size() << " tokens, dim "
              << m.dim() << ", norm " << std::setprecision(6) << std::sqrt(dot(e, i, i)) << ":";
    for (std::int64_t k = 0; k < std::min<std::int64_t>(8, m.dim()); ++k)
      std::cout << " " << std::setprecision(4) << e.get(i * m.dim() + k);
    std::cout << " ...\n";
    if (ref) {
      auto [cos, diff] = agreement(e, *ref, i);
      std::cout << "    vs interpreter: cosine " << std::setprecision(8) << cos << ", max abs diff "
                << std::scientific << std::setprecision(2) << diff << std::fixed << "\n";
    }
  }
  std::cout << "cosine similarity:\n      ";
  for (std::int64_t j = 0; j < n; ++j)
    std::cout << std::setw(7) << ('[' + std::to_string(j) + ']');
  std::cout << "\n";
  for (std::int64_t i = 0; i < n; ++i) {
    std::cout << std::setw(6) << ('[' + std::to_string(i) + ']');
    for (std::int64_t j = 0; j < n; ++j)
      std::cout << std::setw(7) << std::setprecision(3) << cosine(e, i, j);
    std::cout << "\n";
  }
}

json to_json(const SentenceEncoder &m, const Options &o, const std::vector<std::string> &s,
             const std::vector<std::vector<std::int32_t>> &ids, const Tensor &e,
             const Tensor *ref) {
  auto n = static_cast<std::int64_t>(s.size());
  json j = {{"model", o.model},
            {"dim", m.dim()},
            {"normalized", m.normalizes()},
            {"max_seq_length", m.max_seq_length()},
            {"compile_ms", m.compile_ms()},
            {"sentences", json::array()}};
  for (std::int64_t i = 0; i < n; ++i) {
    std::vector<double> v(static_cast<std::size_t>(m.dim()));
    for (std::int64_t k = 0; k < m.dim(); ++k)
      v[k] = e.get(i * m.dim() + k);
    json item = {{"text", s[i]}, {"ids", ids[i]}, {"norm", std::sqrt(dot(e, i, i))}};
    if (ref) {
      auto [cos, diff] = agreement(e, *ref, i);
      item["reference"] = {{"cosine", cos}, {"max_abs_diff", diff}};
    }
    item["embedding"] = v;
    j["sentences"].push_back(item);
  }
  json cos = json::array();
  for (std::int64_t i = 0; i < n; ++i) {
    json row = json::array();
    for (std::int64_t k = 0; k < n; ++k)
      row.push_back(cosine(e, i, k));
    cos.push_back(row);
  }
  j["cosine"] = cos;
  return j;
}

struct BenchCase {
  std::int64_t sentences, words, batch;
};

json bench_case(SentenceEncoder &m, const BenchCase &c, int repeat) {
  std::vector<std::string> s;
  for (std::int64_t i = 0; i < c.sentences; ++i)
    s.push_back(bench_sentence(static_cast<int>(i), static_cast<int>(c.words)));
  std::int64_t tokens = 0, longest = 0;
  for (const auto &ids : m.tokenize(s)) {
    tokens += static_cast<std::int64_t>(ids.size());
    longest = std::max(longest, static_cast<std::int64_t>(ids.size()));
  }
  qkv::bench::TimingPolicy policy;
  policy.runs = repeat;
  policy.slow_seconds = 1e9; // always one untimed warm-up
  qkv::bench::Timing t = qkv::bench::time_runs([&] { m.embed(s, c.batch); }, policy);
  double sec = t.median_ms / 1e3;
  return {{"sentences", c.sentences},
          {"words", c.words},
          {"batch", c.batch},
          {"tokens_per_sentence", longest},
          {"ms", t.median_ms},
          {"min_ms", t.min_ms},
          {"runs", t.runs},
          {"steal", t.steal},
          {"sentences_per_s", static_cast<double>(c.sentences) / sec},
          {"tokens_per_s", static_cast<double>(tokens) / sec}};
}

/// What OpenMP costs a layer call: the parallel loops of the layer kernel (counted in its
/// llvm stage), times the fork and join of one, measured as the time a graph of 33 tiny
/// elementwise ops (one parallel loop each) takes more than a graph of 1, per op.
json openmp_overhead(const SentenceEncoder &m, const CompileOptions &options) {
  std::string ir = lower_to(bert_layer_graph(m.config()), Target::host(), "llvm", options);
  std::int64_t loops = 0;
  for (std::size_t at = ir.find("omp.parallel"); at != std::string::npos;
       at = ir.find("omp.parallel", at + 1))
    ++loops;
  auto chain = [&](int ops) {
    Graph g("tiny_ops_" + std::to_string(ops));
    Value x = g.input("x", DType::F32, {Dim("R"), Dim("C", 8)});
    for (int i = 0; i < ops; ++i)
      x = scale(x, 1.0 + 1.0 / (i + 2));
    g.output("y", x);
    Kernel k = compile(g, Target::host(), options);
    TensorMap in = random_inputs(g, {{"R", 2}}, 1);
    qkv::bench::TimingPolicy p;
    p.min_runs = 200;
    p.min_seconds = 0.3;
    return qkv::bench::time_runs([&] { k.run(in); }, p).median_ms;
  };
  double one = chain(1), many = chain(33);
  double per_loop_us = std::max(0.0, (many - one) / 32 * 1e3);
  return {{"parallel_loops_per_layer", loops}, {"fork_join_us", per_loop_us},
          {"per_layer_call_us", per_loop_us * static_cast<double>(loops)}};
}

int run_bench(const cli::Args &a, const Options &o) {
  std::vector<BenchCase> cases = {{256, 18, 32}, {256, 300, 16}};
  if (a.opts.count("sentences") || a.opts.count("words") || a.opts.count("batch"))
    cases = {{cli::int_opt(a, "sentences").value_or(256), cli::int_opt(a, "words").value_or(18),
              o.batch}};
  int repeat = static_cast<int>(cli::int_opt(a, "repeat").value_or(3));
  SentenceEncoder m = load_model(o);
  json j = {{"model", o.model},
            {"dtype", dtype_name(o.dtype)},
            {"threads", o.compile.schedule.threads},
            {"plan", o.plan == KernelPlan::WholeModel ? "whole" : "per-layer"},
            {"compile_ms", m.compile_ms()},
            {"cases", json::array()}};
  for (const BenchCase &c : cases) {
    if (!o.json)
      std::cerr << "[qkv embed] " << c.sentences << " sentences of " << c.words
                << " words at batch " << c.batch << "...\n";
    j["cases"].push_back(bench_case(m, c, repeat));
  }
  if (o.plan == KernelPlan::PerLayer) {
    if (!o.json)
      std::cerr << "[qkv embed] OpenMP's fork and join...\n";
    json omp = openmp_overhead(m, o.compile);
    // A layer call's share: the first case's time per batch, over the layers.
    const json &first = j["cases"][0];
    double batches = std::ceil(first["sentences"].get<double>() / first["batch"].get<double>());
    double layer_us = first["ms"].get<double>() * 1e3 / batches /
                      static_cast<double>(m.config().num_hidden_layers);
    omp["layer_call_us"] = layer_us;
    omp["pct_of_layer_call"] = 100 * omp["per_layer_call_us"].get<double>() / layer_us;
    j["openmp"] = omp;
  }
  if (o.json) {
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << "model " << o.model << " (" << dtype_name(o.dtype)
            << "), compiled and weights packed in " << std::fixed << std::setprecision(0)
            << m.compile_ms() << " ms (" << j["plan"].get<std::string>() << ")\n";
  for (const json &c : j["cases"])
    std::cout << std::setw(4) << c["sentences"].get<int>() << " sentences of " << std::setw(3)
              << c["tokens_per_sentence"].get<int>() << " tokens, batch " << std::setw(2)
              << c["batch"].get<int>() << ": " << std::setprecision(1) << std::setw(7)
              << c["sentences_per_s"].get<double>() << " sentences/s, " << std::setprecision(0)
              << c["tokens_per_s"].get<double>() << " tokens/s (" << std::setprecision(0)
              << c["ms"].get<double>() << " ms, median of " << c["runs"].get<int>()
              << (c["steal"].get<double>() >= 0
                      ? ", steal " + qkv::bench::fixed(100 * c["steal"].get<double>(), 1) + "%"
                      : std::string())
              << ")\n";
  if (j.contains("openmp")) {
    const json &omp = j["openmp"];
    std::cout << "openmp: " << omp["parallel_loops_per_layer"].get<int>()
              << " parallel loops per layer call, " << std::setprecision(1)
              << omp["fork_join_us"].get<double>() << " us each (fork and join): "
              << omp["per_layer_call_us"].get<double>() << " us of a "
              << omp["layer_call_us"].get<double>() << " us layer call at the first case = "
              << std::setprecision(2) << omp["pct_of_layer_call"].get<double>() << "%\n";
  }
  return 0;
}

} // namespace

std::string bench_sentence(int i, int words) {
  std::string s;
  for (int k = 0; k < words; ++k) {
    if (k)
      s += ' ';
    s += kWords[(31 * i + 17 * k) % 64];
  }
  return s;
}

/// --tp N: this process is one of the N ranks mpirun started; rank 0 alone prints.
/// Returns the communicator, which must outlive the model.
std::unique_ptr<dist::Comm> join_ranks(const cli::Args &a, Options &o) {
  std::optional<std::int64_t> tp = cli::int_opt(a, "tp");
  if (!tp)
    return nullptr;
  if (*tp < 1)
    user_error("--tp: expected at least 1 rank, got " + std::to_string(*tp));
  if (a.opts.count("reference"))
    user_error("qkv embed: --reference runs the whole model in one process; not with --tp");
  auto comm = std::make_unique<dist::Comm>();
  if (comm->size() != *tp)
    user_error("--tp " + std::to_string(*tp) + " but mpirun started " +
               std::to_string(comm->size()) + " rank(s); run mpirun -np " + std::to_string(*tp) +
               " qkv embed --tp " + std::to_string(*tp) + " ...");
  o.tp = dist::tensor_parallel(*comm);
  // The ranks on this machine share its cores.
  if (o.compile.schedule.threads == 0)
    o.compile.schedule.threads = std::max(1, qkv::bench::hardware_threads() / comm->local_size());
  if (comm->rank() != 0)
    std::cout.setstate(std::ios::failbit);
  return comm;
}

int cmd_embed(const cli::Args &a) {
  cli::check_opts(a, {"model", "json", "reference", "threads", "batch", "plan", "bench", "repeat",
                      "sentences", "words", "dtype", "isa", "tp"});
  Options o = options_of(a);
  std::unique_ptr<dist::Comm> comm = join_ranks(a, o);
  if (a.opts.count("bench"))
    return run_bench(a, o);
  for (const char *opt : {"repeat", "sentences", "words"})
    if (a.opts.count(opt))
      user_error(std::string("qkv embed: --") + opt + " goes with --bench");
  if (a.args.empty())
    user_error("qkv embed: which sentences? (qkv embed \"first sentence\" \"second\" ...)");
  SentenceEncoder m = load_model(o);
  std::vector<std::vector<std::int32_t>> ids = m.tokenize(a.args);
  Tensor e = m.embed(a.args, o.batch);
  Tensor ref;
  if (a.opts.count("reference"))
    ref = m.embed_reference(a.args);
  const Tensor *r = ref.empty() ? nullptr : &ref;
  if (o.json)
    std::cout << to_json(m, o, a.args, ids, e, r).dump(1) << "\n";
  else
    print_text(m, a.args, ids, e, r);
  return 0;
}

} // namespace qkv::tool
