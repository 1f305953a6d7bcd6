#include "kvconform/cpu_pin.h"

#include <cstdlib>

namespace kvc::golden {

const std::vector<std::pair<const char*, const char*>>& cpu_pin() {
  static const std::vector<std::pair<const char*, const char*>> pin = {
      {"ATEN_CPU_CAPABILITY", "avx2"}, {"MKL_CBWR", "COMPATIBLE"}, {"ONEDNN_MAX_CPU_ISA", "AVX2"}};
  return pin;
}

std::vector<std::string> pin_cpu_kernels() {
  std::vector<std::string> overrides;
  for (const auto& [name, value] : cpu_pin()) {
    setenv(name, value, /*overwrite=*/0);
    if (const std::string now = std::getenv(name); now != value)
      overrides.push_back(std::string(name) + "=" + now + " (the pin: " + value + ")");
  }
  return overrides;
}

}  // namespace kvc::golden
