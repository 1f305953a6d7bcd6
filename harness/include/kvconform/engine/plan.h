// A plan: what an engine is asked to do, step by step (feed tokens to a sequence, roll it back,
// save and reload its state, reset, and the serving operations: fork a sequence from another's
// prefix, an extend processed in chunks, speculative draft/verify cycles, several sequences in one
// call, a context shift), and the fixed scenario classes every engine runs. Plans are
// JSON files (the shrunk failures of the campaign are saved as such, and replayed with
// `kvconform engine --plan FILE`). No LibTorch here.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvconform/engine/steps.h"

namespace kvc::engine {

struct Plan {
  std::string name;   // the scenario class ("prefill_gt_w", "long_run", ...) or "campaign-<hash>"
  std::string model;  // the checkpoint's folder name in the model zoo
  std::vector<PlanStep> steps;
};

int64_t sequence_count(const Plan& plan);
int64_t max_tokens(const Plan& plan);  // the longest any sequence grows
// Whether a step of the kind S (a row of the step table) is in the plan.
template <class S>
bool uses(const Plan& plan) {
  for (const PlanStep& s : plan.steps)
    if (s.as<S>()) return true;
  return false;
}
// The optional operations the plan's steps need an engine to list ("rollback", "fork", ...), in table order.
std::vector<std::string> operations_used(const Plan& plan);
constexpr int64_t kBlock = 16;  // the block of a paged KV cache (vLLM's default): the fork plans' block edges
// The first step that cannot run (rollback past the start, a token outside the vocabulary): empty when valid.
std::string invalid_reason(const Plan& plan, int64_t vocab);

nlohmann::json to_json(const Plan& plan);
// Throws std::invalid_argument naming `file` and the JSON pointer of the bad field.
Plan plan_from_json(const nlohmann::json& j, const std::string& file);
Plan load_plan(const std::string& path);

// Tokens in [1, vocab) derived from (seed, salt): plans are reproducible from their parameters.
std::vector<int32_t> tokens_for(uint64_t seed, uint64_t salt, int64_t count, int64_t vocab);

// The fixed scenario classes for a model of window W (the smallest sliding window of its layers):
// prefill shorter than, equal to and longer than the window; decodes across it; multi-token extends
// once it is full; a long run past every engine's cache padding (>= 600 tokens); rollback and
// reload, short and after a long run; reset; two interleaved sequences; forks diverging at window and
// block edges; chunked prefills of every chunk size around the window; speculative cycles; a batch;
// context shifts across the window edge.
std::vector<Plan> fixed_plans(const std::string& model, int64_t window, int64_t vocab);

}  // namespace kvc::engine
