// A property that passes on a wrong implementation is a defect: each mutant must be caught by the
// property aimed at its bug class, within the default budget (seed and iterations of the campaign).
#include <gtest/gtest.h>

#include <iostream>

#include "kvcgen/campaign.h"
#include "kvcgen/scenario.h"
#include "kvcgen/trace_engine.h"
#include "kvconform/regex.h"

namespace kvc::campaign {
namespace {

struct Expectation {
  Mutation mutation;
  Property caught_by;
  TraceEngineKind engine = TraceEngineKind::Auto;  // Auto: the fast engine for the row / size / mask properties
  const char* shown = "Prefill";                   // a command the shrunk counterexample shows
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
  // The counterexample must be shrunk to something a person can read, through the step aimed at the bug.
  EXPECT_NE(outcome.failure.find(GetParam().shown), std::string::npos) << outcome.failure;
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
                      Expectation{Mutation::CapacityMax, Property::StoredRows, TraceEngineKind::Tensor},
                      // The layer API's mutants, each through the call step aimed at it (layer_calls:
                      // the tensor engine).
                      Expectation{Mutation::AlwaysCroppable, Property::LayerCalls, TraceEngineKind::Auto, "Read"},
                      Expectation{Mutation::CropKeepsPastRows, Property::LayerCalls, TraceEngineKind::Auto, "Crop("},
                      Expectation{Mutation::StaticCropKeepsWritePosition, Property::LayerCalls, TraceEngineKind::Auto, "Crop("},
                      Expectation{Mutation::StaticResetKeepsCount, Property::LayerCalls, TraceEngineKind::Auto, "LayerReset"}),
    [](const auto& info) {
      // A test name is letters, digits and '_': window_off_by_one+1 is window_off_by_one_plus_1.
      std::string name = Regex("\\+").replace(to_string(info.param.mutation), "_plus_");
      return name + "_by_" + to_string(info.param.caught_by) + (info.param.engine == TraceEngineKind::Tensor ? "_tensor" : "");
    });

// Two layer-API mutants through the step aimed at each, on a written trace (the campaign catches
// them too, but shrinking its long traces on the tensor engine costs tens of CPU seconds).
TEST(LayerCallSteps, RecordAndCropCatchTheirMutants) {
  ScenarioConfig c;
  c.window = 4, c.max_cache_len = 4, c.head_dim = 2, c.seed = 1;
  c.max_tokens = token_limit(c);
  const auto fails = [&](Mutation m, std::vector<Command> commands) {
    const Trace t{c, std::move(commands)};
    EXPECT_TRUE(replayable(t));
    EXPECT_FALSE(make_tensor_engine(Property::LayerCalls, Mutation::None, nullptr)->run(t)) << "the reference fails";
    return make_tensor_engine(Property::LayerCalls, m, nullptr)->run(t);
  };
  // Record: the dynamic sliding layer must keep every row once recording is on.
  const auto record = fails(Mutation::PastRecordingIgnored, {{CommandKind::Record, 0}, {CommandKind::Prefill, 6}});
  ASSERT_TRUE(record);
  EXPECT_EQ(record->command, 1u);
  EXPECT_NE(record->message.find("(past recording on) stores tokens [3,4,5], expected [0,1,2,3,4,5]"), std::string::npos)
      << record->message;
  // Crop: a static sliding layer that may be cropped (L <= W) serves the kept tokens after crop(-1).
  const auto crop = fails(Mutation::StaticCropKeepsWritePosition,
                          {{CommandKind::Prefill, 3}, {CommandKind::Crop, 1}, {CommandKind::Decode, 1}});
  ASSERT_TRUE(crop);
  EXPECT_EQ(crop->command, 2u);
  EXPECT_NE(crop->message.find("static"), std::string::npos) << crop->message;
  std::cout << "  " << record->message << "\n  " << crop->message << "\n";
}

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
