#include "kvconform/expectations.h"

#include "kvconform/json_schema.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "kvconform/behaviours.h"

namespace kvc::expect {

namespace {
using nlohmann::json;

// Where the entries of a JSON-with-comments expectations file are, found by one scan that skips
// strings and comments (nlohmann's parser, which validates the file, gives no positions): each
// entry's text [begin, end) and the line of each of its keys, and the top-level array's brackets.
struct Entry {
  size_t begin = 0, end = 0;
  int64_t line = 0;
  std::map<std::string, int64_t> key_lines;
};
struct Layout {
  size_t open = std::string::npos, close = std::string::npos;  // '[' and ']' of "expectations"
  std::vector<Entry> entries;
};

Layout scan(const std::string& t) {
  Layout out;
  std::vector<char> stack;
  int64_t line = 1;
  std::string last_string;
  for (size_t i = 0; i < t.size(); ++i) {
    const char c = t[i];
    if (c == '\n') {
      ++line;
    } else if (c == '/' && i + 1 < t.size() && t[i + 1] == '/') {
      while (i + 1 < t.size() && t[i + 1] != '\n') ++i;
    } else if (c == '/' && i + 1 < t.size() && t[i + 1] == '*') {
      for (i += 2; i + 1 < t.size() && !(t[i] == '*' && t[i + 1] == '/'); ++i)
        if (t[i] == '\n') ++line;
      ++i;
    } else if (c == '"') {
      std::string s;
      for (++i; i < t.size() && t[i] != '"'; ++i) {
        if (t[i] == '\\' && i + 1 < t.size()) ++i;
        s += t[i];
      }
      // A key of an entry: the string followed by ':' at depth 3 (object > array > entry).
      size_t k = i + 1;
      while (k < t.size() && std::isspace(static_cast<unsigned char>(t[k]))) ++k;
      if (k < t.size() && t[k] == ':' && stack.size() == 3 && !out.entries.empty()) out.entries.back().key_lines.emplace(s, line);
      last_string = s;
    } else if (c == '{' || c == '[') {
      stack.push_back(c);
      if (stack.size() == 2 && c == '[' && out.open == std::string::npos) out.open = i;
      if (stack.size() == 3 && c == '{' && i > out.open && out.close == std::string::npos)
        out.entries.push_back({i, i, line, {}});
    } else if (c == '}' || c == ']') {
      if (stack.size() == 3 && c == '}' && !out.entries.empty() && out.close == std::string::npos) out.entries.back().end = i + 1;
      if (stack.size() == 2 && c == ']' && out.open != std::string::npos && out.close == std::string::npos) out.close = i;
      if (!stack.empty()) stack.pop_back();
    }
  }
  return out;
}

int64_t line_of(const std::string& t, size_t byte) {
  return 1 + std::count(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(std::min(byte, t.size())), '\n');
}

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument(path + ": cannot be read (--expectations)");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void check_regex(const std::string& re, const std::string& at, const json& value) {
  try {
    Regex test(re);
  } catch (const RegexError& e) {
    throw std::invalid_argument(at + ": not a regular expression (" + e.what() + "), got " + value.dump());
  }
}

}  // namespace

const char* to_string(Outcome o) { return o == Outcome::Fail ? "fail" : "skip"; }

std::string regex_quote(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (std::string("\\^$.|?*+()[]{}").find(c) != std::string::npos) out += '\\';
    out += c;
  }
  return out;
}

