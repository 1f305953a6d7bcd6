// transformers' bidirectional (encoder) masks: every query sees every real key of the sequence, a
// sliding layer only the keys within `before` positions before it and `after` positions after it
// (masking_utils' sliding_window_bidirectional_overlay: abs(q - kv) <= sliding_window on both sides;
// T5Gemma2's own overlay is asymmetric), in one whole-sequence pass with no cache.
// Beside it, how each encoder family turns its configuration into that reach and whether its
// releases' builders may hand sdpa or eager no mask at all, as data (encoder_mask_rule).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kvconform/mutants.h"
#include "kvconform/types.h"

namespace kvc::masks {

struct BidirectionalRequest {
  LayerType type = LayerType::Sliding;  // Full or Sliding (an encoder has no chunked layers)
  int64_t before = 0;                   // Sliding: keys with 0 <= q - kv <= before
  int64_t after = 0;                    // and keys with 0 <= kv - q <= after
  int64_t skip_window = 0;              // the builder's local size: sdpa may skip below it (can_skip_bidirectional)
  int64_t length = 0;                   // queries = keys = the whole sequence
  int64_t batch = 1;
  // The 2D attention_mask, [batch][length], true = a real token; empty = none passed.
  std::vector<std::vector<bool>> real;
  bool builder_skips = true;  // whether the release's builder may return no mask (EncoderMaskRule::skips)
  // Throws std::invalid_argument for a negative reach of a sliding layer, a non-positive length, a
  // chunked type, or an attention_mask whose shape is not [batch][length].
  void check() const;
};

// [batch, 1, length, length] bool, true = attend: the padding of the keys (not of the queries: a padded
// query row still attends, as the 2D mask expands over the keys only) and, on a sliding layer, the window.
// Mutation::WindowTooWide widens the reach on each side by one.
at::Tensor bidirectional_boolean_mask(const BidirectionalRequest& r, Mutation mutation = Mutation::None);

// masking_utils' _ignore_bidirectional_mask_sdpa as the 5.x builders use it (sdpa and eager alike): no
// key is padding and the layer is full or the sequence is shorter than the builder's local size.
bool can_skip_bidirectional(const BidirectionalRequest& r);

// The mask an encoder layer is handed: nullopt where the builder skips it (attend to everything).
std::optional<at::Tensor> bidirectional_mask(const BidirectionalRequest& r, Mutation mutation = Mutation::None);

// How an encoder family's configuration gives its sliding layers' reach on each side in one release,
// (config[window_key] + add) / divisor + offset: ModernBERT's local_attention is the whole window, its
// half the reach; T5Gemma before 5.0 combined the causal sliding builder with an overlay of
// abs(q - kv) < sliding_window; T5Gemma2 looks (w + 1) / 2 - 1 keys back and w / 2 ahead. And whether
// that release's builder may skip the mask, per layer type.
struct EncoderMaskRule {
  struct Side {
    int64_t add = 0, divisor = 1, offset = 0;
    int64_t of(int64_t window) const { return (window + add) / divisor + offset; }
  };
  std::string window_key = "sliding_window";
  Side before, after;
  bool skips = true;          // the release's builders may skip a mask (5.x)
  bool sliding_skips = true;  // and a sliding layer's too (T5Gemma2 adds its window as an and_mask_function, which
                              // makes create_bidirectional_mask always build it)
  // The window is each layer's own (neomme's per_layer_config[i].sliding_window, which its builder reads as the layer's
  // config.sliding_window, the skip's local size too), not the model's sliding_window.
  bool per_layer_window = false;
};
// Throws std::invalid_argument naming the families it knows for an unknown model_type, or a release
// that is not "MAJOR.MINOR.PATCH".
EncoderMaskRule encoder_mask_rule(const std::string& model_type, const std::string& release);
std::vector<std::string> encoder_families();

}  // namespace kvc::masks
