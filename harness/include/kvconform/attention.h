// Attention computed the ways transformers computes it, from a layer's returned K/V and a mask.
// Queries [batch, heads, q, head_dim]; K/V [batch, kv_heads, kv, head_dim]; results
// [batch, heads, q, head_dim].
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>

namespace kvc::attention {

// eager_attention_forward: repeat_kv, q @ k^T * head_dim^-0.5 + additive mask, softmax in float32,
// back to the input dtype, @ v. A fully masked row averages every value (finfo.min, not -inf).
at::Tensor eager(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                 const std::optional<at::Tensor>& additive_mask);

// How a release's sdpa_attention_forward shares kv heads among query heads (GQA) on the CPU; the
// paths round differently, so golden replay follows the fixture's release to stay bitwise.
struct SdpaGqa {
  // SDPA's own enable_gqa is used only without a mask and, from 5.14 on, only for head_dim <= 256
  // (0 = no head_dim limit).
  int64_t enable_gqa_max_head_dim = 256;
  // 5.23+: a masked single-query step folds the query heads of a kv head into the query length
  // (pack_gqa) instead of repeating K/V.
  bool pack_gqa_decode = true;
};

// sdpa_attention_forward: boolean mask, or is_causal = (q > 1) when the mask was skipped.
at::Tensor sdpa(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                const std::optional<at::Tensor>& boolean_mask, const SdpaGqa& gqa_path = SdpaGqa{});

// The same attention in float64 with a boolean mask; a row that sees nothing gives zeros.
at::Tensor exact(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& boolean_mask);

}  // namespace kvc::attention
