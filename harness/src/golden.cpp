#include "kvconform/golden.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <regex>
#include <sstream>

#include "kvconform/attention.h"
#include "kvconform/fixture_check.h"
#include "kvconform/masks.h"
#include "kvconform/reference.h"
#include "kvconform/tensors.h"
#include "kvconform/tolerance.h"

namespace kvc::golden {

using nlohmann::json;

namespace {

// Exact little-endian bytes of a tensor, contiguous, as the dumper hashes and hex-encodes them.
std::string bytes_of(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.numel() * c.element_size());
}

std::string hex_of(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

json rows_json(const at::Tensor& tags) {
  json rows = json::array();
  for (double v : values_of(tags)) rows.push_back(v == 0 ? json(nullptr) : json(static_cast<int64_t>(v) - 1));
  return rows;
}

json tensor_pair(const at::Tensor& k, const at::Tensor& v, const at::Tensor& tags) {
  return {{"shape", k.sizes().vec()},
          {"rows", rows_json(tags)},
          {"k_sha256", cases::sha256_hex(bytes_of(k))},
          {"v_sha256", cases::sha256_hex(bytes_of(v))}};
}

json mask_rows(const at::Tensor& mask) {  // [B, 1, q, kv] -> per batch row, one '0'/'1' string per query
  json out = json::array();
  const at::Tensor m = mask.to(at::kBool).contiguous();
  const int64_t B = m.size(0), q = m.size(2), k = m.size(3);
  const bool* p = m.data_ptr<bool>();
  for (int64_t b = 0; b < B; ++b) {
    json rows = json::array();
    for (int64_t i = 0; i < q; ++i) {
      std::string s;
      for (int64_t j = 0; j < k; ++j) s += p[(b * q + i) * k + j] ? '1' : '0';
      rows.push_back(s);
    }
    out.push_back(rows);
  }
  return out;
}

json output_json(const at::Tensor& out) {  // transformers returns [B, q, H, D]
  const at::Tensor t = out.transpose(1, 2).contiguous();
  return {{"dtype", to_string(dtype_of(t.scalar_type()))}, {"shape", t.sizes().vec()}, {"hex", hex_of(bytes_of(t))}};
}

std::string repr(double v) {
  std::ostringstream os;
  os << std::setprecision(17) << v;
  return os.str();
}

}  // namespace

json run_case(const cases::Case& c, Profile profile) {
  json out = {{"format", "kvconform-fixture-v1"}, {"case", c.name}, {"case_sha256", c.sha256},
              {"profile", to_string(profile)}, {"dtype", to_string(c.dtype)}};
  std::vector<std::unique_ptr<CacheLayer>> layers, tags;
  for (size_t l = 0; l < c.layer_types.size(); ++l) {
    layers.push_back(make_layer(c.layer_spec(l), profile));
    tags.push_back(make_layer(c.layer_spec(l), profile));
  }
  std::vector<int64_t> failed_at(layers.size(), -1);
  const c10::ScalarType dtype = scalar_type(c.dtype);
  int64_t t0 = 0;
  json steps = json::array();
  for (size_t s = 0; s < c.steps.size(); ++s) {
    const int64_t q = c.steps[s].tokens;
    std::vector<int64_t> arange(static_cast<size_t>(q));
    for (int64_t i = 0; i < q; ++i) arange[i] = t0 + i;
    // 4.57 passes cache_position (the case's, or arange from the cumulative length); 5.x has none.
    std::optional<std::vector<int64_t>> positions;
    if (profile == Profile::V4_57) positions = c.steps[s].cache_position.value_or(arange);
    json js = {{"index", s}, {"tokens", q}, {"token_range", {t0, t0 + q}},
               {"cache_position", positions ? json(*positions) : json(nullptr)}};
    json jl_all = json::array();
    const at::Tensor tag = at::arange(t0 + 1, t0 + q + 1, at::kDouble).view({1, 1, q, 1});
    for (size_t l = 0; l < layers.size(); ++l) {
      CacheLayer& layer = *layers[l];
      json jl = {{"layer", l}};
      if (failed_at[l] >= 0) {
        jl["skipped"] = "layer failed at step " + std::to_string(failed_at[l]);
        jl_all.push_back(jl);
        continue;
      }
      const at::Tensor Q = from_values(c.step_inputs(inputs::kQuery, l, s), {c.batch, c.heads, q, c.head_dim}, c.dtype);
      const at::Tensor K = from_values(c.step_inputs(inputs::kKey, l, s), {c.batch, c.kv_heads, q, c.head_dim}, c.dtype);
      const at::Tensor V = from_values(c.step_inputs(inputs::kValue, l, s), {c.batch, c.kv_heads, q, c.head_dim}, c.dtype);
      jl["cumulative_length_before"] = layer.seq_length();
      const MaskSizes sizes = layer.get_mask_sizes(q);
      jl["mask_sizes"] = {{"kv_length", sizes.kv_length}, {"kv_offset", sizes.kv_offset}};
      masks::MaskQuery m;
      m.type = layer.spec().type;
      m.window = c.window;
      m.batch = c.batch;
      m.query_positions = positions.value_or(arange);
      m.sizes = sizes;
      m.left_padding = c.left_padding;
      m.tokens_so_far = t0 + q;
      m.profile = profile;
      m.allow_skip = masks::allow_is_causal_skip(profile, c.cache, q);
      jl["q_positions"] = m.query_positions;
      jl["allow_is_causal_skip"] = m.allow_skip;
      const at::Tensor boolean = masks::boolean_mask(m);
      const bool skipped = masks::can_skip(m);
      jl["sdpa_mask_skipped"] = skipped;
      jl["sdpa_mask"] = skipped ? json(nullptr) : mask_rows(boolean);
      jl["bool_mask"] = mask_rows(boolean);
      const at::Tensor additive = masks::additive_mask(boolean, dtype);
      jl["eager_mask"] = {{"dtype", to_string(c.dtype)},
                          {"shape", additive.sizes().vec()},
                          {"sha256", cases::sha256_hex(bytes_of(additive))},
                          {"masked_value", repr(additive.numel() ? additive.min().item<double>() : 0.0)}};
      json errors = json::array();
      KV kv;
      try {
        kv = layer.update(K, V, positions);
      } catch (const std::exception& e) {
        errors.push_back({{"phase", "update"}, {"type", "std::exception"}, {"message", e.what()}});
        failed_at[l] = static_cast<int64_t>(s);
        jl["cumulative_length_after"] = nullptr;
        jl["returned"] = nullptr;
        jl["stored"] = nullptr;
        jl["attention"] = {{"eager", nullptr}, {"sdpa", nullptr}};
        jl["errors"] = errors;
        jl_all.push_back(jl);
        continue;
      }
      const KV tkv = tags[l]->update(tag, tag, positions);
      jl["cumulative_length_after"] = layer.seq_length();
      jl["returned"] = tensor_pair(kv.keys, kv.values, tkv.keys);
      jl["stored"] = tensor_pair(layer.keys(), layer.values(), tags[l]->keys());
      json attention = {{"eager", nullptr}, {"sdpa", nullptr}};
      try {
        attention["eager"] = output_json(attention::eager(Q, kv.keys, kv.values, additive));
      } catch (const std::exception& e) {
        errors.push_back({{"phase", "attention_eager"}, {"type", "std::exception"}, {"message", e.what()}});
      }
      try {
        attention["sdpa"] = output_json(
            attention::sdpa(Q, kv.keys, kv.values, skipped ? std::nullopt : std::optional<at::Tensor>(boolean)));
      } catch (const std::exception& e) {
        errors.push_back({{"phase", "attention_sdpa"}, {"type", "std::exception"}, {"message", e.what()}});
      }
      jl["attention"] = attention;
      jl["errors"] = errors;
      jl_all.push_back(jl);
    }
    js["layers"] = jl_all;
    steps.push_back(js);
    t0 += q;
  }
  out["steps"] = steps;
  return out;
}

namespace {

// Decodes an attention output's hex into doubles (any of the four dtypes).
std::vector<double> decode(const json& j) {
  const std::string hex = j.at("hex").get<std::string>();
  std::string bytes(hex.size() / 2, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  const c10::ScalarType t = scalar_type(parse_dtype(j.at("dtype").get<std::string>()));
  const int64_t n = static_cast<int64_t>(bytes.size()) / static_cast<int64_t>(c10::elementSize(t));
  at::Tensor raw = at::empty({n}, at::TensorOptions().dtype(t));
  std::memcpy(raw.data_ptr(), bytes.data(), bytes.size());
  return values_of(raw);
}

struct Mismatch {
  std::string where, field, expected, got;
};

std::string show(const json& j) {
  std::string s = j.dump();
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

// The first difference between two JSON values, as a pointer-like field path ("returned.rows[3]").
std::optional<Mismatch> first_difference(const json& expected, const json& got, const std::string& field) {
  if (expected.is_array() && got.is_array()) {
    if (expected.size() != got.size())
      return Mismatch{"", field + ".length", std::to_string(expected.size()), std::to_string(got.size())};
    for (size_t i = 0; i < expected.size(); ++i)
      if (auto m = first_difference(expected[i], got[i], field + "[" + std::to_string(i) + "]")) return m;
    return std::nullopt;
  }
  if (expected.is_object() && got.is_object()) {
    for (auto it = expected.begin(); it != expected.end(); ++it) {
      if (!got.contains(it.key())) return Mismatch{"", field + "." + it.key(), show(it.value()), "(missing)"};
      if (auto m = first_difference(it.value(), got.at(it.key()), field + "." + it.key())) return m;
    }
    return std::nullopt;
  }
  if (expected != got) return Mismatch{"", field, show(expected), show(got)};
  return std::nullopt;
}

std::set<std::string> error_phases(const json& layer) {
  std::set<std::string> phases;
  for (const json& e : layer.value("errors", json::array())) phases.insert(e.at("phase").get<std::string>());
  return phases;
}

}  // namespace

report::CaseResult compare(const json& fixture, const json& reference, const cases::Case& c) {
  report::CaseResult r;
  r.suite = "golden";
  r.name = fixture.value("transformers_version", std::string("?")) + "/" + c.name;
  r.backend = "reference";
  r.dtype = to_string(c.dtype);
  std::string layers;
  for (LayerType t : c.layer_types) layers += std::string(layers.empty() ? "" : "+") + to_string(t);
  r.params = std::string(to_string(c.cache)) + "," + layers + (c.window ? ",W=" + std::to_string(c.window) : "") +
             (c.max_cache_len ? ",L=" + std::to_string(c.max_cache_len) : "") + ",steps=" + std::to_string(c.steps.size());
  const Tolerance tol = attention_tolerance(c.dtype), eager_tol = eager_tolerance(c.dtype);
  std::vector<std::string> deviations, notes;
  double worst = 0;
  const json& fsteps = fixture.at("steps");
  const json& rsteps = reference.at("steps");
  if (fsteps.size() != rsteps.size()) {
    r.status = report::Status::Fail;
    r.message = "fixture has " + std::to_string(fsteps.size()) + " steps, the case " + std::to_string(rsteps.size());
    return r;
  }
  static const char* exact_fields[] = {"skipped",   "cumulative_length_before", "mask_sizes",   "q_positions",
                                       "allow_is_causal_skip", "sdpa_mask_skipped", "bool_mask", "sdpa_mask",
                                       "cumulative_length_after", "returned", "stored"};
  for (size_t s = 0; s < fsteps.size(); ++s) {
    for (size_t l = 0; l < fsteps[s].at("layers").size(); ++l) {
      const json& fl = fsteps[s].at("layers")[l];
      const json& rl = rsteps[s].at("layers").at(l);
      const std::string where = "step " + std::to_string(s) + " layer " + std::to_string(l) + " (" +
                                to_string(c.layer_types[l]) + ")";
      auto fail = [&](const std::string& field, const std::string& expected, const std::string& got) {
        r.status = report::Status::Fail;
        r.message = where + ": " + field + ": transformers " + expected + ", reference " + got;
        return r;
      };
      for (const char* f : exact_fields) {
        if (!fl.contains(f) && !rl.contains(f)) continue;
        const json fe = fl.value(f, json(nullptr)), re = rl.value(f, json(nullptr));
        if (auto m = first_difference(fe, re, f)) return fail(m->field, m->expected, m->got);
      }
      if (fl.contains("eager_mask")) {
        const json& fe = fl.at("eager_mask");
        const json& re = rl.at("eager_mask");
        if (auto m = first_difference(fe.at("shape"), re.at("shape"), "eager_mask.shape")) return fail(m->field, m->expected, m->got);
        if (fe.at("sha256") != re.at("sha256"))
          return fail("eager_mask.sha256", show(fe.at("sha256")), show(re.at("sha256")));
      }
      if (error_phases(fl) != error_phases(rl)) {
        std::string fe, re;
        for (const auto& p : error_phases(fl)) fe += p + " ";
        for (const auto& p : error_phases(rl)) re += p + " ";
        return fail("errors (phases)", "[" + fe + "]", "[" + re + "]");
      }
      for (const json& e : fl.value("errors", json::array()))
        notes.push_back(where + ": transformers raised " + e.at("type").get<std::string>() + " in " +
                        e.at("phase").get<std::string>() + " (" + e.at("message").get<std::string>() +
                        "); the reference raises there too");
      if (fl.contains("returned") && !fl.at("returned").is_null() && fl.contains("mask_sizes") &&
          fl.at("returned").at("shape").at(2) != fl.at("mask_sizes").at("kv_length"))
        deviations.push_back(where + ": update returned " + fl.at("returned").at("shape").at(2).dump() +
                             " rows but get_mask_sizes said kv_length " + fl.at("mask_sizes").at("kv_length").dump());
      if (!fl.contains("attention") || fl.at("attention").is_null()) continue;
      for (const char* backend : {"eager", "sdpa"}) {
        // An attention that raised is null or {"error": ...}; the raise itself is compared via errors.
        auto has_output = [&](const json& layer) {
          const json a = layer.at("attention").value(backend, json(nullptr));
          return !a.is_null() && !a.contains("error");
        };
        const bool f_has = has_output(fl), r_has = has_output(rl);
        if (f_has != r_has)
          return fail(std::string("attention.") + backend, f_has ? "an output" : "an error", r_has ? "an output" : "an error");
        if (!f_has) continue;
        const json& fa = fl.at("attention").at(backend);
        const json& ra = rl.at("attention").at(backend);
        if (auto m = first_difference(fa.at("shape"), ra.at("shape"), std::string("attention.") + backend + ".shape"))
          return fail(m->field, m->expected, m->got);
        const std::vector<double> e = decode(fa), g = decode(ra);
        const double bound = std::string(backend) == "eager" ? eager_tol.absolute : tol.absolute;
        for (size_t i = 0; i < e.size(); ++i) {
          const bool en = std::isnan(e[i]), gn = std::isnan(g[i]);
          const double d = en || gn ? (en == gn ? 0.0 : INFINITY) : std::abs(e[i] - g[i]);
          worst = std::max(worst, d);
          if (d > bound)
            return fail(std::string("attention.") + backend + "[" + std::to_string(i) + "]", repr(e[i]),
                        repr(g[i]) + " (|diff| " + repr(d) + " > tolerance " + repr(bound) + ")");
        }
      }
    }
  }
  std::ostringstream detail;
  detail << "max |attention difference| " << std::setprecision(3) << worst << " (tolerance " << tol.absolute << ")";
  for (const std::string& n : notes) detail << "\n" << n;
  for (const std::string& d : deviations) detail << "\nupstream deviation: " << d;
  r.detail = detail.str();
  if (!deviations.empty()) {
    r.status = report::Status::Deviation;
    r.message = "reproduces an upstream deviation: " + deviations.front();
  }
  return r;
}

std::vector<std::string> fixture_versions(const std::string& root) {
  std::error_code ec;
  if (!std::filesystem::is_directory(root, ec)) throw cases::CaseError(root, "", "no fixtures folder here");
  std::vector<std::string> versions;
  for (const auto& e : std::filesystem::directory_iterator(root))
    if (e.is_directory() && std::filesystem::exists(e.path() / "manifest.json")) versions.push_back(e.path().filename().string());
  std::sort(versions.begin(), versions.end());
  return versions;
}

namespace {
// A syntax error or an out-of-range number is named by file and JSON pointer.
json read_json(const std::string& path) { return cases::parse_json(cases::read_file(path), path); }

bool selected(const cases::Case& c, const std::string& name, const ReplayOptions& o) {
  if (!o.name_regex.empty() && !std::regex_search(name, std::regex(o.name_regex))) return false;
  if (o.dtype && c.dtype != *o.dtype) return false;
  if (o.cache && c.cache != *o.cache) return false;
  if (o.layer_type && std::find(c.layer_types.begin(), c.layer_types.end(), *o.layer_type) == c.layer_types.end())
    return false;
  return true;
}
}  // namespace

std::vector<report::CaseResult> replay(const ReplayOptions& o) {
  std::vector<report::CaseResult> results;
  for (const std::string& version : fixture_versions(o.fixtures_root)) {
    const std::string dir = o.fixtures_root + "/" + version;
    const json manifest = read_json(dir + "/manifest.json");
    check_manifest(manifest, dir + "/manifest.json");
    const Profile profile = parse_profile(version);
    for (const auto& [name, entry] : manifest.at("cases").items()) {
      std::string case_file = entry.value("case_file", "cases/" + name + ".json");
      if (case_file.rfind("cases/", 0) == 0) case_file = o.cases_root + case_file.substr(5);
      const cases::Case c = cases::load_case(case_file);
      if (!selected(c, version + "/" + name, o)) continue;
      const std::string fixture_path = dir + "/" + name + ".json";
      const json fixture = read_json(fixture_path);
      check_fixture(fixture, {c.steps.size(), c.layer_types.size(), c.sha256, case_file}, fixture_path);
      try {
        results.push_back(compare(fixture, run_case(c, profile), c));
      } catch (const nlohmann::json::exception& e) {
        throw cases::CaseError(fixture_path, "", std::string("malformed fixture: ") + e.what());
      }
      results.back().reproduce = "kvconform run --golden-only --case '^" + version + "/" + name + "$'";
    }
  }
  return results;
}

}  // namespace kvc::golden
