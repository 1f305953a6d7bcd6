#include "kvconform/inputs.h"

#include <cstddef>

namespace kvc::inputs {

uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

namespace {
// The hash state after (seed, tensor, layer, b, h, t): element() finishes it with d.
uint64_t row_state(uint64_t seed, uint64_t tensor, uint64_t layer, uint64_t b, uint64_t h, uint64_t t) {
  uint64_t x = mix64(seed);
  for (uint64_t part : {tensor, layer, b, h, t}) x = mix64(x ^ part);
  return x;
}
double finish(uint64_t row, uint64_t d) {
  const uint64_t x = mix64(row ^ d);
  return static_cast<double>(static_cast<int64_t>((x >> 32) % 257) - 128) / 128.0;
}
}  // namespace

double element(uint64_t seed, uint64_t tensor, uint64_t layer, uint64_t b, uint64_t h, uint64_t t,
               uint64_t d) {
  return finish(row_state(seed, tensor, layer, b, h, t), d);
}

std::vector<double> block(uint64_t seed, TensorId tensor, uint64_t layer, int64_t batch,
                          int64_t heads, int64_t t0, int64_t q, int64_t head_dim) {
  std::vector<double> out;
  out.reserve(static_cast<size_t>(batch * heads * q * head_dim));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < q; ++i) {
        const uint64_t row = row_state(seed, tensor, layer, b, h, t0 + i);  // hashed once per row, not per element
        for (int64_t d = 0; d < head_dim; ++d) out.push_back(finish(row, d));
      }
  return out;
}

}  // namespace kvc::inputs
