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

namespace kvc::engine {

// One sequence's part of a batch step.
struct BatchItem {
  int64_t seq = 0;
  std::vector<int32_t> tokens;
};

struct PlanStep {
  enum class Kind { Extend, Rollback, Reload, Reset, Fork, Chunked, Spec, Batch, Shift };
  Kind kind = Kind::Extend;
  int64_t seq = 0;
  std::vector<int32_t> tokens;  // Extend, Chunked; Spec: the draft
  // Rollback: tokens dropped from the end of the sequence; Spec: draft tokens rejected (dropped
  // after the draft is fed); Fork: the length of the prefix of `from` that `seq` starts from;
  // Shift: the positions discarded after the first `keep`.
  int64_t n = 0;
  int64_t from = 0;              // Fork: the source sequence
  int64_t chunk = 0;             // Chunked: the engine processes the tokens in chunks of this many
  std::vector<BatchItem> items;  // Batch: advanced in one engine call, logits in item order
  int64_t keep = 0;              // Shift: the positions kept before the discarded ones
};
const char* to_string(PlanStep::Kind k);  // "extend", "rollback", "reload", "reset", "fork", "chunked", "spec", "batch", "shift"

// Sequence lengths as the steps run: apply_step() applies one step.
using Lengths = std::map<int64_t, int64_t>;
void apply_step(const PlanStep& step, Lengths& lengths);
// The (sequence, position) of each row of a step's logits, in order; empty for steps without logits.
std::vector<std::pair<int64_t, int64_t>> new_positions(const PlanStep& step, const Lengths& before);
struct Plan {
  std::string name;   // the scenario class ("prefill_gt_w", "long_run", ...) or "campaign-<hash>"
  std::string model;  // the checkpoint's folder name in the model zoo
  std::vector<PlanStep> steps;
};

// "extend seq 0: 5 tokens at 12..16", "rollback seq 1 by 3 (to 9)": needs the lengths before the step.
std::string describe(const PlanStep& step, const Lengths& before);
int64_t sequence_count(const Plan& plan);
int64_t max_tokens(const Plan& plan);  // the longest any sequence grows
bool uses(const Plan& plan, PlanStep::Kind kind);
// The protocol name of an optional operation ("rollback", "reload", "fork", "chunked", "spec",
// "batch", "shift"), or "" for extend and reset.
std::string optional_operation(PlanStep::Kind kind);
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
