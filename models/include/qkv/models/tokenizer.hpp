// BERT's WordPiece tokenizer, as a Hugging Face tokenizer.json (or vocab.txt and
// tokenizer_config.json) defines it, giving the ids the fast `tokenizers` library gives:
//
// 1. Added tokens ([CLS], [SEP], [MASK], ...) are found in the raw text first and become
//    their ids untouched; the text between them goes through steps 2-4.
// 2. BertNormalizer: clean the text (drop NUL, U+FFFD and control, format and private-use
//    characters; every whitespace character becomes ' '), put spaces around CJK ideographs,
//    strip accents (NFD, then drop nonspacing marks, Mn), lowercase each character.
// 3. BertPreTokenizer: split at whitespace (dropped) and around punctuation (ASCII
//    punctuation or Unicode P*; each punctuation character is a word of its own).
// 4. WordPiece: a word longer than max_input_chars_per_word characters is [UNK]; else the
//    longest vocabulary entry that starts it, then the longest "##"-prefixed entry that
//    continues it, and so on; if some position matches nothing, the whole word is [UNK].
// 5. The template: [CLS] tokens [SEP], the tokens truncated first so the whole fits
//    max_length.
//
// Character classes, NFD and lowercasing come from ICU. The CJK ranges are the ones BERT
// defines (the CJK Unified Ideographs blocks and their extensions, as `tokenizers` lists
// them), not a Unicode property: Hangul, kana and other scripts are split as words.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace qkv {

struct WordPieceOptions {
  bool clean_text = true;
  bool handle_chinese_chars = true;
  bool strip_accents = true;
  bool lowercase = true;
  std::string unk_token = "[UNK]";
  std::string continuing_subword_prefix = "##";
  std::int64_t max_input_chars_per_word = 100;
};

class WordPieceTokenizer {
public:
  /// An empty tokenizer (no vocabulary); the loaders below make usable ones.
  WordPieceTokenizer() = default;
  /// From a tokenizer.json: a BertNormalizer, BertPreTokenizer, WordPiece model and a
  /// TemplateProcessing (or BertProcessing) post-processor. Anything else, a missing or
  /// ill-typed field, is a qkv::Error naming the file and the field.
  static WordPieceTokenizer from_tokenizer_json(const std::string &path);
  /// From a vocab.txt (one token per line, the line number is its id) and the options of a
  /// tokenizer_config.json (BertTokenizer's do_lower_case, strip_accents,
  /// tokenize_chinese_chars; its special tokens are never split).
  static WordPieceTokenizer from_vocab_txt(const std::string &vocab_path,
                                           const std::string &tokenizer_config_path);
  /// tokenizer.json in `dir` if there is one, else vocab.txt and tokenizer_config.json.
  static WordPieceTokenizer load(const std::string &dir);

  /// The ids the model takes: [CLS], the text's pieces (as many as fit), [SEP]; at most
  /// max_length ids (which must leave room for the specials). Invalid UTF-8 is a
  /// qkv::Error naming the byte.
  std::vector<std::int32_t> encode(std::string_view text, std::size_t max_length) const;
  /// The text's pieces as strings (added tokens included), without the template.
  std::vector<std::string> tokenize(std::string_view text) const;
  /// Steps 2 of the pipeline alone: the normalized text (UTF-8), for inspection.
  std::string normalize(std::string_view text) const;

  const WordPieceOptions &options() const { return options_; }
  std::size_t vocab_size() const { return id_to_token_.size(); }
  /// The id of a token, or -1.
  std::int32_t id(const std::string &token) const;
  /// The token of an id (a qkv::Error when out of range).
  const std::string &token(std::int32_t id) const;
  std::int32_t pad_id() const { return pad_id_; }
  /// What the template puts around the tokens: [CLS] before, [SEP] after for BERT.
  const std::vector<std::int32_t> &prefix_ids() const { return prefix_ids_; }
  const std::vector<std::int32_t> &suffix_ids() const { return suffix_ids_; }

private:
  void set_vocab(std::vector<std::string> tokens, const std::string &origin);
  void add_special(const std::string &content, const std::string &origin);
  /// Splits raw text into pieces: added tokens (id >= 0) and text between them (id -1).
  std::vector<std::pair<std::u32string, std::int32_t>> split_added(std::u32string_view s) const;
  void wordpiece(const std::u32string &word, std::vector<std::int32_t> &out) const;
  std::vector<std::int32_t> piece_ids(std::string_view text) const;

  WordPieceOptions options_;
  std::unordered_map<std::string, std::int32_t> token_to_id_;
  std::vector<std::string> id_to_token_;
  std::vector<std::pair<std::u32string, std::int32_t>> added_; // longest first
  std::int32_t unk_id_ = -1, pad_id_ = 0;
  std::vector<std::int32_t> prefix_ids_, suffix_ids_;
};

} // namespace qkv
