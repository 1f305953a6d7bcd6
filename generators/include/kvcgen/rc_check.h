// The one place that reaches into RapidCheck's internal runner (rc::detail). RapidCheck's public
// API runs properties only through its own main or test-framework macros, which print and stop the
// program; kvconform needs a property run quietly, with its seed, size and reproduce string, and
// its result back as data. Everything else uses this adapter.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "kvconform/seeds.h"

namespace kvc::rc_check {

struct Params {
  std::string id;            // the property's name (also the key of a reproduce string)
  std::string description;
  uint64_t seed = kvc::seeds::kDefaultSeed;
  int iterations = 100;
  int max_size = 50;
  std::string reproduce;     // a reproduce string from an earlier failure; empty: none
};

struct Result {
  bool ok = true;
  int passed = 0;            // cases that passed (before the failure)
  std::string failure;       // RapidCheck's message: the shrunk counterexample and the failure
  std::string reproduce;     // replays the shrunk failure (Params::reproduce); empty when ok
};

// Runs `property` (which uses *rc::gen... and RC_FAIL as in any RapidCheck property). Throws
// std::invalid_argument for a malformed reproduce string.
Result check(const Params& params, const std::function<void()>& property);

}  // namespace kvc::rc_check
