// WordPieceTokenizer: the real model's tokenizer.json and vocab.txt give exactly the ids
// Hugging Face's tokenizers gave on every fixture case; a small tokenizer.json written
// here checks each rule on its own, and broken files give errors naming the field.
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

/// Every fixture case: the text and the ids sentence-transformers fed the model.
std::vector<std::pair<std::string, Ids>> fixture_cases() {
  std::vector<std::pair<std::string, Ids>> out;
  json fixture = test::read_json(test::fixture("minilm_tokenizer_cases.json"));
  for (const json &c : fixture["cases"])
    out.emplace_back(c["text"].get<std::string>(), c["input_ids"].get<Ids>());
  return out;
}

void expect_fixture_ids(const WordPieceTokenizer &t) {
  auto cases = fixture_cases();
  ASSERT_GE(cases.size(), 40u);
  for (const auto &[text, ids] : cases)
    EXPECT_EQ(t.encode(text, 256), ids) << "text: " << text;
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
