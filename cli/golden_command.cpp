// `kvconform golden`: regenerate the fixtures through the real transformers (golden/dump.py in
// each pinned environment), check the committed ones against a fresh dump, or write the
// generated corpus of random cases.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <algorithm>
#include <set>
#include <utility>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "kvconform/cases.h"
#include "kvcgen/corpus.h"
#include "kvconform/golden.h"
#include "kvconform/regex.h"
#include "kvconform/report.h"
#include "kvconform/seeds.h"

namespace kvc::cli {

namespace fs = std::filesystem;

namespace {
struct GoldenArgs {
  bool check = false;
  bool no_cache = false;
  bool print_key = false;
  int corpus = 0;
  uint64_t seed = kvc::seeds::kDefaultSeed;
  std::vector<std::string> versions;
  std::string root = ".";
};

}  // namespace

std::vector<std::string> pinned_versions(const std::string& repo_root) {
  const fs::path root(repo_root);
  std::vector<std::string> out;
  const Regex name("requirements-(.+)\\.txt");
  for (const auto& e : fs::directory_iterator(root / "golden")) {
    RegexMatch m;
    const std::string file = e.path().filename().string();
    if (name.matches(file, m)) out.push_back(m.str(1));
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

int setup_env(const fs::path& root, const std::string& version) {
  return shell("bash " + quoted(root / "golden/setup_env.sh") + " " + version + " >&2");
}

// Dumps every case (hand-written and generated) for one version into `out`, its environment set up.
int dump_only(const fs::path& root, const std::string& version, const fs::path& out) {
  std::string cmd = quoted(root / ("golden/.venv-" + version) / "bin/python") + " " + quoted(root / "golden/dump.py") +
                    " --cases " + quoted(root / "cases");
  for (const fs::path& extra : scenario_folders(root))
    if (extra != root / "cases" && !fs::is_empty(extra)) cmd += " " + quoted(extra);
  return shell(cmd + " --out " + quoted(out));
}

int dump(const fs::path& root, const std::string& version, const fs::path& out) {
  if (int rc = setup_env(root, version); rc != 0) return rc;
  return dump_only(root, version, out);
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
int compare_dirs(const fs::path& committed, const fs::path& fresh, bool* bytes_equal) {
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
      *bytes_equal = false;
      if (n != "manifest.json" && equivalent_fixtures(committed / n, fresh / n)) continue;
      std::cout << "differs: " << (committed / n).string() << "\n";
      ++differences;
    }
  }
  return differences;
}

// The installed transformers package of a release's venv: its folder, or why there is none to key by
// (an editable install runs a source tree that can change under an unchanged venv).
struct InstalledPackage {
  fs::path dir;
  std::string not_kept;  // non-empty: why no pass may be kept for this venv
};
InstalledPackage installed_transformers(const fs::path& venv) {
  std::error_code ec;
  for (const auto& lib : fs::directory_iterator(venv / "lib", ec)) {
    const fs::path site = lib.path() / "site-packages";
    for (const auto& e : fs::directory_iterator(site, ec)) {
      const std::string name = e.path().filename().string();
      if (name.rfind("transformers-", 0) != 0 || e.path().extension() != ".dist-info") continue;
      const fs::path direct_url = e.path() / "direct_url.json";
      if (fs::exists(direct_url, ec)) {
        const auto j = nlohmann::json::parse(cases::read_file(direct_url.string()), nullptr, false);
        if (j.is_object() && j.value("dir_info", nlohmann::json::object()).value("editable", false))
          return {{}, "transformers is an editable install (" + direct_url.string() + ")"};
      }
      if (fs::is_directory(site / "transformers", ec)) return {site / "transformers", ""};
      return {{}, "transformers' files are not in " + site.string()};
    }
  }
  return {{}, "no installed transformers in " + venv.string()};
}

// The files of golden/ a dump runs: dump.py, the golden/ modules it imports (and theirs, found by
// their import lines, so that a module dump.py comes to import joins the key by itself), the
// environment's setup script and the release's pins. Not the rest of golden/ (its README, tests,
// crosscheck, timeline and mutation tools), whose edits made every release dump again in 17 of the
// 37 commits of three days that changed golden/ or the scenarios, for the same verdict.
std::vector<fs::path> dumper_files(const fs::path& root, const std::string& version) {
  const fs::path dir = root / "golden";
  std::set<fs::path> modules;
  std::vector<fs::path> todo = {dir / "dump.py"};
  static const Regex import_line(R"(^\s*(?:import|from)\s+([A-Za-z_][A-Za-z0-9_]*))");
  while (!todo.empty()) {
    const fs::path f = todo.back();
    todo.pop_back();
    if (!fs::is_regular_file(f) || !modules.insert(f).second) continue;
    std::ifstream in(f);
    RegexMatch m;
    for (std::string line; std::getline(in, line);)
      if (import_line.search(line, m)) todo.push_back(dir / (m.str(1) + ".py"));
  }
  std::vector<fs::path> files(modules.begin(), modules.end());
  files.push_back(dir / "setup_env.sh");
  files.push_back(dir / ("requirements-" + version + ".txt"));
  return files;
}

// golden --check's verdict for a release is a function of the dumper (dumper_files), every
// scenario file, the committed fixtures, the release's environment (its venv folder is named by the
// sha256 of its pins, and the content of every source file of the transformers package installed
// there: a locally patched transformers in an unchanged venv is a new key) and the CPU: a key over
// all of them that once dumped byte for byte identical need not be dumped again. Only a
// byte-identical pass is kept (no tolerance judged, no binary involved). Empty, with `why` set: no
// pass is kept for this release (an editable transformers).
std::string check_key(const fs::path& root, const std::string& version, std::string* why) {
  const fs::path venv = fs::weakly_canonical(root / ("golden/.venv-" + version));
  const InstalledPackage package = installed_transformers(venv);
  if (!package.not_kept.empty()) {
    *why = package.not_kept;
    return "";
  }
  std::string all = "golden --check 3\n" + version + "\n" + venv.filename().string() + "\n";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);)
    if (line.rfind("model name", 0) == 0 || line.rfind("flags", 0) == 0) {
      all += line + "\n";
      if (line.rfind("flags", 0) == 0) break;
    }
  auto add = [&](const fs::path& file) {
    all += fs::relative(file, root).string() + " " + cases::sha256_hex(cases::read_file(file.string())) + "\n";
  };
  auto add_folder = [&](const fs::path& dir, bool recursive) {
    std::vector<fs::path> files;
    if (recursive) {
      for (const auto& e : fs::recursive_directory_iterator(dir))
        if (e.is_regular_file()) files.push_back(e.path());
    } else {
      for (const auto& e : fs::directory_iterator(dir))
        if (e.is_regular_file()) files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& f : files) add(f);
  };
  for (const fs::path& f : dumper_files(root, version))
    if (fs::is_regular_file(f)) add(f);
  for (const fs::path& dir : scenario_folders(root)) add_folder(dir, false);
  // Every .py of the installed package (about 3,000 files, 0.3 s of CPU): what the dump may execute.
  std::vector<fs::path> sources;
  for (const auto& e : fs::recursive_directory_iterator(package.dir))
    if (e.is_regular_file() && e.path().extension() == ".py") sources.push_back(e.path());
  std::sort(sources.begin(), sources.end());
  for (const fs::path& f : sources)
    all += "transformers/" + f.lexically_relative(package.dir).string() + " " + cases::sha256_hex(cases::read_file(f.string())) +
           "\n";
  if (fs::is_directory(root / "golden/fixtures" / version)) add_folder(root / "golden/fixtures" / version, true);
  return cases::sha256_hex(all);
}

