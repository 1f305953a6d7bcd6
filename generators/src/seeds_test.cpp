// The one seed discipline (kvconform/seeds.h): case i of a seed is the same case whoever draws it
// and however many cases are drawn around it.
#include <gtest/gtest.h>

#include "kvcgen/corpus.h"

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
