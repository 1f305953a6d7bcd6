// `kvconform merge DIR...`: the report folders of the shards of one run combined into the report
// folder, closing line and exit status of the unsharded run (docs/sharding.md). It reads each
// shard's summary.json with the report module's reader and writes with its writers.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

#include "closing.h"
#include "cli_util.h"
#include "commands.h"
#include "kvconform/report.h"

namespace kvc::cli {

namespace {
namespace fs = std::filesystem;

struct ShardReport {
  std::string dir;
  report::ReadSummary read;
};

ShardReport read_shard(const std::string& dir) {
  const fs::path file = fs::path(dir) / "summary.json";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw std::invalid_argument(dir + ": not a folder");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::invalid_argument(dir + ": no summary.json (not a kvconform report folder)");
  std::ostringstream text;
  text << in.rdbuf();
  ShardReport s{dir, report::read_summary_json(text.str(), file.string())};
  if (s.read.run.record.subcommand.empty())
    throw std::invalid_argument(file.string() +
                                ": no \"run\" record: not the report of a command that shards "
                                "(run, engine, fuzz, fuzz --differential), or written before shards were recorded");
  return s;
}

std::string shard_name(const report::RunRecord& r) { return std::to_string(r.shard_index) + "/" + std::to_string(r.shard_count); }

// Every shard against the first: the fields that say which run a report belongs to.
void check_same_run(const std::vector<ShardReport>& shards) {
  const report::RunSummary& a = shards.front().read.run;
  for (size_t i = 1; i < shards.size(); ++i) {
    const report::RunSummary& b = shards[i].read.run;
    const auto differ = [&](const char* field, const std::string& here, const std::string& there) {
      if (here != there)
        throw std::invalid_argument(shards[i].dir + ": " + field + " differs: \"" + here + "\" here, \"" + there + "\" in " +
                                    shards.front().dir + " (not a shard of the same run)");
    };
    differ("tool_version", b.tool_version, a.tool_version);
    differ("run.build", b.record.build, a.record.build);
    differ("run.subcommand", b.record.subcommand, a.record.subcommand);
    differ("command", b.command, a.command);
    differ("seed", std::to_string(b.seed), std::to_string(a.seed));
    differ("run.shard.count", std::to_string(b.record.shard_count), std::to_string(a.record.shard_count));
    std::vector<std::string> keys_a, keys_b;
    for (const auto& [k, v] : a.record.counters) keys_a.push_back(k);
    for (const auto& [k, v] : b.record.counters) keys_b.push_back(k);
    const auto join = [](const std::vector<std::string>& keys) {
      std::string s;
      for (const std::string& k : keys) s += (s.empty() ? "" : ",") + k;
      return s;
    };
    differ("run.counters (names)", join(keys_b), join(keys_a));
  }
  // Each shard exactly once.
  const int64_t count = a.record.shard_count;
  std::map<int64_t, std::string> seen;
  for (const ShardReport& s : shards) {
    const auto [it, fresh] = seen.emplace(s.read.run.record.shard_index, s.dir);
    if (!fresh)
      throw std::invalid_argument(s.dir + " and " + it->second + " are both shard " + shard_name(s.read.run.record) +
                                  " (a shard given twice)");
  }
  std::string missing;
  for (int64_t i = 0; i < count; ++i)
    if (!seen.count(i)) missing += (missing.empty() ? "" : ", ") + std::to_string(i) + "/" + std::to_string(count);
  if (!missing.empty())
    throw std::invalid_argument("shard " + missing + " missing: " + std::to_string(shards.size()) + " of " +
                                std::to_string(count) + " shards given");
}

report::RunSummary merge(const std::vector<ShardReport>& shards, std::optional<report::Timings>& timings) {
  const report::RunSummary& first = shards.front().read.run;
  report::RunSummary out;
  out.tool_version = first.tool_version;
  out.command = first.command;
  out.seed = first.seed;
  out.record.subcommand = first.record.subcommand;
  out.record.build = first.record.build;
  // Counters summed, files united.
  out.record.counters = first.record.counters;
  for (auto& [key, value] : out.record.counters) value = 0;
  for (const ShardReport& s : shards)
    for (size_t i = 0; i < s.read.run.record.counters.size(); ++i)
      out.record.counters[i].second += s.read.run.record.counters[i].second;
  for (const ShardReport& s : shards)
    out.record.files.insert(out.record.files.end(), s.read.run.record.files.begin(), s.read.run.record.files.end());
  std::sort(out.record.files.begin(), out.record.files.end());
  out.record.files.erase(std::unique(out.record.files.begin(), out.record.files.end()), out.record.files.end());

  // The cases of one place in the run (ordinal >= 0) come from one shard: in ordinal order, ties
  // (a result the run gives no ordinal of its own) in their shard's order.
  struct Placed {
    int64_t ordinal, shard;
    size_t position;
    const report::CaseResult* c;
    double seconds;
  };
  std::vector<Placed> placed;
  const bool all_timed =
      std::all_of(shards.begin(), shards.end(), [](const ShardReport& s) { return s.read.timings.has_value(); });
  std::vector<const report::CaseResult*> pass_templates;  // a campaign's pass case, one per group
  for (const ShardReport& s : shards) {
    const report::RunSummary& run = s.read.run;
    for (size_t i = 0; i < run.cases.size(); ++i) {
      const report::CaseResult& c = run.cases[i];
      const double sec = all_timed && i < s.read.timings->case_seconds.size() ? s.read.timings->case_seconds[i] : -1;
      if (c.ordinal < 0 && (run.record.subcommand == "fuzz" || run.record.subcommand == "differential")) {
        const std::string g = group_of(run.record, c);
        if (std::none_of(pass_templates.begin(), pass_templates.end(),
                         [&](const report::CaseResult* t) { return group_of(run.record, *t) == g; }))
          pass_templates.push_back(&c);
        continue;
      }
      placed.push_back({c.ordinal, run.record.shard_index, i, &c, sec});
    }
  }
  std::stable_sort(placed.begin(), placed.end(), [](const Placed& a, const Placed& b) {
    return a.ordinal != b.ordinal ? a.ordinal < b.ordinal : a.shard != b.shard ? a.shard < b.shard : a.position < b.position;
  });
  std::vector<double> seconds;
  for (const Placed& p : placed) {
    out.cases.push_back(*p.c);
    seconds.push_back(p.seconds);
  }
  // A campaign's pass cases follow its failures, one per group (in counter order) none of whose
  // cases failed in any shard, with the message of the summed counters.
  if (!pass_templates.empty() || out.record.subcommand == "fuzz" || out.record.subcommand == "differential") {
    const std::string prefix = out.record.subcommand == "fuzz" ? "cases/" : "sequences/";
    for (const auto& [key, value] : out.record.counters) {
      if (key.rfind(prefix, 0) != 0) continue;
      const std::string g = key.substr(prefix.size());
      const auto failed = std::any_of(out.cases.begin(), out.cases.end(), [&](const report::CaseResult& c) {
        return c.status == report::Status::Fail && group_of(out.record, c) == g;
      });
      if (failed) continue;
      const auto t = std::find_if(pass_templates.begin(), pass_templates.end(),
                                  [&](const report::CaseResult* c) { return group_of(out.record, *c) == g; });
      if (t == pass_templates.end()) continue;  // every shard failed in it: then so did the merged run
      report::CaseResult pass = **t;
      pass.message = pass_message(out.record, pass);
      out.cases.push_back(pass);
      seconds.push_back(-1);
    }
  }
  if (all_timed) {
    // Shards run side by side: the merged run took as long as its longest shard.
    double total = 0;
    for (const ShardReport& s : shards) total = std::max(total, s.read.timings->total_seconds);
    timings = report::Timings{total, seconds};
  }
  return out;
}
}  // namespace

Runner add_merge_command(CLI::App& app) {
  auto dirs = std::make_shared<std::vector<std::string>>();
  auto report_dir = std::make_shared<std::string>("reports/merged");
  CLI::App* cmd =
      app.add_subcommand("merge",
                         "Combine the report folders of a run's shards into the report, closing line and exit status of the "
                         "unsharded run (docs/sharding.md)");
  cmd->add_option("DIR", *dirs, "A shard's report folder (its --report-dir); every shard of the run, each once")->required();
  cmd->add_option("--report-dir", *report_dir,
                  "Folder for the merged junit.xml, summary.json, summary.md, report.html "
                  "(default reports/merged)");
  return [dirs, report_dir]() -> int {
    std::vector<ShardReport> shards;
    for (const std::string& d : *dirs) shards.push_back(read_shard(d));
    check_same_run(shards);
    std::optional<report::Timings> timings;
    const report::RunSummary merged = merge(shards, timings);
    report::ReportOptions options;
    options.timings = timings;
    report::write_reports(merged, *report_dir, options);
    std::cerr << "reports: " << *report_dir << "/{junit.xml,summary.json,summary.md,report.html} (" << shards.size()
              << " shards merged)\n";
    if (merged.record.subcommand == "differential")
      for (const auto& [key, value] : merged.record.counters)
        if (key.rfind("sequences/", 0) == 0) print_differential_version(merged, key.substr(10), std::nullopt);
    return close_run(merged, recorded_allow_nothing_checked(merged));
  };
}

}  // namespace kvc::cli
