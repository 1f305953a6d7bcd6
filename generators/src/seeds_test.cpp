// The one seed discipline (kvconform/seeds.h): case i of a seed is the same case whoever draws it
// and however many cases are drawn around it.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "kvcgen/corpus.h"
#include "kvcgen/scenario.h"
#include "kvconform/inputs.h"

namespace kvc::corpus {
namespace {

nlohmann::ordered_json unnamed(nlohmann::ordered_json j) {
  j.erase("name");
  j.erase("description");
  return j;
}

TEST(Seeds, CaseIDependsOnlyOnTheSeedAndI) {
  const auto few = generate(20250917, 3), many = generate(20250917, 12);
  for (size_t i = 0; i < few.size(); ++i) EXPECT_EQ(few[i], many[i]) << i;
  // The differential fuzzer and bench --vs-python draw case i through the same function.
  for (uint64_t i : {0u, 2u, 11u}) EXPECT_EQ(unnamed(draw(20250917, i, "diff")), unnamed(many[i])) << i;
}

TEST(Seeds, OtherSeedsAndIndicesDrawOtherCases) {
  int differ = 0;
  for (uint64_t i = 0; i < 8; ++i) differ += unnamed(draw(1, i, "x")) != unnamed(draw(2, i, "x"));
  EXPECT_GE(differ, 6);  // a derivation that ignored the seed would give 0
  const auto cases = generate(7, 8);
  int distinct = 0;
  for (size_t i = 1; i < cases.size(); ++i) distinct += unnamed(cases[i]) != unnamed(cases[i - 1]);
  EXPECT_GE(distinct, 6);  // one that ignored the index would give 0
}

}  // namespace
}  // namespace kvc::corpus

namespace kvc {
namespace {

// The command table's call steps (Crop, Record, Read) are drawn for layer_calls only, where a Reset
// would be: every other property draws the traces it drew before them. The digest is of the first
// 2000 traces of the default seed (configuration and commands as shown), as drawn before the call
// steps existed; a change to the generator's stream fails here and must say why.
TEST(CommandTable, TracesWithoutCallsAreDrawnAsBefore) {
  uint64_t digest = 0;
  for (int i = 0; i < 2000; ++i) {
    const Trace t = draw_trace(20250917, i, i % 101);
    std::string shown = t.config.describe();
    for (const Command& c : t.commands) shown += " " + c.show();
    for (unsigned char ch : shown) digest = inputs::mix64(digest ^ ch);
  }
  EXPECT_EQ(digest, 3219034008375899254ULL);
}

// With calls, every kind is drawn, each command meets its precondition, and the configuration is
// the one the same case draws without them (head_dim at most 4).
TEST(CommandTable, CallTracesDrawEveryKindAndReplay) {
  std::set<std::string> kinds;
  for (int i = 0; i < 300; ++i) {
    const Trace t = draw_trace(20250917, i, 100, {}, true);
    EXPECT_TRUE(replayable(t)) << i;
    ScenarioConfig plain = draw_trace(20250917, i, 100).config;
    plain.head_dim = std::min<int64_t>(plain.head_dim, 4);
    EXPECT_EQ(t.config.describe(), plain.describe()) << i;
    for (const Command& c : t.commands) kinds.insert(c.name());
  }
  EXPECT_EQ(kinds, (std::set<std::string>{"Prefill", "Decode", "Extend", "Reset", "Crop", "Record", "Read", "LayerReset"}));
}

}  // namespace
}  // namespace kvc
