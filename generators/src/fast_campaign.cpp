// The fast engine's property campaign: stored_rows, returned_rows and window_coverage on the
// position-level simulation (fastpath.h) against the documented rules (positions.h). RapidCheck's
// generators cost more than the check itself here, so traces are drawn with a plain seeded PRNG
// from the same distributions as gen_config and the stateful commands (scenario.cpp), and a failing
// trace is shrunk greedily. No LibTorch.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "kvcgen/campaign.h"
#include "kvcgen/shrink.h"
#include "kvconform/fastpath.h"
#include "kvconform/inputs.h"
#include "kvcgen/mask_pictures.h"
#include "kvcgen/position_checks.h"
#include "kvcgen/rc_check.h"
#include "kvcgen/sut.h"
#include "kvconform/positions.h"
#include "kvconform/seeds.h"

namespace kvc::campaign {

namespace {

struct Rng {
  uint64_t state;
  uint64_t next() { return inputs::mix64(state += 0x9E3779B97F4A7C15ULL); }
  int64_t in(int64_t lo, int64_t hi_exclusive) {  // uniform in [lo, hi)
    return lo + static_cast<int64_t>(next() % static_cast<uint64_t>(hi_exclusive - lo));
  }
  template <typename T>
  T weighted(std::initializer_list<std::pair<int, T>> choices) {
    int total = 0;
    for (const auto& c : choices) total += c.first;
    int64_t r = in(0, total);
    for (const auto& c : choices)
      if ((r -= c.first) < 0) return c.second;
    return choices.begin()->second;
  }
};

enum class Kind { Prefill, Decode, Extend, Reset };
struct Command {
  Kind kind;
  int64_t n;  // tokens (Prefill, Extend); 1 for Decode, 0 for Reset
  // The step's name in failure messages, as the tensor engine's commands name theirs.
  const char* name() const {
    return kind == Kind::Prefill ? "Prefill" : kind == Kind::Decode ? "Decode" : kind == Kind::Extend ? "Extend" : "Reset";
  }
  std::string show() const {
    switch (kind) {
      case Kind::Prefill: return "Prefill(" + std::to_string(n) + ")";
      case Kind::Decode: return "Decode";
      case Kind::Extend: return "Extend(" + std::to_string(n) + ")";
      case Kind::Reset: return "Reset";
    }
    return "?";
  }
};

struct Trace {
  ScenarioConfig config;
  std::vector<Command> commands;
};

ScenarioConfig draw_config(Rng& r, const ConfigFilter& filter) {
  ScenarioConfig c;
  c.attention = filter.attention ? *filter.attention
                                 : r.weighted<LayerType>({{4, LayerType::Sliding}, {4, LayerType::Chunked}, {1, LayerType::Full}});
  const int band = r.weighted<int>({{6, 0}, {3, 1}, {1, 2}});
  const int64_t lo[] = {1, 9, 17}, hi[] = {9, 17, 65};
  c.window = r.in(lo[band], hi[band]);
  switch (r.in(0, 3)) {
    case 0: c.max_cache_len = r.in(1, c.window + 1); break;
    case 1: c.max_cache_len = c.window; break;
    default: c.max_cache_len = r.in(c.window, 3 * c.window + 4);
  }
  c.batch = r.weighted<int64_t>({{4, 1}, {3, 2}, {1, 3}, {1, 4}});
  c.kv_heads = r.in(1, 3);
  c.heads = c.kv_heads * r.weighted<int64_t>({{1, 1}, {1, 2}, {1, 4}});
  c.head_dim = r.weighted<int64_t>({{3, 1}, {4, 4}, {3, 8}, {1, 16}, {1, 64}});
  c.dtype = filter.dtype ? *filter.dtype
                         : r.weighted<DType>({{4, DType::Float32}, {2, DType::Float16}, {2, DType::BFloat16}, {1, DType::Float64}});
  if (r.in(0, 2) == 1) {
    const int64_t most = std::min<int64_t>(2 * c.window + 1, 12);
    c.left_padding = std::vector<int64_t>(static_cast<size_t>(c.batch));
    for (int64_t& lp : *c.left_padding) lp = r.in(0, most + 1);
  }
  c.seed = static_cast<uint32_t>(r.next());
  c.max_tokens = token_limit(c);
  if (c.left_padding)
    for (int64_t& lp : *c.left_padding) lp = std::min(lp, c.max_tokens - 1);
  return c;
}

// Token counts biased toward the window boundaries (gen_count in scenario.cpp).
int64_t draw_count(Rng& r, const ScenarioConfig& c, int64_t at_least, int64_t room) {
  if (room < at_least) return at_least;
  const int64_t w = c.window;
  int64_t fits[6];
  int n = 0;
  for (int64_t v : {w - 1, w, w + 1, 2 * w + 1, at_least, room})
    if (v >= at_least && v <= room) fits[n++] = v;
  if (n > 0 && r.in(0, 2) == 0) return fits[r.in(0, n)];
  return r.in(at_least, room + 1);
}

// The preconditions of the stateful commands (scenario.cpp), on the tokens seen so far.
bool allowed(const Command& cmd, const ScenarioConfig& c, int64_t seen) {
  switch (cmd.kind) {
    case Kind::Prefill: return seen == 0 && cmd.n > c.max_left_padding() && cmd.n <= c.max_tokens;
    case Kind::Decode: return seen > 0 && seen + 1 <= c.max_tokens;
    case Kind::Extend: return seen > 0 && cmd.n >= 2 && seen + cmd.n <= c.max_tokens;
    case Kind::Reset: return seen > 0;
  }
  return false;
}

Trace draw_trace(uint64_t seed, int64_t index, int size, const ConfigFilter& filter) {
  Rng r{seeds::case_seed(seed, static_cast<uint64_t>(index))};
  Trace t;
  t.config = draw_config(r, filter);
  const ScenarioConfig& c = t.config;
  const int64_t length = r.in(1, 2 + size / 5);
  int64_t seen = 0;
  for (int64_t k = 0, tries = 0; k < length && tries < 4 * length + 8; ++tries) {
    Command cmd{};
    switch (r.in(0, 4)) {
      case 0: cmd = {Kind::Prefill, draw_count(r, c, c.max_left_padding() + 1, c.max_tokens)}; break;
      case 1: cmd = {Kind::Decode, 1}; break;
      case 2: cmd = {Kind::Extend, draw_count(r, c, 2, std::max<int64_t>(c.max_tokens - seen, 2))}; break;
      default: cmd = {Kind::Reset, 0};
    }
    if (!allowed(cmd, c, seen)) continue;
    seen = cmd.kind == Kind::Reset ? 0 : seen + cmd.n;
    t.commands.push_back(cmd);
    ++k;
  }
  return t;
}

// One trace on the fast path; the failure message (empty when every step holds) in the words of
// the tensor engine (sut.cpp), and the index of the failing command.
struct Checker {
  Checker(Property p, Mutation m) : property(p), mutation(m) {}
  Property property;
  Mutation mutation;
  int64_t steps = 0;
  int64_t deviation_steps = 0;  // layer-steps where transformers drops keys its window allows
  const Behaviours behaviours{};  // the campaign checks the newest release's layers, as sut.cpp
  const std::vector<int64_t> no_padding;
  // Reused between traces: the check allocates nothing per step once warm.
  fast::TokenRows returned;
  std::vector<uint8_t> mask;
  MaskRequest m;  // reused: assign_mask_request keeps its buffers
  PositionChecks checks;

