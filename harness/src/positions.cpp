#include "kvconform/positions.h"

#include <algorithm>

namespace kvc::positions {

int64_t capacity(const LayerSpec& s) {
  if (s.cache == CacheKind::Static)
    return s.is_sliding() ? std::min(s.window, s.max_cache_len) : s.max_cache_len;
  return s.is_sliding() ? s.window - 1 : -1;
}

MaskSizes mask_sizes(const LayerSpec& s, int64_t seen, int64_t q) {
  if (!s.is_sliding())
    return s.cache == CacheKind::Static ? MaskSizes{s.max_cache_len, 0} : MaskSizes{seen + q, 0};
  if (s.cache == CacheKind::Static) {
    const int64_t c = capacity(s);
    const int64_t offset = std::max<int64_t>(seen - c + 1, 0);
    if (seen >= c) return {c + q - 1, offset};
    if (seen + q > c) return {seen + q, offset};
    return {c, offset};
  }
  const int64_t w = s.window;
  const int64_t offset = std::max<int64_t>(seen - w + 1, 0);
  return {seen >= w ? w - 1 + q : seen + q, offset};
}

namespace {
Rows window_of(int64_t first, int64_t count, int64_t written) {
  Rows rows;
  rows.reserve(static_cast<size_t>(std::max<int64_t>(count, 0)));
  for (int64_t i = 0; i < count; ++i) {
    const int64_t t = first + i;
    rows.push_back(t < written ? std::optional<int64_t>(t) : std::nullopt);
  }
  return rows;
}
}  // namespace

Rows stored_rows(const LayerSpec& s, int64_t seen) {
  const int64_t c = capacity(s);
  if (s.cache == CacheKind::Static) return window_of(std::max<int64_t>(seen - c, 0), c, seen);
  const int64_t kept = c < 0 ? seen : std::min(seen, c);
  return window_of(seen - kept, kept, seen);
}

Rows returned_rows(const LayerSpec& s, int64_t seen, int64_t q) {
  const MaskSizes m = mask_sizes(s, seen, q);
  return window_of(m.kv_offset, m.kv_length, seen + q);
}

bool window_allows(LayerType type, int64_t window, int64_t left_pad, int64_t q_pos, int64_t k_pos) {
  if (k_pos > q_pos) return false;
  switch (type) {
    case LayerType::Full: return true;
    case LayerType::Sliding: return k_pos > q_pos - window;
    case LayerType::Chunked:
      return floor_div(k_pos - left_pad, window) == floor_div(q_pos - left_pad, window);
  }
  return false;
}

int64_t max_total_tokens(const LayerSpec& s) {
  if (s.cache != CacheKind::Static) return -1;
  if (!s.is_sliding() || s.max_cache_len < s.window) return s.max_cache_len;
  return -1;
}

std::optional<std::string> upstream_deviation(const LayerSpec& s) {
  if (s.cache == CacheKind::Dynamic && s.is_sliding() && s.window == 1)
    return std::string(
        "DynamicSlidingWindowLayer with window 1 slices keys[:, :, -window + 1:] = [0:], so it keeps "
        "every token instead of none and update() returns more rows than get_mask_sizes' kv_length");
  return std::nullopt;
}

}  // namespace kvc::positions
