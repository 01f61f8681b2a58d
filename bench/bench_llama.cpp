// bench_llama: a Llama-style decoder's prefill and decode speed against this machine's
// roofline, measured in the same run: prefill as % of the fp32 FMA peak (it is compute
// bound), a decode step as % of the read bandwidth (it reads every weight and the whole
// KV cache once per token). Random weights of a Llama shape; the tokens do not matter.
//
//   build/bin/bench_llama [--hidden 512 --layers 2 --heads 8 --kv-heads 8
//                         --intermediate 1376 --vocab 32000] [--context 512,4096]
//                         [--steps 32] [--threads T] [--dtype f32|bf16]
//
// For each context length and cache layout (contiguous, paged in pages of 16 rows): the
// median of 3 prefills of `context` tokens, then `steps` decode steps after one of them
// and one untimed step (median step), and where a step's time goes (LlamaModel::times(),
// means over the same steps). --dtype bf16 keeps the weights and the cache in bf16
// (LlamaOptions::dtype): a step reads half the bytes, and the prefill's % is of the
// host's bf16 tier's peak (vdpbf16ps) where it has one.
#include <qkv/models/llama.hpp>

#include <qkv_bench/machine.hpp>
#include <qkv_bench/timing.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

struct Args {
  qkv::LlamaConfig c;
  std::vector<std::int64_t> contexts = {512, 4096};
  std::int64_t steps = 32;
  int threads = 0;
  qkv::DType dtype = qkv::DType::F32;
};

std::int64_t integer(const std::string &opt, const std::string &text) {
  std::size_t used = 0;
  std::int64_t v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception &) {
    used = 0;
  }
  if (used == 0 || used != text.size() || v < 1)
    throw std::invalid_argument(opt + " expects a positive integer, got '" + text + "'");
  return v;
}

Args parse(int argc, char **argv) {
  Args a;
  a.c.hidden_size = 512;
  a.c.num_hidden_layers = 2;
  a.c.num_attention_heads = 8;
  a.c.num_key_value_heads = 8;
  a.c.intermediate_size = 1376;
  a.c.vocab_size = 32000;
  a.c.rms_norm_eps = 1e-5;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--benchmark_", 0) == 0)
      continue; // ./qkv.sh bench passes Google Benchmark's options to every program
    if (i + 1 >= argc)
      throw std::invalid_argument("unknown option or missing value: " + arg);
    std::string v = argv[++i];
    if (arg == "--hidden")
      a.c.hidden_size = integer(arg, v);
    else if (arg == "--layers")
      a.c.num_hidden_layers = integer(arg, v);
    else if (arg == "--heads")
      a.c.num_attention_heads = integer(arg, v);
    else if (arg == "--kv-heads")
      a.c.num_key_value_heads = integer(arg, v);
    else if (arg == "--intermediate")
      a.c.intermediate_size = integer(arg, v);
    else if (arg == "--vocab")
      a.c.vocab_size = integer(arg, v);
    else if (arg == "--steps")
      a.steps = integer(arg, v);
    else if (arg == "--threads")
      a.threads = static_cast<int>(integer(arg, v));
    else if (arg == "--dtype") {
      if (v != "f32" && v != "bf16")
        throw std::invalid_argument("--dtype takes f32 or bf16, got '" + v + "'");
      a.dtype = v == "bf16" ? qkv::DType::BF16 : qkv::DType::F32;
    }
    else if (arg == "--context") {
      a.contexts.clear();
      std::stringstream ss(v);
      for (std::string part; std::getline(ss, part, ',');)
        a.contexts.push_back(integer(arg, part));
    } else
      throw std::invalid_argument("unknown option " + arg);
  }
  if (a.c.hidden_size % a.c.num_attention_heads || a.c.num_attention_heads % a.c.num_key_value_heads)
    throw std::invalid_argument("--heads must divide --hidden and --kv-heads must divide --heads");
  a.c.head_dim = a.c.hidden_size / a.c.num_attention_heads;
  return a;
}

