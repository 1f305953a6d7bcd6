// The kvconform binary as CI runs it: exit codes (0 pass, 1 fail, 2 bad usage or input), report
// files, fuzz case files and sharding, bench JSON.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "build_paths.h"
#include "kvconform/regex.h"
#include "scratch_dir.h"
#include "target_files.h"

namespace {

namespace fs = std::filesystem;

const std::string kSourceDir = kvc::paths::source_dir();
const std::string kBinary = kvc::paths::target_file("kvconform");
const std::string kCaseResult = kvc::paths::target_file("kvc-case-result");

struct Result {
  int code = -1;
  std::string out;
  std::string stdout_only;
};

fs::path scratch_root() { return kvc::testing::scratch_root("kvc_cli_test_"); }

fs::path scratch(const std::string& name) {
  const fs::path d = scratch_root() / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

// Runs `env kvconform args` with stdout captured (stderr to a file too: not a terminal).
Result kvconform(const std::string& args, const std::string& env = "") {
  const fs::path dir = scratch("io");
  const std::string cmd = env + (env.empty() ? "" : " ") + "'" + kBinary + "' " + args + " >'" + (dir / "out").string() +
                          "' 2>'" + (dir / "err").string() + "'";
  const int status = std::system(cmd.c_str());
  Result r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.stdout_only = slurp(dir / "out");
  r.out = r.stdout_only + slurp(dir / "err");
  return r;
}

TEST(Cli, HelpOnEverySubcommand) {
  for (const char* sub : {"", "run", "fuzz", "bench", "replay", "explain", "golden"}) {
    const Result r = kvconform(std::string(sub) + " --help");
    EXPECT_EQ(r.code, 0) << sub << "\n" << r.out;
    EXPECT_NE(r.out.find("Usage:"), std::string::npos) << sub;
  }
}

// One version number (the repository's VERSION file): `kvconform --version` prints it with the build id
// and the golden fixtures' releases; every report records it as tool_version.
TEST(Cli, VersionComesFromTheVersionFileAndNamesTheFixtureReleases) {
  std::string version = slurp(fs::path(kSourceDir) / "VERSION");
  version.erase(version.find_last_not_of(" \n") + 1);
  const Result r = kvconform("--version");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.stdout_only.substr(0, r.stdout_only.find('\n')), "kvconform " + version) << r.out;
  EXPECT_NE(r.stdout_only.find("\nbuild "), std::string::npos) << r.out;
  for (const auto& entry : fs::directory_iterator(fs::path(kSourceDir) / "golden" / "fixtures"))
    if (entry.is_directory()) EXPECT_NE(r.stdout_only.find(entry.path().filename().string()), std::string::npos) << r.out;
  const fs::path dir = scratch("version-report");
  ASSERT_EQ(kvconform("run --golden-only --filter 'decode_across_boundary' --report-dir '" + dir.string() + "'").code, 0);
  EXPECT_NE(slurp(dir / "summary.json").find("\"tool_version\": \"kvconform " + version + "\""), std::string::npos);
}

// The row / size / mask properties run on the fast engine unless told otherwise; both engines pass
// and the reproduce command keeps an explicit engine.
TEST(Cli, EngineOfTheRowProperties) {
  const Result fast = kvconform("run --properties-only --property 'rows$' --iterations 50 --no-report");
  EXPECT_EQ(fast.code, 0) << fast.out;
  EXPECT_NE(fast.out.find("stored_rows(seed=20250917,iterations=50,trace_engine=fast): OK"), std::string::npos) << fast.out;
  const Result tensor =
      kvconform("run --properties-only --property 'rows$' --iterations 5 --no-report", "KVC_TRACE_ENGINE=tensor");
  EXPECT_EQ(tensor.code, 0) << tensor.out;
  EXPECT_NE(tensor.out.find("stored_rows(seed=20250917,iterations=5): OK"), std::string::npos) << tensor.out;
  const Result caught =
      kvconform("run --properties-only --property '^stored_rows$' --mutant capacity_max --trace-engine tensor --no-report");
  EXPECT_EQ(caught.code, 1) << caught.out;
  EXPECT_NE(caught.out.find("--trace-engine tensor"), std::string::npos) << caught.out;
}

// Both engines are implementations of one interface: the trace a reproduce string names runs on
// either engine, for the same property (its independent rule must agree) and for a value property
// the fast engine does not have; the fast engine's old "fast:" spelling names the same trace.
TEST(Cli, AReproduceStringRunsOnBothEngines) {
  const Result fast = kvconform("run --properties-only --property '^window_coverage$' --mutant window_off_by_one+1 --no-report");
  ASSERT_EQ(fast.code, 1) << fast.out;
  const kvc::Regex repro("--reproduce '(trace:[0-9]+:[0-9]+:[0-9]+)'");
  kvc::RegexMatch m;
  ASSERT_TRUE(repro.search(fast.out, m)) << fast.out;
  const std::string string = m.str(1);
  const auto first_line = [](const std::string& out) { return out.substr(0, out.find('\n')); };
  const auto verdict = [&](const std::string& out) {  // the FAIL line from the message on
    const std::string line = first_line(out);
    return line.substr(line.find(": FAIL "));
  };
  const std::string base = "run --properties-only --no-report --mutant window_off_by_one+1 --reproduce '" + string + "'";
  const Result tensor = kvconform(base + " --property '^window_coverage$' --trace-engine tensor");
  EXPECT_EQ(tensor.code, 1) << tensor.out;
  EXPECT_NE(tensor.out.find("(tensor engine)"), std::string::npos) << tensor.out;
  EXPECT_EQ(verdict(tensor.out).substr(0, 60), verdict(fast.out).substr(0, 60)) << tensor.out;
  const Result value = kvconform(base + " --property '^attention_vs_oracle$'");
  EXPECT_EQ(value.code, 1) << value.out;
  EXPECT_NE(value.out.find("differs from the oracle"), std::string::npos) << value.out;
  EXPECT_NE(value.out.find("--reproduce '" + string + "'"), std::string::npos) << value.out;
  // Without the mutant the same trace holds on the tensor engine.
  const Result good = kvconform(
      "run --properties-only --no-report --property '^window_coverage$' --trace-engine tensor --reproduce '" + string + "'");
  EXPECT_EQ(good.code, 0) << good.out;
  const std::string old_spelling = "fast:" + string.substr(std::string("trace:").size());
  const Result old =
      kvconform("run --properties-only --no-report --mutant window_off_by_one+1 --property '^window_coverage$' --reproduce '" +
                old_spelling + "'");
  EXPECT_EQ(old.code, 1) << old.out;
  EXPECT_EQ(verdict(old.out).substr(0, 60), verdict(fast.out).substr(0, 60)) << old.out;
}

// ctest's case/<id> tests (discover_cases.cmake.in): one batch process records every case in its own
// file, named by SHA-256 of the id as CMake's string(SHA256) names it, and kvc-case-result judges one
// file as a single-case run would: a FAIL is that case's failing test, with its line and reproduce
// line; a case the batch never reached fails too, and a result left by an earlier run never passes.
// One name per concept: the old spellings still work for one release, each saying its new name on
// stderr, and an old spelling beside its new one is bad usage.
TEST(Cli, OldSpellingsStillWorkAndSayTheirNewName) {
  const std::string props = "run --properties-only --property '^stored_rows$' --iterations 5 --no-report";
  const Result now = kvconform(props + " --trace-engine fast"), old = kvconform(props + " --engine fast");
  EXPECT_EQ(old.code, 0) << old.out;
  EXPECT_EQ(old.stdout_only, now.stdout_only);
  EXPECT_NE(old.out.find("kvconform run: --engine is now --trace-engine"), std::string::npos) << old.out;
  EXPECT_EQ(now.out.find("is now"), std::string::npos) << now.out;
  const Result env = kvconform(props, "KVC_ENGINE=tensor"), env_now = kvconform(props, "KVC_TRACE_ENGINE=tensor");
  EXPECT_EQ(env.stdout_only, env_now.stdout_only);
  EXPECT_EQ(kvconform(props + " --trace-engine fast --engine fast").code, 2);
  const std::string c = kSourceDir + "/cases/tf_hybrid_cache.json";
  const Result replay = kvconform("replay " + c + " --json --version 4.57.6");
  EXPECT_EQ(replay.code, 0) << replay.out;
  EXPECT_NE(replay.out.find("kvconform replay: --version is now --release"), std::string::npos) << replay.out;
}

TEST(Cli, CaseResultsGiveEachCaseItsOwnVerdict) {
  const fs::path dir = scratch("case-results");
  std::ofstream(dir / "0000000000000000.case") << "OK\nstale result of an earlier run\n";
  const std::string select = "run --no-report --suite backend --filter '^backend/decode_across_window/static/eager/'";
  const Result listed = kvconform(select + " --list");
  ASSERT_EQ(listed.code, 0) << listed.out;
  std::vector<std::string> ids;
  std::istringstream lines(listed.stdout_only);
  for (std::string id; std::getline(lines, id);) ids.push_back(id);
  ASSERT_EQ(ids.size(), 4u) << listed.out;
  const auto judge = [](const fs::path& file) {
    const fs::path out = scratch_root() / "judge.out";
    const int status =
        std::system(("'" + kCaseResult + "' '" + file.string() + "' case_batch/backend >'" + out.string() + "' 2>&1").c_str());
    return Result{WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), ""};
  };
  const auto file_of = [&](const std::string& id) {
    const fs::path out = scratch_root() / "sha.out";
    std::system(("printf %s '" + id + "' | sha256sum | cut -c1-16 >'" + out.string() + "'").c_str());
    std::string hash = slurp(out);
    return dir / (hash.substr(0, hash.find('\n')) + ".case");
  };
  for (const char* mutant : {"none", "kv_offset_too_small"}) {
    const bool wrong = std::string(mutant) != "none";
    const Result run = kvconform(select + " --mutant " + mutant + " --case-results '" + dir.string() + "'");
    EXPECT_EQ(run.code, wrong ? 1 : 0) << run.out;
    EXPECT_FALSE(fs::exists(dir / "0000000000000000.case")) << "an earlier run's result survived";
    size_t files = 0;
    for (const auto& e : fs::directory_iterator(dir)) files += e.path().extension() == ".case";
    EXPECT_EQ(files, ids.size());
    for (const std::string& id : ids) {
      const Result r = judge(file_of(id));
      EXPECT_EQ(r.code, wrong ? 1 : 0) << id << "\n" << r.out;
      EXPECT_EQ(r.out.rfind(id + "(", 0), 0u) << r.out;
      EXPECT_NE(r.out.find(wrong ? ": FAIL " : ": OK"), std::string::npos) << r.out;
      if (wrong) EXPECT_NE(r.out.find("  reproduce: "), std::string::npos) << r.out;
    }
  }
  const Result missing = judge(dir / "ffffffffffffffff.case");
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.out.find("no result recorded for this case: the batch test case_batch/backend"), std::string::npos)
      << missing.out;
}

