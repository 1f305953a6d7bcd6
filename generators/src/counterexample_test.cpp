// The campaign hands back its shrunk counterexample as data (fuzz writes it as a scenario file)
// with pictures of the failing update's masks.
#include <gtest/gtest.h>

#include <numeric>

#include "kvcgen/campaign.h"
#include "print_params_test.h"
#include "kvcgen/search.h"

namespace kvc::campaign {
namespace {

Options mutant(Mutation m) {
  Options o;
  o.iterations = 100;
  o.mutation = m;
  return o;
}

TEST(CounterexampleAbsent, WhenTheCampaignPasses) {
  Options o;
  o.iterations = 5;
  const Outcome out = run(Property::StoredRows, o);
  ASSERT_TRUE(out.ok);
  EXPECT_FALSE(out.counterexample);
}

class CounterexampleOf : public ::testing::TestWithParam<TraceEngineKind> {};

TEST_P(CounterexampleOf, ShrunkStepsAndMaskOfAWindowBug) {
  Options o = mutant(Mutation::WindowTooWide);
  o.trace_engine = GetParam();
  const Outcome out = run(Property::WindowCoverage, o);
  ASSERT_FALSE(out.ok);
  ASSERT_TRUE(out.counterexample);
  const Counterexample& c = *out.counterexample;
  ASSERT_FALSE(c.steps.empty());
  ASSERT_FALSE(c.commands.empty());
  EXPECT_LE(std::accumulate(c.steps.begin(), c.steps.end(), int64_t{0}), c.config.max_tokens);
  // The failure message names the failing command, the last one recorded.
  EXPECT_NE(out.failure.find(c.commands.back().substr(0, c.commands.back().find('('))), std::string::npos);
  ASSERT_FALSE(c.masks.empty());
  bool extra = false;
  for (const std::string& row : c.masks[0].rows) extra = extra || row.find('+') != std::string::npos;
  EXPECT_TRUE(extra) << "a too-wide window attends a key it must not";
  EXPECT_EQ(c.masks[0].rows.size(), c.masks[0].query_positions.size());
  EXPECT_EQ(static_cast<int64_t>(c.masks[0].rows[0].size()), c.masks[0].kv_length);
}

TEST_P(CounterexampleOf, ReproduceStringGivesTheSameCase) {
  Options o = mutant(Mutation::WindowTooWide);
  o.trace_engine = GetParam();
  const Outcome first = run(Property::WindowCoverage, o);
  ASSERT_TRUE(first.counterexample);
  Options again = o;
  again.reproduce = first.reproduce;
  const Outcome second = run(Property::WindowCoverage, again);
  ASSERT_TRUE(second.counterexample);
  EXPECT_EQ(second.counterexample->steps, first.counterexample->steps);
  EXPECT_EQ(second.counterexample->config.describe(), first.counterexample->config.describe());
}

INSTANTIATE_TEST_SUITE_P(Engines, CounterexampleOf, ::testing::Values(TraceEngineKind::Fast, TraceEngineKind::Tensor),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// One generator, one shrinker, two independent rules: both engines meet the same traces, so a bug
// both can see fails the same trace and shrinks to the same case on each.
TEST(OneCampaign, BothEnginesFailTheSameTraceAndShrinkItAlike) {
  for (const auto& [mutation, property] :
       {std::pair{Mutation::WindowTooWide, Property::WindowCoverage},
        std::pair{Mutation::KvOffsetTooSmall, Property::ReturnedRows}, std::pair{Mutation::CapacityMax, Property::StoredRows}}) {
    Options o = mutant(mutation);
    o.trace_engine = TraceEngineKind::Fast;
    const Outcome fast = run(property, o);
    o.trace_engine = TraceEngineKind::Tensor;
    const Outcome tensor = run(property, o);
    ASSERT_FALSE(fast.ok) << to_string(mutation);
    ASSERT_FALSE(tensor.ok) << to_string(mutation);
    EXPECT_EQ(tensor.reproduce, fast.reproduce) << to_string(mutation);
    ASSERT_TRUE(fast.counterexample && tensor.counterexample);
    EXPECT_EQ(tensor.counterexample->config.describe(), fast.counterexample->config.describe()) << to_string(mutation);
    EXPECT_EQ(tensor.counterexample->commands, fast.counterexample->commands) << to_string(mutation);
  }
}

TEST(ReproduceString, NamesOneTraceOfTheOneGenerator) {
  using search::parse_reproduce;
  using search::reproduce_string;
  const search::CaseId id{20250917, 41, 37};
  EXPECT_EQ(reproduce_string(id), "trace:20250917:41:37");
  const search::CaseId back = parse_reproduce(reproduce_string(id));
  EXPECT_EQ(back.seed, id.seed);
  EXPECT_EQ(back.index, id.index);
  EXPECT_EQ(back.size, id.size);
  EXPECT_EQ(parse_reproduce("fast:20250917:41:37").index, 41);  // the fast engine's old spelling
  for (const char* bad : {"", "trace:", "trace:1:2", "trace:1:2:3x", "trace:-1:2:3", "trace:1:-2:3", "rc:1:2:3", "AAAB"})
    EXPECT_THROW(parse_reproduce(bad), std::invalid_argument) << bad;
  // The same id draws the same trace.
  const Trace a = draw_trace(id.seed, id.index, id.size), b = draw_trace(id.seed, id.index, id.size);
  EXPECT_EQ(a.config.describe(), b.config.describe());
  ASSERT_EQ(a.commands.size(), b.commands.size());
  for (size_t i = 0; i < a.commands.size(); ++i) EXPECT_EQ(a.commands[i].show(), b.commands[i].show());
  EXPECT_TRUE(replayable(a));
}

}  // namespace
}  // namespace kvc::campaign
