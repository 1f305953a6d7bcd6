// Conversions between kvconform's plain value vectors and LibTorch tensors.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

#include "kvconform/types.h"

namespace kvc {

c10::ScalarType scalar_type(DType d);
DType dtype_of(c10::ScalarType t);  // throws std::invalid_argument for a non-floating type
// Builds a float64 tensor of `shape` from row-major values and casts it to `dtype`.
at::Tensor from_values(const std::vector<double>& values, std::vector<int64_t> shape, DType dtype);
// Row-major values of any floating tensor, widened to double.
std::vector<double> values_of(const at::Tensor& t);

}  // namespace kvc