std::vector<Expectation> load(const std::string& path, const std::string& shown,
                              const std::vector<std::string>& diagnosis_kinds) {
  if (!std::ifstream(path)) throw std::invalid_argument(shown + ": cannot be read (--expectations)");
  const std::string text = read(path);
  json j;
  try {
    j = json::parse(text, nullptr, true, /*ignore_comments=*/true);
  } catch (const json::parse_error& e) {
    throw std::invalid_argument(shown + ":" + std::to_string(line_of(text, e.byte ? e.byte - 1 : 0)) +
                                ": not JSON (with // and /* */ comments): " + e.what());
  }
  if (!j.is_object() || !j.contains("expectations") || !j["expectations"].is_array())
    throw std::invalid_argument(shown + ":1: expected {\"expectations\": [...]}" +
                                (j.is_object() && j.contains("deviations") ? " (an old known-deviations file: convert it with "
                                                                             "python3 scripts/known_to_expectations.py)"
                                                                           : ""));
  const Layout layout = scan(text);
  // The line a JSON pointer's field is on: an entry's key, else the entry's brace, else line 1.
  const auto line_at = [&](const std::string& pointer) -> int64_t {
    static const Regex in_entry("^/expectations/([0-9]+)(?:/([^/]+))?");
    RegexMatch m;
    if (!in_entry.search(pointer, m)) return 1;
    const size_t i = std::stoul(m.str(1));
    if (i >= layout.entries.size()) return 1;
    const auto it = layout.entries[i].key_lines.find(m.str(2));
    return m.matched(2) && it != layout.entries[i].key_lines.end() ? it->second : layout.entries[i].line;
  };
  // The format's rules are docs/expectations.schema.json's (compiled in): one check, the one editors
  // and Python validators read. What a schema cannot say follows: patterns that compile, and kinds the
  // judge knows.
  static const JsonSchema schema(expectations_schema_text());
  if (const auto v = schema.check(j))
    throw std::invalid_argument(shown + ":" + std::to_string(line_at(v->pointer)) + ": " +
                                (v->pointer.empty() ? "/" : v->pointer) + ": " + v->message);
  const json& list = j["expectations"];
  std::vector<Expectation> out;
  for (size_t i = 0; i < list.size(); ++i) {
    const json& d = list[i];
    const std::string at_entry = "/expectations/" + std::to_string(i);
    const auto at = [&](const std::string& key) {
      return shown + ":" + std::to_string(line_at(at_entry + "/" + key)) + ": " + at_entry + "/" + key;
    };
    Expectation e;
    e.file = shown;
    e.line = line_at(at_entry);
    e.pattern = d["case"];
    e.reason = d["reason"];
    check_regex(e.pattern, at("case"), d["case"]);
    e.outcome = d["outcome"] == "fail" ? Outcome::Fail : Outcome::Skip;
    if (d.contains("releases")) {
      e.from = d["releases"].value("from", "");
      e.fixed_in = d["releases"].value("fixed_in", "");
    }
    e.link = d.value("link", "");
    e.family = d.value("family", "");
    if (!e.family.empty()) check_regex(e.family, at("family"), d["family"]);
    if (d.contains("diagnosis")) {
      const json& g = d["diagnosis"];
      e.diagnosis = g.is_string() ? g.get<std::string>() : g["kind"].get<std::string>();
      // The schema lists every kind the judge has (a ctest holds the two lists equal); a caller may
      // name the kinds of the judge it runs.
      if (!diagnosis_kinds.empty() &&
          std::find(diagnosis_kinds.begin(), diagnosis_kinds.end(), e.diagnosis) == diagnosis_kinds.end()) {
        std::string all;
        for (const std::string& k : diagnosis_kinds) all += (all.empty() ? "" : ", ") + k;
        throw std::invalid_argument(at("diagnosis") + ": names no diagnosis kind of this judge (kinds: " + all + "), got " +
                                    g.dump());
      }
      if (g.is_object())
        for (const auto& [key, value] : g.items())
          if (key != "kind") e.params[key] = value;
    }
    e.error = d.value("error", "");
    e.any_logits = d.contains("failure");
    out.push_back(std::move(e));
  }
  return out;
}

void Set::add(std::vector<Expectation> entries) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Expectation& e : entries) {
    patterns_.emplace_back(e.pattern);
    families_.emplace_back(e.family.empty() ? std::string(".") : e.family);
    entries_.push_back(std::move(e));
    tally_.emplace_back();
  }
}

