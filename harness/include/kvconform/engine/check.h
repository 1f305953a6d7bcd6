// Judging an engine on a plan, as stateful commands: each step is sent to the engine and applied to
// the sequence model (each sequence's length and its model oracle, engine/model.h), and the engine's
// answer is judged as the step runs, under the same-dtype-reference rule and top-1 agreement. The
// first failing step ends the judging; its diagnosis is a typed value: the oracle re-run under the
// alternative hypotheses (a window off by one, a chunk read as a window, sinks dropped, ...) that
// still match the engine's logits. No LibTorch here.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvconform/engine/client.h"
#include "kvconform/engine/model.h"
#include "kvconform/engine/oracle_memo.h"
#include "kvconform/engine/plan.h"
#include "kvconform/expectations.h"
#include "kvconform/results.h"
#include "kvconform/tolerance.h"

namespace kvc::engine {

// The engine level's same-dtype-reference rule (tolerance.h): bound = max(floor, factor x the error
// of the same forward in float32, the engine's dtype, against float64), FlashAttention's rule at
// model level; docs/engines.md says how factor and floor were measured.
constexpr ReferenceRule kEngineRule{10, 1e-4};

// How far a window one token wider must move a drawn model's logits before the model may judge a
// window (window_sensitivity): at least `min`, and ten times the bound its own float32 error gives
// under kEngineRule (a model that float32 rounding already moves by whole units can catch nothing).
double window_move_needed(const WindowSensitivity& s, double min);

// What an engine's logits are consistent with: one hypothesis, the oracle re-run with the rule
// departed from in one named way. `kind` and `params` are the typed value expectations match;
// id() is its stable string form ("window_off_by_one(delta=1)"), `text` the sentence for a person.
struct Diagnosis {
  enum class Kind {
    WindowOffByOne,        // delta: +1 or -1 on the sliding layers
    FullOnSliding,         // the sliding layers attend every earlier key
    WindowOnEveryLayer,    // the sliding window on the full-attention layers too
    FullCapped,            // keys: N, the full-attention layers keeping only their last N keys
    LayersSwapped,         // sliding and full-attention layers swapped (max_window_layers read inverted)
    SlidingAsChunked,      // the sliding layers chunked with chunks of W
    ChunkOffByOne,         // delta: +1 or -1 on the chunked layers
    FullOnChunked,         // the chunked layers attend every earlier key
    ChunkedAsSliding,      // a sliding window of C on the chunked layers
    ChunkSize,             // chunk: N, from: the config key (or "8192", a hard-coded size) it was taken from
    ChunkShifted,          // shift: chunk boundaries at k*C + shift
    SinksDropped,          // the attention sinks left out
    NopeGivenRope,         // rope on the NoPE layers too
    NopeInverted,          // rope on the NoPE layers and none on the rope layers
    RopeBase,              // layer_type, base: a wrong rope base on one layer type
    SoftcapDropped,        // which: "attention", "final" or "both"
    KvRounded,             // precision: K and V stored below the declared precision
    EvictionOffByOne,      // seq, position, delta: one query alone sees W + delta keys
    PositionGlitch,        // seq, position: that position's logits alone are wrong
    ChunksRestart,         // the window restarting at each chunk of a chunked extend
    ForkOffByOne,          // delta: forks starting delta tokens off their prefix
    SpecRollbackOffByOne,  // delta: spec cycles rolling back delta tokens more than they reject
    ShiftNotRerotated,     // the keys a shift moved kept at their old rotation
    LostKeys,              // step, op, from, before, wants: keys lost at a rollback or reload
    Unexplained,           // no hypothesis fits
  };
  Kind kind = Kind::Unexplained;
  nlohmann::json params = nlohmann::json::object();
  std::string text;
  std::string id() const;
  OracleOptions options;  // the hypothesis's oracle (what the report's picture draws); not part of the value
  // A config read another way: the oracle of the model's weights under this description (null: the
  // config's own); not part of the value.
  std::shared_ptr<const ModelConfig> reading;
};
const char* to_string(Diagnosis::Kind k);         // "window_off_by_one", ... (the kinds an expectations file names)
std::vector<std::string> diagnosis_kind_names();  // every kind, in enum order
std::optional<Diagnosis::Kind> diagnosis_kind(const std::string& name);
// "consistent with A or with B", or "" for none.
std::string explain(const std::vector<Diagnosis>& fits);

// Where the time goes (`kvconform engine` prints it per engine on stderr).
struct Timing {
  double engine_s = 0, oracle_s = 0;
  int64_t steps = 0, positions = 0;
};

struct CheckOptions {
  ReferenceRule rule = kEngineRule;
  Timing* timing = nullptr;  // accumulated into when set
  // The engine's expectations (engines/<engine>/expectations.jsonc, --expectations): a failure of a
  // case one expects is its expected failure (a DEVIATION naming the entry); a mutant run is never
  // excused. Patterns see engine/<spec name>/<model>/<plan name>, "family" the model's model_type (so
  // that an engine's misreading of a family is known on every model of it, whatever its folder).
  std::shared_ptr<expect::Set> expectations;
  std::string reproduce;  // the command line that runs this case alone
};

// What failed in a case, typed: where, the diagnoses its wrong logits fit (empty: unexplained), and
// the engine's own error text. The shrinker keeps a failure by it (same_failure), not by its message.
struct Failure {
  enum class Where { None, Load, Step, Logits };  // Step: a step, the hello, the plan or the check itself failed
  Where where = Where::None;
  std::vector<Diagnosis> fits;
  std::string error;
};
struct Judged {
  report::CaseResult result;
  Failure failure;  // where = None unless the result is a FAIL or a DEVIATION
};

// The plan run as a stateful test: every step's `pre` first (a plan that cannot run is not sent);
// then, step by step, sent to the engine, applied to the sequence model and the answer judged; the
// first failing row is diagnosed (diagnose), a known deviation looked for, the message built. The
// case id is engine/<spec name>/<model>/<plan name>.
Judged judge_plan(EngineClient& engine, const Model& model, const std::string& model_dir, const Plan& plan,
                  const CheckOptions& options);
report::CaseResult check_plan(EngineClient& engine, const Model& model, const std::string& model_dir, const Plan& plan,
                              const CheckOptions& options);
// A configuration pair (engines.json "pairs": one engine's cache path on and off, llama.cpp's swa_full,
// transformers' static and dynamic caches): each step goes to both sides, and every position both
// answered is compared, A's row against B's, within the bound the engine check holds each side to
// against the oracle (the same-dtype reference's error so far, of the coarser side's precision). The
// case id is engine/<pair name>/<model>/<plan name>; each side is judged against the oracle in its
// own cases.
report::CaseResult check_pair(EngineClient& a, EngineClient& b, const std::string& name, const Model& model,
                              const std::string& model_dir, const Plan& plan, const CheckOptions& options);
// Whether two failures are the same bug: the same place, and for wrong logits a diagnosis kind in
// common (or both unexplained); for an engine's error, the same `error_class` of its text (its
// exception type and source location, which only the text carries).
bool same_failure(const Failure& a, const Failure& b, const std::function<std::string(const std::string&)>& error_class);

// The sequence model a plan's steps apply to: the sequences' lengths (the one place they are kept),
// the float64 oracle (what the rule says) and the same-dtype reference (what the bound is measured
// on), one oracle per sequence, advanced step by step.
class SequenceModel {
 public:
  SequenceModel(const Model& model, const OracleOptions& same_dtype);
  ~SequenceModel();
  struct Expected {
    std::vector<std::pair<int64_t, int64_t>> positions;  // (seq, position) of each row, as PlanStep::positions()
    std::vector<double> logits;                          // the float64 oracle's rows [positions, vocab]
    double reference_error = 0;                          // max |same-dtype reference - float64| over them
  };
  // `logprobs`: the engine answered this step's rows as log-probabilities; the expected rows (and the
  // reference's error) are then log-softmaxed, judged in the space the engine answered.
  Expected apply(const PlanStep& step, size_t index, bool logprobs = false);
  const Lengths& lengths() const { return lengths_; }

 private:
  struct Oracles;  // each behind the memo of rows already computed (oracle_memo.h)
  std::unique_ptr<Oracles> oracles_;
  int64_t vocab_;
  Lengths lengths_;
};

// The memo behind it, and its counters: engine/oracle_memo.h.

// An engine's answers so far, per plan step: the logits (empty for steps without logits and steps
// not run) and which of the step's new positions they hold (indices into PlanStep::positions(); a step
// without an entry, or with an empty entry and logits, holds all of them).
struct Recorded {
  std::vector<std::vector<float>> logits;
  std::vector<std::vector<int64_t>> rows;
  int64_t row(size_t step, size_t k) const {
    return step < rows.size() && !rows[step].empty() ? rows[step][k] : static_cast<int64_t>(k);
  }
  // Per plan step, whether `logits` holds log-probabilities (the engine answered "logprobs").
  std::vector<char> logprobs;
  bool logprob(size_t step) const { return step < logprobs.size() && logprobs[step]; }
};
// Every hypothesis that fits the recorded logits within `bound` (empty when none does).
std::vector<Diagnosis> diagnose(const Model& model, const Plan& plan, const Recorded& recorded, double bound);

}  // namespace kvc::engine
