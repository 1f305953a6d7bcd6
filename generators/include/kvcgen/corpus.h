// The generated golden corpus: random scenario files drawn from the property generators, biased to
// the window boundaries, so that the real transformers classes meet random sequences too
// (cases/generated/, fixtures dumped by golden/dump.py, replayed like the hand-written cases).
// No LibTorch here.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <vector>

namespace kvc::corpus {

// `count` scenario documents (cases/schema.json), deterministic in `seed`. Names are
// gen_<index>_<cache>_<layers>_w<W>.
std::vector<nlohmann::ordered_json> generate(uint64_t seed, int count);

// One random scenario (the differential fuzzer's unit), named `name`.
nlohmann::ordered_json generate_one(uint64_t seed, const std::string& name);

}  // namespace kvc::corpus
