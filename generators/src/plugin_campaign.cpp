#include "kvcgen/plugin_campaign.h"

#include <rapidcheck.h>

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
#include "kvconform/subprocess_backend.h"
#include "kvcgen/rc_check.h"
#include "kvcgen/rc_gen.h"

namespace kvc {

// How RapidCheck prints a generated scenario in a shrunk counterexample (found by argument lookup).
void showValue(const Scenario& s, std::ostream& os) { os << plugin::describe(s); }

}  // namespace kvc

namespace kvc::plugin {

namespace {

using report::CaseResult;
using report::Status;

// A trace of the one generator (the property campaign's), on one layer of either cache kind.
rc::Gen<Scenario> gen_scenario(const ConfigFilter& filter) {
  return rc::gen::exec([filter] {
    const kvc::Trace t = *gen_trace(filter);
    const ScenarioConfig& c = t.config;
    Scenario s;
    s.name = "random";
    s.cache = *rc::gen::element(CacheKind::Static, CacheKind::Dynamic);
    s.layer_types = {c.attention};
    s.window = c.window;
    s.max_cache_len = c.max_cache_len;
    s.batch = c.batch;
    s.heads = c.heads;
    s.kv_heads = c.kv_heads;
    s.head_dim = c.head_dim;
    s.dtype = c.dtype;
    s.left_padding = c.left_padding;
    s.seed = c.seed;
    for (const kvc::Command& cmd : t.commands) s.steps.push_back({cmd.n, std::nullopt});  // a Reset is a 0-token step
    return s;
  });
}

// A numerics configuration (the kernel campaign's share beside gen_scenario): one layer of 256, 1024,
// 2048 or 4096 keys filled by an unjudged step (past the window), then one to three judged decode or short extend steps; head_dim 64,
// 128 or 256; normal or large-magnitude inputs (inputs.h). The random counterpart of numeric_scenarios.
rc::Gen<Scenario> gen_numeric_scenario(const ConfigFilter& filter) {
  return rc::gen::exec([filter] {
    Scenario s;
    s.name = "random_numerics";
    s.cache = *rc::gen::element(CacheKind::Static, CacheKind::Dynamic);
    const LayerType type =
        filter.attention ? *filter.attention : *rc::gen::element(LayerType::Sliding, LayerType::Chunked, LayerType::Full);
    s.layer_types = {type};
    s.dtype = filter.dtype ? *filter.dtype
                           : *rc::gen::element(DType::Float32, DType::Float16, DType::BFloat16, DType::Float64);
    s.kv_heads = *rc::gen::element<int64_t>(1, 2);
    s.heads = s.kv_heads * *rc::gen::element<int64_t>(1, 2);
    s.head_dim = *rc::gen::element<int64_t>(64, 128, 256);
    s.distribution = *rc::gen::element(inputs::Distribution::Normal, inputs::Distribution::LargeLogits);
    s.seed = *rc::gen::inRange<uint64_t>(0, 1u << 30);
    // The window (or, full, the keys filled): long ranges are the point, so a quarter reach 4096.
    const int64_t keys = *rc::gen::element<int64_t>(256, 1024, 2048, 4096);
    const int64_t fill = type == LayerType::Full ? keys : keys + *rc::gen::inRange<int64_t>(0, 600);
    s.steps.push_back(Step{fill, std::nullopt, false});
    const int64_t judged = *rc::gen::inRange<int64_t>(1, 4);
    int64_t total = fill;
    for (int64_t i = 0; i < judged; ++i) {
      const int64_t q = *rc::gen::inRange<int64_t>(1, 4);
      s.steps.push_back({q, std::nullopt});
      total += q;
    }
    s.window = type == LayerType::Full ? 0 : keys;
    s.max_cache_len = type == LayerType::Full ? total : keys;
    return s;
  });
}

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

std::string file_safe(const std::string& s) {
  std::string out;
  for (char ch : s) out += std::isalnum(static_cast<unsigned char>(ch)) ? static_cast<char>(std::tolower(ch)) : '_';
  return out;
}

// Writes the first sequence of the shrunk scenario that fails on its own as a case file named by
// what it runs; the path, or why nothing was written.
std::string write_failure_case(const Target& target, const std::string& part_name, Part part, const std::string& plugin,
                               const Scenario& shrunk, const PluginCheckOptions& o) {
  for (Scenario seq : sequences(shrunk)) {
    const CaseResult r = check_scenario(target, part_name, seq, part, plugin, o.timeout_s);
    if (r.status != Status::Fail) continue;
    seq.description = "Found by kvconform run --plugin (" + part_name + " campaign, seed " + std::to_string(o.seed) +
                      ") on " + plugin + ": " + r.message;
    seq.tags = {"plugin", "plugin:" + plugin, "part:" + part_name, "seed:" + std::to_string(o.seed)};
    seq.name = "";
    nlohmann::ordered_json doc = cases::to_case_json(seq);
    nlohmann::ordered_json identity = doc;  // the same shrunk sequence found twice is one file
    for (const char* k : {"name", "description", "tags"}) identity.erase(k);
    uint64_t h = inputs::mix64(static_cast<uint64_t>(part));
    for (unsigned char ch : identity.dump()) h = inputs::mix64(h ^ ch);
    std::ostringstream hex;
    hex << std::hex << std::setw(16) << std::setfill('0') << h;
    const std::string name = "plugin_" + file_safe(plugin) + "_" + part_name + "_" + hex.str().substr(0, 12);
    doc["name"] = name;
    const std::string text = doc.dump(2) + "\n";
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
    std::filesystem::create_directories(o.save_cases);
    const std::string path = o.save_cases + "/" + name + ".json";
    {
      std::ofstream out(path + ".tmp");
      out << text;
      if (!out.flush()) throw std::runtime_error(path + ".tmp: cannot be written");
    }
    std::filesystem::rename(path + ".tmp", path);
    return "saved as a case: " + path + over_caps + " (replay it with `kvconform run --plugin ... --cases " +
           o.save_cases + allow_large + "`)";
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
  CaseResult out;
  out.suite = "plugin";
  out.name = "campaign/" + part_name;
  out.params = "seed=" + std::to_string(o.seed) + ",iterations=" + std::to_string(o.iterations);
  out.backend = plugin;
  out.dtype = "mixed";
  out.reproduce = target.reproduce + " --seed " + std::to_string(o.seed);
  auto last = std::make_shared<std::string>();
  auto failing = std::make_shared<Scenario>();  // the last failing case: after shrinking, the smallest
  auto skipped = std::make_shared<int>(0);
  ConfigFilter filter;  // --dtype, --attention
  filter.dtype = o.dtype;
  filter.attention = o.attention;
  const auto property = [=] {
    // The kernel campaign draws one case in five from the numerics generator (long key ranges, large
    // magnitudes, big head_dim); the rest, and every cache case, from the step-pattern generator.
    // (weightedElement: neither scaled by RapidCheck's size, which inRange is, nor shrunk.)
    const bool numerics = part == Part::Kernel && *rc::gen::weightedElement<bool>({{4, false}, {1, true}});
    const Scenario s = numerics ? *gen_numeric_scenario(filter) : *gen_scenario(filter);
    if (positions::upstream_deviation(s.layer_spec(0))) {  // nothing a plugin can be held to: not a pass
      ++*skipped;
      return;
    }
    const CaseResult r = check_scenario(target, "campaign/" + part_name, s, part, plugin, o.timeout_s);
    if (r.status == Status::Skipped) ++*skipped;
    if (r.status == Status::Fail) {
      *last = r.message + "\n  case: " + describe(s);
      *failing = s;
      RC_FAIL(*last);
    }
  };
  rc_check::Params params;
  params.id = "plugin_" + part_name;
  params.seed = o.seed;
  params.iterations = o.iterations;
  params.max_size = o.max_size;
  params.reproduce = o.reproduce;
  const rc_check::Result result = rc_check::check(params, property);
  if (result.ok) {
    // A random case the plugin answered KVC_ERR_UNSUPPORTED (or that kvconform cannot hold it to) was
    // not checked: counted apart, and a campaign that checked none is a SKIP, never a pass.
    const int checked = result.passed - *skipped;
    out.message = std::to_string(checked) + " random cases checked, " + std::to_string(*skipped) + " skipped";
    out.detail = out.message + " (unsupported by the plugin or an upstream deviation)";
    if (checked == 0) out.status = Status::Skipped;
  } else {
    out.status = Status::Fail;
    out.message = last->substr(0, last->find('\n')) + " (shrunk)";
    out.detail = rc_check::without_internals(result.failure);
    out.replay = result.reproduce;
    if (!out.replay.empty()) out.reproduce += " --reproduce '" + out.replay + "'";
    if (!o.save_cases.empty()) out.detail += "\n" + save_failure(target, part_name, part, plugin, *failing, o);
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
    CaseResult id;
    id.suite = "plugin";
    id.name = std::string("campaign/") + (part == Part::Cache ? "cache" : "kernel");
    id.backend = fixed.name;
    id.dtype = "mixed";
    id.params = "seed=" + std::to_string(options.seed) + ",iterations=" + std::to_string(options.iterations);
    if (options.select && !options.select(report::case_id(id))) continue;
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
      id.message = "not run: the worker failed in " + fixed.first_fault + " (a crash, hang or exit); a random campaign would only repeat it";
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
    if (r.name == "load") r.backend = command;
  stop_worker(command);
  return results;
}

}  // namespace kvc::plugin
