// Text generation with a Llama-style decoder, through qkv's C++ API: load the model from
// its Hugging Face files (config.json, model.safetensors), compile it once, prefill a
// batch of prompts, then decode token by token over a KV cache read in place.
//
//   build/bin/qkv-generate [MODEL_DIR] [--prompt 1,17,42 ...] [--new N]
//                          [--temperature T --top-k K --seed S] [--paged] [--interpreter]
//                          [--dtype f32|bf16] [--isa TIER]
//   build/bin/qkv-generate --random [--hidden 512 --layers 2 --heads 8 --kv-heads 8
//                          --intermediate 1376 --vocab 32000] --context 4096 [--new 32]
//                          [--batch B] [--paged]
//   mpirun -np N build/bin/qkv-generate --tp N [...]
//
// MODEL_DIR defaults to the tiny random model of the tests (tests/models/data/tiny-llama).
// Token ids in, token ids out: qkv has no Llama tokenizer (yet). --random builds a model of
// the given size with random weights and a random prompt of --context tokens, to measure
// speed at that context length. Prints the tokens, then prefill and decode tokens/s
// separately (compile time apart). --tp N splits the model over the N ranks mpirun starts
// (tensor parallelism, docs/distributed.md): the same tokens as one process.
#include <qkv/dist/tensor_parallel.hpp>
#include <qkv/models/llama.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#ifndef QKV_TINY_LLAMA_DIR
#define QKV_TINY_LLAMA_DIR "tests/models/data/tiny-llama"
#endif

namespace {

struct Args {
  std::string dir = QKV_TINY_LLAMA_DIR;
  std::vector<std::vector<std::int64_t>> prompts;
  qkv::SamplingOptions sampling;
  qkv::LlamaOptions options;
  bool random = false;
  bool help = false;
  qkv::LlamaConfig size; // --random's model
  std::int64_t context = 512;
  int tp = 0; // --tp: ranks of tensor parallelism (0: this process alone)
};

constexpr const char *kUsage = R"(usage:
  qkv-generate [MODEL_DIR] [--prompt 1,17,42 ...] [--new N] [--temperature T] [--top-k K]
               [--seed S] [--paged] [--interpreter] [--threads T] [--dtype D] [--isa TIER]
  qkv-generate --random [--hidden 512 --layers 2 --heads 8 --kv-heads 8
               --intermediate 1376 --vocab 32000] [--context 512] [--batch B] [--new N]
               [--paged] [--threads T] [--dtype D] [--isa TIER]
  mpirun -np N qkv-generate --tp N [the options above]

MODEL_DIR holds a Llama-style model's config.json and model.safetensors (default: the
tiny random model of qkv's tests). Prompts are token ids; --prompt once per sequence.
--new N tokens are generated (default 16), greedily unless --temperature is given.
--random measures speed on a model of the given size with random weights and random
prompts of --context tokens. Prints the tokens, prefill and decode tokens/s.
--dtype bf16 keeps the weights and the KV cache in bf16 and rounds every node to it, as
the model cast to bf16 computes (default f32); --isa picks the tier its products run on
(host, the default: the best this CPU has; f32; avx512bf16; amx).
--tp N splits the model's heads, MLP columns and vocabulary over the N ranks of mpirun
(f32 only); every rank generates the same tokens, rank 0 prints them.
)";

std::int64_t integer(const std::string &option, const std::string &text) {
  std::size_t used = 0;
  std::int64_t v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception &) {
    used = 0;
  }
  if (used == 0 || used != text.size())
    throw std::invalid_argument(option + " expects an integer, got '" + text + "'");
  return v;
}

double number(const std::string &option, const std::string &text) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception &) {
    used = 0;
  }
  if (used == 0 || used != text.size())
    throw std::invalid_argument(option + " expects a number, got '" + text + "'");
  return v;
}

std::vector<std::int64_t> parse_ids(const std::string &s) {
  std::vector<std::int64_t> ids;
  std::stringstream ss(s);
  std::string part;
  while (std::getline(ss, part, ','))
    ids.push_back(integer("--prompt", part));
  return ids;
}

/// An option below `min`: an error naming it, what it counts and its value.
void at_least(const char *option, std::int64_t v, std::int64_t min, const char *what) {
  if (v < min)
    throw std::invalid_argument(std::string(option) + " must be at least " + std::to_string(min) +
                                " (" + what + "), got " + std::to_string(v));
}

