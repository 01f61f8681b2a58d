// WordPieceTokenizer: the real model's tokenizer.json and vocab.txt give exactly the ids
// Hugging Face's tokenizers gave on every fixture case and on the corpus of limits
// (minilm_tokenizer_corpus.json: words of 99-101 characters in scripts of 1-3 UTF-8
// bytes, lengths that normalization changes, texts around max_seq_length, accents, CJK,
// control characters, empty input); a small tokenizer.json written here checks each rule
// on its own, and broken files give errors naming the field.
#include <qkv/models/tokenizer.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <unistd.h>

#include <qkv_test/errors.hpp>

#include "model_dir.hpp"

namespace qkv {
namespace {

using json = nlohmann::json;
using test::ErrorSays;
using Ids = std::vector<std::int32_t>;
using namespace std::string_literals;

/// Every case of a fixture file: the text and the ids sentence-transformers fed the model.
std::vector<std::pair<std::string, Ids>> fixture_cases(const std::string &file) {
  std::vector<std::pair<std::string, Ids>> out;
  json fixture = test::read_json(test::fixture(file));
  for (const json &c : fixture["cases"])
    out.emplace_back(c["text"].get<std::string>(), c["input_ids"].get<Ids>());
  return out;
}

/// The text with its control characters and non-ASCII bytes escaped, for a failure message.
std::string escaped(const std::string &text) {
  std::string out;
  for (unsigned char c : text)
    if (c >= 0x20 && c < 0x7f)
      out += static_cast<char>(c);
    else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  return out;
}

void expect_fixture_ids(const WordPieceTokenizer &t,
                        const std::string &file = "minilm_tokenizer_cases.json",
                        std::size_t at_least = 40) {
  auto cases = fixture_cases(file);
  ASSERT_GE(cases.size(), at_least);
  for (const auto &[text, ids] : cases)
    EXPECT_EQ(t.encode(text, 256), ids) << "text (" << text.size() << " bytes): " << escaped(text);
}

TEST(MiniLMTokenizer, TokenizerJsonGivesTheFixtureIds) {
  std::string dir = test::minilm_dir();
  WordPieceTokenizer t = WordPieceTokenizer::from_tokenizer_json(dir + "/tokenizer.json");
  EXPECT_EQ(t.vocab_size(), 30522u);
  EXPECT_EQ(t.prefix_ids(), Ids{101});
  EXPECT_EQ(t.suffix_ids(), Ids{102});
  EXPECT_EQ(t.pad_id(), 0);
  expect_fixture_ids(t);
}

TEST(MiniLMTokenizer, VocabTxtGivesTheSameIds) {
  std::string dir = test::minilm_dir();
  expect_fixture_ids(
      WordPieceTokenizer::from_vocab_txt(dir + "/vocab.txt", dir + "/tokenizer_config.json"));
}

TEST(MiniLMTokenizer, TheCorpusOfLimitsGivesTokenizersIds) {
  std::string dir = test::minilm_dir();
  for (const WordPieceTokenizer &t :
       {WordPieceTokenizer::from_tokenizer_json(dir + "/tokenizer.json"),
        WordPieceTokenizer::from_vocab_txt(dir + "/vocab.txt", dir + "/tokenizer_config.json")})
    expect_fixture_ids(t, "minilm_tokenizer_corpus.json", 90);
}

// ---- a small tokenizer.json, one rule at a time ------------------------------------------

const std::vector<std::string> kVocab = {
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un",    "##aff", "##able", "a",    "##a",
    "!",     "cafe",  "creme", "中",    "hello",  "world", "ab",    "##c",    "##bcd"};

json small_tokenizer() {
  json vocab = json::object();
  for (std::size_t i = 0; i < kVocab.size(); ++i)
    vocab[kVocab[i]] = i;
  json added = json::array();
  for (int i = 0; i < 5; ++i)
    added.push_back({{"id", i},
                     {"content", kVocab[i]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  json special = {{"[CLS]", {{"id", "[CLS]"}, {"ids", {2}}, {"tokens", {"[CLS]"}}}},
                  {"[SEP]", {{"id", "[SEP]"}, {"ids", {3}}, {"tokens", {"[SEP]"}}}}};
  return {{"version", "1.0"},
          {"added_tokens", added},
          {"normalizer",
           {{"type", "BertNormalizer"},
            {"clean_text", true},
            {"handle_chinese_chars", true},
            {"strip_accents", nullptr},
            {"lowercase", true}}},
          {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
          {"post_processor",
           {{"type", "TemplateProcessing"},
            {"single",
             {{{"SpecialToken", {{"id", "[CLS]"}, {"type_id", 0}}}},
              {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
              {{"SpecialToken", {{"id", "[SEP]"}, {"type_id", 0}}}}}},
            {"special_tokens", special}}},
          {"model",
           {{"type", "WordPiece"},
            {"unk_token", "[UNK]"},
            {"continuing_subword_prefix", "##"},
            {"max_input_chars_per_word", 9},
            {"vocab", vocab}}}};
}

/// A tokenizer.json in the temp dir, removed when the test ends.
class TempJson {
public:
  explicit TempJson(const json &j)
      : path_((std::filesystem::temp_directory_path() /
               ("qkv_tok_" + std::to_string(::getpid()) + "_" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".json"))
                  .string()) {
    std::ofstream(path_) << j.dump();
  }
  ~TempJson() { std::remove(path_.c_str()); }
  const std::string &path() const { return path_; }

private:
  std::string path_;
};

WordPieceTokenizer small() {
  TempJson f(small_tokenizer());
  return WordPieceTokenizer::from_tokenizer_json(f.path());
}

using Pieces = std::vector<std::string>;

TEST(WordPiece, GreedyLongestMatchWithContinuationPieces) {
  WordPieceTokenizer t = small();
  EXPECT_EQ(t.tokenize("unaffable"), (Pieces{"un", "##aff", "##able"}));
  // Greedy, not best: "ab" is taken first and "##cd" / "##d" do not exist, so the whole
  // word is unknown although "a" + "##bcd" would spell it.
  EXPECT_EQ(t.tokenize("abcd"), (Pieces{"[UNK]"}));
  EXPECT_EQ(t.tokenize("abc"), (Pieces{"ab", "##c"}));
  // A continuation piece cannot start a word.
  EXPECT_EQ(t.tokenize("c"), (Pieces{"[UNK]"}));
  // max_input_chars_per_word is 9 here: a longer word is [UNK] without trying pieces.
  Pieces nine_a(9, "##a");
  nine_a[0] = "a";
  EXPECT_EQ(t.tokenize("aaaaaaaaa"), nine_a);
  EXPECT_EQ(t.tokenize("aaaaaaaaaa"), (Pieces{"[UNK]"}));
  EXPECT_EQ(t.tokenize("中中中中中中中中中中"), (Pieces(10, "中"))); // each ideograph: a word
}

TEST(WordPiece, TheWordLimitCountsCharactersNotBytes) {
  // max_input_chars_per_word (9 here) counts the characters of the normalized word:
  // Cyrillic takes 2 UTF-8 bytes, kana 3, U+1D41A (a mathematical bold a) 4 and two UTF-16
  // units; an accent NFD splits off and drops is not counted, nor a dropped control char.
  json j = small_tokenizer();
  json &vocab = j["model"]["vocab"];
  int next = static_cast<int>(kVocab.size());
  for (const char *piece : {"ж", "##ж", "カ", "##カ", "\U0001D41A", "##\U0001D41A"})
    vocab[piece] = next++;
  TempJson f(j);
  WordPieceTokenizer t = WordPieceTokenizer::from_tokenizer_json(f.path());
  auto pieces = [](const std::string &first, const std::string &rest, int n) {
    Pieces p(static_cast<std::size_t>(n), "##" + rest);
    p[0] = first;
    return p;
  };
  auto times = [](const std::string &s, int n) {
    std::string out;
    for (int i = 0; i < n; ++i)
      out += s;
    return out;
  };
  for (const char *c : {"ж", "カ", "\U0001D41A"}) {
    EXPECT_EQ(t.tokenize(times(c, 9)), pieces(c, c, 9)) << c;
    EXPECT_EQ(t.tokenize(times(c, 10)), (Pieces{"[UNK]"})) << c;
  }
  EXPECT_EQ(t.tokenize(times("Ж", 9)), pieces("ж", "ж", 9)); // lowercased, still 9
  Pieces mixed = {"a", "##ж", "##\U0001D41A", "##カ", "##a", "##ж", "##\U0001D41A", "##カ", "##a"};
  EXPECT_EQ(t.tokenize("aж\U0001D41Aカaж\U0001D41Aカa"),
            mixed); // 9 characters, 21 bytes, 11 UTF-16 units
  EXPECT_EQ(t.tokenize("aж\U0001D41Aカaж\U0001D41Aカaa"), (Pieces{"[UNK]"}));
  EXPECT_EQ(t.tokenize("a\u0301" + times("a", 8)), pieces("a", "a", 9)); // 10 before NFD
  EXPECT_EQ(t.tokenize("aaaa\x01"
                       "aaaaa"),
            pieces("a", "a", 9)); // 10 before cleaning
}

TEST(WordPiece, NormalizesAsBertNormalizer) {
  WordPieceTokenizer t = small();
  // Tab to space, U+200B (a format character) dropped, CJK padded, accents stripped
  // after NFD, lowercased.
  EXPECT_EQ(t.normalize("Café\tCRÈME\u200b 中文!"), "cafe creme  中  文 !");
  // C0 and C1 controls, DEL, soft hyphen (a format character), U+FFFD and NUL: dropped.
  EXPECT_EQ(t.normalize("a\x01\x7f\xc2\x9f\u00adb\ufffd\0c"s), "abc");
  EXPECT_EQ(t.normalize("a\u00a0b\u2003c\u2028d"), "a b c d"); // Unicode whitespace
  EXPECT_EQ(t.normalize("\ue000x"), "x");                      // private use: dropped
  EXPECT_EQ(t.normalize("a\u0378b"), "a\u0378b");     // unassigned: kept, as tokenizers does
  EXPECT_EQ(t.normalize("ΟΔΟΣ"), "οδοσ");             // per character: no final sigma
  EXPECT_EQ(t.normalize("한"), "\u1112\u1161\u11ab"); // NFD splits Hangul into jamo
  EXPECT_EQ(t.normalize("ﬁ"), "ﬁ");                   // NFD, not NFKD: ligatures stay
  EXPECT_EQ(t.tokenize("Café, CRÈME!"), (Pieces{"cafe", "[UNK]", "creme", "!"}));
  EXPECT_EQ(t.tokenize("a$b"), (Pieces{"a", "[UNK]", "[UNK]"})); // ASCII $ is punctuation
}

TEST(WordPiece, AddedTokensAreMatchedInTheRawText) {
  WordPieceTokenizer t = small();
  EXPECT_EQ(t.tokenize("hello[MASK]world"), (Pieces{"hello", "[MASK]", "world"}));
  EXPECT_EQ(t.tokenize("HELLO [CLS][SEP] World"), (Pieces{"hello", "[CLS]", "[SEP]", "world"}));
  // Matched before normalization, so case matters: "[mask]" is punctuation and a word.
  EXPECT_EQ(t.tokenize("[mask]"), (Pieces{"[UNK]", "[UNK]", "[UNK]"}));
}

TEST(WordPiece, EncodeAddsTheTemplateAndTruncates) {
  WordPieceTokenizer t = small();
  EXPECT_EQ(t.encode("hello world", 16), (Ids{2, 14, 15, 3}));
  EXPECT_EQ(t.encode("", 16), (Ids{2, 3}));
  EXPECT_EQ(t.encode("a a a a a", 4), (Ids{2, 8, 8, 3})); // text cut to fit [CLS] [SEP]
  EXPECT_EQ(t.encode("unaffable", 3), (Ids{2, 5, 3}));    // even inside a word
  EXPECT_TRUE(ErrorSays([&] { t.encode("a", 2); }, {"max_length 2 leaves no room"}));
}

TEST(WordPiece, RefusesInvalidUtf8) {
  WordPieceTokenizer t = small();
  EXPECT_TRUE(ErrorSays([&] { t.encode("ab\xc3", 16); }, {"not valid UTF-8 (at byte 2)"}));
  EXPECT_TRUE(ErrorSays([&] { t.encode("\xff", 16); }, {"at byte 0"}));
  EXPECT_TRUE(ErrorSays([&] { t.encode("\xed\xa0\x80", 16); }, {"at byte 0"})); // surrogate
}

testing::AssertionResult refused(const json &j, std::initializer_list<std::string_view> parts) {
  TempJson f(j);
  return ErrorSays([&] { WordPieceTokenizer::from_tokenizer_json(f.path()); }, parts);
}

TEST(WordPiece, BrokenTokenizerJsonNamesTheField) {
  json j = small_tokenizer();
  j["normalizer"] = {{"type", "Sequence"}, {"normalizers", json::array()}};
  EXPECT_TRUE(refused(j, {"field 'normalizer.type' is 'Sequence'", "BertNormalizer"}));
  j = small_tokenizer();
  j["model"]["type"] = "BPE";
  EXPECT_TRUE(refused(j, {"field 'model.type' is 'BPE'"}));
  j = small_tokenizer();
  j["model"]["unk_token"] = "<unk>";
  EXPECT_TRUE(refused(j, {"the unknown token '<unk>' is not in the vocabulary"}));
  j = small_tokenizer();
  j["model"]["vocab"]["hello"] = 15;
  EXPECT_TRUE(refused(j, {"field 'model.vocab.world' has id 15, which 'hello' has too"}));
  j["model"]["vocab"]["hello"] = 19;
  EXPECT_TRUE(refused(j, {"field 'model.vocab.hello' has id 19, outside 0..18"}));
  j = small_tokenizer();
  j["model"]["max_input_chars_per_word"] = "100";
  EXPECT_TRUE(refused(j, {"field 'model.max_input_chars_per_word' must be an integer"}));
  j = small_tokenizer();
  j["added_tokens"][4]["normalized"] = true;
  EXPECT_TRUE(refused(j, {"field 'added_tokens[4].normalized' is true"}));
  j = small_tokenizer();
  j["added_tokens"][1]["id"] = 7;
  EXPECT_TRUE(refused(j, {"field 'added_tokens[1].id' is 7", "'[UNK]' id 1"}));
  j = small_tokenizer();
  j.erase("pre_tokenizer");
  EXPECT_TRUE(refused(j, {"field 'pre_tokenizer' is missing"}));
  j = small_tokenizer();
  j["post_processor"]["type"] = "RobertaProcessing";
  EXPECT_TRUE(refused(j, {"field 'post_processor.type' is 'RobertaProcessing'"}));
  EXPECT_TRUE(ErrorSays([] { WordPieceTokenizer::load("/nonexistent-dir"); },
                        {"/nonexistent-dir: no tokenizer.json or vocab.txt"}));
}

} // namespace
} // namespace qkv
