// Judging an engine on a plan: at every new position, its logits against the model oracle
// (engine/model.h) under the same-dtype-reference rule, and top-1 agreement; a deviation is
// diagnosed by re-running the oracle with other windows or with lost keys. No LibTorch here.
#pragma once

#include <string>
#include <vector>

#include "kvconform/engine/client.h"
#include "kvconform/engine/model.h"
#include "kvconform/engine/plan.h"
#include "kvconform/results.h"

namespace kvc::engine {

// bound = max(floor, factor x the error of the same forward in float32 (the engine's dtype) against
// float64), FlashAttention's rule at model level; docs/engines.md says how factor and floor were measured.
struct JudgeRule {
  double factor = 10;
  double floor = 1e-4;
};

// A behaviour an engine is known to have (engines/known_deviations.json): a failure of a matching
// case whose message (the diagnosis, or the engine's own error) contains `explanation` is a
// DEVIATION, not a FAIL. Mutant runs are never excused.
struct KnownDeviation {
  std::string engine, model, plan;  // regexes over the spec name, model and plan name
  std::string explanation;          // text the failure message must contain
  std::string note;                 // upstream reference, why
};
std::vector<KnownDeviation> load_known_deviations(const std::string& path);  // throws naming file and field

// Where the time goes (`kvconform engine` prints it per engine on stderr).
struct Timing {
  double engine_s = 0, oracle_s = 0;
  int64_t steps = 0, positions = 0;
};

struct CheckOptions {
  JudgeRule rule;
  Timing* timing = nullptr;  // accumulated into when set
  std::vector<KnownDeviation> known;
  std::string reproduce;  // the command line that runs this case alone
};

// The case id is engine/<spec name>/<model>/<plan name>.
report::CaseResult check_plan(EngineClient& engine, const Model& model, const std::string& model_dir, const Plan& plan,
                              const CheckOptions& options);

// Which explanation fits an engine's logits (recorded per extend step), or "" when none does.
struct Recorded {
  std::vector<std::vector<float>> logits;  // per plan step; empty for steps without logits and steps not run
  // Per plan step, which of its new positions `logits` holds (indices into new_positions()); a step
  // without an entry, or with an empty entry and logits, holds all of them.
  std::vector<std::vector<int64_t>> rows;
  int64_t row(size_t step, size_t k) const {
    return step < rows.size() && !rows[step].empty() ? rows[step][k] : static_cast<int64_t>(k);
  }
  // Per plan step, whether `logits` holds log-probabilities (the engine answered "logprobs").
  std::vector<char> logprobs;
  bool logprob(size_t step) const { return step < logprobs.size() && logprobs[step]; }
};
std::string diagnose(const Model& model, const Plan& plan, const Recorded& recorded, double bound);

}  // namespace kvc::engine
