#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "kvconform/report.h"
#include "sample_summary.h"
#include "scratch_dir.h"

namespace kvc::report {
namespace {

namespace fs = std::filesystem;
using testing::sample_summary;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

fs::path scratch_root() { return kvc::testing::scratch_root("kvc_report_test_"); }

fs::path fresh_dir(const std::string& name) {
  const fs::path d = scratch_root() / name;
  fs::remove_all(d);
  return d;
}

size_t occurrences(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + 1)) ++n;
  return n;
}

TEST(Escaping, XmlEscapesMarkupQuotesAndInvalidCharacters) {
  EXPECT_EQ(xml_escape("a<b>&\"c'"), "a&lt;b&gt;&amp;\"c'");
  EXPECT_EQ(xml_escape("a<b>&\"c'", true), "a&lt;b&gt;&amp;&quot;c&apos;");
  EXPECT_EQ(xml_escape("x\ny", true), "x&#10;y");
  EXPECT_EQ(xml_escape("x\ny"), "x\ny");
  EXPECT_EQ(xml_escape("\x01"), "\xEF\xBF\xBD");  // control character -> U+FFFD
  EXPECT_EQ(xml_escape("a\xff"
                       "b"),
            "a\xEF\xBF\xBD"
            "b");  // invalid UTF-8 byte
  EXPECT_EQ(xml_escape("µs ✅"), "µs ✅");
  EXPECT_EQ(sanitize_utf8("ok\xc3"), "ok\xEF\xBF\xBD");
}

TEST(Junit, OneTestcasePerCaseWithStatusElements) {
  const std::string xml = junit_xml(sample_summary());
  EXPECT_EQ(occurrences(xml, "<testcase "), 4u);
  EXPECT_NE(xml.find("<testsuites name=\"kvconform\" tests=\"4\" failures=\"1\" errors=\"0\" skipped=\"1\">"), std::string::npos);
  EXPECT_NE(xml.find("classname=\"property\" name=\"window_coverage(seed=7,iterations=100) [reference, mixed]\""),
            std::string::npos);
  EXPECT_NE(xml.find("<failure message=\"Extend(2) after 1 tokens"), std::string::npos);
  EXPECT_NE(xml.find("reproduce: kvconform run --property '^window_coverage$' --seed 7 --reproduce 'B8wdp5&amp;&lt;&gt;'"),
            std::string::npos);
  EXPECT_NE(xml.find("<skipped message=\"no float16 kernel on CPU\"/>"), std::string::npos);
  EXPECT_NE(xml.find("<property name=\"kvconform.status\" value=\"DEVIATION\"/>"), std::string::npos);
  EXPECT_NE(xml.find("<system-out>DEVIATION: dynamic sliding"), std::string::npos);
  EXPECT_EQ(xml.find('\x01'), std::string::npos);
  EXPECT_EQ(xml.find(" time="), std::string::npos);  // no timings unless asked
}

TEST(Junit, IsWellFormedXml) {
  if (std::system("python3 -c 'import xml.dom.minidom' >/dev/null 2>&1") != 0) GTEST_SKIP() << "python3 not available";
  const fs::path dir = fresh_dir("xml");
  write_reports(sample_summary(), dir.string());
  const std::string cmd =
      "python3 -c 'import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])' '" + (dir / "junit.xml").string() + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
}

TEST(Json, TotalsBackendsAndEveryCase) {
  const auto j = nlohmann::json::parse(summary_json(sample_summary()));
  EXPECT_EQ(j["format"], kSummaryFormat);
  EXPECT_EQ(j["seed"], 7);
  EXPECT_FALSE(j["ok"].get<bool>());
  EXPECT_EQ(j["totals"]["cases"], 4);
  EXPECT_EQ(j["totals"]["passed"], 1);
  EXPECT_EQ(j["totals"]["failed"], 1);
  EXPECT_EQ(j["totals"]["deviations"], 1);
  EXPECT_EQ(j["totals"]["skipped"], 1);
  ASSERT_EQ(j["backends"].size(), 3u);
  EXPECT_EQ(j["backends"][0]["backend"], "reference");
  EXPECT_EQ(j["backends"][0]["cases"], 2);
  ASSERT_EQ(j["cases"].size(), 4u);
  EXPECT_EQ(j["cases"][1]["status"], "FAIL");
  EXPECT_EQ(j["cases"][1]["title"], "window_coverage(seed=7,iterations=100) [reference, mixed]");
  EXPECT_EQ(j["cases"][1]["masks"][0]["rows"][1], "+##");
  EXPECT_FALSE(j.contains("total_seconds"));
}

