// The C++ reference of transformers' cache layers (cache_utils.py): same buffers, same branches,
// same returned tensors. Tensors are [batch, kv_heads, seq, head_dim], any floating dtype.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <optional>
#include <vector>

#include "kvconform/behaviours.h"
#include "kvconform/mutants.h"
#include "kvconform/types.h"

namespace kvc {

struct KV {
  at::Tensor keys, values;
};

class CacheLayer {
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
  virtual void reset();

 protected:
  // Validates the update and records batch/heads/head_dim/dtype on the first call.
  void check_update(const at::Tensor& keys, const at::Tensor& values,
                    const std::optional<std::vector<int64_t>>& cache_position);

  // Static layers' in-place write (index_copy_) at cache_position or the cache API's default; a
  // position outside the buffer throws std::out_of_range before anything is written.
  void write_in_place(const at::Tensor& keys, const at::Tensor& values,
                      const std::optional<std::vector<int64_t>>& cache_position);

  LayerSpec spec_;
  Behaviours behaviours_;
  at::Tensor keys_, values_;
  int64_t cumulative_ = 0;
  std::vector<int64_t> init_shape_;  // batch, kv_heads, head_dim once initialised
};

// Behaviours{} is the newest release's; pass behaviours_for_release(X) for release X.
std::unique_ptr<CacheLayer> make_layer(const LayerSpec& spec, const Behaviours& behaviours = Behaviours{},
                                       Mutation mutation = Mutation::None);

// A cache as transformers builds it from config.layer_types: one layer per entry, sliding and
// chunked layers with `window`, full layers with max_cache_len (static) or unbounded (dynamic).
std::vector<std::unique_ptr<CacheLayer>> make_cache(CacheKind cache, const std::vector<LayerType>& layer_types,
                                                    int64_t window, int64_t max_cache_len,
                                                    const Behaviours& behaviours = Behaviours{});

}  // namespace kvc
