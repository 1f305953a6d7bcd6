// `kvconform engine`: engines under test (docs/engines.md). Each engine configuration (a worker
// command and its options: engines/engines.json, or --engine-cmd) runs the fixed plans and a random
// campaign on every model of the zoo; one line per case, reports, `N passed, N failed, N skipped`.
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>

#include "cli_util.h"
#include "closing.h"
#include "expectation_options.h"
#include "commands.h"
#include "registry.h"
#include "kvcgen/engine_campaign.h"
#include "kvcgen/search.h"
#include "kvconform/engine/check.h"
#include "kvconform/regressions.h"
#include "kvconform/report.h"
#include "kvconform/seeds.h"
#include "kvconform/worker.h"

namespace kvc::cli {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct EngineArgs {
  std::vector<std::string> engines;  // regexes over engines.json names
  std::string engine_cmd, engine_name, engine_options = "{}";
  std::string config = "engines/engines.json";
  std::optional<std::string> known;  // the old --known FILE, read as --expectations for one release
  ExpectationArgs expectations;
  std::string models, model = ".*", filter, plans = "fixed";
  std::string family = ".*", campaign_models;  // the model campaign's families and checkpoint folder
  std::vector<std::string> plan_files;
  int iterations = 10;
  double min_window_sensitivity = engine::kMinWindowSensitivity;
  uint64_t seed = kvc::seeds::kDefaultSeed;
  double time_budget = 0, timeout = 120, factor = 10, floor = 1e-4;
  std::string mutant = "none", reproduce, report_dir = "reports/engines", shard, shard_count;
  // The found-case corpus (kvconform/regressions.h): replayed with the fixed plans; where shrunk plans go.
  std::string regressions, save_regressions;
  bool list = false, no_report = false, verbose = false, ci_only = false, no_regressions = false, protocol = false;
};

struct Configured {
  engine::EngineSpec spec;
  std::string needs, setup;  // a shell test that it is installed, and the command that installs it
  bool ci = false;           // part of CI's small fixed set (--ci)
  std::string root;          // where `needs` runs: the checkout of --config (empty: here)
  // Its expectations file, relative to root (docs/expectations.md): "expectations" in --config, else
  // engines/<folder>/expectations.jsonc of the first engines/<folder>/ its command names; empty: none.
  std::string expectations;
  // The head sizes the model campaign draws for it (empty: the drawer's own), for an engine whose
  // attention takes only some (vLLM's CPU kernel refuses 8 and 16): without it every draw is refused.
  std::vector<int> head_dims;
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
    if (e.contains("expectations") && (!e["expectations"].is_string() || e["expectations"].get<std::string>().empty()))
      throw std::invalid_argument(at + "/expectations: must be a file name relative to the checkout, got " +
                                  e["expectations"].dump());
    RegexMatch folder;
    if (e.contains("expectations")) c.expectations = e["expectations"];
    else if (Regex(R"((^|[\s/"'])engines/([A-Za-z0-9_.-]+)/)").search(c.spec.command, folder))
      c.expectations = "engines/" + folder.str(2) + "/expectations.jsonc";
    if (e.contains("head_dims")) {
      const json& h = e["head_dims"];
      if (!h.is_array() || h.empty()) throw std::invalid_argument(at + "/head_dims: must be a non-empty array of even sizes");
      for (size_t k = 0; k < h.size(); ++k) {
        if (!h[k].is_number_integer() || h[k].get<int>() < 2 || h[k].get<int>() % 2)
          throw std::invalid_argument(at + "/head_dims/" + std::to_string(k) + ": must be an even size of at least 2");
        c.head_dims.push_back(h[k].get<int>());
      }
    }
    out.push_back(c);
  }
  return out;
}

// A configuration pair of --config ("pairs": [{"name", "a", "b", "about"}]): two configurations of one
// engine that differ only in a cache path, judged against each other (engine::check_pair).
struct ConfiguredPair {
  std::string name, a, b;
};

std::vector<ConfiguredPair> read_pairs(const std::string& path, const std::vector<Configured>& all) {
  std::ifstream in(path);
  const json j = json::parse(in, nullptr, false);
  std::vector<ConfiguredPair> out;
  if (!j.is_object() || !j.contains("pairs")) return out;
  if (!j["pairs"].is_array()) throw std::invalid_argument(path + ": /pairs: must be an array of {\"name\", \"a\", \"b\"}");
  for (size_t i = 0; i < j["pairs"].size(); ++i) {
    const json& e = j["pairs"][i];
    const std::string at = path + ": /pairs/" + std::to_string(i);
    ConfiguredPair p;
    for (auto [key, field] : {std::pair{"name", &p.name}, {"a", &p.a}, {"b", &p.b}}) {
      if (!e.is_object() || !e.contains(key) || !e[key].is_string() || e[key].get<std::string>().empty())
        throw std::invalid_argument(at + "/" + key + ": must be a non-empty string");
      *field = e[key];
    }
    for (const auto& [key, side] : {std::pair{"a", p.a}, {"b", p.b}}) {
      const std::string& name = side;  // a lambda may not capture a structured binding before C++20 (clang-tidy's parser)
      if (std::none_of(all.begin(), all.end(), [&](const Configured& c) { return c.spec.name == name; }))
        throw std::invalid_argument(at + "/" + key + ": \"" + name + "\" is not a configuration of /engines");
    }
    if (p.a == p.b) throw std::invalid_argument(at + "/b: the same configuration as a");
    if (std::any_of(all.begin(), all.end(), [&](const Configured& c) { return c.spec.name == p.name; }))
      throw std::invalid_argument(at + "/name: \"" + p.name + "\" is the name of a configuration");
    out.push_back(p);
  }
  return out;
}

// make_models.py, the checkout's or the installed copy.
std::string make_models_script() {
  const std::string script = data_folder("engines/models/make_models.py", false, "engines/models/make_models.py");
  if (!fs::exists(script))
    throw std::invalid_argument(script +
                                " not found (neither here, installed nor in the checkout kvconform was built from): "
                                "run kvconform engine from the repository root");
  return script;
}

// A command's standard output; throws naming the command when it fails.
std::string output_of(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) throw std::runtime_error("cannot run " + cmd);
  std::array<char, 4096> buf{};
  for (size_t n; (n = fread(buf.data(), 1, buf.size(), p)) > 0;) out.append(buf.data(), n);
  if (pclose(p) != 0) throw std::runtime_error("failed: " + cmd);
  return out;
}

// The zoo: the models of engines/models/make_models.py's engine zoo that `--model` selects, written on
// first use (standard library Python only; the checkout's or the installed copy, data_folder). The
// stamp (.complete) holds a hash of the generator, then the models written under it: a changed
// generator rewrites, a model asked later is added, and a run writes no model it does not run. A
// --models folder that holds models the zoo writer did not stamp (the families set, a vLLM set, an
// author's own checkpoints) is used as it is: nothing is written into it.
bool own_models_folder(const std::string& dir) {
  if (fs::exists(fs::path(dir) / ".complete") || !fs::is_directory(dir)) return false;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && fs::exists(e.path() / "config.json")) return true;
  return false;
}
std::string ensure_models(const std::string& dir, const Regex& model_re, bool given) {
  const fs::path stamp_file = fs::path(dir) / ".complete";
  if (given && own_models_folder(dir)) return dir;
  const std::string script = make_models_script();
  std::ifstream in(script);
  std::stringstream text;
  text << in.rdbuf();
  const std::string stamp = std::to_string(std::hash<std::string>{}(text.str()));
  // The models written under this generator, as the stamp says (read again before it is rewritten:
  // a parallel run may have added its own).
  const auto stamped = [&] {
    std::set<std::string> names;
    std::ifstream old(stamp_file);
    std::string line;
    if (!old || !std::getline(old, line) || line != stamp) return names;
    while (std::getline(old, line))
      if (!line.empty()) names.insert(line);
    return names;
  };
  std::vector<std::string> missing;
  std::istringstream zoo(output_of("python3 " + shell_quote(script) + " --list"));
  const std::set<std::string> have = stamped();
  for (std::string name; std::getline(zoo, name);)
    if (!name.empty() && model_re.search(name) && !have.count(name)) missing.push_back(name);
  if (missing.empty()) return dir;
  std::string cmd = "python3 " + shell_quote(script) + " " + shell_quote(dir);
  for (const std::string& name : missing) cmd += " --only " + shell_quote(name);
  cmd += " >&2";
  std::cerr << "engine: writing " << missing.size() << (missing.size() == 1 ? " model" : " models")
            << " of the tiny model zoo: " << cmd << "\n";
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("could not write the model zoo into " + dir + " (" + cmd + ")");
  std::set<std::string> now = stamped();
  now.insert(missing.begin(), missing.end());
  std::string out = stamp + "\n";
  for (const std::string& name : now) out += name + "\n";
  report::write_file_atomically(stamp_file.string(), out);
  return dir;
}

