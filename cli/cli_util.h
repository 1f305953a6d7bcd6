// Small helpers shared by the subcommands (no LibTorch).
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "kvcgen/campaign.h"
#include "kvconform/regex.h"
#include "kvconform/results.h"

namespace kvc::cli {

// "kvconform X.Y.Z", from the one VERSION file (KVC_VERSION, set by cli/CMakeLists.txt): what every
// report records as tool_version, so an implementation can pin the suite it passed.
#ifndef KVC_VERSION
#error "KVC_VERSION is set by cli/CMakeLists.txt from the VERSION file"
#endif
inline constexpr const char* kToolVersion = "kvconform " KVC_VERSION;
// What `kvconform --version` prints: the version, the build id and the golden fixtures' transformers
// releases that a run replays (the folders of the fixtures folder a plain `run` would use).
std::string version_text();

// The command line as given, shell-quoted where needed (RunSummary::command). main() records it.
void set_command_line(int argc, char** argv);
const std::string& command_line();
std::string shell_quote(const std::string& word);

// The running binary's absolute path (/proc/self/exe; the launcher beside kvconform-libtorch), for
// reproduce lines that work from anywhere.
std::string self_path();
// A data file or folder of the checkout (cases, golden fixtures, engines/engines.json): `value` when
// `given`; by default ./REL when it exists, else the installed copy next to the binary
// (<prefix>/share/kvconform/REL, cmake --install), else the checkout a build-tree binary was built from.
std::string data_folder(const std::string& value, bool given, const std::string& rel);
// The command line without the flags that only say which shard runs or where its reports go
// (--shard, --shard-count, --report-dir): what every shard of one run has in common, recorded as
// RunSummary::command by the commands that shard, so that merged shards say the unsharded command.
std::string report_command();

// The binary's build id (generated at build time by cmake/build_id.cmake): its commit, with
// "+dirty.<hash>" for uncommitted changes. Shards of different builds do not merge.
const char* build_id();

// A slice of a run: this process runs the units u (cases, rounds, sequences) with u % count == index.
struct Shard {
  long long index = 0, count = 1;
  std::string source;  // where it came from ("--shard", "GTEST_SHARD_INDEX", ...); empty: not sharded
};
// "i/n" with 0 <= i < n; throws std::invalid_argument.
Shard parse_shard(const std::string& text);
// The one place that decides which shard this process is (docs/sharding.md): --shard i/n (a CI
// matrix) wins; else GoogleTest's GTEST_SHARD_INDEX + GTEST_TOTAL_SHARDS; else a Kubernetes Indexed
// Job's JOB_COMPLETION_INDEX with the count from --shard-count or KVC_SHARD_COUNT (Kubernetes sets
// no count variable); else a Slurm array's SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN (divided by
// SLURM_ARRAY_TASK_STEP) of SLURM_ARRAY_TASK_COUNT; else 0/1. A malformed or out-of-range value
// throws std::invalid_argument naming the variable and its value. `env` looks up a variable
// (the process's environment by default).
using EnvLookup = const char* (*)(const char*);
const char* process_environment(const char* name);  // std::getenv
Shard resolve_shard(const std::string& flag, const std::string& count_flag = "", EnvLookup env = process_environment);
// --shard and --shard-count on a sharding subcommand, with one help text.
void add_shard_options(CLI::App* cmd, std::string& shard, std::string& shard_count, const std::string& units);

// The scenario file (cases/schema.json) of a shrunk property counterexample (fuzz_command.cpp), for
// regressions::save, which names it; `message` is the failure's last line.
nlohmann::ordered_json case_json(const campaign::Counterexample& c, campaign::Property property, Mutation mutation, uint64_t seed,
                                 const std::string& message);

// One line per case, opened by its registry id (what --filter matches), then the status and message;
// with -v the measured error against its bound; for a FAIL its detail (unless longer than
// `fail_detail_limit` characters without -v) and its reproduce line. `run` and `engine` print with it.
void print_case_line(const report::CaseResult& r, bool verbose, size_t fail_detail_limit = std::string::npos);
void print_case_line(std::ostream& os, const report::CaseResult& r, bool verbose, size_t fail_detail_limit = std::string::npos);

// `--case-results DIR`: one file per case, for test runners that name every case (ctest's per-case
// tests, cli/discover_cases.cmake.in) while one process runs them all. The file is
// DIR/<case_result_file(id)>; its first line is the status word, the rest what the run printed for
// the case. The folder is emptied when the run starts, so a case a crashed run did not reach has no
// file rather than last run's.
std::string case_result_file(const std::string& id);  // first 16 hex digits of SHA-256(id) + ".case"
class CaseResults {
 public:
  explicit CaseResults(std::string dir);  // "" records nothing
  void record(const report::CaseResult& r, bool verbose) const;

 private:
  std::string dir_;
};

// Which case ids a run selects: the registry's one filter. --filter is a regular expression over
// ids; the older selectors are spellings of it, each over the part of the id it always named:
// --suite S (and --golden-only, --properties-only) over the id's first segment, --case R over a
// golden id without "golden/" (<release>/<case>), --property R over a property id's name. Every
// suite asks it before running or listing a case, so --list prints exactly what a run runs.
struct Selection {
  std::optional<Regex> filter, golden_names, property_names;
  std::vector<std::string> suites;  // empty: every suite
  // Throws std::invalid_argument naming the flag whose regular expression is malformed.
  static Selection make(const std::string& filter, const std::vector<std::string>& suites, const std::string& case_regex,
                        const std::string& property_regex);
  bool suite(const std::string& name) const;  // may any id of this suite be selected?
  bool operator()(const std::string& id) const;
};

// Properties whose name matches the regular expression; throws std::invalid_argument if it is
// malformed or matches none.
std::vector<campaign::Property> select_properties(const std::string& regex);

}  // namespace kvc::cli