TEST(Cli, BadUsageExitsTwo) {
  for (const std::string& args : std::vector<std::string>{
           "",
           "nosuchcommand",
           "run --no-such-flag",
           "run --dtype float8",
           "run --property 'zzz'",
           "run --no-report --report-dir x",
           "run --properties-only --reproduce B0gclRXd",
           "engine --reproduce B0gclRXd",
           "fuzz --shard 2/2",
           "fuzz --shard x",
           "fuzz --shard 1/0",
           "fuzz --iterations 10 --time-budget 5",
           "fuzz --iterations 0",
           "fuzz --mutant nosuch",
           "fuzz --property '('",
           "bench --windows 0",
           "bench --dtype int8",
           "bench --kinds static_diagonal",
           "bench --backends flash",
           "bench --quick --kv-heads 3",
           "replay",
           "replay /nonexistent/case.json",
           "explain " + kSourceDir + "/cases/tf_hybrid_cache.json",
           "explain " + kSourceDir + "/cases/tf_hybrid_cache.json --step 99",
           "explain /nonexistent/case.json --step 0",
           "run --fixtures /nonexistent --golden-only",
           "run --golden-only --case '^no_such_case$' --fixtures " + kSourceDir + "/golden/fixtures --cases " + kSourceDir +
               "/cases",
           "run --plugin /nonexistent.so",
           "run --device tpu",
           "run --backend '^none$' --case '^x$' --fixtures " + kSourceDir + "/golden/fixtures --cases " + kSourceDir + "/cases",
           "golden --version 9.9 --root " + kSourceDir,
           "golden --generate-corpus 0",
           "golden --root /nonexistent",
           "fuzz --release 5.24.0",
           "fuzz --differential --version 9.9 --root-is-not-an-option",
           "run --properties-only --trace-engine warp",
           "run --properties-only --trace-engine fast",
           "run --properties-only --property '^attention' --trace-engine fast"}) {
    const Result r = kvconform(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
  }
  // Half of GoogleTest's sharding pair is a usage error too.
  EXPECT_EQ(kvconform("fuzz --iterations 10", "GTEST_TOTAL_SHARDS=2").code, 2);
}

// A malformed fixture is one line naming the file and the JSON pointer, exit 2, and no report.
TEST(Cli, MalformedFixtureExitsTwoNamingTheFile) {
  const fs::path dir = scratch("bad_fixture");
  fs::create_directories(dir / "fixtures/5.24.0");
  fs::create_directories(dir / "cases");
  fs::copy_file(kSourceDir + "/cases/tf_hybrid_cache.json", dir / "cases/tf_hybrid_cache.json");
  std::ofstream(dir / "fixtures/5.24.0/manifest.json") << R"({"cases": {"tf_hybrid_cache": {}}})";
  std::ofstream(dir / "fixtures/5.24.0/tf_hybrid_cache.json") << "{ truncated";
  const Result r = kvconform("run --golden-only --fixtures '" + (dir / "fixtures").string() + "' --cases '" +
                             (dir / "cases").string() + "' --report-dir '" + (dir / "reports").string() + "'");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("fixtures/5.24.0/tf_hybrid_cache.json: /: invalid JSON"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir / "reports"));
}

TEST(Cli, RunWritesDeterministicReports) {
  const fs::path dir = scratch("reports");
  const std::string args = "run --properties-only --iterations 5 --property stored_rows --report-dir '" + dir.string() + "'";
  ASSERT_EQ(kvconform(args).code, 0);
  std::map<std::string, std::string> first;
  for (const char* f : {"junit.xml", "summary.json", "summary.md", "report.html"}) {
    ASSERT_TRUE(fs::exists(dir / f)) << f;
    first[f] = slurp(dir / f);
  }
  ASSERT_EQ(kvconform(args).code, 0);
  for (const auto& [f, text] : first) EXPECT_EQ(slurp(dir / f), text) << f << " differs between identical runs";
  const auto j = nlohmann::json::parse(first["summary.json"]);
  EXPECT_EQ(j["totals"]["passed"], 1);
  EXPECT_EQ(j["cases"][0]["suite"], "property");
  EXPECT_EQ(j["cases"][0]["backend"], "reference");
  EXPECT_EQ(j["cases"][0]["dtype"], "mixed");
}

// Every result records the policy it was judged by and its bound (tolerance.h), per suite: golden
// replay against fixtures from this torch bitwise, the backend suite by FlashAttention's rule with
// a bound that grows with the dtype's epsilon, the row properties bitwise, layer agreement exact in
// float64. The JSON carries both; the Markdown shows them.
TEST(Cli, EveryResultNamesItsPolicyAndBound) {
  const fs::path dir = scratch("policies");
  const Result r = kvconform("run --iterations 3 --report-dir '" + dir.string() + "' --fixtures " + kSourceDir +
                             "/golden/fixtures --cases " + kSourceDir +
                             "/cases --filter "
                             "'^(golden/5\\.24\\.0/tf_hybrid_cache|backend/chunked_left_padding/static/eager/float(32|16)|"
                             "property/(stored_rows|layer_agreement|backends_vs_oracle))$'");
  ASSERT_EQ(r.code, 0) << r.out.substr(0, 2000);
  const auto j = nlohmann::json::parse(slurp(dir / "summary.json"));
  std::map<std::string, nlohmann::json> by_id;
  for (const auto& c : j["cases"]) by_id[c["id"].get<std::string>()] = c;
  ASSERT_EQ(by_id.size(), 6u) << j.dump().substr(0, 2000);
  auto policy = [&](const std::string& id) { return by_id.at(id).at("policy").get<std::string>(); };
  auto bound = [&](const std::string& id) { return by_id.at(id).at("bound"); };
  EXPECT_EQ(policy("golden/5.24.0/tf_hybrid_cache"), "bitwise");
  EXPECT_EQ(bound("golden/5.24.0/tf_hybrid_cache"), 0.0);
  const std::string f32 = "backend/chunked_left_padding/static/eager/float32",
                    f16 = "backend/chunked_left_padding/static/eager/float16";
  EXPECT_EQ(policy(f32), "same-dtype-reference");
  EXPECT_EQ(policy(f16), "same-dtype-reference");
  EXPECT_GT(bound(f32).get<double>(), 0.0);
  EXPECT_GT(bound(f16).get<double>(), 100 * bound(f32).get<double>());  // float16's epsilon is 8192x float32's
  EXPECT_EQ(policy("property/stored_rows"), "bitwise");
  EXPECT_EQ(bound("property/stored_rows"), 0.0);
  EXPECT_EQ(policy("property/layer_agreement"), "exact-float64");
  EXPECT_GT(bound("property/layer_agreement").get<double>(), 0.0);
  EXPECT_LT(bound("property/layer_agreement").get<double>(), 1e-6);
  EXPECT_EQ(policy("property/backends_vs_oracle"), "same-dtype-reference");  // bound per case: none overall
  const std::string md = slurp(dir / "summary.md");
  EXPECT_NE(md.find("same-dtype-reference"), std::string::npos);
  EXPECT_NE(md.find("exact-float64"), std::string::npos);
}

// A failure inside a case is that case's FAIL: with a mutant of the reference, golden replay and the
// backend suite (not only the properties) report FAIL lines naming the step, the run finishes, writes
// its reports and exits 1. dynamic_keeps_window makes update return rows the mask does not cover,
// which used to end the run with a LibTorch stack trace. One release's fixtures, one backend case
// family and one property: every suite, in the default run's order (36.9 s of CPU for all of them,
// 3.4 s for these).
TEST(Cli, MutantFailsEverySuiteAndTheRunGoesOn) {
  const fs::path dir = scratch("mutant_everywhere");
  const Result r = kvconform(
      "run --iterations 5 --mutant dynamic_keeps_window --filter "
      "'^(golden/5\\.24\\.0/|backend/decode_across_window/dynamic/|property/stored_rows$)' --report-dir '" +
      dir.string() + "' --fixtures " + kSourceDir + "/golden/fixtures --cases " + kSourceDir + "/cases");
  EXPECT_EQ(r.code, 1) << r.out.substr(0, 3000);
  EXPECT_TRUE(kvc::Regex("golden/[0-9.]+/[a-z0-9_]+\\([^)]*\\): FAIL step [0-9]+").search(r.out)) << r.out.substr(0, 3000);
  EXPECT_TRUE(kvc::Regex("backend/[a-z_]+/dynamic/[a-z_]+/[a-z0-9]+\\(.*\\): FAIL").search(r.out)) << r.out.substr(0, 3000);
  EXPECT_NE(r.out.find("property/stored_rows(seed="), std::string::npos);  // the properties still ran after both
  for (const char* f : {"junit.xml", "summary.json", "summary.md", "report.html"}) EXPECT_TRUE(fs::exists(dir / f)) << f;
}

// SKIP is never a pass: a run whose every selected case was skipped (here the backend suite on CUDA
// with a CPU-only LibTorch) exits 1 and says so, unless --allow-nothing-checked.
// The registry: --list prints exactly the ids a --filter run then runs, one line per case, across
// suites; a filter that matches nothing is bad usage.
TEST(Cli, ListPrintsExactlyTheIdsFilterRuns) {
  const std::string filter =
      "--filter '^(golden/5\\.24\\.0/tf_hybrid|backend/chunked_left_padding/static/(eager|windowed)/|property/stored_rows$)' "
      "--iterations 5 --cases " +
      kSourceDir + "/cases --fixtures " + kSourceDir + "/golden/fixtures";
  const Result listed = kvconform("run --list " + filter);
  ASSERT_EQ(listed.code, 0) << listed.out;
  std::set<std::string> ids;
  std::istringstream lines(listed.stdout_only);
  for (std::string line; std::getline(lines, line);) ids.insert(line);
  EXPECT_EQ(ids.size(), 6u + 8u + 1u) << listed.stdout_only;  // 6 tf_hybrid fixtures, 2 backends x 4 dtypes, 1 property
  const Result ran = kvconform("run --no-report " + filter);
  ASSERT_EQ(ran.code, 0) << ran.out;
  std::set<std::string> run_ids;
  std::istringstream out(ran.stdout_only);
  for (std::string line; std::getline(out, line);)
    if (line.find("): ") != std::string::npos) run_ids.insert(line.substr(0, line.find('(')));
  EXPECT_EQ(run_ids, ids);
  EXPECT_EQ(kvconform("run --list --filter '^nothing/'").code, 2);
}

