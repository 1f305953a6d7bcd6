// llama.cpp's quantized K/V cache formats, ggml's q8_0 and q4_0 blocks, as the same-dtype reference
// stores a row: each block of 32 values quantized the way ggml's CPU backend writes the cache
// (ggml_set_rows / ggml_cpy call the type's from_float) and read back the way its kernels read it
// (the type's to_float; the q8_0 x q8_0 dot product sums the same integers times the same scales).
// The arithmetic is ggml's, in float32, step for step (ggml-cpu/arch/x86/quants.c quantize_row_q8_0
// with AVX2, ggml-quants.c quantize_row_q4_0_ref and dequantize_row_q8_0 / _q4_0), so the rounded
// values equal ggml's bit for bit: plugins/ggml's ctest plugin_ggml_kv_blocks compares them against
// the linked ggml. Header only and free of any dependency, so that test and the oracle share it.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string_view>

namespace kvc::engine {

// A block format of a quantized K or V cache (or of the queries a kernel converts to K's dot type).
enum class KvBlock : uint8_t { None, Q8_0, Q4_0 };

constexpr int64_t kKvBlockSize = 32;  // QK8_0 == QK4_0 == 32

inline std::optional<KvBlock> kv_block_named(std::string_view name) {
  if (name == "q8_0") return KvBlock::Q8_0;
  if (name == "q4_0") return KvBlock::Q4_0;
  return std::nullopt;
}

inline const char* kv_block_name(KvBlock b) { return b == KvBlock::Q8_0 ? "q8_0" : b == KvBlock::Q4_0 ? "q4_0" : "none"; }

// q8_0: d = amax / 127 stored as float16 (round to nearest even, F16C's _cvtss_sh(x, 0)); each
// value round(x * (127 / amax)) to nearest, ties to even (_mm256_round_ps(_MM_ROUND_NEAREST)): the
// multiplier is 127/amax, not 1/d; the stored value is q * float(half(d)).
inline void round_block_q8_0(float* x) {
  float amax = 0.0f;
  for (int64_t j = 0; j < kKvBlockSize; ++j) amax = std::fmax(amax, std::fabs(x[j]));
  const float d = static_cast<float>(static_cast<_Float16>(amax / 127.f));
  const float id = amax != 0.0f ? 127.f / amax : 0.0f;
  // Through an integer, as the int8 store does: a value that rounds to 0 reads back as +0, never -0.
  for (int64_t j = 0; j < kKvBlockSize; ++j) x[j] = static_cast<float>(static_cast<int>(std::nearbyint(x[j] * id))) * d;
}

// q4_0: m = the value of largest magnitude (the first of equal ones), d = m / -8 stored as float16,
// id = 1 / d (unrounded); each value min(15, (int8_t)(x * id + 8.5f)) - 8, a truncation; the
// stored value is that times float(half(d)).
inline void round_block_q4_0(float* x) {
  float amax = 0.0f, max = 0.0f;
  for (int64_t j = 0; j < kKvBlockSize; ++j)
    if (amax < std::fabs(x[j])) amax = std::fabs(x[j]), max = x[j];
  const float d = max / -8;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const float dh = static_cast<float>(static_cast<_Float16>(d));
  for (int64_t j = 0; j < kKvBlockSize; ++j) {
    const int q = static_cast<int8_t>(x[j] * id + 8.5f);
    x[j] = static_cast<float>((q < 15 ? q : 15) - 8) * dh;
  }
}

// Rounds row[0..n) through `format`, block by block (nothing for KvBlock::None). ggml requires 32 to
// divide a row; where it does not (llama.cpp then refuses the cache or computes garbage: docs/engines.md,
// finding 6), the last partial block is left as it is.
template <class T>
void round_kv_blocks(T* row, int64_t n, KvBlock format) {
  if (format == KvBlock::None) return;
  float block[kKvBlockSize];
  for (int64_t b = 0; b + kKvBlockSize <= n; b += kKvBlockSize) {
    for (int64_t j = 0; j < kKvBlockSize; ++j) block[j] = static_cast<float>(row[b + j]);
    format == KvBlock::Q8_0 ? round_block_q8_0(block) : round_block_q4_0(block);
    for (int64_t j = 0; j < kKvBlockSize; ++j) row[b + j] = static_cast<T>(block[j]);
  }
}

}  // namespace kvc::engine
