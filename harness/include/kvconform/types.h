// Vocabulary shared by every part of kvconform. No LibTorch here: position-level code,
// JSON and reports must compile without the heavy tensor headers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kvc {

// config.layer_types entries in transformers.
enum class LayerType { Full, Sliding, Chunked };
enum class CacheKind { Static, Dynamic };
enum class DType { Float32, Float16, BFloat16, Float64 };

const char* to_string(LayerType t);  // "full_attention", "sliding_attention", "chunked_attention"
const char* to_string(CacheKind k);  // "static", "dynamic"
const char* to_string(DType d);      // "float32", ...
// Each parser throws std::invalid_argument naming the rejected value and the accepted ones.
LayerType parse_layer_type(const std::string& s);
CacheKind parse_cache_kind(const std::string& s);
DType parse_dtype(const std::string& s);

// What get_mask_sizes returns: the returned K/V rows are tokens [kv_offset, kv_offset + kv_length).
struct MaskSizes {
  int64_t kv_length = 0;
  int64_t kv_offset = 0;
  bool operator==(const MaskSizes& o) const { return kv_length == o.kv_length && kv_offset == o.kv_offset; }
  bool operator!=(const MaskSizes& o) const { return !(*this == o); }
};

// One cache layer as transformers builds it from config.layer_types.
struct LayerSpec {
  CacheKind cache = CacheKind::Static;
  LayerType type = LayerType::Sliding;
  int64_t window = 0;         // sliding_window or attention_chunk_size; ignored for Full
  int64_t max_cache_len = 0;  // static caches only

  bool is_sliding() const { return type != LayerType::Full; }
  // Throws std::invalid_argument naming the field and value.
  void validate() const;
  // "static/sliding_attention(W=4,L=8)"
  std::string describe() const;
};

// Per-row count of leading padding tokens; nullopt means no 2D attention_mask is passed at all
// (which matters: transformers only skips the mask when none is given or it is all ones).
using LeftPadding = std::optional<std::vector<int64_t>>;

}  // namespace kvc
