// WordPieceTokenizer: BERT's normalizer, pre-tokenizer and WordPiece model (see the header
// for the rules), with ICU for character classes, NFD and lowercasing.
#include <qkv/models/tokenizer.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/ustring.h>
#include <unicode/utf8.h>

#include <qkv/dsl/error.hpp>
#include <qkv/runtime/json_config.hpp>

namespace qkv {

namespace {

std::u32string decode_utf8(std::string_view s) {
  user_check(s.size() < static_cast<std::size_t>(INT32_MAX), "text: longer than 2 GB");
  std::u32string out;
  out.reserve(s.size());
  const auto *p = reinterpret_cast<const std::uint8_t *>(s.data());
  std::int32_t i = 0, n = static_cast<std::int32_t>(s.size());
  while (i < n) {
    std::int32_t at = i;
    UChar32 c;
    U8_NEXT(p, i, n, c);
    if (c < 0)
      user_error("text is not valid UTF-8 (at byte " + std::to_string(at) + ")");
    out.push_back(static_cast<char32_t>(c));
  }
  return out;
}

void append_utf8(std::string &out, char32_t c) {
  std::uint8_t buf[U8_MAX_LENGTH];
  std::int32_t n = 0;
  U8_APPEND_UNSAFE(buf, n, c);
  out.append(reinterpret_cast<const char *>(buf), static_cast<std::size_t>(n));
}

std::string encode_utf8(std::u32string_view s) {
  std::string out;
  for (char32_t c : s)
    append_utf8(out, c);
  return out;
}

/// Rust's char::is_whitespace (the White_Space property), which tokenizers uses.
bool is_whitespace(char32_t c) { return u_isUWhiteSpace(static_cast<UChar32>(c)); }

/// Control, format and private-use (and surrogate) characters, except \t \n \r, which
/// count as whitespace. Unassigned code points are kept, as tokenizers keeps them (its
/// category tables come from UnicodeData.txt, which lists no unassigned code point).
bool is_control(char32_t c) {
  if (c == '\t' || c == '\n' || c == '\r')
    return false;
  switch (u_charType(static_cast<UChar32>(c))) {
  case U_CONTROL_CHAR:
  case U_FORMAT_CHAR:
  case U_PRIVATE_USE_CHAR:
  case U_SURROGATE: return true;
  default: return false;
  }
}

/// BERT's "Chinese character": the CJK Unified Ideographs blocks, as tokenizers lists them.
bool is_chinese(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/// ASCII punctuation (which includes symbols such as $ + < = > ^ ` | ~) or Unicode P*.
bool is_punctuation(char32_t c) {
  if (c < 128)
    return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
           (c >= 123 && c <= 126);
  return u_ispunct(static_cast<UChar32>(c));
}

/// NFD, then nonspacing marks (Mn) dropped.
std::u32string strip_accents(const std::u32string &s) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2 *nfd = icu::Normalizer2::getNFDInstance(status);
  if (U_FAILURE(status))
    internal_error(std::string("ICU NFD normalizer: ") + u_errorName(status));
  icu::UnicodeString u = icu::UnicodeString::fromUTF32(reinterpret_cast<const UChar32 *>(s.data()),
                                                       static_cast<std::int32_t>(s.size()));
  icu::UnicodeString d = nfd->normalize(u, status);
  if (U_FAILURE(status))
    internal_error(std::string("ICU NFD: ") + u_errorName(status));
  std::u32string out;
  for (std::int32_t i = 0; i < d.length();) {
    UChar32 c = d.char32At(i);
    i += U16_LENGTH(c);
    if (u_charType(c) != U_NON_SPACING_MARK)
      out.push_back(static_cast<char32_t>(c));
  }
  return out;
}

/// Each character's full lowercase mapping on its own, as Rust's char::to_lowercase (no
/// context: a final capital sigma becomes σ, not ς).
std::u32string lowercase(const std::u32string &s) {
  std::u32string out;
  out.reserve(s.size());
  for (char32_t c : s) {
    if (c < 128) {
      out.push_back(c >= 'A' && c <= 'Z' ? c + 32 : c);
      continue;
    }
    UChar src[2], dst[8];
    std::int32_t n = 0;
    U16_APPEND_UNSAFE(src, n, c);
    UErrorCode status = U_ZERO_ERROR;
    std::int32_t m = u_strToLower(dst, 8, src, n, "", &status);
    if (U_FAILURE(status))
      internal_error(std::string("ICU u_strToLower: ") + u_errorName(status));
    for (std::int32_t i = 0; i < m;) {
      UChar32 l;
      U16_NEXT(dst, i, m, l);
      out.push_back(static_cast<char32_t>(l));
    }
  }
  return out;
}

std::u32string normalize_text(std::u32string_view s, const WordPieceOptions &o) {
  std::u32string t;
  t.reserve(s.size() + 8);
  for (char32_t c : s) {
    if (o.clean_text) {
      if (c == 0 || c == 0xFFFD || is_control(c))
        continue;
      if (is_whitespace(c))
        c = ' ';
    }
    if (o.handle_chinese_chars && is_chinese(c)) {
      t.push_back(' ');
      t.push_back(c);
      t.push_back(' ');
    } else {
      t.push_back(c);
    }
  }
  if (o.strip_accents)
    t = strip_accents(t);
  if (o.lowercase)
    t = lowercase(t);
  return t;
}

/// Whitespace separates words and is dropped; each punctuation character is a word.
std::vector<std::u32string> pre_tokenize(const std::u32string &s) {
  std::vector<std::u32string> words;
  std::u32string cur;
  auto flush = [&] {
    if (!cur.empty())
      words.push_back(std::move(cur));
    cur.clear();
  };
  for (char32_t c : s) {
    if (is_whitespace(c)) {
      flush();
    } else if (is_punctuation(c)) {
      flush();
      words.push_back(std::u32string(1, c));
    } else {
      cur.push_back(c);
    }
  }
  flush();
  return words;
}

} // namespace

void WordPieceTokenizer::set_vocab(std::vector<std::string> tokens, const std::string &origin) {
  id_to_token_ = std::move(tokens);
  token_to_id_.clear();
  token_to_id_.reserve(id_to_token_.size());
  for (std::size_t i = 0; i < id_to_token_.size(); ++i)
    if (!token_to_id_.emplace(id_to_token_[i], static_cast<std::int32_t>(i)).second)
      user_error(origin + ": token '" + id_to_token_[i] + "' has two ids (" +
                 std::to_string(token_to_id_[id_to_token_[i]]) + " and " + std::to_string(i) + ")");
  unk_id_ = id(options_.unk_token);
  if (unk_id_ < 0)
    user_error(origin + ": the unknown token '" + options_.unk_token +
               "' is not in the vocabulary");
}

void WordPieceTokenizer::add_special(const std::string &content, const std::string &origin) {
  std::int32_t i = id(content);
  if (i < 0)
    user_error(origin + ": special token '" + content + "' is not in the vocabulary");
  std::u32string c = decode_utf8(content);
  user_check(!c.empty(), origin + ": an added token is empty");
  for (const auto &a : added_)
    if (a.first == c)
      return;
  added_.emplace_back(std::move(c), i);
  std::sort(added_.begin(), added_.end(), [](const auto &a, const auto &b) {
    return a.first.size() != b.first.size() ? a.first.size() > b.first.size() : a < b;
  });
}

std::int32_t WordPieceTokenizer::id(const std::string &token) const {
  auto it = token_to_id_.find(token);
  return it == token_to_id_.end() ? -1 : it->second;
}

const std::string &WordPieceTokenizer::token(std::int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= id_to_token_.size())
    user_error("token id " + std::to_string(id) + " is outside the vocabulary of " +
               std::to_string(id_to_token_.size()));
  return id_to_token_[static_cast<std::size_t>(id)];
}

