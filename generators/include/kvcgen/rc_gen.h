// The one generator (scenario.h) as a RapidCheck generator, for the tests and campaigns RapidCheck
// drives (the plugin campaign, the corpus, the metamorphic properties): the same configurations the
// engines' campaigns draw, shrunk through the same simplifications (simpler_configs).
#pragma once

#include <rapidcheck.h>

#include <utility>
#include <vector>

#include "kvcgen/scenario.h"

namespace kvc {

inline rc::Gen<ScenarioConfig> gen_config(const ConfigFilter& filter = {}) {
  return rc::Gen<ScenarioConfig>([filter](const rc::Random& random, int) {
    const ScenarioConfig drawn = draw_config(rc::Random(random).next(), filter);
    return rc::shrinkable::shrinkRecur(drawn, [](const ScenarioConfig& c) { return rc::seq::fromContainer(simpler_configs(c)); });
  });
}

// A trace of the one generator at RapidCheck's size, shrunk through simplifications (scenario.h).
inline rc::Gen<Trace> gen_trace(const ConfigFilter& filter = {}) {
  return rc::Gen<Trace>([filter](const rc::Random& random, int size) {
    const Trace drawn = draw_trace(rc::Random(random).next(), 0, size, filter);
    return rc::shrinkable::shrinkRecur(drawn, [](const Trace& t) {
      std::vector<Trace> valid;
      for (Trace& s : simplifications(t))
        if (replayable(s)) valid.push_back(std::move(s));
      return rc::seq::fromContainer(std::move(valid));
    });
  });
}

}  // namespace kvc
