// Golden fixtures (golden/fixtures/<transformers version>/<case>.json, written by golden/dump.py
// from the real transformers classes) replayed through the C++ reference: bitwise for cache
// contents, returned K/V, mask sizes and masks; the tolerance policy for attention outputs only.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kvconform/behaviours.h"
#include "kvconform/cases.h"
#include "kvconform/cpu_pin.h"
#include "kvconform/mutants.h"
#include "kvconform/results.h"

namespace kvc::golden {

// The record of the CPU kernels this process runs, as fixtures record theirs (`cpu_kernels`): each
// pin variable as the process has it (null where unset) and ATen's CPU capability in use (the
// string torch.backends.cpu.get_cpu_capability() returns). Read once, at the first call.
const nlohmann::json& cpu_kernels();

// The C++ reference run of a case, in the fixture's own JSON shape (format kvconform-fixture-v1,
// steps[].layers[] with mask_sizes, rows, sha256 of exact bytes, masks, attention hex), so that the
// two can be compared field by field and other tools can read either. The top-level "behaviours"
// is the record of the behaviours it ran under (behaviours.h), "cpu_kernels" that of its kernels.
nlohmann::json run_case(const Scenario& c, const Behaviours& behaviours, Mutation mutation = Mutation::None);

// The behaviours to replay a fixture with: its own "behaviours" record, which must equal
// behaviours_for_release(its transformers_version, else `version`); a fixture without a record
// (older format) gets the table's. `mismatch` is non-empty, naming the file, the release and each
// differing key, when the record and the table disagree or the release is unknown.
struct FixtureBehaviours {
  Behaviours behaviours;
  std::string mismatch;
};
FixtureBehaviours fixture_behaviours(const nlohmann::json& fixture, const std::string& version, const std::string& file);

// The FAIL result of a fixture whose behaviours record disagrees with the table.
report::CaseResult behaviours_failure(const nlohmann::json& fixture, const std::string& version, const Scenario& c,
                                      const std::string& mismatch);

struct ReplayOptions {
  std::string fixtures_root = "golden/fixtures";
  std::string cases_root = "cases";
  std::string name_regex;  // over "<version>/<case>"; empty = all
  // Over the registry id "golden/<version>/<case>" (report::id_of), checked before the case is
  // loaded; empty = every case.
  std::function<bool(const std::string& id)> select;
  bool list_only = false;  // replay nothing: one Pass result per selected case, for --list
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

// One selected fixture, read and checked for format (the same checks as replay), not replayed.
// With ReplayOptions::list_only only the names are set (and the scenario where a filter read it).
struct LoadedFixture {
  std::string version, name, path;
  const Scenario* scenario = nullptr;
  const nlohmann::json* fixture = nullptr;
  FixtureBehaviours behaviours;
};
// replay() is for_each_fixture + replay_one. The pointers live for the call of `visit` only.
void for_each_fixture(const ReplayOptions& options, const std::function<void(const LoadedFixture&)>& visit);
// The replay of one loaded fixture: check(), the FAIL of a behaviours mismatch or of a raise.
report::CaseResult replay_one(const LoadedFixture& fixture, Mutation mutation);

// Compares one fixture with the reference run; the message names step, layer, field, index and
// both values. Status Deviation when transformers itself breaks an invariant and the reference
// reproduces it faithfully.
report::CaseResult compare(const nlohmann::json& fixture, const nlohmann::json& reference, const Scenario& c);

// The same result as compare(fixture, run_case(c, behaviours, mutation), c), faster: the reference
// runs once and each layer-step's values are held against the fixture as they come, without
// building run_case's JSON. Only where something differs (a FAIL, a result within tolerance) does
// it build the record and let compare() say what and where. What replay and the bench use.
report::CaseResult check(const nlohmann::json& fixture, const Scenario& c, const Behaviours& behaviours,
                         Mutation mutation = Mutation::None);

}  // namespace kvc::golden
