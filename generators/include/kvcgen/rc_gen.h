// The one generator's configurations (scenario.h) as a RapidCheck generator, for what RapidCheck
// still drives (the metamorphic gtest properties, the corpus' multi-layer cases): the same
// configurations the campaigns draw, shrunk through the same simplifications (simpler_configs).
#pragma once

#include <rapidcheck.h>

#include "kvcgen/scenario.h"

namespace kvc {

inline rc::Gen<ScenarioConfig> gen_config(const ConfigFilter& filter = {}) {
  return rc::Gen<ScenarioConfig>([filter](const rc::Random& random, int) {
    const ScenarioConfig drawn = draw_config(rc::Random(random).next(), filter);
    return rc::shrinkable::shrinkRecur(drawn, [](const ScenarioConfig& c) { return rc::seq::fromContainer(simpler_configs(c)); });
  });
}

}  // namespace kvc
