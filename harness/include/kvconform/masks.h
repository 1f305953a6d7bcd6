// transformers' masks (masking_utils.py) over absolute positions: causal, sliding-window causal,
// chunked causal with per-row left padding, the 2D padding mask, and the boolean (sdpa_mask) and
// additive (eager_mask) forms.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <vector>

#include "kvconform/mask_request.h"

namespace kvc::masks {

// The request (query positions, sizes, left padding, skip rules) is kvc::MaskRequest
// (mask_request.h), shared with the position-level masks of fastpath.h.

// [batch, 1, q, kv_length] bool, true = attend. Keys are at kv_offset + j.
at::Tensor boolean_mask(const MaskRequest& m, Mutation mutation = Mutation::None);

// transformers' _ignore_causal_mask_sdpa: the mask may be skipped in favour of SDPA's is_causal.
bool can_skip(const MaskRequest& m);

// sdpa_mask: nullopt when skipped.
std::optional<at::Tensor> sdpa_mask(const MaskRequest& m, Mutation mutation = Mutation::None);

// eager_mask: 0 where allowed, finfo(dtype).min where masked.
at::Tensor additive_mask(const at::Tensor& boolean, c10::ScalarType dtype);

// The pattern SDPA applies when the mask is skipped (is_causal only when q > 1, top-left aligned).
at::Tensor implied_by_skip(const MaskRequest& m);

}  // namespace kvc::masks