fs::path check_cache_dir() {
  if (const char* c = std::getenv("KVC_CACHE")) return fs::path(c) / "golden-check";
  if (const char* x = std::getenv("XDG_CACHE_HOME")) return fs::path(x) / "kvconform/golden-check";
  const char* home = std::getenv("HOME");
  return fs::path(home ? home : "/tmp") / ".cache/kvconform/golden-check";
}

int write_corpus(const fs::path& root, int count, uint64_t seed) {
  const fs::path dir = root / "cases/generated";
  const fs::path tmp = root / "cases/.generated.tmp";
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  std::vector<nlohmann::ordered_json> docs = corpus::generate(seed, count);
  for (auto& doc : corpus::generate_rare(seed, corpus::kRareCases)) docs.push_back(std::move(doc));
  for (const auto& doc : docs) {
    const std::string text = doc.dump(2) + "\n";
    cases::parse_case(text, doc["name"].get<std::string>() + ".json");  // every file must load
    std::ofstream(tmp / (doc["name"].get<std::string>() + ".json")) << text;
  }
  fs::remove_all(dir);
  fs::rename(tmp, dir);  // all or nothing
  std::cout << "wrote " << count << " cases and " << corpus::kRareCases << " for the mask builders' rare branches to "
            << dir.string() << " (seed " << seed << ")\n";
  return 0;
}
}  // namespace

