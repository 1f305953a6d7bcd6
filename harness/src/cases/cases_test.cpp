// Hostile case and fixture files are bad input: each is rejected at load with the file and JSON
// pointer named, before anything is allocated for it (cases/README.md "Size caps"). No LibTorch.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <tuple>

#include "build_paths.h"
#include "kvconform/cases.h"
#include "kvconform/fixture_check.h"
#include "kvconform/regex.h"

namespace kvc::cases {
namespace {

const std::string kRoot = kvc::paths::source_dir();

// A small valid case; `fields` (JSON object members, without braces) replace the defaults.
std::string doc(const std::string& fields = "", const std::string& steps = R"([{"tokens": 2}, {"tokens": 1}])") {
  nlohmann::json j = {{"name", "x"},
                      {"description", "d"},
                      {"cache", "dynamic"},
                      {"layer_types", {"sliding_attention"}},
                      {"window", 2},
                      {"batch", 1},
                      {"heads", 2},
                      {"kv_heads", 1},
                      {"head_dim", 4},
                      {"dtype", "float32"},
                      {"left_padding", nullptr},
                      {"inputs", {{"generator", "kvc-mix64-v1"}, {"seed", 3}}}};
  std::string text = j.dump();
  text.pop_back();
  text += R"(, "steps": )" + steps + (fields.empty() ? "" : ", " + fields) + "}";
  return text;
}

// The "file: /pointer: message" of parsing `text`, or "loaded".
std::string error_of(const std::string& text, const Limits& limits = Limits{}) {
  try {
    parse_case(text, "cases/x.json", limits);
    return "loaded";
  } catch (const CaseError& e) {
    return e.what();
  }
}

TEST(CaseLimits, ValidCaseLoads) { EXPECT_EQ(error_of(doc()), "loaded"); }

// The schema makes left_padding optional; an absent one is no padding, not an uncaught exception
// (found by case_fuzz in a CI run: it erased the key from a committed case).
TEST(CaseLimits, AbsentLeftPaddingIsNoPadding) {
  nlohmann::json j = nlohmann::json::parse(doc());
  j.erase("left_padding");
  EXPECT_EQ(error_of(j.dump()), "loaded");
  EXPECT_FALSE(parse_case(j.dump(), "cases/x.json", Limits{}).left_padding.has_value());
}

TEST(CaseLimits, HugeTokenCountIsRejectedByPointerNotAllocated) {
  EXPECT_EQ(error_of(doc("", R"([{"tokens": 1}, {"tokens": 2}, {"tokens": 3}, {"tokens": 2000000000}])")),
            "cases/x.json: /steps/3/tokens: 2000000000 exceeds the cap of 65536 tokens per case (raise with "
            "--allow-large or KVC_MAX_TOKENS)");
  // Steps under the cap each, over it together: named at the step that crosses it.
  std::string steps = "[";
  for (int i = 0; i < 656; ++i) steps += std::string(i ? "," : "") + R"({"tokens": 100})";
  EXPECT_EQ(error_of(doc("", steps + "]")),
            "cases/x.json: /steps/655/tokens: the case's 65600 tokens so far exceeds the cap of 65536 tokens per case "
            "(raise with --allow-large or KVC_MAX_TOKENS)");
}

TEST(CaseLimits, EachSizeFieldHasACap) {
  const struct {
    const char* field;
    const char* pointer;
    const char* env;
  } rows[] = {{R"("batch": 100000000)", "/batch", "KVC_MAX_BATCH"},
              {R"("heads": 100000000, "kv_heads": 1)", "/heads", "KVC_MAX_HEADS"},
              {R"("head_dim": 100000000)", "/head_dim", "KVC_MAX_HEAD_DIM"},
              {R"("window": 100000000)", "/window", "KVC_MAX_WINDOW"}};
  for (const auto& row : rows) {
    std::string text = doc();
    // Later members win in nlohmann's parser: the override replaces the default.
    text.insert(text.size() - 1, std::string(", ") + row.field);
    const std::string e = error_of(text);
    EXPECT_NE(e.find(std::string("cases/x.json: ") + row.pointer + ": 100000000 exceeds the cap of "), std::string::npos) << e;
    EXPECT_NE(e.find(row.env), std::string::npos) << e;
  }
  const std::string kv = error_of(doc(R"("kv_heads": 512)"));
  EXPECT_NE(kv.find("/kv_heads: 512 exceeds the cap of 256 heads"), std::string::npos) << kv;
  std::string static_case = doc(R"("max_cache_len": 100000000)");
  static_case.replace(static_case.find("\"dynamic\""), 9, "\"static\"");
  EXPECT_NE(error_of(static_case).find("/max_cache_len: 100000000 exceeds the cap of 65536 rows of cache"), std::string::npos)
      << error_of(static_case);
  std::string steps = "[";
  for (int i = 0; i < 4097; ++i) steps += std::string(i ? "," : "") + R"({"tokens": 1})";
  EXPECT_EQ(error_of(doc("", steps + "]")),
            "cases/x.json: /steps: 4097 steps exceeds the cap of 4096 steps per case (raise with --allow-large or "
            "KVC_MAX_STEPS)");
}

TEST(CaseLimits, MemoryProductsAreCapped) {
  // Every field within its own cap, the tensor they make is not (256 * 256 * 1 * 1024 = 2^26 elements).
  std::string big = doc(R"("batch": 256, "heads": 256, "kv_heads": 256, "head_dim": 1024)", R"([{"tokens": 1}])");
  EXPECT_EQ(error_of(big),
            "cases/x.json: /steps/0/tokens: batch*heads*tokens*head_dim = 67108864 exceeds the cap of 16777216 "
            "elements per tensor (raise with --allow-large or KVC_MAX_ELEMENTS)");
  // One prefill of 60000 tokens: small tensors, but 60000 x 60000 attention scores.
  const std::string scores = error_of(doc(R"("heads": 1, "head_dim": 1)", R"([{"tokens": 60000}])"));
  EXPECT_EQ(scores,
            "cases/x.json: /steps/0/tokens: batch*heads*step tokens*key rows = 3600000000 exceeds the cap of 67108864 "
            "attention scores per step (raise with --allow-large or KVC_MAX_SCORES)");
}

TEST(CaseLimits, RaisedOrLiftedCapsLoadTheCaseWithoutAllocatingIt) {
  const std::string text = doc("", R"([{"tokens": 2000000000}])");
  const auto start = std::chrono::steady_clock::now();
  const Scenario c = parse_case(text, "cases/x.json", Limits::unlimited());
  EXPECT_EQ(c.total_tokens(), 2000000000);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  Limits low;
  low.tokens = 2;
  EXPECT_NE(error_of(doc(), low).find("/steps/1/tokens: the case's 3 tokens so far exceeds the cap of 2 tokens"),
            std::string::npos);
  // Products of uncapped fields saturate instead of overflowing into a small, accepted number.
  std::string huge = doc(R"("batch": 9000000000000000000, "head_dim": 9000000000000000000)", R"([{"tokens": 1}])");
  Limits no_elements = Limits::unlimited();
  no_elements.elements = int64_t{1} << 40;
  EXPECT_NE(error_of(huge, no_elements).find("/steps/0/tokens: batch*heads*tokens*head_dim = 9223372036854775807 exceeds"),
            std::string::npos)
      << error_of(huge, no_elements);
}

TEST(CaseLimits, NumbersOutOfRangeAreNamedByPointer) {
  EXPECT_EQ(error_of(R"({"name": "x", "inputs": {"generator": "kvc-mix64-v1", "seed": 1e400}})"),
            "cases/x.json: /inputs/seed: number overflow parsing '1e400'");
  EXPECT_EQ(error_of(doc("", R"([{"tokens": 1}, {"tokens": 1180591620717411303424}])")),
            "cases/x.json: /steps/1/tokens: 1180591620717411303424 is out of the 64-bit integer range");
  // 2^64 - 1 fits uint64 but not the int64 field: it must not wrap to -1.
  EXPECT_EQ(error_of(doc(R"("batch": 18446744073709551615)")),
            "cases/x.json: /batch: 18446744073709551615 is out of the 64-bit integer range");
  EXPECT_NE(error_of(doc(R"("batch": -1)")).find("cases/x.json: /batch: "), std::string::npos);
  EXPECT_NE(error_of(doc(R"("batch": 2.5)")).find("cases/x.json: /batch: "), std::string::npos);
  EXPECT_NE(error_of(doc("", R"([{"tokens": 1, "cache_position": [9223372036854775807]}])"))
                .find("/steps/0/cache_position/0: position 9223372036854775807 exceeds the cap of 65535"),
            std::string::npos);
}

TEST(CaseLimits, SyntaxErrorsAreNamedByPointer) {
  const std::string e = error_of(R"({"name": "x", "steps": [{"tokens": 1}, {"tokens": ]})");
  EXPECT_EQ(e.rfind("cases/x.json: /steps/1/tokens: invalid JSON at byte ", 0), 0u) << e;
  const std::string key = error_of(R"({"a/b~": [1, 2, tru]})");
  EXPECT_EQ(key.rfind("cases/x.json: /a~1b~0/2: invalid JSON", 0), 0u) << key;
}

// A hand-made input to fuzz/case_fuzz.cpp: valijson's std::regex recursed once per character of the name and
// overflowed the stack.
TEST(CaseLimits, LongPatternStringsAreRejectedBeforeTheRegex) {
  EXPECT_EQ(error_of(doc("\"name\": \"" + std::string(1000000, 'a') + "\"")),
            "cases/x.json: /name: a string of 1000000 characters, longer than 128");
  EXPECT_EQ(error_of(doc("\"profiles\": [\"5.24.0\", \"" + std::string(100000, '1') + "\"]")),
            "cases/x.json: /profiles/1: a string of 100000 characters, longer than 32");
  // Deep nesting is parsed iteratively: an error, not a stack overflow.
  const std::string deep = error_of(std::string(100000, '[') + std::string(100000, ']'));
  EXPECT_EQ(deep.rfind("cases/x.json: /: ", 0), 0u) << deep;
}

// "profiles" is the deprecated name of "releases" (cases/README.md): a case using it loads as the same
// case with "releases", a case giving both is refused naming the file and the field, and cases are
// written with "releases". golden/test_validate_cases.py holds the Python loader to the same.
TEST(CaseFiles, ProfilesIsADeprecatedAliasOfReleases) {
  const Scenario with_releases = parse_case(doc(R"("releases": ["4.56.2", "5.24.0"])"), "cases/x.json", Limits{});
  const Scenario with_profiles = parse_case(doc(R"("profiles": ["4.56.2", "5.24.0"])"), "cases/x.json", Limits{});
  EXPECT_EQ(with_releases.releases, (std::vector<std::string>{"4.56.2", "5.24.0"}));
  EXPECT_EQ(with_profiles.releases, with_releases.releases);
  EXPECT_EQ(to_case_json(with_profiles), to_case_json(with_releases));
  EXPECT_TRUE(with_profiles.applies_to("5.24.0"));
  EXPECT_FALSE(with_profiles.applies_to("4.57.6"));
  const nlohmann::ordered_json written = to_case_json(with_profiles);
  EXPECT_EQ(written.at("releases"), nlohmann::ordered_json({"4.56.2", "5.24.0"}));
  EXPECT_FALSE(written.contains("profiles"));
  EXPECT_EQ(error_of(doc(R"("releases": ["5.24.0"], "profiles": ["5.24.0"])")),
            "cases/x.json: /profiles: 'profiles' is the deprecated name of 'releases'; give only 'releases'");
  EXPECT_EQ(error_of(doc("\"releases\": [\"5.24.0\", \"" + std::string(100, '1') + "\"]")),
            "cases/x.json: /releases/1: a string of 100 characters, longer than 32");
  EXPECT_EQ(error_of(doc(R"("releases": ["5.24"])")).rfind("cases/x.json: /releases/0: ", 0), 0u);
}

// A numerics case (a fill step, normal inputs) loads and is written back as it was read; one that
// judges nothing is refused, as the Python validator refuses it.
TEST(CaseLimits, FillStepsAndDistributionsRoundTrip) {
  const std::string text = doc("", R"([{"tokens": 2, "judged": false}, {"tokens": 1}])");
  const std::string normal = Regex(R"("seed":3)").replace(text, R"("seed":3,"distribution":"large_logits")");
  ASSERT_EQ(error_of(normal), "loaded") << normal;
  const Scenario s = parse_case(normal, "cases/x.json");
  EXPECT_EQ(s.distribution, inputs::Distribution::LargeLogits);
  EXPECT_FALSE(s.steps[0].judged);
  EXPECT_TRUE(s.steps[1].judged);
  const Scenario again = parse_case(to_case_json(s).dump(), "cases/x.json");
  EXPECT_EQ(again.distribution, s.distribution);
  EXPECT_EQ(again.steps[0].judged, false);
  EXPECT_EQ(to_case_json(again), to_case_json(s));
  EXPECT_EQ(error_of(doc("", R"([{"tokens": 2, "judged": false}])")),
            R"(cases/x.json: /steps: every step is a fill step ("judged": false): the case would judge nothing)");
}

TEST(CaseLimits, RulesOnlyThePythonValidatorHadAreEnforcedToo) {
  EXPECT_EQ(error_of(doc(R"("left_padding": [4])")),
            "cases/x.json: /left_padding/0: 4 pad tokens but only 3 tokens in the scenario");
  EXPECT_EQ(error_of(doc(R"("max_cache_len": 8)")),
            "cases/x.json: /max_cache_len: max_cache_len is only meaningful for a static cache");
  std::string full = doc();
  full.replace(full.find("sliding_attention"), 17, "full_attention");
  EXPECT_EQ(error_of(full), "cases/x.json: /window: window given but no sliding or chunked layer");
}

// Call steps: another layer method instead of an update, each kind named by layer_methods().
TEST(CaseFiles, CallStepsLoadAndTheirArgumentIsChecked) {
  const Scenario c = parse_case(doc("", R"([{"tokens": 3}, {"call": "crop", "argument": -2}, {"tokens": 1},
                                           {"call": "activate_past_recording"}, {"call": "reset"}, {"tokens": 1}])"),
                                "cases/x.json");
  ASSERT_EQ(c.steps.size(), 6u);
  EXPECT_TRUE(c.has_calls());
  EXPECT_EQ(c.steps[1].call->show(), "crop(-2)");
  EXPECT_FALSE(c.steps[1].is_reset());
  EXPECT_EQ(c.steps[3].call->show(), "activate_past_recording()");
  EXPECT_TRUE(c.steps[4].is_reset());
  EXPECT_EQ(c.total_tokens(), 5);
  // A crop does not count the generator's token index back: the decode after it is token 3.
  EXPECT_EQ(c.step_inputs(inputs::kKey, 0, 2), inputs::block(3, inputs::kKey, 0, 1, 1, 3, 1, 4));
  EXPECT_EQ(c.step_inputs(inputs::kKey, 0, 5), inputs::block(3, inputs::kKey, 0, 1, 1, 0, 1, 4));  // after the reset
  EXPECT_EQ(error_of(doc("", R"([{"tokens": 2}, {"call": "crop"}])")), "cases/x.json: /steps/1: crop needs an \"argument\"");
  EXPECT_EQ(error_of(doc("", R"([{"tokens": 2}, {"call": "reset", "argument": 1}])")),
            "cases/x.json: /steps/1/argument: reset takes no argument");
  EXPECT_EQ(error_of(doc("", R"([{"tokens": 2, "argument": 1}])")),
            "cases/x.json: /steps/0/argument: only a call step takes an argument");
  EXPECT_EQ(error_of(doc("", R"([{"tokens": 2}, {"call": "crop", "argument": -1, "judged": false}])")),
            "cases/x.json: /steps/1/judged: a call step takes no judged");
  EXPECT_NE(error_of(doc("", R"([{"tokens": 2}, {"call": "truncate", "argument": -1}])")).find("/steps/1/call"),
            std::string::npos);
  EXPECT_NE(error_of(doc("", R"([{"tokens": 2, "call": "reset"}])")), "loaded");  // one or the other
  // Written back, the calls load again.
  const Scenario back = parse_case(to_case_json(c).dump(), "cases/x.json");
  ASSERT_EQ(back.steps.size(), c.steps.size());
  for (size_t i = 0; i < c.steps.size(); ++i) {
    EXPECT_EQ(back.steps[i].is_call(), c.steps[i].is_call());
    if (c.steps[i].is_call()) EXPECT_EQ(back.steps[i].call->show(), c.steps[i].call->show());
  }
}

TEST(CaseLimits, EveryCommittedCaseIsWithinTheCaps) {
  int n = 0;
  for (const char* dir : {"/cases", "/cases/generated"})
    for (const std::string& f : list_case_files(kRoot + dir)) {
      EXPECT_NO_THROW(load_case(f)) << f;
      ++n;
    }
  EXPECT_GE(n, 300);
}

// to_case_json is parse_case's inverse on every committed case: the case it writes loads back with
// the same configuration, steps and inputs (the plugin checker saves its shrunk failures with it).
TEST(CaseFiles, WrittenCaseLoadsBackTheSame) {
  int n = 0;
  for (const char* dir : {"/cases", "/cases/generated"})
    for (const std::string& f : list_case_files(kRoot + dir)) {
      const Scenario a = load_case(f);
      const Scenario b = parse_case(to_case_json(a).dump(2), f + " (written back)");
      EXPECT_EQ(b.name, a.name);
      EXPECT_EQ(b.description, a.description);
      EXPECT_EQ(b.tags, a.tags) << f;
      EXPECT_EQ(b.params(), a.params()) << f;
      EXPECT_EQ(b.left_padding, a.left_padding) << f;
      EXPECT_EQ(b.dtype, a.dtype) << f;
      EXPECT_EQ(std::make_tuple(b.batch, b.heads, b.kv_heads, b.head_dim),
                std::make_tuple(a.batch, a.heads, a.kv_heads, a.head_dim))
          << f;
      ASSERT_EQ(b.steps.size(), a.steps.size()) << f;
      for (size_t i = 0; i < a.steps.size(); ++i) {
        EXPECT_EQ(b.steps[i].tokens, a.steps[i].tokens) << f;
        EXPECT_EQ(b.steps[i].cache_position, a.steps[i].cache_position) << f;
      }
      EXPECT_EQ(b.seed, a.seed) << f;
      EXPECT_EQ(b.explicit_q, a.explicit_q) << f;
      EXPECT_EQ(b.explicit_k, a.explicit_k) << f;
      EXPECT_EQ(b.explicit_v, a.explicit_v) << f;
      EXPECT_EQ(b.releases, a.releases) << f;
      EXPECT_EQ(b.mask_builder_call.has_value(), a.mask_builder_call.has_value()) << f;
      if (a.mask_builder_call) EXPECT_EQ(to_case_json(b)["mask_builder_call"], to_case_json(a)["mask_builder_call"]) << f;
      ++n;
    }
  EXPECT_GE(n, 300);
  Scenario reset = load_case(kRoot + "/cases/window2_static_sliding.json");
  reset.steps.push_back(Step{});  // a reset: no place in a case file
  EXPECT_THROW(to_case_json(reset), std::invalid_argument);
}

}  // namespace
}  // namespace kvc::cases

