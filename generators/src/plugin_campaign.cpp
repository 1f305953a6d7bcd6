#include "kvcgen/plugin_campaign.h"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <iomanip>
#include <memory>
#include <ostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "kvconform/cases.h"
#include "kvconform/inputs.h"
#include "kvconform/positions.h"
#include "kvconform/regressions.h"
#include "kvconform/subprocess_backend.h"
#include "kvcgen/scenario.h"
#include "kvcgen/search.h"
#include "kvconform/seeds.h"

namespace kvc::plugin {

namespace {

using report::CaseResult;
using report::Status;

// The numerics share of the kernel campaign, the random counterpart of numeric_scenarios: one
// layer of 256, 1024, 2048 or 4096 keys filled by an unjudged step (past the window), then one to
// three judged decode or short extend steps; head_dim 64, 128 or 256; normal or large-magnitude
// inputs (inputs.h). A second distribution on purpose: the trace generator stops at 160 tokens.
struct NumericDraw {
  LayerType type = LayerType::Sliding;
  DType dtype = DType::Float32;
  int64_t kv_heads = 1, heads = 1, head_dim = 64;
  inputs::Distribution distribution = inputs::Distribution::Normal;
  uint64_t seed = 0;
  int64_t keys = 256;           // the window (or, full, the keys filled): long ranges are the point
  int64_t past_window = 0;      // fill tokens beyond the window (0 for a full layer)
  std::vector<int64_t> judged;  // tokens of each judged step after the fill
};

NumericDraw draw_numeric(Rng& r, const ConfigFilter& filter) {
  NumericDraw d;
  d.type = filter.attention ? *filter.attention : r.element({LayerType::Sliding, LayerType::Chunked, LayerType::Full});
  d.dtype = filter.dtype ? *filter.dtype : r.element({DType::Float32, DType::Float16, DType::BFloat16, DType::Float64});
  d.kv_heads = r.in(1, 3);
  d.heads = d.kv_heads * r.in(1, 3);
  d.head_dim = r.element<int64_t>({64, 128, 256});
  d.distribution = r.element({inputs::Distribution::Normal, inputs::Distribution::LargeLogits});
  d.seed = static_cast<uint64_t>(r.in(0, int64_t{1} << 30));
  d.keys = r.element<int64_t>({256, 1024, 2048, 4096});  // a quarter reach 4096
  d.past_window = d.type == LayerType::Full ? 0 : r.in(0, 600);
  for (int64_t i = 0, n = r.in(1, 4); i < n; ++i) d.judged.push_back(r.in(1, 4));
  return d;
}

// Smaller numerics cases: fewer or shorter judged steps, fewer keys, no fill past the window,
// smaller heads; the dtype and the distribution stay (they are usually the point of the failure).
std::vector<NumericDraw> simplifications(const NumericDraw& d) {
  std::vector<NumericDraw> out;
  auto with = [&](auto change) {
    NumericDraw s = d;
    change(s);
    out.push_back(std::move(s));
  };
  if (d.judged.size() > 1) with([](NumericDraw& s) { s.judged.pop_back(); });
  for (size_t i = 0; i < d.judged.size(); ++i)
    if (d.judged[i] > 1) with([i](NumericDraw& s) { s.judged[i] = 1; });
  if (d.keys > 256) with([](NumericDraw& s) { s.keys = s.keys == 4096 ? 2048 : s.keys == 2048 ? 1024 : 256; });
  if (d.past_window > 0) with([](NumericDraw& s) { s.past_window = 0; });
  if (d.head_dim > 64) with([](NumericDraw& s) { s.head_dim = 64; });
  if (d.heads > 1 || d.kv_heads > 1) with([](NumericDraw& s) { s.heads = s.kv_heads = 1; });
  return out;
}

Scenario scenario_of(const NumericDraw& d, CacheKind cache) {
  const int64_t fill = d.keys + d.past_window;
  int64_t total = fill;
  for (int64_t q : d.judged) total += q;
  const bool full = d.type == LayerType::Full;
  Scenario s = one_layer("random_numerics", d.type, full ? 0 : d.keys, full ? total : d.keys, 1, d.heads, d.kv_heads, d.head_dim,
                         std::nullopt, d.judged, d.seed, cache);
  s.steps.insert(s.steps.begin(), Step{fill, std::nullopt, false});  // the unjudged fill
  s.dtype = d.dtype;
  s.distribution = d.distribution;
  return s;
}

// A trace of the one generator (the property campaign's), on one layer.
Scenario scenario_of(const kvc::Trace& t, CacheKind cache) {
  const ScenarioConfig& c = t.config;
  std::vector<int64_t> steps;
  for (const kvc::Command& cmd : t.commands) steps.push_back(cmd.n);  // a Reset is a 0-token step
  Scenario s = one_layer("random", c.attention, c.window, c.max_cache_len, c.batch, c.heads, c.kv_heads, c.head_dim,
                         c.left_padding, steps, c.seed, cache);
  s.dtype = c.dtype;
  return s;
}

// One case of a plugin campaign: a trace or (kernel campaign, one case in five) a numerics draw, on
// either cache kind. Case i draws its trace as the property campaign's trace i (draw_trace), and the
// cache kind and the numerics choice from a second stream of the same case seed.
struct PluginCase {
  CacheKind cache = CacheKind::Static;
  std::optional<kvc::Trace> trace;
  std::optional<NumericDraw> numeric;
  Scenario scenario() const { return trace ? scenario_of(*trace, cache) : scenario_of(*numeric, cache); }
};

PluginCase draw_case(const search::CaseId& id, Part part, const ConfigFilter& filter) {
  Rng r{inputs::mix64(seeds::case_seed(id.seed, static_cast<uint64_t>(id.index)))};
  PluginCase c;
  c.cache = r.element({CacheKind::Static, CacheKind::Dynamic});
  if (part == Part::Kernel && r.in(0, 5) == 0) c.numeric = draw_numeric(r, filter);
  else c.trace = draw_trace(id.seed, id.index, id.size, filter);
  return c;
}

std::vector<PluginCase> simplifications(const PluginCase& c) {
  std::vector<PluginCase> out;
  if (c.trace)
    for (kvc::Trace& t : kvc::simplifications(*c.trace)) out.push_back({c.cache, std::move(t), std::nullopt});
  else
    for (NumericDraw& d : simplifications(*c.numeric)) out.push_back({c.cache, std::nullopt, std::move(d)});
  return out;
}

bool valid(const PluginCase& c) { return !c.trace || replayable(*c.trace); }

// The sequences of a scenario between its resets: each starts from an empty layer, and its inputs
// (generated from the tokens since the reset) are the same on their own.
std::vector<Scenario> sequences(const Scenario& s) {
  std::vector<Scenario> out;
  Scenario cur = s;
  cur.steps.clear();
  for (const Step& st : s.steps) {
    if (st.is_reset()) {
      if (!cur.steps.empty()) out.push_back(cur);
      cur.steps.clear();
    } else {
      cur.steps.push_back(st);
    }
  }
  if (!cur.steps.empty()) out.push_back(cur);
  return out;
}

// Saves the first sequence of the shrunk scenario that fails on its own into the found-case corpus;
// the path, or why nothing was written.
std::string write_failure_case(const Target& target, const std::string& part_name, Part part, const std::string& plugin,
                               const Scenario& shrunk, const PluginCheckOptions& o) {
  for (Scenario seq : sequences(shrunk)) {
    const CaseResult r = check_scenario(target, part_name, seq, part, plugin, o.timeout_s);
    if (r.status != Status::Fail) continue;
    seq.description = "Found by kvconform run --plugin (" + part_name + " campaign, seed " + std::to_string(o.seed) + ") on " +
                      plugin + ": " + r.message;
    seq.tags = {"plugin", "plugin:" + plugin, "part:" + part_name, "seed:" + std::to_string(o.seed)};
    // The corpus names the file, and the case, by a hash of what it holds (kvconform/regressions.h).
    seq.name = "found";
    const nlohmann::ordered_json doc = cases::to_case_json(seq);
    const std::string text = doc.dump(2) + "\n";
    const std::string name = seq.name;
    std::string over_caps, allow_large;
    try {
      cases::parse_case(text, name + ".json");  // what is written must load as a case
    } catch (const cases::CaseError& e) {
      // A drawn case can exceed the case-file size caps (a numerics case's fill step of thousands
      // of keys): it is still a case, and it loads with --allow-large. Anything else wrong throws.
      cases::parse_case(text, name + ".json", cases::Limits::unlimited());
      over_caps = std::string(", over the size caps (") + e.what() + ")";
      allow_large = " --allow-large";
    }
    const regressions::Saved saved = regressions::save(o.save_regressions, "plugin", regressions::target_name(plugin), doc);
    return "saved as a case: " + saved.path + (saved.existed ? " (already there)" : "") + over_caps +
           " (replayed by every `kvconform run --plugin` of it" + (allow_large.empty() ? "" : " with" + allow_large) +
           " when it is in --regressions)";
  }
  return "not saved as a case: no sequence between resets fails on its own (the failure needs a reset before it)";
}

// Saving is a by-product of a FAIL: whatever stops it, the FAIL stands, says why, and the run goes on.
std::string save_failure(const Target& target, const std::string& part_name, Part part, const std::string& plugin,
                         const Scenario& shrunk, const PluginCheckOptions& o) {
  try {
    return write_failure_case(target, part_name, part, plugin, shrunk, o);
  } catch (const std::exception& e) {
    return std::string("not saved as a case: ") + e.what();
  }
}

CaseResult run_campaign(const Target& target, Part part, const std::string& plugin, const PluginCheckOptions& o) {
  const std::string part_name = part == Part::Cache ? "cache" : "kernel";
  CaseResult out = report::named(report::PluginKey{plugin, "campaign/" + part_name, "mixed"});
  out.params = "seed=" + std::to_string(o.seed) + ",iterations=" + std::to_string(o.iterations);
  ConfigFilter filter;  // --dtype, --attention
  filter.dtype = o.dtype;
  filter.attention = o.attention;
  int skipped = 0;
  struct Failure {
    std::string message;  // the check's message, then the case
  };
  const auto check = [&](const PluginCase& c, bool shrinking) -> std::optional<Failure> {
    const Scenario s = c.scenario();
    if (positions::upstream_deviation(s.layer_spec(0))) {  // nothing a plugin can be held to: not a pass
      if (!shrinking) ++skipped;
      return std::nullopt;
    }
    CaseResult r;
    try {
      r = check_scenario(target, "campaign/" + part_name, s, part, plugin, o.timeout_s);
    } catch (const std::exception& e) {  // a failure of this case, not of the run
      return Failure{std::string("the check raised: ") + e.what() + "\n  case: " + describe(s)};
    }
    if (r.status == Status::Skipped && !shrinking) ++skipped;
    if (r.status != Status::Fail) return std::nullopt;
    return Failure{r.message + "\n  case: " + describe(s)};
  };
  const search::Budget budget{o.seed, o.iterations, o.max_size, o.reproduce};
  const auto found = search::run<PluginCase, Failure>(
      budget, [&](const search::CaseId& id) { return draw_case(id, part, filter); }, check,
      [](const PluginCase& c) { return simplifications(c); }, valid);
  if (found.ok()) {
    // A random case the plugin answered KVC_ERR_UNSUPPORTED (or that kvconform cannot hold it to) was
    // not checked: counted apart, and a campaign that checked none is a SKIP, never a pass.
    const int checked = found.passed - skipped;
    out.message = std::to_string(checked) + " random cases checked, " + std::to_string(skipped) + " skipped";
    out.detail = out.message + " (unsupported by the plugin or an upstream deviation)";
    if (checked == 0) out.status = Status::Skipped;
  } else {
    const std::string& message = found.failure->message;
    out.status = Status::Fail;
    out.message = message.substr(0, message.find('\n')) + " (shrunk)";
    out.detail = "Falsifiable after " + std::to_string(found.passed + 1) + " cases and " + std::to_string(found.shrinks) +
                 " shrinks\n\n" + message;
    out.replay = found.reproduce;
    if (!o.save_regressions.empty())
      out.detail += "\n" + save_failure(target, part_name, part, plugin, found.failing->scenario(), o);
  }
  return out;
}

}  // namespace

std::vector<CaseResult> check_target(const Target& target, const PluginCheckOptions& options) {
  FixedChecks fixed = check_fixed(target, options);
  std::vector<CaseResult> results = std::move(fixed.results);
  if (!fixed.loaded || options.iterations <= 0) return results;
  for (const Part part : {Part::Cache, Part::Kernel}) {
    if (!(part == Part::Cache ? fixed.has_cache : fixed.has_attention)) continue;
    CaseResult id = report::named(
        report::PluginKey{fixed.name, std::string("campaign/") + (part == Part::Cache ? "cache" : "kernel"), "mixed"});
    id.params = "seed=" + std::to_string(options.seed) + ",iterations=" + std::to_string(options.iterations);
    if (options.select && !options.select(id.id)) continue;
    if (options.list_only) {
      results.push_back(id);
      continue;
    }
    // After a worker fault the campaign is not run (it would only repeat the fault), but its id
    // stays in the results with the reason: dashboards track ids.
    if (options.max_worker_failures > 0 && fixed.worker_failures >= options.max_worker_failures) {
      id.status = Status::Skipped;
      id.message = gave_up_message(fixed.worker_failures);
    } else if (fixed.isolated_failure) {
      id.status = Status::Skipped;
      id.message = "not run: the worker failed in " + fixed.first_fault +
                   " (a crash, hang or exit); a random campaign would only repeat it";
    }
    results.push_back(id.status == Status::Skipped ? id : run_campaign(target, part, fixed.name, options));
  }
  return results;
}

std::vector<CaseResult> check_plugin(const std::string& path, const PluginCheckOptions& options) {
  return check_target(plugin_target(path), options);
}

std::vector<CaseResult> check_backend_command(const std::string& command, const PluginCheckOptions& options) {
  PluginCheckOptions o = options;
  o.cache = false;
  auto results = check_target(backend_command_target(command), o);
  // A worker that never started has no name: the report names the command instead.
  for (CaseResult& r : results)
    if (r.name == "load") report::rename(r, report::PluginKey{command, r.name, r.dtype});
  // The listing's worker (its hello) stays for the run that follows: a Python worker's start is
  // seconds of imports; after the run the next check starts afresh.
  if (!options.list_only) stop_worker(command);
  return results;
}

}  // namespace kvc::plugin
