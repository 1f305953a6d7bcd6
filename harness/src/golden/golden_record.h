// Internal to golden replay (golden.cpp, golden_compare.cpp). One layer-step of the reference run
// as plain values: golden.cpp computes them once from the StepDriver's LayerStep, then either writes
// them out in the fixture's JSON shape (run_case) or holds them against a fixture's layer directly
// (check's fast path), so that a replay that agrees builds no JSON record at all. No ATen here: the
// comparison side (golden_compare.cpp) needs no tensors.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kvconform/behaviours.h"
#include "kvconform/mutants.h"
#include "kvconform/positions.h"
#include "kvconform/results.h"
#include "kvconform/scenario.h"

namespace kvc::golden::detail {

using nlohmann::json;

// An attention output as transformers returns it, [B, q, H, D] (`shape`), in its exact bytes. The
// bytes are kept in the order the kernel left them: [B, H, q, D] when `heads_first` (eager's
// matmul), else [B, q, H, D] (SDPA's); fixture_order() walks them in the fixture's order.
struct Output {
  std::string dtype;
  std::vector<int64_t> shape;
  std::string bytes;
  bool heads_first = false;
  size_t element_size = 0;
};

// Calls row(pointer, length) for each run of D elements in the fixture's [B, q, H, D] order.
template <typename Row>
void fixture_order(const Output& o, Row row) {
  const int64_t B = o.shape[0], q = o.shape[1], H = o.shape[2];
  const size_t run = static_cast<size_t>(o.shape[3]) * o.element_size;
  if (!o.heads_first || q == 1 || H == 1) {  // already in that order
    row(o.bytes.data(), o.bytes.size());
    return;
  }
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < q; ++i)
      for (int64_t h = 0; h < H; ++h) row(o.bytes.data() + static_cast<size_t>((b * H + h) * q + i) * run, run);
}

// The additive (eager) mask as dump.py describes it.
struct EagerMask {
  std::string dtype, sha256, masked_value;
  std::vector<int64_t> shape;
};

// Returned or stored K/V: shape, the token each row holds, sha256 of the exact bytes.
struct KvRecord {
  std::vector<int64_t> shape;
  positions::Rows rows;
  std::string k_sha256, v_sha256;
};

struct LayerValues {
  int64_t seq_length_before = 0, seq_length_after = 0;
  int64_t kv_length = 0, kv_offset = 0;
  json mask_function;
  std::vector<int64_t> q_positions;
  bool allow_skip = false;
  int64_t batch = 0, q = 0;
  std::vector<uint8_t> mask;  // boolean mask [B][q][kv_length]
  bool sdpa_skipped = false;
  EagerMask eager_mask;
  json errors = json::array();
  bool updated = false;  // false: update raised; nothing below is set
  KvRecord returned, stored;
  std::optional<Output> eager, sdpa;  // nullopt: that attention raised (see errors)
  json builders;                      // "mask_builders" at the first layer of each type (golden.cpp's StepBuilders); else null
  json builders_absent;               // "mask_builders_absent" at layer 0 (mask_builder_call.absent_layer_types); else null
};

// A layer's fields as golden/dump.py writes them (without "layer"/"skipped").
void write_layer(const LayerValues& v, json& out);

// Whether the fixture's layer has exactly these values in every field golden::compare checks
// (the same semantics as compare's first_difference on run_case's JSON, and attention outputs
// bitwise). `outputs` counts the attention outputs both sides have.
bool layer_matches(const json& fixture_layer, const LayerValues& v, int64_t& outputs);

// golden::compare's field-by-field difference, shared with the fast path's small fields.
struct Mismatch {
  std::string where, field, expected, got;
};
std::optional<Mismatch> first_difference(const json& expected, const json& got, const std::string& field);
// first_difference found none: arrays element by element, objects on the expected side's keys.
bool agrees(const json& expected, const json& got);
std::optional<Mismatch> errors_difference(const json& expected, const json& got);

// The fixture's own findings, which a reference that reproduces it reports: what transformers
// raised (notes) and where it breaks an invariant (upstream deviations).
void fixture_findings(const json& fixture, const Scenario& c, std::vector<std::string>& notes,
                      std::vector<std::string>& deviations);

// The result of a replay whose every field agreed: PASS or DEVIATION, with the policy and counts.
report::CaseResult agreed(const json& fixture, const Scenario& c, int64_t identical, int64_t outputs, double worst);

// A step's own fields, as dump.py records them (step_record) and the fast path compares them.
struct StepValues {
  size_t index = 0;  // the scenario's step index (resets count)
  int64_t seen = 0, q = 0;
  const std::optional<std::vector<int64_t>>* cache_position = nullptr;
  const LeftPadding* left_padding = nullptr;
};
// attention_mask_2d's row for a batch row with `left_padding` pad tokens, `end` tokens in all.
inline std::string attention_mask_row(int64_t left_padding, int64_t end) {
  const int64_t zeros = left_padding < end ? left_padding : end;
  return std::string(static_cast<size_t>(zeros), '0') + std::string(static_cast<size_t>(end - zeros), '1');
}
// Whether the fixture's step has these values and `layers` layers (compare()'s step checks).
bool step_matches(const json& fixture_step, const StepValues& v, size_t layers);

// The top-level fields compared before the steps ("dtype", "layers") and a step's own fields.
json layer_records(const Scenario& c, const Behaviours& behaviours);
json step_record(size_t step, int64_t seen, int64_t q, const std::optional<std::vector<int64_t>>& cache_position,
                 const Scenario& c);
// A call step's own fields: its call ({"method", "argument"}), no tokens, no mask.
json call_step_record(size_t step, int64_t seen, const LayerCall& call);
extern const char* const kStepFields[5];

// An attention output's hex (fixture or record) as doubles, any of the four dtypes.
std::vector<double> decode_output(const json& output);

}  // namespace kvc::golden::detail
