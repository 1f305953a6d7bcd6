// `kvconform run`: golden fixtures replayed through the reference, then the property campaign.
// One line per case (`NAME(params): OK|FAIL|DEVIATION ...`) and a closing `N passed, N failed`.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>

#include "cli_util.h"
#include "closing.h"
#include "commands.h"
#include "expectation_options.h"
#include "registry.h"
#include "kvconform/backends.h"
#include "kvcgen/campaign.h"
#include "kvcgen/search.h"
#include "kvcgen/trace_engine.h"
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
  std::vector<std::string> suites;        // --suite: golden, backend, property (default: all three)
  std::vector<std::string> backend_cmds;  // kernels in worker processes (subprocess_backend.h)
  double backend_timeout = 10;
  int max_worker_failures = 0;     // 0: never give up
  std::string shard, shard_count;  // docs/sharding.md
  ExpectationArgs expectations;    // docs/expectations.md
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
  report::CaseResult r = report::named(report::PropertyKey{campaign::to_string(o.property)});
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
  }
  if (verbose)
    for (const auto& [key, err] : o.observations.max_error)
      detail << (detail.tellp() ? "\n" : "") << "max error " << key << ": " << std::scientific << std::setprecision(3) << err;
  r.detail = detail.str();
  if (o.counterexample) r.masks = o.counterexample->masks;  // heatmaps of the failing update's masks
  return r;
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

// -v: a passing case's detail too (a kernel case's form coverage, a backend case's errors), each
// suite as it has always printed it.
void print_passing_detail(const report::CaseResult& r) {
  if (r.detail.empty()) return;
  if (r.suite == "golden") {
    if (r.status != report::Status::Fail) std::cout << "  " << r.detail << "\n";
  } else if (r.suite == "property") {
    if (r.status == report::Status::Pass) std::cout << r.detail << "\n";
  } else if (r.status != report::Status::Fail) {
    std::istringstream lines(r.detail);
    for (std::string line; std::getline(lines, line);)
      if (!line.empty()) std::cout << "  " << line << "\n";
  }
}

using ReproduceFlags = std::function<std::vector<Flag>(const report::CaseResult&)>;

// The suites of `run`, each registering every case it has into the one registry, with the flags of
// their reproduce lines; the selection is the registry's (Registry::choose). The entries refer to
// this object: it lives until the run has ended.
class RunSuites {
 public:
  RunSuites(const RunArgs& args, const campaign::Options& options, Registry& registry, std::string corpus)
      : args_(args), options_(options), registry_(registry), corpus_(std::move(corpus)) {}

  // Golden replay: listed in its list mode, run as one batch (a release's manifest read once).
  void golden() {
    golden::ReplayOptions g;
    g.fixtures_root = args_.fixtures;
    g.cases_root = args_.cases;
    g.dtype = options_.filter.dtype;
    g.layer_type = options_.filter.attention;
    g.mutation = options_.mutation;
    golden::ReplayOptions listing = g;
    listing.list_only = true;
    auto batch = std::make_shared<CaseBatch>();
    batch->run = [g](const auto& chosen, const CaseSink& sink) {
      golden::ReplayOptions run = g;
      run.select = chosen;
      for (report::CaseResult& r : golden::replay(run)) sink(std::move(r));
    };
    add_listed(golden::replay(listing), batch, [this](const report::CaseResult& r) { return reference_flags(r); });
  }

  // The backend suite: every built-in attention backend on the step patterns, judged against the
  // float64 oracle (the property backends_vs_oracle does the same on random sequences); one batch,
  // a step pattern replayed once for all its backends.
  void backend() {
    backends::SuiteOptions b;
    b.device = args_.device;
    b.seed = options_.seed;
    b.mutation = options_.mutation;
    const Regex backend_pattern(args_.backend);
    for (const std::string& name : backends::names())
      if (backend_pattern.search(name)) b.backends.push_back(name);
    if (b.backends.empty()) throw std::invalid_argument("--backend '" + args_.backend + "' matches no backend");
    backends::SuiteOptions listing = b;
    listing.list_only = true;
    auto batch = std::make_shared<CaseBatch>();
    batch->run = [b](const auto& chosen, const CaseSink& sink) {
      backends::SuiteOptions run = b;
      run.select = chosen;
      for (report::CaseResult& r : backends::run_suite(run)) sink(std::move(r));
    };
    add_listed(backends::run_suite(listing), batch, [this](const report::CaseResult& r) { return reference_flags(r); });
  }

