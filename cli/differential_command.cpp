// `kvconform fuzz --differential`: random sequences against the real transformers, per version.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <algorithm>
#include <iostream>

#include "cli_util.h"
#include "closing.h"
#include "commands.h"
#include "kvcgen/differential.h"
#include "kvconform/report.h"

namespace kvc::cli {

namespace fs = std::filesystem;

int run_differential(const DifferentialRequest& req) {
  const fs::path root = fs::weakly_canonical(fs::absolute(req.root));
  const std::vector<std::string> versions = req.versions.empty() ? pinned_versions(root.string()) : req.versions;
  if (versions.empty()) throw std::invalid_argument("no golden/requirements-<version>.txt under " + root.string());
  const bool tty = isatty(STDERR_FILENO);
  // The report (--report-dir): per version one FAIL case per disagreement, in sequence order, and a
  // pass case where none disagreed; the counts are counters that merged shards sum (closing.h).
  report::RunSummary summary;
  summary.tool_version = kToolVersion;
  summary.command = report_command();
  summary.seed = req.seed;
  summary.record.subcommand = "differential";
  summary.record.build = build_id();
  summary.record.shard_index = req.shard_index;
  summary.record.shard_count = req.shard_count;
  for (size_t vi = 0; vi < versions.size(); ++vi) {
    const std::string& v = versions[vi];
    const std::string setup = "bash '" + (root / "golden/setup_env.sh").string() + "' " + v + " >&2";
    if (std::system(setup.c_str()) != 0) throw std::invalid_argument("cannot set up the environment for transformers " + v);
    differential::Options o;
    o.version = v;
    o.python = (root / ("golden/.venv-" + v) / "bin/python").string();
    o.script = (root / "golden/dump.py").string();
    o.seed = req.seed;
    o.iterations = req.iterations;
    o.time_budget_s = req.time_budget_s;
    o.out_dir = req.out_dir;
    o.reference_release = req.reference_release;
    o.mutation = parse_mutation(req.mutant);
    o.shard_index = req.shard_index;
    o.shard_count = req.shard_count;
    o.workers = req.workers > 0 ? req.workers : std::max<int64_t>(1, sysconf(_SC_NPROCESSORS_ONLN));
    if (tty)
      o.progress = [&](int64_t done, int64_t bad) {
        if (done % 50 == 0)
          std::fprintf(stderr, "\r%s: %lld sequences, %lld disagreements", v.c_str(), (long long)done, (long long)bad);
      };
    const differential::Summary s = differential::run(o);
    if (tty) std::fprintf(stderr, "\n");
    // On stderr: the report itself is the same for any worker count.
    std::fprintf(stderr, "%s: %.2f sequences/s with %d dumper workers\n", v.c_str(),
                 static_cast<double>(s.sequences) / std::max(s.seconds, 1e-9), s.workers);
    for (const auto& [field, value] : {std::pair<const char*, int64_t>{"sequences/", s.sequences},
                                       {"steps/", s.steps},
                                       {"disagreements/", s.disagreements},
                                       {"deviations/", s.deviations}})
      summary.record.counters.emplace_back(field + v, value);
    report::CaseResult c = report::named(report::CampaignKey{"differential", ""});
    c.params = "seed=" + std::to_string(req.seed) + (req.reference_release.empty() ? "" : ",reference=" + req.reference_release) +
               (req.mutant == "none" ? "" : ",mutant=" + req.mutant);
    c.backend = "transformers-" + v;
    c.dtype = "mixed";
    for (size_t i = 0; i < s.saved.size(); ++i) {
      report::CaseResult bad = c;
      report::rename(bad, report::CampaignKey{"differential", v + "/" + s.scenarios[i]});
      bad.status = report::Status::Fail;
      bad.message = s.verdicts[i];
      bad.detail = "saved: " + s.saved[i];
      bad.ordinal = static_cast<int64_t>(vi) * req.iterations + s.indices[i];
      summary.cases.push_back(bad);
      summary.record.files.push_back(s.saved[i]);
    }
    if (s.disagreements == 0) {
      report::rename(c, report::CampaignKey{"differential", v});
      c.message = pass_message(summary.record, c);
      summary.cases.push_back(c);
    }
    print_differential_version(summary, v, s.seconds);
  }
  std::sort(summary.record.files.begin(), summary.record.files.end());
  if (!req.report_dir.empty()) {
    report::write_reports(summary, req.report_dir);
    std::cerr << "reports: " << req.report_dir << "/{junit.xml,summary.json,summary.md,report.html}\n";
  }
  return close_run(summary);
}

}  // namespace kvc::cli