TEST(Markdown, TablesPerBackendAndFailureWithReproduce) {
  const std::string md = summary_markdown(sample_summary());
  EXPECT_NE(md.find("1 passed, 1 failed, 1 deviations, 1 skipped"), std::string::npos);
  EXPECT_NE(md.find("### Backend `reference`: 1 of 2 passed"), std::string::npos);
  EXPECT_NE(md.find("### Backend `eager`"), std::string::npos);
  EXPECT_NE(md.find("### Backend `sdpa`"), std::string::npos);
  EXPECT_NE(md.find("#### ❌ window\\_coverage"), std::string::npos);
  // The detail holds ``` so its fence must be longer.
  EXPECT_NE(md.find("````text\nkvc::ScenarioConfig"), std::string::npos);
  EXPECT_NE(md.find("```sh\nkvconform run --property '^window_coverage$'"), std::string::npos);
  EXPECT_NE(md.find("q2 +##"), std::string::npos);
}

// A clean run's golden and property cases both run on "reference": a heading names its suite and
// counts only its own table, and the failures and deviations come before every table.
TEST(Html, HeadingsBySuiteWithFailuresAndDeviationsFirst) {
  RunSummary run = sample_summary();
  CaseResult golden = run.cases[0];
  rename(golden, GoldenKey{"5.24.0", "window3_static_sliding"});
  golden.backend = "reference";
  run.cases.push_back(golden);
  const std::string html = report_html(run);
  EXPECT_EQ(html.find("Backend reference"), std::string::npos);
  EXPECT_NE(html.find("<h2>Suite property on reference: 1 of 2 passed, 1 failed</h2>"), std::string::npos) << html;
  EXPECT_NE(html.find("<h2>Suite golden on reference: 1 of 1 passed</h2>"), std::string::npos);
  EXPECT_NE(html.find("<h2>Suite golden on eager: 0 of 1 passed, 1 deviations</h2>"), std::string::npos);
  EXPECT_NE(html.find("<h2>Suite golden on sdpa: 0 of 1 passed, 1 skipped</h2>"), std::string::npos);
  const size_t tables = html.find("<section class=\"suite\"");
  ASSERT_NE(tables, std::string::npos);
  EXPECT_LT(html.find("<section id=\"failures\">"), tables);
  EXPECT_LT(html.find("<section id=\"deviations\">"), tables);
  // Within a table, the failure before the pass it ran after.
  const size_t property = html.find("data-suite=\"property\"");
  EXPECT_LT(html.find("<tr class=\"fail\">", property), html.find("<tr class=\"ok\">", property));
  EXPECT_EQ(occurrences(html, "<section class=\"suite\""), 4u);
}

TEST(Html, SelfContainedWithTotalsHeatmapAndReproduce) {
  const std::string html = report_html(sample_summary());
  for (const char* external : {"<script", "<link", " src=", "https://", "url(", "@import"})
    EXPECT_EQ(html.find(external), std::string::npos) << external;
  // The only http:// is the SVG namespace name, which browsers never fetch.
  EXPECT_EQ(occurrences(html, "http://"), occurrences(html, "xmlns=\"http://www.w3.org/2000/svg\""));
  EXPECT_NE(html.find("id=\"totals\""), std::string::npos);
  EXPECT_NE(html.find("<figure class=\"heatmap\" data-mismatches=\"1\">"), std::string::npos);
  EXPECT_EQ(occurrences(html, "class=\"mismatch\""), 1u);
  EXPECT_NE(html.find("query 2, key 0: attended but must not be"), std::string::npos);
  EXPECT_NE(html.find("--reproduce 'B8wdp5&amp;&lt;&gt;'"), std::string::npos);
  EXPECT_NE(html.find("&lt;H=1&gt; &amp; \"quoted\""), std::string::npos);
  EXPECT_EQ(html.find('\x01'), std::string::npos);
}

