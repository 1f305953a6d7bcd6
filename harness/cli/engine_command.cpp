// `kvconform engine`: engines under test (docs/engines.md). Each engine configuration (a worker
// command and its options: engines/engines.json, or --engine-cmd) runs the fixed plans and a random
// campaign on every model of the zoo; one line per case, reports, `N passed, N failed, N skipped`.
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <regex>
#include <sstream>

#include "cli_util.h"
#include "closing.h"
#include "commands.h"
#include "kvcgen/engine_campaign.h"
#include "kvcgen/search.h"
#include "kvconform/engine/check.h"
#include "kvconform/report.h"
#include "kvconform/seeds.h"

namespace kvc::cli {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct EngineArgs {
  std::vector<std::string> engines;  // regexes over engines.json names
  std::string engine_cmd, engine_name, engine_options = "{}";
  std::string config = "engines/engines.json", known = "engines/known_deviations.json";
  std::string models, model = ".*", filter, plans = "fixed";
  std::vector<std::string> plan_files;
  int iterations = 10;
  uint64_t seed = kvc::seeds::kDefaultSeed;
  double time_budget = 0, timeout = 120, factor = 10, floor = 1e-4;
  std::string mutant = "none", reproduce, save_cases, report_dir = "reports/engines", shard, shard_count;
  bool list = false, no_report = false, verbose = false, ci_only = false;
};

struct Configured {
  engine::EngineSpec spec;
  std::string needs, setup;  // a shell test that it is installed, and the command that installs it
  bool ci = false;           // part of CI's small fixed set (--ci)
};

std::vector<Configured> read_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(path + ": cannot be read (--config)");
  std::stringstream s;
  s << in.rdbuf();
  const json j = json::parse(s.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("engines") || !j["engines"].is_array())
    throw std::invalid_argument(path + ": expected {\"engines\": [...]}");
  std::vector<Configured> out;
  for (size_t i = 0; i < j["engines"].size(); ++i) {
    const json& e = j["engines"][i];
    const std::string at = path + ": /engines/" + std::to_string(i);
    if (!e.is_object() || !e.contains("name") || !e["name"].is_string() || !e.contains("command") || !e["command"].is_string())
      throw std::invalid_argument(at + ": needs \"name\" and \"command\" strings");
    Configured c;
    c.spec.name = e["name"];
    c.spec.command = e["command"];
    c.spec.options = e.value("options", json::object());
    if (!c.spec.options.is_object()) throw std::invalid_argument(at + "/options: must be an object");
    c.needs = e.value("needs", "");
    c.setup = e.value("setup", "");
    c.spec.timeout_s = e.value("timeout", 120.0);
    c.ci = e.value("ci", false);
    out.push_back(c);
  }
  return out;
}

// The zoo: generated on first use by engines/models/make_models.py (standard library Python only).
// The stamp holds a hash of the generator, so a changed generator rewrites the zoo.
std::string ensure_models(const std::string& dir) {
  const std::string script = "engines/models/make_models.py";
  std::ifstream in(script);
  if (!in) throw std::invalid_argument(script + " not found: run kvconform engine from the repository root, or pass --models");
  std::stringstream text;
  text << in.rdbuf();
  const std::string stamp = std::to_string(std::hash<std::string>{}(text.str()));
  const fs::path stamp_file = fs::path(dir) / ".complete";
  std::ifstream old(stamp_file);
  std::string have;
  if (old && std::getline(old, have) && have == stamp) return dir;
  const std::string cmd = "python3 " + script + " " + shell_quote(dir) + " >&2";
  std::cerr << "engine: writing the tiny model zoo: " << cmd << "\n";
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("could not write the model zoo into " + dir + " (" + cmd + ")");
  report::write_file_atomically(stamp_file.string(), stamp + "\n");
  return dir;
}

}  // namespace

