#include "cli_util.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include "kvconform/behaviours.h"
#include "kvconform/cases.h"
#include "kvconform/report.h"
#include "build_paths.h"

namespace kvc::cli {

namespace {
std::string& stored_command_line() {
  static std::string line;
  return line;
}

std::vector<std::string>& stored_arguments() {
  static std::vector<std::string> words;
  return words;
}

long long parse_count(const std::string& text, const std::string& what) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos || text.size() > 9)
    throw std::invalid_argument(what + " '" + text + "' is not a non-negative integer");
  return std::stoll(text);
}
}  // namespace

std::string shell_quote(const std::string& word) {
  if (!word.empty() &&
      word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%") == std::string::npos)
    return word;
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

void set_command_line(int argc, char** argv) {
  std::string line = "kvconform";  // not argv[0]: the path differs between machines
  for (int i = 1; i < argc; ++i) line += " " + shell_quote(argv[i]);
  stored_command_line() = line;
  stored_arguments().assign(argv + 1, argv + argc);
}

const std::string& command_line() { return stored_command_line(); }

std::string report_command() {
  static const std::vector<std::string> dropped = {"--shard", "--shard-count", "--report-dir"};
  std::string line = "kvconform";
  const std::vector<std::string>& words = stored_arguments();
  for (size_t i = 0; i < words.size(); ++i) {
    bool drop = false;
    for (const std::string& flag : dropped) {
      if (words[i] == flag) {
        drop = true;
        ++i;  // and its value
        break;
      }
      if (words[i].rfind(flag + "=", 0) == 0) drop = true;
    }
    if (!drop) line += " " + shell_quote(words[i]);
  }
  return line;
}

void print_case_line(const report::CaseResult& r, bool verbose, size_t fail_detail_limit) {
  print_case_line(std::cout, r, verbose, fail_detail_limit);
  std::cout.flush();
}

void print_case_line(std::ostream& out, const report::CaseResult& r, bool verbose, size_t fail_detail_limit) {
  out << r.id << "(" << r.params << "): " << to_string(r.status);
  if (!r.message.empty()) out << " " << (r.status == report::Status::Pass ? "(" + r.message + ")" : r.message);
  out << "\n";
  if (verbose && r.error >= 0) out << "  measured: " << report::measured_text(r) << " (" << r.policy << ")\n";
  if (r.status == report::Status::Fail) {
    if (!r.detail.empty() && (verbose || r.detail.size() <= fail_detail_limit))
      out << r.detail << (r.detail.back() == '\n' ? "" : "\n");
    if (!r.reproduce.empty()) out << "  reproduce: " << r.reproduce << "\n";
  }
}

std::string case_result_file(const std::string& id) { return cases::sha256_hex(id).substr(0, 16) + ".case"; }

CaseResults::CaseResults(std::string dir) : dir_(std::move(dir)) {
  if (dir_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
  std::filesystem::create_directories(dir_, ec);
  if (ec) throw std::runtime_error("--case-results " + dir_ + ": cannot be created: " + ec.message());
}

void CaseResults::record(const report::CaseResult& r, bool verbose) const {
  if (dir_.empty()) return;
  std::ostringstream text;
  text << to_string(r.status) << "\n";
  print_case_line(text, r, verbose);
  report::write_file_atomically(dir_ + "/" + case_result_file(r.id), text.str());
}

Selection Selection::make(const std::string& filter, const std::vector<std::string>& suites, const std::string& case_regex,
                          const std::string& property_regex) {
  Selection s;
  s.suites = suites;
  const auto compile = [](const std::string& flag, const std::string& text) -> std::optional<Regex> {
    if (text.empty()) return std::nullopt;
    try {
      return Regex(text);
    } catch (const RegexError&) {
      throw std::invalid_argument(flag + " '" + text + "' is not a valid regular expression");
    }
  };
  s.filter = compile("--filter", filter);
  s.golden_names = compile("--case", case_regex);
  s.property_names = compile("--property", property_regex);
  return s;
}

bool Selection::suite(const std::string& name) const {
  return suites.empty() || std::find(suites.begin(), suites.end(), name) != suites.end();
}

bool Selection::operator()(const std::string& id) const {
  const auto slash = id.find('/');
  const std::string first = id.substr(0, slash), rest = slash == std::string::npos ? "" : id.substr(slash + 1);
  if (!suite(first)) return false;
  if (first == "golden" && golden_names && !golden_names->search(rest)) return false;
  if (first == "property" && property_names && !property_names->search(rest)) return false;
  return !filter || filter->search(id);
}

Shard parse_shard(const std::string& text) {
  const auto slash = text.find('/');
  if (slash == std::string::npos) throw std::invalid_argument("--shard '" + text + "' is not of the form i/n");
  Shard s;
  s.index = parse_count(text.substr(0, slash), "shard index");
  s.count = parse_count(text.substr(slash + 1), "shard count");
  if (s.count < 1 || s.index >= s.count)
    throw std::invalid_argument("--shard '" + text + "': need 0 <= i < n (shards are numbered from 0, as in GoogleTest)");
  return s;
}

const char* process_environment(const char* name) { return std::getenv(name); }

namespace {
// A variable's value, or nullopt where it is unset or empty.
std::optional<std::string> variable(EnvLookup env, const char* name) {
  const char* v = env(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

long long variable_number(const std::string& name, const std::string& value) {
  try {
    return parse_count(value, name);
  } catch (const std::invalid_argument&) {
    throw std::invalid_argument(name + "=" + value + ": not a non-negative integer");
  }
}
}  // namespace

Shard resolve_shard(const std::string& flag, const std::string& count_flag, EnvLookup env) {
  // The count Kubernetes does not set: --shard-count, else KVC_SHARD_COUNT.
  std::optional<long long> count;
  std::string count_source;
  if (!count_flag.empty()) {
    count = variable_number("--shard-count", count_flag);
    count_source = "--shard-count " + count_flag;
  } else if (const auto v = variable(env, "KVC_SHARD_COUNT")) {
    count = variable_number("KVC_SHARD_COUNT", *v);
    count_source = "KVC_SHARD_COUNT=" + *v;
  }
  if (count && *count < 1) throw std::invalid_argument(count_source + ": the shard count must be at least 1");
  Shard s;
  const auto checked = [&](Shard shard) {
    if (count && *count != shard.count)
      throw std::invalid_argument(count_source + " contradicts " + shard.source + " (" + std::to_string(shard.index) + "/" +
                                  std::to_string(shard.count) + ")");
    return shard;
  };
  if (!flag.empty()) {
    s = parse_shard(flag);
    s.source = "--shard " + flag;
    return checked(s);
  }
  const auto gtest_index = variable(env, "GTEST_SHARD_INDEX"), gtest_total = variable(env, "GTEST_TOTAL_SHARDS");
  if (gtest_index || gtest_total) {
    if (!gtest_index || !gtest_total)
      throw std::invalid_argument("GTEST_SHARD_INDEX and GTEST_TOTAL_SHARDS must be set together (" +
                                  (gtest_index ? "GTEST_SHARD_INDEX=" + *gtest_index : "GTEST_TOTAL_SHARDS=" + *gtest_total) +
                                  " alone)");
    s.index = variable_number("GTEST_SHARD_INDEX", *gtest_index);
    s.count = variable_number("GTEST_TOTAL_SHARDS", *gtest_total);
    s.source = "GTEST_SHARD_INDEX=" + *gtest_index + ", GTEST_TOTAL_SHARDS=" + *gtest_total;
  } else if (const auto job = variable(env, "JOB_COMPLETION_INDEX")) {
    s.index = variable_number("JOB_COMPLETION_INDEX", *job);
    s.source = "JOB_COMPLETION_INDEX=" + *job;
    if (!count)
      throw std::invalid_argument(s.source +
                                  " (a Kubernetes Indexed Job) names the shard but not the count: pass "
                                  "--shard-count N or set KVC_SHARD_COUNT to the Job's completions");
    s.count = *count;
    if (s.index >= s.count)
      throw std::invalid_argument(s.source + ": need an index below the shard count (" + count_source + ")");
    return s;
  } else if (const auto task = variable(env, "SLURM_ARRAY_TASK_ID")) {
    const auto total = variable(env, "SLURM_ARRAY_TASK_COUNT");
    if (!total) throw std::invalid_argument("SLURM_ARRAY_TASK_ID=" + *task + " without SLURM_ARRAY_TASK_COUNT");
    const long long id = variable_number("SLURM_ARRAY_TASK_ID", *task);
    const auto min = variable(env, "SLURM_ARRAY_TASK_MIN"), step = variable(env, "SLURM_ARRAY_TASK_STEP");
    const long long first = min ? variable_number("SLURM_ARRAY_TASK_MIN", *min) : 0;
    const long long stride = step ? variable_number("SLURM_ARRAY_TASK_STEP", *step) : 1;
    s.source = "SLURM_ARRAY_TASK_ID=" + *task + (min ? ", SLURM_ARRAY_TASK_MIN=" + *min : "") +
               (step ? ", SLURM_ARRAY_TASK_STEP=" + *step : "") + ", SLURM_ARRAY_TASK_COUNT=" + *total;
    if (stride < 1 || id < first || (id - first) % stride != 0)
      throw std::invalid_argument(s.source +
                                  ": the task is not MIN + k * STEP (an array like --array=1-8 or 0-30:10 shards; "
                                  "a list like --array=1,5,6 does not)");
    s.index = (id - first) / stride;
    s.count = variable_number("SLURM_ARRAY_TASK_COUNT", *total);
  } else {
    if (count) throw std::invalid_argument(count_source + " is given, but no JOB_COMPLETION_INDEX names the shard");
    return s;
  }
  if (s.count < 1 || s.index >= s.count)
    throw std::invalid_argument(s.source + ": need 0 <= index < count (shards are numbered from 0, as in GoogleTest)");
  return checked(s);
}

void add_shard_options(CLI::App* cmd, std::string& shard, std::string& shard_count, const std::string& units) {
  cmd->add_option("--shard", shard,
                  "i/n: run only the " + units +
                      " u with u % n == i (0-based); wins over the schedulers' variables "
                      "(GTEST_SHARD_INDEX/GTEST_TOTAL_SHARDS, JOB_COMPLETION_INDEX, SLURM_ARRAY_TASK_ID; docs/sharding.md)");
  cmd->add_option("--shard-count", shard_count,
                  "The shard count of a Kubernetes Indexed Job (JOB_COMPLETION_INDEX names the shard; or KVC_SHARD_COUNT)");
}

std::vector<campaign::Property> select_properties(const std::string& regex) {
  std::optional<Regex> pattern;
  try {
    pattern.emplace(regex);
  } catch (const RegexError&) {
    throw std::invalid_argument("--property '" + regex + "' is not a valid regular expression");
  }
  std::vector<campaign::Property> selected;
  for (campaign::Property p : campaign::all_properties())
    if (pattern->search(campaign::to_string(p))) selected.push_back(p);
  if (selected.empty()) throw std::invalid_argument("--property '" + regex + "' matches no property");
  return selected;
}

// The running binary's absolute path (/proc/self/exe), for reproduce lines that work from anywhere.
std::string self_path() {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "kvconform";
  // kvconform-libtorch runs what the launcher beside it handed over: a user reruns the launcher.
  if (p.filename() == "kvconform-libtorch" && std::filesystem::exists(p.parent_path() / "kvconform", ec))
    return (p.parent_path() / "kvconform").string();
  return p.string();
}

std::string data_folder(const std::string& value, bool given, const std::string& rel) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!given && !fs::exists(value, ec)) {
    const fs::path installed = fs::path(self_path()).parent_path().parent_path() / "share" / "kvconform" / rel;
    if (fs::exists(installed, ec)) return installed.lexically_normal().string();
    // A binary in its build tree (build/cli/kvconform, as a pytest plugin or a reproduce
    // line runs it from another folder): the checkout it was built from, while it is there.
    const std::string source = kvc::paths::source_dir();  // empty in a wheel's binary
    const fs::path checkout = fs::path(source) / rel;
    if (!source.empty() && fs::exists(checkout, ec)) return checkout.lexically_normal().string();
  }
  return value;
}

std::string version_text() {
  namespace fs = std::filesystem;
  std::vector<std::string> releases;
  std::error_code ec;
  const fs::path root = data_folder("golden/fixtures", false, "golden/fixtures");
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_directory(ec) && Regex("[0-9]+(\\.[0-9]+)*").matches(it->path().filename().string()))
      releases.push_back(it->path().filename().string());
  std::sort(releases.begin(), releases.end(),
            // "4.57.6" before "5.13.1" before "5.24.0": numeric parts, not text ("5.9.0" < "5.13.1").
            [](const std::string& a, const std::string& b) { return release_components(a) < release_components(b); });
  std::string text = std::string(kToolVersion) + "\nbuild " + build_id() + "\ngolden fixtures: ";
  if (releases.empty()) return text + "none found (" + root.string() + ")";
  text += "transformers";
  for (size_t i = 0; i < releases.size(); ++i) text += (i ? ", " : " ") + releases[i];
  return text + " (" + fs::absolute(root).lexically_normal().string() + ")";
}

}  // namespace kvc::cli
