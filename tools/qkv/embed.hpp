// `qkv embed`: sentence embeddings from a sentence-transformers model directory
// (all-MiniLM-L6-v2 by default), with their cosine similarities, as JSON, checked against
// the interpreter, or timed (--bench).
#pragma once

#include <string>
#include <vector>

#include "cli.hpp"

namespace qkv::tool {

extern const char *const kEmbedHelp;
/// Runs `qkv embed`; `sentences` are the positional arguments.
int cmd_embed(const cli::Args &a);

/// The benchmark's sentence i of `words` words: word (31 i + 17 k) mod 64 of a fixed list of
/// 64 common English words, each one WordPiece token, for k = 0..words-1 (so `words` + 2
/// tokens with [CLS] and [SEP]). bench/embed_peer.py makes the same sentences.
std::string bench_sentence(int i, int words);

} // namespace qkv::tool