// The registry drives --list, --filter and --shard alike: every mode is a loop over one list of
// cases. The ids are stable (two listings are the same bytes) and unique; --filter R lists exactly
// the listed ids R matches, in list order; shard i/n lists exactly the cases k % n == i of the
// selection, in order (so the shards together are the list, each id once), for `run` and `engine`.
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

void expect_registry_loops(const std::string& list_command, const std::string& filter, const std::string& cd = "") {
  const Result all = kvconform(list_command, cd);
  ASSERT_EQ(all.code, 0) << all.out;
  EXPECT_EQ(kvconform(list_command, cd).stdout_only, all.stdout_only) << "the ids are not stable";
  const std::vector<std::string> ids = lines_of(all.stdout_only);
  ASSERT_GT(ids.size(), 10u);
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(), ids.size()) << "an id listed twice";
  std::vector<std::string> matching;
  for (const std::string& id : ids)
    if (kvc::Regex(filter).search(id)) matching.push_back(id);
  ASSERT_GT(matching.size(), 2u);
  ASSERT_LT(matching.size(), ids.size());
  const Result filtered = kvconform(list_command + " --filter '" + filter + "'", cd);
  ASSERT_EQ(filtered.code, 0) << filtered.out;
  EXPECT_EQ(lines_of(filtered.stdout_only), matching);
  for (const auto& [selection, flags] : {std::pair{ids, std::string()}, std::pair{matching, " --filter '" + filter + "'"}})
    for (size_t n : {2u, 3u, 7u}) {
      for (size_t i = 0; i < n; ++i) {
        std::vector<std::string> want;
        for (size_t k = i; k < selection.size(); k += n) want.push_back(selection[k]);
        const Result shard = kvconform(list_command + flags + " --shard " + std::to_string(i) + "/" + std::to_string(n), cd);
        ASSERT_EQ(shard.code, 0) << shard.out;
        EXPECT_EQ(lines_of(shard.stdout_only), want) << list_command << flags << " --shard " << i << "/" << n;
      }
    }
}

TEST(Cli, RegistryDrivesListFilterAndShardsOfRun) {
  expect_registry_loops("run --list --cases " + kSourceDir + "/cases --fixtures " + kSourceDir + "/golden/fixtures",
                        "^(golden/5\\.24\\.0/window|backend/chunked_left_padding/|property/(returned_rows|layer_agreement)$)");
}

TEST(Cli, RegistryDrivesListFilterAndShardsOfEngine) {
  expect_registry_loops("engine --engine '^oracle$' --plans all --list", "gemma2-w4/|/campaign$",
                        std::string("cd '") + kSourceDir + "' &&");
}

// The older selectors are spellings of the one id filter: each lists exactly the ids of its --filter
// twin, and they combine with --filter by "and".
TEST(Cli, OldSelectorsAreSpellingsOfTheFilter) {
  const std::string data = " --iterations 5 --cases " + kSourceDir + "/cases --fixtures " + kSourceDir + "/golden/fixtures";
  const auto ids = [&](const std::string& flags) {
    const Result r = kvconform("run --list " + flags + data);
    EXPECT_EQ(r.code, 0) << flags << "\n" << r.out;
    return r.stdout_only;
  };
  EXPECT_EQ(ids("--golden-only --case '5\\.24\\.0/window2'"), ids("--filter '^golden/5\\.24\\.0/window2'"));
  EXPECT_EQ(ids("--properties-only --property 'rows$'"), ids("--filter '^property/[a-z_]*rows$'"));
  EXPECT_EQ(ids("--suite backend"), ids("--filter '^backend/'"));
  // --case constrains only golden ids; with --filter both must hold.
  EXPECT_EQ(ids("--case '5\\.24\\.0/window2' --filter '^(golden/4|backend/chunked_left_padding/static/eager/)'"),
            ids("--filter '^backend/chunked_left_padding/static/eager/'"));
  EXPECT_EQ(kvconform("run --list --case '('" + data).code, 2);
}

TEST(Cli, RunThatCheckedNothingIsNotGreen) {
  Result r = kvconform("run --suite backend --device cuda --no-report");
  if (r.out.find("): SKIP") == std::string::npos) GTEST_SKIP() << "CUDA is available here: the suite really ran";
  EXPECT_EQ(r.code, 1) << r.out.substr(r.out.size() > 2000 ? r.out.size() - 2000 : 0);
  // Every backend case the selection lists is a SKIP (their count comes from --list, not from here).
  const Result listed = kvconform("run --suite backend --device cuda --list");
  const auto cases = std::count(listed.out.begin(), listed.out.end(), '\n');
  ASSERT_GT(cases, 0) << listed.out;
  EXPECT_NE(r.out.find("0 passed, 0 failed, " + std::to_string(cases) + " skipped"), std::string::npos)
      << cases << " listed; " << r.out.substr(r.out.size() > 300 ? r.out.size() - 300 : 0);
  EXPECT_NE(r.out.find("nothing was checked"), std::string::npos);
  EXPECT_EQ(kvconform("run --suite backend --device cuda --no-report --allow-nothing-checked").code, 0);
}

// A selector given where it cannot apply is refused (exit 2), never accepted and
// ignored (docs/cli.md, "Which selector applies where"). `--backend-cmd true` is never started.
TEST(Cli, SelectorsThatCannotApplyAreRefused) {
  const std::string plugin = std::string("--plugin '") + kBinary + "'";  // an existing file: refused before loading
  for (const std::string& args :
       {std::string("run --backend-cmd true --iterations 5"), std::string("run --backend-cmd true --case x"),
        std::string("run --backend-cmd true --property stored_rows"), std::string("run --backend-cmd true --backend eager"),
        std::string("run --backend-cmd true --mutant window_off_by_one+1"), std::string("run --backend-cmd true --suite golden"),
        std::string("run --backend-cmd true --golden-only"), std::string("run --backend-cmd true --device cuda"),
        std::string("run --backend-cmd true --fixtures x"), "run " + plugin + " --backend-timeout 3",
        std::string("run --plugin-iterations 3"), std::string("run --backend-timeout 3"),
        std::string("run --max-worker-failures 1")}) {
    const Result r = kvconform(args + " --no-report");
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find("appl"), std::string::npos) << args << "\n" << r.out;  // "does not apply" / "applies only"
  }
}

// A failing case's reproduce line runs as printed from an empty working directory
// (absolute binary, --filter for its id, the flags that changed its outcome, the replay string) and
// fails exactly that case again.
TEST(Cli, ReproduceLineRunsFromAnywhere) {
  const Result r = kvconform(
      "run --properties-only --property window_coverage --mutant window_off_by_one+1 --iterations 100 "
      "--dtype float32 --no-report");
  ASSERT_EQ(r.code, 1) << r.out;
  const std::string key = "  reproduce: ";
  const size_t at = r.stdout_only.find(key);
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string line = r.stdout_only.substr(at + key.size(), r.stdout_only.find('\n', at) - at - key.size());
  EXPECT_EQ(line.rfind('/', 0), 0u) << line;  // the absolute binary
  for (const char* part : {" --filter '^property/window_coverage$'", " --mutant window_off_by_one+1", " --iterations 100",
                           " --dtype float32", " --seed 20250917", " --reproduce '"})
    EXPECT_NE(line.find(part), std::string::npos) << part << " in " << line;
  const fs::path cwd = scratch("elsewhere");
  const fs::path out = scratch("elsewhere_out") / "out";
  const int status = std::system(("cd '" + cwd.string() + "' && " + line + " --no-report >'" + out.string() + "' 2>&1").c_str());
  const std::string again = slurp(out);
  EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 1) << again;
  EXPECT_NE(again.find("property/window_coverage("), std::string::npos) << again;
  EXPECT_NE(again.find("0 passed, 1 failed, 0 skipped"), std::string::npos) << again;
}

// -v prints each case's measured error, bound and margin; the reports record them.
TEST(Cli, VerbosePrintsMeasuredErrorAndReportsRecordIt) {
  const fs::path dir = scratch("measured");
  const Result r = kvconform(
      "run --suite backend --filter '^backend/decode_across_window/static/eager/float32$' -v "
      "--report-dir '" +
      dir.string() + "'");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(kvc::Regex("\n  measured: error [0-9.e+-]+, bound [0-9.e+-]+, margin [0-9.e+-]+ "
                         "\\(same-dtype-reference\\)\n")
                  .search(r.stdout_only))
      << r.stdout_only;
  const auto c = nlohmann::json::parse(slurp(dir / "summary.json"))["cases"][0];
  ASSERT_TRUE(c["error"].is_number()) << c.dump();
  EXPECT_NEAR(c["margin"].get<double>(), c["bound"].get<double>() - c["error"].get<double>(), 1e-15);
  EXPECT_NE(slurp(dir / "junit.xml").find("<property name=\"kvconform.margin\""), std::string::npos);
}

// A build-tree binary run from a folder with no cases/ (a kernel repository's pytest, say) reads the
// checkout it was built from, and lists what it lists from the checkout.
TEST(Cli, BuildTreeBinaryFindsItsCheckoutsDataFromAnywhere) {
  const fs::path cwd = scratch("no_data_here");
  const fs::path out = scratch("no_data_here_out") / "out";
  const int status = std::system(("cd '" + cwd.string() + "' && '" + kBinary +
                                  "' run --list --filter '^golden/5\\.24\\.0/window2' >'" + out.string() + "' 2>&1")
                                     .c_str());
  const std::string listed = slurp(out);
  EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 0) << listed;
  EXPECT_EQ(listed, "golden/5.24.0/window2_dynamic_sliding\ngolden/5.24.0/window2_static_sliding\n");
}

