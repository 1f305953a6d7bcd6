// Built-in step sequences that reach every branch of the cache layers: decode across the window
// boundary, a prefill longer than the window, multi-token updates once full, wrap-around several
// times, chunk boundaries, left padding, GQA and resets. Used by the backend suite and the plugin
// checks (beside the random campaigns). No LibTorch here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kvconform/types.h"

namespace kvc {

struct StepPattern {
  std::string name;
  LayerType type = LayerType::Sliding;
  int64_t window = 4, max_cache_len = 8;
  int64_t batch = 1, heads = 1, kv_heads = 1, head_dim = 4;
  LeftPadding left_padding;
  std::vector<int64_t> steps;  // tokens per update; 0 = reset (a new sequence starts)
  uint64_t seed = 7;

  LayerSpec spec(CacheKind cache) const { return {cache, type, window, max_cache_len}; }
};

inline std::vector<StepPattern> step_patterns() {
  std::vector<StepPattern> p;
  // name, type, W, L, B, H, Hkv, D, padding, steps, seed
  p.push_back({"decode_across_window", LayerType::Sliding, 4, 8, 1, 1, 1, 4, std::nullopt, {2, 1, 1, 1, 1, 1, 1, 1, 1}, 11});
  p.push_back({"prefill_longer_than_window", LayerType::Sliding, 4, 8, 1, 2, 1, 8, std::nullopt, {6, 1, 1, 3}, 12});
  p.push_back({"prefill_equal_window_then_extend", LayerType::Sliding, 5, 5, 2, 4, 2, 4, std::nullopt, {5, 1, 2, 1, 5, 1}, 13});
  p.push_back({"wrap_around_three_times", LayerType::Sliding, 3, 6, 1, 2, 2, 4, std::nullopt, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 14});
  p.push_back({"cache_shorter_than_window", LayerType::Sliding, 6, 4, 1, 1, 1, 4, std::nullopt, {2, 1, 1}, 15});
  p.push_back({"chunked_across_chunks", LayerType::Chunked, 3, 6, 1, 2, 1, 4, std::nullopt, {4, 1, 1, 1, 2, 1, 1}, 16});
  p.push_back({"chunked_left_padding", LayerType::Chunked, 3, 9, 2, 2, 1, 4, std::vector<int64_t>{0, 4}, {6, 1, 1, 1, 2}, 17});
  p.push_back({"sliding_left_padding_batch", LayerType::Sliding, 4, 8, 3, 2, 2, 4, std::vector<int64_t>{0, 2, 5}, {7, 1, 1, 2, 1}, 18});
  p.push_back({"reset_and_restart", LayerType::Sliding, 4, 6, 1, 2, 1, 4, std::nullopt, {5, 1, 0, 3, 1, 1}, 19});
  p.push_back({"full_attention", LayerType::Full, 0, 10, 2, 2, 1, 4, std::nullopt, {4, 1, 1, 2, 1}, 20});
  return p;
}

}  // namespace kvc
