// The committed fixtures replay through the reference, and the comparison can fail: tampered
// fixtures, another release's behaviours, a behaviours record that disagrees with the release
// table and malformed case files are each caught and named.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "build_paths.h"
#include "kvconform/fixture_format.h"
#include "kvconform/golden.h"
#include "kvconform/inputs.h"
#include "kvconform/tolerance.h"
#include "golden_record.h"

namespace kvc::golden {
namespace {

const std::string kRoot = kvc::paths::source_dir();

ReplayOptions options() {
  ReplayOptions o;
  o.fixtures_root = kRoot + "/golden/fixtures";
  o.cases_root = kRoot + "/cases";
  return o;
}

nlohmann::json fixture(const std::string& version, const std::string& name) {
  return nlohmann::json::parse(cases::read_file(kRoot + "/golden/fixtures/" + version + "/" + name + ".json"));
}

// The replay's verdict, through both ways of reaching it: check() (the fast path, which builds no
// record and falls back to compare() where anything differs) must give exactly what compare() gives
// on run_case's record, so every test below holds both.
report::CaseResult judged(const nlohmann::json& f, const Scenario& c, const Behaviours& b, Mutation m = Mutation::None) {
  const report::CaseResult slow = compare(f, run_case(c, b, m), c), fast = check(f, c, b, m);
  EXPECT_EQ(fast.status, slow.status) << c.name << ": fast " << fast.message << " / compare " << slow.message;
  EXPECT_EQ(fast.message, slow.message) << c.name;
  EXPECT_EQ(fast.detail, slow.detail) << c.name;
  EXPECT_EQ(fast.policy, slow.policy) << c.name;
  EXPECT_EQ(fast.bound, slow.bound) << c.name;
  return fast;
}

TEST(Golden, EveryCommittedFixtureReplays) {
  const auto results = replay(options());
  int hand_written = 0, generated = 0;
  for (const auto& r : results) {
    EXPECT_NE(r.status, report::Status::Fail) << r.name << ": " << r.message;
    (r.name.find("/gen_") != std::string::npos ? generated : hand_written)++;
  }
  // At least two transformers versions, at least 40 hand-written and 300 generated cases each.
  EXPECT_GE(fixture_versions(options().fixtures_root).size(), 2u);
  EXPECT_GE(hand_written, 2 * 40);
  EXPECT_GE(generated, 2 * 300);
}

// The fast path agrees with compare(run_case) on every committed fixture, and under each mutant of
// the reference on a fixed sample of them (every fifth), FAILs and their messages included.
TEST(Golden, FastCheckGivesCompareVerdictOnEveryFixtureAndMutant) {
  int judged_cases = 0, failed = 0, index = 0;
  for (const std::string& version : fixture_versions(options().fixtures_root)) {
    const nlohmann::json manifest =
        nlohmann::json::parse(cases::read_file(options().fixtures_root + "/" + version + "/manifest.json"));
    for (const auto& [name, entry] : manifest.at("cases").items()) {
      const Scenario c = cases::load_case(kRoot + "/" + entry.value("case_file", "cases/" + name + ".json"));
      const nlohmann::json f = fixture(version, name);
      const Behaviours b = fixture_behaviours(f, version, name).behaviours;
      std::vector<Mutation> mutations = {Mutation::None};
      if (index++ % 5 == 0) {
        const std::vector<Mutation> all = all_mutations();
        mutations.insert(mutations.end(), all.begin(), all.end());
      }
      for (Mutation m : mutations) {
        try {
          failed += judged(f, c, b, m).status == report::Status::Fail;
        } catch (const std::exception&) {  // the reference raised: both paths must raise it
          EXPECT_THROW(check(f, c, b, m), std::exception) << name;
        }
        ++judged_cases;
      }
    }
  }
  EXPECT_GT(judged_cases, 2000);
  EXPECT_GT(failed, 100);  // 416 measured: the mutants fail many, so both paths were compared on FAILs too
}

// Each result names the bound it was judged by: bitwise (0) against a fixture the same torch made,
// the dtype's epsilons (tolerance.h) against one from another torch, which must then still pass.
TEST(Golden, PolicyIsBitwiseForTheSameTorchAndDtypeEpsilonsOtherwise) {
  const Scenario c = cases::load_case(kRoot + "/cases/bfloat16_dynamic_sliding.json");
  const Behaviours b = behaviours_for_release("5.24.0");
  nlohmann::json f = fixture("5.24.0", c.name);
  report::CaseResult r = judged(f, c, b);
  EXPECT_EQ(r.status, report::Status::Pass) << r.message;
  EXPECT_EQ(r.policy, "bitwise");
  EXPECT_EQ(r.bound, 0.0);
  f["torch_version"] = "2.0.0+cpu";
  r = judged(f, c, b);
  EXPECT_EQ(r.status, report::Status::Pass) << r.message;
  EXPECT_EQ(r.policy, "dtype-epsilons");
  EXPECT_EQ(r.bound, std::max(attention_tolerance(DType::BFloat16).absolute, eager_tolerance(DType::BFloat16).absolute));
  EXPECT_GT(r.bound, 0.0);
  EXPECT_NE(r.detail.find("fixture from torch 2.0.0+cpu"), std::string::npos) << r.detail;
}

// The same torch under other CPU kernels (another pin, or none recorded: a fixture from before the
// pin) is another kernel: dtype epsilons, and the detail names both records.
TEST(Golden, PolicyIsDtypeEpsilonsForOtherCpuKernels) {
  const Scenario c = cases::load_case(kRoot + "/cases/dynamic_sliding_prefill_w.json");
  const Behaviours b = behaviours_for_release("5.24.0");
  nlohmann::json f = fixture("5.24.0", c.name);
  f["cpu_kernels"]["MKL_CBWR"] = "AUTO";
  report::CaseResult r = judged(f, c, b);
  EXPECT_EQ(r.status, report::Status::Pass) << r.message;
  EXPECT_EQ(r.policy, "dtype-epsilons");
  EXPECT_NE(r.detail.find("with ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=AUTO"), std::string::npos) << r.detail;
  EXPECT_NE(r.detail.find("the reference runs ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=COMPATIBLE"), std::string::npos) << r.detail;
  f.erase("cpu_kernels");
  r = judged(f, c, b);
  EXPECT_EQ(r.status, report::Status::Pass) << r.message;
  EXPECT_EQ(r.policy, "dtype-epsilons");
  EXPECT_NE(r.detail.find("with no CPU kernel record"), std::string::npos) << r.detail;
}

// This binary runs pinned (test_main.cpp), as kvconform does, and every committed fixture set was
// dumped under the same pin (golden/cpu_pin.py): the replay of the committed fixtures is bitwise.
TEST(Golden, CommittedFixturesRecordTheRunningCpuKernelPin) {
  const nlohmann::json& k = cpu_kernels();
  EXPECT_EQ(k.at("ATEN_CPU_CAPABILITY"), "avx2");
  EXPECT_EQ(k.at("MKL_CBWR"), "COMPATIBLE");
  EXPECT_EQ(k.at("ONEDNN_MAX_CPU_ISA"), "AVX2");
  EXPECT_EQ(k.at("aten_cpu_capability"), "AVX2");
  EXPECT_TRUE(pin_cpu_kernels().empty());
  for (const std::string& v : fixture_versions(options().fixtures_root)) {
    const auto m = nlohmann::json::parse(cases::read_file(options().fixtures_root + "/" + v + "/manifest.json"));
    EXPECT_EQ(m.value("cpu_kernels", nlohmann::json()), k) << v;
  }
  ReplayOptions o = options();
  o.name_regex = "^5\\.24\\.0/";
  for (const auto& r : replay(o)) EXPECT_EQ(r.policy, "bitwise") << r.name << ": " << r.detail;
}

TEST(Golden, UpstreamDeviationIsReportedNotHidden) {
  const Scenario c = cases::load_case(kRoot + "/cases/upstream_48280_returned_rows_vs_mask_sizes.json");
  const report::CaseResult r = judged(fixture("5.24.0", c.name), c, behaviours_for_release("5.24.0"));
  EXPECT_EQ(r.status, report::Status::Deviation);
  EXPECT_NE(r.message.find("get_mask_sizes said kv_length"), std::string::npos) << r.message;
}

// 4.56's SlidingWindowLayer, on an update longer than its capacity, returns only the new tokens
// with mask sizes that describe other rows: a query attends a later token, silently. The reference
// reproduces it (the fixture agrees) and the replay says so; the merged layer of 5.24 does not.
TEST(Golden, FutureTokenAttentionOf456IsAnUpstreamDeviation) {
  const Scenario c = cases::load_case(kRoot + "/cases/window2_static_sliding.json");
  const report::CaseResult old = judged(fixture("4.56.2", c.name), c, behaviours_for_release("4.56.2"));
  EXPECT_EQ(old.status, report::Status::Deviation) << old.message;
  EXPECT_NE(old.message.find("step 3 layer 0 (sliding_attention): the mask lets the query of token 3 (batch row 0) "
                             "attend key 1, which holds token 4, a future token"),
            std::string::npos)
      << old.message;
  EXPECT_EQ(judged(fixture("5.24.0", c.name), c, behaviours_for_release("5.24.0")).status, report::Status::Pass);
}

// The other kinds of forbidden row: window-1 dynamic layers (the upstream -0 slice keeps every row)
// let a query attend a token outside its window or chunk; a mask over a row never written is an
// unwritten row (no fixture has one, so a hand-made layer record).
TEST(Golden, ForbiddenRowsOutsideTheWindowOrUnwrittenAreNamed) {
  for (const char* name : {"window1_dynamic_sliding", "window1_dynamic_chunked"}) {
    const Scenario c = cases::load_case(kRoot + "/cases/" + name + ".json");
    const report::CaseResult r = judged(fixture("5.24.0", c.name), c, behaviours_for_release("5.24.0"));
    EXPECT_EQ(r.status, report::Status::Deviation);
    const std::string kind = std::string(name).find("chunked") != std::string::npos ? "chunk" : "window";
    EXPECT_NE(r.detail.find("attend key 0, which holds token 0, outside its " + kind), std::string::npos) << r.detail;
  }
  const Scenario c = cases::load_case(kRoot + "/cases/dynamic_full_baseline.json");
  const nlohmann::json layer = {{"errors", nlohmann::json::array()},
                                {"returned", {{"shape", {1, 1, 2, 4}}, {"rows", {nullptr, 0}}}},
                                {"mask_sizes", {{"kv_length", 2}, {"kv_offset", 0}}},
                                {"mask_function", {{"kind", "causal"}}},
                                {"sdpa_mask_skipped", false},
                                {"bool_mask", {{"11"}}}};
  const nlohmann::json f = {{"steps", {{{"token_range", {0, 1}}, {"layers", {layer}}}}}};
  std::vector<std::string> notes, deviations;
  detail::fixture_findings(f, c, notes, deviations);
  ASSERT_EQ(deviations.size(), 1u);
  EXPECT_NE(deviations[0].find("attend key 0, which holds an unwritten row"), std::string::npos) << deviations[0];
}

TEST(Golden, TamperedRowIsNamedWithBothValues) {
  const Scenario c = cases::load_case(kRoot + "/cases/tf_hybrid_cache.json");
  nlohmann::json f = fixture("4.57.6", c.name);
  f["steps"][1]["layers"][1]["stored"]["rows"][0] = 1;
  const report::CaseResult r = judged(f, c, behaviours_for_release("4.57.6"));
  EXPECT_EQ(r.status, report::Status::Fail);
  EXPECT_EQ(r.message, "step 1 layer 1 (sliding_attention): stored.rows[0]: transformers 1, reference 2");
}

TEST(Golden, TamperedAttentionOutputFailsBeyondTolerance) {
  const Scenario c = cases::load_case(kRoot + "/cases/tf_hybrid_cache.json");
  nlohmann::json f = fixture("4.57.6", c.name);
  std::string hex = f["steps"][0]["layers"][0]["attention"]["eager"]["hex"];
  hex[6] = hex[6] == '4' ? '5' : '4';  // the exponent byte of the first float32: a large change
  f["steps"][0]["layers"][0]["attention"]["eager"]["hex"] = hex;
  const report::CaseResult r = judged(f, c, behaviours_for_release("4.57.6"));
  EXPECT_EQ(r.status, report::Status::Fail);
  EXPECT_NE(r.message.find("attention.eager[0]"), std::string::npos) << r.message;
}

// Fixtures come from the same LibTorch as the reference, so attention is judged bit for bit: the
// lowest bit of one bfloat16 output (far below the 8-epsilon tolerance) is a failure.
TEST(Golden, FlippedLowBitOfBfloat16OutputFails) {
  const Scenario c = cases::load_case(kRoot + "/cases/bfloat16_dynamic_sliding.json");
  nlohmann::json f = fixture("5.24.0", c.name);
  EXPECT_EQ(judged(f, c, behaviours_for_release("5.24.0")).status, report::Status::Pass);
  std::string hex = f["steps"][0]["layers"][0]["attention"]["sdpa"]["hex"];
  const int nibble = std::stoi(hex.substr(1, 1), nullptr, 16) ^ 1;  // little-endian: element 0's lowest mantissa bit
  hex[1] = "0123456789abcdef"[nibble];
  f["steps"][0]["layers"][0]["attention"]["sdpa"]["hex"] = hex;
  const report::CaseResult r = judged(f, c, behaviours_for_release("5.24.0"));
  EXPECT_EQ(r.status, report::Status::Fail);
  EXPECT_NE(r.message.find("attention.sdpa[0]"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("judged bitwise"), std::string::npos) << r.message;
}

// Every field of the fixture is compared: provenance that the reference can state must agree.
TEST(Golden, FieldsBeyondRowsAndMasksAreCompared) {
  const Scenario c = cases::load_case(kRoot + "/cases/static_sliding_batch_left_padding.json");
  const Behaviours b = behaviours_for_release("5.24.0");
  const nlohmann::json good = fixture("5.24.0", c.name);
  ASSERT_EQ(judged(good, c, b).status, report::Status::Pass);
  auto fails_on = [&](const std::string& pointer, const nlohmann::json& value, const std::string& field) {
    nlohmann::json f = good;
    f[nlohmann::json::json_pointer(pointer)] = value;
    const report::CaseResult r = judged(f, c, b);
    EXPECT_EQ(r.status, report::Status::Fail) << pointer;
    EXPECT_NE(r.message.find(field), std::string::npos) << pointer << ": " << r.message;
  };
  fails_on("/layers/0/class", "SlidingWindowLayer", "layers[0].class");
  fails_on("/layers/0/capacity", 16, "layers[0].capacity");
  fails_on("/layers/0/is_compileable", false, "layers[0].is_compileable");
  fails_on("/steps/1/token_range/1", 9, "token_range[1]");
  fails_on("/steps/1/attention_mask_2d/1", "01111111", "attention_mask_2d[1]");
  fails_on("/steps/1/layers/0/mask_function/window", 5, "mask_function.window");
  fails_on("/steps/1/layers/0/eager_mask/masked_value", "-inf", "eager_mask.masked_value");
  fails_on("/steps/1/layers/0/eager_mask/dtype", "float16", "eager_mask.dtype");
  fails_on("/steps/1/layers/0/attention/eager/dtype", "float64", "attention.eager.dtype");
  // Each field the fast path reads on its own, and a key the reference does not write.
  fails_on("/steps/1/tokens", 2, "tokens");
  fails_on("/steps/1/index", 7, "index");
  fails_on("/steps/1/layers/0/cumulative_length_before", 99, "cumulative_length_before");
  fails_on("/steps/1/layers/0/cumulative_length_after", 99, "cumulative_length_after");
  fails_on("/steps/1/layers/0/mask_sizes/kv_offset", 3, "mask_sizes.kv_offset");
  fails_on("/steps/1/layers/0/mask_sizes/extra", 3, "mask_sizes.extra");
  fails_on("/steps/1/layers/0/q_positions/0", 3, "q_positions[0]");
  fails_on("/steps/1/layers/0/allow_is_causal_skip", true, "allow_is_causal_skip");
  fails_on("/steps/1/layers/0/sdpa_mask_skipped", true, "sdpa_mask_skipped");
  std::string row = good["steps"][1]["layers"][0]["bool_mask"][1][0];  // one query's keys, one flipped
  row[0] = row[0] == '1' ? '0' : '1';
  fails_on("/steps/1/layers/0/bool_mask/1/0", row, "bool_mask[1][0]");
  fails_on("/steps/1/layers/0/bool_mask/1/0", row + "1", "bool_mask[1][0]");
  fails_on("/steps/1/layers/0/sdpa_mask", nullptr, "sdpa_mask");
  fails_on("/steps/1/layers/0/eager_mask/sha256", "00", "eager_mask.sha256");
  fails_on("/steps/1/layers/0/eager_mask/extra", 1, "eager_mask.extra");
  fails_on("/steps/1/layers/0/returned/k_sha256", "00", "returned.k_sha256");
  fails_on("/steps/1/layers/0/returned/shape/2", 1, "returned.shape[2]");
  fails_on("/steps/1/layers/0/stored/v_sha256", "00", "stored.v_sha256");
  fails_on("/steps/1/layers/0/stored/rows/0", nullptr, "stored.rows[0]");
  fails_on("/steps/1/layers/0/attention/sdpa/shape/1", 2, "attention.sdpa.shape[1]");
  fails_on("/steps/1/layers/0/attention/sdpa", nullptr, "attention.sdpa");
  fails_on("/steps/1/layers/0/errors/0", {{"phase", "update"}, {"type", "IndexError"}, {"message", "x"}}, "errors.length");
  // The release's own builders' masks (mask_builders), which the fast path reads too.
  fails_on("/steps/1/layers/0/mask_builders/sized_from", 1, "mask_builders.sized_from");
  fails_on("/steps/1/layers/0/mask_builders/query_offset_from", 1, "mask_builders.query_offset_from");
  fails_on("/steps/1/layers/0/mask_builders/sdpa/skipped", true, "mask_builders.sdpa.skipped");
  fails_on("/steps/1/layers/0/mask_builders/eager/sha256", "00", "mask_builders.eager.sha256");
  fails_on("/steps/1/layers/0/mask_builders/flex/rows/1/0", row, "mask_builders.flex.rows[1][0]");
  fails_on("/steps/1/layers/0/mask_builders/flex/shape/3", 99, "mask_builders.flex.shape[3]");
}

// Every field of a call step is compared: the call itself, the counts, the stored rows, each
// attribute and what the call raised (its type; the wording of transformers' own raises is not
// LibTorch's, so only the type), and a call record that goes missing is named.
TEST(Golden, CallStepFieldsAreCompared) {
  const Scenario c = cases::load_case(kRoot + "/cases/call_crop_dynamic_past_window.json");
  const Behaviours b = behaviours_for_release("5.24.0");
  const nlohmann::json good = fixture("5.24.0", c.name);
  ASSERT_EQ(judged(good, c, b).status, report::Status::Pass);
  auto fails_on = [&](const std::string& pointer, const nlohmann::json& value, const std::string& field) {
    nlohmann::json f = good;
    f[nlohmann::json::json_pointer(pointer)] = value;
    const report::CaseResult r = judged(f, c, b);
    EXPECT_EQ(r.status, report::Status::Fail) << pointer;
    EXPECT_NE(r.message.find(field), std::string::npos) << pointer << ": " << r.message;
  };
  fails_on("/steps/1/call/method", "reset", "call.method");
  fails_on("/steps/1/call/argument", -2, "call.argument");
  fails_on("/steps/1/layers/1/cumulative_length_before", 4, "cumulative_length_before");
  fails_on("/steps/1/layers/1/cumulative_length_after", 5, "cumulative_length_after");
  fails_on("/steps/1/layers/1/stored/shape/2", 5, "stored.shape[2]");
  fails_on("/steps/1/layers/1/stored/rows/0", 1, "stored.rows[0]");
  fails_on("/steps/1/layers/1/stored/k_sha256", "00", "stored.k_sha256");
  fails_on("/steps/1/layers/0/attributes/is_croppable", false, "attributes.is_croppable");
  fails_on("/steps/1/layers/0/attributes/max_length", 4, "attributes.max_length");
  fails_on("/steps/1/layers/0/attributes/is_compileable", true, "attributes.is_compileable");
  fails_on("/steps/1/layers/0/errors/0/type", "ValueError", "errors[0].type");
  fails_on("/steps/1/layers/1/errors/0", {{"phase", "crop"}, {"type", "ValueError"}, {"message", "x"}}, "errors.length");
  nlohmann::json f = good;
  f["steps"][1].erase("call");  // an update step now: the reference's call is named, and the format check
  EXPECT_EQ(judged(f, c, b).status, report::Status::Fail);  // finds the update fields missing
  EXPECT_THROW(validate_fixture(f, "f.json", c.steps.size(), c.layer_types.size()), cases::CaseError);
}

// Up to 5.13 reset() keeps a dynamic layer's zeroed rows, which get_mask_sizes does not count: an
// upstream deviation. After a crop a layer refused, the case's positions are not the layer's
// tokens: its later steps are compared, not judged by the window rule (which would blame
// transformers for the case's bookkeeping).
TEST(Golden, ResetOfDynamicLayersUpTo513IsADeviationARefusedCropIsNot) {
  for (const char* release : {"4.57.6", "5.13.1"}) {
    const Scenario c = cases::load_case(kRoot + "/cases/call_reset_dynamic.json");
    const report::CaseResult r = judged(fixture(release, c.name), c, behaviours_for_release(release));
    EXPECT_EQ(r.status, report::Status::Deviation) << release;
    EXPECT_NE(r.message.find("step 2 layer 0 (sliding_attention): update returned 4 rows but get_mask_sizes said kv_length 2"),
              std::string::npos)
        << r.message;
  }
  const Scenario c = cases::load_case(kRoot + "/cases/call_reset_dynamic.json");
  EXPECT_EQ(judged(fixture("5.24.0", c.name), c, behaviours_for_release("5.24.0")).status, report::Status::Pass);
  for (const char* name : {"call_crop_positive_argument", "call_crop_past_recording", "call_crop_static_past_window"})
    for (const char* release : {"4.56.2", "5.13.1", "5.24.0"}) {
      const Scenario k = cases::load_case(kRoot + "/cases/" + name + ".json");
      const report::CaseResult r = judged(fixture(release, name), k, behaviours_for_release(release));
      EXPECT_EQ(r.status, report::Status::Pass) << release << "/" << name << ": " << r.message;
    }
}

TEST(Golden, ErrorTypesAndLibTorchMessagesAreCompared) {
  const Scenario c = cases::load_case(kRoot + "/cases/upstream_48280_returned_rows_vs_mask_sizes.json");
  const Behaviours b = behaviours_for_release("5.24.0");
  const nlohmann::json good = fixture("5.24.0", c.name);
  ASSERT_NE(judged(good, c, b).status, report::Status::Fail);
  nlohmann::json f = good;
  f["steps"][2]["layers"][0]["errors"][0]["type"] = "ValueError";
  EXPECT_NE(judged(f, c, b).message.find("errors[0].type"), std::string::npos);
  f = good;
  f["steps"][2]["layers"][0]["errors"][0]["message"] = "The size of tensor a (7) must match";
  EXPECT_NE(judged(f, c, b).message.find("errors[0].message"), std::string::npos);
}

// The fixture format is checked before anything is compared: a missing field is bad input named by
// file and JSON pointer, never a skipped check.
TEST(Golden, MissingFixtureFieldIsMalformedWithPointer) {
  const Scenario c = cases::load_case(kRoot + "/cases/tf_hybrid_cache.json");
  nlohmann::json f = fixture("4.57.6", c.name);
  validate_fixture(f, "x.json", c.steps.size(), c.layer_types.size());
  f["steps"][1]["layers"][1].erase("mask_function");
  try {
    validate_fixture(f, "x.json", c.steps.size(), c.layer_types.size());
    FAIL() << "accepted";
  } catch (const cases::CaseError& e) {
    EXPECT_NE(std::string(e.what()).find("x.json: /steps/1/layers/1/mask_function: missing"), std::string::npos) << e.what();
  }
  f = fixture("4.57.6", c.name);
  f["steps"][0]["layers"].erase(1);
  EXPECT_THROW(validate_fixture(f, "x.json", c.steps.size(), c.layer_types.size()), cases::CaseError);
}

// A reference that raises where transformers does not (here: a mutant whose update returns rows the
// mask does not cover) is that case's FAIL naming step and layer; the other fixtures still replay.
TEST(Golden, MutantOfTheReferenceFailsCasesWithoutAborting) {
  ReplayOptions o = options();
  o.name_regex = "^5.24.0/(tf_|dynamic_sliding)";
  o.mutation = Mutation::DynamicKeepsWindow;
  const auto results = replay(o);
  int failed = 0, passed = 0;
  for (const auto& r : results) (r.status == report::Status::Fail ? failed : passed)++;
  EXPECT_GT(failed, 0);
  EXPECT_GT(passed, 0);  // the static-only cases are untouched by this mutant
  for (const auto& r : results)
    if (r.status == report::Status::Fail) EXPECT_NE(r.message.find("step "), std::string::npos) << r.message;
}

// The call steps (reset, crop, activate_past_recording) replay on every pinned release, and each
// layer-API mutant of the reference FAILs a call case there, through the field it breaks: stored
// rows, a raise, an attribute. The case each is named by is the one that reaches its branch.
TEST(Golden, LayerApiMutantsAreCaughtThroughTheCallSteps) {
  struct Catch {
    Mutation mutant;
    const char* release;
    const char* case_name;
    const char* field;  // in the FAIL message
  };
  const Catch catches[] = {
      {Mutation::CropKeepsPastRows, "5.24.0", "call_crop_past_recording", "stored."},
      {Mutation::StaticCropKeepsWritePosition, "5.24.0", "call_crop_static_croppable", "cumulative_length_after"},
      {Mutation::ResetDropsRows, "4.57.6", "call_reset_dynamic", "stored"},
      {Mutation::StaticResetKeepsCount, "5.24.0", "call_reset_static", "cumulative_length_after"},
      {Mutation::AlwaysCroppable, "5.24.0", "call_crop_static_past_window", "attributes.is_croppable"},
      {Mutation::PastRecordingIgnored, "5.24.0", "call_crop_past_recording", "stored"},
      {Mutation::PositiveCropAccepted, "5.24.0", "call_crop_positive_argument", "cumulative_length_after"},
      // The release's own mask builders (mask_builders), which a model's masks come from.
      {Mutation::BuilderSizedFromOwnLayer, "4.57.6", "call_reset_dynamic", "mask_builders.sized_from"},
      {Mutation::BuilderOffsetFromSizedLayer, "5.13.1", "call_reset_dynamic", "mask_builders."},
      {Mutation::FlexWithoutQueryOffset, "5.24.0", "tf_hybrid_chunked_cache", "mask_builders.flex.rows"},
      // The builder arguments of the cases' mask_builder_call, each through the case that passes it.
      {Mutation::BuilderWithoutCacheSizedByStep, "5.24.0", "builder_no_cache_left_padding", "mask_builders."},
      {Mutation::BuilderPackedAcrossDocuments, "5.24.0", "builder_no_cache_packed", "mask_builders."},
      {Mutation::BuilderIgnoresLayerIdx, "5.24.0", "builder_layer_idx", "mask_builders."},
      {Mutation::BuilderWithoutAndMask, "5.24.0", "builder_and_or_masks", "mask_builders."},
      {Mutation::BuilderWithoutOrMask, "5.24.0", "builder_and_or_masks", "mask_builders."},
      {Mutation::Builder4dMaskRebuilt, "5.24.0", "builder_4d_mask", "mask_builders."},
      {Mutation::FlashMaskUncut, "5.24.0", "builder_flash_attention", "mask_builders.flash.mask"},
      {Mutation::BuilderWithoutBlockOverlay, "5.24.0", "builder_block_sequence_ids", "mask_builders."},
      {Mutation::BuilderAcceptsNonCallable, "5.24.0", "builder_or_mask_not_callable", "mask_builders."},
      {Mutation::BuilderAbsentTypeAsFull, "5.24.0", "builder_absent_layer_types", "mask_builders_absent."},
      {Mutation::UnregisteredAttentionMasked, "5.24.0", "builder_unregistered_attention", "mask_builders.unregistered"},
      // A static sliding layer's mask sizes while it fills (transformers #45940's class).
      {Mutation::WarmUpSizesCountTokens, "5.24.0", "static_sliding_warm_up_mask_sizes", "mask_sizes.kv_length"},
  };
  std::vector<Mutation> caught;
  for (const Catch& k : catches) {
    const Scenario c = cases::load_case(kRoot + "/cases/" + k.case_name + ".json");
    const nlohmann::json f = fixture(k.release, k.case_name);
    const Behaviours b = behaviours_for_release(k.release);
    ASSERT_NE(judged(f, c, b).status, report::Status::Fail) << k.case_name;  // 4.57.6's reset: a DEVIATION
    const report::CaseResult r = judged(f, c, b, k.mutant);
    EXPECT_EQ(r.status, report::Status::Fail) << to_string(k.mutant);
    EXPECT_NE(r.message.find(k.field), std::string::npos) << to_string(k.mutant) << ": " << r.message;
    caught.push_back(k.mutant);
  }
  EXPECT_EQ(caught, layer_api_mutations());  // every layer-API mutant has its catch here
}

// A release whose layer API the reference does not model fails a call step naming the range,
// instead of replaying another release's crop.
TEST(Golden, CallStepUnderAnUnmodelledReleaseFailsNamingIt) {
  const Scenario c = cases::load_case(kRoot + "/cases/call_crop_dynamic_within_window.json");
  const nlohmann::json f = fixture("5.24.0", c.name);
  Behaviours b = behaviours_for_release("5.24.0");
  b.layer_api = behaviours_for_release("5.20.0").layer_api;
  ASSERT_EQ(b.layer_api, LayerApi::Unmodelled);
  LoadedFixture loaded;
  loaded.scenario = &c;
  loaded.fixture = &f;
  loaded.behaviours.behaviours = b;
  loaded.version = "5.24.0";
  loaded.name = c.name;
  const report::CaseResult r = replay_one(loaded, Mutation::None);
  EXPECT_EQ(r.status, report::Status::Fail);
  EXPECT_NE(r.message.find("5.14 to 5.23"), std::string::npos) << r.message;
}

TEST(Golden, AnotherReleasesBehavioursAreCaught) {
  // 4.57 falls back to arange(q) without cache_position and counts non-zero rows; 5.24 does neither.
  const Scenario c = cases::load_case(kRoot + "/cases/tf_static_cache.json");
  EXPECT_EQ(judged(fixture("4.57.6", c.name), c, behaviours_for_release("4.57.6")).status, report::Status::Pass);
  EXPECT_EQ(judged(fixture("4.57.6", c.name), c, behaviours_for_release("5.24.0")).status, report::Status::Fail);
  EXPECT_EQ(judged(fixture("5.24.0", c.name), c, behaviours_for_release("5.24.0")).status, report::Status::Pass);
}

// One 5.x is not another: 5.13.1 never skips a static cache's sdpa mask, 5.24.0 skips a static
// prefill (the reason 5.0.0 and 5.12.1 fixtures failed when every 5.x got 5.24's rule).
TEST(Golden, SkipRuleOf513IsNotThatOf524) {
  const Scenario c = cases::load_case(kRoot + "/cases/tf_static_cache.json");
  EXPECT_EQ(judged(fixture("5.13.1", c.name), c, behaviours_for_release("5.13.1")).status, report::Status::Pass);
  const report::CaseResult r = judged(fixture("5.13.1", c.name), c, behaviours_for_release("5.24.0"));
  EXPECT_EQ(r.status, report::Status::Fail);
  EXPECT_NE(r.message.find("allow_is_causal_skip: transformers false, reference true"), std::string::npos) << r.message;
}

// 4.56's SlidingWindowLayer raises on a multi-token update once full; the merged layer does not.
TEST(Golden, PreMergeSlidingLayerRaisesWhereTheMergedOneDoesNot) {
  const Scenario c = cases::load_case(kRoot + "/cases/static_sliding_multi_token_after_full_equal.json");
  EXPECT_EQ(judged(fixture("4.56.2", c.name), c, behaviours_for_release("4.56.2")).status, report::Status::Pass);
  nlohmann::json f = fixture("4.56.2", c.name);
  report::CaseResult r = judged(f, c, behaviours_for_release("4.57.6"));
  EXPECT_EQ(r.status, report::Status::Fail);
  // The layer record names the class first; past it, the steps differ where the old layer raised.
  EXPECT_NE(r.message.find("layers[0].class: transformers \"SlidingWindowLayer\", reference \"StaticSlidingWindowLayer\""),
            std::string::npos)
      << r.message;
  f["layers"][0]["class"] = "StaticSlidingWindowLayer";
  r = judged(f, c, behaviours_for_release("4.57.6"));
  EXPECT_NE(r.message.find("step 1 layer 0"), std::string::npos) << r.message;
}

// A fixtures folder holding one case of `version`, its fixture edited by `edit`.
std::string one_fixture_root(const std::string& name, const std::string& version, const std::string& case_name,
                             const std::function<void(nlohmann::json&)>& edit) {
  const std::filesystem::path root = std::filesystem::temp_directory_path() / ("kvc_golden_test_" + name);
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root / version);
  nlohmann::json f = fixture(version, case_name);
  edit(f);
  std::ofstream(root / version / (case_name + ".json")) << f.dump();
  const nlohmann::json manifest = {{"cases", {{case_name, {{"case_file", "cases/" + case_name + ".json"}}}}}};
  std::ofstream(root / version / "manifest.json") << manifest.dump();
  return root.string();
}

TEST(Golden, ReplayFollowsTheFixturesBehavioursRecord) {
  ReplayOptions o = options();
  o.fixtures_root = one_fixture_root("record_ok", "4.57.6", "tf_static_cache",
                                     [](nlohmann::json& f) { f["behaviours"] = to_json(behaviours_for_release("4.57.6")); });
  const auto results = replay(o);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].status, report::Status::Pass) << results[0].message;
}