TEST(Cli, RunFailureReportsHeatmapAndReproduce) {
  const fs::path dir = scratch("failing");
  const Result r = kvconform(
      "run --properties-only --iterations 100 --property window_coverage --mutant window_off_by_one+1 "
      "--dtype float32 --report-dir '" +
      dir.string() + "'");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("0 passed, 1 failed, 0 skipped"), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(slurp(dir / "summary.json"));
  const auto& c = j["cases"][0];
  EXPECT_EQ(c["status"], "FAIL");
  EXPECT_EQ(c["dtype"], "float32");
  EXPECT_NE(c["reproduce"].get<std::string>().find("--reproduce '"), std::string::npos);
  ASSERT_FALSE(c["masks"].empty());
  EXPECT_NE(slurp(dir / "report.html").find("class=\"mismatch\""), std::string::npos);
  EXPECT_NE(slurp(dir / "junit.xml").find("<failure message="), std::string::npos);
}

TEST(Cli, RunNoReportWritesNothing) {
  const fs::path dir = scratch("none");
  ASSERT_EQ(
      kvconform("run --properties-only --iterations 3 --property stored_rows --no-report", "cd '" + dir.string() + "' &&").code,
      0);
  EXPECT_FALSE(fs::exists(dir / "reports"));
}

TEST(Cli, RunUnwritableReportFolderExitsTwo) {
  const fs::path dir = scratch("blocked");
  { std::ofstream(dir / "file") << "x"; }
  EXPECT_EQ(
      kvconform("run --properties-only --iterations 3 --property stored_rows --report-dir '" + (dir / "file").string() + "'")
          .code,
      2);
}

long long cases_in(const std::string& out) {
  kvc::RegexMatch m;
  if (!kvc::Regex("fuzz: ([0-9]+) rounds, ([0-9]+) cases").search(out, m)) return -1;
  return std::stoll(m.str(2));
}

TEST(Fuzz, ShardsSplitTheRoundsOfOneRun) {
  const std::string base = "fuzz --iterations 300 --batch 100 --property stored_rows --no-write";
  const Result all = kvconform(base), s0 = kvconform(base + " --shard 0/2"), s1 = kvconform(base + " --shard 1/2");
  ASSERT_EQ(all.code, 0) << all.out;
  EXPECT_NE(all.out.find("fuzz: 3 rounds"), std::string::npos) << all.out;
  EXPECT_NE(s0.out.find("fuzz: 2 rounds"), std::string::npos) << s0.out;  // rounds 0 and 2
  EXPECT_NE(s1.out.find("fuzz: 1 rounds"), std::string::npos) << s1.out;  // round 1
  EXPECT_EQ(cases_in(s0.out) + cases_in(s1.out), cases_in(all.out));
  // GoogleTest's variables select the same shard as --shard.
  const Result env = kvconform(base, "GTEST_SHARD_INDEX=1 GTEST_TOTAL_SHARDS=2");
  EXPECT_EQ(env.out, s1.out);
}

TEST(Seeds, EveryCommandThatDrawsTakesTheOneSeedOption) {
  // One default, one environment variable (kvconform/seeds.h); a command with its own --seed
  // spelling would not print both.
  for (const char* command : {"run", "fuzz", "engine", "golden", "bench"}) {
    const Result r = kvconform(std::string(command) + " --help");
    EXPECT_NE(r.out.find("--seed"), std::string::npos) << command;
    EXPECT_NE(r.out.find("(default 20250917, or KVC_SEED)"), std::string::npos) << command << ": " << r.out;
  }
  // KVC_SEED reaches a command that is not `run`.
  const Result env = kvconform("fuzz --iterations 5 --batch 5 --property stored_rows --no-write", "KVC_SEED=77");
  EXPECT_NE(env.out.find("seed 77"), std::string::npos) << env.out;
  // A negative or non-numeric seed is bad usage, from the flag or the environment, never a wrapped one.
  for (const auto& [args, env_seed] :
       std::vector<std::pair<std::string, std::string>>{{"run --properties-only --no-report --seed -5", ""},
                                                        {"fuzz --iterations 5 --no-write", "KVC_SEED=-5"},
                                                        {"engine --list", "KVC_SEED=abc"}}) {
    const Result bad = kvconform(args, env_seed);
    EXPECT_EQ(bad.code, 2) << args << " " << env_seed << ": " << bad.out;
    EXPECT_NE(bad.out.find("is not an integer >= 0"), std::string::npos) << bad.out;
  }
}

TEST(Fuzz, TimeBudgetStops) {
  const Result r = kvconform("fuzz --time-budget 1 --batch 10 --property stored_rows --no-write");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_GT(cases_in(r.out), 0);
  EXPECT_EQ(r.out.find('\r'), std::string::npos) << "no progress line when not on a terminal";
}

TEST(Fuzz, FailuresBecomeCaseFiles) {
  const fs::path out = scratch("regressions"), reports = scratch("fuzz_reports");
  const Result r =
      kvconform("fuzz --iterations 200 --property window_coverage --mutant window_off_by_one+1 --max-failures 2 --regressions '" +
                out.string() + "' --report-dir '" + reports.string() + "'");
  EXPECT_EQ(r.code, 1) << r.out;
  int files = 0;
  for (const auto& entry : fs::directory_iterator(out / "property" / "window_coverage")) {  // the corpus's folder
    ++files;
    const auto j = nlohmann::json::parse(slurp(entry.path()));
    EXPECT_TRUE(kvc::Regex("[0-9a-f]{16}[.]json").matches(entry.path().filename().string())) << entry.path();
    EXPECT_EQ(j["name"].get<std::string>() + ".json", entry.path().filename().string());  // a case file's name is its stem
    for (const char* key :
         {"description", "cache", "layer_types", "batch", "heads", "kv_heads", "head_dim", "dtype", "steps", "inputs"})
      EXPECT_TRUE(j.contains(key)) << key;
    EXPECT_EQ(j["inputs"]["generator"], "kvc-mix64-v1");
    EXPECT_EQ(j.contains("max_cache_len"), j["cache"] == "static");
    EXPECT_FALSE(j["steps"].empty());
  }
  EXPECT_GE(files, 1);
  EXPECT_TRUE(fs::exists(reports / "report.html"));
}

// The found-case corpus (kvconform/regressions.h): a failure `kvconform fuzz` saves is replayed by the
// next `run` by default (from the folder holding regressions/), as its own case
// property/regressions/<property>/<hash>: it fails again under the mutant it was found on and passes on
// the reference; a run that ignores the corpus has nothing of it to run.
TEST(Regressions, AFoundCaseIsReplayedByTheNextRunByDefault) {
  const fs::path dir = scratch("replayed_by_default");
  const Result found =
      kvconform("fuzz --iterations 200 --property window_coverage --mutant window_off_by_one+1 --max-failures 1 --regressions '" +
                (dir / "regressions").string() + "'");
  ASSERT_EQ(found.code, 1) << found.out;
  std::vector<std::string> hashes;
  for (const auto& e : fs::directory_iterator(dir / "regressions/property/window_coverage"))
    hashes.push_back(e.path().stem().string());
  ASSERT_EQ(hashes.size(), 1u) << found.out;
  const std::string id = "property/regressions/window_coverage/" + hashes[0];
  const std::string here = "cd '" + dir.string() + "' &&";
  const Result listed = kvconform("run --list --filter '^property/regressions/'", here);
  EXPECT_EQ(listed.code, 0) << listed.out;
  EXPECT_EQ(listed.stdout_only, id + "\n");
  const Result again = kvconform("run --filter '^property/regressions/' --mutant window_off_by_one+1 --no-report", here);
  EXPECT_EQ(again.code, 1) << again.out;
  EXPECT_NE(again.out.find(id + "(): FAIL "), std::string::npos) << again.out;
  // Its reproduce line names the corpus by its absolute path: it runs from any folder.
  EXPECT_NE(again.out.find(" --regressions " + (dir / "regressions").string()), std::string::npos) << again.out;
  const Result fixed = kvconform("run --filter '^property/regressions/' --no-report", here);
  EXPECT_EQ(fixed.code, 0) << fixed.out;
  EXPECT_NE(fixed.out.find(id + "(): OK"), std::string::npos) << fixed.out;
  // The saved file is a case file like any other: `kvconform replay` reads it (no fixture: SKIP).
  const Result replayed =
      kvconform("replay '" + (dir / "regressions/property/window_coverage" / (hashes[0] + ".json")).string() + "'");
  EXPECT_EQ(replayed.code, 0) << replayed.out;
  // The mutant of the replay: ignoring the corpus leaves nothing to run (exit 2), so the FAIL above
  // came from the saved file.
  const Result ignored =
      kvconform("run --filter '^property/regressions/' --mutant window_off_by_one+1 --no-report --no-regressions", here);
  EXPECT_EQ(ignored.code, 2) << ignored.out;
  EXPECT_NE(ignored.out.find("nothing to run"), std::string::npos) << ignored.out;
}

// A value property's found case (attention against the float64 oracle) replays on the tensor engine,
// as the campaign found it: FAIL under its mutant, naming the command; OK on the reference.
TEST(Regressions, AFoundValuePropertyCaseReplaysOnTheTensorEngine) {
  const fs::path dir = scratch("value_property_replayed");
  const Result found = kvconform(
      "fuzz --iterations 200 --property attention_vs_oracle --mutant window_off_by_one+1 --max-failures 1 --regressions '" +
      (dir / "regressions").string() + "'");
  ASSERT_EQ(found.code, 1) << found.out;
  std::vector<std::string> hashes;
  for (const auto& e : fs::directory_iterator(dir / "regressions/property/attention_vs_oracle"))
    hashes.push_back(e.path().stem().string());
  ASSERT_EQ(hashes.size(), 1u) << found.out;
  const std::string id = "property/regressions/attention_vs_oracle/" + hashes[0];
  const std::string here = "cd '" + dir.string() + "' &&";
  const Result again = kvconform("run --filter '^property/regressions/' --mutant window_off_by_one+1 --no-report", here);
  EXPECT_EQ(again.code, 1) << again.out;
  EXPECT_NE(again.out.find(id + "(): FAIL command 0 (Prefill("), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("differs from the oracle"), std::string::npos) << again.out;
  const Result fixed = kvconform("run --filter '^property/regressions/' --no-report", here);
  EXPECT_EQ(fixed.code, 0) << fixed.out;
  EXPECT_NE(fixed.out.find(id + "(): OK (1 commands on the tensor engine)"), std::string::npos) << fixed.out;
}

