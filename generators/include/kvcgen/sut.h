// The system under test of the stateful properties: the reference layers (static, dynamic and a
// twin of the other sliding kind), position-tag shadows, masks, attention and the float64 oracle.
// Each step checks one property and fails with RC_FAIL and a readable message (the tensor engine,
// trace_engine.h, reads it back).
#pragma once

#include <memory>

#include "kvcgen/campaign.h"
#include "kvconform/mutants.h"
#include "kvcgen/scenario.h"

namespace kvc {

class SystemUnderTest : public TraceSystem {
 public:
  SystemUnderTest(const ScenarioConfig& config, campaign::Property property, Mutation mutation,
                  campaign::Observations* observations);
  ~SystemUnderTest() override;
  // Feeds `q` new tokens to every layer (the model's `seen` tokens came before) and checks.
  void step(int64_t seen, int64_t q, const char* command);
  // The trace's commands (scenario.h, TraceSystem): an update is step(); the call steps and the
  // attribute reads are judged by the property layer_calls.
  void update(const TraceModel& before, int64_t q, const char* command) override;
  void reset() override;
  void crop(const TraceModel& before, int64_t n) override;
  void record_past(const TraceModel& before) override;
  void read_attributes(const TraceModel& before) override;
  void reset_layers(const TraceModel& before) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvc
