// The expectations format (docs/expectations.md): what a file means, the errors a bad one gets
// (file, line, field and value), what a run makes of it, and --update-expectations' rewrite.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "kvconform/expectations.h"

namespace kvc::expect {
namespace {

class Expectations : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("kvc-expect-" + std::to_string(getpid()) + "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& text, const std::string& name = "e.jsonc") {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }
  static std::string read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  // The error a file gets, or "" when it loads.
  std::string error_of(const std::string& text) {
    try {
      load(write(text), "e.jsonc", {"window_off_by_one", "unexplained"});
      return "";
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
  }
  std::filesystem::path dir_;
};

constexpr const char* kFile = R"(// Known failures of my kernel.
{
  "expectations": [
    // the first
    {
      "case": "^plugin/mine/kernel/decode/",
      "outcome": "fail",
      "reason": "decode reads one key too many",
      "link": "https://example.org/issues/1"
    },
    {
      "case": "^engine/mine/.*/rollback",  /* comments anywhere */
      "outcome": "fail",
      "family": "^gemma2$",
      "diagnosis": {"kind": "window_off_by_one", "delta": 1},
      "reason": "rollback keeps a stale key"
    },
    {"case": "hangs$", "outcome": "skip", "reason": "hangs the worker"}
  ]
}
)";

TEST_F(Expectations, AFileReadsWithItsLinesAndFields) {
  const std::vector<Expectation> e = load(write(kFile), "shown.jsonc", {"window_off_by_one"});
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[0].where(), "shown.jsonc:5");
  EXPECT_EQ(e[0].pattern, "^plugin/mine/kernel/decode/");
  EXPECT_EQ(e[0].outcome, Outcome::Fail);
  EXPECT_EQ(e[0].link, "https://example.org/issues/1");
  EXPECT_EQ(e[1].line, 11);
  EXPECT_EQ(e[1].family, "^gemma2$");
  EXPECT_EQ(e[1].diagnosis, "window_off_by_one");
  EXPECT_EQ(e[1].params, (nlohmann::json{{"delta", 1}}));
  EXPECT_EQ(e[2].line, 18);
  EXPECT_EQ(e[2].outcome, Outcome::Skip);
}

// Each bad input names the file, the line of the field, the field and the value, and loads nothing.
TEST_F(Expectations, ABadFileNamesFileLineFieldAndValue) {
  const auto one = [](const std::string& fields) { return "{\n  \"expectations\": [\n    {\n" + fields + "\n    }\n  ]\n}\n"; };
  EXPECT_EQ(error_of(one(R"("case": "x", "outcome": "fial", "reason": "r")")),
            "e.jsonc:4: /expectations/0/outcome: must be one of \"fail\", \"skip\", got \"fial\"");
  EXPECT_EQ(error_of(one("\"case\": \"x\",\n\"outcome\": \"fail\",\n\"reason\": \"\"")),
            "e.jsonc:6: /expectations/0/reason: must be a non-empty string, got \"\"");
  EXPECT_EQ(error_of(one(R"("outcome": "fail", "reason": "r")")), "e.jsonc:3: /expectations/0/case: missing, and required");
  EXPECT_NE(error_of(one(R"("case": "(", "outcome": "fail", "reason": "r")"))
                .find("e.jsonc:4: /expectations/0/case: not a regular expression"),
            std::string::npos);
  EXPECT_NE(error_of(one(R"("case": "x", "outcome": "fail", "reason": "r", "diagnosis": "window_of_by_one")"))
                .find("e.jsonc:4: /expectations/0/diagnosis: has none of the forms the format allows ("),
            std::string::npos)
      << error_of(one(R"("case": "x", "outcome": "fail", "reason": "r", "diagnosis": "window_of_by_one")"));
  // A kind of the format that the judge given to load() does not have.
  EXPECT_EQ(error_of(one(R"("case": "x", "outcome": "fail", "reason": "r", "diagnosis": {"kind": "chunk_size", "size": 2})")),
            "e.jsonc:4: /expectations/0/diagnosis: names no diagnosis kind of this judge (kinds: window_off_by_one, "
            "unexplained), got {\"kind\":\"chunk_size\",\"size\":2}");
  EXPECT_EQ(
      error_of(one("\"case\": \"x\", \"outcome\": \"fail\", \"reason\": \"r\",\n\"familly\": \"^gemma2$\"")),
      "e.jsonc:5: /expectations/0/familly: unknown field (case, outcome, reason, link, family, releases, diagnosis, error, failure)");
  EXPECT_EQ(
      error_of(one(R"("case": "x", "outcome": "fail", "reason": "r", "releases": {"fixed_in": "5.25"})")),
      "e.jsonc:4: /expectations/0/releases/fixed_in: must match ^[0-9]+\\.[0-9]+\\.[0-9]+$ (a release X.Y.Z), got \"5.25\"");
  EXPECT_EQ(error_of(one(R"("case": "x", "outcome": "fail", "reason": "r", "releases": {"until": "5.25.0"})")),
            "e.jsonc:4: /expectations/0/releases/until: unknown field (from, fixed_in)");
  EXPECT_EQ(
      error_of(one(R"("case": "x", "outcome": "fail", "reason": "r", "releases": {"from": "5.23.0", "fixed_in": "5.25.0"})")),
      "");
  EXPECT_EQ(
      error_of(one(R"("case": "x", "outcome": "fail", "reason": "r", "failure": "top1")")),
      "e.jsonc:4: /expectations/0/failure: must be \"logits\" (engine cases: any logit failure, whatever its diagnosis), got \"top1\"");
  EXPECT_EQ(
      error_of(one(R"("case": "x", "outcome": "fail", "reason": "r", "error": "a", "failure": "logits")")),
      "e.jsonc:3: /expectations/0: breaks a rule of the format: an entry gives at most one of diagnosis, error and failure; a "
      "skip entry names its cases by case alone (family, diagnosis, error and failure describe a failure, and a skipped "
      "case does not run)");
  EXPECT_NE(error_of(one(R"("case": "x", "outcome": "skip", "reason": "r", "error": "a")"))
                .find("e.jsonc:3: /expectations/0: breaks a rule of the format: "),
            std::string::npos);
  EXPECT_EQ(error_of("{\n  \"expectations\": [\n    {\"case\": \"x\",}\n  ]\n}\n").rfind("e.jsonc:3: not JSON", 0), 0u)
      << error_of("{\n  \"expectations\": [\n    {\"case\": \"x\",}\n  ]\n}\n");
  EXPECT_EQ(error_of(R"({"deviations": []})"),
            "e.jsonc:1: expected {\"expectations\": [...]} (an old known-deviations file: convert it with python3 "
            "scripts/known_to_expectations.py)");
  EXPECT_EQ(error_of(R"({"expectations": [], "extra": 1})"), "e.jsonc:1: /extra: unknown field ($schema, expectations)");
  EXPECT_EQ(error_of(R"({"expectations": [], "$schema": "docs/expectations.schema.json"})"), "");
  EXPECT_THROW(load((dir_ / "missing.jsonc").string(), "missing.jsonc"), std::invalid_argument);
}

report::CaseResult result(const std::string& id, report::Status s, const std::string& message = "") {
  report::CaseResult r = report::named(report::PropertyKey{id});
  r.status = s;
  r.message = message;
  return r;
}

// A run: an expected failure is a DEVIATION naming its entry; a failure the entry's qualifier does
// not describe stays a FAIL; a skip entry answers for its case; an entry whose cases passed is an
// unexpected pass (FAIL under strict); one that matches no case is reported.
TEST_F(Expectations, ARunJudgesByTheEntries) {
  Set set;
  set.add(load(write(R"({"expectations": [
    {"case": "^property/a$", "outcome": "fail", "reason": "known", "error": "too many keys"},
    {"case": "^property/b$", "outcome": "fail", "reason": "fixed since"},
    {"case": "^property/c$", "outcome": "skip", "reason": "hangs"},
    {"case": "^property/nothing$", "outcome": "fail", "reason": "gone"}
  ]})"),
               "e.jsonc"));
  report::CaseResult a = result("a", report::Status::Fail, "step 3: too many keys");
  ASSERT_NE(set.judge(a, a.id, "", {a.message, false, {}}), nullptr);
  EXPECT_EQ(a.status, report::Status::Deviation);
  EXPECT_EQ(a.message, "expected failure (e.jsonc:2: known): step 3: too many keys");
  EXPECT_EQ(a.expectation.outcome, "expected_failure");
  // Another failure of the same case is not the one expected: it stays a FAIL.
  report::CaseResult other = result("a", report::Status::Fail, "step 3: too few keys");
  EXPECT_EQ(set.judge(other, other.id, "", {other.message, false, {}}), nullptr);
  EXPECT_EQ(other.status, report::Status::Fail);
  EXPECT_TRUE(other.expectation.outcome.empty());
  // b passed: an unexpected pass.
  report::CaseResult b = result("b", report::Status::Pass, "12 cases");
  EXPECT_EQ(set.judge(b, b.id, "", {}), nullptr);
  // a passing once too (another run of it, a campaign's other plan): its entry excused a failure, so it stays.
  report::CaseResult a_passes = result("a", report::Status::Pass);
  EXPECT_EQ(set.judge(a_passes, a_passes.id, "", {}), nullptr);
  ASSERT_EQ(set.stale().size(), 1u);
  EXPECT_EQ(set.entries()[set.stale().front().entry].pattern, "^property/b$");
  std::vector<report::CaseResult> cases{a, b};
  EXPECT_EQ(set.mark_unexpected_passes(cases, false), 1);
  EXPECT_EQ(cases[1].status, report::Status::Pass);
  EXPECT_EQ(cases[1].expectation.outcome, "unexpected_pass");
  cases = {a, b};
  EXPECT_EQ(set.mark_unexpected_passes(cases, true), 1);
  EXPECT_EQ(cases[1].status, report::Status::Fail);
  // c is skipped, not run.
  ASSERT_NE(set.skip("property/c"), nullptr);
  EXPECT_EQ(set.skip("property/a"), nullptr);
  const report::CaseResult c = Set::skipped(report::PropertyKey{"c"}, *set.skip("property/c"));
  EXPECT_EQ(c.status, report::Status::Skipped);
  EXPECT_EQ(c.message, "expected skip (e.jsonc:4: hangs): not run");
  // Matched by no case of the run (nor judged): the fourth.
  EXPECT_EQ(set.unmatched({"property/a", "property/b", "property/c"}), std::vector<size_t>{3});
  Set fresh;
  fresh.add(std::vector<Expectation>(set.entries()));
  EXPECT_EQ(fresh.unmatched({"property/a"}), (std::vector<size_t>{1, 2, 3}));
}