TEST(Golden, RecordThatDisagreesWithTheTableFailsNamingFileReleaseAndKey) {
  ReplayOptions o = options();
  o.fixtures_root = one_fixture_root("record_bad", "4.57.6", "tf_static_cache", [](nlohmann::json& f) {
    f["behaviours"] = to_json(behaviours_for_release("4.57.6"));
    f["behaviours"]["sdpa_skip"] = "not_compileable_decode";
  });
  const auto results = replay(o);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].status, report::Status::Fail);
  const std::string& m = results[0].message;
  EXPECT_NE(m.find("4.57.6/tf_static_cache.json"), std::string::npos) << m;
  EXPECT_NE(m.find("transformers 4.57.6"), std::string::npos) << m;
  EXPECT_NE(m.find("sdpa_skip: \"not_compileable\" vs \"not_compileable_decode\""), std::string::npos) << m;
}

TEST(Golden, InputGeneratorMatchesThePythonTestVectors) {  // cases/README.md
  const int expected[] = {103, -87, 104, 21, -68, -92, 2, -107};
  for (int t = 0; t < 8; ++t) EXPECT_EQ(inputs::element(1, inputs::kKey, 0, 0, 0, t, 0) * 128, expected[t]);
  const int expected_v[] = {-30, -91, 116, -89, 77, -98, 110, -79};
  for (int t = 0; t < 8; ++t) EXPECT_EQ(inputs::element((1ULL << 53) - 1, inputs::kValue, 1, 0, 1, t, 7) * 128, expected_v[t]);
}

