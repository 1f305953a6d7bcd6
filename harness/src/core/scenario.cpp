#include "kvconform/scenario.h"

#include <algorithm>

namespace kvc {

LayerSpec Scenario::layer_spec(size_t layer) const { return {cache, layer_types.at(layer), window, max_cache_len}; }

int64_t Scenario::total_tokens() const {
  int64_t n = 0;
  for (const Step& s : steps) n += s.tokens;
  return n;
}

bool Scenario::applies_to(const std::string& version) const {
  return profiles.empty() || std::find(profiles.begin(), profiles.end(), version) != profiles.end();
}

std::vector<double> Scenario::step_inputs(inputs::TensorId tensor, size_t layer, size_t step) const {
  const std::vector<std::vector<double>>& given =
      tensor == inputs::kQuery ? explicit_q : tensor == inputs::kKey ? explicit_k : explicit_v;
  if (!given.empty()) return given.at(step);
  int64_t seen = 0;  // a reset starts the positions again, so a restarted sequence repeats its inputs
  for (size_t s = 0; s < step; ++s) seen = steps[s].is_reset() ? 0 : seen + steps[s].tokens;
  // An explicit case without q takes its queries from the generator with seed 0.
  return inputs::block(seed.value_or(0), tensor, layer, batch, tensor == inputs::kQuery ? heads : kv_heads, seen,
                       steps.at(step).tokens, head_dim);
}

std::string Scenario::params() const {
  std::string layers;
  for (LayerType t : layer_types) layers += std::string(layers.empty() ? "" : "+") + to_string(t);
  return std::string(to_string(cache)) + "," + layers + (window ? ",W=" + std::to_string(window) : "") +
         (max_cache_len ? ",L=" + std::to_string(max_cache_len) : "") + ",steps=" + std::to_string(steps.size());
}

namespace {
Scenario builtin(const char* name, LayerType type, int64_t W, int64_t L, int64_t B, int64_t H, int64_t Hkv, int64_t D,
                 LeftPadding padding, std::vector<int64_t> steps, uint64_t seed, CacheKind cache) {
  Scenario s;
  s.name = name;
  s.cache = cache;
  s.layer_types = {type};
  s.window = W;
  s.max_cache_len = L;
  s.batch = B, s.heads = H, s.kv_heads = Hkv, s.head_dim = D;
  s.left_padding = std::move(padding);
  for (int64_t q : steps) s.steps.push_back({q, std::nullopt});
  s.seed = seed;
  return s;
}
}  // namespace

std::vector<Scenario> builtin_scenarios(CacheKind c) {
  const auto none = std::nullopt;
  using V = std::vector<int64_t>;
  const LayerType S = LayerType::Sliding, C = LayerType::Chunked, F = LayerType::Full;
  // name, type, W, L, B, H, Hkv, D, padding, steps (0 = reset), seed
  return {
      builtin("decode_across_window", S, 4, 8, 1, 1, 1, 4, none, {2, 1, 1, 1, 1, 1, 1, 1, 1}, 11, c),
      builtin("prefill_longer_than_window", S, 4, 8, 1, 2, 1, 8, none, {6, 1, 1, 3}, 12, c),
      builtin("prefill_equal_window_then_extend", S, 5, 5, 2, 4, 2, 4, none, {5, 1, 2, 1, 5, 1}, 13, c),
      builtin("wrap_around_three_times", S, 3, 6, 1, 2, 2, 4, none, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 14, c),
      builtin("cache_shorter_than_window", S, 6, 4, 1, 1, 1, 4, none, {2, 1, 1}, 15, c),
      builtin("chunked_across_chunks", C, 3, 6, 1, 2, 1, 4, none, {4, 1, 1, 1, 2, 1, 1}, 16, c),
      builtin("chunked_left_padding", C, 3, 9, 2, 2, 1, 4, V{0, 4}, {6, 1, 1, 1, 2}, 17, c),
      builtin("sliding_left_padding_batch", S, 4, 8, 3, 2, 2, 4, V{0, 2, 5}, {7, 1, 1, 2, 1}, 18, c),
      builtin("reset_and_restart", S, 4, 6, 1, 2, 1, 4, none, {5, 1, 0, 3, 1, 1}, 19, c),
      builtin("full_attention", F, 0, 10, 2, 2, 1, 4, none, {4, 1, 1, 2, 1}, 20, c),
  };
}

}  // namespace kvc