// --update-expectations: the entries kept as written with their comments, the stale one dropped,
// the new failures added with the placeholder reason; the result loads and is a fixed point.
TEST_F(Expectations, UpdateKeepsTheRestAndRoundTrips) {
  const std::string path = write(kFile);
  update_file(path, {11}, {"plugin/mine/kernel/prefill/float32", "plugin/mine/kernel/a.b"});
  const std::string text = read(path);
  EXPECT_NE(text.find("// Known failures of my kernel."), std::string::npos) << text;
  EXPECT_NE(text.find("    // the first\n    {\n      \"case\": \"^plugin/mine/kernel/decode/\","), std::string::npos) << text;
  EXPECT_EQ(text.find("rollback keeps a stale key"), std::string::npos) << text;
  EXPECT_NE(text.find("{\"case\": \"hangs$\", \"outcome\": \"skip\", \"reason\": \"hangs the worker\"}"), std::string::npos)
      << text;
  const std::vector<Expectation> e = load(path, "e.jsonc");
  ASSERT_EQ(e.size(), 4u) << text;
  EXPECT_EQ(e[0].reason, "decode reads one key too many");
  EXPECT_EQ(e[1].outcome, Outcome::Skip);
  EXPECT_EQ(e[2].pattern, "^plugin/mine/kernel/prefill/float32$");
  EXPECT_EQ(e[3].pattern, "^plugin/mine/kernel/a\\.b$");
  EXPECT_EQ(e[3].reason, kPlaceholderReason);
  EXPECT_TRUE(Regex(e[3].pattern).search("plugin/mine/kernel/a.b"));
  EXPECT_FALSE(Regex(e[3].pattern).search("plugin/mine/kernel/axb"));
  // Nothing to drop or add: the same bytes.
  update_file(path, {}, {});
  EXPECT_EQ(read(path), text);
  // Every entry dropped: an empty list that still loads; a missing file is created.
  update_file(path, {e[0].line, e[1].line, e[2].line, e[3].line}, {});
  EXPECT_TRUE(load(path, "e.jsonc").empty()) << read(path);
  const std::string fresh = (dir_ / "sub" / "new.jsonc").string();
  update_file(fresh, {}, {"engine/x/m/p"});
  ASSERT_EQ(load(fresh, "new.jsonc").size(), 1u) << read(fresh);
  EXPECT_FALSE(std::filesystem::exists(fresh + ".tmp." + std::to_string(getpid())));
}

}  // namespace
}  // namespace kvc::expect
