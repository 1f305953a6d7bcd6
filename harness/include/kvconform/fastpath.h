// The fast path: transformers' cache layers and mask builders simulated at the position level, in
// plain C++ (no LibTorch). Each layer kind's update() is replayed branch by branch on token indices
// (which absolute token every stored and returned row holds), and the masks are computed from
// masking_utils' mask functions. Written independently of positions.h (closed forms of the
// documented rules) so that each checks the other, and of the LibTorch reference (reference.h,
// masks.h), which stays the implementation for values that must match transformers bitwise (K/V
// bytes, attention outputs); a test holds the two to the same rows, sizes, masks and raises for
// every row of the release table (masks_test.cpp).
//
// Per step, a caller that replays a case (golden replay, a step driver) does what run_case does
// with the tensor reference, with the same arguments:
//
//   fast::Layer layer(spec, behaviours, mutation);          // one per cache layer
//   for each step (q tokens from t0, cache_position `pos` or none):
//     MaskSizes sizes = pos ? layer.mask_sizes_for_positions(*pos) : layer.get_mask_sizes(q);
//     MaskRequest m = mask_request(spec, behaviours, batch, left_padding, t0, q, pos, sizes);
//     fast::boolean_mask(m, bool_rows, mutation);  bool skipped = fast::skips(m);
//     layer.update(q, returned, pos ? &*pos : nullptr);     // throws where transformers raises
//     returned / layer.stored(): token index per row, kUnwritten for a zero row
//
// Deterministic; outputs go into caller-owned vectors, reused between calls.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kvconform/behaviours.h"
#include "kvconform/mask_request.h"
#include "kvconform/mutants.h"
#include "kvconform/types.h"

namespace kvc::fast {

// Token index per row; kUnwritten for a row never written (zeros in the real buffers).
constexpr int64_t kUnwritten = -1;
using TokenRows = std::vector<int64_t>;

// One cache layer as make_layer(spec, behaviours, mutation) builds it: StaticLayer, DynamicLayer,
// StaticSlidingWindowLayer (merged), DynamicSlidingWindowLayer, and under sliding_layer pre_merge
// 4.56's SlidingWindowLayer and ChunkedSlidingLayer.
class Layer {
 public:
  // The mutation is applied where it touches this layer kind, as make_mutant_layer decides (the
  // static mutants exist for the merged layer only).
  explicit Layer(const LayerSpec& spec, const Behaviours& behaviours = Behaviours{}, Mutation mutation = Mutation::None);

  const LayerSpec& spec() const { return spec_; }
  // get_mask_sizes(query_length) (the query_length API, and the merged layers' cache_position API).
  MaskSizes get_mask_sizes(int64_t q) const;
  // get_mask_sizes(cache_position): the pre-merge layers read the first position (CacheLayer's).
  MaskSizes mask_sizes_for_positions(const std::vector<int64_t>& cache_position) const;

  // Tokens [cumulative, cumulative + q) arrive; `returned` receives the token of every row update()
  // returns. cache_position (q entries, or null) as CacheLayer::update. Throws what the tensor
  // reference throws, with its exception types: std::invalid_argument for q < 1, a cache_position of
  // the wrong length or a pre-merge sliding layer without one; std::out_of_range for a position
  // outside a static buffer; std::runtime_error for a multi-token update on a full pre-merge sliding
  // layer. The cumulative count moves as Python's does (also before a raise, pre-merge).
  void update(int64_t q, TokenRows& returned, const std::vector<int64_t>* cache_position = nullptr);

  const TokenRows& stored() const { return stored_; }  // empty before the first update
  int64_t cumulative() const { return cumulative_; }
  void reset();

 private:
  enum class Kind { StaticFull, DynamicFull, StaticSliding, DynamicSliding, PreMergeSliding, PreMergeChunked };
  int64_t capacity() const;  // static buffer rows (mutation included)
  MaskSizes merged_sizes(int64_t old, int64_t q) const;
  void write_in_place(int64_t first_token, int64_t q, const std::vector<int64_t>* cache_position);
  void update_static_sliding(int64_t q, TokenRows& returned, const std::vector<int64_t>* cache_position);

  LayerSpec spec_;
  Behaviours behaviours_;
  Mutation mutation_;
  Kind kind_;
  TokenRows stored_, scratch_;
  int64_t cumulative_ = 0;
};

// The fast engine's per-step loop over several layers, step-major as the StepDriver runs the tensor
// engine (every layer takes step s before any takes s + 1). `steps` are tokens per update, 0 a
// reset (every layer resets). For an update, visit(index, layer, seen, q) updates the layer itself
// (so that it can ask get_mask_sizes first and catch what update raises) and returns an empty
// string, or a failure, which stops the loop and is returned. Empty when every step held.
template <typename Visit>
std::string for_each_step(std::vector<Layer>& layers, const std::vector<int64_t>& steps, Visit&& visit) {
  int64_t seen = 0;
  for (int64_t q : steps) {
    if (q == 0) {
      for (Layer& layer : layers) layer.reset();
      seen = 0;
      continue;
    }
    for (size_t l = 0; l < layers.size(); ++l)
      if (std::string failure = visit(l, layers[l], seen, q); !failure.empty()) return failure;
    seen += q;
  }
  return {};
}

// The masks take kvc::MaskRequest (mask_request.h), the type masks.h takes too; build it with
// mask_request() / assign_mask_request().

// sdpa_mask(allow_is_causal_skip=False): [batch][q][kv_length] row-major, 1 = attend. A mutation
// given here wins over m.mutation (as masks::boolean_mask).
void boolean_mask(const MaskRequest& m, std::vector<uint8_t>& out, Mutation mutation = Mutation::None);

// Whether sdpa_mask returns None (SDPA's is_causal or no mask instead): masks::can_skip.
bool skips(const MaskRequest& m);

// The pattern SDPA applies instead of a skipped mask: [q][kv_length], top-left causal when q > 1.
void implied_by_skip(int64_t q, int64_t kv_length, std::vector<uint8_t>& out);

// eager_mask's bytes for a boolean mask: 0 where attended, finfo(dtype).min elsewhere, little endian.
void additive_mask_bytes(const std::vector<uint8_t>& boolean, DType dtype, std::string& out);

}  // namespace kvc::fast