  // A foreign implementation (a C plugin, a --backend-cmd worker): its cases run in one batch (one
  // worker). A raise of the check itself is that implementation's FAIL; a malformed case file stays
  // bad input.
  template <class Check>
  void foreign(bool is_plugin, const std::string& target, Check check) {
    const std::vector<Flag> target_flags = {is_plugin ? Flag{"--plugin", absolute_folder(target)} : Flag{"--backend-cmd", target},
                                            {"--cases", absolute_folder(args_.cases)}};
    const ReproduceFlags flags = [this, target_flags, is_plugin](const report::CaseResult& r) {
      std::vector<Flag> out;
      if (r.name != "check") out.push_back(filter_flag(r));
      out.insert(out.end(), target_flags.begin(), target_flags.end());
      if (!is_plugin) {
        std::ostringstream timeout;
        timeout << args_.backend_timeout;
        out.push_back({"--backend-timeout", timeout.str(), Flag::Quote::None});
      }
      if (r.name.rfind("campaign/", 0) == 0)
        out.push_back({"--plugin-iterations", std::to_string(args_.plugin_iterations), Flag::Quote::None});
      corpus_flag(out, r);
      return common_flags(std::move(out), r);
    };
    const auto raised = [is_plugin, target](const std::exception& e) {
      report::CaseResult r = report::named(report::PluginKey{target, "check", "mixed"});
      const std::string kind = is_plugin ? "plugin" : "backend-cmd";
      r.params = kind + "=" + target;
      r.status = report::Status::Fail;
      r.message = "the " + kind + " check itself raised: " + first_line(e.what());
      return r;
    };
    plugin::PluginCheckOptions p;
    p.dtype = options_.filter.dtype;
    p.attention = options_.filter.attention;
    p.max_worker_failures = args_.max_worker_failures;
    p.reproduce = args_.reproduce;
    p.seed = options_.seed;
    p.iterations = args_.plugin_iterations;
    p.cases_dir = args_.cases;
    p.regressions_root = corpus_;
    p.save_regressions = args_.save_regressions;
    auto batch = std::make_shared<CaseBatch>();
    batch->run = [p, check, raised](const auto& chosen, const CaseSink& sink) {
      plugin::PluginCheckOptions run = p;
      run.select = chosen;
      try {
        for (report::CaseResult& r : check(run)) sink(std::move(r));
      } catch (const cases::CaseError&) {
        throw;
      } catch (const std::exception& e) {
        sink(raised(e));
      }
    };
    try {
      plugin::PluginCheckOptions listing = p;
      listing.list_only = true;
      add_listed(check(listing), batch, flags);
    } catch (const cases::CaseError&) {
      throw;
    } catch (const std::exception& e) {  // it could not list its cases: one FAIL stands for them
      const report::CaseResult failure = raised(e);
      registry_.add(key_of(failure), [failure] { return failure; });
      registry_.back().reproduce = flags;
      registry_.back().always = true;
    }
  }

  // The properties: each case one campaign on its own.
  void properties(const std::vector<campaign::Property>& selected) {
    for (campaign::Property p : selected) {
      registry_.add(PropertyKey{campaign::to_string(p)}, [this, p] { return property(p); });
      registry_.back().reproduce = [this](const report::CaseResult& r) { return reference_flags(r); };
    }
  }

  // The property suite's found cases (regressions/property/<property>/<hash>.json, saved by `run
  // --save-regressions` and `kvconform fuzz`): each scenario replayed on the fast engine for the
  // property it failed, as case property/regressions/<property>/<hash>; a value property's case on
  // the tensor engine, against the float64 oracle, as the campaign found it. A file that does not load
  // is its FAIL.
  void property_regressions() {
    if (corpus_.empty()) return;
    for (const regressions::Entry& e : regressions::load(corpus_, "property")) {
      registry_.add(PropertyKey{"regressions/" + e.target + "/" + e.hash}, [this, e] { return saved_property_case(e); });
      registry_.back().reproduce = [this](const report::CaseResult& r) { return reference_flags(r); };
    }
  }