// A corrupt file in the corpus is that case's FAIL naming the file, the run goes on to the next one;
// a folder that names no property is its FAIL too.
TEST(Regressions, ACorruptSavedCaseIsItsOwnFail) {
  const fs::path dir = scratch("corrupt_corpus");
  fs::create_directories(dir / "property/stored_rows");
  fs::create_directories(dir / "property/no_such_property");
  std::ofstream(dir / "property/stored_rows/0000000000000001.json") << "{\"name\": ";
  std::ofstream(dir / "property/stored_rows/0000000000000002.json") << "{\"name\": \"x\", \"cache\": \"dynamic\"}";
  std::ofstream(dir / "property/no_such_property/0000000000000003.json") << "{}";
  const Result r = kvconform("run --filter '^property/regressions/' --no-report --regressions '" + dir.string() + "'");
  EXPECT_EQ(r.code, 1) << r.out;
  const std::string file1 = (dir / "property/stored_rows/0000000000000001.json").string();
  const std::string file2 = (dir / "property/stored_rows/0000000000000002.json").string();
  EXPECT_NE(r.out.find("property/regressions/stored_rows/0000000000000001(): FAIL the saved case does not load: "),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(file1), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("property/regressions/stored_rows/0000000000000002(): FAIL the saved case does not load: "),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(file2), std::string::npos) << r.out;
  EXPECT_NE(
      r.out.find("property/regressions/no_such_property/0000000000000003(): FAIL the saved case does not load: unknown property"),
      std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("0 passed, 3 failed"), std::string::npos) << r.out;
}

// Random sequences against the real transformers (the pinned environments, built in CI by
// scripts/setup.sh): a short campaign agrees; the reference under another release's behaviours
// (5.24.0's behaviours for 4.57.6's dumper: no cache_position, another skip rule) must disagree, and
// each disagreement is shrunk into a case file.
TEST(Fuzz, DifferentialAgreesAndCanFail) {
  for (const char* v : {"4.57.6", "5.24.0"})
    if (!fs::exists(fs::path(kSourceDir) / "golden" / (std::string(".venv-") + v) / "bin/python"))
      GTEST_SKIP() << "golden environment " << v << " not built (bash golden/setup_env.sh " << v << ")";
  const fs::path ok_dir = scratch("differential_ok"), bad_dir = scratch("differential_bad");
  const std::string root = std::string(" --root ") + kSourceDir;
  const Result ok = kvconform("fuzz --differential --iterations 20 --release 5.24.0 --shard 1/2 --regressions '" +
                              ok_dir.string() + "'" + root);
  EXPECT_EQ(ok.code, 0) << ok.out;
  EXPECT_NE(ok.out.find("(10 sequences,"), std::string::npos) << ok.out;  // shard 1 of 2: the odd ones
  EXPECT_NE(ok.out.find(" 0 disagreements"), std::string::npos) << ok.out;
  const Result bad =
      kvconform("fuzz --differential --iterations 8 --workers 3 --release 4.57.6 --reference-release 5.24.0 --regressions '" +
                bad_dir.string() + "'" + root);
  EXPECT_EQ(bad.code, 1) << bad.out;
  // 4.57.6 passes cache_position, 5.24.0's behaviours do not: the first differing field of each step.
  EXPECT_NE(bad.out.find("cache_position: transformers [0,"), std::string::npos) << bad.out;
  int saved = 0;
  for (const auto& e : fs::directory_iterator(bad_dir / "differential" / "4.57.6")) {  // the corpus's folder
    ++saved;
    const auto doc = nlohmann::json::parse(slurp(e.path()));
    EXPECT_EQ(doc["steps"].size(), 1u) << e.path();  // shrunk to the one step that disagrees
  }
  EXPECT_GT(saved, 0);
  EXPECT_NE(bad.out.find("sequences/s with 3 dumper workers"), std::string::npos) << bad.out;
  // One worker finds the same disagreements, shrinks them to the same files and prints the same
  // report (but for the seconds, the rate and the folder).
  const fs::path one_dir = scratch("differential_one");
  const Result one =
      kvconform("fuzz --differential --iterations 8 --workers 1 --release 4.57.6 --reference-release 5.24.0 --regressions '" +
                one_dir.string() + "'" + root);
  auto normal = [](std::string s, const fs::path& dir) {
    for (size_t at; (at = s.find(dir.string())) != std::string::npos;) s.replace(at, dir.string().size(), "DIR");
    s = kvc::Regex("[^\\n]*dumper workers\\n").replace(s, "");
    return kvc::Regex("[0-9]+ s\\)").replace(s, "N s)");
  };
  EXPECT_EQ(normal(one.stdout_only, one_dir), normal(bad.stdout_only, bad_dir));
  for (const auto& e : fs::directory_iterator(bad_dir / "differential" / "4.57.6"))
    EXPECT_EQ(slurp(one_dir / "differential" / "4.57.6" / e.path().filename()), slurp(e.path())) << e.path().filename();
}

// The same traces through Python and C++ side by side: both rates, the ratios and the differential
// pool's sequences/s, in one run (docs/performance.md).
TEST(Bench, VsPythonPrintsBothSidesAndTheRatio) {
  if (!fs::exists(fs::path(kSourceDir) / "golden/.venv-5.24.0/bin/python"))
    GTEST_SKIP() << "golden environment 5.24.0 not built (bash golden/setup_env.sh 5.24.0)";
  const fs::path dir = scratch("vs_python");
  const Result r = kvconform(
      "bench --vs-python --release 5.24.0 --traces 10 --python-repeats 2 --campaign-traces 100 "
      "--differential-sequences 6 --workers 2 --json '" +
      (dir / "vs.json").string() + "' --root " + kSourceDir);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("python golden/dump.py dump_case"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("x python"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("differential, 2 dumper workers"), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(slurp(dir / "vs.json"));
  EXPECT_EQ(j["traces"], 10);
  EXPECT_EQ(j["python_repeats"], 2);
  EXPECT_EQ(j["python_timed_traces"], 20);  // every dump_case of both passes is timed
  EXPECT_GT(j["python_traces_per_second"].get<double>(), 0);
  EXPECT_EQ(j["golden_disagreements"], 0);
}

TEST(Bench, QuickGridWritesJson) {
  const fs::path dir = scratch("bench");
  const Result r = kvconform("bench --quick --no-harness --json '" + (dir / "bench.json").string() + "'");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("median_us"), std::string::npos);
  const auto j = nlohmann::json::parse(slurp(dir / "bench.json"));
  EXPECT_EQ(j["format"], "kvconform-bench-v1");
  // 2 windows x 4 windowed kinds + 2 full kinds (measured once), x 2 backends x (prefill, decode).
  EXPECT_EQ(j["results"].size(), (2u * 4 + 2) * 2 * 2);
  for (const auto& m : j["results"]) EXPECT_GT(m["median_us"].get<double>(), 0.0);
}

// Perf mode is fed by the same registry: bench --filter times exactly the ids run --list prints,
// one line (and one JSON entry) per case, each with its verdict; a filter matching nothing is bad usage.
TEST(Bench, FilterTimesExactlyTheIdsRunLists) {
  const fs::path dir = scratch("bench_cases");
  const std::string paths = " --cases " + kSourceDir + "/cases --fixtures " + kSourceDir + "/golden/fixtures";
  const std::string filter =
      "'^(golden/5\\.24\\.0/tf_hybrid_cache$|backend/chunked_left_padding/static/eager/|property/stored_rows$)'";
  const Result listed = kvconform("run --list --filter " + filter + paths);
  ASSERT_EQ(listed.code, 0) << listed.out;
  std::set<std::string> ids;
  std::istringstream lines(listed.stdout_only);
  for (std::string line; std::getline(lines, line);) ids.insert(line);
  ASSERT_EQ(ids.size(), 1u + 4u + 1u) << listed.stdout_only;
  const Result r = kvconform("bench --filter " + filter + paths + " --iterations 5 --repeats 2 --warmup 0 --json '" +
                             (dir / "cases.json").string() + "'");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(slurp(dir / "cases.json"));
  std::set<std::string> timed;
  for (const auto& c : j["cases"]) {
    timed.insert(c["id"].get<std::string>());
    EXPECT_EQ(c["runs"], 2);
    EXPECT_GT(c["median_us"].get<double>(), 0.0);
    EXPECT_TRUE(c["status"] == "OK" || c["status"] == "DEVIATION") << c.dump();  // eager float64: a known deviation
    EXPECT_NE(r.stdout_only.find(c["id"].get<std::string>() + " "), std::string::npos) << r.stdout_only;
  }
  EXPECT_EQ(timed, ids);
  EXPECT_EQ(kvconform("bench --filter '^nothing/'" + paths).code, 2);
}

TEST(Replay, CaseAgainstItsFixtures) {
  const std::string fixtures = std::string(" --fixtures ") + kSourceDir + "/golden/fixtures";
  const Result r = kvconform(std::string("replay ") + kSourceDir + "/cases/tf_hybrid_cache.json" + fixtures);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("tf_hybrid_cache"), std::string::npos) << r.out;
  const Result e = kvconform(std::string("explain ") + kSourceDir + "/cases/tf_hybrid_cache.json --step 1" + fixtures);
  EXPECT_EQ(e.code, 0) << e.out;
  // The sliding layer (W = 2) at query 3 sees keys 2 and 3: drawn over absolute key positions.
  EXPECT_NE(e.out.find("window 2: each query sees itself and 1 earlier keys"), std::string::npos) << e.out;
  EXPECT_NE(e.out.find("        23\n  q3    ##\n"), std::string::npos) << e.out;
  EXPECT_NE(e.out.find("0 differences"), std::string::npos) << e.out;
}

