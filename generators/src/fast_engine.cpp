// The fast engine: a trace on the position-level simulation (fastpath.h), judged against the
// documented rules (positions.h) for stored_rows, returned_rows and window_coverage. No LibTorch:
// it checks what the tensor engine checks in a fraction of the time, so it runs those properties
// by default.
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kvcgen/campaign.h"
#include "kvcgen/position_checks.h"
#include "kvcgen/trace_engine.h"
#include "kvconform/fastpath.h"
#include "kvconform/positions.h"

namespace kvc::campaign {

namespace {

// One trace on the fast path; the failure message (empty when every step holds) in the words of
// the tensor engine (sut.cpp), and the index of the failing command.
struct Checker {
  Checker(Property p, Mutation m) : property(p), mutation(m) {}
  Property property;
  Mutation mutation;
  int64_t steps = 0;
  int64_t deviation_steps = 0;    // layer-steps where transformers drops keys its window allows
  const Behaviours behaviours{};  // the campaign checks the newest release's layers, as sut.cpp
  const std::vector<int64_t> no_padding;
  // Reused between traces: the check allocates nothing per step once warm.
  fast::TokenRows returned;
  std::vector<uint8_t> mask;
  MaskRequest m;  // reused: assign_mask_request keeps its buffers
  PositionChecks checks;

  std::string check_step(fast::Layer& layer, const char* role, int64_t batch, const LeftPadding& padding, int64_t seen, int64_t q,
                         const char* command) {
    const LayerSpec& spec = layer.spec();
    const StepAt at{command, role, &spec, seen, q};
    const MaskSizes sizes = layer.get_mask_sizes(q);
    // transformers itself drops keys the window allows here (positions::loses_window_keys): judged
    // against what the layer returns and counted as a reproduced upstream deviation, as sut.cpp does.
    const bool lost_keys = property == Property::WindowCoverage && spec.is_sliding() &&
                           positions::loses_window_keys(spec, seen, q, padding ? *padding : no_padding);
    if (lost_keys) ++deviation_steps;
    try {
      layer.update(q, returned);
    } catch (const std::exception& e) {
      return at.who() + " threw: " + e.what();
    }
    ++steps;
    if (property == Property::StoredRows) return checks.stored(at, layer.stored());
    if (property == Property::ReturnedRows) return checks.returned(at, sizes, returned);
    // WindowCoverage: the tokens each query attends through its unmasked columns.
    assign_mask_request(m, spec, behaviours, batch, padding, seen, q, std::nullopt, sizes);
    fast::boolean_mask(m, mask, mutation);
    return checks.coverage(at, batch, padding, sizes, returned, mask, !lost_keys && fast::skips(m), lost_keys);
  }

  // Runs the trace; nullopt when it holds (or a command breaks its precondition: no case).
  std::optional<TraceFailure> run(const Trace& t) {
    const ScenarioConfig& c = t.config;
    // The static and the dynamic layer, as the tensor engine checks them (a dynamic layer whose
    // configuration transformers itself gets wrong, window 1, is left out there too).
    fast::Layer layers[2] = {fast::Layer(c.static_spec(), behaviours, mutation),
                             fast::Layer(c.dynamic_spec(), behaviours, mutation)};
    const char* roles[2] = {"static", "dynamic"};
    const size_t count = positions::upstream_deviation(c.dynamic_spec()) ? 1 : 2;
    // The commands through their rows (scenario.h); the fast path follows updates and resets only,
    // and no property it serves draws a call step (layer_calls has no fast path).
    struct System : TraceSystem {
      Checker& checker;
      fast::Layer* layers;
      const char* const* roles;
      size_t count;
      const ScenarioConfig& c;
      std::string failure;
      System(Checker& k, fast::Layer* l, const char* const* r, size_t n, const ScenarioConfig& config)
          : checker(k), layers(l), roles(r), count(n), c(config) {}
      void update(const TraceModel& before, int64_t q, const char* command) override {
        for (size_t l = 0; l < count && failure.empty(); ++l)
          failure = checker.check_step(layers[l], roles[l], c.batch, c.left_padding, before.seen, q, command);
      }
      void reset() override {
        for (size_t l = 0; l < 2; ++l) layers[l].reset();
      }
      [[noreturn]] static void no_call(const char* what) {
        throw std::logic_error(std::string("the fast engine runs no ") + what +
                               " step (the property layer_calls has no fast path)");
      }
      void crop(const TraceModel&, int64_t) override { no_call("Crop"); }
      void record_past(const TraceModel&) override { no_call("Record"); }
      void read_attributes(const TraceModel&) override { no_call("Read"); }
      void reset_layers(const TraceModel&) override { no_call("LayerReset"); }
    } system(*this, layers, roles, count, c);
    TraceModel m;
    for (size_t k = 0; k < t.commands.size(); ++k) {
      const Command& cmd = t.commands[k];
      const CommandRow& r = row(cmd.kind);
      if (!r.allowed(cmd, c, m)) return std::nullopt;
      r.run(cmd, system, m);
      if (!system.failure.empty()) return TraceFailure{system.failure, k};
      r.apply(cmd, m);
    }
    return std::nullopt;
  }
};

}  // namespace

std::string check_fast(Property property, const FastTrace& t, Mutation mutation) {
  if (!has_fast_path(property)) resolve(TraceEngineKind::Fast, property);
  thread_local Checker checker{property, mutation};
  checker.property = property;
  checker.mutation = mutation;
  thread_local std::vector<fast::Layer> layers;
  layers.clear();
  for (const LayerSpec& spec : t.layers)
    if (!positions::upstream_deviation(spec)) layers.emplace_back(spec, Behaviours{}, mutation);
  return fast::for_each_step(layers, t.steps, [&](size_t l, fast::Layer& layer, int64_t seen, int64_t q) {
    const std::string e = checker.check_step(layer, "layer", t.batch, t.left_padding, seen, q, "Update");
    return e.empty() ? e : "layer " + std::to_string(l) + ": " + e;
  });
}

namespace {

class FastEngine : public TraceEngine {
 public:
  FastEngine(Property p, Mutation m, Observations* observations) : checker_(p, m), observations_(observations) {}
  std::optional<TraceFailure> run(const Trace& trace) override {
    std::optional<TraceFailure> failure = checker_.run(trace);
    if (observations_) {
      observations_->steps = static_cast<int>(checker_.steps);
      observations_->deviation_steps = static_cast<int>(checker_.deviation_steps);
    }
    return failure;
  }

 private:
  Checker checker_;
  Observations* observations_;
};

}  // namespace

std::unique_ptr<TraceEngine> make_fast_engine(Property p, Mutation m, Observations* observations) {
  if (!has_fast_path(p)) resolve(TraceEngineKind::Fast, p);  // throws with the reason
  return std::make_unique<FastEngine>(p, m, observations);
}

}  // namespace kvc::campaign
