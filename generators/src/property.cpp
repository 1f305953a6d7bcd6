#include "kvcgen/campaign.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

// The campaign's vocabulary (properties, trace engines, the environment's options), apart from the
// campaigns themselves: it needs no tensors, and the `kvconform` launcher names properties without
// linking LibTorch (cli/CMakeLists.txt).
namespace kvc::campaign {

const char* to_string(Property p) {
  switch (p) {
    case Property::StoredRows: return "stored_rows";
    case Property::ReturnedRows: return "returned_rows";
    case Property::WindowCoverage: return "window_coverage";
    case Property::AttentionVsOracle: return "attention_vs_oracle";
    case Property::LayerAgreement: return "layer_agreement";
    case Property::BackendsVsOracle: return "backends_vs_oracle";
    case Property::LayerCalls: return "layer_calls";
  }
  return "?";
}

Judged judged_by(Property p, std::optional<DType> dtype) {
  switch (p) {
    case Property::StoredRows:
    case Property::ReturnedRows:
    case Property::WindowCoverage: return {Policy::Bitwise, 0.0};
    case Property::LayerAgreement:
    case Property::LayerCalls: return {Policy::ExactFloat64, kExactTolerance};
    case Property::AttentionVsOracle:
      return {Policy::DtypeEpsilons,
              dtype ? std::max(attention_tolerance(*dtype).absolute, eager_tolerance(*dtype).absolute) : -1.0};
    case Property::BackendsVsOracle: return {Policy::SameDtypeReference, -1.0};
  }
  return {Policy::Bitwise, -1.0};
}

const char* describe(Property p) {
  switch (p) {
    case Property::StoredRows: return "stored rows are the last min(seen, capacity) tokens in order; unwritten rows zero";
    case Property::ReturnedRows: return "returned rows are tokens [kv_offset, kv_offset+kv_length) and their count is kv_length";
    case Property::WindowCoverage: return "each query attends exactly the keys the window rule allows, no more";
    case Property::AttentionVsOracle: return "eager, SDPA and float64 attention over the layer's K/V match the float64 oracle";
    case Property::LayerAgreement: return "static and dynamic layers agree; sliding and chunked layers store the same rows";
    case Property::BackendsVsOracle:
      return "every registered attention backend (backends::registry) over the layer's K/V within max(floor, factor x same-dtype math error) of the oracle";
    case Property::LayerCalls:
      return "after crop(-n) a layer serves the kept tokens (float64 attention against the oracle, a dynamic layer's stored rows), "
             "activate_past_recording and the attributes a caller reads keep their contract";
  }
  return "";
}

std::vector<Property> all_properties() {
  return {Property::StoredRows,     Property::ReturnedRows,     Property::WindowCoverage, Property::AttentionVsOracle,
          Property::LayerAgreement, Property::BackendsVsOracle, Property::LayerCalls};
}

Property parse_property(const std::string& s) {
  std::string names;
  for (Property p : all_properties()) {
    if (s == to_string(p)) return p;
    names += std::string(names.empty() ? "" : ", ") + to_string(p);
  }
  throw std::invalid_argument("unknown property '" + s + "' (expected one of: " + names + ")");
}

const char* to_string(TraceEngineKind e) {
  switch (e) {
    case TraceEngineKind::Auto: return "auto";
    case TraceEngineKind::Tensor: return "tensor";
    case TraceEngineKind::Fast: return "fast";
  }
  return "?";
}

TraceEngineKind parse_trace_engine(const std::string& s) {
  for (TraceEngineKind e : {TraceEngineKind::Auto, TraceEngineKind::Tensor, TraceEngineKind::Fast})
    if (s == to_string(e)) return e;
  throw std::invalid_argument("unknown engine '" + s + "' (expected one of: auto, tensor, fast)");
}

bool has_fast_path(Property p) {
  return p == Property::StoredRows || p == Property::ReturnedRows || p == Property::WindowCoverage;
}

TraceEngineKind resolve(TraceEngineKind e, Property p) {
  if (e == TraceEngineKind::Auto) return has_fast_path(p) ? TraceEngineKind::Fast : TraceEngineKind::Tensor;
  if (e == TraceEngineKind::Fast && !has_fast_path(p))
    throw std::invalid_argument(std::string("property ") + to_string(p) +
                                " checks attention values and has no fast engine (use --trace-engine tensor or auto)");
  return e;
}

namespace {
template <typename T>
T env_number(const char* name, T fallback, T at_least) {
  const char* raw = std::getenv(name);
  if (!raw || !*raw) return fallback;
  std::istringstream in(raw);
  unsigned long long v = 0;
  if (raw[0] == '-' || !(in >> v) || !in.eof() || static_cast<T>(v) < at_least)
    throw std::invalid_argument(std::string(name) + "='" + raw + "' is not an integer >= " + std::to_string(at_least));
  return static_cast<T>(v);
}
}  // namespace

Options options_from_env(Options o) {
  o.seed = env_number<uint64_t>("KVC_SEED", o.seed, 0);
  o.iterations = env_number<int>("KVC_ITERATIONS", o.iterations, 1);
  o.max_size = env_number<int>("KVC_MAX_SIZE", o.max_size, 1);
  if (const char* r = std::getenv("KVC_REPRODUCE"); r && *r) o.reproduce = r;
  // KVC_TRACE_ENGINE; KVC_ENGINE is its old name, read until kvconform 0.2.
  if (const char* e = std::getenv("KVC_TRACE_ENGINE"); e && *e) o.trace_engine = parse_trace_engine(e);
  else if (const char* old = std::getenv("KVC_ENGINE"); old && *old) o.trace_engine = parse_trace_engine(old);
  return o;
}

}  // namespace kvc::campaign
