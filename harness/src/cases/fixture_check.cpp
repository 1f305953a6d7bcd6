#include "kvconform/fixture_check.h"

#include <limits>

#include "kvconform/cases.h"
#include "kvconform/types.h"

namespace kvc::golden {

using nlohmann::json;

namespace {

const char* type_name(const json& j) { return j.type_name(); }

struct Checker {
  const std::string& path;

  [[noreturn]] void bad(const std::string& ptr, const std::string& message) const { throw cases::CaseError(path, ptr, message); }
  const json& object(const json& j, const std::string& ptr) const {
    if (!j.is_object()) bad(ptr, std::string("expected an object, found ") + type_name(j));
    return j;
  }
  const json& member(const json& obj, const char* key, const std::string& ptr) const {
    if (!obj.contains(key)) bad(ptr + "/" + key, "missing");
    return obj.at(key);
  }
  std::string string(const json& j, const std::string& ptr) const {
    if (!j.is_string()) bad(ptr, std::string("expected a string, found ") + type_name(j));
    return j.get<std::string>();
  }
  int64_t integer(const json& j, const std::string& ptr) const {
    if (!j.is_number_integer()) bad(ptr, std::string("expected an integer, found ") + type_name(j));
    if (j.is_number_unsigned() && j.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      bad(ptr, j.dump() + " is out of the 64-bit integer range");
    return j.get<int64_t>();
  }
  // [B, ., ., .] with entries >= 0; returns the element count, or -1 past 2^62 (no buffer is that big).
  int64_t shape(const json& j, const std::string& ptr) const {
    if (!j.is_array() || j.size() != 4) bad(ptr, "expected a shape of 4 integers");
    int64_t n = 1;
    for (size_t i = 0; i < 4; ++i) {
      const int64_t d = integer(j[i], ptr + "/" + std::to_string(i));
      if (d < 0) bad(ptr + "/" + std::to_string(i), "negative dimension " + std::to_string(d));
      if (n >= 0 && (d != 0 && n > (int64_t{1} << 62) / d)) n = -1;
      else if (n >= 0) n *= d;
    }
    return n;
  }

  // {dtype, shape, hex} (or {"error": ...}): the comparison decodes hex as shape x dtype values.
  void attention_output(const json& a, const std::string& ptr) const {
    if (a.is_null()) return;
    object(a, ptr);
    if (a.contains("error")) return;
    DType dtype;
    try {
      dtype = parse_dtype(string(member(a, "dtype", ptr), ptr + "/dtype"));
    } catch (const std::invalid_argument& e) {
      bad(ptr + "/dtype", e.what());
    }
    const int64_t n = shape(member(a, "shape", ptr), ptr + "/shape");
    const std::string hex = string(member(a, "hex", ptr), ptr + "/hex");
    const int64_t size = dtype == DType::Float64 ? 8 : dtype == DType::Float32 ? 4 : 2;
    // n <= 2^58 keeps n * size * 2 below 2^62: a product that wraps must not match a short hex.
    const bool representable = n >= 0 && n <= (int64_t{1} << 58);
    if (!representable || static_cast<uint64_t>(n * size * 2) != hex.size())
      bad(ptr + "/hex", std::to_string(hex.size()) + " hex digits, the shape and dtype make " +
                            (representable ? std::to_string(n * size * 2) : std::string("more than 2^59")));
    const size_t at = hex.find_first_not_of("0123456789abcdefABCDEF");
    if (at != std::string::npos) bad(ptr + "/hex", "not a hex digit at index " + std::to_string(at));
  }

  void layer(const json& l, const std::string& ptr) const {
    object(l, ptr);
    if (l.contains("skipped")) return;
    if (l.contains("mask_sizes")) {
      const json& m = object(l.at("mask_sizes"), ptr + "/mask_sizes");
      integer(member(m, "kv_length", ptr + "/mask_sizes"), ptr + "/mask_sizes/kv_length");
      integer(member(m, "kv_offset", ptr + "/mask_sizes"), ptr + "/mask_sizes/kv_offset");
    }
    if (l.contains("eager_mask")) {
      const json& m = object(l.at("eager_mask"), ptr + "/eager_mask");
      shape(member(m, "shape", ptr + "/eager_mask"), ptr + "/eager_mask/shape");
      string(member(m, "sha256", ptr + "/eager_mask"), ptr + "/eager_mask/sha256");
    }
    for (const char* kv : {"returned", "stored"})
      if (l.contains(kv) && !l.at(kv).is_null()) {
        const std::string p = ptr + "/" + kv;
        object(l.at(kv), p);
        shape(member(l.at(kv), "shape", p), p + "/shape");
      }
    if (l.contains("errors")) {
      const json& errors = l.at("errors");
      if (!errors.is_array()) bad(ptr + "/errors", std::string("expected an array, found ") + type_name(errors));
      for (size_t i = 0; i < errors.size(); ++i) {
        const std::string p = ptr + "/errors/" + std::to_string(i);
        object(errors[i], p);
        for (const char* f : {"phase", "type", "message"}) string(member(errors[i], f, p), p + "/" + f);
      }
    }
    if (l.contains("attention") && !l.at("attention").is_null()) {
      const json& a = object(l.at("attention"), ptr + "/attention");
      for (const char* backend : {"eager", "sdpa"})
        if (a.contains(backend)) attention_output(a.at(backend), ptr + "/attention/" + backend);
    }
  }
};

}  // namespace

void check_fixture(const json& fixture, const FixtureExpectation& expect, const std::string& path) {
  const Checker c{path};
  if (!fixture.is_object() || !fixture.contains("format") || fixture.at("format") != "kvconform-fixture-v1")
    c.bad("/format", "not a kvconform-fixture-v1 fixture");
  if (fixture.contains("transformers_version")) c.string(fixture.at("transformers_version"), "/transformers_version");
  if (!fixture.contains("steps") || !fixture.at("steps").is_array() || fixture.at("steps").size() != expect.steps)
    c.bad("/steps", "expected " + std::to_string(expect.steps) + " steps, as in " + expect.case_file);
  if (!expect.case_sha256.empty() && (!fixture.contains("case_sha256") || fixture.at("case_sha256") != expect.case_sha256))
    c.bad("/case_sha256", "the fixture was dumped from another version of " + expect.case_file +
                              " (case changed since); regenerate with `kvconform golden`");
  const json& steps = fixture.at("steps");
  for (size_t s = 0; s < steps.size(); ++s) {
    const std::string p = "/steps/" + std::to_string(s);
    const json& layers = c.member(c.object(steps[s], p), "layers", p);
    if (!layers.is_array() || layers.size() != expect.layers)
      c.bad(p + "/layers", "expected " + std::to_string(expect.layers) + " layers, as in " + expect.case_file);
    for (size_t l = 0; l < layers.size(); ++l) c.layer(layers[l], p + "/layers/" + std::to_string(l));
  }
}

void check_manifest(const json& manifest, const std::string& path) {
  const Checker c{path};
  c.object(manifest, "");
  const json& cases = c.object(c.member(manifest, "cases", ""), "/cases");
  for (auto it = cases.begin(); it != cases.end(); ++it) {
    const std::string p = "/cases/" + it.key();  // names are checked below: no '/' or '~' to escape
    if (it.key().empty() ||
        it.key().find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") != std::string::npos ||
        it.key() == "." || it.key() == "..")
      throw cases::CaseError(path, "/cases", "case name '" + it.key() + "' is not a file name");
    c.object(it.value(), p);
    if (it.value().contains("case_file")) c.string(it.value().at("case_file"), p + "/case_file");
  }
}

}  // namespace kvc::golden
