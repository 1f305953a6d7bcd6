// Every bound kvconform judges a number by, by name. Each result records the policy it was judged
// by and the bound (CaseResult::policy / bound); reports show both. The reasoning behind each
// number is in docs/backends.md ("Tolerance policy" and "Tolerances of the property campaign and
// golden replay").
//
//   bitwise               same bytes: golden replay against fixtures made by the same LibTorch
//                         kernels, cache rows and K/V bytes everywhere
//   exact-float64         float64 recomputed over a layer's rows: only summation order differs
//   dtype-epsilons        transformers' attention in a dtype against the float64 oracle: 8 epsilons
//                         of the dtype (fixtures from another torch; the property campaign)
//   same-dtype-reference  a kernel against the float64 oracle: max(floor, factor x the error of a
//                         same-dtype math reference), FlashAttention's rule
// No LibTorch here.
#pragma once

#include <string>

#include "kvconform/types.h"

namespace kvc {

enum class Policy { Bitwise, ExactFloat64, DtypeEpsilons, SameDtypeReference };
const char* to_string(Policy p);  // "bitwise", "exact-float64", "dtype-epsilons", "same-dtype-reference"

struct Tolerance {
  double absolute;  // max |out - oracle| over rows that see at least one key
  const char* why;
};

// Policy::DtypeEpsilons for an output computed in `dtype`.
Tolerance attention_tolerance(DType dtype);
// The same for transformers' eager attention, whose softmax runs in float32 even for float64 inputs.
Tolerance eager_tolerance(DType dtype);

// Policy::ExactFloat64: anything above it is a wrong row, a wrong mask or a lost token.
constexpr double kExactTolerance = 1e-9;

// Policy::SameDtypeReference: error <= max(floor, factor * reference error). The kernels' rules
// per dtype below; the engine level's is engine::kEngineRule (engine/check.h).
struct ReferenceRule {
  double factor;
  double floor;
};
ReferenceRule reference_rule(DType dtype);

}  // namespace kvc