  std::string check_step(fast::Layer& layer, const char* role, int64_t batch, const LeftPadding& padding, int64_t seen,
                         int64_t q, const char* command) {
    const LayerSpec& spec = layer.spec();
    const StepAt at{command, role, &spec, seen, q};
    const MaskSizes sizes = layer.get_mask_sizes(q);
    // transformers itself drops keys the window allows here (positions::loses_window_keys): judged
    // against what the layer returns and counted as a reproduced upstream deviation, as sut.cpp does.
    const bool lost_keys = property == Property::WindowCoverage && spec.is_sliding() &&
                           positions::loses_window_keys(spec, seen, q, padding ? *padding : no_padding);
    if (lost_keys) ++deviation_steps;
    try {
      layer.update(q, returned);
    } catch (const std::exception& e) {
      return at.who() + " threw: " + e.what();
    }
    ++steps;
    if (property == Property::StoredRows) return checks.stored(at, layer.stored());
    if (property == Property::ReturnedRows) return checks.returned(at, sizes, returned);
    // WindowCoverage: the tokens each query attends through its unmasked columns.
    assign_mask_request(m, spec, behaviours, batch, padding, seen, q, std::nullopt, sizes);
    fast::boolean_mask(m, mask, mutation);
    return checks.coverage(at, batch, padding, sizes, returned, mask, !lost_keys && fast::skips(m), lost_keys);
  }

