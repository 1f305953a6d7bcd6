#include "cli_util.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <regex>
#include <stdexcept>

#include "kvconform/cases.h"
#include "kvconform/report.h"

namespace kvc::cli {

namespace {
std::string& stored_command_line() {
  static std::string line;
  return line;
}

long long parse_count(const std::string& text, const std::string& what) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos || text.size() > 9)
    throw std::invalid_argument(what + " '" + text + "' is not a non-negative integer");
  return std::stoll(text);
}
}  // namespace

std::string shell_quote(const std::string& word) {
  if (!word.empty() && word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%") ==
                           std::string::npos)
    return word;
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

void set_command_line(int argc, char** argv) {
  std::string line = "kvconform";  // not argv[0]: the path differs between machines
  for (int i = 1; i < argc; ++i) line += " " + shell_quote(argv[i]);
  stored_command_line() = line;
}

const std::string& command_line() { return stored_command_line(); }

void print_case_line(const report::CaseResult& r, bool verbose, size_t fail_detail_limit) {
  print_case_line(std::cout, r, verbose, fail_detail_limit);
  std::cout.flush();
}

void print_case_line(std::ostream& out, const report::CaseResult& r, bool verbose, size_t fail_detail_limit) {
  out << report::case_id(r) << "(" << r.params << "): " << to_string(r.status);
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
  report::write_file_atomically(dir_ + "/" + case_result_file(report::case_id(r)), text.str());
}

Selection Selection::make(const std::string& filter, const std::vector<std::string>& suites,
                          const std::string& case_regex, const std::string& property_regex) {
  Selection s;
  s.suites = suites;
  const auto compile = [](const std::string& flag, const std::string& text) -> std::optional<std::regex> {
    if (text.empty()) return std::nullopt;
    try {
      return std::regex(text);
    } catch (const std::regex_error&) {
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
  if (first == "golden" && golden_names && !std::regex_search(rest, *golden_names)) return false;
  if (first == "property" && property_names && !std::regex_search(rest, *property_names)) return false;
  return !filter || std::regex_search(id, *filter);
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

Shard resolve_shard(const std::string& flag) {
  if (!flag.empty()) return parse_shard(flag);
  const char* index = std::getenv("GTEST_SHARD_INDEX");
  const char* total = std::getenv("GTEST_TOTAL_SHARDS");
  const bool has_index = index && *index, has_total = total && *total;
  if (!has_index && !has_total) return {};
  if (has_index != has_total)
    throw std::invalid_argument("GTEST_SHARD_INDEX and GTEST_TOTAL_SHARDS must be set together");
  try {
    return parse_shard(std::string(index) + "/" + total);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("GTEST_SHARD_INDEX=") + index + ", GTEST_TOTAL_SHARDS=" + total + ": " +
                                e.what());
  }
}

std::vector<campaign::Property> select_properties(const std::string& regex) {
  std::regex pattern;
  try {
    pattern = std::regex(regex);
  } catch (const std::regex_error&) {
    throw std::invalid_argument("--property '" + regex + "' is not a valid regular expression");
  }
  std::vector<campaign::Property> selected;
  for (campaign::Property p : campaign::all_properties())
    if (std::regex_search(campaign::to_string(p), pattern)) selected.push_back(p);
  if (selected.empty()) throw std::invalid_argument("--property '" + regex + "' matches no property");
  return selected;
}

}  // namespace kvc::cli