// The reference as data: the fixture format on stdout, with no fixtures at all, under the named
// release's behaviours (4.57.6 passes cache_position and never skips a static cache's sdpa mask;
// 5.24.0 has no cache_position and skips a static prefill).
TEST(Replay, JsonPrintsTheReferenceObservations) {
  const std::string nofixtures = " --fixtures '" + scratch("json_no_fixtures").string() + "'";
  const std::string c = kSourceDir + "/cases/tf_static_cache.json";
  const Result old = kvconform("replay " + c + " --json --release 4.57.6" + nofixtures);
  ASSERT_EQ(old.code, 0) << old.out;
  const auto j = nlohmann::json::parse(old.stdout_only);
  EXPECT_EQ(j["format"], "kvconform-fixture-v1");
  EXPECT_EQ(j["case"], "tf_static_cache");
  EXPECT_EQ(j["release"], "4.57.6");
  EXPECT_EQ(j["behaviours"]["cache_api"], "cache_position");
  EXPECT_EQ(j["behaviours"]["sdpa_skip"], "not_compileable");
  ASSERT_GE(j["steps"].size(), 1u);
  EXPECT_TRUE(j["steps"][0]["cache_position"].is_array());
  EXPECT_EQ(j["steps"][0]["layers"][0]["allow_is_causal_skip"], false);
  const Result now = kvconform("replay " + c + " --json --release 5.24.0" + nofixtures);
  ASSERT_EQ(now.code, 0) << now.out;
  const auto k = nlohmann::json::parse(now.stdout_only);
  EXPECT_EQ(k["behaviours"]["cache_api"], "query_length");
  EXPECT_TRUE(k["steps"][0]["cache_position"].is_null());
  EXPECT_EQ(k["steps"][0]["layers"][0]["allow_is_causal_skip"], true);
  EXPECT_EQ(kvconform("replay " + c + " --json --release 4.0.0" + nofixtures).code, 2);
  // --version is the old spelling of --release (docs/cli.md): the same target, and not both.
  EXPECT_EQ(kvconform("replay " + c + " --json --version 4.57.6" + nofixtures).stdout_only, old.stdout_only);
  EXPECT_EQ(kvconform("replay " + c + " --json --release 4.57.6 --version 5.24.0" + nofixtures).code, 2);
}

// Without --json, --release picks one release's fixture; its reproduce line names the release the same way.
// (The verdict is Replay.CaseAgainstItsFixtures' business: only the selection is checked here.)
TEST(Replay, ReleaseSelectsOneFixture) {
  const std::string c = kSourceDir + "/cases/tf_hybrid_cache.json";
  const std::string fixtures = std::string(" --fixtures ") + kSourceDir + "/golden/fixtures";
  const std::string dir = scratch("replay_release").string();
  const Result r = kvconform("replay " + c + " --release 4.57.6 --report-dir '" + dir + "'" + fixtures);
  ASSERT_NE(r.code, 2) << r.out;
  EXPECT_EQ(r.stdout_only.rfind("4.57.6/tf_hybrid_cache(", 0), 0u) << r.stdout_only;
  EXPECT_EQ(r.stdout_only.find("/tf_hybrid_cache(", 7), std::string::npos) << r.stdout_only;  // one release only
  const auto summary = nlohmann::json::parse(std::ifstream(dir + "/summary.json"));
  EXPECT_NE(summary.dump().find("kvconform replay " + c + " --release 4.57.6"), std::string::npos) << summary.dump();
  EXPECT_EQ(kvconform("replay " + c + " --version 4.57.6" + fixtures).stdout_only, r.stdout_only);
}

// A step where 4.56's sliding layer raises (a multi-token update once full) is explained, not a crash:
// the raise is shown by phase on both sides.
TEST(Replay, ExplainShowsARaisedUpdate) {
  const Result e = kvconform(std::string("explain ") + kSourceDir +
                             "/cases/static_sliding_multi_token_after_full_equal.json --step 1 --release 4.56.2 --fixtures " +
                             kSourceDir + "/golden/fixtures");
  EXPECT_EQ(e.code, 0) << e.out;
  EXPECT_NE(e.out.find("    raised in: [\"update\"]\n"), std::string::npos) << e.out;
  EXPECT_NE(e.out.find("0 differences"), std::string::npos) << e.out;
}

// A fixture whose mask disagrees with the reference is drawn with the mismatch marked, exit 1.
TEST(Replay, ExplainMarksMismatches) {
  const fs::path dir = scratch("explain_mismatch");
  fs::create_directories(dir / "5.24.0");
  fs::copy_file(kSourceDir + "/golden/fixtures/5.24.0/manifest.json", dir / "5.24.0/manifest.json");
  auto fixture = nlohmann::json::parse(slurp(kSourceDir + "/golden/fixtures/5.24.0/tf_hybrid_cache.json"));
  fixture["steps"][1]["layers"][1]["bool_mask"][0][0] = "01";  // transformers would not attend key 2
  std::ofstream(dir / "5.24.0/tf_hybrid_cache.json") << fixture.dump();
  const Result e =
      kvconform(std::string("explain ") + kSourceDir + "/cases/tf_hybrid_cache.json --step 1 --fixtures '" + dir.string() + "'");
  EXPECT_EQ(e.code, 1) << e.out;
  EXPECT_NE(e.out.find("  q3    +#\n"), std::string::npos) << e.out;
  EXPECT_NE(e.out.find("1 differences"), std::string::npos) << e.out;
}

// A hostile case file is bad input (exit 2) named by file and JSON pointer, in every command that
// loads cases; before the caps, 2e9 tokens was an out-of-memory kill and batch 1e8 a long hang.
fs::path hostile_case(const fs::path& dir, const std::string& name, const std::string& override_field) {
  auto c = nlohmann::json::parse(slurp(kSourceDir + "/cases/tf_hybrid_cache.json"));
  c["name"] = name;
  c["inputs"] = {{"generator", "kvc-mix64-v1"}, {"seed", 1}};
  std::string text = c.dump();
  text.insert(text.size() - 1, ", " + override_field);  // a repeated member: the last one wins
  const fs::path f = dir / (name + ".json");
  std::ofstream(f) << text;
  return f;
}

TEST(HostileInput, CapsAndRangesExitTwoNamingFileAndPointer) {
  const fs::path dir = scratch("hostile");
  const struct {
    const char* name;
    const char* field;
    const char* message;
  } rows[] = {
      {"tokens", R"("steps": [{"tokens": 3}, {"tokens": 2000000000}])",
       "tokens.json: /steps/1/tokens: 2000000000 exceeds the cap of 65536 tokens per case (raise with --allow-large or "
       "KVC_MAX_TOKENS)"},
      {"batch", R"("batch": 100000000, "left_padding": null)", "batch.json: /batch: 100000000 exceeds the cap of 256"},
      {"head_dim", R"("head_dim": 100000000)", "head_dim.json: /head_dim: 100000000 exceeds the cap of 1024"},
      {"seed", R"("inputs": {"generator": "kvc-mix64-v1", "seed": 1e400})",
       "seed.json: /inputs/seed: number overflow parsing '1e400'"},
      {"wide", R"("heads": 1180591620717411303424)", "wide.json: /heads: 1180591620717411303424 is out of the 64-bit"},
  };
  for (const auto& row : rows) {
    const fs::path f = hostile_case(dir, row.name, row.field);
    for (const std::string cmd : {"replay '" + f.string() + "' --fixtures /nonexistent",
                                  "explain '" + f.string() + "' --step 0 --fixtures /nonexistent"}) {
      const Result r = kvconform(cmd);
      EXPECT_EQ(r.code, 2) << cmd << "\n" << r.out;
      EXPECT_NE(r.out.find(row.message), std::string::npos) << cmd << "\n" << r.out;
    }
  }
  // `run` replays cases named by a fixtures manifest.
  fs::create_directories(dir / "fixtures/5.24.0");
  std::ofstream(dir / "fixtures/5.24.0/manifest.json") << R"({"cases": {"tokens": {"case_file": "cases/tokens.json"}}})";
  const Result r =
      kvconform("run --golden-only --no-report --fixtures '" + (dir / "fixtures").string() + "' --cases '" + dir.string() + "'");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("tokens.json: /steps/1/tokens: 2000000000 exceeds the cap"), std::string::npos) << r.out;
}

TEST(HostileInput, CapsAreRaisedByEnvironmentAndLiftedByFlag) {
  const std::string replay =
      std::string("replay ") + kSourceDir + "/cases/tf_hybrid_cache.json --fixtures " + kSourceDir + "/golden/fixtures";
  const Result low = kvconform(replay, "KVC_MAX_TOKENS=2");
  EXPECT_EQ(low.code, 2) << low.out;
  EXPECT_NE(low.out.find("tf_hybrid_cache.json: /steps/0/tokens: 3 exceeds the cap of 2 tokens per case"), std::string::npos)
      << low.out;
  EXPECT_EQ(kvconform(replay + " --allow-large", "KVC_MAX_TOKENS=2").code, 0);
  EXPECT_EQ(kvconform(replay, "KVC_MAX_TOKENS=2 KVC_ALLOW_LARGE=1").code, 0);
  const Result bad = kvconform(replay, "KVC_MAX_TOKENS=lots");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.out.find("KVC_MAX_TOKENS=lots: a cap is a positive integer"), std::string::npos) << bad.out;
  for (const char* sub : {"run", "replay", "explain", "golden"})
    EXPECT_NE(kvconform(std::string(sub) + " --help").out.find("--allow-large"), std::string::npos) << sub;
}

// A fixture whose attention hex is longer than its shape would be read past the reference's values.
TEST(HostileInput, MalformedFixtureIsNamedByFileAndPointer) {
  const fs::path dir = scratch("bad_fixture");
  fs::create_directories(dir / "5.24.0");
  fs::copy_file(kSourceDir + "/golden/fixtures/5.24.0/manifest.json", dir / "5.24.0/manifest.json");
  auto fixture = nlohmann::json::parse(slurp(kSourceDir + "/golden/fixtures/5.24.0/tf_hybrid_cache.json"));
  fixture["steps"][0]["layers"][1]["attention"]["eager"]["hex"] = std::string(200, '0');
  std::ofstream(dir / "5.24.0/tf_hybrid_cache.json") << fixture.dump();
  const Result r =
      kvconform(std::string("replay ") + kSourceDir + "/cases/tf_hybrid_cache.json --fixtures '" + dir.string() + "'");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("tf_hybrid_cache.json: /steps/0/layers/1/attention/eager/hex: 200 hex digits, the shape and dtype "
                       "make 24"),
            std::string::npos)
      << r.out;
  std::ofstream(dir / "5.24.0/tf_hybrid_cache.json") << R"({"format": "kvconform-fixture-v1", "steps": [{"layers": 1e999}]})";
  const Result n =
      kvconform(std::string("replay ") + kSourceDir + "/cases/tf_hybrid_cache.json --fixtures '" + dir.string() + "'");
  EXPECT_EQ(n.code, 2) << n.out;
  EXPECT_NE(n.out.find("tf_hybrid_cache.json: /steps/0/layers: number overflow parsing '1e999'"), std::string::npos) << n.out;
}

