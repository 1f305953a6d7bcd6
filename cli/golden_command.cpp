// `kvconform golden`: regenerate the fixtures through the real transformers (golden/dump.py in
// each pinned environment), check the committed ones against a fresh dump, or write the
// generated corpus of random cases.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <algorithm>
#include <regex>
#include <set>
#include <utility>

#include "commands.h"
#include "kvconform/cases.h"
#include "kvcgen/corpus.h"
#include "kvconform/golden.h"
#include "kvconform/seeds.h"

namespace kvc::cli {

namespace fs = std::filesystem;

namespace {
struct GoldenArgs {
  bool check = false;
  int corpus = 0;
  uint64_t seed = kvc::seeds::kDefaultSeed;
  std::vector<std::string> versions;
  std::string root = ".";
};

}  // namespace

std::vector<std::string> pinned_versions(const std::string& repo_root) {
  const fs::path root(repo_root);
  std::vector<std::string> out;
  const std::regex name("requirements-(.+)\\.txt");
  for (const auto& e : fs::directory_iterator(root / "golden")) {
    std::smatch m;
    const std::string file = e.path().filename().string();
    if (std::regex_match(file, m, name)) out.push_back(m[1]);
  }
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

int shell(const std::string& command) {
  std::cerr << "+ " << command << "\n";
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

std::string quoted(const fs::path& p) { return "'" + p.string() + "'"; }

// Every folder of scenario files: cases/, cases/generated/ and the found-case corpus's scenario
// suites (regressions/property/<property>/, regressions/differential/<release>/).
std::vector<fs::path> scenario_folders(const fs::path& root) {
  std::vector<fs::path> out = {root / "cases"};
  if (fs::is_directory(root / "cases/generated")) out.push_back(root / "cases/generated");
  if (fs::is_directory(root / "cases/regressions") && !fs::is_empty(root / "cases/regressions")) {  // the old folder
    static bool said = false;
    if (!std::exchange(said, true))
      std::cerr << "kvconform golden: cases/regressions/ is now the found-case corpus regressions/<suite>/<target>/ "
                   "(the old folder is read until kvconform 0.2)\n";
    out.push_back(root / "cases/regressions");
  }
  for (const char* suite : {"property", "differential"}) {
    const fs::path dir = root / "regressions" / suite;
    if (!fs::is_directory(dir)) continue;
    std::vector<fs::path> targets;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_directory()) targets.push_back(e.path());
    std::sort(targets.begin(), targets.end());
    out.insert(out.end(), targets.begin(), targets.end());
  }
  return out;
}

// Dumps every case (hand-written and generated) for one version into `out`.
int dump(const fs::path& root, const std::string& version, const fs::path& out) {
  if (int rc = shell("bash " + quoted(root / "golden/setup_env.sh") + " " + version + " >&2"); rc != 0) return rc;
  std::string cmd = quoted(root / ("golden/.venv-" + version) / "bin/python") + " " + quoted(root / "golden/dump.py") +
                    " --cases " + quoted(root / "cases");
  for (const fs::path& extra : scenario_folders(root))
    if (extra != root / "cases" && !fs::is_empty(extra)) cmd += " " + quoted(extra);
  return shell(cmd + " --out " + quoted(out));
}

// Same rows, sizes, masks, K/V bytes and errors, attention outputs within the tolerance policy.
bool equivalent_fixtures(const fs::path& committed, const fs::path& fresh) {
  const auto a = nlohmann::json::parse(cases::read_file(committed.string()));
  const auto b = nlohmann::json::parse(cases::read_file(fresh.string()));
  const fs::path case_file = fs::path(a.value("case", "")).string() + ".json";
  for (const fs::path& dir : scenario_folders(committed.parent_path() / "../../..")) {
    if (!fs::exists(dir / case_file)) continue;
    const Scenario c = cases::load_case((dir / case_file).string());
    const report::CaseResult r = golden::compare(a, b, c);
    if (r.status == report::Status::Fail) return false;
    std::cout << "equivalent: " << committed.string() << " (attention bits differ within tolerance)\n";
    return true;
  }
  return false;
}

// Byte comparison of two fixture folders; prints each difference, returns their count.
int compare_dirs(const fs::path& committed, const fs::path& fresh) {
  int differences = 0;
  std::set<std::string> names;
  for (const fs::path& d : {committed, fresh})
    if (fs::is_directory(d))
      for (const auto& e : fs::directory_iterator(d)) names.insert(e.path().filename().string());
  for (const std::string& n : names) {
    const bool a = fs::exists(committed / n), b = fs::exists(fresh / n);
    if (!a || !b) {
      std::cout << (a ? "stale (no longer produced): " : "missing (not committed): ") << (committed / n).string() << "\n";
      ++differences;
    } else if (cases::read_file((committed / n).string()) != cases::read_file((fresh / n).string())) {
      // Attention outputs are judged by the replay's policy: bitwise under the CPU kernel pin
      // (golden/README.md), the dtype's epsilons when the pin or torch differ; the rest is exact.
      if (n != "manifest.json" && equivalent_fixtures(committed / n, fresh / n)) continue;
      std::cout << "differs: " << (committed / n).string() << "\n";
      ++differences;
    }
  }
  return differences;
}

int write_corpus(const fs::path& root, int count, uint64_t seed) {
  const fs::path dir = root / "cases/generated";
  const fs::path tmp = root / "cases/.generated.tmp";
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  for (const auto& doc : corpus::generate(seed, count)) {
    const std::string text = doc.dump(2) + "\n";
    cases::parse_case(text, doc["name"].get<std::string>() + ".json");  // every file must load
    std::ofstream(tmp / (doc["name"].get<std::string>() + ".json")) << text;
  }
  fs::remove_all(dir);
  fs::rename(tmp, dir);  // all or nothing
  std::cout << "wrote " << count << " cases to " << dir.string() << " (seed " << seed << ")\n";
  return 0;
}
}  // namespace

Runner add_golden_command(CLI::App& app) {
  auto args = std::make_shared<GoldenArgs>();
  CLI::App* cmd = app.add_subcommand("golden", "Regenerate golden fixtures from the pinned transformers versions");
  cmd->add_flag("--check", args->check, "Dump into a temporary folder and report any difference from the committed fixtures");
  cmd->add_option("--generate-corpus", args->corpus, "Write N random cases to cases/generated/ (replacing it) and stop")
      ->check(CLI::PositiveNumber);
  add_seed_option(cmd, args->seed, "Seed of the generated corpus: case i is drawn from case_seed(seed, i)");
  CLI::Option* release =
      cmd->add_option("--release", args->versions, "Only these transformers releases (default: every golden/requirements-*.txt)");
  add_old_spelling(cmd, "--version", release, args->versions);
  cmd->add_option("--root", args->root, "Repository root")->check(CLI::ExistingDirectory);
  return [args]() -> int {
    const fs::path root = fs::weakly_canonical(fs::absolute(args->root));
    if (args->corpus > 0) return write_corpus(root, args->corpus, args->seed);
    std::vector<std::string> versions = args->versions.empty() ? pinned_versions(root.string()) : args->versions;
    for (const std::string& v : versions)
      if (!fs::exists(root / ("golden/requirements-" + v + ".txt")))
        throw std::invalid_argument("no pinned environment for transformers " + v + " (golden/requirements-" + v + ".txt)");
    int differences = 0;
    for (const std::string& v : versions) {
      const fs::path committed = root / "golden/fixtures" / v;
      if (!args->check) {
        if (int rc = dump(root, v, committed); rc != 0) return rc == 2 ? 2 : 1;
        continue;
      }
      const fs::path fresh = fs::temp_directory_path() / ("kvconform-golden-check-" + v);
      fs::remove_all(fresh);
      if (int rc = dump(root, v, fresh); rc != 0) return rc == 2 ? 2 : 1;
      const int d = compare_dirs(committed, fresh);
      std::cout << "golden --check " << v << ": " << (d == 0 ? "identical" : std::to_string(d) + " files differ") << "\n";
      differences += d;
      fs::remove_all(fresh);
    }
    return differences == 0 ? 0 : 1;
  };
}

}  // namespace kvc::cli
