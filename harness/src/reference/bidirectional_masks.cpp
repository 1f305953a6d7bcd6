#include "kvconform/bidirectional_masks.h"

#include <ATen/ATen.h>

#include <sstream>
#include <stdexcept>

namespace kvc::masks {

void BidirectionalRequest::check() const {
  if (type == LayerType::Chunked)
    throw std::invalid_argument("bidirectional mask: an encoder layer is full or sliding, not chunked");
  if (type == LayerType::Sliding && (before < 0 || after < 0))
    throw std::invalid_argument("bidirectional mask: reach " + std::to_string(before) + " before, " + std::to_string(after) +
                                " after: a sliding layer's reach is not negative");
  if (length <= 0) throw std::invalid_argument("bidirectional mask: length " + std::to_string(length) + " is not positive");
  if (batch <= 0) throw std::invalid_argument("bidirectional mask: batch " + std::to_string(batch) + " is not positive");
  if (real.empty()) return;
  if (static_cast<int64_t>(real.size()) != batch)
    throw std::invalid_argument("bidirectional mask: attention_mask has " + std::to_string(real.size()) + " rows for batch " +
                                std::to_string(batch));
  for (const auto& row : real)
    if (static_cast<int64_t>(row.size()) != length)
      throw std::invalid_argument("bidirectional mask: an attention_mask row has " + std::to_string(row.size()) +
                                  " columns for length " + std::to_string(length));
}

namespace {
// The 2D attention_mask as [batch, length] bool; all true where none was passed.
at::Tensor real_keys(const BidirectionalRequest& r) {
  at::Tensor out = at::ones({r.batch, r.length}, at::kBool);
  if (r.real.empty()) return out;
  auto a = out.accessor<bool, 2>();
  for (int64_t b = 0; b < r.batch; ++b)
    for (int64_t j = 0; j < r.length; ++j) a[b][j] = r.real[b][j];
  return out;
}
}  // namespace

at::Tensor bidirectional_boolean_mask(const BidirectionalRequest& r, Mutation mutation) {
  r.check();
  const at::Tensor pos = at::arange(r.length, at::kLong);
  const at::Tensor q = pos.view({-1, 1}), kv = pos.view({1, -1});
  at::Tensor allowed = at::ones({r.length, r.length}, at::kBool);
  if (r.type == LayerType::Sliding) {
    const int64_t wider = mutation == Mutation::WindowTooWide ? 1 : 0;
    allowed = (q - kv).le(r.before + wider).logical_and((kv - q).le(r.after + wider));
  }
  // [batch, 1, q, kv]: the window for every row, the padding of the keys per row
  return allowed.view({1, 1, r.length, r.length}).logical_and(real_keys(r).view({r.batch, 1, 1, r.length})).contiguous();
}

bool can_skip_bidirectional(const BidirectionalRequest& r) {
  r.check();
  if (!r.builder_skips) return false;
  if (!real_keys(r).all().item<bool>()) return false;
  return r.type == LayerType::Full || r.length < r.skip_window;
}

std::optional<at::Tensor> bidirectional_mask(const BidirectionalRequest& r, Mutation mutation) {
  if (can_skip_bidirectional(r)) return std::nullopt;
  return bidirectional_boolean_mask(r, mutation);
}

namespace {
struct Release {
  int major = 0, minor = 0, patch = 0;
};
Release parse_release(const std::string& s) {
  Release r;
  char d1 = 0, d2 = 0;
  std::istringstream in(s);
  if (!(in >> r.major >> d1 >> r.minor >> d2 >> r.patch) || d1 != '.' || d2 != '.' || in.peek() != EOF)
    throw std::invalid_argument("encoder_mask_rule: release '" + s + "' is not MAJOR.MINOR.PATCH");
  return r;
}
}  // namespace

std::vector<std::string> encoder_families() {
  return {"modernbert", "ultrabert", "embedding_gemma2", "openai_privacy_filter", "t5gemma", "t5gemma2", "neomme"};
}

EncoderMaskRule encoder_mask_rule(const std::string& model_type, const std::string& release) {
  const Release v = parse_release(release);
  const bool builders = v.major >= 5;  // masking_utils' bidirectional builders (the 4.x models built their own)
  EncoderMaskRule rule;
  rule.skips = builders;
  if (model_type == "modernbert") {
    rule.window_key = "local_attention";
    rule.before.divisor = rule.after.divisor = 2;
  } else if (model_type == "t5gemma") {
    if (!builders) rule.before.offset = rule.after.offset = -1;  // 4.x: (q - w < kv) & (kv < q + w)
  } else if (model_type == "t5gemma2") {
    // its sliding_window_mask_function(is_causal=False): 0 <= q - kv < (w + 1) // 2, 0 < kv - q < w // 2 + 1
    rule.before = {1, 2, -1};
    rule.after = {0, 2, 0};
    rule.sliding_skips = false;
  } else if (model_type == "neomme") {
    rule.per_layer_window = true;  // per_layer_config: each sliding layer's own sliding_window, abs(q - kv) <= it
  } else if (model_type != "ultrabert" && model_type != "embedding_gemma2" && model_type != "openai_privacy_filter") {
    std::string known;
    for (const auto& f : encoder_families()) known += (known.empty() ? "" : ", ") + f;
    throw std::invalid_argument("encoder_mask_rule: no encoder family '" + model_type + "' (known: " + known + ")");
  }
  return rule;
}

}  // namespace kvc::masks
