// Why the fast engine draws its own traces: what the row / size / mask properties would cost if their
// traces came from RapidCheck's generators (gen_config and the stateful commands, as the tensor
// engine draws them) instead of the fast campaign's seeded PRNG. Three rates side by side, one
// process, one thread: the fast campaign as `kvconform run` runs it; RapidCheck generating the same
// kind of traces and checking nothing; and RapidCheck generating them with the fast check run on
// each (what "the fast engine on RapidCheck" would be). docs/performance.md records a run.
//
//   build/generators/kvc_generation_bench [traces]        (default 20000)
#include <rapidcheck.h>
#include <rapidcheck/state.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

#include "kvcgen/campaign.h"
#include "kvcgen/rc_check.h"
#include "kvcgen/scenario.h"
#include "kvcgen/sut.h"

namespace {

using namespace kvc;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The steps a command sequence makes (0 = Reset), from the commands' own words.
campaign::FastTrace fast_trace(const ScenarioConfig& c, const std::vector<std::shared_ptr<const CacheCommand>>& commands) {
  campaign::FastTrace t;
  t.layers = {c.static_spec(), c.dynamic_spec()};
  t.batch = c.batch;
  t.left_padding = c.left_padding;
  CacheModel model{c, 0};
  for (const auto& command : commands) {
    CacheModel after = model;
    command->apply(after);
    t.steps.push_back(after.seen == 0 ? 0 : after.seen - model.seen);
    model = after;
  }
  return t;
}

double rapidcheck_rate(int traces, campaign::Property property, bool check) {
  rc_check::Params p;
  p.id = "generation_bench";
  p.iterations = traces;
  std::string failure;
  const auto started = Clock::now();
  const rc_check::Result r = rc_check::check(p, [&] {
    const ScenarioConfig config = *gen_config(ConfigFilter{});
    const auto commands = *rc::state::gen::commands(CacheModel{config, 0},
                                                    rc::state::gen::execOneOfWithArgs<Prefill, Decode, Extend, Reset>());
    if (check) {
      const std::string e = campaign::check_fast(property, fast_trace(config, commands));
      if (!e.empty()) RC_FAIL(e);
    }
  });
  const double s = seconds_since(started);
  if (!r.ok) std::fprintf(stderr, "unexpected failure: %s\n", r.failure.c_str());
  return traces / s;
}

}  // namespace

int main(int argc, char** argv) {
  const int traces = argc > 1 ? std::atoi(argv[1]) : 20000;
  std::printf("%-16s %14s %14s %14s %9s\n", "property", "fast engine", "rc gen only", "rc gen+check", "ratio");
  for (campaign::Property p : {campaign::Property::StoredRows, campaign::Property::ReturnedRows,
                               campaign::Property::WindowCoverage}) {
    campaign::Options o;
    o.iterations = traces;
    o.engine = campaign::Engine::Fast;
    const auto started = Clock::now();
    const campaign::Outcome outcome = campaign::run(p, o);
    const double fast = traces / seconds_since(started);
    if (!outcome.ok) std::fprintf(stderr, "unexpected failure: %s\n", outcome.failure.c_str());
    const double gen = rapidcheck_rate(traces, p, false);
    const double both = rapidcheck_rate(traces, p, true);
    std::printf("%-16s %14.0f %14.0f %14.0f %8.1fx\n", campaign::to_string(p), fast, gen, both, fast / both);
  }
  std::printf("traces per second, %d traces each, one thread; ratio = fast engine / (rc gen+check)\n", traces);
  return 0;
}
