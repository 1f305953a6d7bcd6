// StepFailure without the step driver's tensors, for code that reports it (golden_compare.cpp).
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

namespace kvc {

// The reference raised where transformers does not (a bug in the reference or a mutant); checks
// turn it into their case's FAIL naming step and layer.
struct StepFailure : std::runtime_error {
  StepFailure(size_t step, size_t layer, const std::string& what)
      : std::runtime_error("step " + std::to_string(step) + " layer " + std::to_string(layer) +
                           ": the reference raised: " + what.substr(0, what.find('\n'))),
        step(step),
        layer(layer) {}
  size_t step, layer;
};

}  // namespace kvc
