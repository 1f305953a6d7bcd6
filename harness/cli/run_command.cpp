// `kvconform run`: golden fixtures replayed through the reference, then the property campaign.
// One line per case (`NAME(params): OK|FAIL|DEVIATION ...`) and a closing `N passed, N failed`.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <regex>
#include <sstream>

#include "cli_util.h"
#include "closing.h"
#include "commands.h"
#include "kvconform/backends.h"
#include "kvcgen/campaign.h"
#include "kvcgen/search.h"
#include "kvconform/cases.h"
#include "kvconform/golden.h"
#include "kvcgen/plugin_campaign.h"
#include "kvconform/plugin_host.h"
#include "kvconform/regressions.h"
#include "kvconform/report.h"
#include "kvconform/results.h"
#include "kvconform/subprocess_backend.h"

namespace kvc::cli {

namespace {
struct RunArgs {
  std::optional<uint64_t> seed;
  std::optional<int> iterations;
  std::string property = ".*", case_regex, filter;
  std::string attention, dtype, mutant = "none", reproduce, engine;
  std::string fixtures = "golden/fixtures", cases = "cases";
  bool list = false, verbose = false, golden_only = false, properties_only = false;
  // Reports (docs/cli.md): junit.xml, summary.json, summary.md, report.html.
  std::string report_dir = "reports/latest";
  bool no_report = false, timings = false;
  // Kernel backends and foreign plugins (docs/backends.md, docs/plugins.md).
  std::string backend = ".*", device = "cpu";
  std::vector<std::string> plugins;
  int plugin_iterations = 25;
  // The found-case corpus (kvconform/regressions.h): replayed by default; where shrunk failures are saved.
  std::string regressions, save_regressions;
  bool no_regressions = false;
  std::string case_results;  // one file per case (cli_util.h, CaseResults)
  bool allow_nothing_checked = false;
  std::vector<std::string> suites;  // --suite: golden, backend, property (default: all three)
  std::vector<std::string> backend_cmds;  // kernels in worker processes (subprocess_backend.h)
  double backend_timeout = 10;
  int max_worker_failures = 0;  // 0: never give up
  std::string shard, shard_count;  // docs/sharding.md
};

// `id` as an ECMAScript regular expression that matches exactly it.
std::string regex_quote(const std::string& id) {
  std::string out;
  for (char c : id) {
    if (std::string("\\^$.|?*+()[]{}").find(c) != std::string::npos) out += '\\';
    out += c;
  }
  return out;
}

// The folder as an absolute path, for a reproduce line that works from any working directory.
std::string absolute_folder(const std::string& value) {
  std::error_code ec;
  return std::filesystem::absolute(value, ec).lexically_normal().string();
}

report::CaseResult property_result(const campaign::Outcome& o, const campaign::Options& options, bool verbose) {
  report::CaseResult r;
  r.suite = "property";
  r.name = campaign::to_string(o.property);
  r.params = o.params;
  r.backend = "reference";
  r.dtype = options.filter.dtype ? to_string(*options.filter.dtype) : "mixed";
  r.status = o.ok ? report::Status::Pass : report::Status::Fail;
  const campaign::Judged judged = campaign::judged_by(o.property, options.filter.dtype);
  r.policy = to_string(judged.policy);
  r.bound = judged.bound;
  // The measured error: the largest the campaign observed (value properties); a bitwise property
  // that passed measured none above 0.
  for (const auto& [key, err] : o.observations.max_error) r.error = std::max(r.error, err);
  if (r.error < 0 && o.ok && judged.policy == Policy::Bitwise) r.error = 0;
  r.replay = o.reproduce;
  std::ostringstream detail;
  if (o.ok) {
    r.message = std::to_string(o.cases) + " cases, " + std::to_string(o.observations.steps) + " steps";
    if (o.observations.deviation_steps) {
      // Judged against what transformers returns there (generators/src/sut.cpp, lost_keys).
      r.status = report::Status::Deviation;
      r.message += "; " + std::to_string(o.observations.deviation_steps) +
                   " layer-steps reproduce an upstream deviation: a static sliding layer with max_cache_len below "
                   "the window drops keys the window allows";
    }
  } else {
    // The failure's own last line names the step, layer and values; the count follows it.
    std::string line, last;
    std::istringstream lines(o.failure);
    while (std::getline(lines, line))
      if (line.find_first_not_of(" \t") != std::string::npos) last = line;
    r.message = (last.empty() ? std::string("failed") : last) + " (after " + std::to_string(o.cases) + " passing cases)";
    detail << o.failure;
    std::string cmd = "kvconform run --properties-only --property '^" + r.name + "$' --seed " + std::to_string(options.seed);
    if (options.mutation != Mutation::None) cmd += std::string(" --mutant ") + to_string(options.mutation);
    if (options.engine != campaign::Engine::Auto) cmd += std::string(" --trace-engine ") + to_string(options.engine);
    if (!o.reproduce.empty()) cmd += " --reproduce '" + o.reproduce + "'";
    r.reproduce = cmd;
  }
  if (verbose)
    for (const auto& [key, err] : o.observations.max_error)
      detail << (detail.tellp() ? "\n" : "") << "max error " << key << ": " << std::scientific << std::setprecision(3)
             << err;
  r.detail = detail.str();
  if (o.counterexample) r.masks = o.counterexample->masks;  // heatmaps of the failing update's masks
  return r;
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

// The property suite's found cases (regressions/property/<property>/<hash>.json, saved by `run
// --save-regressions` and `kvconform fuzz`): each scenario replayed on the fast engine for the property
// it failed, as case property/regressions/<property>/<hash>. A value property's case is judged against
// its golden fixture (`kvconform golden` dumps one), here a SKIP; a file that does not load is its FAIL.
std::vector<report::CaseResult> property_regressions(const std::string& root, Mutation mutation,
                                                     const std::function<bool(const std::string&)>& select, bool list_only) {
  std::vector<report::CaseResult> out;
  for (const regressions::Entry& e : regressions::load(root, "property")) {
    report::CaseResult r;
    r.suite = "property";
    r.name = "regressions/" + e.target + "/" + e.hash;
    r.backend = "reference";
    r.dtype = "mixed";
    if (!select(report::case_id(r))) continue;
    if (list_only) {
      out.push_back(r);
      continue;
    }
    r.status = report::Status::Fail;
    try {
      const campaign::Property p = campaign::parse_property(e.target);
      if (!e.error.empty()) throw cases::CaseError(e.path, "", e.error);
      const Scenario c = cases::parse_case(e.text, e.path);
      r.dtype = to_string(c.dtype);
      if (!campaign::has_fast_path(p)) {
        r.status = report::Status::Skipped;
        r.message = std::string(campaign::to_string(p)) + " checks attention values: this case is judged against its golden "
                    "fixture (kvconform golden dumps it from " + e.path + ")";
      } else {
        campaign::FastTrace t;
        for (size_t l = 0; l < c.layer_types.size(); ++l) t.layers.push_back(c.layer_spec(l));
        t.batch = c.batch;
        t.left_padding = c.left_padding;
        for (const Step& st : c.steps) t.steps.push_back(st.tokens);
        const std::string failure = campaign::check_fast(p, t, mutation);
        r.status = failure.empty() ? report::Status::Pass : report::Status::Fail;
        r.message = failure.empty() ? std::to_string(t.steps.size()) + " steps on the fast engine" : failure;
        r.detail = "saved case: " + e.path;
      }
    } catch (const std::exception& error) {  // this case's FAIL; the run goes on
      r.message = std::string("the saved case does not load: ") + error.what();
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

Runner add_run_command(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* run = app.add_subcommand("run", "Replay the golden fixtures and run the property campaign (defaults: all, fixed seed)");
  add_seed_option(run, args->seed, "Campaign seed");
  run->add_option("--iterations", args->iterations, "Traces per property (default 100, or KVC_ITERATIONS)")
      ->check(CLI::PositiveNumber);
  run->add_option("--property", args->property, "Regular expression over property names");
  run->add_option("--case", args->case_regex, "Regular expression over golden names (<transformers version>/<case>)");
  run->add_option("--attention", args->attention, "Only sliding, chunked or full configurations / cases");
  run->add_option("--dtype", args->dtype, "Only this dtype (float32, float16, bfloat16, float64)");
  run->add_option("--mutant", args->mutant, "Run the properties against a deliberately wrong implementation (expect FAIL)");
  CLI::Option* trace_engine = run->add_option("--trace-engine", args->engine,
                  "auto (default: the fast position-level engine for stored_rows, returned_rows and window_coverage, "
                  "LibTorch for the rest), tensor or fast (or KVC_TRACE_ENGINE)");
  add_old_spelling(run, "--engine", trace_engine, args->engine);
  run->add_option("--reproduce", args->reproduce, "Replay a property failure from its reproduce string (with --property)");
  run->add_option("--fixtures", args->fixtures, "Golden fixtures folder (one subfolder per transformers version)");
  run->add_option("--cases", args->cases, "Scenario folder the fixtures were dumped from");
  run->add_option("--suite", args->suites, "Only these suites, comma-separated: golden, backend, property (default: all)")
      ->delimiter(',')
      ->check(CLI::IsMember({"golden", "backend", "property"}));
  auto* golden_only = run->add_flag("--golden-only", args->golden_only, "Only replay the golden fixtures (--suite golden)");
  run->add_flag("--properties-only", args->properties_only, "Only run the property campaign")->excludes(golden_only);
  run->add_option("--filter", args->filter,
                  "Regular expression over case ids (golden/<release>/<case>, backend/<scenario>/<cache>/<backend>/<dtype>, "
                  "property/<name>, plugin/<plugin>/<case>/<dtype>); --list prints the ids it matches");
  run->add_flag("--list", args->list, "Print the id of every case that would run, one per line, and exit");
  auto* no_report = run->add_flag("--no-report", args->no_report, "Write no report files");
  run->add_option("--report-dir", args->report_dir,
                  "Folder for junit.xml, summary.json, summary.md, report.html (default reports/latest)")
      ->excludes(no_report);
  run->add_flag("--timings", args->timings, "Put wall times into the reports (they then differ between runs)");
  std::string known_backends;
  for (const std::string& n : backends::names()) known_backends += (known_backends.empty() ? "" : ", ") + n;
  run->add_option("--backend", args->backend, "Regular expression over attention backends (" + known_backends + ")");
  run->add_option("--device", args->device, "Device of the backend suite: cpu (default) or cuda (SKIP without CUDA)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  run->add_option("--plugin", args->plugins,
                  "Check a plugin (shared library, docs/plugins.md) against the golden cases' step sequences and a "
                  "random campaign; with --plugin only the plugins are checked")
      ->check(CLI::ExistingFile);
  run->add_option("--plugin-iterations", args->plugin_iterations, "Random-campaign cases per plugin part (default 25)")
      ->check(CLI::NonNegativeNumber);
  run->add_option("--backend-cmd", args->backend_cmds,
                  "Check an attention kernel in a worker process started by this command line (docs/plugins.md, "
                  "'Kernels in another process'); like --plugin, only the selected kernels are checked");
  run->add_option("--backend-timeout", args->backend_timeout, "Seconds per --backend-cmd call (default 10)")
      ->check(CLI::PositiveNumber);
  run->add_option("--max-worker-failures", args->max_worker_failures,
                  "Give up on a --plugin or --backend-cmd after N worker failures (crash, hang, exit, no start): its "
                  "remaining cases are SKIP 'gave up after N worker failures' (default 0: never)")
      ->check(CLI::NonNegativeNumber);
  CLI::Option* regressions_root = run->add_option(
      "--regressions", args->regressions,
      "The found-case corpus replayed with the property and plugin suites (regressions/<suite>/<target>/; default "
      "./regressions, else the installed or the built-from copy)");
  run->add_flag("--no-regressions", args->no_regressions, "Replay no found case of the corpus")->excludes(regressions_root);
  CLI::Option* save_regressions = run->add_option(
      "--save-regressions", args->save_regressions,
      "Save each shrunk property or plugin-campaign failure into this corpus folder (e.g. regressions: "
      "<suite>/<target>/<hash>.json), so a found bug becomes a permanent case the next run replays");
  add_old_spelling(run, "--save-cases", save_regressions, args->save_regressions);
  run->add_option("--case-results", args->case_results,
                  "Also write each case's status and lines into its own file in this folder (emptied first), for a "
                  "test runner that names every case while one process runs them (ctest's case/<id> tests)");
  add_shard_options(run, args->shard, args->shard_count, "selected cases");
  run->add_flag("-v,--verbose", args->verbose, "Also print details of passing cases (largest numerical errors)");
  run->add_flag("--allow-nothing-checked", args->allow_nothing_checked,
                "Exit 0 even when every selected case was skipped (by default a run that checked nothing fails)");

  return [args, run]() -> int {
    const auto given = [&](const char* name) { return run->count(name) > 0; };
    const bool foreign = !args->plugins.empty() || !args->backend_cmds.empty();
    // Selectors and options apply where docs/cli.md says; one given where it cannot apply is bad
    // usage (exit 2), never accepted and ignored.
    if (foreign) {
      for (const char* name : {"--case", "--property", "--backend", "--device", "--trace-engine", "--engine", "--suite", "--golden-only",
                               "--properties-only", "--iterations", "--fixtures"})
        if (given(name))
          throw std::invalid_argument(std::string(name) + " does not apply to --plugin/--backend-cmd checks (they run "
                                      "only the plugin suite; see docs/cli.md, 'Which selector applies where')");
      if (args->mutant != "none")
        throw std::invalid_argument("--mutant does not apply to --plugin/--backend-cmd checks (it changes the reference, "
                                    "which they do not run)");
    } else {
      for (const char* name : {"--plugin-iterations", "--backend-timeout", "--max-worker-failures"})
        if (given(name)) throw std::invalid_argument(std::string(name) + " applies only with --plugin or --backend-cmd");
    }
    if (given("--backend-timeout") && args->backend_cmds.empty())
      throw std::invalid_argument("--backend-timeout applies only with --backend-cmd");
    args->cases = data_folder(args->cases, given("--cases"), "cases");
    args->fixtures = data_folder(args->fixtures, given("--fixtures"), "golden/fixtures");
    const std::string corpus = args->no_regressions ? "" : regressions::resolve_root(args->regressions);
    campaign::Options options = campaign::options_from_env();
    if (args->seed) options.seed = *args->seed;
    if (args->iterations) options.iterations = *args->iterations;
    if (!args->reproduce.empty()) options.reproduce = args->reproduce;
    // A campaign's case (a property's or a plugin campaign's): trace:SEED:INDEX:SIZE; bad usage if malformed.
    if (!options.reproduce.empty()) search::parse_reproduce(options.reproduce);
    if (!args->attention.empty()) options.filter.attention = parse_layer_type(args->attention);
    if (!args->dtype.empty()) options.filter.dtype = parse_dtype(args->dtype);
    options.mutation = parse_mutation(args->mutant);
    if (!args->engine.empty()) options.engine = campaign::parse_engine(args->engine);
    // The registry's one selection (cli_util.h): --case, --property, --suite and --*-only are
    // spellings of the id filter; every suite asks it before running or listing a case.
    std::vector<std::string> suites = args->suites;
    if (args->golden_only) suites = {"golden"};
    if (args->properties_only) suites = {"property"};
    const Selection selection = Selection::make(args->filter, suites, args->case_regex, args->property);
    // A shard runs the selected cases k with k % count == index, k counting every selected id in
    // run order (docs/sharding.md); each case keeps k as its ordinal, the order merged shards take.
    const Shard shard = resolve_shard(args->shard, args->shard_count);
    std::map<std::string, int64_t> ordinal_of;
    int64_t selected_ids = 0;
    const auto select = [&](const std::string& id) {
      if (!selection(id)) return false;
      const int64_t k = selected_ids++;
      if (k % shard.count != shard.index) return false;
      ordinal_of[id] = k;
      return true;
    };
    int listed = 0;
    auto list = [&](const std::vector<report::CaseResult>& results) {
      for (const report::CaseResult& r : results) std::cout << report::case_id(r) << "\n";
      listed += static_cast<int>(results.size());
    };
    std::vector<campaign::Property> selected;
    for (campaign::Property p : campaign::all_properties())
      if (!selection.property_names || std::regex_search(campaign::to_string(p), *selection.property_names))
        selected.push_back(p);
    if (selected.empty() && !args->golden_only && args->suites.empty())
      throw std::invalid_argument("--property '" + args->property + "' matches no property");

    // One runnable line per failing case (docs/cli.md, "Reproducing a failure"): the absolute
    // binary, --filter for exactly its id, and every flag that changed its outcome, with folders as
    // absolute paths, so it runs from any working directory.
    const auto reproduce = [&](report::CaseResult& r, const std::string& target_flag) {
      if (r.status != report::Status::Fail) return;
      std::ostringstream os;
      os << shell_quote(self_path()) << " run";
      if (r.suite != "plugin" || r.name != "check") os << " --filter " << shell_quote("^" + regex_quote(report::case_id(r)) + "$");
      if (r.suite == "plugin") {
        os << " " << target_flag << " --cases " << shell_quote(absolute_folder(args->cases));
        if (!args->backend_cmds.empty() && target_flag.rfind("--backend-cmd", 0) == 0)
          os << " --backend-timeout " << args->backend_timeout;
        if (r.name.rfind("campaign/", 0) == 0) os << " --plugin-iterations " << args->plugin_iterations;
      } else {
        os << " --suite " << r.suite;
        if (r.suite == "golden")
          os << " --fixtures " << shell_quote(absolute_folder(args->fixtures)) << " --cases "
             << shell_quote(absolute_folder(args->cases));
        if (r.suite == "backend" && args->device != "cpu") os << " --device " << args->device;
        if (r.suite == "property") {
          os << " --iterations " << options.iterations;
          if (options.engine != campaign::Engine::Auto) os << " --trace-engine " << to_string(options.engine);
        }
        if (options.mutation != Mutation::None) os << " --mutant " << to_string(options.mutation);
      }
      os << " --seed " << options.seed;
      if (report::case_id(r).find("/regressions/") != std::string::npos)  // a found case of the corpus
        os << " --regressions " << shell_quote(absolute_folder(corpus));
      if (!args->dtype.empty()) os << " --dtype " << args->dtype;
      if (!args->attention.empty()) os << " --attention " << args->attention;
      if (!r.replay.empty())  // always quoted, as the reproduce strings have always been printed
        os << " --reproduce " << (r.replay.find('\'') == std::string::npos ? "'" + r.replay + "'" : shell_quote(r.replay));
      r.reproduce = os.str();
    };
    const CaseResults case_results(args->list ? "" : args->case_results);
    const auto run_started = std::chrono::steady_clock::now();
    std::vector<double> case_seconds;  // for --timings
    report::RunSummary summary;
    summary.tool_version = "kvconform 0.1.0";
    summary.seed = options.seed;
    const bool reference_sections = args->plugins.empty() && args->backend_cmds.empty();
    // --mutant reaches every suite that runs the reference: golden replay, the backend suite and the
    // properties (docs/cli.md, "Mutants"), each of which must then fail.
    const auto suite = [&](const char* name) { return selection.suite(name); };
    if (reference_sections && suite("property"))  // --trace-engine fast on a value property is bad usage
      for (campaign::Property p : selected) campaign::resolve(options.engine, p);
    const bool goldens = reference_sections && suite("golden") && options.reproduce.empty();
    if (goldens) {
      golden::ReplayOptions g;
      g.fixtures_root = args->fixtures;
      g.cases_root = args->cases;
      g.dtype = options.filter.dtype;
      g.layer_type = options.filter.attention;
      g.mutation = options.mutation;
      g.select = select;
      g.list_only = args->list;
      if (args->list) {
        list(golden::replay(g));
      } else {
        for (report::CaseResult& r : golden::replay(g)) {
          if (r.status == report::Status::Pass && !args->verbose) r.detail.clear();
          reproduce(r, "");
          print_case_line(r, args->verbose);
          case_results.record(r, args->verbose);
          if (args->verbose && r.status != report::Status::Fail && !r.detail.empty()) std::cout << "  " << r.detail << "\n";
          summary.cases.push_back(std::move(r));
        }
      }
    }
    auto add = [&](report::CaseResult r, const std::string& target_flag = "") {
      if (r.status == report::Status::Pass && !args->verbose) r.detail.clear();
      reproduce(r, target_flag);
      print_case_line(r, args->verbose);
      case_results.record(r, args->verbose);
      // -v: a passing case's detail too (a kernel case's form coverage, a backend case's errors).
      if (args->verbose && r.status != report::Status::Fail && !r.detail.empty()) {
        std::istringstream lines(r.detail);
        for (std::string line; std::getline(lines, line);)
          if (!line.empty()) std::cout << "  " << line << "\n";
      }
      case_seconds.resize(summary.cases.size(), -1.0);
      summary.cases.push_back(std::move(r));
    };
    // The backend suite: every built-in attention backend on the step patterns, judged against the
    // float64 oracle (the property backends_vs_oracle does the same on random sequences).
    if (reference_sections && suite("backend") && options.reproduce.empty()) {
      backends::SuiteOptions b;
      b.device = args->device;
      b.seed = options.seed;
      b.mutation = options.mutation;
      const std::regex backend_pattern(args->backend);
      for (const std::string& name : backends::names())
        if (std::regex_search(name, backend_pattern)) b.backends.push_back(name);
      if (b.backends.empty()) throw std::invalid_argument("--backend '" + args->backend + "' matches no backend");
      b.select = select;
      b.list_only = args->list;
      if (args->list) {
        list(backends::run_suite(b));
      } else {
        for (report::CaseResult& r : backends::run_suite(b)) add(std::move(r));
      }
    }
    // Foreign implementations (C plugins, --backend-cmd workers): a raise of the check itself is that
    // implementation's FAIL; a malformed case file stays bad input.
    auto check_foreign = [&](const std::string& label, const std::string& target, auto&& check) {
      const std::string target_flag = label == "plugin" ? "--plugin " + shell_quote(absolute_folder(target))
                                                        : "--backend-cmd " + shell_quote(target);
      plugin::PluginCheckOptions p;
      p.dtype = options.filter.dtype;
      p.attention = options.filter.attention;
      p.max_worker_failures = args->max_worker_failures;
      p.reproduce = args->reproduce;
      p.seed = options.seed;
      p.iterations = args->plugin_iterations;
      p.cases_dir = args->cases;
      p.regressions_root = corpus;
      p.save_regressions = args->save_regressions;
      p.select = select;
      p.list_only = args->list;
      try {
        if (args->list) return list(check(p));
        for (report::CaseResult& r : check(p)) add(std::move(r), target_flag);
      } catch (const cases::CaseError&) {
        throw;
      } catch (const std::exception& e) {
        report::CaseResult r;
        r.suite = "plugin";
        r.name = "check";
        const std::string kind = label == "plugin" ? "plugin" : "backend-cmd";
        r.params = kind + "=" + target;
        r.backend = target;
        r.dtype = "mixed";
        r.status = report::Status::Fail;
        r.message = "the " + kind + " check itself raised: " + first_line(e.what());
        add(std::move(r), target_flag);
      }
    };
    for (const std::string& path : args->plugins)
      check_foreign("plugin", path, [&](plugin::PluginCheckOptions p) { return plugin::check_plugin(path, p); });
    for (const std::string& command : args->backend_cmds)
      check_foreign("backend command", command, [&](plugin::PluginCheckOptions p) {
        p.timeout_s = args->backend_timeout;
        return plugin::check_backend_command(command, p);
      });
    if (reference_sections && suite("property")) {
      for (campaign::Property p : selected) {
        if (!select(std::string("property/") + campaign::to_string(p))) continue;
        if (args->list) {
          std::cout << "property/" << campaign::to_string(p) << "\n";
          ++listed;
          continue;
        }
        const auto started = std::chrono::steady_clock::now();
        campaign::Outcome outcome;
        try {
          outcome = campaign::run(p, options);
        } catch (const std::exception& e) {  // RapidCheck reports raises inside a case; this is outside one
          outcome.property = p;
          outcome.ok = false;
          outcome.failure = std::string("the campaign raised: ") + first_line(e.what());
        }
        report::CaseResult r = property_result(outcome, options, args->verbose);
        reproduce(r, "");
        if (!outcome.ok && outcome.counterexample && !args->save_regressions.empty()) {
          const std::string last = outcome.failure.substr(outcome.failure.find_last_of('\n', outcome.failure.size() - 2) + 1);
          const auto doc = case_json(*outcome.counterexample, p, options.mutation, options.seed, last);
          try {
            const regressions::Saved saved = regressions::save(args->save_regressions, "property", campaign::to_string(p), doc);
            r.detail += "\nsaved as a case: " + saved.path + " (" + saved.id + ", replayed by every run)";
          } catch (const std::exception& e) {  // the FAIL stands and says why
            r.detail += std::string("\nnot saved as a case: ") + e.what();
          }
        }
        case_seconds.resize(summary.cases.size(), -1.0);  // golden cases are not timed one by one
        case_seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
        print_case_line(r, args->verbose);
        case_results.record(r, args->verbose);
        if (args->verbose && r.status == report::Status::Pass && !r.detail.empty()) std::cout << r.detail << "\n";
        summary.cases.push_back(std::move(r));
      }
      if (!corpus.empty() && options.reproduce.empty()) {
        std::vector<report::CaseResult> found = property_regressions(corpus, options.mutation, select, args->list);
        if (args->list) {
          list(found);
        } else {
          for (report::CaseResult& r : found) add(std::move(r));
        }
      }
    }
    // A shard may hold none of the selected cases (more shards than cases): its empty report still
    // merges; the filters matching nothing at all is bad usage.
    if (args->list ? listed == 0 && selected_ids == 0 : summary.cases.empty() && selected_ids == 0)
      throw std::invalid_argument("nothing to run: the filters match no case");
    if (args->list) return 0;
    // A result of an id the selection never saw (a foreign check that raised) stays after the case before it.
    int64_t last_ordinal = 0;
    for (report::CaseResult& r : summary.cases) {
      const auto it = ordinal_of.find(report::case_id(r));
      r.ordinal = last_ordinal = it == ordinal_of.end() ? last_ordinal : it->second;
    }
    summary.record.subcommand = "run";
    summary.record.build = build_id();
    summary.record.shard_index = shard.index;
    summary.record.shard_count = shard.count;
    // Reports: written before the closing line, announced on stderr so stdout stays as it was.
    if (!args->no_report) {
      summary.command = report_command();
      report::ReportOptions report_options;
      if (args->timings)
        report_options.timings = report::Timings{
            std::chrono::duration<double>(std::chrono::steady_clock::now() - run_started).count(), case_seconds};
      report::write_reports(summary, args->report_dir, report_options);
      std::cerr << "reports: " << args->report_dir << "/{junit.xml,summary.json,summary.md,report.html}\n";
    }
    summary.command = report_command();  // close_run reads --allow-nothing-checked from it
    return close_run(summary);
  };
}

}  // namespace kvc::cli
