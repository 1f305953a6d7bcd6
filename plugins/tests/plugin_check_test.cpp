// check_plugin on the example plugins: the ring buffer passes everything; each mutant fails with a
// message naming its bug class; a crashing and a hanging plugin fail their cases and the run goes on.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "build_paths.h"
#include "kvcgen/plugin_campaign.h"
#include "kvconform/cases.h"
#include "kvconform/plugin_runner.h"
#include "target_files.h"

namespace kvc::plugin {
namespace {

using report::CaseResult;
using report::Status;

int count(const std::vector<CaseResult>& rs, Status s) {
  int n = 0;
  for (const auto& r : rs) n += r.status == s;
  return n;
}

// The first failure whose message contains `fragment`; empty when none.
std::string first_with(const std::vector<CaseResult>& rs, const std::string& fragment) {
  for (const auto& r : rs)
    if (r.status == Status::Fail && r.message.find(fragment) != std::string::npos) return r.name + ": " + r.message;
  return "";
}

std::string failures(const std::vector<CaseResult>& rs) {
  std::string s;
  for (const auto& r : rs)
    if (r.status != Status::Pass) s += r.name + " [" + r.dtype + "]: " + r.message + "\n" + r.detail + "\n";
  return s;
}

TEST(RingBufferPlugin, PassesEveryCheck) {
  const auto results = check_plugin(kvc::paths::target_file("ring_buffer"));
  ASSERT_GT(results.size(), 50u);
  EXPECT_EQ(count(results, Status::Pass), static_cast<int>(results.size())) << failures(results);
  for (const auto& r : results) {
    EXPECT_EQ(r.suite, "plugin");
    EXPECT_EQ(r.backend, "ring_buffer");
  }
  bool campaign_cache = false, campaign_kernel = false;
  for (const auto& r : results) {
    campaign_cache |= r.name == "campaign/cache";
    campaign_kernel |= r.name == "campaign/kernel";
  }
  EXPECT_TRUE(campaign_cache && campaign_kernel);
}

// Mutants are checked on the part their bug lives in, with a short campaign: enough to prove the catch.
PluginCheckOptions quick(bool cache = true, bool kernel = false) {
  PluginCheckOptions o;
  o.iterations = 10;
  o.cache = cache;
  o.kernel = kernel;
  return o;
}

TEST(MutantPlugin, WindowOffByOneIsCaughtByTheKernelCheck) {
  const auto results = check_plugin(kvc::paths::target_file("mutant_window_off_by_one"), quick(true, true));
  const std::string hit = first_with(results, "attention (window) max error");
  EXPECT_FALSE(hit.empty()) << failures(results);
  std::cout << "  e.g. " << hit << "\n";
  for (const auto& r : results)  // the cache itself is right
    if (r.name.rfind("cache/", 0) == 0) {
      EXPECT_EQ(r.status, Status::Pass) << r.name << ": " << r.message;
    }
}

// The numerics mutants of the kernel (docs/mutants.md, "Kernel mutants"): each FAILs a named numerics
// case, and the same cases pass on the correct kernel. Only the numerics cases run (--filter).
struct NumericsCatch {
  const char* plugin;
  const char* id;  // a case id fragment: the case that must fail
  const char* dtype;
  const char* fragment;  // in its message
};
// The ctest name's suffix (gtest_discover_tests prints the parameter): the plugin's file name, the case and
// the dtype, the same in every build, where gtest's default printed the struct's raw bytes.
void PrintTo(const NumericsCatch& c, std::ostream* os) {
  *os << std::filesystem::path(c.plugin).stem().string() << "/" << c.id << "/" << c.dtype;
}
class NumericsMutantPlugin : public ::testing::TestWithParam<NumericsCatch> {};
TEST_P(NumericsMutantPlugin, IsCaughtByANamedNumericsCase) {
  const NumericsCatch c = GetParam();
  PluginCheckOptions o = quick(false, true);
  o.iterations = 0;
  const std::string wanted = std::string("kernel/") + c.id;
  o.select = [&](const std::string& id) { return id.find(wanted) != std::string::npos; };
  const auto results = check_plugin(c.plugin, o);
  bool caught = false;
  for (const auto& r : results)
    if (r.dtype == c.dtype && r.status == Status::Fail && r.message.find(c.fragment) != std::string::npos) {
      caught = true;
      std::cout << "  e.g. " << r.name << " [" << r.dtype << "]: " << r.message << "\n";
    }
  EXPECT_TRUE(caught) << failures(results);
  o.select = [&](const std::string& id) { return id.find(wanted) != std::string::npos; };
  const auto correct = check_plugin(kvc::paths::target_file("ring_buffer"), o);
  ASSERT_FALSE(correct.empty());
  EXPECT_EQ(count(correct, Status::Pass), static_cast<int>(correct.size())) << failures(correct);
}
INSTANTIATE_TEST_SUITE_P(
    Numerics, NumericsMutantPlugin,
    ::testing::Values(
        NumericsCatch{kvc::paths::target_file("mutant_softmax_in_input_dtype"), "long_keys_4096/static", "float16", "max error"},
        NumericsCatch{kvc::paths::target_file("mutant_softmax_in_input_dtype"), "long_keys_4096/static", "bfloat16", "max error"},
        NumericsCatch{kvc::paths::target_file("mutant_f16_accumulation"), "long_keys_4096/static", "float16", "max error"},
        NumericsCatch{kvc::paths::target_file("mutant_f16_accumulation"), "long_keys_4096/static", "bfloat16", "max error"},
        NumericsCatch{kvc::paths::target_file("mutant_no_max_subtraction"), "large_logits/static", "float64", "NaN"},
        NumericsCatch{kvc::paths::target_file("mutant_no_max_subtraction"), "large_logits/static", "float16", "NaN"}));

// The kernel campaign's numerics share (one case in five: long ranges, large magnitudes, head_dim up
// to 256) finds the missing max subtraction on its own, with the default budget.
TEST(NumericsMutantPlugin, NoMaxSubtractionIsCaughtByTheCampaignToo) {
  PluginCheckOptions o = quick(false, true);
  o.iterations = 25;
  o.select = [](const std::string& id) { return id.find("/campaign/kernel/") != std::string::npos; };
  const auto results = check_plugin(kvc::paths::target_file("mutant_no_max_subtraction"), o);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].status, Status::Fail) << results[0].message;
  EXPECT_NE(results[0].message.find("NaN"), std::string::npos) << results[0].message;
  std::cout << "  e.g. " << results[0].message << "\n";
}

