#include "kvconform/positions.h"

#include <algorithm>

namespace kvc::positions {

int64_t capacity(const LayerSpec& s) {
  if (s.cache == CacheKind::Static) return s.is_sliding() ? std::min(s.window, s.max_cache_len) : s.max_cache_len;
  return s.is_sliding() ? s.window - 1 : -1;
}

// Derived from what the step's queries need, not from the layer's update branches (layers.cpp), so
// that the two are separate implementations: a layer returns every key its earliest new query may
// see under the sliding rule, through the newest token. A static sliding layer judges "may see" with
// its capacity min(W, L) as the window (transformers' get_mask_sizes does) and always returns at least
// its whole buffer, unwritten tail included; a dynamic one keeps W - 1 earlier tokens.
MaskSizes mask_sizes(const LayerSpec& s, int64_t seen, int64_t q) {
  const int64_t end = seen + q;
  if (!s.is_sliding()) return s.cache == CacheKind::Static ? MaskSizes{s.max_cache_len, 0} : MaskSizes{end, 0};
  const int64_t window = s.cache == CacheKind::Static ? capacity(s) : s.window;
  int64_t first_key = seen;  // the earliest query, at position `seen`, sees itself at least
  while (first_key > 0 && window_allows(LayerType::Sliding, window, 0, seen, first_key - 1)) --first_key;
  int64_t length = end - first_key;
  if (s.cache == CacheKind::Static) length = std::max(length, capacity(s));
  return {length, first_key};
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
    case LayerType::Chunked: return floor_div(k_pos - left_pad, window) == floor_div(q_pos - left_pad, window);
  }
  return false;
}

int64_t max_total_tokens(const LayerSpec& s) { return s.cache == CacheKind::Static && !s.is_sliding() ? s.max_cache_len : -1; }

bool loses_window_keys(const LayerSpec& s, int64_t seen, int64_t q, const std::vector<int64_t>& left_padding) {
  if (!s.is_sliding()) return false;
  const int64_t first_returned = mask_sizes(s, seen, q).kv_offset;
  const std::vector<int64_t> pads = left_padding.empty() ? std::vector<int64_t>{0} : left_padding;
  // A window (sliding or chunk) spans at most W keys ending at the query, and where it starts never
  // moves back as the query advances: the step's first query is the one that reaches furthest back.
  for (int64_t lp : pads)
    for (int64_t k = std::max(lp, seen - s.window + 1); k < first_returned; ++k)
      if (window_allows(s.type, s.window, lp, seen, k)) return true;
  return false;
}

std::string lost_keys_deviation(const LayerSpec& s) {
  return "StaticSlidingWindowLayer with max_cache_len " + std::to_string(s.max_cache_len) + " below the window " +
         std::to_string(s.window) +
         " keeps min(W, L) tokens: past max_cache_len a query silently attends to fewer keys "
         "than its window allows (transformers raises nothing)";
}

std::optional<std::string> upstream_deviation(const LayerSpec& s) {
  if (s.cache == CacheKind::Dynamic && s.is_sliding() && s.window == 1)
    return std::string(
        "DynamicSlidingWindowLayer with window 1 slices keys[:, :, -window + 1:] = [0:], so it keeps "
        "every token instead of none and update() returns more rows than get_mask_sizes' kv_length");
  return std::nullopt;
}

}  // namespace kvc::positions
