// The seeded, language-independent input generator "kvc-mix64-v1" (cases/README.md). Python
// (golden/kvc_inputs.py) and C++ produce bit-identical tensors from it, so fixtures need not
// store inputs. Every value is k/128 with |k| <= 128: exact in float16, bfloat16, float32, float64.
#pragma once

#include <cstdint>
#include <vector>

namespace kvc::inputs {

enum TensorId : uint64_t { kQuery = 1, kKey = 2, kValue = 3 };

uint64_t mix64(uint64_t z);

double element(uint64_t seed, uint64_t tensor, uint64_t layer, uint64_t b, uint64_t h, uint64_t t,
               uint64_t d);

// Row-major [batch, heads, q, head_dim] block for tokens [t0, t0 + q).
std::vector<double> block(uint64_t seed, TensorId tensor, uint64_t layer, int64_t batch,
                          int64_t heads, int64_t t0, int64_t q, int64_t head_dim);

}  // namespace kvc::inputs
