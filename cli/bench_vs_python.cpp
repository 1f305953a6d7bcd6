// `kvconform bench --vs-python`: the same random traces through golden/dump.py's per-case work in
// the real transformers (golden/bench_dump.py times only that) and through the C++ harness: golden
// replay (the LibTorch reference run and its comparison with the Python fixture) and the
// row / size / mask properties on the fast engine. Prints traces per second for each and the ratio,
// then the differential fuzzer's sequences per second with its dumper pool.
// No LibTorch in this file (the caller pins ATen to one thread, as the dumper pins torch).
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "commands.h"
#include "kvconform/behaviours.h"
#include "kvcgen/campaign.h"
#include "kvconform/cases.h"
#include "kvcgen/corpus.h"
#include "kvcgen/differential.h"
#include "kvconform/golden.h"

namespace kvc::cli {

namespace fs = std::filesystem;

namespace {
// CPU seconds of this process: on a machine shared with other jobs, wall time measures the load.
double cpu_now() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

std::string rate(double traces_per_s) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(traces_per_s < 100 ? 1 : 0) << traces_per_s;
  return os.str();
}

// Repeats `one_pass` over all traces until at least `min_s` CPU seconds passed; traces per CPU second.
template <typename F>
double timed_rate(size_t traces, double min_s, F one_pass) {
  size_t done = 0;
  const double t0 = cpu_now();
  do {
    one_pass();
    done += traces;
  } while (cpu_now() - t0 < min_s);
  return static_cast<double>(done) / (cpu_now() - t0);
}
}  // namespace

