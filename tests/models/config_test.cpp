// Reading config.json: every field the BERT and Llama loaders read, from each place a
// transformers config puts it (the layout transformers 4 wrote and the one transformers 5
// writes), the defaults when a field is absent, and errors naming the field when it is
// required. Each value is one the default is not, so a loader that reads a field from the
// wrong place (and falls back to its default) fails; and each value must reach the graph
// the loader builds (the printed graph carries it), since that is what changes the output.
// The base configs are files transformers wrote (scripts/make-minilm-fixtures.py,
// scripts/make-llama-fixtures.py); tests/models/llama_test.cpp runs a non-default RoPE
// base end to end against transformers.
#include <qkv/models/bert.hpp>
#include <qkv/models/llama.hpp>
#include <qkv/runtime/checks.hpp>

#include <charconv>
#include <cmath>
#include <functional>

#include <gtest/gtest.h>

#include <qkv_test/errors.hpp>

#include "model_dir.hpp"

namespace qkv {
namespace {

using json = nlohmann::json;
using test::ErrorSays;
using Edit = std::function<void(json &)>;

json fixture_json(const std::string &name) { return test::read_json(test::fixture(name)); }

BertConfig bert(json j) {
  return BertConfig::from_json(JsonConfig::parse(j.dump(), "config.json"));
}
LlamaConfig llama(json j) {
  return LlamaConfig::from_json(JsonConfig::parse(j.dump(), "config.json"));
}

/// The two layouts of all-MiniLM-L6-v2's config.json.
std::vector<std::pair<std::string, json>> bert_layouts() {
  return {{"transformers 4.8.2", fixture_json("bert-config/transformers-4.8.2.json")},
          {"transformers 5.24.0", fixture_json("bert-config/transformers-5.24.0.json")}};
}

bool prints(const Graph &g, const std::string &text) {
  return g.str().find(text) != std::string::npos;
}

/// The number the graph's text prints after its first `key` (NaN when there is none).
double printed(const Graph &g, const std::string &key) {
  std::string text = g.str();
  std::size_t at = text.find(key);
  double v = NAN;
  if (at != std::string::npos)
    std::from_chars(text.data() + at + key.size(), text.data() + text.size(), v);
  return v;
}

// ---- BERT ----------------------------------------------------------------------------------

TEST(BertConfigFields, BothLayoutsGiveTheModelsValues) {
  for (const auto &[layout, j] : bert_layouts()) {
    SCOPED_TRACE(layout);
    BertConfig c = bert(j);
    EXPECT_EQ(c.vocab_size, 30522);
    EXPECT_EQ(c.hidden_size, 384);
    EXPECT_EQ(c.num_hidden_layers, 6);
    EXPECT_EQ(c.num_attention_heads, 12);
    EXPECT_EQ(c.intermediate_size, 1536);
    EXPECT_EQ(c.max_position_embeddings, 512);
    EXPECT_EQ(c.type_vocab_size, 2);
    EXPECT_EQ(c.layer_norm_eps, 1e-12);
    EXPECT_FALSE(c.gelu_tanh);
  }
}

TEST(BertConfigFields, EveryFieldIsReadFromItsKey) {
  // Values no default has, each distinct, in both layouts.
  for (auto [layout, j] : bert_layouts()) {
    SCOPED_TRACE(layout);
    j.update({{"vocab_size", 101},
              {"hidden_size", 48},
              {"num_hidden_layers", 3},
              {"num_attention_heads", 4},
              {"intermediate_size", 80},
              {"max_position_embeddings", 64},
              {"type_vocab_size", 5},
              {"layer_norm_eps", 1e-5}});
    BertConfig c = bert(j);
    EXPECT_EQ(c.vocab_size, 101);
    EXPECT_EQ(c.hidden_size, 48);
    EXPECT_EQ(c.num_hidden_layers, 3);
    EXPECT_EQ(c.num_attention_heads, 4);
    EXPECT_EQ(c.head_dim(), 12);
    EXPECT_EQ(c.intermediate_size, 80);
    EXPECT_EQ(c.max_position_embeddings, 64);
    EXPECT_EQ(c.type_vocab_size, 5);
    EXPECT_EQ(c.layer_norm_eps, 1e-5);
    // What the graphs are built from.
    EXPECT_TRUE(prints(bert_layer_graph(c), "eps = 1e-05")) << bert_layer_graph(c).str();
    EXPECT_TRUE(prints(bert_layer_graph(c), "(B=?, H=4, L=?, Dh=12)"));
    EXPECT_TRUE(prints(bert_layer_graph(c), "F=80"));
    EXPECT_TRUE(prints(bert_embeddings_graph(c), "eps = 1e-05"));
    EXPECT_TRUE(prints(bert_embeddings_graph(c), "(V=101, D=48)"));
    EXPECT_TRUE(prints(bert_embeddings_graph(c), "(P=64, D=48)"));
    EXPECT_TRUE(prints(bert_embeddings_graph(c), "(T=5, D=48)"));
  }
}

TEST(BertConfigFields, TheActivation) {
  // transformers' ACT2FN: "gelu" is the exact (erf) GELU, the other two the tanh form.
  for (auto [act, tanh] : std::vector<std::pair<std::string, bool>>{
           {"gelu", false}, {"gelu_new", true}, {"gelu_pytorch_tanh", true}}) {
    json j = bert_layouts()[1].second;
    j["hidden_act"] = act;
    BertConfig c = bert(j);
    EXPECT_EQ(c.gelu_tanh, tanh) << act;
    EXPECT_TRUE(prints(bert_layer_graph(c), tanh ? "approximate = tanh" : "approximate = none"))
        << act;
  }
  json j = bert_layouts()[1].second;
  j["hidden_act"] = "gelu_fast";
  EXPECT_TRUE(ErrorSays([&] { bert(j); }, {"config.json", "field 'hidden_act' is 'gelu_fast'"}));
}

TEST(BertConfigFields, PositionEmbeddingTypeDefaultsToAbsolute) {
  json j = bert_layouts()[1].second;
  j.erase("position_embedding_type"); // a BertConfig made in code saves none
  EXPECT_EQ(bert(j).hidden_size, 384);
  j["position_embedding_type"] = nullptr;
  EXPECT_EQ(bert(j).hidden_size, 384);
  j["position_embedding_type"] = "relative_key";
  EXPECT_TRUE(ErrorSays([&] { bert(j); },
                        {"field 'position_embedding_type' is 'relative_key'", "absolute"}));
}

TEST(BertConfigFields, RequiredFieldsNameThemselves) {
  // qkv guesses none of BERT's sizes: transformers' defaults are bert-base's, which no
  // other checkpoint shares.
  for (const char *field : {"model_type", "vocab_size", "hidden_size", "num_hidden_layers",
                            "num_attention_heads", "intermediate_size", "max_position_embeddings",
                            "type_vocab_size", "layer_norm_eps", "hidden_act"}) {
    json j = bert_layouts()[0].second;
    j.erase(field);
    EXPECT_TRUE(ErrorSays([&] { bert(j); },
                          {"config.json", "field '" + std::string(field) + "' is missing"}))
        << field;
  }
}

// ---- Llama ---------------------------------------------------------------------------------

/// tiny-llama's config.json (transformers 5.24.0) with `edit` applied.
json tiny(const Edit &edit = {}) {
  json j = fixture_json("tiny-llama/config.json");
  if (edit)
    edit(j);
  return j;
}

/// The transformers 4 layout: rope_theta `base` at the top level, no rope_parameters.
void transformers4(json &j, double base) {
  j["rope_theta"] = base;
  j.erase("rope_parameters");
}

/// Every field LlamaConfig has, against `want`.
void expect_fields(const LlamaConfig &c, const LlamaConfig &want) {
  EXPECT_EQ(c.vocab_size, want.vocab_size);
  EXPECT_EQ(c.hidden_size, want.hidden_size);
  EXPECT_EQ(c.intermediate_size, want.intermediate_size);
  EXPECT_EQ(c.num_hidden_layers, want.num_hidden_layers);
  EXPECT_EQ(c.num_attention_heads, want.num_attention_heads);
  EXPECT_EQ(c.num_key_value_heads, want.num_key_value_heads);
  EXPECT_EQ(c.head_dim, want.head_dim);
  EXPECT_EQ(c.max_position_embeddings, want.max_position_embeddings);
  EXPECT_EQ(c.rms_norm_eps, want.rms_norm_eps);
  EXPECT_EQ(c.rope_theta, want.rope_theta);
  EXPECT_EQ(c.tie_word_embeddings, want.tie_word_embeddings);
}

TEST(LlamaConfigFields, EveryFieldIsReadFromItsKey) {
  expect_fields(llama(tiny()), {.vocab_size = 128,
                                .hidden_size = 64,
                                .intermediate_size = 176,
                                .num_hidden_layers = 2,
                                .num_attention_heads = 4,
                                .num_key_value_heads = 2,
                                .head_dim = 16,
                                .max_position_embeddings = 512,
                                .rms_norm_eps = 1e-5,
                                .rope_theta = 10000,
                                .tie_word_embeddings = false});
  LlamaConfig want = {.vocab_size = 101,
                      .hidden_size = 48,
                      .intermediate_size = 80,
                      .num_hidden_layers = 3,
                      .num_attention_heads = 6,
                      .num_key_value_heads = 3,
                      .head_dim = 10,
                      .max_position_embeddings = 96,
                      .rms_norm_eps = 3e-6,
                      .rope_theta = 123456.5,
                      .tie_word_embeddings = true};
  LlamaConfig c = llama(tiny([&](json &j) {
    j.update({{"vocab_size", want.vocab_size},
              {"hidden_size", want.hidden_size},
              {"intermediate_size", want.intermediate_size},
              {"num_hidden_layers", want.num_hidden_layers},
              {"num_attention_heads", want.num_attention_heads},
              {"num_key_value_heads", want.num_key_value_heads},
              {"head_dim", want.head_dim},
              {"max_position_embeddings", want.max_position_embeddings},
              {"rms_norm_eps", want.rms_norm_eps},
              {"tie_word_embeddings", want.tie_word_embeddings}});
    j["rope_parameters"]["rope_theta"] = want.rope_theta;
  }));
  expect_fields(c, want);
  // What the layer kernel is built from.
  Graph layer = llama_layer_graph(c, false, 1);
  EXPECT_EQ(printed(layer, "base = "), 123456.5) << layer.str();
  EXPECT_TRUE(prints(layer, "eps = 3e-06"));
  EXPECT_TRUE(prints(layer, "(B=?, Hkv=3, n=1, Dh=10)"));
  EXPECT_TRUE(prints(llama_head_graph(c), "eps = 3e-06"));
  EXPECT_TRUE(prints(llama_head_graph(c), "(D=48, V=101)"));
}

TEST(LlamaConfigFields, DefaultsWhenAbsentAreTransformers) {
  LlamaConfig c = llama(tiny([](json &j) {
    for (const char *f : {"num_key_value_heads", "head_dim", "tie_word_embeddings", "hidden_act",
                          "attention_bias", "mlp_bias", "rope_parameters"})
      j.erase(f);
  }));
  EXPECT_EQ(c.num_key_value_heads, 4); // num_attention_heads: no GQA
  EXPECT_EQ(c.head_dim, 16);           // hidden_size / num_attention_heads
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.rope_theta, 10000);
  c = llama(tiny([](json &j) {
    j.update({{"head_dim", nullptr}, {"num_key_value_heads", nullptr}});
  }));
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.num_key_value_heads, 4);
}

