// Golden replay's comparison side: a fixture against the reference's record (compare), the fast
// path's field checks on plain values (layer_matches), and the replay of a fixtures folder. No ATen
// here; golden.cpp runs the reference.
#include <algorithm>
#include <array>
#include <cstring>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <limits>
#include <sstream>
#include <string_view>
#include <vector>
#if __has_include(<torch/headeronly/version.h>)
#include <torch/headeronly/version.h>
#else
#include <torch/version.h>  // LibTorch before 2.9
#endif

#include "golden_record.h"
#include "kvconform/fixture_check.h"
#include "kvconform/fixture_format.h"
#include "kvconform/golden.h"
#include "kvconform/regex.h"
#include "kvconform/step_failure.h"
#include "kvconform/tolerance.h"

namespace kvc::golden {

using detail::Mismatch;
using nlohmann::json;
using namespace std::string_view_literals;

namespace {

std::string repr(double v) {
  std::ostringstream os;
  os << std::setprecision(17) << v;
  return os.str();
}

std::string show(const json& j) {
  std::string s = j.dump();
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

}  // namespace

namespace detail {

bool agrees(const json& expected, const json& got) {
  if (expected.is_array() && got.is_array()) {
    if (expected.size() != got.size()) return false;
    for (size_t i = 0; i < expected.size(); ++i)
      if (!agrees(expected[i], got[i])) return false;
    return true;
  }
  if (expected.is_object() && got.is_object()) {
    for (auto it = expected.begin(); it != expected.end(); ++it) {
      const auto g = got.find(it.key());
      if (g == got.end() || !agrees(it.value(), *g)) return false;
    }
    return true;
  }
  return expected == got;
}

// The first difference between two JSON values, as a pointer-like field path ("returned.rows[3]").
std::optional<Mismatch> first_difference(const json& expected, const json& got, const std::string& field) {
  if (agrees(expected, got)) return std::nullopt;  // the paths below are built only where they differ
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
  if (expected.size() != got.size()) return Mismatch{"", "errors.length", expected.dump(), got.dump()};
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

}  // namespace detail

namespace {

// The mask transformers built lets a query attend a row that the window rule forbids it, judged by
// the token the row holds (the fixture's returned rows): a future token, an unwritten row, or a
// token outside its sliding window or chunk. Seen on 4.56, whose SlidingWindowLayer returns only the
// new tokens of an update longer than its capacity, with mask sizes that describe other rows
// (studies/merge/README.md).
std::optional<std::string> attends_forbidden_row(const json& layer, int64_t first_token) {
  const json& returned = layer.at("returned");
  if (!returned.is_object() || !layer.at("bool_mask").is_array()) return std::nullopt;
  constexpr int64_t kUnwritten = std::numeric_limits<int64_t>::min();
  std::vector<int64_t> rows;  // the token each key row holds, read once
  for (const json& r : returned.at("rows")) rows.push_back(r.is_null() ? kUnwritten : r.get<int64_t>());
  const json& mf = layer.at("mask_function");
  const std::string kind = mf.value("kind", std::string());
  const json& masks = layer.at("bool_mask");
  for (size_t b = 0; b < masks.size(); ++b) {
    for (size_t i = 0; i < masks[b].size(); ++i) {
      const std::string& row = masks[b][i].get_ref<const std::string&>();
      // The query's own token, not the position transformers was given for it (q_positions): where
      // the two differ (positions off the cumulative length) the rule still holds for the token.
      const int64_t p = first_token + static_cast<int64_t>(i);
      int64_t lo = kUnwritten + 1;  // the oldest token the window rule allows
      if (kind == "sliding_window_causal") lo = p - mf.at("window").get<int64_t>() + 1;
      if (kind == "chunked_causal") {
        const int64_t w = mf.at("chunk_size").get<int64_t>(), lead = mf.at("left_padding_tokens").at(b).get<int64_t>();
        const int64_t d = p - lead;
        lo = lead + (d >= 0 ? d / w : -((-d + w - 1) / w)) * w;  // Python's floor division
      }
      for (size_t j = 0; j < row.size() && j < rows.size(); ++j) {
        if (row[j] != '1' || (rows[j] >= lo && rows[j] <= p)) continue;
        const std::string what = rows[j] == kUnwritten ? "an unwritten row"
                                 : rows[j] > p         ? "token " + std::to_string(rows[j]) + ", a future token"
                                                       : "token " + std::to_string(rows[j]) + ", outside its " +
                                                     (kind == "chunked_causal" ? "chunk" : "window");
        return "the mask lets the query of token " + std::to_string(p) + " (batch row " + std::to_string(b) + ") attend key " +
               std::to_string(j) + ", which holds " + what;
      }
    }
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

// "ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=COMPATIBLE ONEDNN_MAX_CPU_ISA=AVX2 aten_cpu_capability=AVX2".
std::string kernels_text(const json& record) {
  if (!record.is_object()) return "no CPU kernel record";
  std::string out;
  for (const auto& [k, v] : record.items())
    out += (out.empty() ? "" : " ") + k + "=" + (v.is_string() ? v.get<std::string>() : v.dump());
  return out;
}

// Where the fixture's outputs come from the same LibTorch kernels as the reference's (the same
// torch release under the same CPU kernel pin, golden/README.md "CPU kernel pin"), every attention
// output must match bit for bit. `why` says what differs otherwise.
bool same_kernels(const json& fixture, std::string& why) {
  const std::string v = fixture.value("torch_version", std::string("?"));
  if (v.substr(0, v.find('+')) != TORCH_VERSION) {
    why = "fixture from torch " + v + ", the reference runs " TORCH_VERSION;
    return false;
  }
  const json* recorded = fixture.contains("cpu_kernels") ? &fixture.at("cpu_kernels") : nullptr;
  if (!recorded || *recorded != cpu_kernels()) {
    why = "fixture from torch " + v + " with " + (recorded ? kernels_text(*recorded) : "no CPU kernel record") +
          ", the reference runs " + kernels_text(cpu_kernels());
    return false;
  }
  why = "fixture from torch " + v + ", the same kernels: " + kernels_text(cpu_kernels());
  return true;
}

// What every result of a fixture carries: its id, dtype and the attention policy it is judged by.
struct Judged {
  report::CaseResult result;
  bool bitwise = false;
  std::string policy;
  Tolerance tol, eager_tol;
};

Judged judged(const json& fixture, const Scenario& c) {
  Judged j;
  report::CaseResult& r = j.result;
  r = report::named(report::GoldenKey{fixture.value("transformers_version", std::string("?")), c.name});
  r.backend = "reference";
  r.dtype = to_string(c.dtype);
  r.params = c.params();
  std::string why;
  j.bitwise = same_kernels(fixture, why);
  j.tol = attention_tolerance(c.dtype);
  j.eager_tol = eager_tolerance(c.dtype);
  j.policy = j.bitwise ? "bitwise (" + why + ")"
                       : "tolerance " + repr(j.tol.absolute) + " (eager " + repr(j.eager_tol.absolute) + "; " + why + ")";
  r.policy = to_string(j.bitwise ? Policy::Bitwise : Policy::DtypeEpsilons);
  r.bound = j.bitwise ? 0.0 : std::max(j.tol.absolute, j.eager_tol.absolute);
  return j;
}

std::string layer_where(size_t s, size_t l, const Scenario& c) {
  return "step " + std::to_string(s) + " layer " + std::to_string(l) + " (" + to_string(c.layer_types[l]) + ")";
}

// A fixture's boolean mask ([B][q] strings of '0'/'1') equals the mask bytes.
bool mask_equal(const json& f, const detail::LayerValues& v) {
  if (!f.is_array() || f.size() != static_cast<size_t>(v.batch)) return false;
  thread_local std::string row;
  for (int64_t b = 0; b < v.batch; ++b) {
    const json& rows = f[b];
    if (!rows.is_array() || rows.size() != static_cast<size_t>(v.q)) return false;
    for (int64_t i = 0; i < v.q; ++i) {
      if (!rows[i].is_string()) return false;
      const std::string& s = rows[i].get_ref<const std::string&>();
      if (s.size() != static_cast<size_t>(v.kv_length)) return false;
      // The mask bytes are 0 or 1 (fast::boolean_mask), so '0' + byte is the fixture's digit.
      const uint8_t* m = v.mask.data() + (b * v.q + i) * v.kv_length;
      row.resize(s.size());
      for (size_t j = 0; j < s.size(); ++j) row[j] = static_cast<char>('0' + m[j]);
      if (std::memcmp(s.data(), row.data(), s.size()) != 0) return false;
    }
  }
  return true;
}

// f == value as JSON compares it (any number type), without making a json of the value.
bool number_is(const json& f, int64_t value) {
  if (f.is_number_integer() && !f.is_number_unsigned()) return f.get_ref<const json::number_integer_t&>() == value;
  if (f.is_number_unsigned()) return value >= 0 && f.get_ref<const json::number_unsigned_t&>() == static_cast<uint64_t>(value);
  return f == value;
}

bool ints_equal(const json& f, const std::vector<int64_t>& values) {
  if (!f.is_array() || f.size() != values.size()) return false;
  for (size_t i = 0; i < values.size(); ++i)
    if (!number_is(f[i], values[i])) return false;
  return true;
}

bool rows_equal(const json& f, const positions::Rows& rows) {
  if (!f.is_array() || f.size() != rows.size()) return false;
  for (size_t i = 0; i < rows.size(); ++i)
    if (rows[i] ? !number_is(f[i], *rows[i]) : !f[i].is_null()) return false;
  return true;
}

// A JSON string equal to `s` (json == std::string would copy s into a temporary json first).
bool is_text(const json& j, const std::string& s) { return j.is_string() && j.get_ref<const std::string&>() == s; }

// first_difference on an object walks the fixture's keys: each must be one the reference writes,
// with an equal value (`same(key, value)`, false for a key the reference does not write).
template <typename Same>
bool object_equal(const json& f, Same same) {
  if (!f.is_object()) return false;
  for (auto it = f.begin(); it != f.end(); ++it)
    if (!same(std::string_view(it.key()), it.value())) return false;
  return true;
}

bool kv_equal(const json& f, const detail::KvRecord& r) {
  return object_equal(f, [&](std::string_view key, const json& v) {
    return key == "shape"sv      ? ints_equal(v, r.shape)
           : key == "rows"sv     ? rows_equal(v, r.rows)
           : key == "k_sha256"sv ? is_text(v, r.k_sha256)
                                 : key == "v_sha256"sv && is_text(v, r.v_sha256);
  });
}

// The fixture's hex string spells exactly the output's bytes, in its [B, q, H, D] order: two
// digits per byte from a table, then memcmp per run (outputs run to thousands of bytes per
// layer-step, the fast path's largest comparison).
bool hex_equal(const json& f, const detail::Output& o) {
  static const auto pairs = [] {
    std::array<uint16_t, 256> t{};
    static const char* digits = "0123456789abcdef";
    for (int b = 0; b < 256; ++b) {
      const char two[2] = {digits[b >> 4], digits[b & 15]};
      std::memcpy(&t[static_cast<size_t>(b)], two, 2);
    }
    return t;
  }();
  if (!f.is_string()) return false;
  const std::string& hex = f.get_ref<const std::string&>();
  if (hex.size() != 2 * o.bytes.size()) return false;
  thread_local std::vector<uint16_t> ours;
  size_t at = 0;
  bool same = true;
  detail::fixture_order(o, [&](const char* p, size_t n) {
    if (!same) return;
    ours.resize(n);
    for (size_t i = 0; i < n; ++i) ours[i] = pairs[static_cast<unsigned char>(p[i])];
    same = std::memcmp(hex.data() + 2 * at, ours.data(), 2 * n) == 0;
    at += n;
  });
  return same;
}

bool eager_mask_equal(const json& f, const detail::EagerMask& m) {
  return object_equal(f, [&](std::string_view key, const json& v) {
    return key == "dtype"sv    ? is_text(v, m.dtype)
           : key == "shape"sv  ? ints_equal(v, m.shape)
           : key == "sha256"sv ? is_text(v, m.sha256)
                               : key == "masked_value"sv && is_text(v, m.masked_value);
  });
}

bool mask_sizes_equal(const json& f, const detail::LayerValues& m) {
  return object_equal(f, [&](std::string_view key, const json& v) {
    return key == "kv_length"sv ? number_is(v, m.kv_length) : key == "kv_offset"sv && number_is(v, m.kv_offset);
  });
}

// An attention that raised is null or {"error": ...}; the raise itself is compared via errors.
bool has_output(const json& layer, const char* backend) {
  const json& a = layer.at("attention").at(backend);
  return !a.is_null() && !a.contains("error");
}

// The fields layer_matches compares: compare()'s exact fields, "errors" and "attention".
constexpr int kLayerFields = 14;

bool attention_matches(const json& fa_both, const detail::LayerValues& v, int64_t& outputs) {
  if (!fa_both.is_object()) return false;
  for (const auto& [backend, ours] : {std::pair<const char*, const std::optional<detail::Output>*>{"eager", &v.eager},
                                      std::pair<const char*, const std::optional<detail::Output>*>{"sdpa", &v.sdpa}}) {
    const json& fa = fa_both.at(backend);
    const bool f_has = !fa.is_null() && !fa.contains("error");  // has_output
    if (f_has != ours->has_value()) return false;
    if (!f_has) continue;
    if (!is_text(fa.at("dtype"), (*ours)->dtype) || !ints_equal(fa.at("shape"), (*ours)->shape)) return false;
    ++outputs;
    if (!hex_equal(fa.at("hex"), **ours)) return false;
  }
  return true;
}

}  // namespace

namespace detail {

bool layer_matches(const json& fl, const LayerValues& v, int64_t& outputs) {
  if (!fl.is_object()) return false;
  // One pass over the fixture's fields (no lookups by name); every field compare() checks must be
  // there, and the fields it does not check are ignored as it ignores them.
  int seen = 0;
  for (auto it = fl.begin(); it != fl.end(); ++it) {
    const std::string_view key = it.key();
    const json& f = it.value();
    bool same = true;
    switch (key[0]) {
      case 'a':
        if (key == "allow_is_causal_skip"sv) same = f == v.allow_skip;
        else if (key == "attention"sv) same = attention_matches(f, v, outputs);
        else continue;
        break;
      case 'b':
        if (key == "bool_mask"sv) same = mask_equal(f, v);
        else continue;
        break;
      case 'c':
        if (key == "cumulative_length_before"sv) same = f == v.seq_length_before;
        else if (key == "cumulative_length_after"sv) same = v.updated ? f == v.seq_length_after : f.is_null();
        else continue;
        break;
      case 'e':
        if (key == "eager_mask"sv) same = eager_mask_equal(f, v.eager_mask);
        else if (key == "errors"sv) same = !errors_difference(f, v.errors);
        else continue;
        break;
      case 'm':
        if (key == "mask_sizes"sv) same = mask_sizes_equal(f, v);
        else if (key == "mask_function"sv) same = agrees(f, v.mask_function);
        else if (key == "mask_builders"sv) {  // optional (a fixture of an older dumper has none): not counted
          if (!agrees(f, v.builders)) return false;
          continue;
        } else if (key == "mask_builders_absent"sv) {  // optional (absent_layer_types): not counted
          if (!agrees(f, v.builders_absent)) return false;
          continue;
        } else continue;
        break;
      case 'q':
        if (key == "q_positions"sv) same = ints_equal(f, v.q_positions);
        else continue;
        break;
      case 'r':
        if (key == "returned"sv) same = v.updated ? kv_equal(f, v.returned) : f.is_null();
        else continue;
        break;
      case 's':
        if (key == "sdpa_mask_skipped"sv) same = f == v.sdpa_skipped;
        else if (key == "sdpa_mask"sv) same = v.sdpa_skipped ? f.is_null() : mask_equal(f, v);
        else if (key == "stored"sv) same = v.updated ? kv_equal(f, v.stored) : f.is_null();
        else continue;
        break;
      default: continue;
    }
    if (!same) return false;
    ++seen;
  }
  return seen == kLayerFields;
}

bool step_matches(const json& fs, const StepValues& v, size_t layers) {
  if (!fs.is_object()) return false;
  int seen = 0;
  for (auto it = fs.begin(); it != fs.end(); ++it) {
    const std::string_view key = it.key();
    const json& f = it.value();
    bool same = true;
    if (key == "index"sv) same = number_is(f, static_cast<int64_t>(v.index));
    else if (key == "tokens"sv) same = number_is(f, v.q);
    else if (key == "token_range"sv) same = ints_equal(f, {v.seen, v.seen + v.q});
    else if (key == "cache_position"sv) same = *v.cache_position ? ints_equal(f, **v.cache_position) : f.is_null();
    else if (key == "attention_mask_2d"sv) {
      if (!*v.left_padding) {
        same = f.is_null();
      } else {
        const std::vector<int64_t>& pads = **v.left_padding;
        same = f.is_array() && f.size() == pads.size();
        for (size_t b = 0; same && b < pads.size(); ++b) same = is_text(f[b], attention_mask_row(pads[b], v.seen + v.q));
      }
    } else if (key == "layers"sv) same = f.is_array() && f.size() == layers;
    else continue;
    if (!same) return false;
    ++seen;
  }
  return seen == 6;  // the five step fields compare() checks, and its layers
}

void fixture_findings(const json& fixture, const Scenario& c, std::vector<std::string>& notes,
                      std::vector<std::string>& deviations) {
  const json& fsteps = fixture.at("steps");
  // A layer that refused a crop holds tokens the case no longer counts: from then on the case's
  // positions are not its tokens', and the window rule judged by them would blame transformers
  // for the case's bookkeeping. Such a layer's later steps are compared, not judged by invariants.
  std::vector<bool> parted(c.layer_types.size(), false);
  for (size_t s = 0; s < fsteps.size(); ++s) {
    const json& flayers = fsteps[s].at("layers");
    const bool call = fsteps[s].contains("call");
    for (size_t l = 0; l < flayers.size(); ++l) {
      const json& fl = flayers[l];
      if (fl.contains("skipped")) continue;
      const auto where = [&] { return layer_where(s, l, c); };  // only for what is found
      for (const json& e : fl.at("errors"))
        notes.push_back(where() + ": transformers raised " + e.at("type").get<std::string>() + " in " +
                        e.at("phase").get<std::string>() + " (" + e.at("message").get<std::string>() +
                        "); the reference raises there too");
      if (call) {  // a call step returns nothing and builds no mask
        if (fsteps[s].at("call").value("method", std::string()) == "crop" && !fl.at("errors").empty() && l < parted.size())
          parted[l] = true;
        continue;
      }
      if (l < parted.size() && parted[l]) continue;
      if (!fl.at("returned").is_null() && !fl.at("mask_sizes").is_null() &&
          fl.at("returned").at("shape").at(2) != fl.at("mask_sizes").at("kv_length"))
        deviations.push_back(where() + ": update returned " + fl.at("returned").at("shape").at(2).dump() +
                             " rows but get_mask_sizes said kv_length " + fl.at("mask_sizes").at("kv_length").dump());
      if (auto skipped_wrongly = skip_hides_mask(fl)) deviations.push_back(where() + ": " + *skipped_wrongly);
      if (auto forbidden = attends_forbidden_row(fl, fsteps[s].at("token_range").at(0).get<int64_t>()))
        deviations.push_back(where() + ": " + *forbidden);
    }
  }
}

report::CaseResult agreed(const json& fixture, const Scenario& c, int64_t identical, int64_t outputs, double worst) {
  Judged j = judged(fixture, c);
  report::CaseResult& r = j.result;
  std::vector<std::string> notes, deviations;
  fixture_findings(fixture, c, notes, deviations);
  std::ostringstream detail;
  detail << "attention judged " << j.policy << ": " << identical << " of " << outputs << " outputs bitwise identical";
  if (identical < outputs) detail << ", max |difference| " << std::setprecision(3) << worst;
  for (const std::string& n : notes) detail << "\n" << n;
  for (const std::string& d : deviations) detail << "\nupstream deviation: " << d;
  r.detail = detail.str();
  r.error = identical < outputs ? worst : 0;  // 0: every output bitwise identical
  if (!deviations.empty()) {
    r.status = report::Status::Deviation;
    r.message = "reproduces an upstream deviation: " + deviations.front();
  }
  return r;
}

}  // namespace detail

report::CaseResult compare(const json& fixture, const json& reference, const Scenario& c) {
  using detail::first_difference;
  Judged j = judged(fixture, c);
  report::CaseResult& r = j.result;
  const bool bitwise = j.bitwise;
  double worst = 0;
  int64_t outputs = 0, identical = 0;
  auto fail = [&](const std::string& where, const std::string& field, const std::string& expected, const std::string& got) {
    r.status = report::Status::Fail;
    r.message = where + (where.empty() ? "" : ": ") + field + ": transformers " + expected + ", reference " + got;
    r.detail = "attention judged " + j.policy;
    return r;
  };
  for (const char* f : {"dtype", "layers"})
    if (auto m = first_difference(fixture.at(f), reference.at(f), f)) return fail("", m->field, m->expected, m->got);
  const json& fsteps = fixture.at("steps");
  const json& rsteps = reference.at("steps");
  if (fsteps.size() != rsteps.size())
    return fail("", "steps.length", std::to_string(fsteps.size()), std::to_string(rsteps.size()));
  static const char* exact_fields[] = {"cumulative_length_before",
                                       "mask_sizes",
                                       "q_positions",
                                       "allow_is_causal_skip",
                                       "mask_function",
                                       "sdpa_mask_skipped",
                                       "bool_mask",
                                       "sdpa_mask",
                                       "eager_mask",
                                       "cumulative_length_after",
                                       "returned",
                                       "stored"};
  static const char* call_fields[] = {"cumulative_length_before", "cumulative_length_after", "stored", "attributes"};
  for (size_t s = 0; s < fsteps.size(); ++s) {
    const bool call = fsteps[s].contains("call");
    if (call || rsteps[s].contains("call"))
      if (auto m = first_difference(fsteps[s].value("call", json()), rsteps[s].value("call", json()), "call"))
        return fail("step " + std::to_string(s), m->field, m->expected, m->got);
    for (const char* f : detail::kStepFields)
      if (auto m = first_difference(fsteps[s].at(f), rsteps[s].at(f), f))
        return fail("step " + std::to_string(s), m->field, m->expected, m->got);
    const json& flayers = fsteps[s].at("layers");
    if (flayers.size() != c.layer_types.size())
      return fail("step " + std::to_string(s), "layers.length", std::to_string(flayers.size()),
                  std::to_string(c.layer_types.size()) + " (the case's layer_types)");
    for (size_t l = 0; l < flayers.size(); ++l) {
      const json& fl = flayers[l];
      const json& rl = rsteps[s].at("layers").at(l);
      const std::string where = layer_where(s, l, c);
      if (fl.contains("skipped") != rl.contains("skipped"))
        return fail(where, "skipped", fl.contains("skipped") ? "skipped (the layer failed earlier)" : "run",
                    rl.contains("skipped") ? "skipped (the layer failed earlier)" : "run");
      if (fl.contains("skipped")) continue;
      if (call) {  // reset, crop, activate_past_recording: what the layer holds and says after it
        for (const char* f : call_fields)
          if (auto m = first_difference(fl.at(f), rl.at(f), f)) return fail(where, m->field, m->expected, m->got);
        if (auto m = detail::errors_difference(fl.at("errors"), rl.at("errors")))
          return fail(where, m->field, m->expected, m->got);
        continue;
      }
      for (const char* f : exact_fields)
        if (auto m = first_difference(fl.at(f), rl.at(f), f)) return fail(where, m->field, m->expected, m->got);
      // The release's own builders' masks, where the fixture's dumper recorded them (dump.py 1.4.0 on).
      for (const char* f : {"mask_builders", "mask_builders_absent"})
        if (fl.contains(f) || rl.contains(f))
          if (auto m = first_difference(fl.value(f, json()), rl.value(f, json()), f))
            return fail(where, m->field, m->expected, m->got);
      if (auto m = detail::errors_difference(fl.at("errors"), rl.at("errors"))) return fail(where, m->field, m->expected, m->got);
      for (const char* backend : {"eager", "sdpa"}) {
        const bool f_has = has_output(fl, backend), r_has = has_output(rl, backend);
        const std::string field = std::string("attention.") + backend;
        if (f_has != r_has) return fail(where, field, f_has ? "an output" : "an error", r_has ? "an output" : "an error");
        if (!f_has) continue;
        const json& fa = fl.at("attention").at(backend);
        const json& ra = rl.at("attention").at(backend);
        for (const char* key : {"dtype", "shape"})
          if (auto m = first_difference(fa.at(key), ra.at(key), field + "." + key))
            return fail(where, m->field, m->expected, m->got);
        ++outputs;
        if (fa.at("hex") == ra.at("hex")) {
          ++identical;
          continue;
        }
        const std::vector<double> e = detail::decode_output(fa), g = detail::decode_output(ra);
        const double bound = bitwise ? 0.0 : std::string(backend) == "eager" ? j.eager_tol.absolute : j.tol.absolute;
        for (size_t i = 0; i < e.size(); ++i) {
          const bool en = std::isnan(e[i]), gn = std::isnan(g[i]);
          const double d = en || gn ? (en == gn ? 0.0 : INFINITY) : std::abs(e[i] - g[i]);
          worst = std::max(worst, d);
          // Bitwise: the first element whose bytes differ (same value, other NaN payload or sign of 0 included).
          const bool differs = bitwise ? (d > 0 || std::signbit(e[i]) != std::signbit(g[i])) && !(en && gn) : d > bound;
          if (differs)
            return fail(
                where, field + "[" + std::to_string(i) + "]", repr(e[i]),
                repr(g[i]) + " (|diff| " + repr(d) + (bitwise ? ", judged bitwise" : " > tolerance " + repr(bound)) + ")");
        }
        if (bitwise)  // same values but other bytes: a NaN payload or the sign of a zero
          return fail(where, field + ".hex", "other bytes", "the same values in different bytes (judged bitwise)");
      }
    }
  }
  return detail::agreed(fixture, c, identical, outputs, worst);
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
  if (o.layer_type && std::find(c.layer_types.begin(), c.layer_types.end(), *o.layer_type) == c.layer_types.end()) return false;
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
                   "\") (harness/src/core/behaviours.cpp), table vs record: ";
    for (size_t i = 0; i < keys.size(); ++i) out.mismatch += (i ? "; " : "") + keys[i];
    return out;
  }
  return out;
}

report::CaseResult behaviours_failure(const json& fixture, const std::string& version, const Scenario& c,
                                      const std::string& mismatch) {
  report::CaseResult r = report::named(report::GoldenKey{fixture.value("transformers_version", version), c.name});
  r.backend = "reference";
  r.dtype = to_string(c.dtype);
  r.status = report::Status::Fail;
  r.message = mismatch;
  return r;
}

void for_each_fixture(const ReplayOptions& o, const std::function<void(const LoadedFixture&)>& visit) {
  const Regex name_regex(o.name_regex);  // compiled once, not per fixture
  for (const std::string& version : fixture_versions(o.fixtures_root)) {
    const std::string dir = o.fixtures_root + "/" + version;
    const json manifest = read_json(dir + "/manifest.json");
    check_manifest(manifest, dir + "/manifest.json");
    for (const auto& [name, entry] : manifest.at("cases").items()) {
      if (!o.name_regex.empty() && !name_regex.search(version + "/" + name)) continue;
      if (o.select && !o.select("golden/" + version + "/" + name)) continue;
      std::string case_file = entry.value("case_file", "cases/" + name + ".json");
      if (case_file.rfind("cases/", 0) == 0) case_file = o.cases_root + case_file.substr(5);
      LoadedFixture f;
      f.version = version;
      f.name = name;
      const bool filters = o.dtype || o.cache || o.layer_type;
      if (o.list_only && !filters) {  // listing needs no case file unless a filter reads it
        visit(f);
        continue;
      }
      const Scenario c = cases::load_case(case_file);
      if (!selected(c, o)) continue;
      f.scenario = &c;
      if (o.list_only) {
        visit(f);
        continue;
      }
      f.path = dir + "/" + name + ".json";
      const json fixture = read_json(f.path);
      // The fixture's structure (check_fixture: types, sizes, the case's hash) and every field the
      // comparison reads (validate_fixture) are checked first: a problem is bad input, exit 2.
      check_fixture(fixture, {c.steps.size(), c.layer_types.size(), c.sha256, case_file}, f.path);
      validate_fixture(fixture, f.path, c.steps.size(), c.layer_types.size());
      f.fixture = &fixture;
      f.behaviours = fixture_behaviours(fixture, version, f.path);
      visit(f);
    }
  }
}

report::CaseResult replay_one(const LoadedFixture& f, Mutation mutation) {
  const Scenario& c = *f.scenario;
  report::CaseResult r;
  // A failure inside the case is that case's FAIL; the replay goes on with the next fixture.
  try {
    r = f.behaviours.mismatch.empty() ? check(*f.fixture, c, f.behaviours.behaviours, mutation)
                                      : behaviours_failure(*f.fixture, f.version, c, f.behaviours.mismatch);
  } catch (const std::exception& e) {
    r = report::named(report::GoldenKey{f.version, f.name});
    r.backend = "reference";
    r.dtype = to_string(c.dtype);
    r.status = report::Status::Fail;
    const std::string what = e.what();
    r.message = dynamic_cast<const StepFailure*>(&e) ? what : "the reference raised: " + what.substr(0, what.find('\n'));
  }
  return r;
}

std::vector<report::CaseResult> replay(const ReplayOptions& o) {
  std::vector<report::CaseResult> results;
  for_each_fixture(o, [&](const LoadedFixture& f) {
    if (!f.fixture) {  // listing: one Pass result per selected case, nothing replayed
      results.push_back(report::named(report::GoldenKey{f.version, f.name}));
      return;
    }
    results.push_back(replay_one(f, o.mutation));
  });
  return results;
}

}  // namespace kvc::golden