namespace kvc::golden {
namespace {

const std::string kRoot = kvc::paths::source_dir();

nlohmann::json fixture() {
  return cases::parse_json(cases::read_file(kRoot + "/golden/fixtures/5.24.0/tf_hybrid_cache.json"), "f.json");
}
const Scenario& the_case() {
  static const Scenario c = cases::load_case(kRoot + "/cases/tf_hybrid_cache.json");
  return c;
}

std::string error_of(const nlohmann::json& f) {
  try {
    check_fixture(f, {the_case().steps.size(), the_case().layer_types.size(), the_case().sha256, "cases/tf_hybrid_cache.json"},
                  "f.json");
    return "ok";
  } catch (const cases::CaseError& e) {
    return e.what();
  }
}

TEST(FixtureCheck, CommittedFixturePasses) { EXPECT_EQ(error_of(fixture()), "ok"); }

TEST(FixtureCheck, HexLongerThanItsShapeIsNamed) {
  // The comparison decodes both outputs and walks the fixture's values: more bytes than the shape
  // says would read past the reference's.
  nlohmann::json f = fixture();
  f["steps"][0]["layers"][1]["attention"]["eager"]["hex"] =
      std::string(f["steps"][0]["layers"][1]["attention"]["eager"]["hex"]) + "00000000";
  EXPECT_EQ(error_of(f), "f.json: /steps/0/layers/1/attention/eager/hex: 32 hex digits, the shape and dtype make 24");
  f = fixture();
  f["steps"][1]["layers"][0]["attention"]["sdpa"]["hex"] = "zz000000";
  EXPECT_EQ(error_of(f), "f.json: /steps/1/layers/0/attention/sdpa/hex: not a hex digit at index 0");
  f = fixture();
  f["steps"][1]["layers"][0]["attention"]["sdpa"]["dtype"] = "float8";
  EXPECT_NE(error_of(f).find("f.json: /steps/1/layers/0/attention/sdpa/dtype: "), std::string::npos) << error_of(f);
}

TEST(FixtureCheck, WrongTypesAreNamedByPointer) {
  nlohmann::json f = fixture();
  f["steps"][1]["layers"][1]["errors"] = {{{"phase", 3}, {"type", "x"}, {"message", "m"}}};
  EXPECT_EQ(error_of(f), "f.json: /steps/1/layers/1/errors/0/phase: expected a string, found number");
  f = fixture();
  f["steps"][0]["layers"][0]["mask_sizes"].erase("kv_length");
  EXPECT_EQ(error_of(f), "f.json: /steps/0/layers/0/mask_sizes/kv_length: missing");
  f = fixture();
  f["steps"][1]["layers"].erase(1);
  EXPECT_EQ(error_of(f), "f.json: /steps/1/layers: expected 2 layers, as in cases/tf_hybrid_cache.json");
  f = fixture();
  f["transformers_version"] = 5;
  EXPECT_EQ(error_of(f), "f.json: /transformers_version: expected a string, found number");
}

TEST(FixtureCheck, ManifestCaseNamesCannotLeaveTheFolder) {
  const auto manifest_error = [](const std::string& text) {
    try {
      check_manifest(nlohmann::json::parse(text), "m.json");
      return std::string("ok");
    } catch (const cases::CaseError& e) {
      return std::string(e.what());
    }
  };
  EXPECT_EQ(manifest_error(R"({"cases": {"a_b": {"case_file": "cases/a_b.json"}}})"), "ok");
  EXPECT_EQ(manifest_error(R"({"cases": {"../../x": {}}})"), "m.json: /cases: case name '../../x' is not a file name");
  EXPECT_EQ(manifest_error(R"({"cases": {"a": {"case_file": 1}}})"),
            "m.json: /cases/a/case_file: expected a string, found number");
  EXPECT_EQ(manifest_error(R"({"cases": []})"), "m.json: /cases: expected an object, found array");
}

}  // namespace
}  // namespace kvc::golden
