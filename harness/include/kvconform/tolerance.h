// How close an attention output computed in a given dtype must come to the float64 oracle.
// The reasoning for each number is in the README ("Tolerances"); the property campaign records the
// largest error it actually sees so that the margin stays visible.
#pragma once

#include "kvconform/types.h"

namespace kvc {

struct Tolerance {
  double absolute;  // max |out - oracle| over rows that see at least one key
  const char* why;
};

Tolerance attention_tolerance(DType dtype);
// For transformers' eager attention, whose softmax runs in float32 even for float64 inputs.
Tolerance eager_tolerance(DType dtype);

// float64 attention recomputed over a layer's returned K/V against the oracle: only summation
// order differs, so anything above this is a wrong row, a wrong mask or a lost token.
constexpr double kExactTolerance = 1e-9;

}  // namespace kvc
