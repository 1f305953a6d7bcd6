// Attention computed the ways transformers computes it, from a layer's returned K/V and a mask.
// Queries [batch, heads, q, head_dim]; K/V [batch, kv_heads, kv, head_dim]; results
// [batch, heads, q, head_dim].
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>

#include "kvconform/behaviours.h"

namespace kvc::attention {

// eager_attention_forward: repeat_kv, q @ k^T * head_dim^-0.5 + additive mask, softmax in float32,
// back to the input dtype, @ v. A fully masked row averages every value (finfo.min, not -inf).
at::Tensor eager(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const std::optional<at::Tensor>& additive_mask);

// sdpa_attention_forward: boolean mask, or is_causal = (q > 1) when the mask was skipped.
at::Tensor sdpa(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const std::optional<at::Tensor>& boolean_mask,
                const SdpaGqaPath& gqa_path = SdpaGqaPath{});

// The same attention in float64 with a boolean mask; a row that sees nothing gives zeros.
at::Tensor exact(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& boolean_mask);

}  // namespace kvc::attention
