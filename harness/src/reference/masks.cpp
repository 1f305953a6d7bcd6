#include "kvconform/masks.h"

#include <ATen/ATen.h>

#include <limits>
#include <stdexcept>

namespace kvc::masks {

namespace {
at::Tensor longs(const std::vector<int64_t>& v) {
  return at::tensor(at::ArrayRef<int64_t>(v), at::TensorOptions().dtype(at::kLong));
}

// The 2D attention_mask zero-padded to cover every key position: [batch, n], true = real token.
at::Tensor padding_mask(const MaskRequest& m, int64_t n) {
  const at::Tensor pos = at::arange(n, at::kLong).unsqueeze(0);
  const at::Tensor lp = longs(*m.left_padding).unsqueeze(1);
  return pos.ge(lp).logical_and(pos.lt(m.seen_after));
}

// transformers counts left padding as the leading zeros of the 2D mask.
std::vector<int64_t> leading_pads(const MaskRequest& m) {
  std::vector<int64_t> lp(static_cast<size_t>(m.batch), 0);
  if (m.left_padding)
    for (int64_t b = 0; b < m.batch; ++b) lp[b] = std::min((*m.left_padding)[b], m.seen_after);
  return lp;
}

}  // namespace

at::Tensor boolean_mask(const MaskRequest& m, Mutation mutation) {
  m.check();
  if (mutation == Mutation::None) mutation = m.mutation;
  const at::Tensor qpos = longs(m.query_positions).view({1, -1, 1});                                         // [1,q,1]
  const at::Tensor kpos = at::arange(m.sizes.kv_length, at::kLong).add(m.sizes.kv_offset).view({1, 1, -1});  // [1,1,k]
  at::Tensor allowed = kpos.le(qpos).expand({m.batch, -1, -1});
  if (m.type == LayerType::Sliding) {
    const int64_t w = mutation == Mutation::WindowTooWide ? m.window + 1 : m.window;
    allowed = allowed.logical_and(kpos.gt(qpos - w));
  } else if (m.type == LayerType::Chunked) {
    at::Tensor lp = longs(leading_pads(m)).view({-1, 1, 1});
    if (mutation == Mutation::ChunkIgnoresLeftPadding) lp = at::zeros_like(lp);
    const at::Tensor same = at::floor_divide(kpos - lp, m.window).eq(at::floor_divide(qpos - lp, m.window));
    allowed = allowed.logical_and(same);
  }
  if (m.left_padding) {
    const int64_t n = m.sizes.kv_offset + m.sizes.kv_length;
    const at::Tensor pad = padding_mask(m, std::max(n, m.seen_after)).slice(1, m.sizes.kv_offset, n);
    allowed = allowed.logical_and(pad.unsqueeze(1));
  }
  return allowed.unsqueeze(1).contiguous();
}

bool can_skip(const MaskRequest& m) {
  m.check();
  const int64_t q = m.q();
  if (!m.allow_skip) return false;
  if (m.type != LayerType::Full && m.sizes.kv_length >= m.window) return false;  // the window shows
  // The 2D mask over the key columns (zero-padded past the tokens fed so far); none = all real.
  at::Tensor pad;
  if (m.left_padding) {
    const int64_t n = m.sizes.kv_offset + m.sizes.kv_length;
    pad = padding_mask(m, std::max(n, m.seen_after)).slice(1, m.sizes.kv_offset, n);
  }
  if ((q == 1 || m.sizes.kv_length == q) && (!pad.defined() || pad.all().item<bool>())) return true;
  // sdpa_skip_empty_cache: an empty cache (first query at 0) may use top-left is_causal when the
  // only padding is the unwritten tail of a static buffer.
  if (m.skip_empty_cache && !m.query_positions.empty() && m.query_positions.front() == 0)
    return !pad.defined() || (pad.slice(1, 0, q).all().item<bool>() && pad.slice(1, q).logical_not().all().item<bool>());
  return false;
}

std::optional<at::Tensor> sdpa_mask(const MaskRequest& m, Mutation mutation) {
  if (can_skip(m)) return std::nullopt;
  return boolean_mask(m, mutation);
}

namespace {
// torch.finfo(dtype).min: the most negative finite value, not -inf, so a fully masked row stays finite.
double finfo_min(c10::ScalarType t) {
  switch (t) {
    case at::kHalf: return -65504.0;
    case at::kBFloat16: return -3.3895313892515355e38;
    case at::kFloat: return -static_cast<double>(std::numeric_limits<float>::max());
    default: return -std::numeric_limits<double>::max();
  }
}
}  // namespace

at::Tensor additive_mask(const at::Tensor& boolean, c10::ScalarType dtype) {
  const auto opts = at::TensorOptions().dtype(dtype);
  return at::where(boolean, at::zeros({}, opts), at::full({}, finfo_min(dtype), opts));
}

at::Tensor implied_by_skip(const MaskRequest& m) {
  const int64_t q = m.q();
  const int64_t k = m.sizes.kv_length;
  at::Tensor pattern = q > 1 ? at::ones({q, k}, at::kBool).tril() : at::ones({q, k}, at::kBool);
  return pattern.view({1, 1, q, k}).expand({m.batch, 1, q, k}).contiguous();
}

}  // namespace kvc::masks
