// The engine campaign: random plans drawn and shrunk by the one campaign loop (search.h) and checked
// on an engine with engine::check_plan. No LibTorch here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
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

// A plan from a raw draw (plan i of a campaign draws up to its size of these): each (kind, size, seq) becomes a valid step for the engine's
// operations (a rollback of an empty sequence is an extend; seq is 0 unless it runs sequences).
Plan plan_from_draw(const std::string& model, const std::vector<std::tuple<int, int, int>>& draw, int64_t vocab, uint64_t seed,
                    bool rollback, bool reload, bool sequences);

CampaignOutcome run_campaign(EngineClient& engine, const Model& model, const std::string& model_dir, const CampaignOptions& options);

}  // namespace kvc::engine