// make_models.py --serve, started at the first draw or write: a model campaign draws and writes
// hundreds of models, and each start of the script costs about 0.15 s of CPU. A request it refuses
// throws its message, as the one-shot command's failure would.
class ModelsServer {
 public:
  explicit ModelsServer(const std::string& script) : worker_("exec python3 " + shell_quote(script) + " --serve") {}
  json ask(const json& request, const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex_);
    worker::End end{};
    std::string detail;
    if (!worker_.running() && !worker_.start(json{{"op", "hello"}}, 60, end, detail))
      throw std::runtime_error(what + ": " + worker_.command() + ": " + detail);
    json reply;
    std::string payload;
    if (!worker_.transact(worker::frame(request), 600, reply, payload, end, detail))
      throw std::runtime_error(what + ": " + worker_.command() + ": " + detail);
    if (reply.value("status", "") != "ok") throw std::runtime_error(what + ": " + reply.value("error", reply.dump()));
    return reply;
  }

 private:
  std::mutex mutex_;
  worker::Worker worker_;
};

// The model campaign's checkpoints: drawn and written by make_models.py into `dir`, each folder once
// (its recipe.json says which recipe it holds and a hash of the writer that wrote it, so a second run
// writes nothing and a changed writer rewrites).
engine::ModelSource model_source(const std::string& dir, const std::vector<int>& head_dims) {
  const std::string script = make_models_script();
  std::string writer;
  for (const fs::path& f : {fs::path(script), fs::path(script).parent_path() / "families.py"}) {
    std::ifstream in(f);
    std::stringstream text;
    text << in.rdbuf();
    writer += text.str();
  }
  writer = regressions::content_hash(writer);
  engine::ModelSource s;
  std::string narrowed;
  for (int h : head_dims) narrowed += (narrowed.empty() ? "" : ",") + std::to_string(h);
  auto server = std::make_shared<ModelsServer>(script);
  s.draw = [server, narrowed](const std::string& family, uint64_t seed, int64_t index) {
    const std::string spec = family + ":" + std::to_string(seed) + ":" + std::to_string(index);
    const std::string what = "make_models.py --draw " + spec + (narrowed.empty() ? "" : " --head-dims " + narrowed);
    const json reply =
        server->ask({{"op", "draw"}, {"spec", spec}, {"head_dims", narrowed.empty() ? json() : json(narrowed)}}, what);
    return engine::recipe_from_json(reply.at("recipe"), what);
  };
  s.write = [server, dir, writer](const engine::ModelRecipe& recipe) {
    const fs::path folder = fs::path(dir) / recipe.folder;
    const std::string text = json{{"recipe", engine::to_json(recipe)}, {"writer", writer}}.dump(2) + "\n";
    std::ifstream old(folder / "recipe.json");
    std::stringstream have;
    have << old.rdbuf();
    if (old && have.str() == text && fs::exists(folder / "model.safetensors")) return folder.string();
    fs::create_directories(dir);
    server->ask({{"op", "write"}, {"dir", dir}, {"recipe", engine::to_json(recipe).dump(2) + "\n"}},
                "could not write model " + recipe.folder + " (make_models.py " + dir + " --recipe)");
    report::write_file_atomically((folder / "recipe.json").string(), text);
    return folder.string();
  };
  return s;
}

