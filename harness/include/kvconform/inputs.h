// The seeded, language-independent input generator "kvc-mix64-v1" (cases/README.md). Python
// (golden/kvc_inputs.py) and C++ produce bit-identical tensors from it, so fixtures need not
// store inputs. Every value is k/128 with |k| <= 128: exact in float16, bfloat16, float32, float64.
#pragma once

#include <cstdint>
#include <vector>

namespace kvc::inputs {

enum TensorId : uint64_t { kQuery = 1, kKey = 2, kValue = 3 };

// The distribution a block is drawn from. Mix64 is "kvc-mix64-v1" (k/128, shared with Python and the
// golden fixtures). The others serve the kernel numerics cases (numeric_scenarios in scenario.h) and
// exist in C++ only: their tensors are sent to plugins and workers, never regenerated elsewhere.
//   Normal       N(0, 1) (Box-Muller over two mix64 draws) rounded to a multiple of 1/32 and clamped
//                to +-255/32: at most 8 significant bits, so exact in float16, bfloat16, float32, float64
//   LargeLogits  queries and keys are the Normal values x 16 (a power of two: still exact), values the
//                Normal ones: logits q.k / sqrt(D) have a standard deviation of 256, far past where
//                exp overflows float16 (11), float32 (88.7) and float64 (709.8)
enum class Distribution : uint8_t { Mix64, Normal, LargeLogits };
const char* to_string(Distribution d);  // "mix64", "normal", "large_logits"

uint64_t mix64(uint64_t z);

double element(uint64_t seed, uint64_t tensor, uint64_t layer, uint64_t b, uint64_t h, uint64_t t, uint64_t d);

// Row-major [batch, heads, q, head_dim] block for tokens [t0, t0 + q).
std::vector<double> block(uint64_t seed, TensorId tensor, uint64_t layer, int64_t batch, int64_t heads, int64_t t0, int64_t q,
                          int64_t head_dim, Distribution distribution = Distribution::Mix64);

}  // namespace kvc::inputs
