// summary.md for a GitHub job summary ($GITHUB_STEP_SUMMARY): totals, one table per backend,
// then every failure with its message, mask, detail and reproduce command.
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "kvconform/report.h"

namespace kvc::report {

namespace {
// "bitwise", "same-dtype-reference, bound 0.002": the policy a case was judged by (tolerance.h).
std::string judged_text(const CaseResult& c) {
  if (c.policy.empty()) return "";
  if (c.error >= 0) return c.policy + ", " + measured_text(c);
  return c.policy + (c.bound > 0 ? ", bound " + bound_text(c.bound) : "");
}

// Beyond this many cases a backend's table lists only the cases that did not pass.
constexpr size_t kFullTableLimit = 100;

const char* badge(Status s) {
  switch (s) {
    case Status::Pass: return "✅ OK";
    case Status::Fail: return "❌ FAIL";
    case Status::Deviation: return "⚠️ DEVIATION";
    case Status::Skipped: return "⏭️ SKIP";
  }
  return "?";
}

// The badge, with what an expectations file made of the case (docs/expectations.md).
std::string badge(const CaseResult& c) {
  std::string b = badge(c.status);
  if (c.expectation.outcome == "expected_failure") b += " (expected failure)";
  if (c.expectation.outcome == "unexpected_pass") b += " (unexpected pass)";
  if (c.expectation.outcome == "expected_skip") b += " (expected skip)";
  return b;
}

// Text inside a table cell: no line breaks, no cell separators, no raw HTML.
std::string cell(std::string_view text) {
  std::string out;
  for (char ch : sanitize_utf8(text)) {
    switch (ch) {
      case '|': out += "\\|"; break;
      case '\n': out += "<br>"; break;
      case '\r': break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '`': out += "\\`"; break;
      case '*': out += "\\*"; break;
      case '_': out += "\\_"; break;
      case '[': out += "\\["; break;
      case ']': out += "\\]"; break;
      default: out += ch;
    }
  }
  return out;
}

// A fenced block whose fence is longer than any backtick run inside it.
std::string fenced(std::string_view text, const char* lang) {
  const std::string body = sanitize_utf8(text);
  size_t run = 0, longest = 0;
  for (char ch : body) {
    run = ch == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  const std::string fence(std::max<size_t>(3, longest + 1), '`');
  std::string out = fence + lang + "\n" + body;
  if (out.back() != '\n') out += "\n";
  return out + fence + "\n";
}

// `text` as inline code, its fence longer than any backtick run inside it.
std::string fenced_inline(std::string_view text) {
  const std::string body = sanitize_utf8(text);
  size_t run = 0, longest = 0;
  for (char ch : body) {
    run = ch == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  const std::string fence(longest + 1, '`');
  return fence + (longest ? " " + body + " " : body) + fence;
}

std::string mask_text(const MaskPicture& m) {
  size_t width = 1;
  for (int64_t q : m.query_positions) width = std::max(width, std::to_string(q).size());
  std::ostringstream os;
  os << m.title << "\n";
  os << "keys " << m.kv_offset << ".." << (m.kv_offset + m.kv_length - 1) << " (kv_offset " << m.kv_offset << ", kv_length "
     << m.kv_length << ")\n";
  for (size_t r = 0; r < m.rows.size(); ++r) {
    std::string label = r < m.query_positions.size() ? std::to_string(m.query_positions[r]) : "?";
    os << "q" << std::string(width - std::min(width, label.size()), ' ') << label << " " << m.rows[r] << "\n";
  }
  os << "# attended  . masked  + attended but must not be  - must be attended but masked\n";
  return os.str();
}
}  // namespace

std::string summary_markdown(const RunSummary& run, const ReportOptions& options) {
  std::ostringstream os;
  const int passed = run.count(Status::Pass), failed = run.count(Status::Fail);
  const int deviations = run.count(Status::Deviation), skipped = run.count(Status::Skipped);
  os << "## kvconform: " << (failed ? "❌ " : "✅ ") << passed << " passed, " << failed << " failed, " << deviations
     << " deviations, " << skipped << " skipped\n\n";
  os << "| cases | passed | failed | deviations | skipped | seed |\n|---:|---:|---:|---:|---:|---:|\n";
  os << "| " << run.cases.size() << " | " << passed << " | " << failed << " | " << deviations << " | " << skipped << " | "
     << run.seed << " |\n\n";
  if (!run.command.empty()) os << "Command:\n\n" << fenced(run.command, "sh") << "\n";
  if (!run.tool_version.empty()) os << "Tool: " << cell(run.tool_version);
  if (run.record.shard_count > 1)
    os << "; shard " << run.record.shard_index << " of " << run.record.shard_count << " (`kvconform merge` combines them)";
  if (options.timings) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "; wall time %.1f s", options.timings->total_seconds);
    os << buf;
  }
  os << "\n\n";

