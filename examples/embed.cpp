// Sentence embeddings with a pretrained model (all-MiniLM-L6-v2), through qkv's C++ API:
// load the model from its own files, compile it once, embed a batch of sentences.
//
//   scripts/fetch-model.sh minilm    # once: the model into ~/.cache/qkv/models
//   build/bin/qkv-embed-example [MODEL_DIR]
//
// The two sentences about a guitar must be closer to each other than to the others, and
// every embedding must have length 1; otherwise the program exits with status 1, so ctest
// runs it as a test.
#include <qkv/models/sentence_encoder.hpp>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char **argv) try {
  // [readme]
  std::string dir = argc > 1 ? argv[1] : qkv::default_minilm_dir();
  qkv::SentenceEncoder model = qkv::SentenceEncoder::load(dir); // config, weights, tokenizer
  model.compile();                                              // JIT, once
  std::vector<std::string> sentences = {
      "A man is playing a guitar.", "Someone is strumming a guitar on stage.",
      "The stock market fell sharply today.", "Café crème, s'il vous plaît!"};
  qkv::Tensor e = model.embed(sentences); // f32 (4, 384), one row per sentence
  // [readme]

  auto cos = [&](int i, int j) { // the rows are normalized: cosine = dot product
    double s = 0;
    for (std::int64_t k = 0; k < model.dim(); ++k)
      s += e.get(i * model.dim() + k) * e.get(j * model.dim() + k);
    return s;
  };
  for (int i = 0; i < 4; ++i)
    std::printf("[%d] %-42s norm %.6f  cos to [0] %.4f\n", i, sentences[i].c_str(),
                std::sqrt(cos(i, i)), cos(0, i));
  bool ok = cos(0, 1) > cos(0, 2) && cos(0, 1) > cos(0, 3) && cos(0, 1) > 0.5;
  for (int i = 0; i < 4; ++i)
    ok = ok && std::abs(cos(i, i) - 1) < 1e-5;
  std::printf(ok ? "ok: the guitar sentences are the closest pair\n" : "FAILED\n");
  return ok ? 0 : 1;
} catch (const qkv::Error &e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