const Expectation* Set::skip(const std::string& id) const {
  for (size_t i = 0; i < entries_.size(); ++i)
    if (entries_[i].outcome == Outcome::Skip && patterns_[i].search(id) && in_release_range(entries_[i], id)) {
      std::lock_guard<std::mutex> lock(mutex_);
      const_cast<Tally&>(tally_[i]).seen = true;
      return &entries_[i];
    }
  return nullptr;
}

report::CaseResult Set::skipped(const report::CaseKey& key, const Expectation& e) {
  report::CaseResult r = report::named(key);
  r.status = report::Status::Skipped;
  r.message = "expected skip (" + e.where() + ": " + e.reason + (e.link.empty() ? "" : "; " + e.link) + "): not run";
  r.expectation = {"expected_skip", e.file, e.line, e.pattern, e.reason, e.link};
  return r;
}

std::string case_release(const std::string& id) {
  static const Regex release("^engine/[^/]*?-[a-z]?(\\d+\\.\\d+\\.\\d+)");
  RegexMatch m;
  return release.search(id, m) ? m.str(1) : "";
}

bool in_release_range(const Expectation& e, const std::string& id) {
  if (e.from.empty() && e.fixed_in.empty()) return true;
  const std::string v = case_release(id);
  if (v.empty()) return false;  // a range names releases: a case without one is not in it
  if (!e.from.empty() && release_components(v) < release_components(e.from)) return false;
  return e.fixed_in.empty() || release_components(v) < release_components(e.fixed_in);
}

const Expectation* Set::applies(size_t i, const std::string& id, const std::string& family) const {
  const Expectation& e = entries_[i];
  if (e.outcome != Outcome::Fail || !patterns_[i].search(id) || !in_release_range(e, id)) return nullptr;
  if (!e.family.empty() && (family.empty() || !families_[i].search(family))) return nullptr;
  return &e;
}

const Expectation* Set::judge(report::CaseResult& r, const std::string& id, const std::string& family, const Failure& failure) {
  if (r.status != report::Status::Fail && r.status != report::Status::Pass) return nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  const Expectation* excused = nullptr;
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Expectation* e = applies(i, id, family);
    if (!e) continue;
    Tally& t = tally_[i];
    t.seen = true;
    if (r.status == report::Status::Pass) {
      t.passed.push_back(id);
      continue;
    }
    if (excused) continue;
    bool fits = true;
    if (!e->error.empty()) fits = failure.error.find(e->error) != std::string::npos;
    if (e->any_logits) fits = failure.logits;
    if (!e->diagnosis.empty()) {
      fits = false;
      if (failure.logits && e->diagnosis == "unexplained") fits = failure.diagnoses.empty();
      for (const auto& [kind, params] : failure.logits ? failure.diagnoses : decltype(failure.diagnoses){}) {
        if (kind != e->diagnosis) continue;
        bool all = true;
        for (const auto& [key, value] : e->params.items()) all = all && params.contains(key) && params[key] == value;
        fits = fits || all;
      }
    }
    if (!fits) {
      ++t.failed;
      continue;
    }
    ++t.excused;
    excused = e;
  }
  if (excused) {
    r.status = report::Status::Deviation;
    r.message = "expected failure (" + excused->where() + ": " + excused->reason + "): " + r.message;
    r.expectation = {"expected_failure", excused->file, excused->line, excused->pattern, excused->reason, excused->link};
  }
  return excused;
}

std::vector<Set::Stale> Set::stale() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Stale> out;
  for (size_t i = 0; i < entries_.size(); ++i)
    if (tally_[i].excused == 0 && tally_[i].failed == 0 && !tally_[i].passed.empty()) out.push_back({i, tally_[i].passed});
  return out;
}

std::vector<size_t> Set::unmatched(const std::vector<std::string>& ids) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<size_t> out;
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (tally_[i].seen) continue;
    const Regex& re = patterns_[i];
    if (std::none_of(ids.begin(), ids.end(), [&](const std::string& id) { return re.search(id); })) out.push_back(i);
  }
  return out;
}

