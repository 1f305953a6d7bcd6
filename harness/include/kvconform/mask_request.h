// One layer's mask request, as transformers' create_*_mask passes it to sdpa_mask / eager_mask:
// the layer type and window, the query positions, the layer's get_mask_sizes answer, the 2D
// attention_mask (left padding), and whether SDPA may skip the mask. One type for both mask
// implementations: the LibTorch one (masks.h) and the position-level one (fastpath.h), which stay
// independent of each other and are held to the same bytes by fastpath_reference_test.cpp.
// No LibTorch here.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "kvconform/behaviours.h"
#include "kvconform/mutants.h"
#include "kvconform/types.h"

namespace kvc {

struct MaskRequest {
  LayerType type = LayerType::Sliding;
  int64_t window = 0;  // sliding_window / attention_chunk_size
  int64_t batch = 1;
  std::vector<int64_t> query_positions;  // absolute positions of the new tokens (cache_position)
  MaskSizes sizes;                       // from get_mask_sizes
  // The 2D attention_mask: leading zeros per row, ones up to `seen_after`; nullopt = none passed.
  LeftPadding left_padding;
  int64_t seen_after = 0;              // tokens seen once this step is fed (seen + q): the 2D attention_mask's length
  bool allow_skip = false;             // see allow_is_causal_skip
  bool skip_empty_cache = true;        // Behaviours::sdpa_skip_empty_cache
  Mutation mutation = Mutation::None;  // a deliberately wrong mask (--mutant), for every suite

  int64_t q() const { return static_cast<int64_t>(query_positions.size()); }
  // Throws std::invalid_argument for a non-positive window of a windowed type, or left padding
  // whose row count is not the batch.
  void check() const;
};

// create_*_mask's allow_is_causal_skip under Behaviours::sdpa_skip: never for a compileable
// (static) cache, or not for a compileable cache's single-token (decode) step only.
bool allow_is_causal_skip(const Behaviours& behaviours, CacheKind cache, int64_t query_length);

// The request for one layer's step of q tokens fed after t0: window and type from the spec, skip
// rules from the behaviours, query positions = cache_position or arange(t0, t0 + q). Assigns into
// `out` (reusing its buffers, for the allocation-free fast path) or returns a new one.
void assign_mask_request(MaskRequest& out, const LayerSpec& spec, const Behaviours& behaviours, int64_t batch,
                         const LeftPadding& left_padding, int64_t t0, int64_t q,
                         const std::optional<std::vector<int64_t>>& cache_position, MaskSizes sizes,
                         Mutation mutation = Mutation::None);
MaskRequest mask_request(const LayerSpec& spec, const Behaviours& behaviours, int64_t batch, const LeftPadding& left_padding,
                         int64_t t0, int64_t q, const std::optional<std::vector<int64_t>>& cache_position, MaskSizes sizes,
                         Mutation mutation = Mutation::None);

}  // namespace kvc
