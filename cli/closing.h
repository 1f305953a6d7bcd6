// How the commands that shard (run, engine, fuzz, fuzz --differential) end, computed from their
// RunSummary alone: the closing lines, the exit status and the message of a campaign's pass case.
// The commands and `kvconform merge` go through these same functions, so n merged shards print and
// exit exactly as the unsharded run (docs/sharding.md). No LibTorch.
#pragma once

#include <optional>
#include <string>

#include "kvconform/results.h"

namespace kvc::cli {

// Prints the closing line(s) on stdout (a "nothing was checked" note where it applies) and returns
// the exit status: 0 all pass, 1 a failure or nothing checked. The differential campaign prints
// its per-version lines with print_differential_version (the live run as each version finishes).
// `allow_nothing_checked`: the run's --allow-nothing-checked (a run of only SKIPs then exits 0).
int close_run(const report::RunSummary& summary, bool allow_nothing_checked = false);
// Whether the run a summary records was given --allow-nothing-checked: what `kvconform merge` knows
// of its shards' flags (their recorded command).
bool recorded_allow_nothing_checked(const report::RunSummary& summary);

// The message of a campaign's pass case, from the record's counters: fuzz `<N> cases` (counter
// cases/<property>), differential `<N> sequences, <N> steps, 0 disagreements, <N> upstream
// deviations reproduced` (counters <field>/<version>). Merging sums the counters and calls it again.
std::string pass_message(const report::RunRecord& record, const report::CaseResult& pass_case);

// A fuzz or differential pass case belongs to its group (the property, the version); a group has a
// pass case only where none of its cases failed.
std::string group_of(const report::RunRecord& record, const report::CaseResult& c);

// The differential campaign's lines for one version (its verdict and counts, then every
// disagreement and its saved case file); `seconds` where measured.
void print_differential_version(const report::RunSummary& summary, const std::string& version, std::optional<double> seconds);

}  // namespace kvc::cli
