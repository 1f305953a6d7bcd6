// The one step loop. A StepDriver runs a Scenario through the reference cache layers and, for every
// step and layer, hands a LayerStep to the suite's check: the step's inputs, the mask sizes, the
// layer's returned and stored K/V (and, on request, the tokens their rows hold), the mask query,
// and the float64 oracle with which keys each query may see. Golden replay, the backend suite, the
// plugin checks, the property system under test and the metamorphic tests attach their checks
// here; none keeps a loop of its own (docs/architecture.md, "A step").
#pragma once

#include <ATen/core/Tensor.h>

#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kvconform/behaviours.h"
#include "kvconform/masks.h"
#include "kvconform/mutants.h"
#include "kvconform/oracle.h"
#include "kvconform/positions.h"
#include "kvconform/reference.h"
#include "kvconform/scenario.h"
#include "kvconform/step_failure.h"

namespace kvc {

// One layer the driver runs. By default the scenario's layer_types, each fed its own inputs; the
// property system under test runs static, dynamic and twin layers on the same inputs instead.
struct DrivenLayer {
  LayerSpec spec;
  uint64_t input_layer = 0;  // whose generated inputs this layer is fed (inputs.h's layer index)
  std::string role;          // names the layer in messages ("layer 0", "static", "twin")
};

struct DriverOptions {
  Behaviours behaviours;               // the release's (behaviours_for_release); default newest
  Mutation mutation = Mutation::None;  // a deliberately wrong layer and mask (--mutant)
  std::vector<DrivenLayer> layers;     // empty: the scenario's layer_types
  bool track_rows = false;             // position-tag shadows: which token each row holds
  // With track_rows: take the rows from the fast path's simulation of the same layer (fastpath.h,
  // no LibTorch; held to the tensor reference by its tests) instead of float64 tag layers.
  bool fast_rows = false;
  bool oracle = false;  // the float64 oracle over every token since the last reset
  // Call steps (Step::call: reset, crop, activate_past_recording) are handed to the check as a
  // LayerStep with `call` set, one per layer. Without it a call step other than reset is a
  // StepFailure: only golden replay judges what a call does.
  bool record_calls = false;
};

// What one layer did in one step. Steps are numbered from 0 in every message.
struct LayerStep {
  size_t step = 0, layer = 0;
  const DrivenLayer* driven = nullptr;
  const Scenario* scenario = nullptr;
  int64_t seen = 0, q = 0;  // tokens fed since the last reset before this step; new tokens
  // The first query's position as the mask builders take it: cache_position's (seen) on the
  // cache_position API, the layer's get_seq_length() on the query_length API (create_*_mask's
  // q_offset), which differs from seen only after a call step (a crop the layer refused).
  int64_t query_start = 0;
  bool judged = true;  // Step::judged: false for a numerics case's fill step (no kernel, no oracle output)
  // The cache_position API's positions (the step's, or arange from seen); nullopt on the
  // query_length API.
  std::optional<std::vector<int64_t>> cache_position;
  // >= 0: the layer raised at that step and has not run since (nothing below is set).
  int64_t failed_at = -1;
  // A call step (DriverOptions::record_calls): the method called instead of an update, and what it
  // raised (the layer goes on). Set for such a step: seq_length_before/after, cache, stored_rows.
  const LayerCall* call = nullptr;
  std::exception_ptr call_error;

  std::vector<double> query_values, key_values, value_values;  // row-major [B, H(kv), q, D]
  at::Tensor query, keys, values;                              // the same in the scenario's dtype
  int64_t seq_length_before = 0, seq_length_after = -1;
  MaskSizes sizes;   // get_mask_sizes, asked before update as the mask builders do
  MaskRequest mask;  // the step's position-level mask description
  // The layer raised in update (as transformers may: a full static layer past max_cache_len): the
  // layer is failed from here on; `returned` is undefined.
  std::exception_ptr update_error;
  KV returned;                                 // update()'s K/V [B, Hkv, kv_length, D]
  const CacheLayer* cache = nullptr;           // its stored buffers after the update
  positions::Rows returned_rows, stored_rows;  // with track_rows: the token each row holds
  // transformers itself drops keys the window allows here (positions::loses_window_keys).
  bool lost_keys = false;

  bool ran() const { return failed_at < 0 && !update_error; }
  // "step 3 (Decode after 6 tokens)"
  std::string where() const;
  // With DriverOptions::oracle: float64 [B, H, q, D] attention of every key the window allows.
  at::Tensor oracle_output(const std::vector<double>& sinks = {}) const;  // sinks: Oracle::attend's
  // With DriverOptions::oracle: bool [B, 1, q, seen + q], whether query i may see token k (window
  // rule, causality, padding), and bool [B, 1, q, 1], whether it sees any key at all.
  at::Tensor visible_keys() const;
  at::Tensor sees_any() const;
  bool visible(int64_t batch_row, int64_t query_position, int64_t key_position) const;
  // With DriverOptions::oracle: every K (or V) fed since the last reset, [B, Hkv, seen + q, D] in
  // the scenario's dtype: a same-dtype reference computed from all tokens and the window rule.
  at::Tensor all_keys() const;
  at::Tensor all_values() const;

  const Oracle* oracle = nullptr;
  const std::vector<std::vector<double>>* key_history = nullptr;  // per step since the reset
  const std::vector<std::vector<double>>* value_history = nullptr;
};

class StepDriver {
 public:
  using Check = std::function<void(LayerStep&)>;
  // Called once per reset step (Scenario steps with 0 tokens), after every layer was reset.
  using OnReset = std::function<void(size_t step)>;

  StepDriver(const Scenario& scenario, DriverOptions options = {});
  ~StepDriver();
  StepDriver(const StepDriver&) = delete;
  StepDriver& operator=(const StepDriver&) = delete;

  // Every step of the scenario, each layer's LayerStep passed to `check` in layer order.
  void run(const Check& check, const OnReset& on_reset = nullptr);
  // One more step of `tokens` (0: reset) beyond the scenario's own, for stateful properties that
  // choose their steps as they go; inputs come from the scenario's generator seed.
  void step(const Step& step, const Check& check, const OnReset& on_reset = nullptr);

  const std::vector<DrivenLayer>& layers() const { return layers_; }
  const CacheLayer& layer(size_t i) const;
  int64_t seen() const { return seen_; }

 private:
  void call_step(size_t s, const Step& step, const Check& check, const OnReset& on_reset);
  void start_sequence(size_t s, const OnReset& on_reset);
  struct Impl;
  const Scenario& scenario_;
  DriverOptions options_;
  std::vector<DrivenLayer> layers_;
  std::unique_ptr<Impl> impl_;
  size_t step_index_ = 0;
  int64_t seen_ = 0;
  // Tokens fed since the last reset, the inputs' token index: equal to seen_ until a crop, after
  // which new tokens get new values (a layer that kept a cropped row then shows it).
  int64_t fed_ = 0;
};

}  // namespace kvc
