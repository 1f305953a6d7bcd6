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

// The layer methods a caller has besides update and get_mask_sizes (cache_utils.py's
// CacheLayerMixin and its layers), as the reference layers and any other layer that takes a call
// step implement them. Each throws what transformers raises there (reference.h, PythonError).
class LayerMethods {
 public:
  virtual ~LayerMethods() = default;
  virtual void reset() = 0;
  virtual void crop(int64_t argument) = 0;
  virtual void activate_past_recording() = 0;
};

// One kind of call step: a method of the layer other than update, as case files and fixtures spell
// it ({"call": "crop", "argument": -2}), the way it is made on a layer, and what it does to the
// step's bookkeeping of positions. A new kind is one more object in layer_methods(), nothing else
// switches on it.
struct LayerMethod {
  const char* name;     // transformers' method name: "reset", "crop", "activate_past_recording"
  bool takes_argument;  // crop's max_length / tokens_to_remove
  void (*call)(LayerMethods& layer, int64_t argument);
  // The positions the case counts after the call, from those before it: reset starts a new
  // sequence (0), crop(-n) drops the last n (not below 0), crop(0) none (tokens_to_remove's
  // meaning), crop(n > 0) keeps the first n (max_length's meaning; the releases that raise for it
  // leave the layers as they were, and the case still counts what it said).
  int64_t (*positions_after)(int64_t seen, int64_t argument);
};
const std::vector<LayerMethod>& layer_methods();
// Throws std::invalid_argument naming the method and the accepted names.
const LayerMethod& layer_method(const std::string& name);

struct LayerCall {
  const LayerMethod* method = nullptr;
  int64_t argument = 0;      // takes_argument only
  bool resets() const;       // a reset: a new sequence starts (inputs, oracle and positions from 0)
  std::string show() const;  // "crop(-2)", "reset()"
};

struct Step {
  // 0: a reset (a new sequence starts; built-in and generated scenarios) or a call step
  int64_t tokens = 0;
  std::optional<std::vector<int64_t>> cache_position;  // cache_position API only
  // false: a fill step (built-in numerics cases only): the layer is updated and the oracle fed, but
  // the kernel suites neither call kernels nor ask the oracle for it. Thousands of keys then cost a
  // few judged queries, not thousands.
  bool judged = true;
  // A call of another layer method instead of an update (case files: {"call": ..., "argument": ...}).
  std::optional<LayerCall> call = std::nullopt;
  bool is_reset() const { return tokens == 0 && (!call || call->resets()); }
  bool is_call() const { return call.has_value(); }
};

// An and_mask / or_mask of a case's mask_builder_call: a mask function of the builders' (query,
// key) positions from a small named vocabulary (cases/README.md, Mask builder calls).
struct NamedMaskFunction {
  enum class Kind { Prefix, SameDocument, NotAFunction };
  Kind kind = Kind::Prefix;
  int64_t length = 0;            // Prefix: keys below it are seen by every query
  std::vector<int64_t> lengths;  // SameDocument: documents of these lengths, then one more
  // Written per element (a lookup table[q][kv]): only the vmap expansion evaluates it; the same mask.
  bool per_element = false;
  bool operator()(int64_t q, int64_t k) const;
};

// How golden/dump.py calls the release's own mask builders for a case (its `mask_builder_call`),
// beyond a model's usual call with the cache and the 2D mask; golden replay's builder records follow it.
struct MaskBuilderCall {
  bool cache = true;                      // false: the builders get no cache
  std::vector<int64_t> packed_documents;  // position_ids restarting after each of these lengths
  std::optional<int64_t> layer_idx;
  std::optional<NamedMaskFunction> and_mask, or_mask;
  bool attention_mask_4d = false;  // the 2D mask expanded to a 4D one, passed through
  bool flash = false;              // also called under flash_attention_2 (flash_attention_mask)
  // also called under an attention implementation the mask interface does not know (no mask)
  bool unregistered_attention = false;
  // block_sequence_ids, one row per batch row (5.13 on): tokens of a block >= 0 see each other
  std::vector<std::vector<int64_t>> block_sequence_ids;
  std::vector<LayerType> absent_layer_types;  // builders of layer types the cache holds none of
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
  std::optional<MaskBuilderCall> mask_builder_call;
  std::string sha256;  // of the file's bytes, as the fixtures record it

  LayerSpec layer_spec(size_t layer) const;
  int64_t total_tokens() const;
  bool has_calls() const;  // a step calls a layer method other than update
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
