// WordPieceTokenizer's loaders: tokenizer.json, or vocab.txt with tokenizer_config.json.
#include <qkv/models/tokenizer.hpp>

#include <filesystem>
#include <fstream>

#include <qkv/dsl/error.hpp>
#include <qkv/runtime/json_config.hpp>

namespace qkv {

namespace {

void expect_type(const JsonConfig &c, const std::string &type) {
  std::string got = c.string("type");
  if (got != type)
    c.fail("type", "is '" + got + "'; qkv's WordPiece tokenizer supports " + type + " here");
}

WordPieceOptions normalizer_options(const JsonConfig &n) {
  expect_type(n, "BertNormalizer");
  WordPieceOptions o;
  o.clean_text = n.boolean("clean_text", true);
  o.handle_chinese_chars = n.boolean("handle_chinese_chars", true);
  o.lowercase = n.boolean("lowercase", true);
  o.strip_accents = n.boolean("strip_accents", o.lowercase); // null: as lowercase
  return o;
}

/// The single-sequence template: special tokens before and after the sequence "A".
void read_template(const JsonConfig &post, std::vector<std::int32_t> &prefix,
                   std::vector<std::int32_t> &suffix) {
  std::string type = post.string("type");
  if (type == "BertProcessing") {
    for (auto [field, out] : {std::pair{"cls", &prefix}, std::pair{"sep", &suffix}}) {
      std::vector<JsonConfig> pair = post.at(field).elements();
      if (pair.size() != 2)
        post.fail(field, "must be [token, id]");
      out->push_back(static_cast<std::int32_t>(pair[1].as_integer()));
    }
    return;
  }
  if (type != "TemplateProcessing")
    post.fail("type", "is '" + type + "'; qkv supports TemplateProcessing and BertProcessing");
  JsonConfig specials = post.at("special_tokens");
  bool seen_sequence = false;
  for (const JsonConfig &item : post.at("single").elements()) {
    if (item.has("Sequence")) {
      seen_sequence = true;
      continue;
    }
    std::string name = item.at("SpecialToken").string("id");
    for (const JsonConfig &id : specials.at(name).at("ids").elements())
      (seen_sequence ? suffix : prefix).push_back(static_cast<std::int32_t>(id.as_integer()));
  }
  if (!seen_sequence)
    post.fail("single", "has no Sequence");
}

/// BertTokenizer's special tokens, never split: tokenizer_config.json field and default.
constexpr std::pair<const char *, const char *> kSpecialTokens[] = {{"unk_token", "[UNK]"},
                                                                    {"sep_token", "[SEP]"},
                                                                    {"pad_token", "[PAD]"},
                                                                    {"cls_token", "[CLS]"},
                                                                    {"mask_token", "[MASK]"}};

std::string read_file(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    user_error(path + ": cannot open the file");
  return std::string(std::istreambuf_iterator<char>(in), {});
}

} // namespace

WordPieceTokenizer WordPieceTokenizer::from_tokenizer_json(const std::string &path) {
  JsonConfig j = JsonConfig::load(path);
  WordPieceTokenizer t;
  t.options_ = normalizer_options(j.at("normalizer"));
  expect_type(j.at("pre_tokenizer"), "BertPreTokenizer");
  JsonConfig model = j.at("model");
  expect_type(model, "WordPiece");
  t.options_.unk_token = model.string("unk_token");
  t.options_.continuing_subword_prefix = model.string("continuing_subword_prefix", "##");
  t.options_.max_input_chars_per_word = model.integer("max_input_chars_per_word", 100);
  JsonConfig vocab = model.at("vocab");
  std::vector<std::string> tokens(vocab.keys().size());
  for (const std::string &tok : vocab.keys()) {
    std::int64_t id = vocab.integer(tok);
    if (id < 0 || id >= static_cast<std::int64_t>(tokens.size()))
      vocab.fail(tok, "has id " + std::to_string(id) + ", outside 0.." +
                          std::to_string(tokens.size() - 1) + " (the vocabulary's size)");
    auto &slot = tokens[static_cast<std::size_t>(id)];
    if (!slot.empty())
      vocab.fail(tok, "has id " + std::to_string(id) + ", which '" + slot + "' has too");
    slot = tok;
  }
  t.set_vocab(std::move(tokens), path);
  for (const JsonConfig &a : j.at("added_tokens").elements()) {
    for (const char *flag : {"single_word", "lstrip", "rstrip", "normalized"})
      if (a.boolean(flag, false))
        a.fail(flag, "is true; qkv supports added tokens matched exactly in the raw text");
    std::string content = a.string("content");
    if (t.id(content) != a.integer("id"))
      a.fail("id", "is " + std::to_string(a.integer("id")) + " but the vocabulary gives '" +
                       content + "' id " + std::to_string(t.id(content)));
    t.add_special(content, path);
  }
  read_template(j.at("post_processor"), t.prefix_ids_, t.suffix_ids_);
  if (j.has("padding"))
    t.pad_id_ = static_cast<std::int32_t>(j.at("padding").integer("pad_id", 0));
  return t;
}

WordPieceTokenizer WordPieceTokenizer::from_vocab_txt(const std::string &vocab_path,
                                                      const std::string &config_path) {
  JsonConfig c = JsonConfig::load(config_path);
  WordPieceTokenizer t;
  t.options_.lowercase = c.boolean("do_lower_case", true);
  t.options_.strip_accents = c.boolean("strip_accents", t.options_.lowercase);
  t.options_.handle_chinese_chars = c.boolean("tokenize_chinese_chars", true);
  t.options_.unk_token = c.string("unk_token", "[UNK]");
  std::vector<std::string> tokens;
  std::string text = read_file(vocab_path);
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos)
      nl = text.size();
    tokens.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  t.set_vocab(std::move(tokens), vocab_path);
  for (auto [field, fallback] : kSpecialTokens)
    t.add_special(c.string(field, fallback), config_path);
  t.prefix_ids_ = {t.id(c.string("cls_token", "[CLS]"))};
  t.suffix_ids_ = {t.id(c.string("sep_token", "[SEP]"))};
  t.pad_id_ = t.id(c.string("pad_token", "[PAD]"));
  return t;
}

WordPieceTokenizer WordPieceTokenizer::load(const std::string &dir) {
  namespace fs = std::filesystem;
  fs::path json = fs::path(dir) / "tokenizer.json";
  if (fs::exists(json))
    return from_tokenizer_json(json.string());
  fs::path vocab = fs::path(dir) / "vocab.txt";
  if (!fs::exists(vocab))
    user_error(dir + ": no tokenizer.json or vocab.txt");
  return from_vocab_txt(vocab.string(), (fs::path(dir) / "tokenizer_config.json").string());
}

} // namespace qkv
