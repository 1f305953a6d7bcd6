#include "kvcgen/campaign.h"

#include <rapidcheck.h>
#include <rapidcheck/state.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "kvcgen/mask_pictures.h"
#include "kvcgen/rc_check.h"
#include "kvcgen/sut.h"

namespace kvc::campaign {

const char* to_string(Property p) {
  switch (p) {
    case Property::StoredRows: return "stored_rows";
    case Property::ReturnedRows: return "returned_rows";
    case Property::WindowCoverage: return "window_coverage";
    case Property::AttentionVsOracle: return "attention_vs_oracle";
    case Property::LayerAgreement: return "layer_agreement";
    case Property::BackendsVsOracle: return "backends_vs_oracle";
  }
  return "?";
}

Judged judged_by(Property p, std::optional<DType> dtype) {
  switch (p) {
    case Property::StoredRows:
    case Property::ReturnedRows:
    case Property::WindowCoverage: return {Policy::Bitwise, 0.0};
    case Property::LayerAgreement: return {Policy::ExactFloat64, kExactTolerance};
    case Property::AttentionVsOracle:
      return {Policy::DtypeEpsilons, dtype ? std::max(attention_tolerance(*dtype).absolute, eager_tolerance(*dtype).absolute) : -1.0};
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
  }
  return "";
}

std::vector<Property> all_properties() {
  return {Property::StoredRows, Property::ReturnedRows, Property::WindowCoverage, Property::AttentionVsOracle,
          Property::LayerAgreement, Property::BackendsVsOracle};
}

Property parse_property(const std::string& s) {
  std::string names;
  for (Property p : all_properties()) {
    if (s == to_string(p)) return p;
    names += std::string(names.empty() ? "" : ", ") + to_string(p);
  }
  throw std::invalid_argument("unknown property '" + s + "' (expected one of: " + names + ")");
}

const char* to_string(Engine e) {
  switch (e) {
    case Engine::Auto: return "auto";
    case Engine::Tensor: return "tensor";
    case Engine::Fast: return "fast";
  }
  return "?";
}

Engine parse_engine(const std::string& s) {
  for (Engine e : {Engine::Auto, Engine::Tensor, Engine::Fast})
    if (s == to_string(e)) return e;
  throw std::invalid_argument("unknown engine '" + s + "' (expected one of: auto, tensor, fast)");
}

bool has_fast_path(Property p) {
  return p == Property::StoredRows || p == Property::ReturnedRows || p == Property::WindowCoverage;
}

Engine resolve(Engine e, Property p) {
  if (e == Engine::Auto) return has_fast_path(p) ? Engine::Fast : Engine::Tensor;
  if (e == Engine::Fast && !has_fast_path(p))
    throw std::invalid_argument(std::string("property ") + to_string(p) +
                                " checks attention values and has no fast engine (use --engine tensor or auto)");
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
  if (const char* e = std::getenv("KVC_ENGINE"); e && *e) o.engine = parse_engine(e);
  return o;
}

Outcome run(Property property, const Options& options) {
  const bool fast_reproduce = options.reproduce.rfind("fast:", 0) == 0;
  if (fast_reproduce && resolve(options.engine, property) == Engine::Tensor)
    return replay_fast_trace_on_tensor(property, options);
  if (resolve(options.engine, property) == Engine::Fast || fast_reproduce) return run_fast(property, options);
  Outcome outcome;
  outcome.property = property;
  std::ostringstream params;
  params << "seed=" << options.seed << ",iterations=" << options.iterations;
  if (options.mutation != Mutation::None) params << ",mutant=" << to_string(options.mutation);
  if (options.filter.attention) params << ",attention=" << to_string(*options.filter.attention);
  if (options.filter.dtype) params << ",dtype=" << to_string(*options.filter.dtype);
  outcome.params = params.str();

  Observations* observations = &outcome.observations;
  const Mutation mutation = options.mutation;
  const ConfigFilter filter = options.filter;
  // The last failing execution is RapidCheck's final (shrunk) counterexample: shrinking accepts
  // every failing candidate and ends on the last one.
  auto last_failure = std::make_shared<std::optional<Counterexample>>();
  const auto property_fn = [=] {
    const ScenarioConfig config = *gen_config(filter);
    SystemUnderTest sut(config, property, mutation, observations);
    // What rc::state::check does (same draws, so reproduce strings stay valid), recording each
    // command so that a failure can be written out as a scenario.
    const auto commands = *rc::state::gen::commands(
        CacheModel{config, 0}, rc::state::gen::execOneOfWithArgs<Prefill, Decode, Extend, Reset>());
    CacheModel model{config, 0};
    Counterexample trace;
    trace.config = config;
    for (const auto& command : commands) {
      command->checkPreconditions(model);
      std::ostringstream shown;
      command->show(shown);
      trace.commands.push_back(shown.str());
      CacheModel after = model;
      command->apply(after);
      const int64_t tokens = after.seen - model.seen;
      try {
        command->run(model, sut);
      } catch (...) {
        if (tokens > 0) trace.steps.push_back(tokens);
        *last_failure = trace;
        throw;
      }
      if (after.seen == 0) trace.steps.clear();  // Reset: a new sequence starts
      else trace.steps.push_back(tokens);
      model = after;
    }
  };

  rc_check::Params check;
  check.id = to_string(property);
  check.description = describe(property);
  check.seed = options.seed;
  check.iterations = options.iterations;
  check.max_size = options.max_size;
  check.reproduce = options.reproduce;
  const rc_check::Result result = rc_check::check(check, property_fn);
  outcome.cases = result.passed;
  if (result.ok) {
    outcome.ok = true;
    return outcome;
  }
  outcome.failure = result.failure;
  outcome.reproduce = result.reproduce;
  if (*last_failure) {
    outcome.counterexample = std::move(**last_failure);
    Counterexample& c = *outcome.counterexample;
    if (!c.steps.empty()) c.masks = mask_pictures(c.config, c.steps, mutation);
  }
  return outcome;
}

}  // namespace kvc::campaign
