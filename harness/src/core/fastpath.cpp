// Position-level simulation of cache_utils.py's layers and masking_utils.py's mask builders. The
// layer code follows the Python update() branches on token indices (the buffers hold which token,
// not its values); the masks intersect the mask functions' key intervals. No LibTorch.
#include "kvconform/fastpath.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace kvc::fast {

Layer::Layer(const LayerSpec& spec, const Behaviours& behaviours, Mutation mutation)
    : spec_(spec), behaviours_(behaviours), mutation_(mutation) {
  spec_.validate();
  const bool pre_merge = behaviours_.sliding_layer == SlidingLayer::PreMerge;
  if (spec_.cache == CacheKind::Static) {
    if (!spec_.is_sliding()) kind_ = Kind::StaticFull;
    else if (!pre_merge) kind_ = Kind::StaticSliding;
    else kind_ = spec_.type == LayerType::Sliding ? Kind::PreMergeSliding : Kind::PreMergeChunked;
  } else {
    kind_ = spec_.is_sliding() ? Kind::DynamicSliding : Kind::DynamicFull;
  }
  // A mutation only changes the layer kind it was written for (make_mutant_layer): the static
  // mutants are variants of the merged layer, mask mutations do not touch the layers.
  switch (mutation_) {
    case Mutation::ExtendAfterFullKeepsOldest:
    case Mutation::KvOffsetTooSmall:
    case Mutation::BecomingFullKeepsFirst:
    case Mutation::CapacityMax:
      if (kind_ != Kind::StaticSliding) mutation_ = Mutation::None;
      break;
    case Mutation::DynamicKeepsWindow:
      if (kind_ != Kind::DynamicSliding) mutation_ = Mutation::None;
      break;
    default: mutation_ = Mutation::None;
  }
}

int64_t Layer::capacity() const {
  if (!spec_.is_sliding()) return spec_.max_cache_len;
  return mutation_ == Mutation::CapacityMax ? std::max(spec_.window, spec_.max_cache_len)
                                            : std::min(spec_.window, spec_.max_cache_len);
}

void Layer::reset() {
  stored_.clear();
  cumulative_ = 0;
}

// StaticSlidingWindowLayer.get_mask_sizes as if `old` tokens had been written: the capacity, not
// config.sliding_window, is the window here.
MaskSizes Layer::merged_sizes(int64_t old, int64_t q) const {
  const int64_t c = capacity();
  MaskSizes m{old >= c ? c + q - 1 : std::max(old + q, c), std::max<int64_t>(old - c + 1, 0)};
  if (mutation_ == Mutation::KvOffsetTooSmall && m.kv_offset > 0) m.kv_offset -= 1;
  return m;
}

MaskSizes Layer::get_mask_sizes(int64_t q) const {
  const int64_t seen = cumulative_;
  switch (kind_) {
    case Kind::StaticFull: return {spec_.max_cache_len, 0};
    case Kind::DynamicFull: return {seen + q, 0};
    case Kind::StaticSliding:
    case Kind::PreMergeChunked: return merged_sizes(seen, q);
    case Kind::DynamicSliding: {
      const int64_t w = spec_.window;
      return {seen >= w ? w - 1 + q : seen + q, std::max<int64_t>(seen - w + 1, 0)};
    }
    case Kind::PreMergeSliding: return {std::max(q, capacity()), std::max<int64_t>(seen - capacity() + 1, 0)};
  }
  return {};
}

MaskSizes Layer::mask_sizes_for_positions(const std::vector<int64_t>& pos) const {
  const int64_t q = static_cast<int64_t>(pos.size());
  const int64_t first = pos.empty() ? cumulative_ : pos.front();
  switch (kind_) {
    case Kind::PreMergeSliding: return {std::max(q, capacity()), std::max<int64_t>(first - capacity() + 1, 0)};
    case Kind::PreMergeChunked: return merged_sizes(first, q);
    case Kind::DynamicSliding: {
      MaskSizes m = get_mask_sizes(q);
      if (behaviours_.sliding_layer == SlidingLayer::PreMerge && !pos.empty())
        m.kv_offset = std::max<int64_t>(pos.front() - spec_.window + 1, 0);
      return m;
    }
    default: return get_mask_sizes(q);
  }
}

void Layer::write_in_place(int64_t first, int64_t q, const std::vector<int64_t>* pos) {
  const int64_t rows = static_cast<int64_t>(stored_.size());
  // The cache_position API falls back to arange(q); the query_length API writes at the cumulative length.
  const bool arange = behaviours_.cache_api == CacheApi::CachePosition;
  auto at = [&](int64_t i) { return pos ? (*pos)[static_cast<size_t>(i)] : arange ? i : cumulative_ + i; };
  for (int64_t i = 0; i < q; ++i)
    if (at(i) < 0 || at(i) >= rows)
      throw std::out_of_range(spec_.describe() + ".update: position " + std::to_string(at(i)) + " is outside the buffer of " +
                              std::to_string(rows) + " rows (Python raises an IndexError from index_copy_)");
  for (int64_t i = 0; i < q; ++i) stored_[static_cast<size_t>(at(i))] = first + i;
}

