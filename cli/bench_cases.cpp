// `kvconform bench --filter REGEX`: perf mode over the registry. The entries `kvconform run --list
// --filter REGEX` lists (make_run_registry: golden replay, backend suite, properties, found cases),
// each run as `run` runs it, repeated and timed: one line per case id, as test-backend-ops' perf
// mode does for its own test registry.
// No LibTorch in this file.
#include <algorithm>
#include <chrono>
#include <iomanip>
#include <iostream>

#include "cli_util.h"
#include "commands.h"
#include "kvconform/report.h"
#include "registry.h"

namespace kvc::cli {

namespace {
using Clock = std::chrono::steady_clock;

struct Timed {
  std::string id;
  report::Status status = report::Status::Pass;
  std::vector<double> us;  // one wall time per timed run
};

// Runs `once` warmup + repeats times; the status is the last run's (the same every run: seeded).
template <typename F>
Timed timed(const std::string& id, const CasePerfRequest& req, F once) {
  Timed t;
  t.id = id;
  for (int i = 0; i < req.warmup + req.repeats; ++i) {
    const auto t0 = Clock::now();
    t.status = once();
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    if (i >= req.warmup) t.us.push_back(us);
  }
  return t;
}

double quantile(std::vector<double> v, double f) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(f * static_cast<double>(v.size() - 1) + 0.5)];
}
}  // namespace

int run_case_perf(const CasePerfRequest& req, nlohmann::ordered_json* json_out) {
  const Selection selected = Selection::make(req.filter, {}, "", "");  // run's --filter, the same ids
  std::ostream& os = req.quiet_stdout ? std::cerr : std::cout;
  os << std::left << std::setw(72) << "case" << std::right << std::setw(6) << "runs" << std::setw(13) << "median_us"
     << std::setw(11) << "iqr_us"
     << "  status\n";
  std::vector<Timed> all;
  auto print = [&](const Timed& t) {
    os << std::left << std::setw(72) << t.id << std::right << std::setw(6) << t.us.size() << std::setw(13) << std::fixed
       << std::setprecision(1) << quantile(t.us, 0.5) << std::setw(11) << quantile(t.us, 0.75) - quantile(t.us, 0.25) << "  "
       << report::to_string(t.status) << std::endl;  // one line as soon as it is measured
    all.push_back(t);
  };

  // Each chosen entry alone, through the registry's own runner: a case of a batch (golden replay,
  // the backend suite) runs its batch with only itself chosen, so a fixture's load is in its time.
  const std::unique_ptr<RunRegistry> run = make_run_registry(req.fixtures, req.cases, req.seed, req.iterations);
  for (const Chosen& c : run->registry().choose(selected).chosen) {
    const Registry::Plan alone{{c}, 1};
    print(timed(c.entry->id, req, [&] {
      report::Status status = report::Status::Skipped;
      Registry::run(alone, [&](const Chosen&, report::CaseResult r) { status = r.status; });
      return status;
    }));
  }

  if (all.empty())
    throw std::invalid_argument("--filter '" + req.filter + "' matches no case (kvconform run --list shows the ids)");
  if (json_out) {
    nlohmann::ordered_json cases = nlohmann::ordered_json::array();
    for (const Timed& t : all)
      cases.push_back({{"id", t.id},
                       {"runs", t.us.size()},
                       {"median_us", quantile(t.us, 0.5)},
                       {"p25_us", quantile(t.us, 0.25)},
                       {"p75_us", quantile(t.us, 0.75)},
                       {"min_us", quantile(t.us, 0.0)},
                       {"status", report::to_string(t.status)}});
    *json_out = {{"mode", "cases"}, {"filter", req.filter}, {"warmup", req.warmup}, {"repeats", req.repeats}, {"cases", cases}};
  }
  return 0;
}

}  // namespace kvc::cli