int run_vs_python(const VsPythonRequest& req, nlohmann::ordered_json* json_out) {
  const fs::path root = fs::weakly_canonical(fs::absolute(req.root));
  std::string version = req.version;
  if (version.empty()) {
    const std::vector<std::string> pinned = pinned_versions(root.string());
    if (pinned.empty()) throw std::invalid_argument("no golden/requirements-<version>.txt under " + root.string());
    version = pinned.back();
  }
  const fs::path python = root / ("golden/.venv-" + version) / "bin/python";
  if (!fs::exists(python))
    throw std::invalid_argument(python.string() + " is missing: run `bash golden/setup_env.sh " + version + "` first");
  const Behaviours behaviours = behaviours_for_release(version);

  // The traces: the differential fuzzer's generator (corpus.h), the same for both sides.
  std::vector<nlohmann::ordered_json> scenarios;
  std::vector<Scenario> parsed;
  for (int64_t i = 0; i < req.traces; ++i) {
    scenarios.push_back(corpus::draw(req.seed, static_cast<uint64_t>(i), "bench_" + std::to_string(i)));
    parsed.push_back(cases::parse_case(scenarios.back().dump(), "bench trace " + std::to_string(i)));
  }

  // Python: one process over every trace; it reports the seconds spent in dump_case only.
  const fs::path dir = fs::temp_directory_path() / ("kvc-bench-" + std::to_string(getpid()));
  fs::create_directories(dir);
  {
    std::ofstream in(dir / "cases.jsonl");
    for (const auto& s : scenarios) in << s.dump() << "\n";
  }
  std::cerr << "vs-python: " << req.traces << " traces through transformers " << version << " (golden/bench_dump.py)...\n";
  const std::string cmd = "'" + python.string() + "' '" + (root / "golden/bench_dump.py").string() + "' --repeat " +
                          std::to_string(req.python_repeats) + " < '" + (dir / "cases.jsonl").string() + "' > '" +
                          (dir / "fixtures.jsonl").string() + "'";
  if (std::system(cmd.c_str()) != 0) {
    fs::remove_all(dir);
    throw std::runtime_error("golden/bench_dump.py failed (command: " + cmd + ")");
  }
  std::vector<nlohmann::json> fixtures;
  double py_seconds = 0, py_wall = 0;
  int64_t py_traces = 0;  // every timed dump_case: traces x --python-repeats
  {
    std::ifstream out(dir / "fixtures.jsonl");
    for (std::string line; std::getline(out, line);) {
      nlohmann::json j = nlohmann::json::parse(line);
      if (j.contains("bench")) {
        py_seconds = j["bench"]["cpu_seconds"].get<double>();
        py_wall = j["bench"]["seconds"].get<double>();
        py_traces = j["bench"]["traces"].get<int64_t>();
      } else fixtures.push_back(std::move(j));
    }
  }
  fs::remove_all(dir);
  if (fixtures.size() != parsed.size() || py_traces != static_cast<int64_t>(parsed.size()) * req.python_repeats)
    throw std::runtime_error("golden/bench_dump.py returned " + std::to_string(fixtures.size()) + " fixtures for " +
                             std::to_string(parsed.size()) + " traces");
  const double py_rate = static_cast<double>(py_traces) / std::max(py_seconds, 1e-9);

  // C++ golden replay: the reference run of each trace compared with transformers' fixture.
  int64_t failed = 0;
  const double replay_rate = timed_rate(parsed.size(), req.min_seconds, [&] {
    failed = 0;
    for (size_t i = 0; i < parsed.size(); ++i)
      failed += golden::check(fixtures[i], parsed[i], behaviours).status == report::Status::Fail;
  });

  // The fast engine's properties on the very same traces (every layer, every update).
  std::vector<campaign::FastTrace> traces;
  for (const Scenario& c : parsed) {
    campaign::FastTrace t;
    for (size_t l = 0; l < c.layer_types.size(); ++l) t.layers.push_back(c.layer_spec(l));
    t.batch = c.batch;
    t.left_padding = c.left_padding;
    for (const Step& s : c.steps) t.steps.push_back(s.tokens);
    traces.push_back(std::move(t));
  }
  struct Row {
    std::string what;
    double cpp;
  };
  std::vector<Row> rows{{"golden replay (reference + compare)", replay_rate}};
  int64_t fast_failed = 0;
  for (campaign::Property p : campaign::all_properties()) {
    if (!campaign::has_fast_path(p)) continue;
    const double r = timed_rate(traces.size(), req.min_seconds, [&] {
      for (const campaign::FastTrace& t : traces) fast_failed += !campaign::check_fast(p, t).empty();
    });
    rows.push_back({std::string(campaign::to_string(p)) + " (fast engine)", r});
  }

  std::ostream& os = std::cout;
  os << "C++ vs Python on the same " << parsed.size() << " traces (transformers " << version
     << "; per-trace work only, one thread each; traces per CPU second)\n";
  os << "  python golden/dump.py dump_case      " << std::setw(10) << rate(py_rate) << " traces/s  (" << std::fixed
     << std::setprecision(2) << py_seconds << " CPU s, " << py_wall << " s wall, " << req.python_repeats
     << (req.python_repeats == 1 ? " pass)\n" : " passes)\n");
  nlohmann::ordered_json jrows = nlohmann::ordered_json::array();
  for (const Row& r : rows) {
    os << "  " << std::left << std::setw(36) << r.what << std::right << std::setw(10) << rate(r.cpp) << " traces/s  "
       << std::setw(8) << std::setprecision(1) << r.cpp / py_rate << "x python\n";
    jrows.push_back({{"what", r.what}, {"traces_per_second", r.cpp}, {"ratio", r.cpp / py_rate}});
  }

  // The fast campaign's own random traces (what `kvconform run` checks for these properties).
  for (campaign::Property p : campaign::all_properties()) {
    if (!campaign::has_fast_path(p)) continue;
    campaign::Options o;
    o.iterations = static_cast<int>(req.campaign_traces);
    o.trace_engine = campaign::TraceEngineKind::Fast;
    const double t0 = cpu_now();
    const campaign::Outcome out = campaign::run(p, o);
    const double s = cpu_now() - t0;
    os << "  campaign " << std::left << std::setw(27) << campaign::to_string(p) << std::right << std::setw(10)
       << rate(out.cases / std::max(s, 1e-9)) << " traces/s  (" << out.cases << " random traces, " << out.observations.steps
       << " layer steps, " << (out.ok ? "ok" : "FAIL") << ")\n";
    jrows.push_back({{"what", std::string("campaign ") + campaign::to_string(p)},
                     {"traces_per_second", out.cases / std::max(s, 1e-9)},
                     {"ok", out.ok}});
    fast_failed += !out.ok;
  }
  // Differential fuzzing (fuzz --differential): dumper processes in parallel, each sequence through
  // the real transformers and the C++ reference. Wall clock, dumper start-up included: that is what
  // a campaign costs, and the workers' point is to use every core.
  int64_t disagreements = 0;
  if (req.differential_sequences > 0) {
    differential::Options d;
    d.version = version;
    d.python = python.string();
    d.script = (root / "golden/dump.py").string();
    d.seed = req.seed;
    d.iterations = req.differential_sequences;
    d.workers = req.workers > 0 ? req.workers : std::max<int64_t>(1, sysconf(_SC_NPROCESSORS_ONLN));
    d.out_dir = (fs::temp_directory_path() / ("kvc-bench-diff-" + std::to_string(getpid()))).string();
    const differential::Summary ds = differential::run(d);
    fs::remove_all(d.out_dir);
    disagreements = ds.disagreements;
    const double seq_rate = static_cast<double>(ds.sequences) / std::max(ds.seconds, 1e-9);
    os << "  differential, " << ds.workers << " dumper workers " << std::setw(13) << rate(seq_rate) << " sequences/s  ("
       << ds.sequences << " sequences, " << std::fixed << std::setprecision(1) << ds.seconds
       << " s wall including the dumpers' start, " << ds.disagreements << " disagreements)\n";
    jrows.push_back({{"what", "differential"},
                     {"workers", ds.workers},
                     {"sequences", ds.sequences},
                     {"sequences_per_second", seq_rate},
                     {"disagreements", ds.disagreements}});
  }
  if (failed || fast_failed || disagreements)
    os << "  " << failed << " golden disagreements, " << fast_failed << " fast-engine failures, " << disagreements
       << " differential disagreements\n";
  if (json_out)
    *json_out = {{"version", version},
                 {"traces", parsed.size()},
                 {"python_repeats", req.python_repeats},
                 {"python_timed_traces", py_traces},
                 {"python_traces_per_second", py_rate},
                 {"python_cpu_seconds", py_seconds},
                 {"python_wall_seconds", py_wall},
                 {"clock", "process CPU time"},
                 {"cpp", jrows},
                 {"golden_disagreements", failed}};
  return failed || fast_failed || disagreements ? 1 : 0;
}

}  // namespace kvc::cli