TEST(MutantPlugin, StaleKvOffsetIsCaughtByTheCacheCheck) {
  const auto results = check_plugin(kvc::paths::target_file("mutant_stale_kv_offset"), quick());
  const std::string hit = first_with(results, "get_mask_sizes(");
  EXPECT_NE(hit.find("kv_offset"), std::string::npos) << failures(results);
  std::cout << "  e.g. " << hit << "\n";
}

TEST(MutantPlugin, WrongOrderAfterWrapAroundIsCaught) {
  const auto results = check_plugin(kvc::paths::target_file("mutant_wrap_order"), quick());
  const std::string hit = first_with(results, "holds token");
  EXPECT_FALSE(hit.empty()) << failures(results);
  std::cout << "  e.g. " << hit << "\n";
  // The message names the step, the field and both tokens.
  EXPECT_NE(hit.find("step "), std::string::npos);
  EXPECT_NE(hit.find(", expected "), std::string::npos);
}

TEST(MutantPlugin, ReadingOneRowPastTheEndIsCaughtByGuardBytes) {
  const auto results = check_plugin(kvc::paths::target_file("mutant_read_past_end"), quick());
  const std::string hit = first_with(results, "cache_read wrote outside its output");
  EXPECT_NE(hit.find("past the end"), std::string::npos) << failures(results);
  std::cout << "  e.g. " << hit << "\n";
}

TEST(MutantPlugin, ACrashFailsItsCasesWithTheSignalAndTheRunGoesOn) {
  const auto results = check_plugin(kvc::paths::target_file("mutant_crash"), quick(true, true));
  const std::string hit = first_with(results, "crashed: killed by SIGSEGV");
  EXPECT_FALSE(hit.empty()) << failures(results);
  std::cout << "  e.g. " << hit << "\n";
  EXPECT_GT(count(results, Status::Pass), 0) << "the kernel cases after a crashed cache case must still run";
  // No random campaign after a crash (it would only repeat it), but its id stays, a SKIP with the reason.
  int campaigns = 0;
  for (const auto& r : results) {
    if (r.name.rfind("campaign/", 0) != 0) continue;
    ++campaigns;
    EXPECT_EQ(r.status, Status::Skipped) << r.name << ": " << r.message;
    EXPECT_NE(r.message.find("not run: the worker failed in plugin/"), std::string::npos) << r.message;
  }
  EXPECT_EQ(campaigns, 2) << "the cache and kernel campaigns keep their result lines";
}

