#include "closing.h"

#include <iostream>
#include <vector>

namespace kvc::cli {

namespace {
// The versions of a differential record, in campaign order (its counters sequences/<version>).
std::vector<std::string> differential_versions(const report::RunRecord& record) {
  std::vector<std::string> out;
  for (const auto& [key, value] : record.counters)
    if (key.rfind("sequences/", 0) == 0) out.push_back(key.substr(10));
  return out;
}

// A command-line word of `command` (the recorded command is shell-quoted words joined by spaces).
bool has_word(const std::string& command, const std::string& word) {
  return (" " + command + " ").find(" " + word + " ") != std::string::npos;
}
}  // namespace

bool recorded_allow_nothing_checked(const report::RunSummary& summary) {
  return has_word(summary.command, "--allow-nothing-checked");
}

std::string group_of(const report::RunRecord& record, const report::CaseResult& c) {
  if (record.subcommand == "differential") return c.name.substr(0, c.name.find('/'));
  return c.name;
}

std::string pass_message(const report::RunRecord& record, const report::CaseResult& c) {
  if (record.subcommand == "differential") {
    const std::string v = group_of(record, c);
    return std::to_string(record.counter("sequences/" + v)) + " sequences, " + std::to_string(record.counter("steps/" + v)) +
           " steps, 0 disagreements, " + std::to_string(record.counter("deviations/" + v)) + " upstream deviations reproduced";
  }
  return std::to_string(record.counter("cases/" + c.name)) + " cases";
}

void print_differential_version(const report::RunSummary& summary, const std::string& v, std::optional<double> seconds) {
  const report::RunRecord& r = summary.record;
  const int64_t disagreements = r.counter("disagreements/" + v);
  std::cout << "differential(transformers=" << v << ",seed=" << summary.seed
            << (r.shard_count > 1 ? ",shard=" + std::to_string(r.shard_index) + "/" + std::to_string(r.shard_count) : "")
            << "): " << (disagreements ? "FAIL" : "OK") << " (" << r.counter("sequences/" + v) << " sequences, "
            << r.counter("steps/" + v) << " steps, " << disagreements << " disagreements, " << r.counter("deviations/" + v)
            << " upstream deviations reproduced";
  if (seconds) std::cout << ", " << static_cast<int64_t>(*seconds) << " s";
  std::cout << ")\n";
  for (const report::CaseResult& c : summary.cases) {
    if (c.status != report::Status::Fail || group_of(r, c) != v) continue;
    const std::string scenario = c.name.substr(v.size() + 1);
    std::cout << "  " << scenario << ": " << c.message << "\n  " << c.detail << "\n";
  }
}

int close_run(const report::RunSummary& summary, bool allow_nothing_checked) {
  const report::RunRecord& record = summary.record;
  const int failed = summary.count(report::Status::Fail), skipped = summary.count(report::Status::Skipped),
            deviations = summary.count(report::Status::Deviation);
  const int passed = static_cast<int>(summary.cases.size()) - failed - skipped;  // deviations count as checked
  if (record.subcommand == "fuzz") {
    std::cout << "fuzz: " << record.counter("rounds") << " rounds, " << record.counter("cases") << " cases, " << failed
              << " failures";
    if (!record.files.empty())
      std::cout << ", " << record.files.size() << " case files in "
                << record.files.front().substr(0, record.files.front().find_last_of('/'));
    std::cout << "\n";
    return failed == 0 ? 0 : 1;
  }
  if (record.subcommand == "differential") {
    // The live campaign prints each version as it finishes; merged shards print them all here.
    int64_t disagreements = 0;
    for (const std::string& v : differential_versions(record)) disagreements += record.counter("disagreements/" + v);
    return disagreements == 0 ? 0 : 1;
  }
  std::cout << passed << " passed, " << failed << " failed, " << skipped << " skipped";
  // An engine's deviations are its expectations' expected failures; `run`'s are upstream's own
  // (transformers breaking its rule) or, given --expectations, the implementation's expected failures.
  int expected = 0;
  for (const report::CaseResult& c : summary.cases) expected += c.expectation.outcome == "expected_failure";
  if (deviations && record.subcommand == "engine") {
    std::cout << " (" << deviations << " known engine deviations)";
  } else if (deviations) {
    const int upstream = deviations - expected;
    std::cout << " (";
    if (upstream) std::cout << upstream << " upstream deviations reproduced" << (expected ? ", " : "");
    if (expected) std::cout << expected << " expected failure" << (expected == 1 ? "" : "s");
    std::cout << ")";
  }
  std::cout << "\n";
  if (failed) return 1;
  if (passed > 0) return 0;
  if (record.subcommand == "engine") {
    std::cerr << "engine: nothing was checked (every case SKIP or none selected): not a pass\n";
    return 1;
  }
  if (allow_nothing_checked) return 0;
  std::cout << "nothing was checked: every one of the " << skipped
            << " selected cases was skipped (see their reasons above); --allow-nothing-checked accepts that\n";
  return 1;
}

}  // namespace kvc::cli
