// The one campaign loop of every random campaign kvconform runs (the properties on either engine,
// the plugin and --backend-cmd campaigns, the engine campaign): case i of the seed, drawn at a size
// that grows over the campaign, checked; the first failing case is shrunk with the one shrinker
// (shrink.h) and named by the one reproduce string, "trace:SEED:INDEX:SIZE". Case i depends only on
// the seed and i (seeds.h), so the string replays it alone. No LibTorch, no RapidCheck.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "kvcgen/shrink.h"
#include "kvconform/seeds.h"

namespace kvc::search {

// Case `index` of the campaign with `seed`, drawn at `size`.
struct CaseId {
  uint64_t seed = 0;
  int64_t index = 0;
  int size = 0;
};
std::string reproduce_string(const CaseId& id);  // "trace:SEED:INDEX:SIZE"
// Reads "trace:SEED:INDEX:SIZE" ("fast:...", the fast engine's old spelling, too); throws
// std::invalid_argument naming the format.
CaseId parse_reproduce(const std::string& text);

struct Budget {
  uint64_t seed = seeds::kDefaultSeed;
  int iterations = 100;    // cases
  int max_size = 100;      // the last case's size
  std::string reproduce;   // a reproduce string: that case alone, at its size
  int shrink_limit = 500;  // simplifications kept at most (a slow check cannot shrink for ever)
};

template <typename Case, typename Failure>
struct Result {
  int passed = 0;                  // cases that held before the failure (or all of them)
  std::optional<Case> failing;     // the shrunk failing case
  std::optional<Failure> failure;  // what the shrunk case's check said
  int shrinks = 0;
  std::string reproduce;  // names the failing case (before shrinking: shrinking is deterministic)
  bool ok() const { return !failure; }
};

// draw(CaseId) -> Case; check(const Case&, bool shrinking) -> std::optional<Failure> (nullopt: the
// case holds); simplifications(const Case&) -> smaller cases, most promising first; valid(const
// Case&) -> whether a simplification is still a case (met every precondition).
template <typename Case, typename Failure, typename Draw, typename Check, typename Simplifications, typename Valid>
Result<Case, Failure> run(const Budget& b, Draw draw, Check check, Simplifications simplifications, Valid valid) {
  CaseId first{b.seed, 0, -1};
  int64_t last = b.iterations;
  if (!b.reproduce.empty()) {
    first = parse_reproduce(b.reproduce);
    last = first.index + 1;
  }
  Result<Case, Failure> result;
  for (int64_t i = first.index; i < last; ++i) {
    // Sizes grow over the campaign as RapidCheck's do: short cases first.
    const CaseId id{first.seed, i,
                    first.size >= 0 ? first.size : static_cast<int>(b.max_size * i / std::max<int64_t>(b.iterations, 1))};
    Case c = draw(id);
    std::optional<Failure> failure = check(c, false);
    if (!failure) {
      ++result.passed;
      continue;
    }
    result.shrinks = shrink::greedy(
        c, simplifications,
        [&](const Case& candidate) {
          if (!valid(candidate)) return false;
          std::optional<Failure> f = check(candidate, true);
          if (!f) return false;
          failure = std::move(f);
          return true;
        },
        b.shrink_limit);
    result.failing = std::move(c);
    result.failure = std::move(failure);
    result.reproduce = reproduce_string(id);
    return result;
  }
  return result;
}

}  // namespace kvc::search