/// Weights a decode step reads: every layer's and the head's, one embedding row.
double weight_elements(const qkv::LlamaConfig &c) {
  double d = static_cast<double>(c.hidden_size), kv = static_cast<double>(c.num_key_value_heads * c.head_dim);
  double layer = d * d * 2 + d * kv * 2 + 3 * d * static_cast<double>(c.intermediate_size) + 2 * d;
  return static_cast<double>(c.num_hidden_layers) * layer + d * static_cast<double>(c.vocab_size) + 2 * d;
}

double weight_bytes(const qkv::LlamaConfig &c, qkv::DType t) {
  return static_cast<double>(qkv::dtype_size(t)) * weight_elements(c);
}

/// Bytes of K and V a step at cache length n reads (and the new row it writes), all layers.
double cache_bytes(const qkv::LlamaConfig &c, double n, qkv::DType t) {
  return static_cast<double>(qkv::dtype_size(t)) * 2 *
         static_cast<double>(c.num_hidden_layers * c.num_key_value_heads * c.head_dim) * (n + 1);
}

/// Flops of a prefill of n tokens: 2 per layer weight per token, the LM head once (only
/// the last token's logits are computed), and causal attention's QK^T and PV over
/// n(n+1)/2 pairs per head.
double prefill_flops(const qkv::LlamaConfig &c, double n) {
  double head = static_cast<double>(c.hidden_size * c.vocab_size);
  double layers = weight_elements(c) - head;
  double attn = 2.0 * 2 * static_cast<double>(c.num_hidden_layers * c.num_attention_heads * c.head_dim) *
                n * (n + 1) / 2;
  return 2 * layers * n + 2 * head + attn;
}

std::vector<std::int64_t> random_tokens(std::int64_t n, std::int64_t vocab) {
  std::vector<std::int64_t> t(static_cast<std::size_t>(n));
  std::uint64_t s = 42;
  for (auto &x : t)
    x = static_cast<std::int64_t>((s = s * 6364136223846793005ULL + 1442695040888963407ULL) >> 33) % vocab;
  return t;
}

void run(const Args &a, const qkv::LlamaWeights &w, std::int64_t context, bool paged, double peak,
         double bw) {
  qkv::LlamaOptions o;
  o.dtype = a.dtype;
  o.capacity = context + 1 + a.steps;
  o.paged = paged;
  o.threads = a.threads;
  qkv::LlamaModel model(a.c, w, o);
  auto prompt = random_tokens(context, a.c.vocab_size);
  qkv::Tensor ids = qkv::Tensor::from_i64({1, context}, prompt);
  std::vector<double> prefill_ms;
  for (int r = 0; r < 3; ++r) {
    model.cache().reset();
    double t0 = qkv::bench::now_ms();
    model.forward(ids, {}, /*last_only=*/true);
    prefill_ms.push_back(qkv::bench::now_ms() - t0);
  }
  // One step untimed: the first step compiles what a JIT kernel defers to its first call
  // of one row (the decode attention schedule, the skinny GEMMs), which would otherwise be
  // counted in the layers' and the head's mean times (tens of ms in the first step).
  qkv::Tensor one = qkv::Tensor::from_i64({1, 1}, {1});
  model.forward(one, {}, true);
  model.reset_times();
  std::vector<double> step_ms;
  for (std::int64_t s = 0; s < a.steps; ++s) {
    double t0 = qkv::bench::now_ms();
    model.forward(one, {}, true);
    step_ms.push_back(qkv::bench::now_ms() - t0);
  }
  double pf = qkv::bench::median(prefill_ms), st = qkv::bench::median(step_ms);
  double bytes =
      weight_bytes(a.c, a.dtype) +
      cache_bytes(a.c, static_cast<double>(context) + 1 + static_cast<double>(a.steps) / 2,
                  a.dtype);
  const qkv::LlamaTimes &t = model.times();
  double n = static_cast<double>(t.steps);
  double head_bytes = static_cast<double>(qkv::dtype_size(a.dtype)) *
                      static_cast<double>(a.c.hidden_size * a.c.vocab_size);
  double head_ms = 1e3 * t.head_s / n, layers_ms = 1e3 * t.layers_s / n;
  std::printf("%7lld  %-10s  %9.1f  %8.0f  %5.1f%%   %7.3f  %7.1f  %5.1f%%   %6.3f (%4.1f%%)  %6.3f (%4.1f%%)  %5.3f\n",
              static_cast<long long>(context), paged ? "paged" : "contiguous", pf,
              static_cast<double>(context) / pf * 1e3,
              100 * prefill_flops(a.c, static_cast<double>(context)) / (pf * 1e-3) / 1e9 / peak, st,
              1e3 / st, 100 * bytes / (st * 1e-3) / 1e9 / bw, layers_ms,
              100 * (bytes - head_bytes) / (layers_ms * 1e-3) / 1e9 / bw, head_ms,
              100 * head_bytes / (head_ms * 1e-3) / 1e9 / bw,
              1e3 * (t.embed_s + t.append_s) / n);
}

} // namespace

