// The one seed discipline (docs/architecture.md, "Seeds"). Every command takes `--seed S`
// (default kDefaultSeed, or KVC_SEED), and every campaign derives what it draws from S the same way:
//   - a campaign driven by RapidCheck (the tensor engine's properties, the plugin and engine
//     campaigns) hands S to RapidCheck, which owns the per-case randomness and its reproduce string;
//   - everything kvconform draws itself (the fast engine's case i, the differential fuzzer's case i,
//     the generated corpus' case i, `kvconform fuzz`'s round i) starts from case_seed(S, i);
//   - a case's tensors come from its own input seed through kvc-mix64-v1 (inputs.h), never from S.
// So one S names the same cases in every command, and case i never depends on how many cases ran
// before it (a shard, a filter or a time budget draws exactly what the whole run would).
#pragma once

#include <cstdint>

#include "kvconform/inputs.h"

namespace kvc::seeds {

inline constexpr uint64_t kDefaultSeed = 20250917;

// The +1 is the fast engine's original derivation, kept so that the default run's reports did not
// change when the other campaigns moved onto it.
inline uint64_t case_seed(uint64_t seed, uint64_t index) { return inputs::mix64(seed ^ inputs::mix64(index + 1)); }

}  // namespace kvc::seeds
