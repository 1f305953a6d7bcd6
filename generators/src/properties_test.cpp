// Every property of the campaign holds on the reference. KVC_SEED / KVC_ITERATIONS scale it up.
#include <gtest/gtest.h>

#include "kvcgen/campaign.h"
#include "print_params_test.h"

namespace kvc::campaign {
namespace {

class PropertyHolds : public ::testing::TestWithParam<Property> {};

TEST_P(PropertyHolds, OnTheReference) {
  const Outcome outcome = run(GetParam(), options_from_env());
  EXPECT_TRUE(outcome.ok) << to_string(GetParam()) << "(" << outcome.params << ")\n"
                          << outcome.failure << "\nreproduce with: KVC_REPRODUCE='" << outcome.reproduce << "'";
  for (const auto& [key, err] : outcome.observations.max_error) RecordProperty("max_error/" + key, std::to_string(err));
}

INSTANTIATE_TEST_SUITE_P(Campaign, PropertyHolds, ::testing::ValuesIn(all_properties()),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// The row / size / mask properties run on the fast engine by default; the LibTorch engine (rows by
// position tags, K/V bytes of every row) must hold too.
class TensorEngineHolds : public ::testing::TestWithParam<Property> {};

TEST_P(TensorEngineHolds, OnTheReference) {
  Options options = options_from_env();
  options.trace_engine = TraceEngineKind::Tensor;
  const Outcome outcome = run(GetParam(), options);
  EXPECT_TRUE(outcome.ok) << to_string(GetParam()) << "(" << outcome.params << ")\n" << outcome.failure;
}

INSTANTIATE_TEST_SUITE_P(Campaign, TensorEngineHolds,
                         ::testing::Values(Property::StoredRows, Property::ReturnedRows, Property::WindowCoverage),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST(FastEngine, RefusesTheValueProperties) {
  Options options;
  options.trace_engine = TraceEngineKind::Fast;
  EXPECT_THROW(run(Property::AttentionVsOracle, options), std::invalid_argument);
  EXPECT_EQ(resolve(TraceEngineKind::Auto, Property::StoredRows), TraceEngineKind::Fast);
  EXPECT_EQ(resolve(TraceEngineKind::Auto, Property::BackendsVsOracle), TraceEngineKind::Tensor);
}

}  // namespace
}  // namespace kvc::campaign

namespace kvc::campaign {
namespace {

// check_fast (bench --vs-python's fast-engine rows) holds on a golden case's shape and fails on the
// mutant aimed at each property.
TEST(CheckFast, HoldsOnTheReferenceAndCatchesMutants) {
  FastTrace t;
  t.layers = {{CacheKind::Static, LayerType::Sliding, 3, 8}, {CacheKind::Dynamic, LayerType::Chunked, 3, 0}};
  t.batch = 2;
  t.left_padding = std::vector<int64_t>{1, 0};
  t.steps = {4, 1, 1, 3, 1};
  for (Property p : {Property::StoredRows, Property::ReturnedRows, Property::WindowCoverage})
    EXPECT_EQ(check_fast(p, t), "") << to_string(p);
  EXPECT_NE(check_fast(Property::StoredRows, t, Mutation::BecomingFullKeepsFirst), "");
  EXPECT_NE(check_fast(Property::ReturnedRows, t, Mutation::ExtendAfterFullKeepsOldest), "");
  EXPECT_NE(check_fast(Property::WindowCoverage, t, Mutation::WindowTooWide), "");
}

}  // namespace
}  // namespace kvc::campaign