int main(int argc, char **argv) try {
  Args a = parse(argc, argv);
  int threads = a.threads > 0 ? a.threads : qkv::bench::hardware_threads();
  // Measured twice (here and after one untimed model build) and the higher kept, as
  // `qkv bench` does: other work on the machine, or a buffer the kernel could not put on
  // huge pages, only ever lowers them.
  // bf16 on a host with the avx512bf16 tier: the prefill's products run on vdpbf16ps; on
  // the amx tier its GEMMs run on AMX tiles (its attention on vdpbf16ps).
  bool bf16 = a.dtype == qkv::DType::BF16;
  bool amx = bf16 && qkv::bench::has_amx_bf16() && qkv::host_isa() == qkv::Isa::Amx;
  bool dot = bf16 && !amx && qkv::bench::has_avx512_bf16() &&
             qkv::host_isa() == qkv::Isa::Avx512Bf16;
  auto peak_now = [&] {
    return amx ? qkv::bench::amx_bf16_peak_gflops(threads).value
           : dot ? qkv::bench::bf16_dot_peak_gflops(threads).value
                 : qkv::bench::fma_peak_gflops(threads).value;
  };
  double peak = peak_now();
  double bw = qkv::bench::read_bandwidth_gbs(threads).value;
  peak = std::max(peak, peak_now());
  bw = std::max(bw, qkv::bench::read_bandwidth_gbs(threads).value);
  const qkv::LlamaConfig &c = a.c;
  std::printf("bench_llama: %lld layers, hidden %lld, %lld heads (%lld kv) of %lld, MLP %lld, "
              "vocab %lld; %.1f MB of %s weights; %d threads\n"
              "machine: %s peak %.1f GFLOP/s, read bandwidth %.1f GB/s (measured now, the higher of two)\n\n",
              static_cast<long long>(c.num_hidden_layers), static_cast<long long>(c.hidden_size),
              static_cast<long long>(c.num_attention_heads), static_cast<long long>(c.num_key_value_heads),
              static_cast<long long>(c.head_dim), static_cast<long long>(c.intermediate_size),
              static_cast<long long>(c.vocab_size), weight_bytes(c, a.dtype) / 1e6,
              qkv::dtype_name(a.dtype).data(), threads, amx ? "tdpbf16ps" : dot ? "vdpbf16ps" : "fp32 FMA", peak, bw);
  qkv::LlamaWeights w = qkv::LlamaWeights::random(c, 1, a.dtype);
  std::printf("context  cache       prefill ms  tokens/s  %%peak   step ms  tokens/s  %%bw     "
              "layers ms (%%bw)  head ms (%%bw)  other ms\n");
  for (std::int64_t context : a.contexts)
    for (bool paged : {false, true}) {
      run(a, w, context, paged, peak, bw);
      qkv::bench::settle();
    }
  std::printf(
      "\n%%peak: prefill flops (2 per layer weight per token, the LM head for the last token,\n"
      "causal attention) / time / peak.\n"
      "%%bw: bytes a decode step must read (all weights, the K/V cache at its length) / "
      "time / bandwidth;\nlayers: layer weights + cache; head: the LM head's weights. "
      "other: embedding and cache appends.\nOver 100%%: what the last-level cache kept "
      "between steps was read faster than from memory.\nMedians: 3 prefills, then each "
      "step (after one untimed step); layers, head and other: means over the same steps.\n");
  return 0;
} catch (const std::exception &e) {
  std::fprintf(stderr, "bench_llama: %s\n", e.what());
  return 1;
}