/// The options' values, checked before a model is built (the random model's sizes when
/// --random).
void check_options(const Args &a, std::int64_t batch) {
  at_least("--new", a.sampling.max_new_tokens, 0, "tokens to generate");
  at_least("--top-k", a.sampling.top_k, 0, "0 samples from every token");
  at_least("--batch", batch, 1, "sequences");
  at_least("--tp", a.tp, 0, "ranks; 0 runs alone");
  if (!(a.sampling.temperature >= 0) || std::isinf(a.sampling.temperature))
    throw std::invalid_argument("--temperature must be a finite number, 0 (greedy) or "
                                "positive, got " + std::to_string(a.sampling.temperature));
  if (!a.random)
    return;
  at_least("--context", a.context, 1, "the random prompt's tokens");
  at_least("--hidden", a.size.hidden_size, 1, "the model dim");
  at_least("--heads", a.size.num_attention_heads, 1, "query heads");
  at_least("--kv-heads", a.size.num_key_value_heads, 1, "key/value heads");
  at_least("--layers", a.size.num_hidden_layers, 1, "decoder layers");
  at_least("--intermediate", a.size.intermediate_size, 1, "the MLP's width");
  at_least("--vocab", a.size.vocab_size, 1, "tokens");
  if (a.size.hidden_size % a.size.num_attention_heads != 0)
    throw std::invalid_argument("--heads " + std::to_string(a.size.num_attention_heads) +
                                " does not divide --hidden " +
                                std::to_string(a.size.hidden_size) +
                                ": the head dim is hidden / heads");
}

Args parse(int argc, char **argv) {
  Args a;
  a.sampling.max_new_tokens = 16;
  a.size.hidden_size = 512;
  a.size.num_hidden_layers = 2;
  a.size.num_attention_heads = 8;
  a.size.num_key_value_heads = 8;
  a.size.intermediate_size = 1376;
  a.size.vocab_size = 32000;
  a.size.rms_norm_eps = 1e-5;
  std::int64_t batch = 1;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        throw std::invalid_argument(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--prompt")
      a.prompts.push_back(parse_ids(value()));
    else if (arg == "--new")
      a.sampling.max_new_tokens = integer(arg, value());
    else if (arg == "--temperature")
      a.sampling.temperature = number(arg, value());
    else if (arg == "--threads")
      a.options.threads = static_cast<int>(integer(arg, value()));
    else if (arg == "--help" || arg == "-h")
      a.help = true;
    else if (arg == "--top-k")
      a.sampling.top_k = integer(arg, value());
    else if (arg == "--seed")
      a.sampling.seed = static_cast<std::uint64_t>(integer(arg, value()));
    else if (arg == "--paged")
      a.options.paged = true;
    else if (arg == "--interpreter")
      a.options.backend = qkv::LlamaOptions::Backend::Interpreter;
    else if (arg == "--random")
      a.random = true;
    else if (arg == "--dtype") {
      std::string d = value();
      if (d != "f32" && d != "bf16")
        throw std::invalid_argument("--dtype takes f32 or bf16, got '" + d + "'");
      a.options.dtype = d == "bf16" ? qkv::DType::BF16 : qkv::DType::F32;
    } else if (arg == "--isa")
      a.options.isa = qkv::parse_isa(value(), "--isa");
    else if (arg == "--context")
      a.context = integer(arg, value());
    else if (arg == "--tp")
      a.tp = static_cast<int>(integer(arg, value()));
    else if (arg == "--batch")
      batch = integer(arg, value());
    else if (arg == "--hidden")
      a.size.hidden_size = integer(arg, value());
    else if (arg == "--layers")
      a.size.num_hidden_layers = integer(arg, value());
    else if (arg == "--heads")
      a.size.num_attention_heads = integer(arg, value());
    else if (arg == "--kv-heads")
      a.size.num_key_value_heads = integer(arg, value());
    else if (arg == "--intermediate")
      a.size.intermediate_size = integer(arg, value());
    else if (arg == "--vocab")
      a.size.vocab_size = integer(arg, value());
    else if (!arg.empty() && arg[0] != '-')
      a.dir = arg;
    else
      throw std::invalid_argument("unknown option " + arg);
  }
  check_options(a, batch);
  if (a.random) {
    a.size.head_dim = a.size.hidden_size / a.size.num_attention_heads;
    a.size.max_position_embeddings = a.context + a.sampling.max_new_tokens;
    std::uint64_t state = 42;
    for (std::int64_t b = 0; b < batch; ++b) {
      std::vector<std::int64_t> p;
      for (std::int64_t i = 0; i < a.context; ++i)
        p.push_back(static_cast<std::int64_t>((state = state * 6364136223846793005ULL + 1) >> 33) %
                    a.size.vocab_size);
      a.prompts.push_back(p);
    }
  } else if (a.prompts.empty()) {
    a.prompts = {{1, 17, 42, 99, 3, 64, 8, 120, 55, 7, 31}, {1, 90, 12, 77, 5}};
  }
  a.options.batch = static_cast<std::int64_t>(a.prompts.size());
  std::size_t longest = 0;
  for (const auto &p : a.prompts)
    longest = std::max(longest, p.size());
  a.options.capacity = static_cast<std::int64_t>(longest) + a.sampling.max_new_tokens;
  a.options.verbose = true;
  return a;
}

} // namespace