void Layer::update(int64_t q, TokenRows& out, const std::vector<int64_t>* pos) {
  if (q < 1) throw std::invalid_argument(spec_.describe() + ".update: zero-token update");
  if (pos && static_cast<int64_t>(pos->size()) != q)
    throw std::invalid_argument(spec_.describe() + ".update: cache_position has " + std::to_string(pos->size()) +
                                " entries for " + std::to_string(q) + " tokens");
  const int64_t first = cumulative_;
  switch (kind_) {
    case Kind::DynamicFull:
    case Kind::DynamicSliding: {
      // DynamicLayer: cat and return everything. DynamicSlidingWindowLayer: return cat(stored, new),
      // keep keys[:, :, -(W - 1):] (a Python slice: -0 keeps everything).
      for (int64_t i = 0; i < q; ++i) stored_.push_back(first + i);
      cumulative_ += q;
      out.assign(stored_.begin(), stored_.end());
      if (kind_ == Kind::DynamicSliding) {
        const int64_t keep = mutation_ == Mutation::DynamicKeepsWindow ? spec_.window : spec_.window - 1;
        const int64_t len = static_cast<int64_t>(stored_.size());
        if (keep > 0 && keep < len) stored_.erase(stored_.begin(), stored_.end() - keep);
      }
      return;
    }
    case Kind::StaticFull:  // StaticLayer: index_copy_ in place, the whole buffer returned
      if (stored_.empty()) stored_.assign(static_cast<size_t>(capacity()), kUnwritten);  // lazy zeros
      write_in_place(first, q, pos);
      cumulative_ += q;
      out.assign(stored_.begin(), stored_.end());
      return;
    case Kind::StaticSliding:
    case Kind::PreMergeChunked: update_static_sliding(q, out, pos); return;
    case Kind::PreMergeSliding: break;
  }
  // 4.56's SlidingWindowLayer.
  if (!pos)
    throw std::invalid_argument(spec_.describe() +
                                ".update (4.56 SlidingWindowLayer): needs cache_position (Python reads "
                                "cache_kwargs[\"cache_position\"])");
  const int64_t c = capacity();
  if (stored_.empty()) stored_.assign(static_cast<size_t>(c), kUnwritten);
  const bool full = cumulative_ >= c;
  cumulative_ += q;  // Python counts the tokens before any branch, so also before a raise
  if (q > c) {       // longer than the window: keep the last C new rows, return only the new ones
    for (int64_t i = 0; i < c; ++i) stored_[static_cast<size_t>(i)] = first + q - c + i;
    out.clear();
    for (int64_t i = 0; i < q; ++i) out.push_back(first + i);
    return;
  }
  if (full) {
    if (q != 1)
      throw std::runtime_error(spec_.describe() + ".update (4.56 SlidingWindowLayer): shape mismatch: " + std::to_string(q) +
                               " rows cannot be broadcast to indexing result with 1 row "
                               "(Python raises RuntimeError on a multi-token update once the layer is full)");
    std::rotate(stored_.begin(), stored_.begin() + 1, stored_.end());
    stored_.back() = first;
  } else {
    write_in_place(first, q, pos);
  }
  out.assign(stored_.begin(), stored_.end());
}

// StaticSlidingWindowLayer.update (and 4.56's ChunkedSlidingLayer, the same code).
void Layer::update_static_sliding(int64_t q, TokenRows& out, const std::vector<int64_t>* pos) {
  const int64_t c = capacity(), first = cumulative_, old = cumulative_;
  if (stored_.empty()) stored_.assign(static_cast<size_t>(c), kUnwritten);
  if (old >= c && q == 1) {  // full: roll left by one, the new token last
    std::rotate(stored_.begin(), stored_.begin() + 1, stored_.end());
    stored_.back() = first;
    cumulative_ += q;
    out.assign(stored_.begin(), stored_.end());
    return;
  }
  if (old + q <= c) {  // room left: in place
    write_in_place(first, q, pos);
    cumulative_ += q;
    out.assign(stored_.begin(), stored_.end());
    return;
  }
  // Full already (several tokens) or becoming full: return cat(visible old rows, new) and store
  // its last `capacity` rows.
  scratch_.clear();
  if (old >= c) {
    const size_t skip = mutation_ == Mutation::ExtendAfterFullKeepsOldest ? 0 : 1;
    scratch_.insert(scratch_.end(), stored_.begin() + static_cast<long>(skip), stored_.end());
  } else {
    scratch_.insert(scratch_.end(), stored_.begin(), stored_.begin() + old);
  }
  for (int64_t i = 0; i < q; ++i) scratch_.push_back(first + i);
  cumulative_ += q;
  const bool keep_first = mutation_ == Mutation::BecomingFullKeepsFirst && old < c;
  const auto from = keep_first ? scratch_.begin() : scratch_.end() - c;
  std::copy(from, from + c, stored_.begin());
  out.assign(scratch_.begin(), scratch_.end());
}

