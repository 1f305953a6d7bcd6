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
  std::string id;  // the property's name (also the key of a reproduce string)
  std::string description;
  uint64_t seed = kvc::seeds::kDefaultSeed;
  int iterations = 100;
  int max_size = 50;
  std::string reproduce;  // a reproduce string from an earlier failure; empty: none
};

struct Result {
  bool ok = true;
  int passed = 0;         // cases that passed (before the failure)
  std::string failure;    // RapidCheck's message: the shrunk counterexample and the failure
  std::string reproduce;  // replays the shrunk failure (Params::reproduce); empty when ok
};

// Runs `property` (which uses *rc::gen... and RC_FAIL as in any RapidCheck property). Throws
// std::invalid_argument for a malformed reproduce string.
Result check(const Params& params, const std::function<void()>& property);

// Runs `body` once, outside any campaign (code that checks with RC_FAIL, on a case drawn
// elsewhere): empty when it holds, else what its RC_FAIL or exception said, without RapidCheck's
// source location lines.
std::string failure_of(const std::function<void()>& body);

// RapidCheck's failure text without its own source location ("<file>.cpp:161:" and "RC_FAIL(...)"
// lines): the message that follows says what failed.
std::string without_internals(const std::string& failure);

}  // namespace kvc::rc_check