// --max-worker-failures 1: after the first crash every remaining case is a SKIP that says why.
TEST(MutantPlugin, MaxWorkerFailuresGivesUpCleanly) {
  PluginCheckOptions o = quick(true, true);
  o.max_worker_failures = 1;
  const auto results = check_plugin(kvc::paths::target_file("mutant_crash"), o);
  int faults = 0, gave_up = 0;
  bool after = false;
  for (const auto& r : results) {
    if (worker_fault(r)) ++faults, after = true;
    else if (after) {
      EXPECT_EQ(r.status, Status::Skipped) << r.name << ": " << r.message;
      gave_up += r.message == gave_up_message(1);
    }
  }
  EXPECT_EQ(faults, 1) << failures(results);
  EXPECT_GT(gave_up, 2);
}

TEST(MutantPlugin, AHangFailsItsCasesWithTheTimeoutAndTheRunGoesOn) {
  PluginCheckOptions o;
  o.timeout_s = 0.5;
  o.kernel = false;
  const auto start = std::chrono::steady_clock::now();
  const auto results = check_plugin(kvc::paths::target_file("mutant_hang"), o);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string hit = first_with(results, "timed out after 0.5 s");
  EXPECT_FALSE(hit.empty()) << failures(results);
  std::cout << "  e.g. " << hit << "\n";
  EXPECT_GT(count(results, Status::Pass), 0);  // batch-1 cases do not hang
  EXPECT_LT(took, 30.0);
}

// The golden cases' step sequences (cases/*.json), replayed on the ring buffer and on the wrap-order mutant.
TEST(RingBufferPlugin, PassesTheGoldenCasesStepSequences) {
  PluginCheckOptions o;
  o.iterations = 0;
  o.cases_dir = std::string(kvc::paths::source_dir()) + "/cases";
  const auto results = check_plugin(kvc::paths::target_file("ring_buffer"), o);
  int golden = 0;
  for (const auto& r : results) golden += r.name.rfind("golden-", 0) == 0;
  EXPECT_GT(golden, 40);
  EXPECT_EQ(count(results, Status::Pass), static_cast<int>(results.size())) << failures(results);
  o.kernel = false;
  const auto mutant = check_plugin(kvc::paths::target_file("mutant_wrap_order"), o);
  EXPECT_FALSE(first_with(mutant, "holds token").empty());
}

// --save-regressions: the campaign's shrunk failure becomes a case file of the corpus
// (regressions/plugin/<plugin>/<hash>.json) that loads, that the same mutant then fails as its
// regressions case (and the ring buffer passes as a case file): a found bug becomes a permanent case.
TEST(MutantPlugin, ShrunkCampaignFailureIsSavedAsACaseThatFailsAgain) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("kvc_plugin_saved_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  PluginCheckOptions o = quick();
  o.save_regressions = dir.string();
  const auto results = check_plugin(kvc::paths::target_file("mutant_wrap_order"), o);
  std::string saved;
  for (const auto& r : results)
    if (r.name == "campaign/cache") saved = r.detail;
  const std::filesystem::path folder = dir / "plugin" / "mutant_wrap_order";
  ASSERT_NE(saved.find("saved as a case: " + folder.string() + "/"), std::string::npos) << failures(results);
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(folder)) files.push_back(e.path());
  ASSERT_EQ(files.size(), 1u);  // no temporary left beside it
  EXPECT_EQ(files[0].extension(), ".json");
  const Scenario c = cases::load_case(files[0].string());
  EXPECT_EQ(c.name, files[0].stem().string());  // a case file's name is its stem: the corpus's hash
  for (const Step& st : c.steps) EXPECT_FALSE(st.is_reset());
  PluginCheckOptions replay;
  replay.iterations = 0;
  replay.kernel = false;
  replay.regressions_root = dir.string();
  const std::string hash = files[0].stem().string();
  replay.select = [&](const std::string& id) {
    return id.find("/regressions/cache/mutant_wrap_order/" + hash + "/") != std::string::npos;
  };
  const auto again = check_plugin(kvc::paths::target_file("mutant_wrap_order"), replay);
  ASSERT_EQ(again.size(), 1u) << failures(again);
  EXPECT_EQ(again[0].status, Status::Fail);
  EXPECT_NE(again[0].message.find("holds token"), std::string::npos) << again[0].message;
  replay.regressions_root.clear();  // a mutant of the replay that ignores the corpus: nothing of it runs
  EXPECT_TRUE(check_plugin(kvc::paths::target_file("mutant_wrap_order"), replay).empty());
  replay.cases_dir = folder.string();  // the ring buffer's own corpus is not this one: the file as a case
  replay.select = [&](const std::string& id) { return id.find("/golden-cache/" + c.name + "/") != std::string::npos; };
  const auto good = check_plugin(kvc::paths::target_file("ring_buffer"), replay);
  ASSERT_EQ(good.size(), 1u) << failures(good);
  EXPECT_EQ(good[0].status, Status::Pass) << good[0].message;
  std::filesystem::remove_all(dir);
}

