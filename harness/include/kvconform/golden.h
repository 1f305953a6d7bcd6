// Golden fixtures (golden/fixtures/<transformers version>/<case>.json, written by golden/dump.py
// from the real transformers classes) replayed through the C++ reference: bitwise for cache
// contents, returned K/V, mask sizes and masks; the tolerance policy for attention outputs only.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "kvconform/cases.h"
#include "kvconform/mutants.h"
#include "kvconform/results.h"

namespace kvc::golden {

// The C++ reference run of a case, in the fixture's own JSON shape (format kvconform-fixture-v1,
// steps[].layers[] with mask_sizes, rows, sha256 of exact bytes, masks, attention hex), so that the
// two can be compared field by field and other tools can read either.
nlohmann::json run_case(const cases::Case& c, Profile profile, Mutation mutation = Mutation::None);

// The reference raised outside the phases transformers may raise in (a bug in the reference or a
// mutant): replay turns it into that case's FAIL naming the step and layer.
struct ReferenceFailure : std::runtime_error {
  ReferenceFailure(size_t step, size_t layer, const std::string& what)
      : std::runtime_error("step " + std::to_string(step) + " layer " + std::to_string(layer) +
                           ": the reference raised: " + what.substr(0, what.find('\n'))),
        step(step), layer(layer) {}
  size_t step, layer;
};

struct ReplayOptions {
  std::string fixtures_root = "golden/fixtures";
  std::string cases_root = "cases";
  std::string name_regex;  // over "<version>/<case>"; empty = all
  std::optional<DType> dtype;
  std::optional<LayerType> layer_type;  // cases with at least one layer of this type
  std::optional<CacheKind> cache;
  Mutation mutation = Mutation::None;  // replay a deliberately wrong reference: fixtures must then fail
};

// Transformers versions with fixtures under the root (one folder each), sorted.
std::vector<std::string> fixture_versions(const std::string& fixtures_root);

// One CaseResult per (version, case). A fixture that cannot be read, or whose case file changed
// since it was dumped, throws cases::CaseError (bad input: exit 2), never a silent skip.
std::vector<report::CaseResult> replay(const ReplayOptions& options);

// Compares one fixture with the reference run; the message names step, layer, field, index and
// both values. Status Deviation when transformers itself breaks an invariant and the reference
// reproduces it faithfully.
report::CaseResult compare(const nlohmann::json& fixture, const nlohmann::json& reference, const cases::Case& c);

}  // namespace kvc::golden