 private:
  // The trace a saved value-property case stands for: its one layer's configuration (a dynamic case's
  // static twin given room for every token, as the campaign's generator sizes it), its steps as
  // commands (the first of a sequence a Prefill, then Decode or Extend), its generated inputs; nullopt
  // for a case the tensor engine cannot run (several layers, explicit inputs).
  static std::optional<Trace> trace_of(const Scenario& c) {
    if (c.layer_types.size() != 1 || !c.explicit_k.empty() || !c.explicit_q.empty() || !c.seed) return std::nullopt;
    Trace t;
    ScenarioConfig& cfg = t.config;
    cfg.attention = c.layer_types[0];
    cfg.window = c.window;
    cfg.batch = c.batch, cfg.heads = c.heads, cfg.kv_heads = c.kv_heads, cfg.head_dim = c.head_dim;
    cfg.dtype = c.dtype;
    cfg.left_padding = c.left_padding;
    cfg.seed = *c.seed;
    int64_t longest = 0, run = 0;
    bool first = true;
    for (const Step& st : c.steps) {
      if (st.is_reset()) {
        t.commands.push_back({CommandKind::Reset, 0});
        first = true, run = 0;
        continue;
      }
      t.commands.push_back({first            ? CommandKind::Prefill
                            : st.tokens == 1 ? CommandKind::Decode
                                             : CommandKind::Extend,
                            st.tokens});
      first = false;
      longest = std::max(longest, run += st.tokens);
    }
    cfg.max_cache_len = c.cache == CacheKind::Static ? c.max_cache_len : std::max(longest, c.window);
    cfg.max_tokens = longest;
    return t;
  }

  report::CaseResult saved_property_case(const regressions::Entry& e) const {
    report::CaseResult r = report::named(report::PropertyKey{"regressions/" + e.target + "/" + e.hash});
    r.backend = "reference";
    r.dtype = "mixed";
    r.status = report::Status::Fail;
    try {
      const campaign::Property p = campaign::parse_property(e.target);
      if (!e.error.empty()) throw cases::CaseError(e.path, "", e.error);
      const Scenario c = cases::parse_case(e.text, e.path);
      r.dtype = to_string(c.dtype);
      if (c.has_calls())  // the campaigns' traces are updates and resets; a crop has no property here
        throw cases::CaseError(e.path, "/steps", "a saved property case holds no call steps (golden replay judges them)");
      if (!campaign::has_fast_path(p)) {
        const std::optional<Trace> trace = trace_of(c);
        if (!trace) {
          r.status = report::Status::Skipped;
          r.message = std::string(campaign::to_string(p)) +
                      " checks attention values on the tensor engine, which runs one "
                      "layer with generated inputs: this case has " +
                      (c.layer_types.size() != 1 ? "several layers" : "explicit inputs") +
                      " (kvconform golden dumps its fixture from " + e.path + ")";
        } else {
          r.backend = "tensor";
          const auto failure = campaign::make_tensor_engine(p, options_.mutation, nullptr)->run(*trace);
          r.status = failure ? report::Status::Fail : report::Status::Pass;
          r.message = failure ? "command " + std::to_string(failure->command) + " (" + trace->commands[failure->command].show() +
                                    "): " + failure->message
                              : std::to_string(trace->commands.size()) + " commands on the tensor engine";
        }
        r.detail = "saved case: " + e.path;
      } else {
        campaign::FastTrace t;
        for (size_t l = 0; l < c.layer_types.size(); ++l) t.layers.push_back(c.layer_spec(l));
        t.batch = c.batch;
        t.left_padding = c.left_padding;
        for (const Step& st : c.steps) t.steps.push_back(st.tokens);
        const std::string failure = campaign::check_fast(p, t, options_.mutation);
        r.status = failure.empty() ? report::Status::Pass : report::Status::Fail;
        r.message = failure.empty() ? std::to_string(t.steps.size()) + " steps on the fast engine" : failure;
        r.detail = "saved case: " + e.path;
      }
    } catch (const std::exception& error) {  // this case's FAIL; the run goes on
      r.message = std::string("the saved case does not load: ") + error.what();
    }
    return r;
  }

  report::CaseResult property(campaign::Property p) const {
    campaign::Outcome outcome;
    try {
      outcome = campaign::run(p, options_);
    } catch (const std::exception& e) {  // RapidCheck reports raises inside a case; this is outside one
      outcome.property = p;
      outcome.ok = false;
      outcome.failure = std::string("the campaign raised: ") + first_line(e.what());
    }
    report::CaseResult r = property_result(outcome, options_, args_.verbose);
    if (!outcome.ok && outcome.counterexample && !args_.save_regressions.empty()) {
      const std::string last = outcome.failure.substr(outcome.failure.find_last_of('\n', outcome.failure.size() - 2) + 1);
      const auto doc = case_json(*outcome.counterexample, p, options_.mutation, options_.seed, last);
      try {
        const regressions::Saved saved = regressions::save(args_.save_regressions, "property", campaign::to_string(p), doc);
        r.detail += "\nsaved as a case: " + saved.path + " (" + saved.id + ", replayed by every run)";
      } catch (const std::exception& e) {  // the FAIL stands and says why
        r.detail += std::string("\nnot saved as a case: ") + e.what();
      }
    }
    return r;
  }