// Every result carries its measured error, bound and margin (bound - error) in every format, and
// the Markdown and HTML reports name every case by its id. Fails when a writer drops a field.
TEST(MeasuredError, ErrorBoundAndMarginInEveryFormatAndIdsEverywhere) {
  const RunSummary run = sample_summary();
  const nlohmann::json j = nlohmann::json::parse(summary_json(run));
  EXPECT_DOUBLE_EQ(j["cases"][0]["error"].get<double>(), 0.0005);
  EXPECT_DOUBLE_EQ(j["cases"][0]["bound"].get<double>(), 0.002);
  EXPECT_DOUBLE_EQ(j["cases"][0]["margin"].get<double>(), 0.0015);
  EXPECT_DOUBLE_EQ(j["cases"][0]["margin_ratio"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(j["cases"][1]["margin"].get<double>(), 0.002 - 0.25);
  EXPECT_TRUE(j["cases"][2]["error"].is_null());  // judged no number
  EXPECT_TRUE(j["cases"][2]["margin"].is_null());
  const std::string xml = junit_xml(run);
  EXPECT_NE(xml.find("<property name=\"kvconform.error\" value=\"0.0005\"/>"), std::string::npos);
  EXPECT_NE(xml.find("<property name=\"kvconform.margin\" value=\"0.0015\"/>"), std::string::npos);
  EXPECT_NE(xml.find("<property name=\"kvconform.margin\" value=\"-0.248\"/>"), std::string::npos);
  const std::string md = summary_markdown(run);
  EXPECT_NE(md.find("error 0.0005, bound 0.002, margin 0.0015"), std::string::npos);
  EXPECT_NE(md.find("| property/stored\\_rows(seed=7"), std::string::npos);  // the id in the table
  EXPECT_NE(md.find("Id: `property/window_coverage`"), std::string::npos);   // and at the failure
  EXPECT_NE(md.find("`golden/5.24.0/window1_dynamic_sliding`"), std::string::npos);
  const std::string html = report_html(run);
  EXPECT_NE(html.find("property/stored_rows(seed=7"), std::string::npos);
  EXPECT_NE(html.find("id <code>property/window_coverage</code>"), std::string::npos);
  // The failure's "Expected vs got" shows the values: measured, bound, margin and the message.
  const size_t at = html.find("<h4>Expected vs got</h4>");
  ASSERT_NE(at, std::string::npos);
  EXPECT_NE(html.find("<td>0.25</td><td>0.002</td><td>-0.248</td>", at), std::string::npos);
  EXPECT_NE(html.find("<pre class=\"values\">Extend(2) after 1 tokens", at), std::string::npos);
}

// A result is named by its key before its case runs: its id is the key's, its display fields follow
// from the key, and reading those fields back gives the key again (what summary.json's reader checks).
TEST(CaseKey, NamesItsResultAndIsReadBackFromItsFields) {
  const std::vector<std::pair<CaseKey, std::string>> keys = {
      {GoldenKey{"5.24.0", "static_sliding_w4_decode"}, "golden/5.24.0/static_sliding_w4_decode"},
      {BackendKey{"decode_across_window", "static", "eager", "float32"}, "backend/decode_across_window/static/eager/float32"},
      {PropertyKey{"regressions/stored_rows/0123abcd"}, "property/regressions/stored_rows/0123abcd"},
      {PluginKey{"ring_buffer", "campaign/cache", "mixed"}, "plugin/ring_buffer/campaign/cache/mixed"},
      {EngineKey{"oracle", "gemma2-w4", "regressions/096b814dd710eb40"}, "engine/oracle/gemma2-w4/regressions/096b814dd710eb40"},
      {CampaignKey{"fuzz", "window_coverage"}, "fuzz/window_coverage"}};
  for (const auto& [key, id] : keys) {
    const CaseResult r = named(key);
    EXPECT_EQ(r.id, id);
    EXPECT_EQ(id_of(key), id);
    EXPECT_EQ(r.suite, suite_of(key));
    EXPECT_EQ(id_of(key_of(r)), id) << "the fields of " << id << " read back as another key";
  }
  // Renaming keeps the verdict and the fields the key does not name.
  CaseResult r = named(EngineKey{"oracle", "gemma2-w4", "long_run"});
  r.dtype = "float32";
  r.status = Status::Fail;
  rename(r, EngineKey{"oracle", "gemma2-w4", "regressions/00ff"});
  EXPECT_EQ(r.id, "engine/oracle/gemma2-w4/regressions/00ff");
  EXPECT_EQ(r.name, "gemma2-w4/regressions/00ff");
  EXPECT_EQ(r.dtype, "float32");
  EXPECT_EQ(r.status, Status::Fail);
}

TEST(WriteReports, ByteIdenticalForTheSameSummary) {
  const fs::path a = fresh_dir("a"), b = fresh_dir("b");
  const auto written = write_reports(sample_summary(), a.string());
  write_reports(sample_summary(), b.string());
  ASSERT_EQ(written.size(), 4u);
  for (const std::string& name : report_files()) {
    EXPECT_TRUE(fs::exists(a / name)) << name;
    EXPECT_EQ(slurp(a / name), slurp(b / name)) << name;
  }
  for (const auto& entry : fs::directory_iterator(a))
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << entry.path();
}

TEST(WriteReports, TimingsOnlyWhenAsked) {
  ReportOptions with;
  with.timings = Timings{1.5, {0.25, 0.5}};
  const std::string xml = junit_xml(sample_summary(), with);
  EXPECT_NE(xml.find("time=\"0.250\""), std::string::npos);
  EXPECT_NE(summary_json(sample_summary(), with).find("\"total_seconds\": 1.5"), std::string::npos);
  EXPECT_NE(summary_markdown(sample_summary(), with).find("wall time 1.5 s"), std::string::npos);
}

TEST(WriteReports, FailedWriteLeavesNoHalfWrittenFiles) {
  const fs::path dir = fresh_dir("atomic");
  fs::create_directories(dir);
  // Earlier reports stay as they were.
  { std::ofstream(dir / "junit.xml") << "previous"; }
  // A directory where the summary.json temporary must go makes that write fail.
  fs::create_directories(dir / (".summary.json.tmp-" + std::to_string(::getpid())));
  EXPECT_THROW(write_reports(sample_summary(), dir.string()), std::runtime_error);
  EXPECT_EQ(slurp(dir / "junit.xml"), "previous");
  EXPECT_FALSE(fs::exists(dir / ("." + std::string("junit.xml") + ".tmp-" + std::to_string(::getpid()))));
  EXPECT_FALSE(fs::exists(dir / "summary.json"));
  EXPECT_FALSE(fs::exists(dir / "report.html"));
}

TEST(WriteReports, UnwritableFolderThrows) {
  const fs::path dir = fresh_dir("file");
  fs::create_directories(dir.parent_path());
  { std::ofstream(dir) << "a file, not a folder"; }
  EXPECT_THROW(write_reports(sample_summary(), dir.string()), std::runtime_error);
}

// A shard's summary.json read back (read_summary_json, what `kvconform merge` reads) renders every
// report byte for byte as the summary it was written from: merge needs no second parser.
RunSummary sharded_sample() {
  RunSummary run = sample_summary();
  run.record.subcommand = "fuzz";
  run.record.build = "0123456789ab+dirty.feedfacecafe";
  run.record.shard_index = 1;
  run.record.shard_count = 3;
  run.record.counters = {{"rounds", 2}, {"cases/zeta", 7}, {"cases/alpha", 9}};  // kept in this order, not sorted
  run.record.files = {"cases/regressions/fuzz_a.json"};
  for (size_t i = 0; i < run.cases.size(); ++i) run.cases[i].ordinal = i == 2 ? -1 : static_cast<int64_t>(10 * i);
  return run;
}

TEST(ShardReport, ReadBackRendersTheSameBytes) {
  const RunSummary run = sharded_sample();
  ReportOptions timed;
  timed.timings = Timings{2.5, {0.25, -1, 0.5, 1e-7}};
  for (const ReportOptions& options : {ReportOptions{}, timed}) {
    const std::string json = summary_json(run, options);
    const ReadSummary back = read_summary_json(json, "shard/summary.json");
    ReportOptions again;
    again.timings = back.timings;
    EXPECT_EQ(back.timings.has_value(), options.timings.has_value());
    EXPECT_EQ(summary_json(back.run, again), json);
    EXPECT_EQ(junit_xml(back.run, again), junit_xml(run, options));
    EXPECT_EQ(summary_markdown(back.run, again), summary_markdown(run, options));
    EXPECT_EQ(report_html(back.run, again), report_html(run, options));
  }
  const ReadSummary back = read_summary_json(summary_json(run), "x");
  EXPECT_EQ(back.run.record.counters, run.record.counters);
  EXPECT_EQ(back.run.cases[1].ordinal, 10);
  EXPECT_EQ(back.run.cases[2].ordinal, -1);
  // A shard says it is one, in every format; the whole run (count 1) does not.
  EXPECT_NE(junit_xml(run).find("<property name=\"shard\" value=\"1/3\"/>"), std::string::npos);
  EXPECT_NE(summary_markdown(run).find("shard 1 of 3"), std::string::npos);
  EXPECT_NE(report_html(run).find("shard 1 of 3"), std::string::npos);
  RunSummary whole = run;
  whole.record.shard_index = 0;
  whole.record.shard_count = 1;
  EXPECT_EQ(junit_xml(whole).find("name=\"shard\""), std::string::npos);
  EXPECT_EQ(summary_markdown(whole).find("shard 0 of 1"), std::string::npos);
}

// What an expectations file made of a case (docs/expectations.md) is in every format and survives
// `kvconform merge`'s read-back; a summary with none writes no expectation field at all.
TEST(Expectations, EveryFormatSaysWhatTheEntryMadeOfTheCase) {
  RunSummary run = sharded_sample();
  const std::string plain = summary_json(run);
  EXPECT_EQ(plain.find("expectation"), std::string::npos);
  run.cases[0].expectation = {"unexpected_pass", "mine.jsonc", 4, "^property/stored_rows$", "fixed upstream", ""};
  run.cases[1].status = Status::Deviation;
  run.cases[1].expectation = {"expected_failure", "mine.jsonc", 9, "^property/", "window one too wide", "https://example.org/1"};
  const std::string json = summary_json(run);
  const nlohmann::json j = nlohmann::json::parse(json);
  EXPECT_EQ(j["cases"][1]["expectation"], (nlohmann::json{{"outcome", "expected_failure"},
                                                          {"file", "mine.jsonc"},
                                                          {"line", 9},
                                                          {"case", "^property/"},
                                                          {"reason", "window one too wide"},
                                                          {"link", "https://example.org/1"}}));
  EXPECT_EQ(j["cases"][0]["expectation"]["link"], nullptr);
  EXPECT_EQ(j["totals"]["expected_failures"], 1);
  EXPECT_EQ(j["totals"]["unexpected_passes"], 1);
  EXPECT_EQ(j["totals"]["expected_skips"], 0);
  const ReadSummary back = read_summary_json(json, "x");
  EXPECT_EQ(summary_json(back.run), json);
  EXPECT_EQ(back.run.cases[1].expectation.link, "https://example.org/1");
  const std::string xml = junit_xml(run);
  EXPECT_NE(xml.find("<property name=\"kvconform.expectation\" value=\"expected_failure\"/>"), std::string::npos);
  EXPECT_NE(xml.find("<property name=\"kvconform.expectation.entry\" value=\"mine.jsonc:9\"/>"), std::string::npos);
  EXPECT_NE(xml.find("<system-out>UNEXPECTED PASS: mine.jsonc:4 expects it to fail (fixed upstream)"), std::string::npos);
  EXPECT_NE(xml.find("DEVIATION (expected failure): "), std::string::npos);
  const std::string md = summary_markdown(run);
  EXPECT_NE(md.find("⚠️ DEVIATION (expected failure)"), std::string::npos);
  EXPECT_NE(md.find("### Unexpected passes"), std::string::npos);
  const std::string html = report_html(run);
  EXPECT_NE(html.find("data-expectation=\"expected_failure\""), std::string::npos);
  EXPECT_NE(html.find("<section id=\"unexpected-passes\">"), std::string::npos);
  EXPECT_NE(html.find(">expected failure</span>"), std::string::npos);
  std::string bad = json;
  const std::string from = "\"outcome\": \"expected_failure\"";
  bad.replace(bad.find(from), from.size(), "\"outcome\": \"expected_glory\"");
  EXPECT_THROW(read_summary_json(bad, "x"), std::invalid_argument);
}

TEST(ShardReport, ReadingNamesTheFileAndTheField) {
  const std::string json = summary_json(sharded_sample());
  const auto error_of = [](const std::string& text) {
    try {
      read_summary_json(text, "dir/summary.json");
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const auto edited = [&](const std::string& from, const std::string& to) {
    std::string s = json;
    const size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return s.replace(at, from.size(), to);
  };
  EXPECT_EQ(error_of("not json"), "dir/summary.json: : not a JSON object");
  EXPECT_EQ(error_of(edited("kvconform-summary-v1", "kvconform-summary-v0")),
            "dir/summary.json: /format: \"kvconform-summary-v0\", expected \"kvconform-summary-v1\"");
  EXPECT_EQ(error_of(edited("\"status\": \"FAIL\"", "\"status\": \"BROKEN\"")),
            "dir/summary.json: /cases/1/status: status \"BROKEN\" is none of OK, FAIL, DEVIATION, SKIP");
  EXPECT_EQ(error_of(edited("\"index\": 1", "\"index\": 3")),
            "dir/summary.json: /run/shard: index 3 of count 3 is not 0 <= index < count");
  EXPECT_EQ(error_of(edited("\"suite\": \"golden\"", "\"suite\": 5")), "dir/summary.json: /cases/2/suite: not a string");
  EXPECT_EQ(error_of(edited("\"name\": \"stored_rows\"", "\"name\": \"other\"")).substr(0, 48),
            "dir/summary.json: /cases/0/id: \"property/stored_");
  EXPECT_EQ(error_of(edited("\"rounds\": 2", "\"rounds\": \"2\"")), "dir/summary.json: /run/counters/rounds: not an integer");
}

}  // namespace
}  // namespace kvc::report
