// `kvconform fuzz`: long random property campaigns, split into rounds of fresh seeds, sharded
// across processes, every failure shrunk and written as a scenario file (cases/README.md).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "cli_util.h"
#include "closing.h"
#include "commands.h"
#include "kvcgen/campaign.h"
#include "kvconform/regressions.h"
#include "kvconform/report.h"
#include "kvconform/seeds.h"
#include "registry.h"

namespace kvc::cli {

namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct FuzzArgs {
  uint64_t seed = kvc::seeds::kDefaultSeed;
  std::optional<long long> iterations;
  std::optional<double> time_budget;
  std::string shard, shard_count;
  int batch = 100, max_size = 100, max_failures = 10;
  std::string property = ".*", attention, dtype, mutant = "none";
  std::string out = "regressions", report_dir;  // the found-case corpus (kvconform/regressions.h)
  bool no_write = false;
};

// The case file's cache: the layer the failure message names (static when it names both).
CacheKind failing_cache(const std::string& failure) {
  const bool dynamic = failure.find("dynamic/") != std::string::npos;
  const bool stat = failure.find("static/") != std::string::npos;
  return dynamic && !stat ? CacheKind::Dynamic : CacheKind::Static;
}

std::string last_line(const std::string& text) {
  std::string line, last;
  std::istringstream in(text);
  while (std::getline(in, line))
    if (line.find_first_not_of(" \t") != std::string::npos) last = line;
  return last;
}

}  // namespace

// The scenario file for a counterexample; the found-case corpus names it (regressions::save).
nlohmann::ordered_json case_json(const campaign::Counterexample& c, campaign::Property property, Mutation mutation,
                                 uint64_t round_seed, const std::string& message) {
  const ScenarioConfig& cfg = c.config;
  const CacheKind cache = failing_cache(message);
  nlohmann::ordered_json j;
  j["name"] = "";
  j["description"] = "Found by kvconform fuzz: " + std::string(campaign::to_string(property)) +
                     (mutation == Mutation::None ? "" : std::string(" against mutant ") + to_string(mutation)) +
                     " failed: " + message + " (commands: " +
                     [&] {
                       std::string s;
                       for (const std::string& cmd : c.commands) s += (s.empty() ? "" : ", ") + cmd;
                       return s;
                     }() +
                     ")";
  nlohmann::ordered_json tags = {"fuzz", std::string("property:") + campaign::to_string(property),
                                 "fuzz-seed:" + std::to_string(round_seed)};
  if (mutation != Mutation::None) tags.push_back(std::string("mutant:") + to_string(mutation));
  j["tags"] = tags;
  j["cache"] = to_string(cache);
  j["layer_types"] = {to_string(cfg.attention)};
  if (cfg.attention != LayerType::Full) j["window"] = cfg.window;
  if (cache == CacheKind::Static) j["max_cache_len"] = cfg.max_cache_len;
  j["batch"] = cfg.batch;
  j["heads"] = cfg.heads;
  j["kv_heads"] = cfg.kv_heads;
  j["head_dim"] = cfg.head_dim;
  j["dtype"] = to_string(cfg.dtype);
  j["left_padding"] = cfg.left_padding ? nlohmann::ordered_json(*cfg.left_padding) : nlohmann::ordered_json(nullptr);
  nlohmann::ordered_json steps = nlohmann::ordered_json::array();
  for (int64_t n : c.steps) steps.push_back({{"tokens", n}});
  j["steps"] = steps;
  j["inputs"] = {{"generator", "kvc-mix64-v1"}, {"seed", cfg.seed}};
  j["name"] = "found";  // replaced by the corpus's hash when saved
  return j;
}