int Set::mark_unexpected_passes(std::vector<report::CaseResult>& cases, bool strict) const {
  int marked = 0;
  for (const Stale& s : stale()) {
    const Expectation& e = entries_[s.entry];
    const std::set<std::string> ids(s.passed.begin(), s.passed.end());
    for (report::CaseResult& c : cases) {
      if (c.status != report::Status::Pass || !ids.count(c.id) || !c.expectation.outcome.empty()) continue;
      c.expectation = {"unexpected_pass", e.file, e.line, e.pattern, e.reason, e.link};
      if (strict) {
        c.status = report::Status::Fail;
        c.message = "unexpected pass (--strict-expectations): " + e.where() + " expects this case to fail (" + e.reason +
                    "), and every case of that entry passed: remove the entry (--update-expectations); the run: " + c.message;
      }
      ++marked;
    }
  }
  return marked;
}

void update_file(const std::string& path, const std::set<int64_t>& drop_lines, const std::vector<std::string>& add) {
  std::string text;
  if (std::filesystem::exists(path)) {
    text = read(path);
  } else {
    text =
        "// kvconform expectations (docs/expectations.md): the cases expected to fail here, and why.\n"
        "{\n  \"expectations\": [\n  ]\n}\n";
  }
  const Layout layout = scan(text);
  if (layout.open == std::string::npos || layout.close == std::string::npos)
    throw std::invalid_argument(path + ": no \"expectations\" array to update");
  // The text before an entry: from the end of the element before it (or the '['), its comma taken out.
  const auto gap = [&](size_t from, size_t to) {
    std::string g = text.substr(from, to - from);
    for (size_t i = 0; i < g.size(); ++i) {
      if (g[i] == '/' && i + 1 < g.size() && g[i + 1] == '/') {
        while (i < g.size() && g[i] != '\n') ++i;
      } else if (g[i] == '/' && i + 1 < g.size() && g[i + 1] == '*') {
        i = g.find("*/", i + 2);
        if (i == std::string::npos) break;
        ++i;
      } else if (g[i] == ',') {
        g.erase(i, 1);
        break;
      }
    }
    return g;
  };
  std::string indent = "    ";
  if (!layout.entries.empty()) {
    const size_t bol = text.rfind('\n', layout.entries.front().begin);
    indent = text.substr(bol + 1, layout.entries.front().begin - bol - 1);
    if (indent.find_first_not_of(" \t") != std::string::npos) indent = "    ";
  }
  std::string body;
  bool first = true;
  size_t previous = layout.open + 1;
  for (const Entry& e : layout.entries) {
    const std::string before = gap(previous, e.begin);
    previous = e.end;
    if (drop_lines.count(e.line)) continue;
    body += (first ? "" : ",") + before + text.substr(e.begin, e.end - e.begin);
    first = false;
  }
  std::string trailing = gap(previous, layout.close);
  for (const std::string& id : add) {
    const json entry = {{"case", "^" + regex_quote(id) + "$"}, {"outcome", "fail"}, {"reason", kPlaceholderReason}};
    body += std::string(first ? "" : ",") + "\n" + indent + "{\n" + indent + "  \"case\": " + entry["case"].dump() + ",\n" +
            indent + "  \"outcome\": \"fail\",\n" + indent + "  \"reason\": " + entry["reason"].dump() + "\n" + indent + "}";
    first = false;
  }
  if (!add.empty() && trailing.find('\n') == std::string::npos)
    trailing = "\n" + indent.substr(0, indent.size() >= 2 ? indent.size() - 2 : 0);
  const std::string out = text.substr(0, layout.open + 1) + body + trailing + text.substr(layout.close);
  // Atomically: a temporary file beside it, renamed over it.
  const std::filesystem::path target(path);
  if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path());
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream o(tmp, std::ios::binary | std::ios::trunc);
    o << out;
    o.flush();
    if (!o) {
      std::filesystem::remove(tmp);
      throw std::runtime_error(path + ": could not write " + tmp);
    }
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace kvc::expect
