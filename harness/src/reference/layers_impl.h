// The reference layer classes, visible to the mutants that subclass them. Not a public header.
#pragma once

#include <algorithm>

#include "kvconform/reference.h"

namespace kvc::detail {

// StaticLayer: a max_cache_len buffer written in place; returns the whole buffer.
class StaticFullLayer : public CacheLayer {
 public:
  using CacheLayer::CacheLayer;
  MaskSizes get_mask_sizes(int64_t query_length) const override;
  KV update(const at::Tensor& k, const at::Tensor& v, const std::optional<std::vector<int64_t>>& pos) override;
  int64_t seq_length() const override;
  int64_t max_length() const override { return spec_.max_cache_len; }
};

// DynamicLayer: concatenates; returns everything.
class DynamicFullLayer : public CacheLayer {
 public:
  using CacheLayer::CacheLayer;
  MaskSizes get_mask_sizes(int64_t query_length) const override;
  KV update(const at::Tensor& k, const at::Tensor& v, const std::optional<std::vector<int64_t>>& pos) override;
  // The rows it holds (get_seq_length: keys.shape[-2]), which after a max_length release's reset
  // are its zeroed rows.
  int64_t seq_length() const override { return keys_.defined() ? keys_.size(2) : 0; }
  void reset() override;
  void crop(int64_t argument) override;
  int64_t max_length() const override { return -1; }
};

// StaticSlidingWindowLayer (4.57+), serving sliding and chunked attention alike.
class StaticSlidingLayer : public CacheLayer {
 public:
  using CacheLayer::CacheLayer;
  MaskSizes get_mask_sizes(int64_t query_length) const override;
  KV update(const at::Tensor& k, const at::Tensor& v, const std::optional<std::vector<int64_t>>& pos) override;
  // Only while crop can undo an update: a layer no larger than its window (the configured
  // max_cache_len, before the capacity's min).
  std::optional<bool> is_croppable() const override;
  int64_t max_length() const override { return capacity(); }

 protected:
  // get_mask_sizes as if `old` tokens had been written (the cumulative length; 4.56: the first position).
  MaskSizes sizes_after(int64_t old, int64_t query_length) const;
  // The named steps of update(), virtual so that a mutant can get exactly one of them wrong.
  virtual int64_t capacity() const;
  // Rows of the full buffer that stay visible to a multi-token update (branch 2): all but the oldest.
  virtual at::Tensor kept_when_full(const at::Tensor& buffer) const;
  // Rows written back after branches 2 and 3: the last `capacity` of the concatenation.
  virtual at::Tensor rows_to_store(const at::Tensor& full, bool becoming_full) const;
};

// DynamicSlidingWindowLayer: stores the last W - 1 tokens, returns cat(stored, new).
class DynamicSlidingLayer : public CacheLayer {
 public:
  using CacheLayer::CacheLayer;
  MaskSizes get_mask_sizes(int64_t query_length) const override;
  // pre_merge: kv_offset from the first cache position (4.56), kv_length from the cumulative length.
  MaskSizes mask_sizes_for_positions(const std::vector<int64_t>& cache_position) const override;
  KV update(const at::Tensor& k, const at::Tensor& v, const std::optional<std::vector<int64_t>>& pos) override;
  void reset() override;
  void crop(int64_t argument) override;
  void activate_past_recording() override;
  int64_t max_length() const override { return spec_.window; }

 protected:
  // How many trailing rows to keep, with Python slice semantics: keys[:, :, -n:] (so 0 keeps all).
  virtual int64_t kept_rows() const { return spec_.window - 1; }
  // The rows that stay stored after a crop past the window with past recording: keys[:, :,
  // -W + 1 - n : -n] (n = tokens removed, 0: keys[:, :, -W + 1:]).
  virtual at::Tensor kept_after_crop(const at::Tensor& rows, int64_t removed) const;
};

// 4.56's SlidingWindowLayer (sliding_layer pre_merge, sliding attention), faithful to its branches:
// more tokens than the capacity store their last C rows and return only the new tokens; once full,
// one token rolls the buffer and several raise (Python's RuntimeError from the index assignment);
// otherwise an in-place write at cache_position (raising past the buffer). Mask sizes:
// kv_offset = max(first_position - C + 1, 0), kv_length = max(q, C).
class PreMergeSlidingLayer : public CacheLayer {
 public:
  using CacheLayer::CacheLayer;
  MaskSizes get_mask_sizes(int64_t query_length) const override;
  MaskSizes mask_sizes_for_positions(const std::vector<int64_t>& cache_position) const override;
  KV update(const at::Tensor& k, const at::Tensor& v, const std::optional<std::vector<int64_t>>& pos) override;
  int64_t max_length() const override { return capacity(); }

 private:
  int64_t capacity() const { return std::min(spec_.window, spec_.max_cache_len); }
};

// 4.56's ChunkedSlidingLayer (sliding_layer pre_merge, chunked attention): the update of the later
// merged layer; its mask sizes count from the first cache position instead of the cumulative length.
class PreMergeChunkedLayer : public StaticSlidingLayer {
 public:
  using StaticSlidingLayer::StaticSlidingLayer;
  MaskSizes mask_sizes_for_positions(const std::vector<int64_t>& cache_position) const override;
};

// x[:, :, -n:] with Python's semantics for n == 0 (everything) and n > len (everything).
at::Tensor python_tail(const at::Tensor& x, int64_t n);
// x[:, :, start:stop] with Python's slice semantics (negative bounds count from the end, nullopt
// is the open end, bounds outside the rows clamp).
at::Tensor python_slice(const at::Tensor& x, std::optional<int64_t> start, std::optional<int64_t> stop);

}  // namespace kvc::detail