  void add_listed(const std::vector<report::CaseResult>& listed, const std::shared_ptr<const CaseBatch>& batch,
                  const ReproduceFlags& flags) {
    for (const report::CaseResult& r : listed) {
      registry_.add(key_of(r), {}, batch);
      registry_.back().reproduce = flags;
      // A plugin that does not load lists only that failure: it stands for every case it has.
      registry_.back().always = r.suite == "plugin" && r.name == "load" && r.status == report::Status::Fail;
    }
  }

  // The reproduce line of a failing case (docs/cli.md, "Reproducing a failure"): the absolute
  // binary, --filter for exactly its id, the suite's flags that changed its outcome, with folders
  // as absolute paths, so it runs from any working directory.
  static Flag filter_flag(const report::CaseResult& r) { return {"--filter", "^" + regex_quote(r.id) + "$"}; }

  std::vector<Flag> common_flags(std::vector<Flag> flags, const report::CaseResult& r) const {
    flags.push_back({"--seed", std::to_string(options_.seed), Flag::Quote::None});
    if (!args_.dtype.empty()) flags.push_back({"--dtype", args_.dtype, Flag::Quote::None});
    if (!args_.attention.empty()) flags.push_back({"--attention", args_.attention, Flag::Quote::None});
    if (!r.replay.empty()) flags.push_back({"--reproduce", r.replay, Flag::Quote::Single});
    return flags;
  }

  std::vector<Flag> reference_flags(const report::CaseResult& r) const {
    std::vector<Flag> flags = {filter_flag(r), {"--suite", r.suite, Flag::Quote::None}};
    if (r.suite == "golden") {
      flags.push_back({"--fixtures", absolute_folder(args_.fixtures)});
      flags.push_back({"--cases", absolute_folder(args_.cases)});
    }
    if (r.suite == "backend" && args_.device != "cpu") flags.push_back({"--device", args_.device, Flag::Quote::None});
    if (r.suite == "property") {
      flags.push_back({"--iterations", std::to_string(options_.iterations), Flag::Quote::None});
      if (options_.trace_engine != campaign::TraceEngineKind::Auto)
        flags.push_back({"--trace-engine", to_string(options_.trace_engine), Flag::Quote::None});
    }
    if (options_.mutation != Mutation::None) flags.push_back({"--mutant", to_string(options_.mutation), Flag::Quote::None});
    corpus_flag(flags, r);
    return common_flags(std::move(flags), r);
  }

  // A found case of the corpus names the corpus it came from.
  void corpus_flag(std::vector<Flag>& flags, const report::CaseResult& r) const {
    if (r.id.find("/regressions/") != std::string::npos) flags.push_back({"--regressions", absolute_folder(corpus_)});
  }

  const RunArgs& args_;
  const campaign::Options& options_;
  Registry& registry_;
  const std::string corpus_;  // empty: --no-regressions
};

// make_run_registry's object: the arguments and options the suites refer to, then the suites.
class DefaultRunRegistry : public RunRegistry {
 public:
  DefaultRunRegistry(const std::string& fixtures, const std::string& cases, uint64_t seed, int iterations) {
    args_.fixtures = fixtures;
    args_.cases = cases;
    options_ = campaign::options_from_env();
    options_.seed = seed;
    options_.iterations = iterations;
    suites_ = std::make_unique<RunSuites>(args_, options_, registry_, regressions::resolve_root(""));
    suites_->golden();
    suites_->backend();
    suites_->properties(campaign::all_properties());
    suites_->property_regressions();
  }
  const Registry& registry() const override { return registry_; }

 private:
  RunArgs args_;
  campaign::Options options_;
  Registry registry_;
  std::unique_ptr<RunSuites> suites_;
};
}  // namespace

std::unique_ptr<RunRegistry> make_run_registry(const std::string& fixtures, const std::string& cases, uint64_t seed,
                                               int iterations) {
  return std::make_unique<DefaultRunRegistry>(fixtures, cases, seed, iterations);
}

