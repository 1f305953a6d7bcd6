// One Scenario: a cache configuration, its steps and its inputs. A case file (cases/*.json, loaded
// by cases.h), a built-in step sequence (builtin_scenarios) and a generated sequence (generators/)
// are all Scenarios, and every suite runs one through the same StepDriver (step_driver.h).
// No LibTorch here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kvconform/inputs.h"
#include "kvconform/types.h"

namespace kvc {

struct Step {
  int64_t tokens = 0;  // 0: reset (a new sequence starts); built-in and generated scenarios only
  std::optional<std::vector<int64_t>> cache_position;  // cache_position API only
  // false: a fill step (built-in numerics cases only): the layer is updated and the oracle fed, but
  // the kernel suites neither call kernels nor ask the oracle for it. Thousands of keys then cost a
  // few judged queries, not thousands.
  bool judged = true;
  bool is_reset() const { return tokens == 0; }
};

struct Scenario {
  std::string name, description, file;
  std::vector<std::string> tags;
  CacheKind cache = CacheKind::Static;
  std::vector<LayerType> layer_types;
  int64_t window = 0, max_cache_len = 0;
  int64_t batch = 1, heads = 1, kv_heads = 1, head_dim = 1;
  DType dtype = DType::Float32;
  LeftPadding left_padding;
  std::vector<Step> steps;
  // inputs: the generator (seed) or explicit per-step flat lists; explicit q may be absent.
  std::optional<uint64_t> seed;
  std::vector<std::vector<double>> explicit_q, explicit_k, explicit_v;
  // The generator's distribution (inputs.h); anything but Mix64 is a built-in numerics case.
  inputs::Distribution distribution = inputs::Distribution::Mix64;
  std::vector<std::string> releases;  // transformers releases this case applies to; empty = all
  std::string sha256;                 // of the file's bytes, as the fixtures record it

  LayerSpec layer_spec(size_t layer) const;
  int64_t total_tokens() const;
  bool applies_to(const std::string& transformers_version) const;
  // Row-major [batch, heads or kv_heads, tokens, head_dim] inputs of one step for one layer: the
  // explicit lists, or the generator over the tokens fed since the last reset.
  std::vector<double> step_inputs(inputs::TensorId tensor, size_t layer, size_t step) const;
  // "static,sliding_attention+full_attention,W=4,L=8,steps=3"
  std::string params() const;
};

// One layer of `type` (dtype float32, judged steps of `steps` tokens each): the built-in sequences
// and the plugin campaign's random cases are built with it.
Scenario one_layer(const char* name, LayerType type, int64_t W, int64_t L, int64_t B, int64_t H, int64_t Hkv, int64_t D,
                   LeftPadding padding, std::vector<int64_t> steps, uint64_t seed, CacheKind cache);

// Built-in step sequences that reach every branch of the cache layers: decode across the window
// boundary, a prefill longer than the window, multi-token updates once full, wrap-around several
// times, chunk boundaries, left padding, GQA and resets. One layer each, with `cache`; used by the
// backend suite and the plugin checks beside the random campaigns.
std::vector<Scenario> builtin_scenarios(CacheKind cache);

// Kernel numerics cases (docs/backends.md, "Numerics cases"): thousands of keys, normal-distributed
// and large-magnitude inputs, head_dim 256. Each starts with an unjudged fill step and then judges a
// few decode and short extend steps over the long cache. One layer each, with `cache`; run by the
// backend suite and the plugin / --backend-cmd kernel checks (not the cache checks).
std::vector<Scenario> numeric_scenarios(CacheKind cache);

}  // namespace kvc
