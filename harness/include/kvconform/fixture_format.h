// The golden fixture format (kvconform-fixture-v1, golden/README.md) checked before a replay compares
// anything: every field the comparison reads must be there with its JSON type, and the shape must
// follow the case (its step count and layer count), so that a missing or mistyped field is bad input
// named by file and JSON pointer (exit 2), never a skipped check or a crash. No LibTorch here.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace kvc::golden {

// Throws cases::CaseError(path, pointer, message) on the first problem.
void validate_fixture(const nlohmann::json& fixture, const std::string& path, size_t steps, size_t layers);

}  // namespace kvc::golden
