// Subcommands of the kvconform CLI. Each registers its options on the CLI11 app and returns the
// process exit code: 0 all pass, 1 some fail, 2 bad usage or bad input.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "app.h"
#include "kvconform/seeds.h"

namespace kvc::cli {

Runner add_run_command(CLI::App& app);
Runner add_fuzz_command(CLI::App& app);     // fuzz_command.cpp
Runner add_bench_command(CLI::App& app);    // bench_command.cpp (the one CLI file with LibTorch)
Runner add_replay_command(CLI::App& app);   // replay_command.cpp
Runner add_explain_command(CLI::App& app);  // replay_command.cpp
Runner add_golden_command(CLI::App& app);   // golden_command.cpp
Runner add_engine_command(CLI::App& app);   // engine_command.cpp
Runner add_merge_command(CLI::App& app);    // merge_command.cpp
Runner add_site_command(CLI::App& app);     // site_command.cpp

// Transformers versions with a pinned dumper environment (golden/requirements-<version>.txt), sorted.
std::vector<std::string> pinned_versions(const std::string& repo_root);

// kvconform fuzz --differential (differential_command.cpp).
struct DifferentialRequest {
  uint64_t seed = kvc::seeds::kDefaultSeed;
  int64_t iterations = 1000;
  double time_budget_s = 0;
  std::vector<std::string> versions;    // empty: every pinned version
  std::string out_dir = "regressions";  // the found-case corpus (kvconform/regressions.h)
  std::string root = ".";
  std::string reference_release;             // empty: each version's own (behaviours_for_release)
  std::string mutant = "none";               // --mutant: the reference is deliberately wrong, so it must disagree
  int64_t shard_index = 0, shard_count = 1;  // this worker runs the sequences i with i % count == index
  int64_t workers = 0;                       // dumper processes in parallel; 0: one per core
  std::string report_dir;                    // junit.xml, summary.json, summary.md, report.html here; empty: none
};
int run_differential(const DifferentialRequest& request);

// kvconform bench --vs-python (bench_vs_python.cpp).
struct VsPythonRequest {
  std::string root = ".";
  std::string version;  // transformers version of the Python side; empty: the newest pinned
  uint64_t seed = kvc::seeds::kDefaultSeed;
  int64_t traces = 200;                   // identical traces for both sides
  int64_t campaign_traces = 100000;       // random traces per fast-engine campaign
  int64_t python_repeats = 3;             // passes of golden/bench_dump.py over the traces (its figure varies)
  double min_seconds = 0.5;               // each C++ measurement repeats the traces for at least this long
  int64_t differential_sequences = 1000;  // fuzz --differential sequences timed with the dumper pool (0: none)
  int64_t workers = 0;                    // its dumper processes; 0: one per core
};
int run_vs_python(const VsPythonRequest& request, nlohmann::ordered_json* json_out);

// kvconform bench --filter (bench_cases.cpp): perf mode over the registry's case ids.
struct CasePerfRequest {
  std::string filter;  // over the ids `kvconform run --list` prints
  std::string fixtures = "golden/fixtures", cases = "cases";
  uint64_t seed = kvc::seeds::kDefaultSeed;
  int iterations = 100;  // traces per property, as `run`
  int repeats = 15, warmup = 3;
  bool quiet_stdout = false;  // the table on stderr (JSON on stdout)
};
int run_case_perf(const CasePerfRequest& request, nlohmann::ordered_json* json_out);

// The registry `kvconform run` builds with its defaults (run_command.cpp): golden replay of
// `fixtures`, the backend suite, every property and the corpus' found cases, in --list order. The
// object owns what its entries refer to; bench --filter times those entries.
class Registry;
class RunRegistry {
 public:
  virtual ~RunRegistry() = default;
  virtual const Registry& registry() const = 0;
};
std::unique_ptr<RunRegistry> make_run_registry(const std::string& fixtures, const std::string& cases, uint64_t seed,
                                               int iterations);

// One name per concept across the subcommands: OLD is a former spelling of the option `current`,
// still accepted for one release (until kvconform 0.2) with a warning on stderr that names the new
// spelling. The alias is hidden from --help, writes the same target, and giving both is bad usage.
template <class T>
CLI::Option* add_old_spelling(CLI::App* cmd, const std::string& old_name, CLI::Option* current, T& target) {
  const std::string sub = cmd->get_name(), new_name = current->get_name();
  return cmd->add_option(old_name, target)->group("")->excludes(current)->each([sub, old_name, new_name](const std::string&) {
    std::cerr << "kvconform " << sub << ": " << old_name << " is now " << new_name
              << " (the old spelling is accepted until kvconform 0.2)\n";
  });
}

// `--seed` of every command: one default, one environment variable, one meaning (kvconform/seeds.h).
// Digits only: CLI11 would read "-5" as 2^64 - 5 into an unsigned seed.
template <typename Seed>
CLI::Option* add_seed_option(CLI::App* cmd, Seed& seed, const std::string& what) {
  const CLI::Validator digits(
      [](std::string& s) {
        return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos
                   ? std::string()
                   : "'" + s + "' is not an integer >= 0 (--seed, or KVC_SEED in the environment)";
      },
      "UINT");
  return cmd->add_option("--seed", seed, what + " (default " + std::to_string(seeds::kDefaultSeed) + ", or KVC_SEED)")
      ->envname("KVC_SEED")
      ->check(digits);
}

}  // namespace kvc::cli
