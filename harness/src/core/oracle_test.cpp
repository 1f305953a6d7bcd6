#include <gtest/gtest.h>

#include "kvconform/oracle.h"

namespace kvc {
namespace {

TEST(Oracle, SingleVisibleKeyReturnsItsValue) {
  Oracle o({1, 1, 1, 1}, LayerType::Sliding, 1, std::nullopt);
  o.append({1.0, 2.0}, {10.0, 20.0}, 2);
  const auto out = o.attend({0.5, 0.5}, 2);
  EXPECT_DOUBLE_EQ(out[0], 10.0);  // window 1: each query sees only itself
  EXPECT_DOUBLE_EQ(out[1], 20.0);
}

TEST(Oracle, EqualScoresAverageTheVisibleValues) {
  Oracle o({1, 1, 1, 1}, LayerType::Sliding, 2, std::nullopt);
  o.append({0, 0, 0}, {1, 2, 4}, 3);
  const auto out = o.attend({1.0}, 1);
  EXPECT_DOUBLE_EQ(out[0], 3.0);  // the last query sees tokens 1 and 2
}

TEST(Oracle, PaddingIsNeverVisibleAndAFullyMaskedQueryGivesZeros) {
  Oracle o({1, 1, 1, 1}, LayerType::Full, 0, std::vector<int64_t>{2});
  o.append({0, 0, 0}, {5, 7, 9}, 3);
  EXPECT_FALSE(o.visible(0, 2, 1));
  const auto out = o.attend({1, 1, 1}, 3);
  EXPECT_EQ(out[0], 0.0);
  EXPECT_EQ(out[1], 0.0);
  EXPECT_DOUBLE_EQ(out[2], 9.0);
}

TEST(Oracle, GroupedQueryHeadsShareTheirKvHead) {
  Oracle o({1, 2, 1, 1}, LayerType::Full, 0, std::nullopt);
  o.append({0}, {3}, 1);
  const auto out = o.attend({1, -1}, 1);
  EXPECT_DOUBLE_EQ(out[0], 3.0);
  EXPECT_DOUBLE_EQ(out[1], 3.0);
}

TEST(Oracle, RejectsInconsistentShapes) {
  EXPECT_THROW(Oracle({1, 3, 2, 1}, LayerType::Full, 0, std::nullopt), std::invalid_argument);
  EXPECT_THROW(Oracle({2, 1, 1, 1}, LayerType::Full, 0, std::vector<int64_t>{1}), std::invalid_argument);
  Oracle o({1, 1, 1, 2}, LayerType::Full, 0, std::nullopt);
  EXPECT_THROW(o.append({1.0}, {1.0}, 1), std::invalid_argument);
}

}  // namespace
}  // namespace kvc
