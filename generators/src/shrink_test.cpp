// The one greedy shrinker (kvcgen/shrink.h) of the fast campaign and the differential fuzzer.
#include <gtest/gtest.h>

#include <vector>

#include "kvcgen/shrink.h"

namespace kvc::shrink {
namespace {

std::vector<int> halve_or_decrement(int n) { return {n / 2, n - 1}; }

TEST(Shrink, GreedyEndsAtASmallestCaseThatStillFails) {
  int failing = 1000;
  const int kept = greedy(failing, halve_or_decrement, [](int n) { return n >= 37; });
  EXPECT_EQ(failing, 37);
  // 1000 -> 500 -> 250 -> 125 -> 62 (31 passes) -> 61 -> ... -> 37: four halvings, then decrements.
  EXPECT_EQ(kept, 4 + (62 - 37));
}

TEST(Shrink, GreedyStopsAtItsLimitAndKeepsAFailingCase) {
  int failing = 1000;
  EXPECT_EQ(greedy(failing, halve_or_decrement, [](int n) { return n >= 37; }, 3), 3);
  EXPECT_EQ(failing, 125);
  int passing_everywhere = 9;
  EXPECT_EQ(greedy(passing_everywhere, halve_or_decrement, [](int) { return false; }), 0);
  EXPECT_EQ(passing_everywhere, 9);
}

}  // namespace
}  // namespace kvc::shrink
