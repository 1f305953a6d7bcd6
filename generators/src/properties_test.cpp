// Every property of the campaign holds on the reference. KVC_SEED / KVC_ITERATIONS scale it up.
#include <gtest/gtest.h>

#include "kvcgen/campaign.h"

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

}  // namespace
}  // namespace kvc::campaign
