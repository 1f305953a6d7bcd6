#include "kvcgen/campaign.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "kvcgen/mask_pictures.h"
#include "kvcgen/search.h"
#include "kvcgen/trace_engine.h"

namespace kvc::campaign {

namespace {

// The case's name: the tensor engine, the reference, is named without an engine.
std::string params_of(const Options& options, TraceEngineKind engine) {
  std::ostringstream params;
  params << "seed=" << options.seed << ",iterations=" << options.iterations;
  if (engine == TraceEngineKind::Fast) params << ",trace_engine=" << to_string(engine);  // the --trace-engine that ran it
  if (options.mutation != Mutation::None) params << ",mutant=" << to_string(options.mutation);
  if (options.filter.attention) params << ",attention=" << to_string(*options.filter.attention);
  if (options.filter.dtype) params << ",dtype=" << to_string(*options.filter.dtype);
  return params.str();
}

std::unique_ptr<TraceEngine> make_engine(TraceEngineKind engine, Property property, Mutation mutation,
                                         Observations* observations) {
  return engine == TraceEngineKind::Fast ? make_fast_engine(property, mutation, observations)
                                         : make_tensor_engine(property, mutation, observations);
}

// What a counterexample of `trace` shows: its configuration, commands and steps since the last Reset.
Counterexample counterexample_of(const Trace& trace, Mutation mutation) {
  Counterexample ce;
  ce.config = trace.config;
  bool updates_only = true;  // a crop's sequence is not a list of updates: no steps, no pictures
  for (const Command& cmd : trace.commands) {
    ce.commands.push_back(cmd.show());
    updates_only = row(cmd.kind).record(cmd, ce.steps) && updates_only;
  }
  if (!updates_only) ce.steps.clear();
  if (!ce.steps.empty()) ce.masks = mask_pictures(ce.config, ce.steps, mutation);
  return ce;
}

std::string failure_text(const std::string& first_line, const Counterexample& ce, const std::string& message) {
  std::ostringstream text;
  text << first_line << "\n\n" << ce.config.describe() << "\n";
  for (const std::string& s : ce.commands) text << s << "\n";
  text << "\n" << message << "\n";
  return text.str();
}

}  // namespace

// The properties' campaign: the one loop (search.h) over the one generator's traces on the
// property's engine; shrinking runs on a second engine that observes nothing.
Outcome run(Property property, const Options& options) {
  const TraceEngineKind engine = resolve(options.trace_engine, property);
  Outcome outcome;
  outcome.property = property;
  outcome.params = params_of(options, engine);
  const std::unique_ptr<TraceEngine> on = make_engine(engine, property, options.mutation, &outcome.observations);
  const std::unique_ptr<TraceEngine> probe = make_engine(engine, property, options.mutation, nullptr);
  const search::Budget budget{options.seed, options.iterations, options.max_size, options.reproduce};
  const auto found = search::run<Trace, TraceFailure>(
      budget,
      [&](const search::CaseId& id) {
        return draw_trace(id.seed, id.index, id.size, options.filter, property == Property::LayerCalls);
      },
      [&](const Trace& t, bool shrinking) { return (shrinking ? probe : on)->run(t); }, simplifications, replayable);
  outcome.cases = found.passed;
  if (found.ok()) {
    outcome.ok = true;
    return outcome;
  }
  Trace trace = *found.failing;
  trace.commands.resize(found.failure->command + 1);
  outcome.counterexample = counterexample_of(trace, options.mutation);
  outcome.failure = failure_text("Falsifiable after " + std::to_string(outcome.cases + 1) + " traces and " +
                                     std::to_string(found.shrinks) + " shrinks (" + to_string(engine) + " engine)",
                                 *outcome.counterexample, found.failure->message);
  outcome.reproduce = found.reproduce;
  return outcome;
}

}  // namespace kvc::campaign
