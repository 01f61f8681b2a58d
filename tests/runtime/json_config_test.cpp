// JsonConfig: typed reads of configuration files, and errors that name the file and field.
#include <qkv/runtime/json_config.hpp>

#include <gtest/gtest.h>

#include <qkv_test/errors.hpp>

namespace qkv {
namespace {

using test::ErrorSays;

const char *kConfig = R"({
  "model_type": "bert", "hidden_size": 384, "layer_norm_eps": 1e-12, "use_cache": true,
  "pad_token_id": null, "vocab_size": "30522", "ratio": 2, "huge": 18446744073709551615,
  "rope_scaling": {"factor": "2", "type": "linear"},
  "layers": [{"name": "a"}, {"name": 3}], "ids": [1, 2, 3]
})";

TEST(JsonConfig, ReadsTypedFields) {
  JsonConfig c = JsonConfig::parse(kConfig, "model/config.json");
  EXPECT_EQ(c.string("model_type"), "bert");
  EXPECT_EQ(c.integer("hidden_size"), 384);
  EXPECT_EQ(c.number("layer_norm_eps"), 1e-12);
  EXPECT_EQ(c.number("ratio"), 2.0); // an integer is a number
  EXPECT_TRUE(c.boolean("use_cache"));
  EXPECT_EQ(c.at("rope_scaling").string("type"), "linear");
  std::vector<JsonConfig> layers = c.at("layers").elements();
  ASSERT_EQ(layers.size(), 2u);
  EXPECT_EQ(layers[0].string("name"), "a");
  EXPECT_EQ(c.at("ids").elements()[2].as_integer(), 3);
  EXPECT_TRUE(c.has("hidden_size"));
  EXPECT_FALSE(c.has("pad_token_id")); // null counts as absent
  EXPECT_FALSE(c.has("absent"));
  // Fallbacks for absent and null fields.
  EXPECT_EQ(c.integer("pad_token_id", 0), 0);
  EXPECT_EQ(c.integer("num_layers", 6), 6);
  EXPECT_EQ(c.string("hidden_act", "gelu"), "gelu");
  EXPECT_FALSE(c.boolean("is_decoder", false));
  EXPECT_EQ(c.number("eps", 0.5), 0.5);
  EXPECT_EQ(c.keys().front(), "hidden_size");
}

TEST(JsonConfig, ErrorsNameTheFileAndTheField) {
  JsonConfig c = JsonConfig::parse(kConfig, "model/config.json");
  EXPECT_TRUE(ErrorSays([&] { c.integer("num_hidden_layers"); },
                        {"model/config.json: field 'num_hidden_layers' is missing"}));
  EXPECT_TRUE(ErrorSays([&] { c.integer("vocab_size"); },
                        {"model/config.json: field 'vocab_size' must be an integer, got a "
                         "string (\"30522\")"}));
  EXPECT_TRUE(ErrorSays([&] { c.integer("layer_norm_eps"); },
                        {"field 'layer_norm_eps' must be an integer, got a number (1e-12)"}));
  EXPECT_TRUE(ErrorSays([&] { c.integer("use_cache"); }, {"got a boolean (true)"}));
  EXPECT_TRUE(ErrorSays([&] { c.integer("huge"); }, {"field 'huge' is too large"}));
  EXPECT_TRUE(ErrorSays([&] { c.number("model_type"); },
                        {"field 'model_type' must be a number, got a string (\"bert\")"}));
  EXPECT_TRUE(ErrorSays([&] { c.boolean("hidden_size"); },
                        {"field 'hidden_size' must be true or false, got an integer (384)"}));
  EXPECT_TRUE(ErrorSays([&] { c.string("hidden_size"); }, {"must be a string"}));
  EXPECT_TRUE(ErrorSays([&] { c.integer("pad_token_id"); }, {"'pad_token_id' is missing"}));
  // Optional fields are still type-checked when present.
  EXPECT_TRUE(ErrorSays([&] { c.integer("vocab_size", 1); }, {"'vocab_size' must be an integer"}));
  // Nested objects and arrays: the path inside the file.
  EXPECT_TRUE(ErrorSays([&] { c.at("rope_scaling").number("factor"); },
                        {"model/config.json: field 'rope_scaling.factor' must be a number"}));
  EXPECT_TRUE(ErrorSays([&] { c.at("layers").elements()[1].string("name"); },
                        {"field 'layers[1].name' must be a string, got an integer (3)"}));
  EXPECT_TRUE(
      ErrorSays([&] { c.at("hidden_size").elements(); }, {"field 'hidden_size' must be an array"}));
  EXPECT_TRUE(ErrorSays([&] { c.at("hidden_size").string("x"); },
                        {"field 'hidden_size' must be an object"}));
  EXPECT_TRUE(ErrorSays([&] { c.fail("hidden_size", "must be even"); },
                        {"model/config.json: field 'hidden_size' must be even"}));
}

TEST(JsonConfig, RefusesBadJsonAndMissingFiles) {
  EXPECT_TRUE(
      ErrorSays([] { JsonConfig::parse("{\"a\": ", "x.json"); }, {"x.json: not valid JSON"}));
  EXPECT_TRUE(ErrorSays([] { JsonConfig::parse("{\"a\": 1e999999}", "big.json"); },
                        {"big.json: not valid JSON", "number overflow"}));
  EXPECT_TRUE(ErrorSays([] { JsonConfig::load("/nonexistent/config.json"); },
                        {"/nonexistent/config.json: cannot open"}));
  EXPECT_TRUE(ErrorSays([] { JsonConfig::parse("[1]", "m.json").integer("a"); },
                        {"m.json: must be an object, got an array"}));
}

} // namespace
} // namespace qkv