int main(int argc, char **argv) try {
  Args a = parse(argc, argv);
  if (a.help) {
    std::cout << kUsage;
    return 0;
  }
  // Tensor parallelism: this process is one of the --tp ranks mpirun started.
  std::optional<qkv::dist::Comm> comm;
  if (a.tp > 0) {
    comm.emplace(&argc, &argv);
    if (comm->size() != a.tp)
      throw qkv::Error("--tp " + std::to_string(a.tp) + " but mpirun started " +
                       std::to_string(comm->size()) + " rank(s); run mpirun -np " +
                       std::to_string(a.tp) + " qkv-generate --tp " + std::to_string(a.tp));
    a.options.tp = qkv::dist::tensor_parallel(*comm);
    // The ranks on this machine share its cores: each takes its share unless --threads
    // says otherwise (two ranks of all cores each fight over them).
    if (a.options.threads == 0)
      a.options.threads =
          std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / comm->local_size());
    a.options.verbose = comm->rank() == 0;
    if (comm->rank() != 0) // one rank speaks; the others compute the same tokens
      std::freopen("/dev/null", "w", stdout);
  }
  qkv::LlamaModel model =
      a.random ? qkv::LlamaModel(a.size, qkv::LlamaWeights::random(a.size, 1, a.options.dtype),
                                 a.options)
               : qkv::LlamaModel::load(a.dir, a.options);
  const qkv::LlamaConfig &c = model.config();
  std::printf("model: %lld layers, hidden %lld, %lld heads (%lld kv), head dim %lld, vocab %lld; "
              "%s %s cache, %s; compiled and weights packed in %.2f s\n",
              static_cast<long long>(c.num_hidden_layers), static_cast<long long>(c.hidden_size),
              static_cast<long long>(c.num_attention_heads),
              static_cast<long long>(c.num_key_value_heads), static_cast<long long>(c.head_dim),
              static_cast<long long>(c.vocab_size), qkv::dtype_name(a.options.dtype).data(),
              a.options.paged ? "paged" : "contiguous",
              a.options.backend == qkv::LlamaOptions::Backend::Compiled ? "compiled"
                                                                          : "interpreter",
              model.compile_seconds());
  if (comm) // the ranks start together: a rank still compiling is not counted as traffic
    comm->barrier("the start of generation");
  qkv::GenerationResult r = qkv::generate(model, a.prompts, a.sampling);
  for (std::size_t b = 0; b < r.tokens.size(); ++b) {
    std::printf("sequence %zu (%zu prompt tokens):", b, a.prompts[b].size());
    for (std::int64_t t : r.tokens[b])
      std::printf(" %lld", static_cast<long long>(t));
    std::printf("\n");
  }
  std::printf("prefill: %lld tokens in %.2f ms = %.0f tokens/s\n",
              static_cast<long long>(r.prefill_tokens), r.prefill_seconds * 1e3,
              r.prefill_tokens_per_second());
  std::printf("decode:  %lld tokens in %.2f ms = %.0f tokens/s (%.3f ms per step)\n",
              static_cast<long long>(r.decode_tokens), r.decode_seconds * 1e3,
              r.decode_tokens_per_second(),
              r.decode_tokens ? r.decode_seconds * 1e3 /
                                    static_cast<double>(r.decode_tokens / a.options.batch)
                              : 0.0);
  if (comm)
    std::printf("tensor parallel over %d ranks: %.2f ms in all-reduces and gathers on rank 0, "
                "%.2f MB sent\n",
                comm->size(), model.times().comm_s * 1e3, comm->stats().bytes_sent / 1e6);
  return 0;
} catch (const qkv::Error &e) {
  std::fflush(stdout); // what was printed before (the "model:" line) comes first
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
} catch (const std::invalid_argument &e) {
  std::fflush(stdout);
  std::fprintf(stderr, "error: %s\n\n%s", e.what(), kUsage);
  return 2;
} catch (const std::exception &e) {
  std::fflush(stdout);
  std::fprintf(stderr, "error: %s\n", e.what());
  return 2;
}
