// libFuzzer: the golden fixture and manifest loaders (cases::parse_json, golden::check_fixture,
// golden::check_manifest) on arbitrary bytes. A bad fixture must end as cases::CaseError; once
// check_fixture accepts one, everything compare() reads must be there with the right type and size.
#include <cstddef>
#include <cstdint>
#include <string>

#include "kvconform/cases.h"
#include "kvconform/fixture_check.h"

using nlohmann::json;

namespace {

// What compare() does with an accepted fixture that needs no tensors: walk steps and layers, read
// the typed fields, and decode every attention output's hex into shape x dtype bytes.
void use(const json& f) {
  for (const json& step : f.at("steps"))
    for (const json& l : step.at("layers")) {
      if (l.contains("skipped")) continue;
      for (const json& e : l.value("errors", json::array()))
        (void)(e.at("phase").get<std::string>() + e.at("type").get<std::string>() + e.at("message").get<std::string>());
      if (l.contains("mask_sizes")) (void)l.at("mask_sizes").at("kv_length").get<int64_t>();
      if (l.contains("returned") && !l.at("returned").is_null()) (void)l.at("returned").at("shape").at(2);
      if (!l.contains("attention") || l.at("attention").is_null()) continue;
      for (const char* backend : {"eager", "sdpa"}) {
        const json a = l.at("attention").value(backend, json(nullptr));
        if (a.is_null() || a.contains("error")) continue;
        const std::string hex = a.at("hex").get<std::string>();
        size_t n = 1;
        for (const json& d : a.at("shape")) n *= d.get<size_t>();
        const std::string dtype = a.at("dtype").get<std::string>();
        const size_t width = dtype.find("64") != std::string::npos ? 8 : dtype.find("32") != std::string::npos ? 4 : 2;
        if (hex.size() != 2 * n * width) __builtin_trap();  // compare() would read past the reference's values
        for (size_t i = 0; i + 1 < hex.size(); i += 2) (void)std::stoi(hex.substr(i, 2), nullptr, 16);
      }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  json doc;
  try {
    doc = kvc::cases::parse_json(std::string(reinterpret_cast<const char*>(data), size), "fuzz.json");
  } catch (const kvc::cases::CaseError&) {
    return 0;
  }
  try {
    kvc::golden::check_manifest(doc, "manifest.json");
  } catch (const kvc::cases::CaseError&) {
  }
  // Expect what the fixture claims (the case is not at hand): the structure checks are what is fuzzed.
  kvc::golden::FixtureExpectation expect;
  if (doc.is_object() && doc.contains("steps") && doc.at("steps").is_array()) {
    expect.steps = doc.at("steps").size();
    const json& first = expect.steps ? doc.at("steps")[0] : json();
    if (first.is_object() && first.contains("layers") && first.at("layers").is_array())
      expect.layers = first.at("layers").size();
  }
  if (doc.is_object() && doc.contains("case_sha256") && doc.at("case_sha256").is_string())
    expect.case_sha256 = doc.at("case_sha256").get<std::string>();
  expect.case_file = "cases/fuzz.json";
  try {
    kvc::golden::check_fixture(doc, expect, "fuzz.json");
  } catch (const kvc::cases::CaseError&) {
    return 0;
  }
  use(doc);
  return 0;
}