std::vector<std::string> drawn_families() {
  std::vector<std::string> out;
  std::istringstream lines(output_of("python3 " + shell_quote(make_models_script()) + " --draw list"));
  for (std::string f; std::getline(lines, f);)
    if (!f.empty()) out.push_back(f);
  return out;
}

// A (model, plan) pair of the model campaign, as saved: the plan and the recipe of its model.
struct DrawnPair {
  std::string hash, path, error;  // hash: the corpus file's; empty for a --plan file
  engine::Plan plan;
  engine::ModelRecipe recipe;
};
DrawnPair drawn_pair(const json& doc, const std::string& path) {
  DrawnPair p;
  p.path = path;
  p.plan = engine::plan_from_json(doc, path);
  p.recipe = engine::recipe_from_json(doc.at("recipe"), path + ": /recipe");
  if (p.plan.model != p.recipe.folder)
    throw std::invalid_argument(path + ": /model: \"" + p.plan.model + "\" is not the recipe's folder " + p.recipe.folder);
  return p;
}
json drawn_pair_json(const engine::Plan& plan, const engine::ModelRecipe& recipe) {
  json j = engine::to_json(plan);
  j["recipe"] = engine::to_json(recipe);
  return j;
}

// The engine suite's found cases of one model (regressions/engine/<model>/<hash>.json): each plan,
// named regressions/<hash> in its case id, keeps its own name for the check (known deviations match
// it). A file that does not load is an exception the case turns into its FAIL naming file and field.
struct SavedPlan {
  std::string hash, path, error;
  engine::Plan plan;
};
std::vector<SavedPlan> saved_plans(const std::string& root, const std::string& model) {
  std::vector<SavedPlan> out;
  if (root.empty()) return out;
  for (const regressions::Entry& e : regressions::load(root, "engine", regressions::target_name(model))) {
    SavedPlan p{e.hash, e.path, e.error, {}};
    if (p.error.empty()) {
      try {
        p.plan = engine::plan_from_json(nlohmann::json::parse(e.text), e.path);
        if (p.plan.model != model) p.error = e.path + ": /model: \"" + p.plan.model + "\" is not the folder's model " + model;
      } catch (const std::exception& error) {
        p.error = error.what();
      }
    } else {
      p.error = e.path + ": " + p.error;
    }
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace

Runner add_engine_command(CLI::App& app) {
  auto a = std::make_shared<EngineArgs>();
  CLI::App* cmd =
      app.add_subcommand("engine", "Check inference engines end to end on tiny sliding-window models (docs/engines.md)");
  cmd->add_option("--engine", a->engines, "Engine configurations of --config whose name matches (repeatable; default: all)");
  cmd->add_option("--engine-cmd", a->engine_cmd,
                  "An engine worker command (the engine protocol, docs/engines.md) instead of --engine");
  cmd->add_option("--engine-name", a->engine_name, "Its name in the results (default: the name its hello announces)");
  cmd->add_option("--engine-options", a->engine_options, "Its load options, a JSON object");
  cmd->add_option("--config", a->config, "Engine configurations (default engines/engines.json)");
  cmd->add_flag("--ci", a->ci_only, "Only the configurations marked \"ci\" in --config");
  cmd->add_option("--models", a->models, "The model zoo folder (default build/engine-models; written on first use)");
  cmd->add_option("--model", a->model, "Models whose name matches (default all)");
  cmd->add_option("--filter", a->filter, "Run only the case ids matching this regex (what --list prints)");
  cmd->add_flag("--list", a->list, "Print the case ids and exit");
  cmd->add_option(
         "--plans", a->plans,
         "fixed, campaign or all (default fixed); models: the model campaign instead, drawn (model, plan) pairs of each --family")
      ->check(CLI::IsMember({"fixed", "campaign", "all", "models"}));
  cmd->add_option("--family", a->family, "The model campaign's families whose model_type matches (default every drawn family)");
  cmd->add_option(
      "--campaign-models", a->campaign_models,
      "Where the model campaign and drawn found cases write their checkpoints (default: the zoo folder's name + -campaign)");
  cmd->add_option("--plan", a->plan_files, "Replay a saved plan file instead (repeatable)");
  cmd->add_option(
      "--iterations", a->iterations,
      "Random plans per engine and model in the campaign, (model, plan) pairs per family in the model campaign (default 10)");
  cmd->add_option("--min-window-sensitivity", a->min_window_sensitivity,
                  "The model campaign redraws a model whose logits a window one token wider moves by less, or by less than ten "
                  "times the bound its float32 error gives (default 0.01)")
      ->check(CLI::PositiveNumber);
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
  {
    // The adapter mutants of the step table and its neighbours (engine/steps.h, engines/protocol.json),
    // and the spellings they replaced (accepted for one release: the run says the new name).
    std::vector<std::string> names{"none"};
    std::map<std::string, std::string> by_kind;
    for (const engine::EngineMutant& m : engine::engine_mutants()) {
      names.push_back(m.name);
      if (!m.old.empty()) names.push_back(m.old);
      by_kind[m.kind] += (by_kind[m.kind].empty() ? "" : ", ") + m.name;
    }
    cmd->add_option("--mutant", a->mutant,
                    "Tell the engine a wrong window (" + by_kind["window"] + "), to do a serving operation wrong (" +
                        by_kind["operation"] + ") or to read the config wrong (the oracle engine's " + by_kind["config"] + "; " +
                        by_kind["model"] + "): the suite must FAIL")
        ->check(CLI::IsMember(names));
  }
  add_expectation_options(cmd, a->expectations, true);
  cmd->add_option(
      "--known", a->known,
      "Deprecated (one release): --expectations FILE instead of the engine folders' own files; '' is --no-expectations");
  CLI::Option* corpus = cmd->add_option(
      "--regressions", a->regressions,
      "The found-case corpus whose plans (regressions/engine/<model>/) run with the fixed plans (default ./regressions, "
      "else the installed or the built-from copy)");
  cmd->add_flag("--no-regressions", a->no_regressions, "Replay no found plan of the corpus")->excludes(corpus);
  CLI::Option* save = cmd->add_option("--save-regressions", a->save_regressions,
                                      "Save shrunk campaign failures into this corpus folder (e.g. regressions: "
                                      "engine/<model>/<hash>.json), so the next run replays them");
  add_old_spelling(cmd, "--save-cases", save, a->save_regressions);
  cmd->add_option("--timeout", a->timeout, "Seconds per engine request (default 120)");
  cmd->add_option("--factor", a->factor, "Bound = max(floor, factor x float32 reference error) (default 10)");
  cmd->add_option("--floor", a->floor, "(default 1e-4)");
  cmd->add_option("--report-dir", a->report_dir, "Where the reports go (default reports/engines)");
  cmd->add_flag("--no-report", a->no_report, "Write no report files");
  cmd->add_flag("-v,--verbose", a->verbose, "Print each case's per-step errors");
  // The step table as data (engines/protocol.json is this output; ctest engine_protocol_json compares).
  cmd->add_flag("--protocol", a->protocol, "Print the engine protocol's steps, operations and mutants as JSON and exit")
      ->group("");
  return [a, cmd]() -> int {
    if (a->protocol) {
      std::cout << engine::protocol_description().dump(1) << "\n";
      return 0;
    }
    std::string renamed;
    a->mutant = engine::canonical_mutant(a->mutant, &renamed);
    if (!renamed.empty()) std::cerr << "engine: " << renamed << "\n";
    // Files of the checkout resolved once, absolute: the run, and every reproduce line it prints, work
    // from any folder.
    const auto absolute = [](const std::string& p) { return fs::absolute(p).lexically_normal().string(); };
    a->config = absolute(data_folder(a->config, cmd->count("--config") > 0, "engines/engines.json"));
    if (a->known) {
      std::cerr << "engine: --known is accepted for one more release: it is read as "
                << (a->known->empty() ? "--no-expectations"
                                      : "--expectations " + *a->known + " (the engine folders' own files not loaded)")
                << "; an old known-deviations file converts with python3 scripts/known_to_expectations.py\n";
      if (!a->expectations.files.empty()) throw std::invalid_argument("--known: give --expectations alone");
      a->expectations.none = true;  // only the file given
      if (!a->known->empty()) a->expectations.files.push_back(*a->known);
    }
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
      // A configuration's command and install test are relative to the checkout that holds its --config
      // (<root>/engines/engines.json): they run there, whatever the working folder.
      const std::string root = fs::path(a->config).parent_path().parent_path().string();
      for (Configured& c : read_config(a->config)) {
        c.spec.command = "cd " + shell_quote(root) + " && " + c.spec.command;
        c.root = root;
        bool pick = a->engines.empty();
        for (const std::string& re : a->engines) pick = pick || Regex(re).search(c.spec.name);
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
    // The expectations: each selected configuration's own file (its folder's), then the files given.
    // A folder's file is checked for entries that match no case only when the run has every case
    // it speaks of (every configuration of that folder, the whole zoo, the fixed plans).
    Expectations expectations;
    const std::vector<std::string> kinds = engine::diagnosis_kind_names();
    std::map<std::string, std::string> home_of_engine;  // engine name -> its expectations file
    if (a->expectations.update && a->mutant != "none")
      throw std::invalid_argument("--update-expectations: a --mutant run's failures are the mutant's, not the engine's");
    if (!a->expectations.none && a->engine_cmd.empty()) {
      std::map<std::string, std::set<std::string>> all_of_file, selected_of_file;
      for (const Configured& c : read_config(a->config))
        if (!c.expectations.empty()) all_of_file[c.expectations].insert(c.spec.name);
      for (const Configured& c : engines)
        if (!c.expectations.empty()) selected_of_file[c.expectations].insert(c.spec.name);
      const bool whole = a->model == ".*" && (a->plans == "fixed" || a->plans == "all") && a->plan_files.empty();
      for (const auto& [file, names] : selected_of_file) {
        const std::string path = (fs::path(engines.front().root) / file).lexically_normal().string();
        expectations.load(path, file, whole && names == all_of_file[file], true, kinds);
        for (const std::string& n : names) home_of_engine[n] = path;
      }
    }
    for (const std::string& f : a->expectations.files) expectations.load(absolute(f), f, true, false, kinds);
    if (a->expectations.update && home_of_engine.empty() && a->expectations.files.empty())
      throw std::invalid_argument("--update-expectations: no expectations file to update: give --expectations FILE");
    if (!expectations.set->empty() || a->expectations.update) check.expectations = expectations.set;
    const Regex filter(a->filter.empty() ? ".*" : a->filter), model_re(a->model);
    const Shard shard = resolve_shard(a->shard, a->shard_count);
    const std::string corpus =
        a->no_regressions ? "" : fs::absolute(regressions::resolve_root(a->regressions)).lexically_normal().string();

    // The zoo: --models, else build/engine-models of the checkout --config belongs to (of this folder
    // when it is that checkout).
    const std::string default_models = a->engine_cmd.empty()
                                           ? (fs::path(a->config).parent_path().parent_path() / "build/engine-models").string()
                                           : std::string("build/engine-models");
    const bool model_campaign = a->plans == "models";
    const std::string zoo = absolute(a->models.empty() ? default_models : a->models);
    // A --plan file with a recipe is a drawn (model, plan) pair; the others need the zoo.
    std::vector<DrawnPair> drawn_replays;
    std::vector<std::string> zoo_plan_files;
    for (const std::string& f : a->plan_files) {
      std::ifstream in(f);
      if (!in) throw std::invalid_argument(f + ": cannot be read (--plan)");
      const json doc = json::parse(in, nullptr, false);
      if (doc.is_object() && doc.contains("recipe")) {
        drawn_replays.push_back(drawn_pair(doc, f));
        drawn_replays.back().path = fs::absolute(f).lexically_normal().string();
      } else {
        zoo_plan_files.push_back(f);
      }
    }
    a->plan_files = zoo_plan_files;
    const bool zoo_needed = !model_campaign && (drawn_replays.empty() || !zoo_plan_files.empty());
    const std::string models_dir = zoo_needed ? ensure_models(zoo, model_re, !a->models.empty()) : zoo;
    const std::string campaign_dir = absolute(a->campaign_models.empty() ? zoo + "-campaign" : a->campaign_models);
    std::vector<std::string> model_names;
    if (zoo_needed)
      for (const auto& e : fs::directory_iterator(models_dir))
        if (e.is_directory() && fs::exists(e.path() / "config.json") && model_re.search(e.path().filename().string()))
          model_names.push_back(e.path().filename().string());
    std::sort(model_names.begin(), model_names.end());
    std::vector<engine::Plan> replays;
    for (const std::string& f : a->plan_files) {
      replays.push_back(engine::load_plan(f));
      if (!fs::exists(fs::path(models_dir) / replays.back().model / "config.json"))
        throw std::invalid_argument(f + ": /model: \"" + replays.back().model + "\" is not a model of the zoo in " + models_dir);
    }
    if (!drawn_replays.empty() && replays.empty()) model_names.clear();  // only the drawn pairs given
    // The corpus's drawn pairs (regressions/engine/drawn/), replayed with the fixed plans.
    std::vector<DrawnPair> drawn_saved;
    // Not with a --models folder of one's own: its run is about its models, and the pairs' checkpoints
    // would be written beside it (unless --campaign-models says where).
    const bool own_folder = !a->models.empty() && a->campaign_models.empty() && own_models_folder(zoo);
    if (a->plan_files.empty() && drawn_replays.empty() && !model_campaign && a->plans != "campaign" && !corpus.empty() &&
        !own_folder)
      for (const regressions::Entry& e : regressions::load(corpus, "engine", "drawn")) {
        DrawnPair p;
        if (e.error.empty() && !model_re.search(e.doc.value("model", std::string()))) continue;
        try {
          if (!e.error.empty()) throw std::invalid_argument(e.path + ": " + e.error);
          p = drawn_pair(nlohmann::json::parse(e.text), e.path);
        } catch (const std::exception& error) {
          p.error = error.what();
          p.plan.model = "drawn";
        }
        p.hash = e.hash;
        p.path = e.path;
        drawn_saved.push_back(std::move(p));
      }
    std::vector<std::string> families;
    if (model_campaign) {
      const Regex family_re(a->family);
      for (const std::string& f : drawn_families())
        if (family_re.search(f)) families.push_back(f);
      if (families.empty())
        throw std::invalid_argument("--family " + a->family + ": matches no drawn family (" + make_models_script() +
                                    " --draw list)");
    }
    std::map<std::vector<int>, engine::ModelSource> sources;  // by the head sizes an engine takes
    auto source_of = [&](const std::vector<int>& head_dims) -> const engine::ModelSource& {
      auto it = sources.find(head_dims);
      if (it == sources.end()) it = sources.emplace(head_dims, model_source(campaign_dir, head_dims)).first;
      return it->second;
    };
    std::map<std::string, engine::Model> models;
    auto model_of = [&](const std::string& name) -> const engine::Model& {
      auto it = models.find(name);
      if (it == models.end())
        it = models.emplace(name, engine::load_model(fs::absolute(fs::path(models_dir) / name).string())).first;
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
    // The registry: (engine configuration x model x plan), in --list order. An engine whose
    // configuration names none is asked its name (hello) before its cases are named.
    struct Group {
      std::unique_ptr<engine::EngineClient> client;
      std::unique_ptr<engine::EngineClient> other;  // a pair's side B
      engine::Timing timing;
    };
    std::vector<std::unique_ptr<Group>> groups;
    // A raise inside a case is that case's FAIL; the run goes on.
    const auto guarded = [](const EngineKey& key, std::function<report::CaseResult()> body) {
      return [key, body = std::move(body)] {
        try {
          return body();
        } catch (const std::exception& e) {
          report::CaseResult r = report::named(key);
          r.status = report::Status::Fail;
          r.message = std::string("the check raised: ") + e.what();
          return r;
        }
      };
    };
    // Both campaigns' options: the seed, size and reproduce string given, each plan checked as the
    // fixed plans are, timed into its engine's group.
    const auto campaign_options = [&](Group& group) {
      engine::CampaignOptions o;
      o.seed = a->seed;
      o.iterations = a->iterations;
      o.reproduce = a->reproduce;
      o.min_window_sensitivity = a->min_window_sensitivity;
      o.check = check;
      o.check.timing = &group.timing;
      return o;
    };
    // A campaign's shrunk failure, saved one way for both campaigns: into the corpus under
    // --save-regressions (engine/<target>/<hash>.json, which the next run replays), else nowhere (the
    // reproduce line reruns the campaign). What the FAIL's reproduce adds: where it went and the line
    // that replays it alone, or why it was not saved.
    const auto save_shrunk = [&](const std::string& target, const json& doc, const auto& line) -> std::string {
      if (a->save_regressions.empty()) return "";
      try {
        const regressions::Saved saved = regressions::save(a->save_regressions, "engine", target, nlohmann::ordered_json(doc));
        return "\n  saved as " + saved.path +
               "; replay the shrunk plan: " + line({{"--plan", fs::absolute(saved.path).string()}});
      } catch (const std::exception& e) {  // the FAIL stands and says why
        return std::string("\n  not saved: ") + e.what();
      }
    };
    std::map<const CaseEntry*, Group*> group_of;
    std::vector<std::string> engine_names;  // --filter matches past them
    Registry registry;
    for (Configured& c : engines) {
      groups.push_back(std::make_unique<Group>());
      Group& group = *groups.back();
      group.client = std::make_unique<engine::EngineClient>(c.spec);
      engine::EngineClient& client = *group.client;
      const std::string needs = c.root.empty() ? c.needs : "cd " + shell_quote(c.root) + " && " + c.needs;
      const bool installed = c.needs.empty() || std::system(("sh -c " + shell_quote(needs) + " >/dev/null 2>&1").c_str()) == 0;
      std::string name = c.spec.name;
      if (name.empty() && installed) {
        engine::Reply hello = client.hello();
        name = hello.ok() ? client.info().value("name", std::string("engine")) : "engine";
        client.rename(name);
      }
      engine_names.push_back(name);
      // The flags of every reproduce line of this engine: which engine, and what changed its judging.
      std::vector<Flag> engine_flags;
      if (!a->engine_cmd.empty()) {
        engine_flags.push_back({"--engine-cmd", a->engine_cmd});
        engine_flags.push_back({"--engine-name", name});
        if (!c.spec.options.empty()) engine_flags.push_back({"--engine-options", c.spec.options.dump()});
      } else {
        engine_flags.push_back({"--config", a->config});
        engine_flags.push_back({"--engine", "^" + Regex(R"([.^$|()\[\]{}*+?\\])").replace(name, R"(\$&)") + "$"});
      }
      engine_flags.push_back({"--models", models_dir});
      if (!a->campaign_models.empty()) engine_flags.push_back({"--campaign-models", campaign_dir});
      if (!a->regressions.empty()) engine_flags.push_back({"--regressions", corpus});
      if (a->mutant != "none") engine_flags.push_back({"--mutant", a->mutant, Flag::Quote::None});
      // The same expectations judge the case alone.
      if (a->expectations.none) engine_flags.push_back({"--no-expectations", "", Flag::Quote::None});
      for (const std::string& f : a->expectations.files) engine_flags.push_back({"--expectations", absolute(f)});
      if (a->timeout != 120) engine_flags.push_back({"--timeout", std::to_string(a->timeout), Flag::Quote::None});
      if (a->factor != 10 || a->floor != 1e-4) {
        engine_flags.push_back({"--factor", std::to_string(a->factor), Flag::Quote::None});
        engine_flags.push_back({"--floor", std::to_string(a->floor), Flag::Quote::None});
      }
      const auto line = [engine_flags](std::vector<Flag> more) {
        std::vector<Flag> flags = engine_flags;
        flags.insert(flags.end(), more.begin(), more.end());
        return reproduce_line(self_path(), "engine", flags);
      };
      auto not_installed = [name, needs = c.needs, setup = c.setup](const std::string& model, const std::string& plan) {
        report::CaseResult r = report::named(EngineKey{name, model, plan});
        r.dtype = "float32";
        r.status = report::Status::Skipped;
        r.message = "not installed (" + needs + " failed); install it with: " + setup;
        return r;
      };
      // Every case of this engine, one way: registered under its key, a SKIP where the engine is not
      // installed, a raise its FAIL, timed into the engine's group.
      const auto add_case = [&](const EngineKey& key, std::function<report::CaseResult()> body) {
        const CaseEntry& e = registry.add(key, guarded(key, [installed, key, not_installed, body = std::move(body)] {
                                            if (!installed) return not_installed(key.model, key.plan);
                                            return body();
                                          }));
        group_of[&e] = &group;
      };
      // A case that judges one plan (a fixed plan, a corpus plan, a drawn pair): `judge` runs check_plan
      // with the options and this case's reproduce line; a corpus entry (`own_name` set) keeps its key
      // as its id and names its plan in params.
      const auto plan_case = [&](const EngineKey& key, const std::vector<Flag>& which, const std::string& own_name,
                                 std::function<report::CaseResult(const engine::CheckOptions&)> judge) {
        add_case(key, [timing = &group.timing, &check, key, own_name, judge = std::move(judge), reproduce = line(which)] {
          engine::CheckOptions o = check;
          o.timing = timing;
          o.reproduce = reproduce;
          report::CaseResult r = judge(o);
          if (!own_name.empty()) {
            report::rename(r, key);
            r.params += ",plan=" + own_name;
          }
          return r;
        });
      };
      for (const std::string& m : model_names) {
        const std::string dir = fs::absolute(fs::path(models_dir) / m).string();
        std::vector<engine::Plan> plans;
        std::vector<std::string> plan_files;  // where each replayed plan came from
        if (!replays.empty()) {
          for (size_t i = 0; i < replays.size(); ++i)
            if (replays[i].model == m) {
              plans.push_back(replays[i]);
              plan_files.push_back(fs::absolute(a->plan_files[i]).lexically_normal().string());
            }
        } else if (a->plans == "fixed" || a->plans == "all") {
          const engine::Model& model = model_of(m);
          plans = engine::fixed_plans(m, model.config.local_span(), model.config.vocab);
        }
        for (size_t i = 0; i < plans.size(); ++i) {
          const engine::Plan& p = plans[i];
          const EngineKey key{name, m, p.name};
          const std::vector<Flag> which =
              a->plan_files.empty() ? std::vector<Flag>{{"--model", "^" + m + "$"}, {"--filter", "^" + id_of(key) + "$"}}
                                    : std::vector<Flag>{{"--plan", plan_files[i]}};
          plan_case(key, which, "",
                    [&, m, dir, p](const engine::CheckOptions& o) { return engine::check_plan(client, model_of(m), dir, p, o); });
        }
        // The corpus's plans of this model run with the fixed plans (not with --plan files, which replace both).
        if (replays.empty() && (a->plans == "fixed" || a->plans == "all"))
          for (const SavedPlan& sp : saved_plans(corpus, m)) {
            const EngineKey key{name, m, "regressions/" + sp.hash};
            std::vector<Flag> which{{"--model", "^" + m + "$"}, {"--filter", "^" + id_of(key) + "$"}};
            if (a->regressions.empty()) which.insert(which.begin(), Flag{"--regressions", corpus});  // else among engine_flags
            plan_case(key, which, sp.plan.name, [&, m, dir, sp](const engine::CheckOptions& o) {
              if (!sp.error.empty()) throw std::invalid_argument("the saved plan does not load: " + sp.error);
              return engine::check_plan(client, model_of(m), dir, sp.plan, o);
            });
          }
        if (replays.empty() && (a->plans == "campaign" || a->plans == "all")) {
          const EngineKey key{name, m, "campaign"};
          add_case(key, [&, m, dir, line] {
            engine::CampaignOutcome out = engine::run_campaign(client, model_of(m), dir, campaign_options(group));
            if (out.result.status == report::Status::Fail) {
              // run_campaign's reproduce is its --reproduce flag, already quoted.
              std::string replay = line({{"--plans", "campaign", Flag::Quote::None},
                                         {"--model", "^" + m + "$"},
                                         {"--seed", std::to_string(a->seed), Flag::Quote::None},
                                         {"--iterations", std::to_string(a->iterations), Flag::Quote::None},
                                         {"", out.result.reproduce, Flag::Quote::None}});
              if (out.shrunk) replay += save_shrunk(regressions::target_name(m), engine::to_json(*out.shrunk), line);
              out.result.reproduce = replay;
            }
            return out.result;
          });
        }
      }
      // Drawn (model, plan) pairs: the --plan files with a recipe, else the corpus's.
      for (const DrawnPair& dp : drawn_replays.empty() ? drawn_saved : drawn_replays) {
        const bool saved = !dp.hash.empty();
        const EngineKey key{name, dp.plan.model, saved ? "regressions/" + dp.hash : dp.plan.name};
        std::vector<Flag> which{{"--plan", dp.path}};
        plan_case(key, which, saved ? dp.plan.name : "", [&, dp](const engine::CheckOptions& o) {
          if (!dp.error.empty()) throw std::invalid_argument("the saved pair does not load: " + dp.error);
          const std::string dir = source_of({}).write(dp.recipe);
          return engine::check_plan(client, engine::load_model(dir), dir, dp.plan, o);
        });
      }
      for (const std::string& f : families) {
        const EngineKey key{name, "drawn-" + f, "model-campaign"};
        add_case(key, [&, f, line, head_dims = c.head_dims] {
          engine::ModelCampaignOutcome out = engine::run_model_campaign(client, f, source_of(head_dims), campaign_options(group));
          if (out.result.status == report::Status::Fail) {
            std::string replay = line({{"--plans", "models", Flag::Quote::None},
                                       {"--family", "^" + f + "$"},
                                       {"--seed", std::to_string(a->seed), Flag::Quote::None},
                                       {"--iterations", std::to_string(a->iterations), Flag::Quote::None},
                                       {"", out.result.reproduce, Flag::Quote::None}});
            if (a->min_window_sensitivity != engine::kMinWindowSensitivity)  // it decides which models are drawn
              replay += " --min-window-sensitivity " + (std::ostringstream() << a->min_window_sensitivity).str();
            // The shrunk pair as one file (the plan with its model's recipe), replayed alone with --plan.
            if (out.shrunk && out.model) replay += save_shrunk("drawn", drawn_pair_json(*out.shrunk, *out.model), line);
            out.result.reproduce = replay;
          }
          return out.result;
        });
      }
    }
    // The configuration pairs of --config whose two sides this run selected: each fixed plan of each
    // model judged side A against side B (engine::check_pair), on workers of their own.
    if (a->engine_cmd.empty() && replays.empty() && (a->plans == "fixed" || a->plans == "all"))
      for (const ConfiguredPair& p : read_pairs(a->config, read_config(a->config))) {
        const auto side = [&](const std::string& n) {
          const auto it = std::find_if(engines.begin(), engines.end(), [&](const Configured& c) { return c.spec.name == n; });
          return it == engines.end() ? nullptr : &*it;
        };
        const Configured *ca = side(p.a), *cb = side(p.b);
        if (!ca || !cb) continue;
        groups.push_back(std::make_unique<Group>());
        Group& group = *groups.back();
        group.client = std::make_unique<engine::EngineClient>(ca->spec);
        group.other = std::make_unique<engine::EngineClient>(cb->spec);
        std::string missing;
        for (const Configured* c : {ca, cb}) {
          const std::string needs = c->root.empty() ? c->needs : "cd " + shell_quote(c->root) + " && " + c->needs;
          if (!c->needs.empty() && std::system(("sh -c " + shell_quote(needs) + " >/dev/null 2>&1").c_str()) != 0)
            missing = c->spec.name + " is not installed (" + c->needs + " failed); install it with: " + c->setup;
        }
        engine_names.push_back(p.name);
        const auto quoted = [](const std::string& n) { return "^" + Regex(R"([.^$|()\[\]{}*+?\\])").replace(n, R"(\$&)") + "$"; };
        for (const std::string& m : model_names) {
          const std::string dir = fs::absolute(fs::path(models_dir) / m).string();
          const engine::Model& model = model_of(m);
          for (const engine::Plan& plan : engine::fixed_plans(m, model.config.local_span(), model.config.vocab)) {
            const EngineKey key{p.name, m, plan.name};
            std::vector<Flag> flags{{"--config", a->config},  {"--engine", quoted(p.a)},  {"--engine", quoted(p.b)},
                                    {"--models", models_dir}, {"--model", "^" + m + "$"}, {"--filter", "^" + id_of(key) + "$"}};
            if (a->mutant != "none") flags.push_back({"--mutant", a->mutant, Flag::Quote::None});
            const CaseEntry& e =
                registry.add(key, guarded(key, [&, key, missing, dir, plan, m, name = p.name, pair = &group,
                                                reproduce = reproduce_line(self_path(), "engine", flags)] {
                               if (!missing.empty()) {
                                 report::CaseResult r = report::named(key);
                                 r.dtype = "float32", r.status = report::Status::Skipped, r.message = missing;
                                 return r;
                               }
                               engine::CheckOptions o = check;
                               o.timing = &pair->timing;
                               o.reproduce = reproduce;
                               return engine::check_pair(*pair->client, *pair->other, name, model_of(m), dir, plan, o);
                             }));
            group_of[&e] = &group;
          }
        }
      }
    // Stops each engine after its last case (its next request would start a fresh worker).
    const auto finish = [&](Group& group) {
      group.client->stop();
      if (group.other) group.other->stop();
      const engine::Timing& timing = group.timing;
      if (timing.steps)
        std::cerr << "engine " << group.client->spec().name << ": " << timing.steps << " plan-steps, " << std::fixed
                  << std::setprecision(1) << timing.steps / std::max(timing.engine_s, 1e-9) << " steps/s in the engine ("
                  << timing.engine_s << " s), oracle " << timing.oracle_s << " s\n"
                  << std::defaultfloat;
    };

    // --filter matches a case id past its engine's name (engine/<engine>/<model>/<plan>): a match that
    // lies wholly in the engine's name does not choose the case (`--filter llama` picks the llama
    // models' cases, not every case of llama.cpp; --engine picks engines), one that reaches the model
    // or the plan does (an id --list prints, given whole, still picks its case).
    const auto chosen = [&](const std::string& id) {
      size_t past = 0;  // the length of "engine/<engine>/"
      for (const std::string& n : engine_names)
        if (const std::string p = "engine/" + n + "/"; id.rfind(p, 0) == 0) past = std::max(past, p.size());
      if (past == 0) return filter.search(id);
      for (const RegexMatch& m : filter.find_all(id))
        if (m.position() + m.length() > past) return true;
      return false;
    };
    const Registry::Plan plan = registry.choose(chosen, shard.index, shard.count);
    if (a->list) {
      for (const Chosen& c : plan.chosen) std::cout << c.entry->id << "\n";
      for (auto& g : groups) finish(*g);
      return plan.chosen.empty() ? 2 : 0;
    }
    // The corpus's found cases run beside the plans asked for: said before they run, with their count.
    size_t found = 0;
    for (const Chosen& c : plan.chosen) found += c.entry->id.find("/regressions/") != std::string::npos;
    if (found)
      std::cerr << "engine: replaying " << found << (found == 1 ? " found case" : " found cases") << " of the corpus " << corpus
                << " with the plans asked for (--no-regressions leaves them out)\n";
    reproduce_reports_in(a->report_dir, a->no_report);
    const auto started = std::chrono::steady_clock::now();
    size_t finished = 0;  // the groups before this one are finished
    Registry::run(
        plan,
        [&](const Chosen& c, report::CaseResult r) {
          print_case_line(r, a->verbose, 4000);  // a long per-step table only with -v
          if (a->verbose && r.status != report::Status::Fail && !r.detail.empty())
            std::cout << r.detail << (r.detail.back() == '\n' ? "" : "\n");
          r.ordinal = c.ordinal;
          summary.cases.push_back(std::move(r));
        },
        [&](const Chosen& c) {
          for (; groups[finished].get() != group_of.at(c.entry); ++finished) finish(*groups[finished]);
          const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
          return !(a->time_budget > 0 && elapsed > a->time_budget);
        },
        [&](const CaseEntry& e) -> std::optional<report::CaseResult> {
          const expect::Expectation* skip = expectations.set->skip(e.id);
          if (!skip) return std::nullopt;
          report::CaseResult r = expect::Set::skipped(e.key, *skip);
          r.dtype = "float32";
          return r;
        });
    for (; finished < groups.size(); ++finished) finish(*groups[finished]);
    {
      std::vector<std::string> ids;
      for (const CaseEntry& e : registry.entries()) ids.push_back(e.id);
      const std::string first_file = a->expectations.files.empty() ? "" : absolute(a->expectations.files.front());
      finish_expectations(expectations, a->expectations, summary.cases, ids, [&](const report::CaseResult& r) {
        // The file of the case's engine configuration (the longest name its id starts with), else the first given.
        std::string best, home = first_file;
        for (const auto& [name, file] : home_of_engine)
          if (r.id.rfind("engine/" + name + "/", 0) == 0 && name.size() > best.size()) best = name, home = file;
        return home;
      });
    }
    if (!a->no_report) {
      const auto paths = report::write_reports(summary, a->report_dir);
      std::cerr << "reports: " << a->report_dir << "/{junit.xml,summary.json,summary.md,report.html}\n";
    }
    return close_run(summary);
  };
}

}  // namespace kvc::cli
