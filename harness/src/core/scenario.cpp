#include "kvconform/scenario.h"

#include <algorithm>
#include <stdexcept>

namespace kvc {

const std::vector<LayerMethod>& layer_methods() {
  static const std::vector<LayerMethod> methods = {
      {"reset", false, [](LayerMethods& l, int64_t) { l.reset(); }, [](int64_t, int64_t) -> int64_t { return 0; }},
      {"crop", true, [](LayerMethods& l, int64_t n) { l.crop(n); },
       [](int64_t seen, int64_t n) { return n < 0    ? std::max<int64_t>(seen + n, 0)
                                            : n == 0 ? seen
                                                     : std::min(seen, n); }},
      {"activate_past_recording", false, [](LayerMethods& l, int64_t) { l.activate_past_recording(); },
       [](int64_t seen, int64_t) { return seen; }},
  };
  return methods;
}

const LayerMethod& layer_method(const std::string& name) {
  std::string names;
  for (const LayerMethod& m : layer_methods()) {
    if (name == m.name) return m;
    names += std::string(names.empty() ? "" : ", ") + m.name;
  }
  throw std::invalid_argument("unknown layer method '" + name + "' (expected one of: " + names + ")");
}

bool LayerCall::resets() const { return method == &layer_methods().front(); }

std::string LayerCall::show() const {
  return std::string(method->name) + "(" + (method->takes_argument ? std::to_string(argument) : "") + ")";
}

bool Scenario::has_calls() const {
  return std::any_of(steps.begin(), steps.end(), [](const Step& s) { return s.is_call(); });
}

LayerSpec Scenario::layer_spec(size_t layer) const { return {cache, layer_types.at(layer), window, max_cache_len}; }

int64_t Scenario::total_tokens() const {
  int64_t n = 0;
  for (const Step& s : steps) n += s.tokens;
  return n;
}

bool Scenario::applies_to(const std::string& version) const {
  return releases.empty() || std::find(releases.begin(), releases.end(), version) != releases.end();
}

std::vector<double> Scenario::step_inputs(inputs::TensorId tensor, size_t layer, size_t step) const {
  const std::vector<std::vector<double>>& given = tensor == inputs::kQuery ? explicit_q
                                                  : tensor == inputs::kKey ? explicit_k
                                                                           : explicit_v;
  if (!given.empty()) return given.at(step);
  int64_t seen = 0;  // a reset starts the positions again, so a restarted sequence repeats its inputs
  // A crop does not count back: the tokens fed after it are new tokens with new values, so that a
  // layer which kept a cropped row shows it.
  for (size_t s = 0; s < step; ++s) seen = steps[s].is_reset() ? 0 : seen + steps[s].tokens;
  // An explicit case without q takes its queries from the generator with seed 0.
  return inputs::block(seed.value_or(0), tensor, layer, batch, tensor == inputs::kQuery ? heads : kv_heads, seen,
                       steps.at(step).tokens, head_dim, distribution);
}

std::string Scenario::params() const {
  std::string layers;
  for (LayerType t : layer_types) layers += std::string(layers.empty() ? "" : "+") + to_string(t);
  return std::string(to_string(cache)) + "," + layers + (window ? ",W=" + std::to_string(window) : "") +
         (max_cache_len ? ",L=" + std::to_string(max_cache_len) : "") + ",steps=" + std::to_string(steps.size());
}

Scenario one_layer(const char* name, LayerType type, int64_t W, int64_t L, int64_t B, int64_t H, int64_t Hkv, int64_t D,
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

std::vector<Scenario> builtin_scenarios(CacheKind c) {
  const auto none = std::nullopt;
  using V = std::vector<int64_t>;
  const LayerType S = LayerType::Sliding, C = LayerType::Chunked, F = LayerType::Full;
  // name, type, W, L, B, H, Hkv, D, padding, steps (0 = reset), seed
  return {
      one_layer("decode_across_window", S, 4, 8, 1, 1, 1, 4, none, {2, 1, 1, 1, 1, 1, 1, 1, 1}, 11, c),
      one_layer("prefill_longer_than_window", S, 4, 8, 1, 2, 1, 8, none, {6, 1, 1, 3}, 12, c),
      one_layer("prefill_equal_window_then_extend", S, 5, 5, 2, 4, 2, 4, none, {5, 1, 2, 1, 5, 1}, 13, c),
      one_layer("wrap_around_three_times", S, 3, 6, 1, 2, 2, 4, none, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 14, c),
      one_layer("cache_shorter_than_window", S, 6, 4, 1, 1, 1, 4, none, {2, 1, 1}, 15, c),
      one_layer("chunked_across_chunks", C, 3, 6, 1, 2, 1, 4, none, {4, 1, 1, 1, 2, 1, 1}, 16, c),
      one_layer("chunked_left_padding", C, 3, 9, 2, 2, 1, 4, V{0, 4}, {6, 1, 1, 1, 2}, 17, c),
      one_layer("sliding_left_padding_batch", S, 4, 8, 3, 2, 2, 4, V{0, 2, 5}, {7, 1, 1, 2, 1}, 18, c),
      one_layer("reset_and_restart", S, 4, 6, 1, 2, 1, 4, none, {5, 1, 0, 3, 1, 1}, 19, c),
      one_layer("full_attention", F, 0, 10, 2, 2, 1, 4, none, {4, 1, 1, 2, 1}, 20, c),
  };
}

std::vector<Scenario> numeric_scenarios(CacheKind c) {
  using V = std::vector<int64_t>;
  using inputs::Distribution;
  const LayerType S = LayerType::Sliding, C = LayerType::Chunked, F = LayerType::Full;
  // name, type, W, L, B, H, Hkv, D, padding, fill tokens (unjudged), judged steps, seed, distribution
  auto numeric = [c](const char* name, LayerType type, int64_t W, int64_t L, int64_t B, int64_t H, int64_t Hkv, int64_t D,
                     LeftPadding padding, int64_t fill, V judged, uint64_t seed, Distribution dist) {
    Scenario s = one_layer(name, type, W, L, B, H, Hkv, D, std::move(padding), judged, seed, c);
    if (fill > 0) s.steps.insert(s.steps.begin(), Step{fill, std::nullopt, false});
    s.distribution = dist;
    return s;
  };
  const auto none = std::nullopt;
  return {
      // 4600 tokens through a 4096-token window: each judged query sees 4096 keys. A softmax sum or
      // an accumulator kept in 16 bits stops growing long before that (float16 spacing is 2 at 2048).
      numeric("long_keys_4096", S, 4096, 4096, 1, 2, 1, 64, none, 4600, {1, 2}, 31, Distribution::Normal),
      // A full layer: every query sees every one of ~2050 keys.
      numeric("long_keys_full_2048", F, 0, 2052, 1, 2, 1, 64, none, 2048, {1, 2}, 32, Distribution::Normal),
      // head_dim 256: long dot products over a 512-token window, GQA 4:2.
      numeric("head_dim_256", S, 512, 512, 1, 4, 2, 256, none, 600, {1, 2}, 33, Distribution::Normal),
      // Normal inputs on chunk boundaries with left padding: chunks of 512, batch 2, GQA 4:2.
      numeric("normal_inputs_chunked_512", C, 512, 1024, 2, 4, 2, 64, V{0, 37}, 700, {1, 2}, 34, Distribution::Normal),
      // Logits in the hundreds (standard deviation 256) over a 256-token window: exp without the
      // running max overflows every dtype.
      numeric("large_logits", S, 256, 256, 1, 2, 1, 64, none, 300, {1, 3}, 35, Distribution::LargeLogits),
  };
}

// document_of in golden/dump.py: the document a position belongs to.
bool NamedMaskFunction::operator()(int64_t q, int64_t k) const {
  if (kind == Kind::Prefix) return k < length;
  auto document = [&](int64_t x) {
    int64_t d = 0, end = 0;
    for (int64_t n : lengths) d += x >= (end += n);
    return d;
  };
  return document(q) == document(k);
}

}  // namespace kvc