Runner add_run_command(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* run =
      app.add_subcommand("run", "Replay the golden fixtures and run the property campaign (defaults: all, fixed seed)");
  add_seed_option(run, args->seed, "Campaign seed");
  run->add_option("--iterations", args->iterations, "Traces per property (default 100, or KVC_ITERATIONS)")
      ->check(CLI::PositiveNumber);
  run->add_option("--property", args->property, "Regular expression over property names");
  run->add_option("--case", args->case_regex, "Regular expression over golden names (<transformers version>/<case>)");
  run->add_option("--attention", args->attention, "Only sliding, chunked or full configurations / cases");
  run->add_option("--dtype", args->dtype, "Only this dtype (float32, float16, bfloat16, float64)");
  run->add_option("--mutant", args->mutant, "Run the properties against a deliberately wrong implementation (expect FAIL)");
  CLI::Option* trace_engine =
      run->add_option("--trace-engine", args->engine,
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
  CLI::Option* save_regressions =
      run->add_option("--save-regressions", args->save_regressions,
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
  add_expectation_options(run, args->expectations, false);

  return [args, run]() -> int {
    const auto given = [&](const char* name) { return run->count(name) > 0; };
    const bool foreign = !args->plugins.empty() || !args->backend_cmds.empty();
    // Selectors and options apply where docs/cli.md says; one given where it cannot apply is bad
    // usage (exit 2), never accepted and ignored.
    if (foreign) {
      for (const char* name : {"--case", "--property", "--backend", "--device", "--trace-engine", "--engine", "--suite",
                               "--golden-only", "--properties-only", "--iterations", "--fixtures"})
        if (given(name))
          throw std::invalid_argument(std::string(name) +
                                      " does not apply to --plugin/--backend-cmd checks (they run "
                                      "only the plugin suite; see docs/cli.md, 'Which selector applies where')");
      if (args->mutant != "none")
        throw std::invalid_argument(
            "--mutant does not apply to --plugin/--backend-cmd checks (it changes the reference, "
            "which they do not run)");
    } else {
      for (const char* name : {"--plugin-iterations", "--backend-timeout", "--max-worker-failures"})
        if (given(name)) throw std::invalid_argument(std::string(name) + " applies only with --plugin or --backend-cmd");
    }
    if (given("--backend-timeout") && args->backend_cmds.empty())
      throw std::invalid_argument("--backend-timeout applies only with --backend-cmd");
    args->cases = data_folder(args->cases, given("--cases"), "cases");
    args->fixtures = data_folder(args->fixtures, given("--fixtures"), "golden/fixtures");
    campaign::Options options = campaign::options_from_env();
    if (args->seed) options.seed = *args->seed;
    if (args->iterations) options.iterations = *args->iterations;
    if (!args->reproduce.empty()) options.reproduce = args->reproduce;
    // A campaign's case (a property's or a plugin campaign's): trace:SEED:INDEX:SIZE; bad usage if malformed.
    if (!options.reproduce.empty()) search::parse_reproduce(options.reproduce);
    if (!args->attention.empty()) options.filter.attention = parse_layer_type(args->attention);
    if (!args->dtype.empty()) options.filter.dtype = parse_dtype(args->dtype);
    options.mutation = parse_mutation(args->mutant);
    if (!args->engine.empty()) options.trace_engine = campaign::parse_trace_engine(args->engine);
    // The registry's one selection (cli_util.h): --case, --property, --suite and --*-only are
    // spellings of the id filter, asked of every registered case.
    std::vector<std::string> suites = args->suites;
    if (args->golden_only) suites = {"golden"};
    if (args->properties_only) suites = {"property"};
    const Selection selection = Selection::make(args->filter, suites, args->case_regex, args->property);
    std::vector<campaign::Property> selected;
    for (campaign::Property p : campaign::all_properties())
      if (!selection.property_names || selection.property_names->search(campaign::to_string(p))) selected.push_back(p);
    if (selected.empty() && !args->golden_only && args->suites.empty())
      throw std::invalid_argument("--property '" + args->property + "' matches no property");

    // The implementation's expectations (docs/expectations.md); a mutant run is never excused.
    Expectations expectations;
    for (const std::string& f : args->expectations.files) expectations.load(f, f, true);
    if (args->expectations.update && args->expectations.files.empty())
      throw std::invalid_argument("--update-expectations: no expectations file to update: give --expectations FILE");
    if (args->expectations.update && args->mutant != "none")
      throw std::invalid_argument("--update-expectations: a --mutant run's failures are the mutant's, not the implementation's");
    const CaseResults case_results(args->list ? "" : args->case_results);
    const bool reference_sections = args->plugins.empty() && args->backend_cmds.empty();
    // --mutant reaches every suite that runs the reference: golden replay, the backend suite and the
    // properties (docs/cli.md, "Mutants"), each of which must then fail.
    const auto suite = [&](const char* name) { return selection.suite(name); };
    if (reference_sections && suite("property"))  // --trace-engine fast on a value property is bad usage
      for (campaign::Property p : selected) campaign::resolve(options.trace_engine, p);

    // The registry: every suite's cases, in run order (golden, backend, plugin, property).
    Registry registry;
    const std::string corpus = args->no_regressions ? "" : regressions::resolve_root(args->regressions);
    RunSuites suites_of_run(*args, options, registry, corpus);
    if (reference_sections && suite("golden") && options.reproduce.empty()) suites_of_run.golden();
    if (reference_sections && suite("backend") && options.reproduce.empty()) suites_of_run.backend();
    for (const std::string& path : args->plugins)
      suites_of_run.foreign(true, path, [path](const plugin::PluginCheckOptions& p) { return plugin::check_plugin(path, p); });
    for (const std::string& command : args->backend_cmds)
      suites_of_run.foreign(false, command, [command, timeout = args->backend_timeout](plugin::PluginCheckOptions p) {
        p.timeout_s = timeout;
        return plugin::check_backend_command(command, p);
      });
    if (reference_sections && suite("property")) suites_of_run.properties(selected);
    if (reference_sections && suite("property") && options.reproduce.empty()) suites_of_run.property_regressions();

    // A shard runs the selected cases k with k % count == index, k counting every selected case in
    // registry order (docs/sharding.md); each case keeps k as its ordinal, the order merged shards take.
    const Shard shard = resolve_shard(args->shard, args->shard_count);
    const Registry::Plan plan = registry.choose(selection, shard.index, shard.count);
    // A shard may hold none of the selected cases (more shards than cases): its empty report still
    // merges; the filters matching nothing at all is bad usage.
    if (plan.selected == 0 && plan.chosen.empty()) throw std::invalid_argument("nothing to run: the filters match no case");
    if (args->list) {
      for (const Chosen& c : plan.chosen) std::cout << c.entry->id << "\n";
      return 0;
    }

    reproduce_reports_in(args->report_dir, args->no_report);
    const auto run_started = std::chrono::steady_clock::now();
    std::vector<double> case_seconds;  // for --timings: the cases that run on their own
    auto case_started = run_started;
    report::RunSummary summary;
    summary.tool_version = kToolVersion;
    summary.seed = options.seed;
    Registry::run(
        plan,
        [&](const Chosen& c, report::CaseResult r) {
          if (!c.entry->batch) {
            case_seconds.resize(summary.cases.size(), -1.0);
            case_seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - case_started).count());
          }
          if (r.status == report::Status::Pass && !args->verbose) r.detail.clear();
          if (r.status == report::Status::Fail) r.reproduce = reproduce_line(self_path(), "run", c.entry->reproduce(r));
          if (args->mutant == "none") expectations.set->judge(r, r.id, "", {r.message, false, {}});
          r.ordinal = c.ordinal;
          print_case_line(r, args->verbose);
          case_results.record(r, args->verbose);
          if (args->verbose) print_passing_detail(r);
          summary.cases.push_back(std::move(r));
        },
        [&](const Chosen&) {
          case_started = std::chrono::steady_clock::now();
          return true;
        },
        [&](const CaseEntry& e) -> std::optional<report::CaseResult> {
          const expect::Expectation* skip = expectations.set->skip(e.id);
          if (!skip) return std::nullopt;
          return expect::Set::skipped(e.key, *skip);
        });
    {
      std::vector<std::string> ids;
      for (const CaseEntry& e : registry.entries()) ids.push_back(e.id);
      const std::string home = args->expectations.files.empty() ? "" : args->expectations.files.front();
      finish_expectations(expectations, args->expectations, summary.cases, ids, [&](const report::CaseResult&) { return home; });
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
        report_options.timings =
            report::Timings{std::chrono::duration<double>(std::chrono::steady_clock::now() - run_started).count(), case_seconds};
      report::write_reports(summary, args->report_dir, report_options);
      std::cerr << "reports: " << args->report_dir << "/{junit.xml,summary.json,summary.md,report.html}\n";
    }
    return close_run(summary, args->allow_nothing_checked);
  };
}

}  // namespace kvc::cli
