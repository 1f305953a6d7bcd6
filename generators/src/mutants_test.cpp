// A property that passes on a wrong implementation is a defect: each mutant must be caught by the
// property aimed at its bug class, within the default budget (seed and iterations of the campaign).
#include <gtest/gtest.h>

#include <regex>

#include "kvcgen/campaign.h"

namespace kvc::campaign {
namespace {

struct Expectation {
  Mutation mutation;
  Property caught_by;
  TraceEngineKind engine = TraceEngineKind::Auto;  // Auto: the fast engine for the row / size / mask properties
};

// The ctest name's suffix: the mutant, the property and the engine, where gtest printed the struct's bytes.
void PrintTo(const Expectation& e, std::ostream* os) {
  *os << to_string(e.mutation) << "/" << to_string(e.caught_by) << "/" << to_string(e.engine);
}
class MutantIsCaught : public ::testing::TestWithParam<Expectation> {};

TEST_P(MutantIsCaught, WithinTheDefaultBudget) {
  Options options;  // the defaults on purpose: detection must not depend on a long campaign
  options.mutation = GetParam().mutation;
  options.trace_engine = GetParam().engine;
  const Outcome outcome = run(GetParam().caught_by, options);
  EXPECT_FALSE(outcome.ok) << to_string(GetParam().mutation) << " survived " << to_string(GetParam().caught_by) << " after "
                           << outcome.cases << " cases";
  // The counterexample must be shrunk to something a person can read.
  EXPECT_NE(outcome.failure.find("Prefill"), std::string::npos) << outcome.failure;
}

INSTANTIATE_TEST_SUITE_P(
    Campaign, MutantIsCaught,
    ::testing::Values(Expectation{Mutation::WindowTooWide, Property::WindowCoverage},
                      Expectation{Mutation::ExtendAfterFullKeepsOldest, Property::ReturnedRows},
                      Expectation{Mutation::KvOffsetTooSmall, Property::ReturnedRows},
                      Expectation{Mutation::KvOffsetTooSmall, Property::WindowCoverage},
                      Expectation{Mutation::BecomingFullKeepsFirst, Property::StoredRows},
                      Expectation{Mutation::DynamicKeepsWindow, Property::StoredRows},
                      Expectation{Mutation::ChunkIgnoresLeftPadding, Property::WindowCoverage},
                      Expectation{Mutation::CapacityMax, Property::StoredRows},
                      Expectation{Mutation::WindowTooWide, Property::AttentionVsOracle},
                      Expectation{Mutation::BecomingFullKeepsFirst, Property::LayerAgreement},
                      Expectation{Mutation::KvOffsetTooSmall, Property::BackendsVsOracle},
                      // The same row / size / mask bugs caught by the LibTorch engine too.
                      Expectation{Mutation::WindowTooWide, Property::WindowCoverage, TraceEngineKind::Tensor},
                      Expectation{Mutation::ExtendAfterFullKeepsOldest, Property::ReturnedRows, TraceEngineKind::Tensor},
                      Expectation{Mutation::KvOffsetTooSmall, Property::ReturnedRows, TraceEngineKind::Tensor},
                      Expectation{Mutation::KvOffsetTooSmall, Property::WindowCoverage, TraceEngineKind::Tensor},
                      Expectation{Mutation::BecomingFullKeepsFirst, Property::StoredRows, TraceEngineKind::Tensor},
                      Expectation{Mutation::DynamicKeepsWindow, Property::StoredRows, TraceEngineKind::Tensor},
                      Expectation{Mutation::ChunkIgnoresLeftPadding, Property::WindowCoverage, TraceEngineKind::Tensor},
                      Expectation{Mutation::CapacityMax, Property::StoredRows, TraceEngineKind::Tensor}),
    [](const auto& info) {
      // A test name is letters, digits and '_': window_off_by_one+1 is window_off_by_one_plus_1.
      std::string name = std::regex_replace(to_string(info.param.mutation), std::regex("\\+"), "_plus_");
      return name + "_by_" + to_string(info.param.caught_by) + (info.param.engine == TraceEngineKind::Tensor ? "_tensor" : "");
    });

// A step that raises inside LibTorch (a mutant whose K/V and mask disagree in size) is a FAIL whose
// message is the raise's first line, not the stack trace c10::Error appends to it.
TEST(MutantFailure, NamesTheRaiseNotLibTorchsStackTrace) {
  Options options;
  options.mutation = Mutation::DynamicKeepsWindow;
  const Outcome outcome = run(Property::AttentionVsOracle, options);
  ASSERT_FALSE(outcome.ok);
  EXPECT_NE(outcome.failure.find("attention failed: The size of tensor a"), std::string::npos) << outcome.failure;
  EXPECT_EQ(outcome.failure.find("frame #"), std::string::npos) << outcome.failure;
  EXPECT_EQ(outcome.failure.find("Exception raised from"), std::string::npos) << outcome.failure;
}

}  // namespace
}  // namespace kvc::campaign
