// The engine campaign: random plans drawn and shrunk by the one campaign loop (search.h) and checked
// on an engine with engine::check_plan. No LibTorch here.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kvconform/engine/check.h"
#include "kvconform/seeds.h"

namespace kvc::engine {

struct CampaignOptions {
  uint64_t seed = kvc::seeds::kDefaultSeed;
  int iterations = 10;    // random plans per engine and model
  int max_size = 30;      // the last plan's size: plan steps grow with it
  std::string reproduce;  // trace:SEED:INDEX:SIZE from an earlier failure: replays that plan alone
  CheckOptions check;
  // The model campaign: a drawn model whose logits a one-token-wider window moves by less than this
  // is redrawn (window_sensitivity).
  double min_window_sensitivity = kMinWindowSensitivity;
};

struct CampaignOutcome {
  report::CaseResult result;   // engine/<engine>/<model>/campaign
  std::optional<Plan> shrunk;  // the shrunk failing plan
};

// A plan from a raw draw (plan i of a campaign draws up to its size of DrawnStep, steps.h): each step becomes a
// valid step for the operations the engine's hello lists (`operations`: a rollback of an empty
// sequence, or an operation the engine lacks, is an extend; seq is 0 unless it runs sequences).
// `window` places the forks' and chunks' edges; `chunk` (the chunked layers' C, 0: none) aims the
// operations at chunk starts (DrawContext::chunk).
Plan plan_from_draw(const std::string& model, const std::vector<DrawnStep>& draw, int64_t vocab, int64_t window, uint64_t seed,
                    const std::vector<std::string>& operations, int64_t chunk = 0);
// The C the draws aim at: the config's chunk where the model has chunked layers, else 0.
int64_t drawn_chunk(const Model& model);

CampaignOutcome run_campaign(EngineClient& engine, const Model& model, const std::string& model_dir,
                             const CampaignOptions& options);

// ---- The model campaign: (model, plan) pairs drawn, and a failure shrinks both. ----

// What a drawn checkpoint is written from (engines/models/make_models.py --recipe): `name` keys the
// weight streams and `layout` names the family's tensor set; `folder` is the checkpoint's folder (the
// name, or the name and a hash of the config once shrinking edited it, so that a shrunk model keeps
// the weights of the layers it kept); `config` is the whole config.json.
struct ModelRecipe {
  std::string name, folder, layout;
  nlohmann::json config;
};
nlohmann::json to_json(const ModelRecipe& recipe);
// Throws std::invalid_argument naming `file` and the field.
ModelRecipe recipe_from_json(const nlohmann::json& j, const std::string& file);

// Where the model campaign's checkpoints come from: the CLI draws and writes them with make_models.py.
struct ModelSource {
  std::function<ModelRecipe(const std::string& family, uint64_t seed, int64_t index)> draw;
  std::function<std::string(const ModelRecipe& recipe)> write;  // returns the checkpoint folder
};

// Smaller configs of one model, most promising first: a layer fewer (each layer in turn), a smaller
// window or chunk, the layer pattern spelt as explicit layer_types, a feature off (soft-caps, q/k
// norms, biases, temperature tuning, KV sharing, a second expert per token), fewer KV heads, smaller
// heads. Each parses as its family's description (parse_config); a respelt pattern keeps every
// layer's rule.
std::vector<nlohmann::json> simpler_configs(const nlohmann::json& config);

// What kind of error an engine's error text is: its exception type and its source location ("at
// file:line in fn") where the text names them, "" where it names neither.
std::string error_class(const std::string& error);
// Whether a failure found while shrinking is the bug the campaign found, so that shrinking keeps it
// instead of sliding to another one (a smaller model that fails to load for a different reason):
// the same place (load, a step, the logits), for wrong logits a diagnosis kind in common, for an
// error the same error_class.
bool same_bug(const Failure& a, const Failure& b);

// "3 layers: sliding 4, full, chunked 4; NoPE 1; head_dim 8, 4/2 heads"
std::string describe_model(const ModelConfig& config);

struct ModelCampaignOutcome {
  report::CaseResult result;         // engine/<engine>/drawn-<family>/model-campaign
  std::optional<Plan> shrunk;        // the shrunk failing plan, its model the recipe's folder
  std::optional<ModelRecipe> model;  // the shrunk failing model
};

// Pair i of the seed: drawn model (family, seed, i) and plan i, checked with check_plan; the first
// failure shrinks the model (simpler_configs) and the plan (the plan campaign's simplifications) by
// the one campaign loop, and is named by its reproduce string.
ModelCampaignOutcome run_model_campaign(EngineClient& engine, const std::string& family, const ModelSource& source,
                                        const CampaignOptions& options);

}  // namespace kvc::engine
