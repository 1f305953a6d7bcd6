// A plan: what an engine is asked to do, step by step (feed tokens to a sequence, roll it back,
// save and reload its state, reset), and the fixed scenario classes every engine runs. Plans are
// JSON files (the shrunk failures of the campaign are saved as such, and replayed with
// `kvconform engine --plan FILE`). No LibTorch here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvc::engine {

struct PlanStep {
  enum class Kind { Extend, Rollback, Reload, Reset };
  Kind kind = Kind::Extend;
  int64_t seq = 0;
  std::vector<int32_t> tokens;  // Extend
  int64_t n = 0;                // Rollback: tokens dropped from the end of the sequence
};
const char* to_string(PlanStep::Kind k);  // "extend", "rollback", "reload", "reset"

struct Plan {
  std::string name;   // the scenario class ("prefill_gt_w", "long_run", ...) or "campaign-<hash>"
  std::string model;  // the checkpoint's folder name in the model zoo
  std::vector<PlanStep> steps;
};

// "extend seq 0: 5 tokens at 12..16", "rollback seq 1 by 3 (to 9)": needs the lengths before the step.
std::string describe(const PlanStep& step, int64_t length_before);
int64_t sequence_count(const Plan& plan);
int64_t max_tokens(const Plan& plan);  // the longest any sequence grows
bool uses(const Plan& plan, PlanStep::Kind kind);
std::string optional_operation(PlanStep::Kind kind);  // "rollback", "reload", "sequences" (protocol names) or ""
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
// reload, short and after a long run; reset; two interleaved sequences.
std::vector<Plan> fixed_plans(const std::string& model, int64_t window, int64_t vocab);

}  // namespace kvc::engine
