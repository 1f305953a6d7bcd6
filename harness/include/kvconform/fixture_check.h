// The structure of a golden fixture (golden/README.md "Fixture format", kvconform-fixture-v1) and of
// a fixtures folder's manifest.json, checked before a fixture is compared: a malformed or hostile
// fixture is bad input, named by file and JSON pointer (exit 2), never an exception from deep inside
// the comparison or a read past a buffer. No LibTorch here (fuzzed by fuzz/fixture_fuzz.cpp).
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>

namespace kvc::golden {

// What the fixture must match: the case it was dumped from.
struct FixtureExpectation {
  size_t steps = 0, layers = 0;
  std::string case_sha256;  // empty: not checked (replay/explain of a case being edited)
  std::string case_file;    // named in messages
};

// Throws cases::CaseError(path, pointer, message) at the first problem: not kvconform-fixture-v1, a
// step or layer count other than the case's, a case_sha256 of another version of the case file, a
// field of the wrong type, an attention output whose hex does not hold shape x dtype bytes.
void check_fixture(const nlohmann::json& fixture, const FixtureExpectation& expect, const std::string& path);

// manifest.json: an object whose "cases" maps case names ([A-Za-z0-9_.-]+, no path) to objects with
// an optional string "case_file". Throws cases::CaseError naming the file and pointer.
void check_manifest(const nlohmann::json& manifest, const std::string& path);

}  // namespace kvc::golden