Runner add_golden_command(CLI::App& app) {
  auto args = std::make_shared<GoldenArgs>();
  CLI::App* cmd = app.add_subcommand("golden", "Regenerate golden fixtures from the pinned transformers versions");
  cmd->add_flag("--check", args->check, "Dump into a temporary folder and report any difference from the committed fixtures");
  cmd->add_option(
         "--generate-corpus", args->corpus,
         "Write N random cases, and 12 for the mask builders' rare branches, to cases/generated/ (replacing it) and stop")
      ->check(CLI::PositiveNumber);
  add_seed_option(cmd, args->seed, "Seed of the generated corpus: case i is drawn from case_seed(seed, i)");
  CLI::Option* release =
      cmd->add_option("--release", args->versions, "Only these transformers releases (default: every golden/requirements-*.txt)");
  add_old_spelling(cmd, "--version", release, args->versions);
  cmd->add_flag("--no-cache", args->no_cache,
                "--check dumps every release again, even one whose inputs (dumper, cases, fixtures, environment, CPU) "
                "once dumped identical");
  cmd->add_flag("--print-check-key", args->print_key,
                "With --check: print each release's key of kept passes (or why none is kept) and stop");
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
      // --print-check-key reads the environment as it is (a test points it at a patched copy).
      if (!args->print_key)
        if (int rc = setup_env(root, v); rc != 0) return rc == 2 ? 2 : 1;
      std::string not_kept;
      const std::string key = check_key(root, v, &not_kept);
      if (args->print_key) {
        std::cout << v << " " << (key.empty() ? "not kept: " + not_kept : key) << "\n";
        continue;
      }
      if (key.empty()) std::cout << "golden --check " << v << ": dumping (no pass is kept: " << not_kept << ")\n";
      const fs::path passed = check_cache_dir() / (key.empty() ? "-" : key);
      if (!args->no_cache && !key.empty() && fs::exists(passed)) {
        std::cout << "golden --check " << v << ": identical (its inputs dumped identical before: key " << key.substr(0, 16)
                  << " in " << check_cache_dir().string() << "; --no-cache dumps again)\n";
        continue;
      }
      // its own folder: two checks at once (CI's beside a ctest's) must not dump into each other
      const fs::path fresh = fs::temp_directory_path() / ("kvconform-golden-check-" + v + "-" + std::to_string(::getpid()));
      fs::remove_all(fresh);
      if (int rc = dump_only(root, v, fresh); rc != 0) return rc == 2 ? 2 : 1;
      bool bytes_equal = true;
      const int d = compare_dirs(committed, fresh, &bytes_equal);
      std::cout << "golden --check " << v << ": " << (d == 0 ? "identical" : std::to_string(d) + " files differ") << "\n";
      differences += d;
      fs::remove_all(fresh);
      if (d == 0 && bytes_equal && !args->no_cache && !key.empty()) {
        std::error_code ec;
        fs::create_directories(check_cache_dir(), ec);
        report::write_file_atomically(passed.string(), "golden --check " + v + ": identical\n");
      }
    }
    return differences == 0 ? 0 : 1;
  };
}

}  // namespace kvc::cli
