#include "kvconform/fixture_format.h"

#include <functional>

#include "kvconform/cases.h"

namespace kvc::golden {

namespace {
using nlohmann::json;
using Kind = std::function<bool(const json&)>;

const Kind kString = [](const json& j) { return j.is_string(); };
const Kind kInt = [](const json& j) { return j.is_number_integer(); };
const Kind kBool = [](const json& j) { return j.is_boolean(); };
const Kind kArray = [](const json& j) { return j.is_array(); };
const Kind kObject = [](const json& j) { return j.is_object(); };
Kind or_null(const Kind& k) {
  return [k](const json& j) { return j.is_null() || k(j); };
}

struct Checker {
  const std::string& path;

  [[noreturn]] void bad(const std::string& pointer, const std::string& message) const {
    throw cases::CaseError(path, pointer, message);
  }
  const json& need(const json& obj, const std::string& at, const std::string& key, const Kind& kind, const char* expected) const {
    if (!obj.is_object()) bad(at, "expected an object");
    if (!obj.contains(key)) bad(at + "/" + key, "missing (the comparison needs it)");
    const json& v = obj.at(key);
    if (!kind(v)) bad(at + "/" + key, std::string("expected ") + expected + ", got " + v.type_name());
    return v;
  }
  void tensor_pair(const json& obj, const std::string& at, const std::string& key) const {
    const json& t = need(obj, at, key, or_null(kObject), "an object or null");
    if (t.is_null()) return;
    const std::string p = at + "/" + key;
    need(t, p, "shape", kArray, "an array");
    need(t, p, "rows", or_null(kArray), "an array or null");
    need(t, p, "k_sha256", kString, "a string");
    need(t, p, "v_sha256", kString, "a string");
  }
  // A call step's layer (reset, crop, activate_past_recording): its counts, stored rows,
  // attributes and what the call raised.
  void call_layer_step(const json& l, const std::string& at) const {
    if (!l.is_object()) bad(at, "expected an object");
    if (l.contains("skipped")) {
      need(l, at, "skipped", kString, "a string");
      return;
    }
    for (const char* k : {"cumulative_length_before", "cumulative_length_after"}) need(l, at, k, kInt, "an integer");
    tensor_pair(l, at, "stored");
    const json& a = need(l, at, "attributes", kObject, "an object");
    need(a, at + "/attributes", "is_croppable", or_null(kBool), "a boolean or null");
    need(a, at + "/attributes", "max_length", kInt, "an integer");
    need(a, at + "/attributes", "is_compileable", kBool, "a boolean");
    const json& errors = need(l, at, "errors", kArray, "an array");
    for (size_t i = 0; i < errors.size(); ++i)
      for (const char* k : {"phase", "type", "message"})
        need(errors[i], at + "/errors/" + std::to_string(i), k, kString, "a string");
  }
  void layer_step(const json& l, const std::string& at) const {
    if (!l.is_object()) bad(at, "expected an object");
    if (l.contains("skipped")) {
      need(l, at, "skipped", kString, "a string");
      return;
    }
    for (const char* k : {"cumulative_length_before", "cumulative_length_after"})
      need(l, at, k, or_null(kInt), "an integer or null");
    const json& sizes = need(l, at, "mask_sizes", or_null(kObject), "an object or null");
    if (!sizes.is_null())
      for (const char* k : {"kv_length", "kv_offset"}) need(sizes, at + "/mask_sizes", k, kInt, "an integer");
    need(l, at, "q_positions", kArray, "an array");
    need(l, at, "allow_is_causal_skip", kBool, "a boolean");
    need(l, at, "mask_function", kObject, "an object");
    need(l, at, "sdpa_mask_skipped", or_null(kBool), "a boolean or null");
    need(l, at, "sdpa_mask", or_null(kArray), "an array or null");
    need(l, at, "bool_mask", or_null(kArray), "an array or null");
    const json& em = need(l, at, "eager_mask", or_null(kObject), "an object or null");
    if (!em.is_null()) {
      need(em, at + "/eager_mask", "dtype", kString, "a string");
      need(em, at + "/eager_mask", "shape", kArray, "an array");
      need(em, at + "/eager_mask", "sha256", kString, "a string");
      need(em, at + "/eager_mask", "masked_value", kString, "a string");
    }
    tensor_pair(l, at, "returned");
    tensor_pair(l, at, "stored");
    const json& att = need(l, at, "attention", kObject, "an object");
    for (const char* b : {"eager", "sdpa"}) {
      const json& a = need(att, at + "/attention", b, or_null(kObject), "an object or null");
      if (a.is_null() || a.contains("error")) continue;
      const std::string p = at + "/attention/" + b;
      need(a, p, "dtype", kString, "a string");
      need(a, p, "shape", kArray, "an array");
      const json& hex = need(a, p, "hex", kString, "a string");
      const std::string& h = hex.get_ref<const std::string&>();
      if (h.size() % 2 != 0 || h.find_first_not_of("0123456789abcdef") != std::string::npos)
        bad(p + "/hex", "expected lowercase hex digits in pairs");
    }
    const json& errors = need(l, at, "errors", kArray, "an array");
    for (size_t i = 0; i < errors.size(); ++i)
      for (const char* k : {"phase", "type", "message"})
        need(errors[i], at + "/errors/" + std::to_string(i), k, kString, "a string");
    if (l.contains("mask_builders")) mask_builders(l.at("mask_builders"), at + "/mask_builders");
    if (l.contains("mask_builders_absent")) {  // {layer type: a builder's record} (absent_layer_types)
      const json& absent = need(l, at, "mask_builders_absent", kObject, "an object");
      for (auto it = absent.begin(); it != absent.end(); ++it)
        mask_builders(it.value(), at + "/mask_builders_absent/" + it.key());
    }
  }
  // The release's own builders' masks (dumper 1.4.0 on; golden/README.md "mask_builders").
  void mask_builders(const json& b, const std::string& at) const {
    if (!b.is_object()) bad(at, "expected an object");
    need(b, at, "builder", kString, "a string");
    need(b, at, "sized_from", or_null(kInt), "an integer or null");  // null: no layer asked (cases/README.md, Mask builder calls)
    need(b, at, "query_offset_from", or_null(kInt), "an integer or null");
    if (b.contains("skipped")) {
      need(b, at, "skipped", kString, "a string");
      return;
    }
    const json& sdpa = need(b, at, "sdpa", kObject, "an object");
    if (!sdpa.contains("error")) {
      need(sdpa, at + "/sdpa", "skipped", kBool, "a boolean");
      need(sdpa, at + "/sdpa", "rows", or_null(kArray), "an array or null");
    }
    const json& eager = need(b, at, "eager", kObject, "an object");
    if (!eager.contains("error")) {
      need(eager, at + "/eager", "shape", kArray, "an array");
      need(eager, at + "/eager", "sha256", kString, "a string");
    }
    const json& flex = need(b, at, "flex", kObject, "an object");
    if (!flex.contains("error")) {
      need(flex, at + "/flex", "shape", kArray, "an array");
      need(flex, at + "/flex", "rows", kArray, "an array");
    }
    if (b.contains("flash")) {  // mask_builder_call.flash: flash_attention_mask's 2D mask or none
      const json& flash = need(b, at, "flash", kObject, "an object");
      if (!flash.contains("error")) need(flash, at + "/flash", "mask", or_null(kArray), "an array or null");
    }
    if (b.contains("unregistered")) {  // mask_builder_call.unregistered_attention: none, or a 4D mask passed through
      const json& u = need(b, at, "unregistered", kObject, "an object");
      if (u.contains("shape") || u.contains("sha256")) {
        need(u, at + "/unregistered", "shape", kArray, "an array");
        need(u, at + "/unregistered", "sha256", kString, "a string");
      } else if (!u.contains("error")) {
        need(
            u, at + "/unregistered", "mask", [](const json& j) { return j.is_null(); }, "null");
      }
    }
    for (const char* impl : {"sdpa", "eager", "flex", "flash", "unregistered"})  // a builder's raise: its phase and type
      if (b.contains(impl) && b.at(impl).contains("error"))
        for (const char* k : {"phase", "type"}) need(b.at(impl).at("error"), at + "/" + impl + "/error", k, kString, "a string");
  }
};
}  // namespace

void validate_fixture(const json& f, const std::string& path, size_t steps, size_t layers) {
  const Checker c{path};
  if (!f.is_object()) c.bad("", "expected a JSON object");
  if (f.value("format", std::string()) != "kvconform-fixture-v1") c.bad("/format", "not a kvconform-fixture-v1 fixture");
  for (const char* k : {"case", "case_sha256", "transformers_version", "torch_version", "dtype"})
    c.need(f, "", k, kString, "a string");
  const json& ls = c.need(f, "", "layers", kArray, "an array");
  if (ls.size() != layers)
    c.bad("/layers", "has " + std::to_string(ls.size()) + " layers, the case's layer_types " + std::to_string(layers));
  const json& ss = c.need(f, "", "steps", kArray, "an array");
  if (ss.size() != steps) c.bad("/steps", "has " + std::to_string(ss.size()) + " steps, the case " + std::to_string(steps));
  for (size_t s = 0; s < ss.size(); ++s) {
    const std::string at = "/steps/" + std::to_string(s);
    c.need(ss[s], at, "index", kInt, "an integer");
    c.need(ss[s], at, "tokens", kInt, "an integer");
    c.need(ss[s], at, "token_range", kArray, "an array");
    c.need(ss[s], at, "cache_position", or_null(kArray), "an array or null");
    c.need(ss[s], at, "attention_mask_2d", or_null(kArray), "an array or null");
    const json& sl = c.need(ss[s], at, "layers", kArray, "an array");
    if (sl.size() != layers)
      c.bad(at + "/layers", "has " + std::to_string(sl.size()) + " layers, the case's layer_types " + std::to_string(layers));
    const bool call = ss[s].contains("call");
    if (call) {
      const json& m = c.need(ss[s], at, "call", kObject, "an object");
      c.need(m, at + "/call", "method", kString, "a string");
      c.need(m, at + "/call", "argument", or_null(kInt), "an integer or null");
    }
    for (size_t l = 0; l < sl.size(); ++l)
      call ? c.call_layer_step(sl[l], at + "/layers/" + std::to_string(l))
           : c.layer_step(sl[l], at + "/layers/" + std::to_string(l));
  }
}

}  // namespace kvc::golden
