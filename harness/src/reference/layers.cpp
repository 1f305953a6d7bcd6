#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "kvconform/tensors.h"
#include "layers_impl.h"

namespace kvc {

namespace {
std::string shape_str(at::IntArrayRef s) {
  std::ostringstream os;
  os << s;
  return os.str();
}
at::Tensor index_of(const std::vector<int64_t>& pos) {
  return at::tensor(at::ArrayRef<int64_t>(pos), at::TensorOptions().dtype(at::kLong));
}
}  // namespace

CacheLayer::CacheLayer(LayerSpec spec, Behaviours behaviours) : spec_(spec), behaviours_(behaviours) { spec_.validate(); }

MaskSizes CacheLayer::mask_sizes_for_positions(const std::vector<int64_t>& cache_position) const {
  return get_mask_sizes(static_cast<int64_t>(cache_position.size()));
}

void CacheLayer::clear() {
  keys_ = at::Tensor();
  values_ = at::Tensor();
  cumulative_ = 0;
  written_ = 0;
  record_past_ = false;
  init_shape_.clear();
}

const char* python_class(const LayerSpec& spec, const Behaviours& behaviours) {
  if (spec.cache == CacheKind::Dynamic) return spec.is_sliding() ? "DynamicSlidingWindowLayer" : "DynamicLayer";
  if (!spec.is_sliding()) return "StaticLayer";
  if (behaviours.sliding_layer == SlidingLayer::PreMerge)
    return spec.type == LayerType::Chunked ? "ChunkedSlidingLayer" : "SlidingWindowLayer";
  return "StaticSlidingWindowLayer";
}

const char* CacheLayer::python_class() const { return kvc::python_class(spec_, behaviours_); }

LayerApi CacheLayer::layer_api() const {
  if (behaviours_.layer_api == LayerApi::Unmodelled)
    throw std::logic_error(spec_.describe() +
                           ": kvconform does not model the layer API (reset, crop, activate_past_recording, "
                           "is_croppable) of transformers 5.14 to 5.23, whose forms differ release by release "
                           "(behaviours.h, LayerApi)");
  return behaviours_.layer_api;
}

// CacheLayerMixin.reset: the rows are zeroed in place and kept, the counters start again.
void CacheLayer::reset() {
  layer_api();
  if (keys_.defined()) {
    keys_.zero_();
    values_.zero_();
  }
  cumulative_ = 0;
  written_ = 0;
}

// The static layers: none has crop under max_length; StaticLayer.crop lowers cumulative_length
// (and StaticSlidingWindowLayer its Python int too) and leaves the rows to be overwritten.
void CacheLayer::crop(int64_t n) {
  if (layer_api() == LayerApi::MaxLength)
    throw PythonError("AttributeError", std::string("'") + python_class() + "' object has no attribute 'crop'");
  if (n > 0)
    throw PythonError("RuntimeError",
                      "Static layers can only be cropped by passing a negative int, to specify how many tokens to remove");
  written_ -= -n;
  cumulative_ -= -n;
}

void CacheLayer::activate_past_recording() {
  layer_api();
  throw PythonError("AttributeError", std::string("'") + python_class() + "' object has no attribute 'activate_past_recording'");
}

std::optional<bool> CacheLayer::is_croppable() const {
  if (layer_api() == LayerApi::MaxLength) return std::nullopt;
  return true;  // DynamicLayer and StaticLayer
}

void CacheLayer::drop_rows(int64_t n) {
  if (n > 0)
    throw std::invalid_argument("Calling `crop` with a positive value (`" + std::to_string(n) +
                                "`) is not supported. Please use a negative integer to remove that number of tokens "
                                "from the cache instead.");
  if (n == 0 || !keys_.defined()) return;  // nothing to crop, or a layer not initialised
  keys_ = detail::python_slice(keys_, std::nullopt, n);
  values_ = detail::python_slice(values_, std::nullopt, n);
}

void CacheLayer::crop_rows_to(int64_t max_length, int64_t seq) {
  if (seq <= max_length) return;
  if (!keys_.defined()) throw PythonError("TypeError", "'NoneType' object is not subscriptable");
  keys_ = detail::python_slice(keys_, std::nullopt, max_length);
  values_ = detail::python_slice(values_, std::nullopt, max_length);
}

void CacheLayer::check_update(const at::Tensor& k, const at::Tensor& v, const std::optional<std::vector<int64_t>>& pos) {
  const std::string who = spec_.describe() + ".update: ";
  if (!k.defined() || !v.defined()) throw std::invalid_argument(who + "keys and values must be defined");
  if (k.dim() != 4 || v.dim() != 4)
    throw std::invalid_argument(who + "expected [batch, kv_heads, seq, head_dim], got keys " + shape_str(k.sizes()) + " values " +
                                shape_str(v.sizes()));
  if (k.sizes() != v.sizes())
    throw std::invalid_argument(who + "keys " + shape_str(k.sizes()) + " and values " + shape_str(v.sizes()) +
                                " differ in shape");
  if (k.scalar_type() != v.scalar_type())
    throw std::invalid_argument(who + "keys are " + std::string(c10::toString(k.scalar_type())) + " but values are " +
                                c10::toString(v.scalar_type()));
  dtype_of(k.scalar_type());  // rejects non-floating dtypes with a message
  if (k.size(2) == 0) throw std::invalid_argument(who + "zero-token update (Python accepts it silently; kvconform rejects it)");
  if (pos && static_cast<int64_t>(pos->size()) != k.size(2))
    throw std::invalid_argument(who + "cache_position has " + std::to_string(pos->size()) + " entries for " +
                                std::to_string(k.size(2)) + " tokens");
  if (!keys_.defined()) {
    init_shape_ = {k.size(0), k.size(1), k.size(3)};
    return;
  }
  const char* names[] = {"batch", "kv_heads", "head_dim"};
  const int64_t got[] = {k.size(0), k.size(1), k.size(3)};
  for (int i = 0; i < 3; ++i)
    if (got[i] != init_shape_[i])
      throw std::invalid_argument(who + names[i] + " changed after initialisation: " + std::to_string(init_shape_[i]) + " -> " +
                                  std::to_string(got[i]));
  if (k.scalar_type() != keys_.scalar_type())
    throw std::invalid_argument(who + "dtype changed after initialisation: " + std::string(c10::toString(keys_.scalar_type())) +
                                " -> " + c10::toString(k.scalar_type()));
}

void CacheLayer::write_in_place(const at::Tensor& k, const at::Tensor& v, const std::optional<std::vector<int64_t>>& pos) {
  const int64_t q = k.size(2), rows = keys_.size(2);
  std::vector<int64_t> where;
  if (pos) where = *pos;
  else  // the cache_position API falls back to arange(q); the query_length API writes at cumulative_length
    for (int64_t i = 0; i < q; ++i) where.push_back(behaviours_.cache_api == CacheApi::CachePosition ? i : written_ + i);
  for (int64_t p : where)
    if (p < 0 || p >= rows)
      throw std::out_of_range(spec_.describe() + ".update: position " + std::to_string(p) + " is outside the buffer of " +
                              std::to_string(rows) + " rows (Python raises an IndexError from index_copy_)");
  const at::Tensor index = index_of(where);
  keys_.index_copy_(2, index, k);
  values_.index_copy_(2, index, v);
}

namespace detail {

at::Tensor python_tail(const at::Tensor& x, int64_t n) {
  const int64_t len = x.size(2);
  const int64_t start = (n <= 0 || n >= len) ? 0 : len - n;
  return x.slice(2, start, len);
}

at::Tensor python_slice(const at::Tensor& x, std::optional<int64_t> start, std::optional<int64_t> stop) {
  const int64_t len = x.size(2);
  auto bound = [len](std::optional<int64_t> b, int64_t open) {
    if (!b) return open;
    const int64_t v = *b < 0 ? *b + len : *b;
    return std::clamp<int64_t>(v, 0, len);
  };
  const int64_t from = bound(start, 0), to = bound(stop, len);
  return x.slice(2, from, std::max(from, to));
}

// ---- StaticLayer -------------------------------------------------------------------------
MaskSizes StaticFullLayer::get_mask_sizes(int64_t) const { return {spec_.max_cache_len, 0}; }

int64_t StaticFullLayer::seq_length() const {
  if (!keys_.defined()) return 0;  // get_seq_length of a layer not yet initialised (a crop may have moved its count)
  if (behaviours_.static_seq_length == StaticSeqLength::Cumulative) return cumulative_;
  // Rows with any non-zero value in batch 0, head 0.
  return keys_.select(0, 0).select(0, 0).ne(0).any(-1).sum().item<int64_t>();
}

KV StaticFullLayer::update(const at::Tensor& k, const at::Tensor& v, const std::optional<std::vector<int64_t>>& pos) {
  check_update(k, v, pos);
  const int64_t q = k.size(2);
  if (!keys_.defined()) {
    keys_ = at::zeros({k.size(0), k.size(1), spec_.max_cache_len, k.size(3)}, k.options());
    values_ = at::zeros_like(keys_);
  }
  write_in_place(k, v, pos);
  cumulative_ += q;
  written_ += q;
  return {keys_, values_};
}

// ---- DynamicLayer ------------------------------------------------------------------------
MaskSizes DynamicFullLayer::get_mask_sizes(int64_t q) const { return {seq_length() + q, 0}; }

// tokens_to_remove: DynamicLayer.reset drops the rows (the next update initialises again).
void DynamicFullLayer::reset() {
  if (layer_api() == LayerApi::MaxLength) return CacheLayer::reset();
  clear();
}

void DynamicFullLayer::crop(int64_t n) {
  if (layer_api() == LayerApi::MaxLength) return crop_rows_to(n < 0 ? seq_length() + n : n, seq_length());
  drop_rows(n);
}

KV DynamicFullLayer::update(const at::Tensor& k, const at::Tensor& v, const std::optional<std::vector<int64_t>>& pos) {
  check_update(k, v, pos);
  keys_ = keys_.defined() ? at::cat({keys_, k}, 2) : k.clone();
  values_ = values_.defined() ? at::cat({values_, v}, 2) : v.clone();
  cumulative_ += k.size(2);
  return {keys_, values_};
}

// ---- StaticSlidingWindowLayer ------------------------------------------------------------
int64_t StaticSlidingLayer::capacity() const { return std::min(spec_.window, spec_.max_cache_len); }

at::Tensor StaticSlidingLayer::kept_when_full(const at::Tensor& buffer) const { return buffer.slice(2, 1); }

at::Tensor StaticSlidingLayer::rows_to_store(const at::Tensor& full, bool) const {
  return full.slice(2, full.size(2) - capacity());
}

MaskSizes StaticSlidingLayer::get_mask_sizes(int64_t q) const { return sizes_after(cumulative_, q); }

MaskSizes StaticSlidingLayer::sizes_after(int64_t old, int64_t q) const {
  // Python uses the capacity (min(W, L)) as the window here, not config.sliding_window.
  const int64_t c = capacity();
  const int64_t offset = std::max<int64_t>(old - c + 1, 0);
  if (old >= c) return {c + q - 1, offset};
  if (old + q > c) return {old + q, offset};
  return {c, offset};
}

KV StaticSlidingLayer::update(const at::Tensor& k, const at::Tensor& v, const std::optional<std::vector<int64_t>>& pos) {
  check_update(k, v, pos);
  const int64_t c = capacity(), q = k.size(2), old = cumulative_;
  if (!keys_.defined()) {
    keys_ = at::zeros({k.size(0), k.size(1), c, k.size(3)}, k.options());
    values_ = at::zeros_like(keys_);
  }
  at::Tensor full_k, full_v;
  if (old >= c && q == 1) {  // 1: roll left by one, new row last
    cumulative_ += q;
    keys_.copy_(at::cat({keys_.slice(2, 1), k}, 2));
    values_.copy_(at::cat({values_.slice(2, 1), v}, 2));
    return {keys_, values_};
  }
  if (old >= c) {  // 2: already full, several tokens
    full_k = at::cat({kept_when_full(keys_), k}, 2);
    full_v = at::cat({kept_when_full(values_), v}, 2);
  } else if (old + q > c) {  // 3: becoming full (keys[:, :, :old], which a crop below 0 makes count from the end)
    full_k = old == 0 ? k : at::cat({python_slice(keys_, std::nullopt, old), k}, 2);
    full_v = old == 0 ? v : at::cat({python_slice(values_, std::nullopt, old), v}, 2);
  } else {  // 4: in place at the given positions (the query_length API: at the tensor count)
    write_in_place(k, v, pos);
    cumulative_ += q;
    written_ += q;
    return {keys_, values_};
  }
  cumulative_ += q;
  const bool becoming_full = old < c;
  keys_.copy_(rows_to_store(full_k, becoming_full));
  values_.copy_(rows_to_store(full_v, becoming_full));
  return {full_k, full_v};
}

std::optional<bool> StaticSlidingLayer::is_croppable() const {
  if (layer_api() == LayerApi::MaxLength) return std::nullopt;
  return spec_.max_cache_len <= spec_.window;
}

// ---- DynamicSlidingWindowLayer -----------------------------------------------------------
void DynamicSlidingLayer::reset() {
  if (layer_api() == LayerApi::MaxLength) return CacheLayer::reset();
  const bool recording = record_past_;  // reset keeps past recording on
  clear();
  record_past_ = recording;
}

void DynamicSlidingLayer::activate_past_recording() {
  if (layer_api() == LayerApi::MaxLength) return CacheLayer::activate_past_recording();
  record_past_ = true;
}

at::Tensor DynamicSlidingLayer::kept_after_crop(const at::Tensor& rows, int64_t removed) const {
  const int64_t w = spec_.window;
  if (removed == 0) return python_slice(rows, -w + 1, std::nullopt);
  return python_slice(rows, -w + 1 - removed, -removed);
}

void DynamicSlidingLayer::crop(int64_t n) {
  const int64_t w = spec_.window;
  const auto rows_held = [&] {  // self.cumulative_length = self.keys.shape[-2]
    if (!keys_.defined()) throw PythonError("AttributeError", "'NoneType' object has no attribute 'shape'");
    cumulative_ = keys_.size(2);
  };
  if (layer_api() == LayerApi::MaxLength) {
    if (cumulative_ >= w)
      throw std::invalid_argument(
          "Cannot `crop` a `DynamicSlidingWindowLayer` after it has seen more tokens than its"
          "sliding window (otherwise some states are lost)");
    crop_rows_to(n < 0 ? cumulative_ + n : n, cumulative_);
    return rows_held();
  }
  if (cumulative_ >= w) {
    if (!record_past_)
      throw PythonError("RuntimeError",
                        "`crop` was called, but the current layer does not track past states, and the sliding window "
                        "size was already reached. Call `activate_past_recording` before `crop` to be able to rollback "
                        "the cache.");
    if (n > 0)
      throw PythonError("RuntimeError",
                        "Once the sliding window size has been reached, `DynamicSlidingWindowLayer` can only be cropped "
                        "by passing a negative int, to specify how many tokens to remove");
    keys_ = kept_after_crop(keys_, -n);
    values_ = kept_after_crop(values_, -n);
    cumulative_ += n;
    return;
  }
  drop_rows(n);  // DynamicLayer.crop, then the rows it holds
  rows_held();
}

MaskSizes DynamicSlidingLayer::get_mask_sizes(int64_t q) const {
  const int64_t w = spec_.window;
  const int64_t offset = std::max<int64_t>(cumulative_ - w + 1, 0);
  return {cumulative_ >= w ? w - 1 + q : cumulative_ + q, offset};
}

MaskSizes DynamicSlidingLayer::mask_sizes_for_positions(const std::vector<int64_t>& pos) const {
  MaskSizes m = get_mask_sizes(static_cast<int64_t>(pos.size()));
  if (behaviours_.sliding_layer == SlidingLayer::PreMerge && !pos.empty())
    m.kv_offset = std::max<int64_t>(pos.front() - spec_.window + 1, 0);
  return m;
}

// ---- 4.56: SlidingWindowLayer and ChunkedSlidingLayer ------------------------------------
MaskSizes PreMergeSlidingLayer::get_mask_sizes(int64_t q) const {
  return {std::max(q, capacity()), std::max<int64_t>(cumulative_ - capacity() + 1, 0)};
}

MaskSizes PreMergeSlidingLayer::mask_sizes_for_positions(const std::vector<int64_t>& pos) const {
  const int64_t q = static_cast<int64_t>(pos.size()), first = pos.empty() ? cumulative_ : pos.front();
  return {std::max(q, capacity()), std::max<int64_t>(first - capacity() + 1, 0)};
}

KV PreMergeSlidingLayer::update(const at::Tensor& k, const at::Tensor& v, const std::optional<std::vector<int64_t>>& pos) {
  check_update(k, v, pos);
  const std::string who = spec_.describe() + ".update (4.56 SlidingWindowLayer): ";
  if (!pos) throw std::invalid_argument(who + "needs cache_position (Python reads cache_kwargs[\"cache_position\"])");
  const int64_t c = capacity(), q = k.size(2);
  if (!keys_.defined()) {
    keys_ = at::zeros({k.size(0), k.size(1), c, k.size(3)}, k.options());
    values_ = at::zeros_like(keys_);
  }
  const bool full = cumulative_ >= c;
  cumulative_ += q;  // Python counts the tokens before any branch, so also before a raise
  if (q > c) {       // "prefill" longer than the window: keep the last C rows, return only the new ones
    keys_.copy_(k.slice(2, q - c));
    values_.copy_(v.slice(2, q - c));
    return {k, v};
  }
  if (full) {  // decoding only: new_keys[:, :, [-1]] = key_states
    if (q != 1)
      throw std::runtime_error(who + "shape mismatch: value tensor of shape [" + std::to_string(k.size(0)) + ", " +
                               std::to_string(k.size(1)) + ", " + std::to_string(q) + ", " + std::to_string(k.size(3)) +
                               "] cannot be broadcast to indexing result with 1 row (Python raises RuntimeError "
                               "on a multi-token update once the layer is full)");
    keys_.copy_(at::cat({keys_.slice(2, 1), k}, 2));
    values_.copy_(at::cat({values_.slice(2, 1), v}, 2));
    return {keys_, values_};
  }
  write_in_place(k, v, pos);
  return {keys_, values_};
}

MaskSizes PreMergeChunkedLayer::mask_sizes_for_positions(const std::vector<int64_t>& pos) const {
  return sizes_after(pos.empty() ? cumulative_ : pos.front(), static_cast<int64_t>(pos.size()));
}

KV DynamicSlidingLayer::update(const at::Tensor& k, const at::Tensor& v, const std::optional<std::vector<int64_t>>& pos) {
  check_update(k, v, pos);
  cumulative_ += k.size(2);
  at::Tensor full_k = keys_.defined() ? at::cat({keys_, k}, 2) : k.clone();
  at::Tensor full_v = values_.defined() ? at::cat({values_, v}, 2) : v.clone();
  if (record_past_) {  // every row kept until the next crop; returned: what get_mask_sizes advertised
    keys_ = full_k;
    values_ = full_v;
    const int64_t visible = spec_.window - 1 + k.size(2);
    return {python_tail(full_k, visible), python_tail(full_v, visible)};
  }
  keys_ = python_tail(full_k, kept_rows());
  values_ = python_tail(full_v, kept_rows());
  return {full_k, full_v};
}

}  // namespace detail

// ---- the mutant layers: each differs from the reference in exactly one named step ----------
namespace {
using detail::DynamicSlidingLayer;
using detail::StaticSlidingLayer;

struct ExtendAfterFullKeepsOldest : StaticSlidingLayer {
  using StaticSlidingLayer::StaticSlidingLayer;
  at::Tensor kept_when_full(const at::Tensor& buffer) const override { return buffer; }
};

struct KvOffsetTooSmall : StaticSlidingLayer {
  using StaticSlidingLayer::StaticSlidingLayer;
  MaskSizes get_mask_sizes(int64_t q) const override {
    MaskSizes m = StaticSlidingLayer::get_mask_sizes(q);
    if (m.kv_offset > 0) m.kv_offset -= 1;
    return m;
  }
};

// transformers #45940's change: while the layer is still filling, kv_length counts the tokens
// (cumulative + q) instead of the capacity the layer returns, so the mask no longer fits the keys.
struct WarmUpSizesCountTokens : StaticSlidingLayer {
  using StaticSlidingLayer::StaticSlidingLayer;
  MaskSizes get_mask_sizes(int64_t q) const override {
    MaskSizes m = StaticSlidingLayer::get_mask_sizes(q);
    if (seq_length() + q <= capacity()) m.kv_length = seq_length() + q;
    return m;
  }
};

struct BecomingFullKeepsFirst : StaticSlidingLayer {
  using StaticSlidingLayer::StaticSlidingLayer;
  at::Tensor rows_to_store(const at::Tensor& full, bool becoming_full) const override {
    return becoming_full ? full.slice(2, 0, capacity()) : StaticSlidingLayer::rows_to_store(full, false);
  }
};

struct CapacityMax : StaticSlidingLayer {
  using StaticSlidingLayer::StaticSlidingLayer;
  int64_t capacity() const override { return std::max(spec_.window, spec_.max_cache_len); }
};

struct DynamicKeepsWindow : DynamicSlidingLayer {
  using DynamicSlidingLayer::DynamicSlidingLayer;
  int64_t kept_rows() const override { return spec_.window; }
};

// The layer-API mutants.
struct CropKeepsPastRows : DynamicSlidingLayer {
  using DynamicSlidingLayer::DynamicSlidingLayer;
  at::Tensor kept_after_crop(const at::Tensor& rows, int64_t removed) const override {
    return removed == 0 ? rows : detail::python_slice(rows, std::nullopt, -removed);
  }
};

struct StaticCropKeepsWritePosition : StaticSlidingLayer {
  using StaticSlidingLayer::StaticSlidingLayer;
  void crop(int64_t n) override {
    const int64_t written = written_;
    StaticSlidingLayer::crop(n);
    written_ = written;
  }
};

template <typename Base>
struct ResetDropsRows : Base {
  using Base::Base;
  void reset() override {
    Base::reset();
    this->clear();
  }
};

// StaticSlidingWindowLayer.reset without its `self.cumulative_length_int = 0`: the mixin's reset zeroes
// the rows and the tensor count, the Python int goes on counting the tokens before the reset.
struct StaticResetKeepsCount : StaticSlidingLayer {
  using StaticSlidingLayer::StaticSlidingLayer;
  void reset() override {
    const int64_t count = cumulative_;
    StaticSlidingLayer::reset();
    cumulative_ = count;
  }
};

struct AlwaysCroppable : StaticSlidingLayer {
  using StaticSlidingLayer::StaticSlidingLayer;
  std::optional<bool> is_croppable() const override {
    return StaticSlidingLayer::is_croppable() ? std::optional<bool>(true) : std::nullopt;
  }
};

struct PastRecordingIgnored : DynamicSlidingLayer {
  using DynamicSlidingLayer::DynamicSlidingLayer;
  void activate_past_recording() override {}
};

struct PositiveCropAccepted : detail::DynamicFullLayer {
  using DynamicFullLayer::DynamicFullLayer;
  void crop(int64_t n) override {
    if (n > 0) return crop_rows_to(n, seq_length());
    DynamicFullLayer::crop(n);
  }
};

template <typename T>
std::unique_ptr<CacheLayer> only_if(bool applies, const LayerSpec& spec, const Behaviours& b) {
  return applies ? std::make_unique<T>(spec, b) : nullptr;
}
}  // namespace

// nullptr when the mutation does not touch this kind of layer (the reference is used instead).
std::unique_ptr<CacheLayer> make_mutant_layer(const LayerSpec& spec, const Behaviours& b, Mutation mutation) {
  // The static mutants are variants of the merged layer (4.57+); the pre-merge layers have none.
  const bool static_sliding = spec.cache == CacheKind::Static && spec.is_sliding() && b.sliding_layer == SlidingLayer::Merged;
  const bool dynamic_sliding = spec.cache == CacheKind::Dynamic && spec.is_sliding();
  switch (mutation) {
    case Mutation::ExtendAfterFullKeepsOldest: return only_if<ExtendAfterFullKeepsOldest>(static_sliding, spec, b);
    case Mutation::KvOffsetTooSmall: return only_if<KvOffsetTooSmall>(static_sliding, spec, b);
    case Mutation::WarmUpSizesCountTokens: return only_if<WarmUpSizesCountTokens>(static_sliding, spec, b);
    case Mutation::BecomingFullKeepsFirst: return only_if<BecomingFullKeepsFirst>(static_sliding, spec, b);
    case Mutation::CapacityMax: return only_if<CapacityMax>(static_sliding, spec, b);
    case Mutation::DynamicKeepsWindow: return only_if<DynamicKeepsWindow>(dynamic_sliding, spec, b);
    case Mutation::CropKeepsPastRows: return only_if<CropKeepsPastRows>(dynamic_sliding, spec, b);
    case Mutation::StaticCropKeepsWritePosition: return only_if<StaticCropKeepsWritePosition>(static_sliding, spec, b);
    case Mutation::ResetDropsRows:
      if (spec.cache == CacheKind::Dynamic)
        return spec.is_sliding() ? only_if<ResetDropsRows<DynamicSlidingLayer>>(true, spec, b)
                                 : only_if<ResetDropsRows<detail::DynamicFullLayer>>(true, spec, b);
      return nullptr;
    case Mutation::StaticResetKeepsCount: return only_if<StaticResetKeepsCount>(static_sliding, spec, b);
    case Mutation::AlwaysCroppable: return only_if<AlwaysCroppable>(static_sliding, spec, b);
    case Mutation::PastRecordingIgnored: return only_if<PastRecordingIgnored>(dynamic_sliding, spec, b);
    case Mutation::PositiveCropAccepted:
      return only_if<PositiveCropAccepted>(spec.cache == CacheKind::Dynamic && !spec.is_sliding(), spec, b);
    default: return nullptr;  // mask mutations live in masks.cpp
  }
}

std::unique_ptr<CacheLayer> make_layer(const LayerSpec& spec, const Behaviours& b, Mutation mutation) {
  if (auto mutant = make_mutant_layer(spec, b, mutation)) return mutant;
  if (spec.cache == CacheKind::Static) {
    if (spec.is_sliding() && b.sliding_layer == SlidingLayer::PreMerge) {
      if (spec.type == LayerType::Sliding) return std::make_unique<detail::PreMergeSlidingLayer>(spec, b);
      return std::make_unique<detail::PreMergeChunkedLayer>(spec, b);
    }
    if (spec.is_sliding()) return std::make_unique<detail::StaticSlidingLayer>(spec, b);
    return std::make_unique<detail::StaticFullLayer>(spec, b);
  }
  if (spec.is_sliding()) return std::make_unique<detail::DynamicSlidingLayer>(spec, b);
  return std::make_unique<detail::DynamicFullLayer>(spec, b);
}

std::vector<std::unique_ptr<CacheLayer>> make_cache(CacheKind cache, const std::vector<LayerType>& layer_types, int64_t window,
                                                    int64_t max_cache_len, const Behaviours& b) {
  if (layer_types.empty()) throw std::invalid_argument("make_cache: layer_types is empty");
  std::vector<std::unique_ptr<CacheLayer>> layers;
  for (LayerType t : layer_types) layers.push_back(make_layer(LayerSpec{cache, t, window, max_cache_len}, b));
  return layers;
}

// ---- tensors.h ---------------------------------------------------------------------------
c10::ScalarType scalar_type(DType d) {
  switch (d) {
    case DType::Float32: return at::kFloat;
    case DType::Float16: return at::kHalf;
    case DType::BFloat16: return at::kBFloat16;
    case DType::Float64: return at::kDouble;
  }
  return at::kFloat;
}

DType dtype_of(c10::ScalarType t) {
  switch (t) {
    case at::kFloat: return DType::Float32;
    case at::kHalf: return DType::Float16;
    case at::kBFloat16: return DType::BFloat16;
    case at::kDouble: return DType::Float64;
    default: throw std::invalid_argument(std::string("unsupported dtype ") + c10::toString(t) + " (expected a floating dtype)");
  }
}

namespace {
template <typename T>
void fill(at::Tensor& t, const std::vector<double>& values) {
  T* p = t.data_ptr<T>();
  for (size_t i = 0; i < values.size(); ++i) p[i] = static_cast<T>(static_cast<float>(values[i]));
}
}  // namespace

at::Tensor from_values(const std::vector<double>& values, std::vector<int64_t> shape, DType dtype) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  if (n != static_cast<int64_t>(values.size()))
    throw std::invalid_argument("from_values: " + std::to_string(values.size()) + " values for shape " + shape_str(shape));
  // Filled in place, each value converted as torch's double -> dtype copy converts it: static_cast
  // to float (round to nearest even), then c10::Half / c10::BFloat16's own rounding from float.
  at::Tensor t = at::empty(shape, at::TensorOptions().dtype(scalar_type(dtype)));
  switch (dtype) {
    case DType::Float64: std::memcpy(t.data_ptr<double>(), values.data(), values.size() * sizeof(double)); break;
    case DType::Float32: fill<float>(t, values); break;
    case DType::Float16: fill<at::Half>(t, values); break;
    case DType::BFloat16: fill<at::BFloat16>(t, values); break;
  }
  return t;
}

std::vector<double> values_of(const at::Tensor& t) {
  const at::Tensor d = t.to(at::kDouble).contiguous();
  return std::vector<double>(d.data_ptr<double>(), d.data_ptr<double>() + d.numel());
}

}  // namespace kvc
