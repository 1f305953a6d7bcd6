#include "kvconform/attention.h"

#include <ATen/ATen.h>

#include <cmath>

namespace kvc::attention {

namespace {
// repeat_kv: [B, Hkv, S, D] -> [B, Hkv * groups, S, D], each kv head serving `groups` query heads.
at::Tensor repeat_kv(const at::Tensor& x, int64_t heads) {
  const int64_t groups = heads / x.size(1);
  if (groups == 1) return x;
  return x.unsqueeze(2)
      .expand({x.size(0), x.size(1), groups, x.size(2), x.size(3)})
      .reshape({x.size(0), heads, x.size(2), x.size(3)});
}
// torch.matmul of two 4-D tensors with the same batch dims [B, H]: ATen's _matmul_impl expands both
// to the common batch shape (a no-op here), folds it into one and calls bmm. The same reshapes and
// bmm without the no-op expands; the golden fixtures hold the outputs to transformers' bit for bit.
at::Tensor matmul4d(const at::Tensor& a, const at::Tensor& b) {
  const int64_t B = a.size(0), H = a.size(1), n = a.size(2), m = b.size(3);
  if (b.size(0) != B || b.size(1) != H) return at::matmul(a, b);  // broadcasting: torch's own path
  return at::bmm(a.reshape({B * H, n, a.size(3)}), b.reshape({B * H, b.size(2), m})).view({B, H, n, m});
}
// transformers' head_dim**-0.5, computed as Python computes it.
double scaling(const at::Tensor& q) { return std::pow(static_cast<double>(q.size(3)), -0.5); }
}  // namespace

at::Tensor eager(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const std::optional<at::Tensor>& additive_mask) {
  at::Tensor scores = matmul4d(q, repeat_kv(k, q.size(1)).transpose(2, 3)) * scaling(q);
  if (additive_mask) scores = scores + *additive_mask;
  const at::Tensor probs = at::softmax(scores, -1, at::kFloat).to(q.scalar_type());
  return matmul4d(probs, repeat_kv(v, q.size(1)));
}

at::Tensor sdpa(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const std::optional<at::Tensor>& boolean_mask,
                const SdpaGqaPath& path) {
  const int64_t q_len = q.size(2), heads = q.size(1), kv_heads = k.size(1), groups = heads / kv_heads;
  const bool is_causal = !boolean_mask && q_len > 1;
  const bool gqa =
      groups > 1 && !boolean_mask && (path.enable_gqa_max_head_dim == 0 || k.size(3) <= path.enable_gqa_max_head_dim);
  const bool pack = groups > 1 && !gqa && q_len == 1 && path.pack_gqa_decode;
  at::Tensor query = q, key = k, value = v;
  if (pack) query = q.reshape({q.size(0), kv_heads, groups, q.size(3)});  // the mask [B,1,1,kv] broadcasts
  else if (groups > 1 && !gqa) key = repeat_kv(k, heads), value = repeat_kv(v, heads);
  if (is_causal && key.size(2) > q_len) {  // is_causal is top-left aligned: later rows are unseen
    key = key.slice(2, 0, q_len);
    value = value.slice(2, 0, q_len);
  }
  const at::Tensor out = at::scaled_dot_product_attention(query, key, value, boolean_mask, 0.0, is_causal, scaling(q), gqa);
  return pack ? out.reshape({out.size(0), heads, q_len, v.size(3)}) : out;
}

at::Tensor exact(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& boolean_mask) {
  const at::Tensor q64 = q.to(at::kDouble), k64 = repeat_kv(k, q.size(1)).to(at::kDouble);
  const at::Tensor v64 = repeat_kv(v, q.size(1)).to(at::kDouble);
  at::Tensor scores = at::matmul(q64, k64.transpose(2, 3)) * scaling(q);
  scores = scores.masked_fill(boolean_mask.logical_not(), -std::numeric_limits<double>::infinity());
  const at::Tensor any = boolean_mask.any(-1, /*keepdim=*/true);
  scores = scores.masked_fill(any.logical_not(), 0.0);  // keep softmax finite; rows zeroed below
  return at::matmul(at::softmax(scores, -1), v64) * any.to(at::kDouble);
}

}  // namespace kvc::attention
