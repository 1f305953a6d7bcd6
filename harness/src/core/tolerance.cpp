#include "kvconform/tolerance.h"

namespace kvc {

const char* to_string(Policy p) {
  switch (p) {
    case Policy::Bitwise: return "bitwise";
    case Policy::ExactFloat64: return "exact-float64";
    case Policy::DtypeEpsilons: return "dtype-epsilons";
    case Policy::SameDtypeReference: return "same-dtype-reference";
  }
  return "?";
}

// Inputs are exact in every dtype (k/128) and outputs lie in [-1, 1], so the error is the dtype's
// rounding of scores, probabilities and output: about one epsilon of the dtype. Each bound is 8
// epsilons; a 1000-case campaign (seed 20250917) saw at most 0.6 (bf16, fp16) and 1.3 (fp32)
// epsilons (docs/backends.md, "Tolerances of the property campaign and golden replay"). Wrong rows
// or masks are caught at 1e-9 by the float64 check.
Tolerance attention_tolerance(DType dtype) {
  switch (dtype) {
    case DType::Float64: return {1e-12, "float64: summation order only"};
    case DType::Float32: return {8 * 1.1920929e-07, "float32: 8 epsilons (2^-23)"};
    case DType::Float16: return {8 * 9.765625e-04, "float16: 8 epsilons (2^-10)"};
    case DType::BFloat16: return {8 * 7.8125e-03, "bfloat16: 8 epsilons (2^-7)"};
  }
  return {0, ""};
}

Tolerance eager_tolerance(DType dtype) {
  // transformers' eager attention computes its softmax in float32 whatever the input dtype.
  return attention_tolerance(dtype == DType::Float64 ? DType::Float32 : dtype);
}

// Measured and explained in docs/backends.md ("Tolerance policy").
ReferenceRule reference_rule(DType dtype) {
  switch (dtype) {
    case DType::Float64: return {4.0, 1e-12};  // eager is judged as float32 (Backend::judged_as)
    case DType::Float32: return {4.0, 1e-6};
    case DType::Float16: return {4.0, 2e-3};
    case DType::BFloat16: return {4.0, 1.6e-2};
  }
  return {0, 0};
}

}  // namespace kvc
