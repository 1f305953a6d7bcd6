#include "kvconform/types.h"

#include <stdexcept>

namespace kvc {

const char* to_string(LayerType t) {
  switch (t) {
    case LayerType::Full: return "full_attention";
    case LayerType::Sliding: return "sliding_attention";
    case LayerType::Chunked: return "chunked_attention";
  }
  return "?";
}

const char* to_string(CacheKind k) { return k == CacheKind::Static ? "static" : "dynamic"; }

const char* to_string(DType d) {
  switch (d) {
    case DType::Float32: return "float32";
    case DType::Float16: return "float16";
    case DType::BFloat16: return "bfloat16";
    case DType::Float64: return "float64";
  }
  return "?";
}

namespace {
[[noreturn]] void reject(const char* what, const std::string& s, const char* accepted) {
  throw std::invalid_argument(std::string("unknown ") + what + " '" + s + "' (expected one of: " + accepted + ")");
}
}  // namespace

LayerType parse_layer_type(const std::string& s) {
  if (s == "full_attention" || s == "full") return LayerType::Full;
  if (s == "sliding_attention" || s == "sliding") return LayerType::Sliding;
  if (s == "chunked_attention" || s == "chunked") return LayerType::Chunked;
  reject("layer type", s, "full_attention, sliding_attention, chunked_attention");
}

CacheKind parse_cache_kind(const std::string& s) {
  if (s == "static") return CacheKind::Static;
  if (s == "dynamic") return CacheKind::Dynamic;
  reject("cache kind", s, "static, dynamic");
}

DType parse_dtype(const std::string& s) {
  if (s == "float32" || s == "fp32") return DType::Float32;
  if (s == "float16" || s == "fp16") return DType::Float16;
  if (s == "bfloat16" || s == "bf16") return DType::BFloat16;
  if (s == "float64" || s == "fp64") return DType::Float64;
  reject("dtype", s, "float32, float16, bfloat16, float64");
}

void LayerSpec::validate() const {
  if (is_sliding() && window <= 0)
    throw std::invalid_argument(std::string(to_string(type)) + " layer: window must be positive, got " + std::to_string(window));
  if (cache == CacheKind::Static && max_cache_len <= 0)
    throw std::invalid_argument("static cache: max_cache_len must be positive, got " + std::to_string(max_cache_len));
}

std::string LayerSpec::describe() const {
  std::string s = std::string(to_string(cache)) + "/" + to_string(type) + "(";
  if (is_sliding()) s += "W=" + std::to_string(window);
  if (cache == CacheKind::Static) s += std::string(is_sliding() ? "," : "") + "L=" + std::to_string(max_cache_len);
  return s + ")";
}

}  // namespace kvc