TEST(LlamaConfigFields, RequiredFieldsNameThemselves) {
  // transformers' defaults for these are Llama 2 7B's; qkv guesses none of them.
  for (const char *field :
       {"model_type", "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
        "num_attention_heads", "max_position_embeddings", "rms_norm_eps"}) {
    json j = tiny([&](json &c) { c.erase(field); });
    EXPECT_TRUE(ErrorSays([&] { llama(j); },
                          {"config.json", "field '" + std::string(field) + "' is missing"}))
        << field;
  }
}

struct RopeCase {
  const char *layout;
  Edit edit;
  double base;
};

TEST(LlamaConfigFields, RopeBaseFromEveryPlaceTransformersPutsIt) {
  // Where transformers 5 (RotaryEmbeddingConfigMixin) takes rope_theta from: the RoPE
  // settings (the legacy rope_scaling when it is a non-empty object, else rope_parameters),
  // else the top level, else 10000.
  std::vector<RopeCase> cases = {
      {"transformers 5: rope_parameters",
       [](json &j) { j["rope_parameters"]["rope_theta"] = 500000.0; }, 500000},
      {"transformers 4: top level", [](json &j) { transformers4(j, 500000.0); }, 500000},
      {"transformers 4: top level, rope_scaling null",
       [](json &j) {
         transformers4(j, 500000.0);
         j["rope_scaling"] = nullptr;
       },
       500000},
      {"transformers 4: top level, rope_scaling of type default",
       [](json &j) {
         transformers4(j, 500000.0);
         j["rope_scaling"] = {{"type", "default"}};
       },
       500000},
      {"rope_parameters without rope_theta: the top level's",
       [](json &j) {
         j["rope_parameters"].erase("rope_theta");
         j["rope_theta"] = 250000.0;
       },
       250000},
      {"empty rope_parameters: the top level's",
       [](json &j) {
         j["rope_parameters"] = json::object();
         j["rope_theta"] = 250000.0;
       },
       250000},
      {"both: rope_parameters wins",
       [](json &j) {
         j["rope_parameters"]["rope_theta"] = 500000.0;
         j["rope_theta"] = 250000.0;
       },
       500000},
      {"rope_scaling with rope_theta: it wins, as in transformers 5",
       [](json &j) {
         j["rope_scaling"] = {{"rope_type", "default"}, {"rope_theta", 250000.0}};
         j["rope_parameters"]["rope_theta"] = 500000.0;
       },
       250000},
      {"neither: 10000", [](json &j) { j.erase("rope_parameters"); }, 10000},
  };
  for (const RopeCase &rc : cases) {
    LlamaConfig c = llama(tiny(rc.edit));
    EXPECT_EQ(c.rope_theta, rc.base) << rc.layout;
    EXPECT_EQ(printed(llama_layer_graph(c, false, 0), "base = "), rc.base) << rc.layout;
  }
}

TEST(LlamaConfigFields, ScaledRopeIsRefusedWhereverItIsNamed) {
  std::vector<std::pair<Edit, const char *>> cases = {
      {[](json &j) { j["rope_parameters"]["rope_type"] = "llama3"; }, "rope_parameters.rope_type"},
      {[](json &j) {
         j["rope_parameters"] = {{"type", "linear"}, {"factor", 2.0}};
       },
       "rope_parameters.type"},
      {[](json &j) {
         transformers4(j, 10000.0);
         j["rope_scaling"] = {{"type", "dynamic"}, {"factor", 2.0}};
       },
       "rope_scaling.type"},
      {[](json &j) {
         transformers4(j, 10000.0);
         j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
       },
       "rope_scaling.rope_type"},
  };
  for (const auto &[edit, field] : cases) {
    json j = tiny(edit);
    EXPECT_TRUE(ErrorSays([&] { llama(j); }, {"config.json", std::string("field '") + field + "'",
                                              "only \"default\""}))
        << j.dump();
  }
}

TEST(LlamaConfigFields, WhatQkvDoesNotModelIsRefusedByName) {
  std::vector<std::pair<Edit, std::vector<std::string>>> cases = {
      {[](json &j) { j["hidden_act"] = "gelu"; }, {"field 'hidden_act' is 'gelu'", "silu"}},
      {[](json &j) { j["attention_bias"] = true; }, {"field 'attention_bias' is true"}},
      {[](json &j) { j["mlp_bias"] = true; }, {"field 'mlp_bias' is true"}},
      {[](json &j) { j["head_dim"] = 15; }, {"field 'head_dim' is 15", "even"}},
      {[](json &j) {
         j["num_attention_heads"] = 6;
         j.erase("head_dim");
       },
       {"field 'num_attention_heads' is 6", "does not divide hidden_size 64"}},
  };
  for (const auto &[edit, parts] : cases) {
    json j = tiny(edit);
    std::string msg = test::error_of([&] { llama(j); });
    for (const std::string &p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << msg << "\nlacks " << p;
  }
}

} // namespace
// ---- checks ------------------------------------------------------------------------------

// The models' masks (kv < lengths[b], a cache's lengths) are proved in bounds from the
// dims, so their kernels, checked by default, carry no checks and cost nothing for them.
TEST(ModelGraphs, CarryNoChecks) {
  BertConfig b = bert(bert_layouts().front().second);
  EXPECT_FALSE(checks::needs_checks(bert_layer_graph(b)));
  EXPECT_FALSE(checks::needs_checks(bert_model_graph(b, true)));
  LlamaConfig l = llama(tiny());
  for (bool paged : {false, true})
    for (std::int64_t n : {0, 1, 4}) {
      Graph g = llama_layer_graph(l, paged, n);
      std::vector<checks::Site> sites = checks::sites(g);
      EXPECT_FALSE(sites.empty()) << "paged=" << paged << " n=" << n; // the cache's lengths
      EXPECT_FALSE(checks::needs_checks(g)) << "paged=" << paged << " n=" << n;
    }
}

} // namespace qkv