Runner add_fuzz_command(CLI::App& app) {
  auto args = std::make_shared<FuzzArgs>();
  CLI::App* cmd = app.add_subcommand(
      "fuzz", "Long random property campaigns: rounds of fresh seeds, sharding, shrunk failures written as case files");
  add_seed_option(cmd, args->seed, "Base seed; round r runs with seed case_seed(seed, r) (docs/architecture.md, Seeds)");
  auto* iters = cmd->add_option("--iterations", args->iterations, "Total traces per property over all shards (default 1000)")
                    ->check(CLI::PositiveNumber);
  cmd->add_option("--time-budget", args->time_budget, "Stop starting new rounds after SECONDS (per shard)")
      ->check(CLI::PositiveNumber)
      ->excludes(iters);
  add_shard_options(cmd, args->shard, args->shard_count, "rounds (with --differential: sequences)");
  cmd->add_option("--batch", args->batch, "Traces per property per round (default 100)")->check(CLI::PositiveNumber);
  cmd->add_option("--max-size", args->max_size, "The last trace's size: longer command sequences as it grows (default 100)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--property", args->property, "Regular expression over property names");
  cmd->add_option("--attention", args->attention, "Only sliding, chunked or full configurations");
  cmd->add_option("--dtype", args->dtype, "Only configurations of this dtype");
  cmd->add_option("--mutant", args->mutant, "Fuzz a deliberately wrong implementation (expect failures)");
  CLI::Option* out = cmd->add_option("--regressions", args->out,
                                     "The found-case corpus shrunk failures are saved into, as <suite>/<target>/<hash>.json "
                                     "(default regressions; `run` replays it)");
  add_old_spelling(cmd, "--out", out, args->out);
  cmd->add_flag("--no-write", args->no_write, "Report failures without writing case files");
  cmd->add_option("--max-failures", args->max_failures, "Stop after this many failures (default 10)")->check(CLI::PositiveNumber);
  cmd->add_option("--report-dir", args->report_dir, "Also write junit.xml, summary.json, summary.md, report.html here");
  auto differential = std::make_shared<DifferentialRequest>();
  auto* diff_flag =
      cmd->add_flag("--differential", "Compare random sequences with the real transformers (golden/dump.py --serve) instead");
  CLI::Option* release = cmd->add_option("--release", differential->versions,
                                         "With --differential: transformers releases (default: every pinned one)")
                             ->needs(diff_flag);
  add_old_spelling(cmd, "--version", release, differential->versions)->needs(diff_flag);
  cmd->add_option("--reference-release,--reference-profile", differential->reference_release,
                  "With --differential: run the reference with this transformers release's behaviours (e.g. 5.24.0) "
                  "instead of the version's own; a release that behaves differently must produce disagreements")
      ->needs(diff_flag);
  cmd->add_option("--workers", differential->workers,
                  "With --differential: dumper processes working in parallel (default: one per core); the report is "
                  "the same for any count")
      ->needs(diff_flag)
      ->check(CLI::PositiveNumber);
  cmd->add_option("--root", differential->root, "With --differential: the repository root (golden/, cases/)")
      ->needs(diff_flag)
      ->check(CLI::ExistingDirectory);

  return [args, differential, diff_flag]() -> int {
    if (*diff_flag) {  // the differential campaign: sequences of the generated-corpus generator
      const Shard shard = resolve_shard(args->shard, args->shard_count);
      differential->shard_index = shard.index;
      differential->shard_count = shard.count;
      differential->seed = args->seed;
      differential->iterations = args->iterations.value_or(1000);
      differential->time_budget_s = args->time_budget.value_or(0);
      differential->out_dir = args->out;
      differential->mutant = args->mutant;
      differential->report_dir = args->report_dir;
      return run_differential(*differential);
    }
    const Shard shard = resolve_shard(args->shard, args->shard_count);
    campaign::Options base;
    base.max_size = args->max_size;
    base.mutation = parse_mutation(args->mutant);
    if (!args->attention.empty()) base.filter.attention = parse_layer_type(args->attention);
    if (!args->dtype.empty()) base.filter.dtype = parse_dtype(args->dtype);
    const std::vector<campaign::Property> selected = select_properties(args->property);

    const long long total = args->time_budget ? -1 : args->iterations.value_or(1000);
    const long long rounds = total < 0 ? -1 : (total + args->batch - 1) / args->batch;
    const bool tty = ::isatty(STDERR_FILENO) == 1;
    const auto start = Clock::now();
    const auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };

    reproduce_reports_in(args->report_dir, args->report_dir.empty());
    report::RunSummary summary;
    summary.tool_version = kToolVersion;
    summary.seed = args->seed;
    summary.command = report_command();
    summary.record.subcommand = "fuzz";
    summary.record.build = build_id();
    summary.record.shard_index = shard.index;
    summary.record.shard_count = shard.count;
    std::map<campaign::Property, long long> cases_per_property;
    std::set<std::string> files;
    long long checked = 0, rounds_run = 0;
    int failures = 0;
    bool stop = false;
    std::cout << "fuzz: seed " << args->seed << ", shard " << shard.index << "/" << shard.count << ", "
              << (rounds < 0 ? "time budget " + std::to_string(static_cast<long long>(*args->time_budget)) + " s"
                             : std::to_string(total) + " cases per property in " + std::to_string(rounds) + " rounds")
              << "\n";
    for (long long r = shard.index; !stop; r += shard.count) {
      if (rounds >= 0 && r >= rounds) break;
      if (args->time_budget && elapsed() >= *args->time_budget) break;
      campaign::Options options = base;
      options.seed = seeds::case_seed(args->seed, static_cast<uint64_t>(r));  // round r
      options.iterations = rounds < 0 ? args->batch : static_cast<int>(std::min<long long>(args->batch, total - r * args->batch));
      ++rounds_run;
      for (size_t pi = 0; pi < selected.size(); ++pi) {
        const campaign::Property p = selected[pi];
        const campaign::Outcome o = campaign::run(p, options);
        checked += o.cases + (o.ok ? 0 : 1);
        cases_per_property[p] += o.cases + (o.ok ? 0 : 1);
        if (tty) {
          std::cerr << "\r\033[Kfuzz shard " << shard.index << "/" << shard.count << ": round " << r << ", " << checked
                    << " cases, " << failures << " failures, " << static_cast<long long>(elapsed()) << " s";
          if (args->time_budget) std::cerr << " of " << static_cast<long long>(*args->time_budget);
          std::cerr << std::flush;
        }
        if (o.ok) continue;
        ++failures;
        if (tty) std::cerr << "\r\033[K" << std::flush;
        const std::string message = last_line(o.failure);
        report::CaseResult result = report::named(report::CampaignKey{"fuzz", campaign::to_string(p)});
        result.params = o.params + ",round=" + std::to_string(r);
        result.backend = "reference";
        result.dtype = base.filter.dtype ? to_string(*base.filter.dtype) : "mixed";
        result.status = report::Status::Fail;
        result.message = message;
        result.detail = o.failure;
        result.ordinal = r * static_cast<long long>(selected.size()) + static_cast<long long>(pi);  // the unsharded order
        // Lines that run as printed from any folder: this binary's path, the corpus folder made absolute.
        std::vector<Flag> mutant;
        if (base.mutation != Mutation::None) mutant.push_back({"--mutant", to_string(base.mutation), Flag::Quote::None});
        std::vector<Flag> flags = {{"--property", std::string("^") + campaign::to_string(p) + "$", Flag::Quote::Single}};
        flags.insert(flags.end(), mutant.begin(), mutant.end());
        flags.push_back({"--reproduce", o.reproduce, Flag::Quote::Single});
        result.reproduce = reproduce_line(self_path(), "run", flags);
        std::cout << "FAIL " << campaign::to_string(p) << " round " << r << " (seed " << options.seed << "): " << message
                  << "\n  reproduce: " << result.reproduce << "\n";
        if (o.counterexample) {
          result.masks = o.counterexample->masks;
          const auto j = case_json(*o.counterexample, p, base.mutation, options.seed, message);
          if (!args->no_write) {
            const regressions::Saved saved = regressions::save(args->out, "property", campaign::to_string(p), j);
            if (files.insert(saved.path).second) {  // a file an earlier run saved is this run's find too
              summary.record.files.push_back(saved.path);
              std::cout << "  case file: " << saved.path << "\n";
            } else {
              std::cout << "  case file: " << saved.path << " (same scenario as an earlier failure)\n";
            }
            std::vector<Flag> replay = {{"--filter", "^property/" + saved.id + "$", Flag::Quote::Single}};
            replay.insert(replay.end(), mutant.begin(), mutant.end());
            replay.push_back({"--regressions", std::filesystem::absolute(args->out).lexically_normal().string()});
            result.reproduce += "\n# or replay the case file: " + reproduce_line(self_path(), "run", replay);
          }
        }
        summary.cases.push_back(std::move(result));
        std::cout.flush();
        if (failures >= args->max_failures) {
          std::cout << "fuzz: stopping after " << failures << " failures (--max-failures)\n";
          stop = true;
          break;
        }
      }
    }
    if (tty) std::cerr << "\r\033[K" << std::flush;
    // What the pass cases and the closing line count, as counters that merged shards sum.
    summary.record.counters = {{"rounds", rounds_run}, {"cases", checked}};
    for (campaign::Property p : selected)
      summary.record.counters.emplace_back(std::string("cases/") + campaign::to_string(p), cases_per_property[p]);
    std::sort(summary.record.files.begin(), summary.record.files.end());
    for (campaign::Property p : selected) {
      bool failed = false;
      for (const report::CaseResult& c : summary.cases) failed = failed || c.name == campaign::to_string(p);
      if (failed) continue;
      report::CaseResult ok = report::named(report::CampaignKey{"fuzz", campaign::to_string(p)});
      ok.params = "seed=" + std::to_string(args->seed);  // the whole campaign's: merged shards sum into it
      ok.backend = "reference";
      ok.dtype = base.filter.dtype ? to_string(*base.filter.dtype) : "mixed";
      ok.message = pass_message(summary.record, ok);
      summary.cases.push_back(ok);
    }
    if (!args->report_dir.empty()) report::write_reports(summary, args->report_dir);
    return close_run(summary);
  };
}

}  // namespace kvc::cli
