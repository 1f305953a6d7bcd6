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

// The numerics distributions: N(0, 1) on a 1/32 grid with at most 8 significant bits (exact in
// bfloat16 and float16), the same values whatever the step split (and memoised blocks equal fresh
// ones), large_logits the normal queries and keys x 16 with values untouched.
TEST(Inputs, NormalIsStandardAndExactInEveryDtype) {
  const auto v = block(5, kKey, 0, 1, 2, 0, 4096, 64, Distribution::Normal);
  double sum = 0, sq = 0;
  for (double x : v) {
    EXPECT_EQ(x * 32, std::round(x * 32));
    EXPECT_LE(std::abs(x * 32), 255.0);  // 8 significant bits: exact in bfloat16 (and float16)
    sum += x;
    sq += x * x;
  }
  const double n = static_cast<double>(v.size()), mean = sum / n;
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(std::sqrt(sq / n - mean * mean), 1.0, 0.01);
  EXPECT_EQ(block(5, kKey, 0, 1, 2, 0, 4096, 64, Distribution::Normal), v);  // memoised: identical
  const auto tail = block(5, kKey, 0, 1, 2, 4000, 96, 64, Distribution::Normal);
  EXPECT_EQ(v[(1 * 4096 + 4001) * 64 + 7], tail[(1 * 96 + 1) * 64 + 7]);
  const auto big = block(5, kKey, 0, 1, 2, 4000, 96, 64, Distribution::LargeLogits);
  EXPECT_EQ(big[(1 * 96 + 1) * 64 + 7], 16 * tail[(1 * 96 + 1) * 64 + 7]);
  EXPECT_EQ(block(5, kValue, 0, 1, 1, 0, 8, 4, Distribution::LargeLogits),
            block(5, kValue, 0, 1, 1, 0, 8, 4, Distribution::Normal));
}

}  // namespace
}  // namespace kvc::inputs
