// report.html: one self-contained page (inline CSS and SVG, no scripts, no external assets).
#include <algorithm>
#include <cstdio>
#include <sstream>
#include <utility>
#include <vector>

#include "kvconform/report.h"

namespace kvc::report {

namespace {
std::string esc(std::string_view s) { return xml_escape(s, false); }
std::string attr(std::string_view s) { return xml_escape(s, true); }

const char* status_class(Status s) {
  switch (s) {
    case Status::Pass: return "ok";
    case Status::Fail: return "fail";
    case Status::Deviation: return "dev";
    case Status::Skipped: return "skip";
  }
  return "";
}

// What an expectations file made of the case (docs/expectations.md), beside its status badge.
std::string expectation_note(const CaseResult& c) {
  if (c.expectation.outcome.empty()) return "";
  std::string words = c.expectation.outcome == "expected_failure"  ? "expected failure"
                      : c.expectation.outcome == "unexpected_pass" ? "unexpected pass"
                                                                   : "expected skip";
  return " <span class=\"expect\" title=\"" +
         attr(c.expectation.file + ":" + std::to_string(c.expectation.line) + ": " + c.expectation.reason) + "\">" + words +
         "</span>";
}

constexpr const char* kStyle = R"css(
:root{--ok:#1a7f37;--fail:#cf222e;--dev:#9a6700;--skip:#6e7781;--ink:#1f2328;--muted:#57606a;--line:#d0d7de}
*{box-sizing:border-box}
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:var(--ink);margin:0;padding:24px 32px;background:#fff}
h1{font-size:24px;margin:0 0 4px}h2{font-size:19px;margin:28px 0 8px;border-bottom:1px solid var(--line);padding-bottom:4px}
h3{font-size:16px;margin:0 0 6px;font-family:ui-monospace,"DejaVu Sans Mono",monospace;overflow-wrap:anywhere}h4{font-size:14px;margin:14px 0 4px}
.meta{color:var(--muted);margin:0 0 14px}.meta code{color:var(--ink)}
.totals{display:flex;gap:12px;flex-wrap:wrap;margin:12px 0}
.total{border:1px solid var(--line);border-radius:8px;padding:10px 18px;min-width:120px}
.total .n{display:block;font-size:28px;font-weight:700}
.total.ok .n{color:var(--ok)}.total.fail .n{color:var(--fail)}.total.dev .n{color:var(--dev)}.total.skip .n{color:var(--skip)}
.verdict{font-weight:700;font-size:17px}.verdict.ok{color:var(--ok)}.verdict.fail{color:var(--fail)}
table{border-collapse:collapse;width:100%;font-size:14px}
th,td{border:1px solid var(--line);padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa}td.case{font-family:ui-monospace,"DejaVu Sans Mono",monospace;overflow-wrap:anywhere}
.badge{display:inline-block;border-radius:10px;padding:0 8px;font-size:12px;font-weight:700;color:#fff}
.expect{font-size:12px;color:var(--muted);font-style:italic}
.badge.ok{background:var(--ok)}.badge.fail{background:var(--fail)}.badge.dev{background:var(--dev)}.badge.skip{background:var(--skip)}
tr.fail td{background:#ffebe9}tr.dev td{background:#fff8c5}
article{border:1px solid var(--line);border-left:6px solid var(--fail);border-radius:6px;padding:14px 18px;margin:16px 0}
article.dev{border-left-color:var(--dev)}
.message{font-weight:600;margin:4px 0 10px}
pre{background:#f6f8fa;border:1px solid var(--line);border-radius:6px;padding:10px;overflow-x:auto;font:13px/1.4 ui-monospace,"DejaVu Sans Mono",monospace;white-space:pre-wrap;word-break:break-all}
pre.cmd{background:#0d1117;color:#e6edf3}
figure{margin:10px 0 14px}figcaption{font-size:13px;color:var(--muted);margin-bottom:4px}
.legend{display:flex;gap:14px;flex-wrap:wrap;font-size:13px;margin-top:6px}
.sw{display:inline-block;width:13px;height:13px;vertical-align:-2px;margin-right:4px;border:1px solid #8c959f}
.sw.att{background:#3b6fb6}.sw.msk{background:#e9edf2}.sw.extra{background:#d62728}.sw.missing{background:#ff9f1c}.sw.none{background:#fff}
svg text{font-family:ui-monospace,"DejaVu Sans Mono",monospace}
)css";

struct CellStyle {
  const char* fill;
  const char* glyph;  // drawn on mismatches
  const char* glyph_color;
  bool mismatch;
};

CellStyle cell_style(char c) {
  switch (c) {
    case '#': return {"#3b6fb6", nullptr, nullptr, false};
    case '.': return {"#e9edf2", nullptr, nullptr, false};
    case '+': return {"#d62728", "+", "#ffffff", true};
    case '-': return {"#ff9f1c", "\xE2\x88\x92", "#000000", true};  // U+2212 minus sign
    case ' ': return {"#ffffff", nullptr, nullptr, false};
    default: return {"#8c959f", "?", "#000000", false};
  }
}

void heatmap(std::ostringstream& os, const MaskPicture& m) {
  const int64_t cols = std::max<int64_t>(m.kv_length, 1);
  int64_t ncols = 0;
  for (const std::string& r : m.rows) ncols = std::max<int64_t>(ncols, static_cast<int64_t>(r.size()));
  ncols = std::max(ncols, cols);
  const int64_t nrows = static_cast<int64_t>(m.rows.size());
  const int cs = static_cast<int>(std::clamp<int64_t>(720 / ncols, 8, 24));
  size_t digits = 1;
  for (int64_t q : m.query_positions) digits = std::max(digits, std::to_string(q).size());
  digits = std::max(digits, std::to_string(m.kv_offset + ncols - 1).size());
  const int left = static_cast<int>(8 * digits) + 30, top = 44;
  const int width = left + static_cast<int>(ncols) * cs + 10, height = top + static_cast<int>(nrows) * cs + 10;
  const int label_every = cs >= 18 ? 1 : cs >= 12 ? 2 : cs >= 9 ? 5 : 10;

  int extra = 0, missing = 0;
  for (const std::string& r : m.rows)
    for (char c : r) {
      extra += c == '+';
      missing += c == '-';
    }
  os << "<figure class=\"heatmap\" data-mismatches=\"" << (extra + missing) << "\">\n<figcaption>" << esc(m.title);
  if (m.window > 0) os << " &#183; window " << m.window;
  os << " &#183; keys " << m.kv_offset << "&#8211;" << (m.kv_offset + m.kv_length - 1) << " (kv_offset " << m.kv_offset
     << ", kv_length " << m.kv_length << ")";
  if (extra + missing)
    os << " &#183; <strong>" << extra << " attended but must not be, " << missing << " must be attended but masked</strong>";
  os << "</figcaption>\n";
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height << "\" viewBox=\"0 0 " << width
     << " " << height << "\" role=\"img\" aria-label=\"" << attr("mask heatmap: " + m.title) << "\">\n";
  os << "<text x=\"" << left << "\" y=\"12\" font-size=\"11\" fill=\"#57606a\">key position &#8594;</text>\n";
  os << "<text x=\"4\" y=\"" << (top - 6) << "\" font-size=\"11\" fill=\"#57606a\">query</text>\n";
  for (int64_t j = 0; j < ncols; ++j) {
    const int64_t pos = m.kv_offset + j;
    if (pos % label_every != 0 && j != 0) continue;
    os << "<text x=\"" << (left + j * cs + cs / 2) << "\" y=\"" << (top - 6) << "\" font-size=\"" << std::min(11, cs)
       << "\" text-anchor=\"middle\">" << pos << "</text>\n";
  }
  for (int64_t i = 0; i < nrows; ++i) {
    const std::string& row = m.rows[static_cast<size_t>(i)];
    const int y = top + static_cast<int>(i) * cs;
    const std::string qlabel =
        i < static_cast<int64_t>(m.query_positions.size()) ? std::to_string(m.query_positions[static_cast<size_t>(i)]) : "?";
    os << "<text x=\"" << (left - 6) << "\" y=\"" << (y + cs / 2 + 4) << "\" font-size=\"" << std::min(11, cs)
       << "\" text-anchor=\"end\">" << qlabel << "</text>\n";
    for (int64_t j = 0; j < ncols; ++j) {
      const char c = j < static_cast<int64_t>(row.size()) ? row[static_cast<size_t>(j)] : ' ';
      const CellStyle st = cell_style(c);
      const int x = left + static_cast<int>(j) * cs;
      os << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"" << cs << "\" height=\"" << cs << "\" fill=\"" << st.fill
         << "\" stroke=\"" << (st.mismatch ? "#000000" : "#ffffff") << "\" stroke-width=\"" << (st.mismatch ? 2 : 1) << "\"";
      if (st.mismatch) {
        os << " class=\"mismatch\"><title>query " << qlabel << ", key " << (m.kv_offset + j)
           << (c == '+' ? ": attended but must not be" : ": must be attended but is masked") << "</title></rect>\n";
      } else {
        os << "/>\n";
      }
      if (st.glyph && cs >= 10)
        os << "<text x=\"" << (x + cs / 2) << "\" y=\"" << (y + cs / 2 + cs / 4) << "\" font-size=\"" << (cs * 3 / 4)
           << "\" font-weight=\"700\" text-anchor=\"middle\" fill=\"" << st.glyph_color << "\">" << st.glyph << "</text>\n";
    }
  }
  os << "</svg>\n";
  os << "<div class=\"legend\"><span><i class=\"sw att\"></i>attended (ok)</span><span><i class=\"sw msk\"></i>masked "
        "(ok)</span><span><i class=\"sw extra\"></i>+ attended but must not be</span><span><i class=\"sw "
        "missing\"></i>&#8722; must be attended but masked</span><span><i class=\"sw none\"></i>no key</span></div>\n";
  os << "</figure>\n";
}

void case_article(std::ostringstream& os, const CaseResult& c, size_t index) {
  os << "<article class=\"" << status_class(c.status) << "\" id=\"case-" << index << "\">\n";
  os << "<h3>" << esc(case_title(c)) << "</h3>\n";
  os << "<p class=\"id\">id <code>" << esc(c.id) << "</code></p>\n";
  os << "<div><span class=\"badge " << status_class(c.status) << "\">" << to_string(c.status) << "</span> suite " << esc(c.suite)
     << "</div>\n";
  if (!c.message.empty()) os << "<p class=\"message\">" << esc(c.message) << "</p>\n";
  if (!c.policy.empty())
    os << "<p class=\"policy\">judged by <code>" << esc(c.policy) << "</code>"
       << (c.bound >= 0 ? ", bound " + esc(bound_text(c.bound)) : std::string()) << "</p>\n";
  for (const MaskPicture& m : c.masks) heatmap(os, m);
  // The values: what was measured against what was allowed, then the message that names the
  // expected and the got value, then the detail.
  if (!c.detail.empty() || c.error >= 0 || c.status == Status::Fail) {
    os << "<h4>Expected vs got</h4>\n";
    if (c.error >= 0 || c.bound >= 0) {
      os << "<table class=\"values\"><tr><th>measured error</th><th>bound</th><th>margin (bound - error)</th></tr><tr><td>"
         << (c.error >= 0 ? esc(bound_text(c.error)) : std::string("-")) << "</td><td>"
         << (c.bound >= 0 ? esc(bound_text(c.bound)) : std::string("-")) << "</td><td>"
         << (has_margin(c) ? esc(bound_text(margin(c))) : std::string("-")) << "</td></tr></table>\n";
    }
    if (c.status == Status::Fail && !c.message.empty()) os << "<pre class=\"values\">" << esc(c.message) << "</pre>\n";
    if (!c.detail.empty()) os << "<pre class=\"detail\">" << esc(c.detail) << "</pre>\n";
  }
  if (!c.reproduce.empty()) os << "<h4>Reproduce</h4>\n<pre class=\"cmd\">" << esc(c.reproduce) << "</pre>\n";
  os << "</article>\n";
}
}  // namespace

std::string report_html(const RunSummary& run, const ReportOptions& options) {
  const int passed = run.count(Status::Pass), failed = run.count(Status::Fail);
  const int deviations = run.count(Status::Deviation), skipped = run.count(Status::Skipped);
  std::ostringstream os;
  os << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  os << "<title>kvconform: " << passed << " passed, " << failed << " failed</title>\n";
  os << "<style>" << kStyle << "</style>\n</head>\n<body>\n";
  os << "<header>\n<h1>kvconform report</h1>\n<p class=\"meta\">" << esc(run.tool_version) << " &#183; seed <code>" << run.seed
     << "</code>";
  if (run.record.shard_count > 1) os << " &#183; shard " << run.record.shard_index << " of " << run.record.shard_count;
  if (options.timings) {
    char buf[64];
    std::snprintf(buf, sizeof buf, " &#183; wall time %.1f s", options.timings->total_seconds);
    os << buf;
  }
  os << "</p>\n";
  if (!run.command.empty()) os << "<pre class=\"cmd\">" << esc(run.command) << "</pre>\n";
  os << "</header>\n";

  os << "<p class=\"verdict " << (failed ? "fail" : "ok") << "\" id=\"verdict\">" << passed << " passed, " << failed
     << " failed, " << deviations << " deviations, " << skipped << " skipped (" << run.cases.size() << " cases)</p>\n";
  os << "<section class=\"totals\" id=\"totals\">\n";
  os << "<div class=\"total ok\"><span class=\"n\">" << passed << "</span>passed</div>\n";
  os << "<div class=\"total fail\"><span class=\"n\">" << failed << "</span>failed</div>\n";
  os << "<div class=\"total dev\"><span class=\"n\">" << deviations << "</span>deviations</div>\n";
  os << "<div class=\"total skip\"><span class=\"n\">" << skipped << "</span>skipped</div>\n";
  os << "</section>\n";

  // Failures and deviations first, each with its picture; then a table per suite and backend.
  if (failed) {
    os << "<section id=\"failures\">\n<h2>Failures (" << failed << ")</h2>\n";
    for (size_t i = 0; i < run.cases.size(); ++i)
      if (run.cases[i].status == Status::Fail) case_article(os, run.cases[i], i);
    os << "</section>\n";
  }
  std::vector<size_t> unexpected;
  for (size_t i = 0; i < run.cases.size(); ++i)
    if (run.cases[i].expectation.outcome == "unexpected_pass") unexpected.push_back(i);
  if (!unexpected.empty()) {
    os << "<section id=\"unexpected-passes\">\n<h2>Unexpected passes</h2>\n<p>An expectations file expects these to fail, and every "
          "case of its entry passed (<code>--update-expectations</code> drops the entry; <code>--strict-expectations</code> fails the run).</p>\n<ul>\n";
    for (size_t i : unexpected) {
      const CaseResult& c = run.cases[i];
      os << "<li><code>" << esc(c.id) << "</code>: " << esc(c.expectation.file + ":" + std::to_string(c.expectation.line)) << " ("
         << esc(c.expectation.reason) << ")</li>\n";
    }
    os << "</ul>\n</section>\n";
  }
  if (deviations) {
    os << "<section id=\"deviations\">\n<h2>Upstream deviations (" << deviations << ")</h2>\n";
    for (size_t i = 0; i < run.cases.size(); ++i)
      if (run.cases[i].status == Status::Deviation) case_article(os, run.cases[i], i);
    os << "</section>\n";
  }

  // One table per suite and backend in the order they first ran ("golden on reference", "property on
  // reference", "backend on eager"): a heading counts what its own table holds, every status, so
  // that it agrees with the closing line. Rows: failures, deviations, skips, then passes.
  std::vector<std::pair<std::string, std::string>> groups;
  for (const CaseResult& c : run.cases)
    if (std::find(groups.begin(), groups.end(), std::pair{c.suite, c.backend}) == groups.end())
      groups.emplace_back(c.suite, c.backend);
  constexpr Status kRowOrder[] = {Status::Fail, Status::Deviation, Status::Skipped, Status::Pass};
  for (const auto& [suite, backend] : groups) {
    int n[4] = {0, 0, 0, 0}, total = 0;
    for (const CaseResult& c : run.cases)
      if (c.suite == suite && c.backend == backend) {
        ++total;
        ++n[static_cast<int>(c.status)];
      }
    os << "<section class=\"suite\" data-suite=\"" << attr(suite) << "\" data-backend=\"" << attr(backend) << "\">\n<h2>Suite "
       << esc(suite) << " on " << esc(backend) << ": " << n[static_cast<int>(Status::Pass)] << " of " << total << " passed";
    if (n[static_cast<int>(Status::Fail)]) os << ", " << n[static_cast<int>(Status::Fail)] << " failed";
    if (n[static_cast<int>(Status::Deviation)]) os << ", " << n[static_cast<int>(Status::Deviation)] << " deviations";
    if (n[static_cast<int>(Status::Skipped)]) os << ", " << n[static_cast<int>(Status::Skipped)] << " skipped";
    os << "</h2>\n<table>\n<thead><tr><th>Case</th><th>dtype</th><th>Status</th><th>Error / bound</th><th>Message</th></tr></thead>\n<tbody>\n";
    for (const Status wanted : kRowOrder)
      for (size_t i = 0; i < run.cases.size(); ++i) {
        const CaseResult& c = run.cases[i];
        if (c.suite != suite || c.backend != backend || c.status != wanted) continue;
        const bool linked = c.status == Status::Fail || c.status == Status::Deviation;
        os << "<tr class=\"" << status_class(c.status) << "\"";
        if (!c.expectation.outcome.empty()) os << " data-expectation=\"" << attr(c.expectation.outcome) << "\"";
        os << "><td class=\"case\">";
        if (linked) os << "<a href=\"#case-" << i << "\">";
        os << esc(c.id + "(" + c.params + ")");
        if (linked) os << "</a>";
        os << "</td><td>" << esc(c.dtype) << "</td><td><span class=\"badge " << status_class(c.status) << "\">"
           << to_string(c.status) << "</span>" << expectation_note(c) << "</td><td>" << esc(measured_text(c)) << "</td><td>"
           << esc(c.message) << "</td></tr>\n";
      }
    os << "</tbody>\n</table>\n</section>\n";
  }
  os << "</body>\n</html>\n";
  return os.str();
}

}  // namespace kvc::report
