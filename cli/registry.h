// The case registry of `run` and `engine` (no LibTorch): every suite registers one entry per case,
// named by typed fields before it runs (as llama.cpp's test-backend-ops names a case by its vars()),
// and listing, the filter, sharding, running, reproduce lines and the ordinals `merge` orders by
// are loops over that one list. A found-case corpus, a drawn model or plan is one more entry.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kvconform/results.h"

namespace kvc::cli {

// A case is named by its typed key (report::CaseKey, results.h) before it runs; these are the
// registry's words for them.
using report::BackendKey;
using report::CaseKey;
using report::EngineKey;
using report::GoldenKey;
using report::id_of;
using report::key_of;
using report::PluginKey;
using report::PropertyKey;
using report::suite_of;

// One word of a reproduce line: the flag and its value, quoted for the shell.
struct Flag {
  enum class Quote {
    Shell,   // shell_quote(value): only where the shell needs it
    Single,  // always in single quotes (a RapidCheck reproduce string, as it has always been printed)
    None,    // as given: a number, a word, or text already quoted (name empty: the text alone)
  };
  std::string name, value;
  Quote quote = Quote::Shell;
};
// The one reproduce-line builder: PROGRAM SUBCOMMAND, then each flag and its value, then where the
// reproduce run's reports go (reproduce_reports_in).
std::string reproduce_line(const std::string& program, const std::string& subcommand, const std::vector<Flag>& flags);
// Where the reports of the reproduce lines this process prints go, so that a line pasted in another
// folder writes none there: `reports/reproduce` of the folder the run was started in (absolute), or
// nothing (--no-report) when that run wrote no report. Each command that prints reproduce lines calls
// it once.
void reproduce_reports_in(const std::string& report_dir, bool no_report);

using CaseSink = std::function<void(report::CaseResult)>;
// Cases that run together (the backend suite replays a step pattern once for all its backends; a
// plugin's cases share its worker; golden replay reads each release's manifest once): run() runs
// those of its entries `chosen` accepts, in registry order, and gives each result to `sink`.
struct CaseBatch {
  std::function<void(const std::function<bool(const std::string& id)>& chosen, const CaseSink& sink)> run;
};

struct CaseEntry {
  CaseKey key;
  std::string id;  // id_of(key)
  // The case on its own (a property, an engine plan), or the batch it runs in.
  std::function<report::CaseResult()> run;
  std::shared_ptr<const CaseBatch> batch;
  // The flags of its reproduce line after the subcommand, given its result (the line is built by
  // reproduce_line; a suite that reproduces passing cases too sets it before the case runs).
  std::function<std::vector<Flag>(const report::CaseResult&)> reproduce;
  // A case that stands for a suite that could not list its cases (a foreign check that raised):
  // outside the filter and the shards, so every shard reports it.
  bool always = false;
};

// A selected case of this shard, with its ordinal: its place among all selected cases, the order
// `kvconform merge` restores (docs/sharding.md); -1 for an `always` entry until it runs.
struct Chosen {
  const CaseEntry* entry = nullptr;
  int64_t ordinal = 0;
};

class Registry {
 public:
  // Registers one case; ids are unique (a second entry of an id is a std::logic_error). The entry
  // stays at its address while more are added.
  const CaseEntry& add(CaseKey key, std::function<report::CaseResult()> run = {}, std::shared_ptr<const CaseBatch> batch = {});
  CaseEntry& back() { return entries_.back(); }
  const std::deque<CaseEntry>& entries() const { return entries_; }

  // The entries `selected` accepts, k counting them in registry order, and of those the ones with
  // k % shard_count == shard_index: the one selection --list prints and a run runs.
  struct Plan {
    std::vector<Chosen> chosen;
    int64_t selected = 0;  // across every shard
  };
  Plan choose(const std::function<bool(const std::string& id)>& selected, int64_t shard_index = 0, int64_t shard_count = 1) const;

  // Runs the chosen entries in order, a batch once for all its chosen entries, and calls `done`
  // with each result and the ordinal it takes: the chosen entry's, or for a result no entry names
  // (a batch that raised as a whole) and an `always` entry the ordinal before it. `start` is asked
  // before each case that runs on its own; false skips it (engine's --time-budget). A case on its
  // own whose result has another id than its own is a std::logic_error.
  // `instead`: a result for a case that is not to run (an expectations file's "skip"), given to
  // `done` in its place; a batch runs without it.
  static void run(const Plan& plan, const std::function<void(const Chosen&, report::CaseResult)>& done,
                  const std::function<bool(const Chosen&)>& start = {},
                  const std::function<std::optional<report::CaseResult>(const CaseEntry&)>& instead = {});

 private:
  std::deque<CaseEntry> entries_;  // a deque: an entry stays where it is as more are added
  std::set<std::string> ids_;
};

}  // namespace kvc::cli
