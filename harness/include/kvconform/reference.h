// The C++ reference of transformers' cache layers (cache_utils.py): same buffers, same branches,
// same returned tensors. Tensors are [batch, kv_heads, seq, head_dim], any floating dtype.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kvconform/behaviours.h"
#include "kvconform/mutants.h"
#include "kvconform/scenario.h"
#include "kvconform/types.h"

namespace kvc {

// What transformers raises where no LibTorch error stands for it, by its Python class: an
// AttributeError for a method the release's layer class lacks (or an attribute read on None), a
// TypeError from indexing None, transformers' own ValueError and RuntimeError. Golden replay
// records `type()` as the error's type (its wording is kvconform's, so only the type is compared).
class PythonError : public std::runtime_error {
 public:
  PythonError(std::string type, const std::string& message) : std::runtime_error(message), type_(std::move(type)) {}
  const std::string& type() const { return type_; }

 private:
  std::string type_;
};

struct KV {
  at::Tensor keys, values;
};

class CacheLayer : public LayerMethods {
 public:
  CacheLayer(LayerSpec spec, Behaviours behaviours);
  virtual ~CacheLayer() = default;
  CacheLayer(const CacheLayer&) = delete;
  CacheLayer& operator=(const CacheLayer&) = delete;

  const LayerSpec& spec() const { return spec_; }
  const Behaviours& behaviours() const { return behaviours_; }

  // Called before update() for the same step, as the mask builders do.
  virtual MaskSizes get_mask_sizes(int64_t query_length) const = 0;
  // The cache_position API's get_mask_sizes(cache_position): the pre-merge (4.56) layers read the
  // first position, every later layer only its length (#40907).
  virtual MaskSizes mask_sizes_for_positions(const std::vector<int64_t>& cache_position) const;

  // cache_position belongs to the cache_position API (explicit write positions for in-place
  // branches); without it the query_length API writes at the cumulative length and the
  // cache_position API falls back to arange(q) as Python does.
  // Throws std::invalid_argument on a zero-token update, shape/dtype mismatch or a batch/head/dim
  // change after initialisation; std::out_of_range on a position outside the buffer.
  virtual KV update(const at::Tensor& keys, const at::Tensor& values,
                    const std::optional<std::vector<int64_t>>& cache_position = std::nullopt) = 0;

  // The stored buffers; undefined tensors before the first update (lazy allocation).
  const at::Tensor& keys() const { return keys_; }
  const at::Tensor& values() const { return values_; }
  bool initialized() const { return keys_.defined(); }
  // get_seq_length: every token ever written (StaticLayer with static_seq_length nonzero_rows:
  // the rows with a non-zero value).
  virtual int64_t seq_length() const { return cumulative_; }
  int64_t cumulative_length() const { return cumulative_; }
  // A new sequence on this layer as if it were new (the StepDriver's reset steps, which every suite
  // runs): no rows, no counters.
  void clear();

  // The release's own layer methods (behaviours().layer_api, behaviours.h), as the fixtures' call
  // steps replay them; each raises what transformers raises (PythonError, std::invalid_argument
  // for a ValueError). Under LayerApi::Unmodelled each throws std::logic_error naming the release range.
  // reset: transformers' reset(), which zeroes a layer's rows and keeps them where the release does.
  void reset() override;
  void crop(int64_t argument) override;
  void activate_past_recording() override;
  // The attributes a caller reads: is_croppable (nullopt where the release has none) and
  // get_max_cache_shape() / get_max_length() (-1: no maximum).
  virtual std::optional<bool> is_croppable() const;
  virtual int64_t max_length() const = 0;
  bool is_compileable() const { return spec_.cache == CacheKind::Static; }
  // The layer's class in the release ("StaticSlidingWindowLayer"), as messages name it.
  const char* python_class() const;

 protected:
  // Validates the update and records batch/heads/head_dim/dtype on the first call.
  void check_update(const at::Tensor& keys, const at::Tensor& values, const std::optional<std::vector<int64_t>>& cache_position);

  // Static layers' in-place write (index_copy_) at cache_position or the cache API's default; a
  // position outside the buffer throws std::out_of_range before anything is written.
  void write_in_place(const at::Tensor& keys, const at::Tensor& values,
                      const std::optional<std::vector<int64_t>>& cache_position);

  // The layer API's generation, or std::logic_error where the reference does not model it.
  LayerApi layer_api() const;
  // crop(max_length) of the max_length releases' DynamicLayer on the stored rows (seq: what the
  // class's get_seq_length answers).
  void crop_rows_to(int64_t max_length, int64_t seq);
  // crop(tokens_to_remove) of the tokens_to_remove releases' DynamicLayer: a positive argument
  // raises (ValueError), 0 or a layer not initialised is left alone, else keys[..., :-n, :].
  void drop_rows(int64_t tokens_to_remove);

  LayerSpec spec_;
  Behaviours behaviours_;
  at::Tensor keys_, values_;
  int64_t cumulative_ = 0;
  // StaticLayer's tensor cumulative_length where a static sliding layer also keeps a Python int
  // (cumulative_): the in-place writes of the query_length releases land at it, and only the
  // in-place branch and crop move it.
  int64_t written_ = 0;
  bool record_past_ = false;         // activate_past_recording (dynamic sliding layers)
  std::vector<int64_t> init_shape_;  // batch, kv_heads, head_dim once initialised
};

// The layer's class in a release ("StaticSlidingWindowLayer", "SlidingWindowLayer", ...).
const char* python_class(const LayerSpec& spec, const Behaviours& behaviours);

// Behaviours{} is the newest release's; pass behaviours_for_release(X) for release X.
std::unique_ptr<CacheLayer> make_layer(const LayerSpec& spec, const Behaviours& behaviours = Behaviours{},
                                       Mutation mutation = Mutation::None);

// A cache as transformers builds it from config.layer_types: one layer per entry, sliding and
// chunked layers with `window`, full layers with max_cache_len (static) or unbounded (dynamic).
std::vector<std::unique_ptr<CacheLayer>> make_cache(CacheKind cache, const std::vector<LayerType>& layer_types, int64_t window,
                                                    int64_t max_cache_len, const Behaviours& behaviours = Behaviours{});

}  // namespace kvc