namespace {
int64_t py_floordiv(int64_t a, int64_t b) {
  const int64_t d = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? d - 1 : d;
}

// attention_mask[b, kv] of the 2D mask zero-padded on the right to cover every key.
inline bool real_token(const MaskRequest& m, int64_t b, int64_t kv) {
  if (!m.left_padding) return true;
  return kv < m.seen_after && kv >= (*m.left_padding)[static_cast<size_t>(b)];
}

}  // namespace

void boolean_mask(const MaskRequest& m, std::vector<uint8_t>& out, Mutation mutation) {
  m.check();
  if (mutation == Mutation::None) mutation = m.mutation;
  const int64_t kv = m.sizes.kv_length, off = m.sizes.kv_offset, q = m.q();
  out.assign(static_cast<size_t>(m.batch * q * kv), 0);
  const int64_t reach = mutation == Mutation::WindowTooWide ? m.window + 1 : m.window;
  // Each mask function admits an interval of key positions per query, so a row is the intersection
  // of intervals: causal_mask_function k <= q; sliding_window_overlay k > q - W; chunked_overlay
  // the query's chunk [start, start + W); padding_mask_function lp <= k < seen_after.
  for (int64_t b = 0; b < m.batch; ++b) {
    // chunked_causal_mask_function's left_padding_tokens: the 2D mask's leading zeros.
    int64_t lead = m.left_padding ? std::min((*m.left_padding)[static_cast<size_t>(b)], m.seen_after) : 0;
    if (mutation == Mutation::ChunkIgnoresLeftPadding) lead = 0;
    for (int64_t i = 0; i < q; ++i) {
      const int64_t qi = m.query_positions[static_cast<size_t>(i)];
      int64_t lo = off, hi = qi;
      if (m.type == LayerType::Sliding) lo = std::max(lo, qi - reach + 1);
      if (m.type == LayerType::Chunked) {
        const int64_t start = lead + py_floordiv(qi - lead, m.window) * m.window;
        lo = std::max(lo, start);
        hi = std::min(hi, start + m.window - 1);
      }
      if (m.left_padding) {
        lo = std::max(lo, (*m.left_padding)[static_cast<size_t>(b)]);
        hi = std::min(hi, m.seen_after - 1);
      }
      hi = std::min(hi, off + kv - 1);
      if (lo <= hi) std::fill_n(out.begin() + (b * q + i) * kv + (lo - off), hi - lo + 1, uint8_t{1});
    }
  }
}

bool skips(const MaskRequest& m) {
  m.check();
  if (!m.allow_skip) return false;
  const int64_t kv = m.sizes.kv_length, off = m.sizes.kv_offset, q = m.q();
  // _ignore_causal_mask_sdpa: never when the local window (sliding_window / chunk size) shows.
  if (m.type != LayerType::Full && kv >= m.window) return false;
  auto all_real = [&](int64_t from, int64_t to, bool want) {
    for (int64_t b = 0; b < m.batch; ++b)
      for (int64_t j = from; j < to; ++j)
        if (real_token(m, b, off + j) != want) return false;
    return true;
  };
  if ((q == 1 || kv == q) && all_real(0, kv, true)) return true;
  // sdpa_skip_empty_cache: a first query at position 0 may use top-left is_causal when the only
  // masked keys are the unwritten tail after the q new tokens. Without a 2D mask there is no
  // padding to see at all.
  if (m.skip_empty_cache && q > 0 && m.query_positions[0] == 0)
    return !m.left_padding || (all_real(0, std::min(q, kv), true) && all_real(std::min(q, kv), kv, false));
  return false;
}

void implied_by_skip(int64_t q, int64_t kv, std::vector<uint8_t>& out) {
  out.assign(static_cast<size_t>(q * kv), 1);
  if (q > 1)  // SDPA's is_causal: top-left aligned
    for (int64_t i = 0; i < q; ++i)
      for (int64_t j = i + 1; j < kv; ++j) out[static_cast<size_t>(i * kv + j)] = 0;
}

void additive_mask_bytes(const std::vector<uint8_t>& boolean, DType dtype, std::string& out) {
  // torch.finfo(dtype).min, little endian.
  static const unsigned char f32[] = {0xff, 0xff, 0x7f, 0xff};
  static const unsigned char f16[] = {0xff, 0xfb};
  static const unsigned char b16[] = {0x7f, 0xff};
  static const unsigned char f64[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xef, 0xff};
  const unsigned char* min = f32;
  size_t n = 4;
  switch (dtype) {
    case DType::Float32: break;
    case DType::Float16: min = f16, n = 2; break;
    case DType::BFloat16: min = b16, n = 2; break;
    case DType::Float64: min = f64, n = 8; break;
  }
  out.assign(boolean.size() * n, '\0');
  char* p = &out[0];
  for (uint8_t allowed : boolean) {
    if (!allowed) std::memcpy(p, min, n);
    p += n;
  }
}

}  // namespace kvc::fast