Runner add_engine_command(CLI::App& app) {
  auto a = std::make_shared<EngineArgs>();
  CLI::App* cmd = app.add_subcommand("engine", "Check inference engines end to end on tiny sliding-window models (docs/engines.md)");
  cmd->add_option("--engine", a->engines, "Engine configurations of --config whose name matches (repeatable; default: all)");
  cmd->add_option("--engine-cmd", a->engine_cmd, "An engine worker command (the engine protocol, docs/engines.md) instead of --engine");
  cmd->add_option("--engine-name", a->engine_name, "Its name in the results (default: the name its hello announces)");
  cmd->add_option("--engine-options", a->engine_options, "Its load options, a JSON object");
  cmd->add_option("--config", a->config, "Engine configurations (default engines/engines.json)");
  cmd->add_flag("--ci", a->ci_only, "Only the configurations marked \"ci\" in --config");
  cmd->add_option("--models", a->models, "The model zoo folder (default build/engine-models; written on first use)");
  cmd->add_option("--model", a->model, "Models whose name matches (default all)");
  cmd->add_option("--filter", a->filter, "Run only the case ids matching this regex (what --list prints)");
  cmd->add_flag("--list", a->list, "Print the case ids and exit");
  cmd->add_option("--plans", a->plans, "fixed, campaign or all (default fixed)")->check(CLI::IsMember({"fixed", "campaign", "all"}));
  cmd->add_option("--plan", a->plan_files, "Replay a saved plan file instead (repeatable)");
  cmd->add_option("--iterations", a->iterations, "Random plans per engine and model in the campaign (default 10)");
  add_seed_option(cmd, a->seed, "Campaign seed");
  cmd->add_option("--reproduce", a->reproduce, "Replay one shrunk campaign failure (its reproduce string, trace:SEED:INDEX:SIZE)")
      ->check([](const std::string& s) {
        try {
          search::parse_reproduce(s);
          return std::string();
        } catch (const std::invalid_argument& e) {
          return std::string(e.what());
        }
      });
  cmd->add_option("--time-budget", a->time_budget, "Stop starting new cases after this many seconds (0: no limit)");
  add_shard_options(cmd, a->shard, a->shard_count, "cases (in --list order)");
  cmd->add_option("--mutant", a->mutant,
                  "Tell the engine a wrong window (window+1, window-1, full), to do a serving operation wrong (fork-shared, fork-prefix, "
                  "chunked-restart, spec-rollback, batch-offset) or to read the config wrong (the oracle engine's chunk-shift, "
                  "chunked-as-sliding, sinks-dropped, nope-inverted, layers-swapped, softcap-dropped, kv-bf16, eviction-once, glitch; "
                  "rope-all-rotary, shared-kv-full, window-everywhere): the suite must FAIL")
      ->check(CLI::IsMember({"none", "window+1", "window-1", "full", "fork-shared", "fork-prefix", "chunked-restart", "spec-rollback",
                             "batch-offset", "chunk-shift", "chunked-as-sliding", "sinks-dropped", "nope-inverted", "layers-swapped",
                             "softcap-dropped", "kv-bf16", "eviction-once", "glitch", "rope-all-rotary", "shared-kv-full",
                             "window-everywhere"}));
  cmd->add_option("--known", a->known, "Known engine deviations (default engines/known_deviations.json)");
  cmd->add_option("--save-cases", a->save_cases, "Write shrunk campaign failures as plan files into this folder");
  cmd->add_option("--timeout", a->timeout, "Seconds per engine request (default 120)");
  cmd->add_option("--factor", a->factor, "Bound = max(floor, factor x float32 reference error) (default 10)");
  cmd->add_option("--floor", a->floor, "(default 1e-4)");
  cmd->add_option("--report-dir", a->report_dir, "Where the reports go (default reports/engines)");
  cmd->add_flag("--no-report", a->no_report, "Write no report files");
  cmd->add_flag("-v,--verbose", a->verbose, "Print each case's per-step errors");
  return [a]() -> int {
    std::vector<Configured> engines;
    if (!a->engine_cmd.empty()) {
      Configured c;
      c.spec.command = a->engine_cmd;
      c.spec.options = json::parse(a->engine_options, nullptr, false);
      if (c.spec.options.is_discarded() || !c.spec.options.is_object())
        throw std::invalid_argument("--engine-options: must be a JSON object, got " + a->engine_options);
      c.spec.name = a->engine_name;
      engines.push_back(c);
    } else {
      for (Configured& c : read_config(a->config)) {
        bool pick = a->engines.empty();
        for (const std::string& re : a->engines) pick = pick || std::regex_search(c.spec.name, std::regex(re));
        if (pick && (!a->ci_only || c.ci)) engines.push_back(c);
      }
      if (engines.empty()) throw std::invalid_argument("no engine configuration of " + a->config + " matches --engine");
    }
    for (Configured& c : engines) {
      c.spec.mutant = a->mutant;
      if (!a->engine_cmd.empty() || c.spec.timeout_s == 120) c.spec.timeout_s = a->timeout;  // a configuration may need longer
    }
    engine::CheckOptions check;
    check.rule = {a->factor, a->floor};
    if (fs::exists(a->known)) check.known = engine::load_known_deviations(a->known);
    const std::regex filter(a->filter.empty() ? ".*" : a->filter), model_re(a->model);
    const Shard shard = resolve_shard(a->shard, a->shard_count);

    // The models: the zoo, or the ones the plan files name.
    const std::string models_dir = ensure_models(a->models.empty() ? "build/engine-models" : a->models);
    std::vector<std::string> model_names;
    for (const auto& e : fs::directory_iterator(models_dir))
      if (e.is_directory() && fs::exists(e.path() / "config.json") && std::regex_search(e.path().filename().string(), model_re))
        model_names.push_back(e.path().filename().string());
    std::sort(model_names.begin(), model_names.end());
    std::vector<engine::Plan> replays;
    for (const std::string& f : a->plan_files) {
      replays.push_back(engine::load_plan(f));
      if (!fs::exists(fs::path(models_dir) / replays.back().model / "config.json"))
        throw std::invalid_argument(f + ": /model: \"" + replays.back().model + "\" is not a model of the zoo in " + models_dir);
    }
    std::map<std::string, engine::Model> models;
    auto model_of = [&](const std::string& name) -> const engine::Model& {
      auto it = models.find(name);
      if (it == models.end()) it = models.emplace(name, engine::load_model(fs::absolute(fs::path(models_dir) / name).string())).first;
      return it->second;
    };

    report::RunSummary summary;
    summary.tool_version = kToolVersion;
    summary.command = report_command();
    summary.seed = a->seed;
    summary.record.subcommand = "engine";
    summary.record.build = build_id();
    summary.record.shard_index = shard.index;
    summary.record.shard_count = shard.count;
    const auto started = std::chrono::steady_clock::now();
    size_t index = 0;
    int listed = 0;
    for (Configured& c : engines) {
      engine::Timing timing;
      check.timing = &timing;
      engine::EngineClient client(c.spec);
      const bool installed = c.needs.empty() || std::system(("sh -c " + shell_quote(c.needs) + " >/dev/null 2>&1").c_str()) == 0;
      std::string name = c.spec.name;
      if (name.empty() && installed) {
        engine::Reply hello = client.hello();
        name = hello.ok() ? client.info().value("name", std::string("engine")) : "engine";
        client.rename(name);
      }
      auto base_cmd = [&] {
        std::string s = "kvconform engine";
        if (!a->engine_cmd.empty())
          s += " --engine-cmd " + shell_quote(a->engine_cmd) + " --engine-name " + shell_quote(name) +
               (c.spec.options.empty() ? "" : " --engine-options " + shell_quote(c.spec.options.dump()));
        else
          s += " --config " + shell_quote(a->config) + " --engine " + shell_quote("^" + std::regex_replace(name, std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)") + "$");
        if (!a->models.empty()) s += " --models " + shell_quote(a->models);
        if (a->mutant != "none") s += " --mutant " + a->mutant;
        if (a->known != "engines/known_deviations.json") s += " --known " + shell_quote(a->known);
        if (a->timeout != 120) s += " --timeout " + std::to_string(a->timeout);
        if (a->factor != 10 || a->floor != 1e-4) s += " --factor " + std::to_string(a->factor) + " --floor " + std::to_string(a->floor);
        return s;
      };
      auto run_case = [&](const std::string& id, auto&& body) {
        if (!std::regex_search(id, filter)) return;
        const size_t ordinal = index++;
        if (ordinal % static_cast<size_t>(shard.count) != static_cast<size_t>(shard.index)) return;
        if (a->list) {
          std::cout << id << "\n";
          ++listed;
          return;
        }
        report::CaseResult r;
        const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        if (a->time_budget > 0 && elapsed > a->time_budget) return;
        try {
          r = body();
        } catch (const std::exception& e) {  // the case's FAIL; the run goes on
          r.suite = "engine";
          r.name = id.substr(id.find('/', 7) + 1);
          r.backend = name;
          r.status = report::Status::Fail;
          r.message = std::string("the check raised: ") + e.what();
        }
        print_case_line(r, a->verbose, 4000);  // a long per-step table only with -v
        if (a->verbose && r.status != report::Status::Fail && !r.detail.empty())
          std::cout << r.detail << (r.detail.back() == '\n' ? "" : "\n");
        r.ordinal = static_cast<int64_t>(ordinal);
        summary.cases.push_back(std::move(r));
      };
      auto not_installed = [&](const std::string& model, const std::string& plan) {
        report::CaseResult r;
        r.suite = "engine";
        r.name = model + "/" + plan;
        r.backend = name;
        r.dtype = "float32";
        r.status = report::Status::Skipped;
        r.message = "not installed (" + c.needs + " failed); install it with: " + c.setup;
        return r;
      };
      for (const std::string& m : model_names) {
        const std::string dir = fs::absolute(fs::path(models_dir) / m).string();
        std::vector<engine::Plan> plans;
        if (!replays.empty()) {
          for (const engine::Plan& p : replays)
            if (p.model == m) plans.push_back(p);
        } else if (a->plans != "campaign") {
          const engine::Model& model = model_of(m);
          plans = engine::fixed_plans(m, model.config.local_span(), model.config.vocab);
        }
        for (const engine::Plan& p : plans) {
          const std::string id = "engine/" + name + "/" + m + "/" + p.name;
          run_case(id, [&] {
            if (!installed) return not_installed(m, p.name);
            engine::CheckOptions o = check;
            o.reproduce = base_cmd() + (a->plan_files.empty() ? " --model " + shell_quote("^" + m + "$") + " --filter " + shell_quote("^" + id + "$")
                                                              : " --plan " + shell_quote(a->plan_files.front()));
            return engine::check_plan(client, model_of(m), dir, p, o);
          });
        }
        if (replays.empty() && a->plans != "fixed") {
          const std::string id = "engine/" + name + "/" + m + "/campaign";
          run_case(id, [&] {
            if (!installed) return not_installed(m, "campaign");
            engine::CampaignOptions o;
            o.seed = a->seed;
            o.iterations = a->iterations;
            o.reproduce = a->reproduce;
            o.check = check;
            engine::CampaignOutcome out = engine::run_campaign(client, model_of(m), dir, o);
            if (out.result.status == report::Status::Fail) {
              std::string replay = base_cmd() + " --plans campaign --model " + shell_quote("^" + m + "$") + " --seed " +
                                   std::to_string(a->seed) + " --iterations " + std::to_string(a->iterations) + " " + out.result.reproduce;
              if (out.shrunk && !a->save_cases.empty()) {
                fs::create_directories(a->save_cases);
                const std::string text = engine::to_json(*out.shrunk).dump(1) + "\n";
                const std::string file = (fs::path(a->save_cases) / ("engine-" + m + "-" + std::to_string(std::hash<std::string>{}(text) % 1000000007) + ".json")).string();
                report::write_file_atomically(file, text);
                replay += "\n  replay the shrunk plan: " + base_cmd() + " --plan " + shell_quote(file);
              }
              out.result.reproduce = replay;
            }
            return out.result;
          });
        }
      }
      client.stop();
      if (timing.steps)
        std::cerr << "engine " << name << ": " << timing.steps << " plan-steps, " << std::fixed << std::setprecision(1)
                  << timing.steps / std::max(timing.engine_s, 1e-9) << " steps/s in the engine (" << timing.engine_s
                  << " s), oracle " << timing.oracle_s << " s\n" << std::defaultfloat;
    }
    if (a->list) return listed ? 0 : 2;
    if (!a->no_report) {
      const auto paths = report::write_reports(summary, a->report_dir);
      std::cerr << "reports: " << a->report_dir << "/{junit.xml,summary.json,summary.md,report.html}\n";
    }
    return close_run(summary);
  };
}

}  // namespace kvc::cli