  for (const std::string& backend : backends_in_order(run)) {
    std::vector<const CaseResult*> rows;
    for (const CaseResult& c : run.cases)
      if (c.backend == backend) rows.push_back(&c);
    const size_t total = rows.size();
    int bp = 0;
    for (const CaseResult* c : rows) bp += c->status == Status::Pass;
    os << "### Backend `" << backend << "`: " << bp << " of " << total << " passed\n\n";
    if (total > kFullTableLimit)
      rows.erase(std::remove_if(rows.begin(), rows.end(),
                                [](const CaseResult* c) { return c->status == Status::Pass && c->expectation.outcome.empty(); }),
                 rows.end());
    if (!rows.empty()) {
      os << "| case | suite | dtype | judged by | status | message |\n|---|---|---|---|---|---|\n";
      for (const CaseResult* c : rows)
        os << "| " << cell(c->id + "(" + c->params + ")") << " | " << cell(c->suite) << " | " << cell(c->dtype) << " | "
           << cell(judged_text(*c)) << " | " << badge(*c) << " | " << cell(c->message) << " |\n";
      os << "\n";
    }
    if (rows.size() < total) os << "_" << (total - rows.size()) << " passing cases not listed; see summary.json._\n\n";
  }

  if (failed) {
    os << "### Failures\n\n";
    for (const CaseResult& c : run.cases) {
      if (c.status != Status::Fail) continue;
      os << "#### ❌ " << cell(case_title(c)) << "\n\n";
      os << "Id: " << fenced_inline(c.id) << "\n\n";
      if (!c.message.empty()) os << cell(c.message) << "\n\n";
      if (!c.policy.empty()) os << "Judged by " << judged_text(c) << ".\n\n";
      for (const MaskPicture& m : c.masks) os << fenced(mask_text(m), "text") << "\n";
      if (!c.detail.empty()) os << "<details><summary>detail</summary>\n\n" << fenced(c.detail, "text") << "\n</details>\n\n";
      if (!c.reproduce.empty()) os << "Reproduce:\n\n" << fenced(c.reproduce, "sh") << "\n";
    }
  }
  int unexpected = 0;
  for (const CaseResult& c : run.cases) unexpected += c.expectation.outcome == "unexpected_pass";
  if (unexpected) {
    os << "### Unexpected passes\n\nAn expectations file expects these to fail, and every case of its entry passed "
          "(`--update-expectations` drops the entry; `--strict-expectations` fails the run):\n\n";
    for (const CaseResult& c : run.cases)
      if (c.expectation.outcome == "unexpected_pass")
        os << "- " << fenced_inline(c.id) << ": " << cell(c.expectation.file + ":" + std::to_string(c.expectation.line)) << " ("
           << cell(c.expectation.reason) << ")\n";
    os << "\n";
  }
  if (deviations) {
    os << "### Upstream deviations\n\n";
    for (const CaseResult& c : run.cases)
      if (c.status == Status::Deviation)
        os << "- " << fenced_inline(c.id) << " " << cell(case_title(c))
           << (c.expectation.outcome.empty() ? "" : " (expected failure)") << ": " << cell(c.message)
           << (c.expectation.link.empty() ? "" : " " + cell(c.expectation.link)) << "\n";
    os << "\n";
  }
  return os.str();
}

}  // namespace kvc::report
