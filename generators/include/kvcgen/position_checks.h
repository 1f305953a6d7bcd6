// The position-level checks of the properties stored_rows, returned_rows and window_coverage, and
// their failure messages: one set for both engines. The fast engine (fast_engine.cpp) feeds them
// the position-level simulation's rows and masks (fastpath.h); the tensor engine (sut.cpp) feeds
// them the LibTorch reference's rows (its position-tag shadow) and masks (masks.h), then checks the
// K/V bytes on top. The expected values come from the documented rules (positions.h), written
// independently of both. No LibTorch, no RapidCheck: a failure is a message, empty when the step holds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kvconform/fastpath.h"
#include "kvconform/positions.h"
#include "kvconform/types.h"

namespace kvc::campaign {

// One layer's step as failure messages name it: "Prefill(5) after 0 tokens: static <spec>".
struct StepAt {
  const char* command;  // "Prefill", "Decode", "Extend", "Update"
  const char* role;     // "static", "dynamic", "twin", "layer"
  const LayerSpec* spec;
  int64_t seen = 0, q = 0;
  std::string where() const;  // "Prefill(5) after 0 tokens"
  std::string who() const;    // where() + ": " + role + " " + spec->describe()
};

// "[0,1,_]": token per row, '_' for an unwritten row.
std::string rows_str(const fast::TokenRows& rows);
std::string rows_str(const positions::Rows& rows);
fast::TokenRows token_rows(const positions::Rows& rows);  // nullopt -> fast::kUnwritten

// Reused between steps: the coverage check allocates nothing per step once warm.
class PositionChecks {
 public:
  // stored_rows: the layer stores positions::stored_rows(spec, seen + q).
  std::string stored(const StepAt& at, const fast::TokenRows& stored) const;
  // returned_rows: get_mask_sizes answered positions::mask_sizes, update returned kv_length rows,
  // holding tokens [kv_offset, kv_offset + kv_length) (unwritten past the tokens fed).
  std::string returned(const StepAt& at, MaskSizes sizes, const fast::TokenRows& returned) const;
  // window_coverage: each query attends, through the boolean mask [batch][q][kv_length] over the
  // returned rows, exactly the keys the window rule allows (from kv_offset on where the layer
  // already drops window keys, lost_keys); where SDPA skips the mask (`skipped`) the is_causal
  // pattern it applies instead must attend the same.
  std::string coverage(const StepAt& at, int64_t batch, const LeftPadding& padding, MaskSizes sizes,
                       const fast::TokenRows& returned, const std::vector<uint8_t>& mask, bool skipped, bool lost_keys);

 private:
  std::string pattern(const StepAt& at, const char* form, int64_t batch, const LeftPadding& padding,
                      const fast::TokenRows& returned, const std::vector<uint8_t>& cells, bool shared_rows, int64_t cols,
                      int64_t first_key);
  std::vector<uint8_t> implied_;
  std::vector<int64_t> stamp_;         // per token: the query for which it was last attended
  std::vector<uint8_t> zeros_, ones_;  // rows of the quick pass's expected cells
  int64_t query_counter_ = 0;
};

}  // namespace kvc::campaign