// ---- Shards and `kvconform merge` (docs/sharding.md) ----

// Wall-clock fields, the one legitimate difference between merged shards and the unsharded run:
// summary.json's seconds, JUnit's time=, "wall time" in summary.md and report.html, and the
// differential campaign's ", N s)" on its closing lines.
std::string masked(std::string s) {
  s = kvc::Regex(R"("(total_)?seconds": [-0-9.eE+]+)").replace(s, "\"$1seconds\": T");
  s = kvc::Regex(R"( time="[0-9.]+")").replace(s, " time=\"T\"");
  s = kvc::Regex(R"(wall time [0-9.]+ s)").replace(s, "wall time T s");
  s = kvc::Regex(R"(, [0-9]+ s\))").replace(s, ")");
  return s;
}

size_t lines_in(const std::string& s) { return static_cast<size_t>(std::count(s.begin(), s.end(), '\n')); }

// The last `n` lines of `s`.
std::string last_lines(const std::string& s, size_t n) {
  std::vector<std::string> lines;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::string out;
  for (size_t i = lines.size() - std::min(n, lines.size()); i < lines.size(); ++i) out += lines[i] + "\n";
  return out;
}

const char* const kReportFiles[] = {"junit.xml", "summary.json", "summary.md", "report.html"};

// "" where the texts are equal, else the first line where they differ (a report is too long to print whole).
std::string first_difference(const std::string& got, const std::string& want) {
  std::istringstream a(got), b(want);
  std::string la, lb;
  for (int line = 1;; ++line) {
    const bool more_a = static_cast<bool>(std::getline(a, la)), more_b = static_cast<bool>(std::getline(b, lb));
    if (!more_a && !more_b) return "";
    if (more_a != more_b || la != lb)
      return "line " + std::to_string(line) + ":\n  merged:    " + (more_a ? la : "(end)") +
             "\n  unsharded: " + (more_b ? lb : "(end)");
  }
}

// Runs `args` unsharded and, for each n, as n shards (--shard k/n), merges the shards' folders and
// expects the merged reports (byte for byte but for timings), closing lines and exit status to be
// the unsharded run's. Returns the unsharded run's exit status.
int expect_merge_equals_unsharded(const std::string& name, const std::string& args, const std::vector<int>& ns,
                                  const std::string& env = "") {
  const fs::path root = scratch("merge_" + name);
  const Result whole = kvconform(args + " --report-dir '" + (root / "whole").string() + "'", env);
  EXPECT_TRUE(whole.code == 0 || whole.code == 1) << whole.out;
  for (int n : ns) {
    std::string dirs;
    for (int k = 0; k < n; ++k) {
      const fs::path d = root / ("n" + std::to_string(n) + "_shard" + std::to_string(k));
      const Result shard =
          kvconform(args + " --shard " + std::to_string(k) + "/" + std::to_string(n) + " --report-dir '" + d.string() + "'", env);
      EXPECT_TRUE(shard.code == 0 || shard.code == 1) << shard.out;
      dirs += " '" + d.string() + "'";
    }
    const fs::path merged_dir = root / ("merged" + std::to_string(n));
    const Result merged = kvconform("merge" + dirs + " --report-dir '" + merged_dir.string() + "'");
    EXPECT_EQ(merged.code, whole.code) << name << " n=" << n << "\n" << merged.out;
    EXPECT_GT(lines_in(merged.stdout_only), 0u) << merged.out;
    EXPECT_EQ(masked(merged.stdout_only), masked(last_lines(whole.stdout_only, lines_in(merged.stdout_only))))
        << name << " n=" << n;
    for (const char* file : kReportFiles)
      EXPECT_EQ(first_difference(masked(slurp(merged_dir / file)), masked(slurp(root / "whole" / file))), "")
          << name << " n=" << n << " " << file;
  }
  return whole.code;
}

const std::vector<int> kShardCounts = {1, 2, 3, 5};

// Golden fixtures, backend cases and properties, all three failing under a mutant (shrunk property
// failures included) and passing without it; with --timings the timings are the only difference.
TEST(Cli, MergedShardsOfRunEqualTheUnshardedRun) {
  const std::string base =
      "run --suite golden,backend,property --iterations 5 --filter "
      "'window2|rows$|window_coverage|decode_across_window/static/(eager|sdpa)/float(32|64)'";
  EXPECT_EQ(expect_merge_equals_unsharded("run_pass", base, {2, 5}), 0);
  EXPECT_EQ(expect_merge_equals_unsharded("run_mutant", base + " --mutant window_off_by_one+1", kShardCounts), 1);
  EXPECT_EQ(expect_merge_equals_unsharded("run_timed", base + " --timings", {2}), 0);
  const nlohmann::json merged = nlohmann::json::parse(slurp(scratch_root() / "merge_run_timed/merged2/summary.json"));
  EXPECT_TRUE(merged.contains("total_seconds"));  // every shard timed: so is the merge
  EXPECT_EQ(merged["run"]["shard"], (nlohmann::json{{"index", 0}, {"count", 1}}));
}

// Rounds of fresh seeds: failures (shrunk, written as case files into one folder) in round order,
// the pass lines' case counts summed over the shards.
TEST(Cli, MergedShardsOfFuzzEqualTheUnshardedRun) {
  const fs::path out = scratch("merge_fuzz_cases");
  const std::string base =
      "fuzz --iterations 50 --batch 10 --property 'stored_rows|window_coverage' --max-failures 100 --regressions '" +
      out.string() + "'";
  EXPECT_EQ(expect_merge_equals_unsharded("fuzz_pass", base, {2, 5}), 0);
  EXPECT_EQ(expect_merge_equals_unsharded("fuzz_mutant", base + " --mutant window_off_by_one+1", kShardCounts), 1);
  const nlohmann::json merged = nlohmann::json::parse(slurp(scratch_root() / "merge_fuzz_mutant/merged3/summary.json"));
  EXPECT_EQ(merged["run"]["counters"]["rounds"], 5);
  EXPECT_FALSE(merged["run"]["files"].empty());
}

TEST(Cli, MergedShardsOfEngineEqualTheUnshardedRun) {
  if (!fs::exists(fs::path(kSourceDir) / "build/harness/kvc-oracle-engine"))  // engines/engines.json "oracle"
    GTEST_SKIP() << "build/harness/kvc-oracle-engine not built";
  const std::string cd = std::string("cd '") + kSourceDir + "' &&";
  const std::string base = "engine --engine '^oracle$' --model '^gemma2-w4$' --plans all --iterations 3";
  EXPECT_EQ(expect_merge_equals_unsharded("engine_pass", base, {2, 5}, cd), 0);
  EXPECT_EQ(expect_merge_equals_unsharded("engine_mutant", base + " --mutant window_off_by_one+1", kShardCounts, cd), 1);
}

// Two versions in one campaign: 4.57.6 under 5.24.0's behaviours disagrees on every sequence
// (shrunk, saved), 5.24.0 agrees (its pass case counts the sequences of every shard). Each run
// starts a dumper per version, which takes most of its time (about 50 s a run here): 2 shards only.
TEST(Cli, MergedShardsOfTheDifferentialCampaignEqualTheUnshardedRun) {
  for (const char* v : {"4.57.6", "5.24.0"})
    if (!fs::exists(fs::path(kSourceDir) / "golden" / (std::string(".venv-") + v) / "bin/python"))
      GTEST_SKIP() << "golden environment " << v << " not built (bash golden/setup_env.sh " << v << ")";
  const fs::path out = scratch("merge_differential_cases");
  const std::string base = std::string("fuzz --differential --iterations 2 --workers 1 --root ") + kSourceDir +
                           " --release 4.57.6 --release 5.24.0 --reference-release 5.24.0 --regressions '" + out.string() + "'";
  EXPECT_EQ(expect_merge_equals_unsharded("differential", base, {2}), 1);
  const nlohmann::json merged = nlohmann::json::parse(slurp(scratch_root() / "merge_differential/merged2/summary.json"));
  EXPECT_EQ(merged["run"]["counters"]["sequences/5.24.0"], 2);
  EXPECT_EQ(merged["run"]["counters"]["disagreements/4.57.6"], 2);
  EXPECT_EQ(merged["run"]["files"].size(), 2u);
}

