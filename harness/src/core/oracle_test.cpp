#include <gtest/gtest.h>

#include <cmath>

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

// Sinks (gpt-oss): a per-head logit in every row's softmax that brings no value. Window 1, D 1: the
// query's one score is 0.5; a sink of 0.5 takes half the weight, one of 0.5 + log 3 three quarters.
TEST(Oracle, ASinkTakesItsShareOfTheSoftmaxAndBringsNoValue) {
  Oracle o({1, 2, 1, 1}, LayerType::Sliding, 1, std::nullopt);
  o.append({1.0, 1.0}, {8.0, 8.0}, 2);
  const auto out = o.attend({0.5, 0.5, 0.5, 0.5}, 2, {0.5, 0.5 + std::log(3.0)});
  EXPECT_NEAR(out[0], 4.0, 1e-12);
  EXPECT_NEAR(out[1], 4.0, 1e-12);
  EXPECT_NEAR(out[2], 2.0, 1e-12);
  EXPECT_NEAR(out[3], 2.0, 1e-12);
  // a sink far above every score: the weights stay finite (shifted by the larger of the two)
  const auto big = o.attend({0.5, 0.5, 0.5, 0.5}, 2, {1000.0, -1000.0});
  EXPECT_NEAR(big[0], 0.0, 1e-12);
  EXPECT_NEAR(big[2], 8.0, 1e-12);
  EXPECT_THROW(o.attend({0.5, 0.5, 0.5, 0.5}, 2, {1.0}), std::invalid_argument);
}

// The same sink as a key of its own: one more dimension, where the real keys hold 0 and the sink
// key holds sink * sqrt(D + 1) against a query coordinate of 1, and a value of zeros. Without sinks, on a
// full layer that sees it, that oracle must give what the sinks oracle gives.
TEST(Oracle, ASinkIsAKeyWhoseScoreIsTheSinkAndWhoseValueIsZero) {
  const int64_t T = 4, D = 2;
  const std::vector<double> k = {0.3, -1.2, 0.7, 0.1, -0.4, 0.9, 1.5, -0.6}, v = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<double> q = {0.8, -0.5, 0.2, 1.1};  // the last two tokens' queries
  const double sink = 0.35;
  Oracle with({1, 1, 1, D}, LayerType::Full, 0, std::nullopt);
  with.append(k, v, T);
  const auto got = with.attend(q, 2, {sink});
  // D + 1 dimensions: the query scaled so that its scores keep 1/sqrt(D) under 1/sqrt(D + 1)
  const double up = std::sqrt((D + 1.0) / D);
  std::vector<double> k3 = {0, 0, sink * std::sqrt(D + 1.0)}, v3 = {0, 0, 0};  // token 0: the sink
  for (int64_t t = 0; t < T; ++t) {
    k3.insert(k3.end(), {k[t * D], k[t * D + 1], 0.0});
    v3.insert(v3.end(), {v[t * D], v[t * D + 1], 0.0});
  }
  Oracle as_key({1, 1, 1, D + 1}, LayerType::Full, 0, std::nullopt);
  as_key.append(k3, v3, T + 1);
  const auto want = as_key.attend({q[0] * up, q[1] * up, 1.0, q[2] * up, q[3] * up, 1.0}, 2);
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t d = 0; d < D; ++d) EXPECT_NEAR(got[i * D + d], want[i * (D + 1) + d], 1e-12) << i << "," << d;
}

}  // namespace
}  // namespace kvc
