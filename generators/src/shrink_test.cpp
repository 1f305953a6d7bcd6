// The one greedy shrinker (kvcgen/shrink.h) of the fast campaign and the differential fuzzer.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "kvcgen/engine_campaign.h"
#include "kvcgen/shrink.h"

namespace kvc::shrink {
namespace {

std::vector<int> halve_or_decrement(int n) { return {n / 2, n - 1}; }

TEST(Shrink, GreedyEndsAtASmallestCaseThatStillFails) {
  int failing = 1000;
  const int kept = greedy(failing, halve_or_decrement, [](int n) { return n >= 37; });
  EXPECT_EQ(failing, 37);
  // 1000 -> 500 -> 250 -> 125 -> 62 (31 passes) -> 61 -> ... -> 37: four halvings, then decrements.
  EXPECT_EQ(kept, 4 + (62 - 37));
}

TEST(Shrink, GreedyStopsAtItsLimitAndKeepsAFailingCase) {
  int failing = 1000;
  EXPECT_EQ(greedy(
                failing, halve_or_decrement, [](int n) { return n >= 37; }, 3),
            3);
  EXPECT_EQ(failing, 125);
  int passing_everywhere = 9;
  EXPECT_EQ(greedy(passing_everywhere, halve_or_decrement, [](int) { return false; }), 0);
  EXPECT_EQ(passing_everywhere, 9);
}

// Drawn configs as make_models.py --draw writes them: gemma3_text with a legacy sliding_window_pattern
// (4 layers, window 3), qwen2 with use_sliding_window and max_window_layers (3 layers, window 6).
const char* kGemma3Pattern =
    R"({"architectures": ["Gemma3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0, "attn_logit_softcapping": null, "bos_token_id": 1, "eos_token_id": 2, "final_logit_softcapping": null, "head_dim": 8, "hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 64, "initializer_range": 0.02, "intermediate_size": 128, "max_position_embeddings": 4096, "model_type": "gemma3_text", "num_attention_heads": 4, "num_hidden_layers": 4, "num_key_value_heads": 1, "pad_token_id": 0, "query_pre_attn_scalar": 64, "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000.0, "rope_parameters": {"full_attention": {"rope_theta": 1000000.0, "rope_type": "default"}, "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}}, "rope_scaling": null, "rope_theta": 1000000.0, "sliding_window": 3, "sliding_window_pattern": 2, "tie_word_embeddings": false, "torch_dtype": "float32", "use_cache": true, "vocab_size": 256})";
const char* kQwen2MaxWindowLayers =
    R"({"architectures": ["Qwen2ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2, "head_dim": 16, "hidden_act": "silu", "hidden_size": 64, "initializer_range": 0.02, "intermediate_size": 128, "max_position_embeddings": 4096, "max_window_layers": 2, "model_type": "qwen2", "num_attention_heads": 2, "num_hidden_layers": 3, "num_key_value_heads": 2, "pad_token_id": 0, "rms_norm_eps": 1e-06, "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"}, "rope_scaling": null, "rope_theta": 10000.0, "sliding_window": 6, "tie_word_embeddings": true, "torch_dtype": "float32", "use_cache": true, "use_sliding_window": true, "vocab_size": 256})";

std::vector<engine::Attention> rules(const nlohmann::json& config) {
  const engine::ModelConfig c = engine::parse_config(config, "config.json");
  std::vector<engine::Attention> out;
  for (int64_t l = 0; l < c.layers; ++l) out.push_back(c.attention(l));
  return out;
}

// Every simplification of a model is a model of its family, smaller in one respect: a layer fewer, a
// smaller window, the pattern respelt with every layer's rule kept, or fewer or smaller heads.
TEST(ModelShrink, EverySimplerConfigParsesAndIsSmallerInOneRespect) {
  for (const char* text : {kGemma3Pattern, kQwen2MaxWindowLayers}) {
    const nlohmann::json config = nlohmann::json::parse(text);
    const engine::ModelConfig base = engine::parse_config(config, "config.json");
    const std::vector<nlohmann::json> simpler = engine::simpler_configs(config);
    ASSERT_FALSE(simpler.empty());
    int fewer_layers = 0, smaller_window = 0, respelt = 0;
    for (const nlohmann::json& c : simpler) {
      ASSERT_NE(c, config);
      const engine::ModelConfig m = engine::parse_config(c, "config.json");
      EXPECT_LE(m.layers, base.layers);
      EXPECT_LE(m.sliding_window, base.sliding_window);
      EXPECT_LE(m.head_dim, base.head_dim);
      if (m.layers < base.layers) ++fewer_layers;
      if (m.sliding_window < base.sliding_window) ++smaller_window;
      if (c.contains("layer_types") && !config.contains("layer_types")) {
        ++respelt;
        EXPECT_EQ(rules(c), rules(config)) << c.dump();
        EXPECT_FALSE(c.contains("sliding_window_pattern") || c.contains("max_window_layers")) << c.dump();
      }
    }
    EXPECT_GE(fewer_layers, 1);
    EXPECT_EQ(smaller_window, 2);  // W / 2 and W - 1
    EXPECT_EQ(respelt, 1);
  }
}

