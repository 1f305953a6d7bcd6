// The engine campaign: random plans drawn and shrunk by the one campaign loop (search.h) and checked
// on an engine with engine::check_plan. No LibTorch here.
#pragma once

#include <cstdint>
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
};

struct CampaignOutcome {
  report::CaseResult result;  // engine/<engine>/<model>/campaign
  std::optional<Plan> shrunk;  // the shrunk failing plan
};

// One drawn step: its kind, size, sequence and a variant (which window or block edge a fork
// diverges at, which chunk size, how many draft tokens a spec cycle rejects, the batch's other length).
struct DrawnStep {
  int kind = 0, size = 1, seq = 0, variant = 0;
};

// A plan from a raw draw (plan i of a campaign draws up to its size of these): each step becomes a
// valid step for the operations the engine's hello lists (`operations`: a rollback of an empty
// sequence, or an operation the engine lacks, is an extend; seq is 0 unless it runs sequences).
// `window` places the forks' and chunks' edges.
Plan plan_from_draw(const std::string& model, const std::vector<DrawnStep>& draw, int64_t vocab, int64_t window, uint64_t seed,
                    const std::vector<std::string>& operations);

CampaignOutcome run_campaign(EngineClient& engine, const Model& model, const std::string& model_dir, const CampaignOptions& options);

}  // namespace kvc::engine