// Shards that do not belong together are refused (exit 2, nothing written), naming the folder and
// the field.
TEST(Cli, MergeRefusesShardsOfDifferentRuns) {
  const fs::path root = scratch("merge_refusals");
  const std::string base = "run --suite property --property 'rows$' --iterations 3";
  const auto shard = [&](const std::string& name, const std::string& shard_arg, const std::string& args,
                         const std::string& env = "") {
    const fs::path d = root / name;
    const Result r = kvconform(args + " --shard " + shard_arg + " --report-dir '" + d.string() + "'", env);
    EXPECT_EQ(r.code, 0) << r.out;
    return "'" + d.string() + "'";
  };
  const std::string a0 = shard("a0", "0/2", base), a1 = shard("a1", "1/2", base), seed = shard("seed", "1/2", base, "KVC_SEED=8");
  const std::string iterations = shard("iterations", "1/2", "run --suite property --property 'rows$' --iterations 4");
  const std::string c1 = shard("c1", "1/3", base);
  fs::create_directories(root / "empty");
  fs::copy(root / "a0", root / "a0_again");
  // A report of another build, and one written by a command that records no run.
  fs::copy(root / "a1", root / "build");
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(slurp(root / "build/summary.json"));
  j["run"]["build"] = "0000000000ff";
  std::ofstream(root / "build/summary.json") << j.dump(2) << "\n";
  fs::copy(root / "a1", root / "unrecorded");
  j.erase("run");
  std::ofstream(root / "unrecorded/summary.json") << j.dump(2) << "\n";
  const fs::path fuzz_dir = root / "fuzz";
  ASSERT_EQ(kvconform("fuzz --iterations 10 --batch 10 --property stored_rows --no-write --shard 1/2 --report-dir '" +
                      fuzz_dir.string() + "'")
                .code,
            0);
  const auto q = [&](const char* name) { return "'" + (root / name).string() + "'"; };

  const std::vector<std::pair<std::string, std::string>> refusals = {
      {a0 + " " + seed, (root / "seed").string() + ": seed differs: \"8\" here, \"20250917\" in " + (root / "a0").string()},
      {a0 + " " + iterations, (root / "iterations").string() +
                                  ": command differs: \"kvconform run --suite property --property 'rows$' --iterations 4\" here"},
      {a0 + " " + q("build"), (root / "build").string() + ": run.build differs: \"0000000000ff\" here"},
      {a0 + " " + q("fuzz"), (root / "fuzz").string() + ": run.subcommand differs: \"fuzz\" here, \"run\" in"},
      {a0 + " " + c1, (root / "c1").string() + ": run.shard.count differs: \"3\" here, \"2\" in " + (root / "a0").string()},
      {a0, "shard 1/2 missing: 1 of 2 shards given"},
      {a0 + " " + a1 + " " + q("a0_again"),
       (root / "a0_again").string() + " and " + (root / "a0").string() + " are both shard 0/2"},
      {a0 + " " + q("empty"), (root / "empty").string() + ": no summary.json (not a kvconform report folder)"},
      {a0 + " " + q("unrecorded"), (root / "unrecorded/summary.json").string() + ": no \"run\" record"},
      {a0 + " " + q("nonexistent"), (root / "nonexistent").string() + ": not a folder"},
  };
  for (const auto& [dirs, message] : refusals) {
    const fs::path out = root / "merged";
    const Result r = kvconform("merge " + dirs + " --report-dir '" + out.string() + "'");
    EXPECT_EQ(r.code, 2) << dirs << "\n" << r.out;
    EXPECT_NE(r.out.find(message), std::string::npos) << message << "\n" << r.out;
    EXPECT_FALSE(fs::exists(out)) << "a refused merge wrote " << out;
  }
  const Result ok = kvconform("merge " + a1 + " " + a0 + " --report-dir " + q("merged"));  // any order
  EXPECT_EQ(ok.code, 0) << ok.out;
  EXPECT_EQ(kvconform("merge").code, 2);  // no folder: bad usage
}

// The one resolver of the shard (cli_util.h resolve_shard), through `run --list`: each scheduler's
// variables select the same shard as --shard, --shard wins over them, bad values are bad usage
// naming the variable and its value.
TEST(Cli, ShardFromEverySchedulersVariables) {
  const std::string list = "run --list --suite property";
  const Result whole = kvconform(list);
  ASSERT_EQ(whole.code, 0) << whole.out;
  std::string joined;
  for (int k = 0; k < 3; ++k) {
    const Result s = kvconform(list + " --shard " + std::to_string(k) + "/3");
    ASSERT_EQ(s.code, 0) << s.out;
    joined += s.stdout_only;
  }
  // The shards partition the cases: together, each once.
  std::multiset<std::string> a, b;
  std::istringstream wa(whole.stdout_only), wb(joined);
  for (std::string line; std::getline(wa, line);) a.insert(line);
  for (std::string line; std::getline(wb, line);) b.insert(line);
  EXPECT_EQ(a, b);
  const std::string one = kvconform(list + " --shard 1/3").stdout_only, two = kvconform(list + " --shard 2/3").stdout_only;
  ASSERT_NE(one, two);
  for (const std::string& env :
       {"GTEST_SHARD_INDEX=1 GTEST_TOTAL_SHARDS=3", "JOB_COMPLETION_INDEX=1 KVC_SHARD_COUNT=3",
        "SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_COUNT=3", "SLURM_ARRAY_TASK_ID=5 SLURM_ARRAY_TASK_MIN=4 SLURM_ARRAY_TASK_COUNT=3",
        "SLURM_ARRAY_TASK_ID=14 SLURM_ARRAY_TASK_MIN=4 SLURM_ARRAY_TASK_STEP=10 SLURM_ARRAY_TASK_COUNT=3",
        "GTEST_SHARD_INDEX=1 GTEST_TOTAL_SHARDS=3 SLURM_ARRAY_TASK_ID=2 SLURM_ARRAY_TASK_COUNT=3"}) {
    const Result r = kvconform(list, env);
    EXPECT_EQ(r.code, 0) << env << "\n" << r.out;
    EXPECT_EQ(r.stdout_only, one) << env;
  }
  const Result flag_count = kvconform(list + " --shard-count 3", "JOB_COMPLETION_INDEX=1");
  EXPECT_EQ(flag_count.stdout_only, one) << flag_count.out;
  // --shard (a CI matrix) wins over every variable.
  const Result wins = kvconform(list + " --shard 2/3",
                                "GTEST_SHARD_INDEX=1 GTEST_TOTAL_SHARDS=3 JOB_COMPLETION_INDEX=1 "
                                "KVC_SHARD_COUNT=3 SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_COUNT=3");
  EXPECT_EQ(wins.stdout_only, two) << wins.out;
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"GTEST_SHARD_INDEX=x GTEST_TOTAL_SHARDS=3", "GTEST_SHARD_INDEX=x: not a non-negative integer"},
      {"GTEST_SHARD_INDEX=3 GTEST_TOTAL_SHARDS=3", "GTEST_SHARD_INDEX=3, GTEST_TOTAL_SHARDS=3: need 0 <= index < count"},
      {"GTEST_TOTAL_SHARDS=3", "GTEST_SHARD_INDEX and GTEST_TOTAL_SHARDS must be set together (GTEST_TOTAL_SHARDS=3 alone)"},
      {"JOB_COMPLETION_INDEX=1", "JOB_COMPLETION_INDEX=1 (a Kubernetes Indexed Job) names the shard but not the count"},
      {"JOB_COMPLETION_INDEX=3 KVC_SHARD_COUNT=3",
       "JOB_COMPLETION_INDEX=3: need an index below the shard count (KVC_SHARD_COUNT=3)"},
      {"JOB_COMPLETION_INDEX=-1 KVC_SHARD_COUNT=3", "JOB_COMPLETION_INDEX=-1: not a non-negative integer"},
      {"JOB_COMPLETION_INDEX=0 KVC_SHARD_COUNT=0", "KVC_SHARD_COUNT=0: the shard count must be at least 1"},
      {"KVC_SHARD_COUNT=3", "KVC_SHARD_COUNT=3 is given, but no JOB_COMPLETION_INDEX names the shard"},
      {"SLURM_ARRAY_TASK_ID=1", "SLURM_ARRAY_TASK_ID=1 without SLURM_ARRAY_TASK_COUNT"},
      {"SLURM_ARRAY_TASK_ID=2 SLURM_ARRAY_TASK_MIN=4 SLURM_ARRAY_TASK_COUNT=3",
       "SLURM_ARRAY_TASK_ID=2, SLURM_ARRAY_TASK_MIN=4, SLURM_ARRAY_TASK_COUNT=3: the task is not MIN + k * STEP"},
      {"SLURM_ARRAY_TASK_ID=7 SLURM_ARRAY_TASK_COUNT=3",
       "SLURM_ARRAY_TASK_ID=7, SLURM_ARRAY_TASK_COUNT=3: need 0 <= index < count"},
      {"SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_COUNT=three", "SLURM_ARRAY_TASK_COUNT=three: not a non-negative integer"},
  };
  for (const auto& [env, message] : bad) {
    const Result r = kvconform(list, env);
    EXPECT_EQ(r.code, 2) << env << "\n" << r.out;
    EXPECT_NE(r.out.find(message), std::string::npos) << message << "\n" << r.out;
  }
  const Result contradiction = kvconform(list + " --shard 1/3 --shard-count 2");
  EXPECT_EQ(contradiction.code, 2);
  EXPECT_NE(contradiction.out.find("--shard-count 2 contradicts --shard 1/3 (1/3)"), std::string::npos) << contradiction.out;
  // fuzz and engine take the same options from the same resolver.
  for (const char* sub : {"fuzz", "engine"}) {
    const Result help = kvconform(std::string(sub) + " --help");
    EXPECT_NE(help.out.find("--shard-count"), std::string::npos) << sub;
  }
  const Result fuzz = kvconform("fuzz --iterations 10 --no-write", "JOB_COMPLETION_INDEX=1");
  EXPECT_EQ(fuzz.code, 2) << fuzz.out;
  EXPECT_NE(fuzz.out.find("JOB_COMPLETION_INDEX=1"), std::string::npos) << fuzz.out;
}

}  // namespace

// An engine configuration's head_dims narrow the head sizes its model campaign draws (an engine whose
// attention takes only some, as vLLM's CPU kernel), under a name that says so; a size that is not one
// is refused naming the file and the field.
TEST(Cli, AnEngineConfigurationNarrowsTheHeadSizesItsModelsAreDrawnWith) {
  const fs::path oracle = fs::path(kSourceDir) / "build/harness/kvc-oracle-engine";
  if (!fs::exists(oracle)) GTEST_SKIP() << "build/harness/kvc-oracle-engine not built";
  const fs::path dir = scratch("head_dims");
  const auto config = [&](const std::string& name, const std::string& head_dims) {
    const fs::path f = dir / name;
    std::ofstream(f) << R"({"engines": [{"name": "narrow", "command": ")" << oracle.string() << R"(", "head_dims": )" << head_dims
                     << "}]}\n";
    return f.string();
  };
  const std::string cd = std::string("cd '") + kSourceDir + "' &&";
  const Result r = kvconform("engine --config '" + config("good.json", "[32]") +
                                 "' --plans models --family '^mistral$' --iterations 1 --campaign-models '" +
                                 (dir / "models").string() + "' --no-report",
                             cd);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("engine/narrow/drawn-mistral/model-campaign"), std::string::npos) << r.out;
  const fs::path drawn = dir / "models" / "draw-mistral-20250917-0-hd32" / "config.json";
  ASSERT_TRUE(fs::exists(drawn)) << r.out;
  EXPECT_EQ(nlohmann::json::parse(slurp(drawn)).at("head_dim"), 32);
  for (const char* bad : {"[3]", "[]", "\"32\""}) {
    const Result refused =
        kvconform("engine --config '" + config("bad.json", bad) + "' --plans models --family '^mistral$' --no-report", cd);
    EXPECT_EQ(refused.code, 2) << bad << ": " << refused.out;
    EXPECT_NE(refused.out.find("bad.json: /engines/0/head_dims"), std::string::npos) << bad << ": " << refused.out;
  }
}
