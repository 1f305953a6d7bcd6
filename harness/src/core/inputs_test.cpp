#include <gtest/gtest.h>

#include <cmath>

#include "kvconform/inputs.h"

namespace kvc::inputs {
namespace {

TEST(Inputs, Mix64IsSplitMix64Finaliser) {
  // splitmix64 seeded with 0 yields 0xE220A8397B1DCDAF first: mix64(0) is that output.
  EXPECT_EQ(mix64(0), 0xE220A8397B1DCDAFULL);
}

TEST(Inputs, ValuesAreMultiplesOf1Over128InRange) {
  for (uint64_t t = 0; t < 200; ++t) {
    const double v = element(7, kKey, 0, 0, 0, t, 0);
    EXPECT_LE(std::abs(v), 1.0);
    EXPECT_EQ(v * 128, std::round(v * 128));
  }
}

TEST(Inputs, SameTokenSameValuesWhateverTheStepSplit) {
  const auto whole = block(3, kValue, 0, 2, 2, 0, 6, 4);
  const auto tail = block(3, kValue, 0, 2, 2, 4, 2, 4);
  // token 4, batch 1, head 1, dim 2 in both layouts
  EXPECT_EQ(whole[((1 * 2 + 1) * 6 + 4) * 4 + 2], tail[((1 * 2 + 1) * 2 + 0) * 4 + 2]);
}

TEST(Inputs, TensorsAndSeedsDiffer) {
  EXPECT_NE(block(1, kKey, 0, 1, 1, 0, 8, 4), block(1, kValue, 0, 1, 1, 0, 8, 4));
  EXPECT_NE(block(1, kKey, 0, 1, 1, 0, 8, 4), block(2, kKey, 0, 1, 1, 0, 8, 4));
}

}  // namespace
}  // namespace kvc::inputs
