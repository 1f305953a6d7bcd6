// Reports written from a RunSummary (results.h): JUnit XML for CI test tabs, a JSON summary for
// tools, Markdown for a GitHub job summary and one self-contained HTML page for people.
// Deterministic: the same RunSummary (and options) gives byte-identical files. No LibTorch here.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvconform/results.h"

namespace kvc::report {

// Wall times, only written when a run asks for them (--timings): they make reports differ
// between otherwise identical runs.
struct Timings {
  double total_seconds = 0;
  std::vector<double> case_seconds;  // parallel to RunSummary::cases; negative or missing: not timed
};

struct ReportOptions {
  std::optional<Timings> timings;
};

// The JSON summary's "format" value; bump it when a field changes meaning.
inline constexpr const char* kSummaryFormat = "kvconform-summary-v1";

// summary.json read back into the RunSummary (and timings) it was written from: the inverse of
// summary_json for every field a report is rendered from (`replay` is not written; the reproduce
// line carries it). `kvconform merge` reads shards with it. Throws std::invalid_argument naming
// `where` (the file) and the JSON pointer of a missing or mistyped field.
struct ReadSummary {
  RunSummary run;
  std::optional<Timings> timings;
};
ReadSummary read_summary_json(std::string_view text, const std::string& where);

// The file names write_reports produces, in the order they are written.
std::vector<std::string> report_files();  // junit.xml, summary.json, summary.md, report.html

// Each report as text.
std::string junit_xml(const RunSummary& run, const ReportOptions& options = {});
std::string summary_json(const RunSummary& run, const ReportOptions& options = {});
std::string summary_markdown(const RunSummary& run, const ReportOptions& options = {});
std::string report_html(const RunSummary& run, const ReportOptions& options = {});

// Renders every report first, then writes each to a temporary file in `dir` (created if missing)
// and renames it into place, so a reader never sees a half-written file; on any error the
// temporaries are removed, files already in place stay as they were, and std::runtime_error
// names the file. Returns the paths written.
std::vector<std::string> write_reports(const RunSummary& run, const std::string& dir, const ReportOptions& options = {});

// "error 3.1e-04, bound 0.002, margin 0.0017": a case's measured error against its bound (empty
// where it measured none). The terminal's -v line and the Markdown/HTML reports use it.
std::string measured_text(const CaseResult& c);

// Writes `content` to `path` atomically (temporary file in the same folder + rename).
void write_file_atomically(const std::string& path, std::string_view content);

// Helpers shared by the writers (exposed for tests).
std::string xml_escape(std::string_view text, bool attribute = false);  // also drops invalid XML chars
std::string sanitize_utf8(std::string_view text);                       // invalid bytes -> U+FFFD
std::string case_title(const CaseResult& c);                            // "NAME(params) [backend, dtype]"
std::vector<std::string> backends_in_order(const RunSummary& run);      // first appearance order
std::string bound_text(double bound);                                   // a tolerance bound for people: "0", "9.54e-07"

}  // namespace kvc::report
