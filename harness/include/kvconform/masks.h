// transformers' masks (masking_utils.py) over absolute positions: causal, sliding-window causal,
// chunked causal with per-row left padding, the 2D padding mask, and the boolean (sdpa_mask) and
// additive (eager_mask) forms.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <vector>

#include "kvconform/behaviours.h"
#include "kvconform/mutants.h"
#include "kvconform/types.h"

namespace kvc::masks {

struct MaskQuery {
  LayerType type = LayerType::Sliding;
  int64_t window = 0;                    // sliding_window / attention_chunk_size
  int64_t batch = 1;
  std::vector<int64_t> query_positions;  // absolute positions of the new tokens (cache_position)
  MaskSizes sizes;                       // from get_mask_sizes
  // The 2D attention_mask: leading zeros per row, ones up to `seen_after`; nullopt = none passed.
  LeftPadding left_padding;
  int64_t seen_after = 0;                // tokens seen once this step is fed (seen + q): the 2D attention_mask's length
  bool allow_skip = false;               // see allow_is_causal_skip
  bool skip_empty_cache = true;          // Behaviours::sdpa_skip_empty_cache (can_skip)
  Mutation mutation = Mutation::None;    // a deliberately wrong mask (--mutant), for every suite
};

// create_*_mask's allow_is_causal_skip under Behaviours::sdpa_skip: never for a compileable
// (static) cache, or not for a compileable cache's single-token (decode) step only.
bool allow_is_causal_skip(const Behaviours& behaviours, CacheKind cache, int64_t query_length);

// [batch, 1, q, kv_length] bool, true = attend. Keys are at kv_offset + j.
at::Tensor boolean_mask(const MaskQuery& m, Mutation mutation = Mutation::None);

// transformers' _ignore_causal_mask_sdpa: the mask may be skipped in favour of SDPA's is_causal.
bool can_skip(const MaskQuery& m);

// sdpa_mask: nullopt when skipped.
std::optional<at::Tensor> sdpa_mask(const MaskQuery& m, Mutation mutation = Mutation::None);

// eager_mask: 0 where allowed, finfo(dtype).min where masked.
at::Tensor additive_mask(const at::Tensor& boolean, c10::ScalarType dtype);

// The pattern SDPA applies when the mask is skipped (is_causal only when q > 1, top-left aligned).
at::Tensor implied_by_skip(const MaskQuery& m);

}  // namespace kvc::masks
