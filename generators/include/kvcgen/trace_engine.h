// The two engines a campaign runs its traces on, behind one interface. Tensor: the LibTorch
// reference (sut.cpp), rows by position tags and the K/V bytes of every row, attention against
// the float64 oracle. Fast: the position-level simulation (fast_engine.cpp, fastpath.h), rows, mask
// sizes and masks only. Their rules are written independently; both judge a step against
// positions.h with the same checks and messages (position_checks.h).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "kvcgen/campaign.h"
#include "kvcgen/scenario.h"

namespace kvc::campaign {

struct TraceFailure {
  std::string message;  // what the failing step says, in the words of position_checks.h / sut.cpp
  size_t command = 0;   // index of the failing command
};

class TraceEngine {
 public:
  virtual ~TraceEngine() = default;
  // Runs a replayable trace from empty layers: nullopt when every step holds.
  virtual std::optional<TraceFailure> run(const Trace& trace) = 0;
};

// `observations` collects the campaign's step counts and errors (nullptr while shrinking).
std::unique_ptr<TraceEngine> make_fast_engine(Property p, Mutation m, Observations* observations);
std::unique_ptr<TraceEngine> make_tensor_engine(Property p, Mutation m, Observations* observations);

}  // namespace kvc::campaign