// Removing a layer removes that layer's rule and keeps the others': qwen2's layers below
// max_window_layers are full, so the count follows a removed layer below it (else the pattern would
// move up by one).
TEST(ModelShrink, ALayerFewerKeepsTheOtherLayersRules) {
  for (const char* text : {kGemma3Pattern, kQwen2MaxWindowLayers}) {
    const nlohmann::json config = nlohmann::json::parse(text);
    const auto before = rules(config);
    std::set<std::vector<engine::Attention>> removals, got;  // each layer removed in turn; what the candidates give
    for (size_t i = 0; i < before.size(); ++i) {
      auto expected = before;
      expected.erase(expected.begin() + static_cast<long>(i));
      removals.insert(expected);
    }
    for (const nlohmann::json& c : engine::simpler_configs(config)) {
      if (c.value("num_hidden_layers", 0) != static_cast<int>(before.size()) - 1) continue;
      got.insert(rules(c));
      EXPECT_TRUE(removals.count(rules(c))) << c.dump();
    }
    EXPECT_GE(got.size(), 1u);
    // max_window_layers follows a removed layer below it, so every layer can go (with a pattern key,
    // only the pattern's own shorter model is reachable).
    if (config.contains("max_window_layers")) EXPECT_EQ(got, removals);
  }
}

TEST(ModelShrink, ARecipeReadsBackAndABadOneNamesItsField) {
  engine::ModelRecipe r{"draw-qwen2-0-4", "draw-qwen2-0-4-1a2b3c4d", "qwen2", nlohmann::json::parse(kQwen2MaxWindowLayers)};
  const engine::ModelRecipe back = engine::recipe_from_json(engine::to_json(r), "pair.json");
  EXPECT_EQ(back.name, r.name);
  EXPECT_EQ(back.folder, r.folder);
  EXPECT_EQ(back.config, r.config);
  nlohmann::json bad = engine::to_json(r);
  bad["folder"] = "../x";
  try {
    engine::recipe_from_json(bad, "pair.json");
    FAIL() << "a folder outside the models folder was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("pair.json: /folder"), std::string::npos) << e.what();
  }
}

engine::Failure failed(engine::Failure::Where where, const std::string& error, std::vector<engine::Diagnosis::Kind> kinds = {}) {
  engine::Failure f{where, {}, error};
  for (engine::Diagnosis::Kind k : kinds) {
    engine::Diagnosis d;
    d.kind = k;
    f.fits.push_back(d);
  }
  return f;
}

// Shrinking keeps the failure it found, by its typed value: wrong logits stay wrong logits with a
// diagnosis in common (or unexplained), and an error stays the same error (where it happened, its
// exception type, its source line), whatever numbers its text carries.
TEST(ModelShrink, AFailureIsItsPlaceItsDiagnosisOrItsErrorNotItsNumbers) {
  using engine::same_bug;
  using Where = engine::Failure::Where;
  using K = engine::Diagnosis::Kind;
  const auto wider = failed(Where::Logits, "", {K::WindowOffByOne});
  EXPECT_TRUE(same_bug(wider, failed(Where::Logits, "", {K::WindowOffByOne, K::FullOnSliding})));
  EXPECT_FALSE(same_bug(wider, failed(Where::Logits, "", {K::SinksDropped})));
  EXPECT_FALSE(same_bug(wider, failed(Where::Logits, "")));  // unexplained is another bug
  EXPECT_TRUE(same_bug(failed(Where::Logits, ""), failed(Where::Logits, "")));

  EXPECT_EQ(engine::error_class("ValueError: head_dim 8 is not hidden/heads 16 (adapter.py:41 in load)"),
            "ValueError at adapter.py:41 in load");
  const auto load = failed(Where::Load, "ValueError: head_dim 8 is not hidden/heads 16 (adapter.py:41 in load)");
  EXPECT_TRUE(same_bug(load, failed(Where::Load, "ValueError: head_dim 4 is not hidden/heads 32 (adapter.py:41 in load)")));
  EXPECT_FALSE(same_bug(load, failed(Where::Load, "KeyError: 'rope_theta' (adapter.py:41 in load)")));
  EXPECT_FALSE(same_bug(load, failed(Where::Load, "ValueError: no such layer (adapter.py:97 in load)")));
  EXPECT_FALSE(same_bug(load, failed(Where::Step, "ValueError: head_dim 8 is not hidden/heads 16 (adapter.py:41 in load)")));
  EXPECT_FALSE(same_bug(load, failed(Where::Load, "[json.exception.type_error.302] type must be number, but is null")));
  EXPECT_FALSE(same_bug(load, wider));

  const auto crash = failed(Where::Step, "crashed: the worker was killed by SIGSEGV");
  EXPECT_EQ(engine::error_class(crash.error), "crashed");
  EXPECT_FALSE(same_bug(crash, failed(Where::Step, "the worker exited with status 3")));
  EXPECT_FALSE(same_bug(crash, failed(Where::Step, "timed out after 5 s")));
  EXPECT_FALSE(same_bug(crash, wider));
}

}  // namespace
}  // namespace kvc::shrink