std::vector<std::pair<std::u32string, std::int32_t>>
WordPieceTokenizer::split_added(std::u32string_view s) const {
  std::vector<std::pair<std::u32string, std::int32_t>> out;
  std::size_t text_start = 0, i = 0;
  while (i < s.size()) {
    const std::pair<std::u32string, std::int32_t> *hit = nullptr;
    for (const auto &a : added_) // longest first: the leftmost-longest match
      if (s.substr(i, a.first.size()) == a.first) {
        hit = &a;
        break;
      }
    if (!hit) {
      ++i;
      continue;
    }
    if (i > text_start)
      out.emplace_back(std::u32string(s.substr(text_start, i - text_start)), -1);
    out.emplace_back(hit->first, hit->second);
    i += hit->first.size();
    text_start = i;
  }
  if (text_start < s.size())
    out.emplace_back(std::u32string(s.substr(text_start)), -1);
  return out;
}

void WordPieceTokenizer::wordpiece(const std::u32string &word,
                                   std::vector<std::int32_t> &out) const {
  if (static_cast<std::int64_t>(word.size()) > options_.max_input_chars_per_word) {
    out.push_back(unk_id_);
    return;
  }
  std::vector<std::int32_t> pieces;
  std::string key;
  std::size_t start = 0;
  while (start < word.size()) {
    std::int32_t found = -1;
    std::size_t end = word.size();
    for (; end > start; --end) { // the longest piece first
      key = start > 0 ? options_.continuing_subword_prefix : std::string();
      key += encode_utf8(std::u32string_view(word).substr(start, end - start));
      if ((found = id(key)) >= 0)
        break;
    }
    if (found < 0) { // nothing starts here: the whole word is unknown
      out.push_back(unk_id_);
      return;
    }
    pieces.push_back(found);
    start = end;
  }
  out.insert(out.end(), pieces.begin(), pieces.end());
}

std::vector<std::int32_t> WordPieceTokenizer::piece_ids(std::string_view text) const {
  std::vector<std::int32_t> ids;
  for (const auto &[part, added_id] : split_added(decode_utf8(text))) {
    if (added_id >= 0) {
      ids.push_back(added_id);
      continue;
    }
    for (const std::u32string &word : pre_tokenize(normalize_text(part, options_)))
      wordpiece(word, ids);
  }
  return ids;
}

std::vector<std::int32_t> WordPieceTokenizer::encode(std::string_view text,
                                                     std::size_t max_length) const {
  std::size_t specials = prefix_ids_.size() + suffix_ids_.size();
  if (max_length <= specials)
    user_error("tokenizer: max_length " + std::to_string(max_length) +
               " leaves no room for text between the " + std::to_string(specials) +
               " special tokens");
  std::vector<std::int32_t> pieces = piece_ids(text);
  pieces.resize(std::min(pieces.size(), max_length - specials)); // truncation
  std::vector<std::int32_t> ids = prefix_ids_;
  ids.insert(ids.end(), pieces.begin(), pieces.end());
  ids.insert(ids.end(), suffix_ids_.begin(), suffix_ids_.end());
  return ids;
}

std::vector<std::string> WordPieceTokenizer::tokenize(std::string_view text) const {
  std::vector<std::string> out;
  for (std::int32_t i : piece_ids(text))
    out.push_back(token(i));
  return out;
}

std::string WordPieceTokenizer::normalize(std::string_view text) const {
  return encode_utf8(normalize_text(decode_utf8(text), options_));
}

} // namespace qkv
