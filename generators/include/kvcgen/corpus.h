// The generated golden corpus: random scenario files drawn from the property generators, biased to
// the window boundaries, so that the real transformers classes meet random sequences too
// (cases/generated/, fixtures dumped by golden/dump.py, replayed like the hand-written cases).
// No LibTorch here.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <vector>

namespace kvc::corpus {

// Case `index` of the campaign with seed `seed`, named `name`: drawn from seeds::case_seed(seed,
// index), so it depends on nothing else (the differential fuzzer's and bench --vs-python's unit).
nlohmann::ordered_json draw(uint64_t seed, uint64_t index, const std::string& name);

// Cases 0 .. count-1 of `seed` as scenario documents (cases/schema.json), named
// gen_<index>_<cache>_<layers>_w<W>.
std::vector<nlohmann::ordered_json> generate(uint64_t seed, int count);

// `count` cases for the mask builders' rare branches (left padding at decode, static sliding and
// chunked layers below their window, hybrids sharing a builder's sizes), from their own stream of
// case seeds: gen_rare_<index>_<cache>_<layers>_w<W>.
std::vector<nlohmann::ordered_json> generate_rare(uint64_t seed, int count);
constexpr int kRareCases = 12;  // written beside --generate-corpus N's N cases

}  // namespace kvc::corpus