// A numerics failure of the kernel campaign (normal or large-magnitude inputs after an unjudged fill
// step) is saved too: the case file keeps its distribution and its fill step, and fails again.
TEST(MutantPlugin, ShrunkNumericsFailureIsSavedAsACaseThatFailsAgain) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("kvc_plugin_saved_numerics_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  PluginCheckOptions o = quick(false, true);
  o.iterations = 25;
  o.save_regressions = dir.string();
  o.select = [](const std::string& id) { return id.find("/campaign/") != std::string::npos; };
  const auto results = check_plugin(kvc::paths::target_file("mutant_no_max_subtraction"), o);
  ASSERT_EQ(results.size(), 1u) << failures(results);
  ASSERT_EQ(results[0].status, Status::Fail) << results[0].message;
  const std::filesystem::path folder = dir / "plugin" / "mutant_no_max_subtraction";
  ASSERT_NE(results[0].detail.find("saved as a case: " + folder.string() + "/"), std::string::npos) << results[0].detail;
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(folder)) files.push_back(e.path());
  ASSERT_EQ(files.size(), 1u);
  const Scenario c = cases::load_case(files[0].string());
  EXPECT_NE(c.distribution, inputs::Distribution::Mix64);
  ASSERT_FALSE(c.steps.empty());
  EXPECT_FALSE(c.steps[0].judged);  // the fill step
  PluginCheckOptions replay = quick(false, true);
  replay.iterations = 0;
  replay.cases_dir = folder.string();
  replay.select = [&](const std::string& id) { return id.find("/golden-kernel/" + c.name + "/") != std::string::npos; };
  const auto again = check_plugin(kvc::paths::target_file("mutant_no_max_subtraction"), replay);
  ASSERT_EQ(again.size(), 1u) << failures(again);
  EXPECT_EQ(again[0].status, Status::Fail) << again[0].message;
  const auto good = check_plugin(kvc::paths::target_file("ring_buffer"), replay);
  ASSERT_EQ(good.size(), 1u) << failures(good);
  EXPECT_EQ(good[0].status, Status::Pass) << good[0].message;
  std::filesystem::remove_all(dir);
}

TEST(PluginLoading, AMissingFileOrSymbolIsOneFailedCase) {
  auto results = check_plugin("/nonexistent/plugin.so");
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].name, "load");
  EXPECT_NE(results[0].message.find("cannot load"), std::string::npos);
  const PluginRun t = execute("libm.so.6", {}, 5);
  EXPECT_EQ(t.end, PluginRun::End::LoadFailed);
  EXPECT_NE(t.detail.find("kvc_plugin_get_api"), std::string::npos) << t.detail;
}

TEST(PluginRunner, ProbeReportsWhatThePluginExports) {
  const PluginRun t = execute(kvc::paths::target_file("ring_buffer"), {}, 5);
  ASSERT_TRUE(t.ok()) << t.detail;
  EXPECT_EQ(t.name, "ring_buffer");
  EXPECT_TRUE(t.has_attention);
  EXPECT_TRUE(t.has_cache);
}

// A plugin that answers KVC_ERR_UNSUPPORTED to everything is checked on nothing: every case is a
// SKIP (the random campaigns too), none a pass, so `kvconform run --plugin` exits 1 on it.
TEST(UnsupportedPlugin, EveryCaseIsSkippedNoneCountsAsPassed) {
  const auto results = check_plugin(kvc::paths::target_file("mutant_unsupported"), quick(true, true));
  ASSERT_FALSE(results.empty());
  EXPECT_EQ(count(results, Status::Pass), 0) << failures(results);
  EXPECT_EQ(count(results, Status::Skipped), static_cast<int>(results.size())) << failures(results);
}

}  // namespace
}  // namespace kvc::plugin