  struct Failure {
    std::string message;
    size_t command = 0;  // index of the failing command
  };

  // Runs the trace; nullopt when it holds, and whether every command met its precondition.
  std::optional<Failure> run(const Trace& t, bool* valid = nullptr) {
    const ScenarioConfig& c = t.config;
    // The static and the dynamic layer, as the tensor engine checks them (a dynamic layer whose
    // configuration transformers itself gets wrong, window 1, is left out there too).
    fast::Layer layers[2] = {fast::Layer(c.static_spec(), behaviours, mutation),
                             fast::Layer(c.dynamic_spec(), behaviours, mutation)};
    const char* roles[2] = {"static", "dynamic"};
    const size_t count = positions::upstream_deviation(c.dynamic_spec()) ? 1 : 2;
    int64_t seen = 0;
    if (valid) *valid = true;
    for (size_t k = 0; k < t.commands.size(); ++k) {
      const Command& cmd = t.commands[k];
      if (!allowed(cmd, c, seen)) {
        if (valid) *valid = false;
        return std::nullopt;
      }
      if (cmd.kind == Kind::Reset) {
        for (auto& l : layers) l.reset();
        seen = 0;
        continue;
      }
      for (size_t l = 0; l < count; ++l)
        if (std::string e = check_step(layers[l], roles[l], c.batch, c.left_padding, seen, cmd.n, cmd.name()); !e.empty())
          return Failure{e, k};
      seen += cmd.n;
    }
    return std::nullopt;
  }
};

// Simpler variants of a failing trace, most aggressive first (invalid ones are skipped by run()).
std::vector<Trace> simplifications(const Trace& t) {
  std::vector<Trace> out;
  for (size_t i = t.commands.size(); i-- > 0 && t.commands.size() > 1;) {  // drop a command
    Trace s = t;
    s.commands.erase(s.commands.begin() + static_cast<long>(i));
    out.push_back(s);
  }
  for (size_t i = 0; i < t.commands.size(); ++i) {  // fewer tokens in one update
    const Command& cmd = t.commands[i];
    const int64_t least = cmd.kind == Kind::Prefill ? t.config.max_left_padding() + 1 : cmd.kind == Kind::Extend ? 2 : cmd.n;
    if (cmd.n > least) {
      Trace s = t;
      s.commands[i].n = least;
      out.push_back(s);
      s.commands[i].n = cmd.n - 1;
      out.push_back(s);
    }
  }
  ScenarioConfig c = t.config;
  auto with = [&](const ScenarioConfig& changed) {
    Trace s = t;
    s.config = changed;
    s.config.max_tokens = token_limit(s.config);
    if (s.config.left_padding)
      for (int64_t& lp : *s.config.left_padding) lp = std::min(lp, s.config.max_tokens - 1);
    out.push_back(s);
  };
  if (c.left_padding) {
    ScenarioConfig s = c;
    s.left_padding.reset();
    with(s);
    for (size_t b = 0; b < c.left_padding->size(); ++b)
      if ((*c.left_padding)[b] > 0) {
        s = c;
        (*s.left_padding)[b] -= 1;
        with(s);
      }
  }
  if (c.batch > 1) {
    ScenarioConfig s = c;
    s.batch = 1;
    if (s.left_padding) s.left_padding->resize(1);
    with(s);
  }
  if (c.window > 1) {
    ScenarioConfig s = c;
    s.window -= 1;
    with(s);
  }
  if (c.max_cache_len > 1) {
    ScenarioConfig s = c;
    s.max_cache_len -= 1;
    with(s);
  }
  if (c.heads > 1 || c.kv_heads > 1 || c.head_dim > 1) {
    ScenarioConfig s = c;
    s.heads = s.kv_heads = s.head_dim = 1;
    with(s);
  }
  return out;
}

}  // namespace

std::string check_fast(Property property, const FastTrace& t, Mutation mutation) {
  if (!has_fast_path(property)) resolve(Engine::Fast, property);
  thread_local Checker checker{property, mutation};
  checker.property = property;
  checker.mutation = mutation;
  thread_local std::vector<fast::Layer> layers;
  layers.clear();
  for (const LayerSpec& spec : t.layers)
    if (!positions::upstream_deviation(spec)) layers.emplace_back(spec, Behaviours{}, mutation);
  return fast::for_each_step(layers, t.steps, [&](size_t l, fast::Layer& layer, int64_t seen, int64_t q) {
    const std::string e = checker.check_step(layer, "layer", t.batch, t.left_padding, seen, q, "Update");
    return e.empty() ? e : "layer " + std::to_string(l) + ": " + e;
  });
}

namespace {

struct FastReproduce {
  uint64_t seed = 0;
  int64_t trace = 0;
  int size = 0;
};

// fast:<seed>:<trace>:<size>: trace <trace> of the campaign with <seed>, drawn at <size>.
FastReproduce parse_fast_reproduce(const std::string& text) {
  unsigned long long s = 0;
  long long i = 0;
  int z = 0;
  char tail = 0;
  if (std::sscanf(text.c_str(), "fast:%llu:%lld:%d%c", &s, &i, &z, &tail) != 3 || i < 0 || z < 0)
    throw std::invalid_argument("reproduce string is malformed: '" + text + "' (expected fast:SEED:TRACE:SIZE)");
  return {s, i, z};
}

std::string params_of(const Options& options, Engine engine) {
  std::ostringstream params;
  params << "seed=" << options.seed << ",iterations=" << options.iterations << ",engine=" << to_string(engine);
  if (options.mutation != Mutation::None) params << ",mutant=" << to_string(options.mutation);
  if (options.filter.attention) params << ",attention=" << to_string(*options.filter.attention);
  if (options.filter.dtype) params << ",dtype=" << to_string(*options.filter.dtype);
  return params.str();
}

// What the fast engine's counterexample of `trace` shows: its configuration, commands and steps.
Counterexample counterexample_of(const Trace& trace, Mutation mutation) {
  Counterexample ce;
  ce.config = trace.config;
  for (const Command& cmd : trace.commands) {
    ce.commands.push_back(cmd.show());
    if (cmd.kind == Kind::Reset) ce.steps.clear();
    else ce.steps.push_back(cmd.n);
  }
  ce.masks = mask_pictures(ce.config, ce.steps, mutation);
  return ce;
}

std::string failure_text(const std::string& first_line, const Counterexample& ce, const std::string& message) {
  std::ostringstream text;
  text << first_line << "\n\n" << ce.config.describe() << "\n";
  for (const std::string& s : ce.commands) text << s << "\n";
  text << "\n" << message << "\n";
  return text.str();
}

bool replayable(const Trace& t) {
  int64_t seen = 0;
  for (const Command& cmd : t.commands) {
    if (!allowed(cmd, t.config, seen)) return false;
    seen = cmd.kind == Kind::Reset ? 0 : seen + cmd.n;
  }
  return true;
}

// The trace on the tensor engine (the LibTorch reference, SystemUnderTest), command by command as
// its RapidCheck campaign runs them; the failure and the index of its command.
std::optional<Checker::Failure> run_on_tensor(const Trace& t, Property property, Mutation mutation,
                                              Observations* observations) {
  size_t at = 0;
  std::string message = rc_check::failure_of([&] {
    SystemUnderTest sut(t.config, property, mutation, observations);
    int64_t seen = 0;
    for (at = 0; at < t.commands.size(); ++at) {
      const Command& cmd = t.commands[at];
      if (cmd.kind == Kind::Reset) {
        sut.reset();
        seen = 0;
        continue;
      }
      sut.step(seen, cmd.n, cmd.name());
      seen += cmd.n;
    }
  });
  if (message.empty()) return std::nullopt;
  return Checker::Failure{std::move(message), at};
}

}  // namespace

Outcome replay_fast_trace_on_tensor(Property property, const Options& options) {
  const FastReproduce r = parse_fast_reproduce(options.reproduce);
  Outcome outcome;
  outcome.property = property;
  outcome.params = params_of(options, Engine::Tensor);
  Trace trace = draw_trace(r.seed, r.trace, r.size, options.filter);
  std::optional<Checker::Failure> failure = run_on_tensor(trace, property, options.mutation, &outcome.observations);
  if (!failure) {
    outcome.ok = true;
    outcome.cases = 1;
    return outcome;
  }
  const int shrinks = shrink::greedy(
      trace, simplifications,
      [&](const Trace& candidate) {
        if (!replayable(candidate)) return false;
        std::optional<Checker::Failure> f = run_on_tensor(candidate, property, options.mutation, nullptr);
        if (!f) return false;
        failure = f;
        return true;
      },
      500);
  trace.commands.resize(failure->command + 1);
  outcome.counterexample = counterexample_of(trace, options.mutation);
  outcome.failure = failure_text("Falsifiable on the fast engine's trace " + std::to_string(r.trace) + " after " +
                                     std::to_string(shrinks) + " shrinks (tensor engine)",
                                 *outcome.counterexample, failure->message);
  outcome.reproduce = options.reproduce;
  return outcome;
}

Outcome run_fast(Property property, const Options& options) {
  if (!has_fast_path(property)) resolve(Engine::Fast, property);  // throws with the reason
  Outcome outcome;
  outcome.property = property;
  outcome.params = params_of(options, Engine::Fast);

  uint64_t seed = options.seed;
  int64_t first = 0, last = options.iterations;
  int fixed_size = -1;
  if (!options.reproduce.empty()) {
    const FastReproduce r = parse_fast_reproduce(options.reproduce);
    seed = r.seed, first = r.trace, last = r.trace + 1, fixed_size = r.size;
  }

  Checker checker{property, options.mutation};
  for (int64_t i = first; i < last; ++i) {
    // Sizes grow over the campaign as RapidCheck's do: short traces first.
    const int size = fixed_size >= 0 ? fixed_size
                                     : static_cast<int>(options.max_size * i / std::max<int64_t>(options.iterations, 1));
    Trace trace = draw_trace(seed, i, size, options.filter);
    std::optional<Checker::Failure> failure = checker.run(trace);
    if (!failure) {
      ++outcome.cases;
      continue;
    }
    const int shrinks = shrink::greedy(
        trace, simplifications,
        [&](const Trace& candidate) {
          bool valid = false;
          Checker probe{property, options.mutation};
          std::optional<Checker::Failure> f = probe.run(candidate, &valid);
          if (!valid || !f) return false;
          failure = f;
          return true;
        },
        500);
    trace.commands.resize(failure->command + 1);
    outcome.counterexample = counterexample_of(trace, options.mutation);
    outcome.failure = failure_text("Falsifiable after " + std::to_string(outcome.cases + 1) + " traces and " +
                                       std::to_string(shrinks) + " shrinks (fast engine)",
                                   *outcome.counterexample, failure->message);
    outcome.reproduce = "fast:" + std::to_string(seed) + ":" + std::to_string(i) + ":" + std::to_string(size);
    outcome.observations.steps = static_cast<int>(checker.steps);
    outcome.observations.deviation_steps = static_cast<int>(checker.deviation_steps);
    return outcome;
  }
  outcome.ok = true;
  outcome.observations.steps = static_cast<int>(checker.steps);
  outcome.observations.deviation_steps = static_cast<int>(checker.deviation_steps);
  return outcome;
}

}  // namespace kvc::campaign
