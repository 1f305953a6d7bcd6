// Mask pictures of a scenario's last update: for the static and the dynamic layer, the mask the
// reference builds (with a mutation, if any) against the window rule over absolute positions.
// No LibTorch in this header.
#pragma once

#include <vector>

#include "kvconform/mutants.h"
#include "kvconform/results.h"
#include "kvcgen/scenario.h"

namespace kvc {

// `steps`: tokens per update of one sequence; the pictures show the last one. Only batch rows
// whose mask differs from the rule are drawn (at most `max_pictures`); empty when all agree or
// when the layers cannot run the steps at all.
std::vector<report::MaskPicture> mask_pictures(const ScenarioConfig& config, const std::vector<int64_t>& steps, Mutation mutation,
                                               size_t max_pictures = 4);

}  // namespace kvc