std::string load_error(const std::string& text, const std::string& file = "bad.json") {
  try {
    cases::parse_case(text, file);
  } catch (const cases::CaseError& e) {
    return e.what();
  }
  return "accepted";
}

TEST(Cases, BadInputNamesFileAndPointer) {
  const std::string good = cases::read_file(kRoot + "/cases/tf_hybrid_cache.json");
  EXPECT_EQ(load_error(good, "tf_hybrid_cache.json"), "accepted");
  EXPECT_NE(load_error("{ not json").find("bad.json: /: invalid JSON"), std::string::npos);
  nlohmann::json j = nlohmann::json::parse(good);
  j["surprise"] = 1;
  EXPECT_NE(load_error(j.dump(), "tf_hybrid_cache.json").find("tf_hybrid_cache.json: /"), std::string::npos);
  j = nlohmann::json::parse(good);
  j["steps"][1]["tokens"] = 0;
  EXPECT_NE(load_error(j.dump(), "tf_hybrid_cache.json").find("/steps/1/tokens"), std::string::npos)
      << load_error(j.dump(), "tf_hybrid_cache.json");
  j = nlohmann::json::parse(good);
  j["heads"] = 3;
  j["kv_heads"] = 2;
  EXPECT_NE(load_error(j.dump(), "tf_hybrid_cache.json").find("/kv_heads: kv_heads 2 does not divide heads 3"),
            std::string::npos);
  EXPECT_NE(load_error(good, "renamed.json").find("/name"), std::string::npos);
  j = nlohmann::json::parse(good);
  j["inputs"]["explicit"]["k"][0].push_back(1.0);
  EXPECT_NE(load_error(j.dump(), "tf_hybrid_cache.json").find("/inputs/explicit/k/0"), std::string::npos);
  EXPECT_THROW(cases::load_case("/nonexistent/case.json"), cases::CaseError);
}

TEST(Cases, FixtureOfAChangedCaseIsRejected) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "kvc_golden_test";
  fs::remove_all(dir);
  fs::create_directories(dir / "cases");
  fs::create_directories(dir / "fixtures/5.24.0");
  std::string text = cases::read_file(kRoot + "/cases/tf_hybrid_cache.json");
  text.insert(text.rfind('}'), " ");  // same meaning, other bytes
  std::ofstream(dir / "cases/tf_hybrid_cache.json") << text;
  fs::copy_file(kRoot + "/golden/fixtures/5.24.0/tf_hybrid_cache.json", dir / "fixtures/5.24.0/tf_hybrid_cache.json");
  std::ofstream(dir / "fixtures/5.24.0/manifest.json")
      << R"({"cases": {"tf_hybrid_cache": {"case_file": "cases/tf_hybrid_cache.json"}}})";
  ReplayOptions o;
  o.fixtures_root = (dir / "fixtures").string();
  o.cases_root = (dir / "cases").string();
  try {
    replay(o);
    FAIL() << "a stale fixture was accepted";
  } catch (const cases::CaseError& e) {
    EXPECT_NE(std::string(e.what()).find("/case_sha256"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kvc::golden
