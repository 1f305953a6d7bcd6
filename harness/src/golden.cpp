#include "kvconform/golden.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>
#if __has_include(<torch/headeronly/version.h>)
#include <torch/headeronly/version.h>
#else
#include <torch/version.h>  // LibTorch before 2.9
#endif

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <regex>
#include <sstream>

#include "kvconform/attention.h"
#include "kvconform/fixture_check.h"
#include "kvconform/fastpath.h"
#include "kvconform/fixture_format.h"
#include "kvconform/masks.h"
#include "kvconform/positions.h"
#include "kvconform/reference.h"
#include "kvconform/step_driver.h"
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

json rows_json(const positions::Rows& tokens) {
  json rows = json::array();
  for (const auto& t : tokens) rows.push_back(t ? json(*t) : json(nullptr));
  return rows;
}

json tensor_pair(const at::Tensor& k, const at::Tensor& v, const positions::Rows& tokens) {
  return {{"shape", k.sizes().vec()},
          {"rows", rows_json(tokens)},
          {"k_sha256", cases::sha256_hex(bytes_of(k))},
          {"v_sha256", cases::sha256_hex(bytes_of(v))}};
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

// Python's repr(float): the shortest digits that round-trip, scientific below 1e-4 and from 1e16 on,
// a trailing ".0" on integral values ("-65504.0", "-3.4028234663852886e+38").
std::string python_repr(double v) {
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  const std::string sci(buf, res.ptr);
  const size_t e = sci.find('e');
  const int exp = std::stoi(sci.substr(e + 1));
  std::string mant = sci.substr(0, e), sign;
  if (mant[0] == '-') sign = "-", mant = mant.substr(1);
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  if (exp < -4 || exp >= 16) {
    char tail[16];
    std::snprintf(tail, sizeof tail, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    return sign + digits.substr(0, 1) + (digits.size() > 1 ? "." + digits.substr(1) : "") + tail;
  }
  if (exp < 0) return sign + "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  const size_t whole = static_cast<size_t>(exp) + 1;
  if (digits.size() <= whole) return sign + digits + std::string(whole - digits.size(), '0') + ".0";
  return sign + digits.substr(0, whole) + "." + digits.substr(whole);
}

// finfo(dtype).min as Python prints it, the additive mask's masked value.
std::string masked_value(DType dtype) {
  static const std::string values[] = {
      python_repr(masks::additive_mask(at::zeros({}, at::kBool), at::kFloat).item<double>()),
      python_repr(masks::additive_mask(at::zeros({}, at::kBool), at::kHalf).item<double>()),
      python_repr(masks::additive_mask(at::zeros({}, at::kBool), at::kBFloat16).item<double>()),
      python_repr(masks::additive_mask(at::zeros({}, at::kBool), at::kDouble).item<double>())};
  return values[static_cast<int>(dtype)];
}

// What Python would have raised: PyTorch maps c10::IndexError to IndexError, c10::ValueError to
// ValueError, c10::TypeError to TypeError and any other c10::Error to RuntimeError, with the same text
// (LibTorch is the same library under both), so those messages are compared exactly. kvconform's own
// checks name the Python type they stand for; their wording is kvconform's, so only the type counts.
json error_record(const std::string& phase, const std::exception& e) {
  std::string type = "RuntimeError", message;
  bool exact = false;
  // c10::Error::what() symbolizes a C++ backtrace (dladdr over every frame): a fifth of a replay's
  // time when asked for every raise, and never part of the message Python shows.
  if (const auto* c = dynamic_cast<const c10::Error*>(&e)) {
    message = c->what_without_backtrace();
    exact = true;
    if (dynamic_cast<const c10::IndexError*>(&e)) type = "IndexError";
    else if (dynamic_cast<const c10::ValueError*>(&e)) type = "ValueError";
    else if (dynamic_cast<const c10::TypeError*>(&e)) type = "TypeError";
  } else {
    message = e.what();
    if (dynamic_cast<const std::out_of_range*>(&e)) type = "IndexError";
    else if (dynamic_cast<const std::invalid_argument*>(&e)) type = "ValueError";
  }
  if (message.size() > 600) message = message.substr(0, 600) + "...";  // golden/dump.py's MAX_MESSAGE
  return {{"phase", phase}, {"type", type}, {"message", message}, {"message_exact", exact}};
}

// The class transformers instantiates for a layer and what dump.py records about it.
json layer_record(size_t index, const LayerSpec& spec, const Scenario& c, const Behaviours& behaviours) {
  const bool is_static = spec.cache == CacheKind::Static;
  std::string cls = is_static ? (spec.is_sliding() ? "StaticSlidingWindowLayer" : "StaticLayer")
                              : (spec.is_sliding() ? "DynamicSlidingWindowLayer" : "DynamicLayer");
  if (is_static && spec.is_sliding() && behaviours.sliding_layer == SlidingLayer::PreMerge)
    cls = spec.type == LayerType::Chunked ? "ChunkedSlidingLayer" : "SlidingWindowLayer";
  return {{"index", index},
          {"type", to_string(spec.type)},
          {"class", cls},
          {"window", spec.is_sliding() ? json(spec.window) : json(nullptr)},
          {"max_cache_len", c.max_cache_len > 0 ? json(c.max_cache_len) : json(nullptr)},
          {"capacity", is_static ? json(positions::capacity(spec)) : json(nullptr)},
          {"is_compileable", is_static}};
}

// The 2D attention_mask as transformers sees it at this step: leading zeros, then ones.
json attention_mask_2d(const Scenario& c, int64_t end) {
  if (!c.left_padding) return nullptr;
  json rows = json::array();
  for (int64_t lp : *c.left_padding) {
    const int64_t zeros = std::min(lp, end);
    rows.push_back(std::string(static_cast<size_t>(zeros), '0') + std::string(static_cast<size_t>(end - zeros), '1'));
  }
  return rows;
}

json mask_function_record(const Scenario& c, LayerType type, int64_t end) {
  if (type == LayerType::Full) return {{"kind", "causal"}};
  if (type == LayerType::Sliding) return {{"kind", "sliding_window_causal"}, {"window", c.window}};
  json pads = json::array();
  for (int64_t b = 0; b < c.batch; ++b) pads.push_back(c.left_padding ? std::min((*c.left_padding)[b], end) : 0);
  return {{"kind", "chunked_causal"}, {"chunk_size", c.window}, {"left_padding_tokens", pads}};
}


// The masks of one layer-step from the fast path (fastpath.h: masking_utils' mask functions on
// positions, held to masks.cpp by its tests): the boolean mask as bytes [B][q][kv], the SDPA skip
// decision, and the tensors attention needs, made from those bytes.
struct StepMasks {
  std::vector<uint8_t> boolean;
  std::string additive_bytes;
  bool skipped = false;
  at::Tensor boolean_tensor, additive_tensor;
};

StepMasks step_masks(const LayerStep& v, const Scenario& c, const Behaviours& behaviours, Mutation mutation) {
  StepMasks out;
  std::vector<int64_t> positions;
  fast::MaskRequest m =
      fast::mask_request(v.driven->spec, behaviours, c.batch, c.left_padding, v.seen, v.q, v.cache_position, positions);
  m.sizes = v.sizes;  // what the layer under test answered, as transformers' mask builders use it
  fast::boolean_mask(m, out.boolean, mutation);
  out.skipped = fast::skips(m);
  fast::additive_mask_bytes(out.boolean, c.dtype, out.additive_bytes);
  const std::vector<int64_t> shape = {c.batch, 1, v.q, v.sizes.kv_length};
  out.boolean_tensor = at::from_blob(out.boolean.data(), shape, at::kByte).to(at::kBool);
  out.additive_tensor = at::empty(shape, at::TensorOptions().dtype(scalar_type(c.dtype)));
  std::memcpy(out.additive_tensor.data_ptr(), out.additive_bytes.data(), out.additive_bytes.size());
  return out;
}

json mask_rows(const std::vector<uint8_t>& mask, int64_t B, int64_t q, int64_t k) {  // per batch row, one '0'/'1' string per query
  json out = json::array();
  for (int64_t b = 0; b < B; ++b) {
    json rows = json::array();
    for (int64_t i = 0; i < q; ++i) {
      std::string s(static_cast<size_t>(k), '0');
      for (int64_t j = 0; j < k; ++j) s[j] = mask[(b * q + i) * k + j] ? '1' : '0';
      rows.push_back(std::move(s));
    }
    out.push_back(std::move(rows));
  }
  return out;
}

// One layer's step as golden/dump.py records it: mask sizes, masks, errors, rows and attention.
void record_layer_step(const LayerStep& v, const Scenario& c, const Behaviours& behaviours, Mutation mutation,
                       json& jl) {
  const masks::MaskQuery& m = v.mask;
  jl["cumulative_length_before"] = v.seq_length_before;
  jl["mask_sizes"] = {{"kv_length", v.sizes.kv_length}, {"kv_offset", v.sizes.kv_offset}};
  jl["mask_function"] = mask_function_record(c, m.type, v.seen + v.q);
  jl["q_positions"] = m.query_positions;
  jl["allow_is_causal_skip"] = m.allow_skip;
  const StepMasks sm = step_masks(v, c, behaviours, mutation);
  const json rows = mask_rows(sm.boolean, c.batch, v.q, v.sizes.kv_length);
  jl["sdpa_mask_skipped"] = sm.skipped;
  jl["sdpa_mask"] = sm.skipped ? json(nullptr) : rows;
  jl["bool_mask"] = rows;
  jl["eager_mask"] = {{"dtype", to_string(c.dtype)},
                      {"shape", sm.additive_tensor.sizes().vec()},
                      {"sha256", cases::sha256_hex(sm.additive_bytes)},
                      {"masked_value", masked_value(c.dtype)}};
  const at::Tensor& boolean = sm.boolean_tensor;
  const at::Tensor& additive = sm.additive_tensor;
  const bool skipped = sm.skipped;
  const SdpaGqaPath& sdpa_path = behaviours.sdpa_gqa;
  json errors = json::array();
  if (v.update_error) {
    try {
      std::rethrow_exception(v.update_error);
    } catch (const std::exception& e) {
      errors.push_back(error_record("update", e));
    }
    jl["cumulative_length_after"] = nullptr;
    jl["returned"] = nullptr;
    jl["stored"] = nullptr;
    jl["attention"] = {{"eager", nullptr}, {"sdpa", nullptr}};
    jl["errors"] = errors;
    return;
  }
  jl["cumulative_length_after"] = v.seq_length_after;
  jl["returned"] = tensor_pair(v.returned.keys, v.returned.values, v.returned_rows);
  jl["stored"] = tensor_pair(v.cache->keys(), v.cache->values(), v.stored_rows);
  json attention = {{"eager", nullptr}, {"sdpa", nullptr}};
  try {
    attention["eager"] = output_json(attention::eager(v.query, v.returned.keys, v.returned.values, additive));
  } catch (const std::exception& e) {
    errors.push_back(error_record("attention_eager", e));
  }
  try {
    attention["sdpa"] = output_json(attention::sdpa(v.query, v.returned.keys, v.returned.values,
                                                    skipped ? std::nullopt : std::optional<at::Tensor>(boolean), sdpa_path));
  } catch (const std::exception& e) {
    errors.push_back(error_record("attention_sdpa", e));
  }
  jl["attention"] = attention;
  jl["errors"] = errors;
}

}  // namespace

namespace {
// golden/dump.py runs torch with one intra-op thread (the manifest's torch_num_threads), and the CPU
// SDPA kernel's summation order depends on the thread count: replaying with the same count is what
// makes attention outputs bitwise comparable. Restored afterwards for the suites that follow.
struct OneThread {
  int saved = at::get_num_threads();
  OneThread() { at::set_num_threads(1); }
  ~OneThread() { at::set_num_threads(saved); }
};
}  // namespace

json run_case(const Scenario& c, const Behaviours& behaviours, Mutation mutation) {
  const OneThread one_thread;
  json out = {{"format", "kvconform-fixture-v1"}, {"case", c.name}, {"case_sha256", c.sha256},
              {"behaviours", to_json(behaviours)}, {"torch_version", TORCH_VERSION}, {"dtype", to_string(c.dtype)}};
  json layer_records = json::array();
  for (size_t l = 0; l < c.layer_types.size(); ++l) layer_records.push_back(layer_record(l, c.layer_spec(l), c, behaviours));
  out["layers"] = layer_records;
  DriverOptions options;
  options.behaviours = behaviours;
  options.mutation = mutation;
  options.track_rows = true;
  options.fast_rows = true;  // rows and masks at the position level; K/V bytes and attention through LibTorch
  StepDriver driver(c, options);
  json steps = json::array();
  json js;
  driver.run([&](LayerStep& v) {
    if (v.layer == 0)
      js = {{"index", v.step}, {"tokens", v.q}, {"token_range", {v.seen, v.seen + v.q}},
            {"cache_position", v.cache_position ? json(*v.cache_position) : json(nullptr)},
            {"attention_mask_2d", attention_mask_2d(c, v.seen + v.q)}, {"layers", json::array()}};
    json jl = {{"layer", v.layer}};
    if (v.failed_at >= 0) {
      jl["skipped"] = "layer failed at step " + std::to_string(v.failed_at);
    } else {
      try {
        record_layer_step(v, c, behaviours, mutation, jl);
      } catch (const std::exception& e) {
        // Not a raise that transformers makes (those are recorded): the reference itself broke.
        throw StepFailure(v.step, v.layer, e.what());
      }
    }
    js["layers"].push_back(jl);
    if (v.layer + 1 == c.layer_types.size()) steps.push_back(js);
  });
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

// Errors as (phase, type) and, where the reference's message is LibTorch's own text, the message.
std::optional<Mismatch> errors_difference(const json& expected, const json& got) {
  if (expected.size() != got.size())
    return Mismatch{"", "errors.length", expected.dump(), got.dump()};
  for (size_t i = 0; i < expected.size(); ++i) {
    const std::string f = "errors[" + std::to_string(i) + "]";
    for (const char* key : {"phase", "type"})
      if (expected[i].at(key) != got[i].at(key))
        return Mismatch{"", f + "." + key, show(expected[i].at(key)), show(got[i].at(key))};
    if (got[i].value("message_exact", false) && expected[i].at("message") != got[i].at("message"))
      return Mismatch{"", f + ".message", show(expected[i].at("message")), show(got[i].at("message"))};
  }
  return std::nullopt;
}

// transformers skipped the SDPA mask (is_causal instead: top-left causal for several queries, every
// key for one) although the mask it skipped says otherwise: seen on 5.x for a chunked layer whose
// keys straddle a chunk boundary (kv_length < chunk size, kv_offset not chunk-aligned).
std::optional<std::string> skip_hides_mask(const json& layer) {
  if (layer.at("sdpa_mask_skipped") != true || !layer.at("bool_mask").is_array()) return std::nullopt;
  const json& rows = layer.at("bool_mask");
  for (size_t b = 0; b < rows.size(); ++b) {
    const size_t q = rows[b].size();
    for (size_t i = 0; i < q; ++i) {
      const std::string& row = rows[b][i].get_ref<const std::string&>();
      for (size_t j = 0; j < row.size(); ++j) {
        const bool implied = q == 1 || j <= i;
        if ((row[j] == '1') != implied)
          return "transformers skipped the SDPA mask, so SDPA's is_causal lets query row " + std::to_string(i) +
                 (implied ? " attend key column " : " miss key column ") + std::to_string(j) + " (batch row " +
                 std::to_string(b) + ") against the mask it skipped";
      }
    }
  }
  return std::nullopt;
}

// Where the fixture's outputs come from the same LibTorch kernels as the reference's (same torch
// release on the same kind of CPU), every attention output must match bit for bit.
bool same_kernels(const json& fixture) {
  const std::string v = fixture.value("torch_version", std::string());
  return v.substr(0, v.find('+')) == TORCH_VERSION;
}

}  // namespace

report::CaseResult compare(const json& fixture, const json& reference, const Scenario& c) {
  report::CaseResult r;
  r.suite = "golden";
  r.name = fixture.value("transformers_version", std::string("?")) + "/" + c.name;
  r.backend = "reference";
  r.dtype = to_string(c.dtype);
  r.params = c.params();
  const bool bitwise = same_kernels(fixture);
  const Tolerance tol = attention_tolerance(c.dtype), eager_tol = eager_tolerance(c.dtype);
  const std::string policy =
      bitwise ? "bitwise (fixture from torch " + fixture.value("torch_version", std::string()) + ", the same kernels)"
              : "tolerance " + repr(tol.absolute) + " (eager " + repr(eager_tol.absolute) + "; fixture from torch " +
                    fixture.value("torch_version", std::string("?")) + ", the reference runs " TORCH_VERSION ")";
  r.policy = to_string(bitwise ? Policy::Bitwise : Policy::DtypeEpsilons);
  r.bound = bitwise ? 0.0 : std::max(tol.absolute, eager_tol.absolute);
  std::vector<std::string> deviations, notes;
  double worst = 0;
  int64_t outputs = 0, identical = 0;
  auto fail = [&](const std::string& where, const std::string& field, const std::string& expected, const std::string& got) {
    r.status = report::Status::Fail;
    r.message = where + (where.empty() ? "" : ": ") + field + ": transformers " + expected + ", reference " + got;
    r.detail = "attention judged " + policy;
    return r;
  };
  for (const char* f : {"dtype", "layers"})
    if (auto m = first_difference(fixture.at(f), reference.at(f), f)) return fail("", m->field, m->expected, m->got);
  const json& fsteps = fixture.at("steps");
  const json& rsteps = reference.at("steps");
  if (fsteps.size() != rsteps.size())
    return fail("", "steps.length", std::to_string(fsteps.size()), std::to_string(rsteps.size()));
  static const char* step_fields[] = {"index", "tokens", "token_range", "cache_position", "attention_mask_2d"};
  static const char* exact_fields[] = {"cumulative_length_before", "mask_sizes", "q_positions",
                                       "allow_is_causal_skip", "mask_function", "sdpa_mask_skipped", "bool_mask",
                                       "sdpa_mask", "eager_mask", "cumulative_length_after", "returned", "stored"};
  for (size_t s = 0; s < fsteps.size(); ++s) {
    for (const char* f : step_fields)
      if (auto m = first_difference(fsteps[s].at(f), rsteps[s].at(f), f))
        return fail("step " + std::to_string(s), m->field, m->expected, m->got);
    const json& flayers = fsteps[s].at("layers");
    if (flayers.size() != c.layer_types.size())
      return fail("step " + std::to_string(s), "layers.length", std::to_string(flayers.size()),
                  std::to_string(c.layer_types.size()) + " (the case's layer_types)");
    for (size_t l = 0; l < flayers.size(); ++l) {
      const json& fl = flayers[l];
      const json& rl = rsteps[s].at("layers").at(l);
      const std::string where = "step " + std::to_string(s) + " layer " + std::to_string(l) + " (" +
                                to_string(c.layer_types[l]) + ")";
      if (fl.contains("skipped") != rl.contains("skipped"))
        return fail(where, "skipped", fl.contains("skipped") ? "skipped (the layer failed earlier)" : "run",
                    rl.contains("skipped") ? "skipped (the layer failed earlier)" : "run");
      if (fl.contains("skipped")) continue;
      for (const char* f : exact_fields)
        if (auto m = first_difference(fl.at(f), rl.at(f), f)) return fail(where, m->field, m->expected, m->got);
      if (auto m = errors_difference(fl.at("errors"), rl.at("errors"))) return fail(where, m->field, m->expected, m->got);
      for (const json& e : fl.at("errors"))
        notes.push_back(where + ": transformers raised " + e.at("type").get<std::string>() + " in " +
                        e.at("phase").get<std::string>() + " (" + e.at("message").get<std::string>() +
                        "); the reference raises there too");
      if (!fl.at("returned").is_null() && !fl.at("mask_sizes").is_null() &&
          fl.at("returned").at("shape").at(2) != fl.at("mask_sizes").at("kv_length"))
        deviations.push_back(where + ": update returned " + fl.at("returned").at("shape").at(2).dump() +
                             " rows but get_mask_sizes said kv_length " + fl.at("mask_sizes").at("kv_length").dump());
      if (auto skipped_wrongly = skip_hides_mask(fl)) deviations.push_back(where + ": " + *skipped_wrongly);
      for (const char* backend : {"eager", "sdpa"}) {
        // An attention that raised is null or {"error": ...}; the raise itself is compared via errors.
        auto has_output = [&](const json& layer) {
          const json& a = layer.at("attention").at(backend);
          return !a.is_null() && !a.contains("error");
        };
        const bool f_has = has_output(fl), r_has = has_output(rl);
        const std::string field = std::string("attention.") + backend;
        if (f_has != r_has) return fail(where, field, f_has ? "an output" : "an error", r_has ? "an output" : "an error");
        if (!f_has) continue;
        const json& fa = fl.at("attention").at(backend);
        const json& ra = rl.at("attention").at(backend);
        for (const char* key : {"dtype", "shape"})
          if (auto m = first_difference(fa.at(key), ra.at(key), field + "." + key)) return fail(where, m->field, m->expected, m->got);
        ++outputs;
        if (fa.at("hex") == ra.at("hex")) {
          ++identical;
          continue;
        }
        const std::vector<double> e = decode(fa), g = decode(ra);
        const double bound = bitwise ? 0.0 : std::string(backend) == "eager" ? eager_tol.absolute : tol.absolute;
        for (size_t i = 0; i < e.size(); ++i) {
          const bool en = std::isnan(e[i]), gn = std::isnan(g[i]);
          const double d = en || gn ? (en == gn ? 0.0 : INFINITY) : std::abs(e[i] - g[i]);
          worst = std::max(worst, d);
          // Bitwise: the first element whose bytes differ (same value, other NaN payload or sign of 0 included).
          const bool differs = bitwise ? (d > 0 || std::signbit(e[i]) != std::signbit(g[i])) && !(en && gn) : d > bound;
          if (differs)
            return fail(where, field + "[" + std::to_string(i) + "]", repr(e[i]),
                        repr(g[i]) + " (|diff| " + repr(d) + (bitwise ? ", judged bitwise" : " > tolerance " + repr(bound)) + ")");
        }
        if (bitwise)  // same values but other bytes: a NaN payload or the sign of a zero
          return fail(where, field + ".hex", "other bytes", "the same values in different bytes (judged bitwise)");
      }
    }
  }
  std::ostringstream detail;
  detail << "attention judged " << policy << ": " << identical << " of " << outputs << " outputs bitwise identical";
  if (identical < outputs) detail << ", max |difference| " << std::setprecision(3) << worst;
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

bool selected(const Scenario& c, const ReplayOptions& o) {
  if (o.dtype && c.dtype != *o.dtype) return false;
  if (o.cache && c.cache != *o.cache) return false;
  if (o.layer_type && std::find(c.layer_types.begin(), c.layer_types.end(), *o.layer_type) == c.layer_types.end())
    return false;
  return true;
}
}  // namespace

FixtureBehaviours fixture_behaviours(const json& fixture, const std::string& version, const std::string& file) {
  const std::string release = fixture.value("transformers_version", version);
  FixtureBehaviours out;
  std::string where = file + " (transformers " + release + ")";
  try {
    out.behaviours = behaviours_for_release(release);
  } catch (const std::invalid_argument& e) {
    out.mismatch = where + ": " + e.what();
    return out;
  }
  if (!fixture.contains("behaviours")) return out;  // an older fixture: the table alone decides
  // The record equals the table on every key it has; the table also holds what the record does not
  // measure (SdpaGqaPath), so its value is the one replayed.
  const json& record = fixture.at("behaviours");
  const std::vector<std::string> keys = differing_keys(to_json(out.behaviours), record);
  if (!keys.empty()) {
    out.mismatch = where + ": the fixture's behaviours record disagrees with behaviours_for_release(\"" + release +
                   "\") (harness/src/behaviours.cpp), table vs record: ";
    for (size_t i = 0; i < keys.size(); ++i) out.mismatch += (i ? "; " : "") + keys[i];
    return out;
  }
  return out;
}

report::CaseResult behaviours_failure(const json& fixture, const std::string& version, const Scenario& c,
                                      const std::string& mismatch) {
  report::CaseResult r;
  r.suite = "golden";
  r.name = fixture.value("transformers_version", version) + "/" + c.name;
  r.backend = "reference";
  r.dtype = to_string(c.dtype);
  r.status = report::Status::Fail;
  r.message = mismatch;
  return r;
}

std::vector<report::CaseResult> replay(const ReplayOptions& o) {
  std::vector<report::CaseResult> results;
  const std::regex name_regex(o.name_regex);  // compiled once, not per fixture
  for (const std::string& version : fixture_versions(o.fixtures_root)) {
    const std::string dir = o.fixtures_root + "/" + version;
    const json manifest = read_json(dir + "/manifest.json");
    check_manifest(manifest, dir + "/manifest.json");
    for (const auto& [name, entry] : manifest.at("cases").items()) {
      if (!o.name_regex.empty() && !std::regex_search(version + "/" + name, name_regex)) continue;
      if (o.select && !o.select("golden/" + version + "/" + name)) continue;
      std::string case_file = entry.value("case_file", "cases/" + name + ".json");
      if (case_file.rfind("cases/", 0) == 0) case_file = o.cases_root + case_file.substr(5);
      const bool filters = o.dtype || o.cache || o.layer_type;
      if (o.list_only && !filters) {  // listing needs no case file unless a filter reads it
        report::CaseResult r;
        r.suite = "golden";
        r.name = version + "/" + name;
        results.push_back(r);
        continue;
      }
      const Scenario c = cases::load_case(case_file);
      if (!selected(c, o)) continue;
      if (o.list_only) {
        report::CaseResult r;
        r.suite = "golden";
        r.name = version + "/" + name;
        results.push_back(r);
        continue;
      }
      const std::string fixture_path = dir + "/" + name + ".json";
      const json fixture = read_json(fixture_path);
      // The fixture's structure (check_fixture: types, sizes, the case's hash) and every field the
      // comparison reads (validate_fixture) are checked first: a problem is bad input, exit 2.
      check_fixture(fixture, {c.steps.size(), c.layer_types.size(), c.sha256, case_file}, fixture_path);
      validate_fixture(fixture, fixture_path, c.steps.size(), c.layer_types.size());
      // A failure inside the case is that case's FAIL; the replay goes on with the next fixture.
      try {
        const FixtureBehaviours fb = fixture_behaviours(fixture, version, fixture_path);
        results.push_back(fb.mismatch.empty() ? compare(fixture, run_case(c, fb.behaviours, o.mutation), c)
                                              : behaviours_failure(fixture, version, c, fb.mismatch));
      } catch (const std::exception& e) {
        report::CaseResult r;
        r.suite = "golden";
        r.name = version + "/" + name;
        r.backend = "reference";
        r.dtype = to_string(c.dtype);
        r.status = report::Status::Fail;
        const std::string what = e.what();
        r.message = dynamic_cast<const StepFailure*>(&e) ? what : "the reference raised: " + what.substr(0, what.find('\n'));
        results.push_back(r);
      }
      results.back().reproduce = "kvconform run --golden-only --case '^" + version + "/" + name + "$'";
    }
  }
  return results;
}

}  // namespace kvc::golden
