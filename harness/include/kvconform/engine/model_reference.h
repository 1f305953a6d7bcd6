// The model's meaning in one plain forward: float64, no cache, no tiles, no lanes, each position
// attending the keys its layer's rule shows it, every family a ModelConfig (engine/model.h). The
// oracle's SequenceOracle is the fast path; model_reference_test holds it to this, as fastpath.cpp
// is held to the layer reference. No LibTorch here.
#pragma once

#include <cstdint>
#include <vector>

#include "kvconform/engine/model.h"

namespace kvc::engine {

// The logits of every position of `tokens` (row-major [tokens.size(), vocab]), each position p
// computed from tokens 0..p as the checkpoint's own config describes the model (an encoder's,
// ModelConfig::bidirectional: from the keys its layers' rule shows it, later ones too).
// An encoder-decoder's (ModelConfig::encoder): `tokens` are the decoder's, each position cross-attending the encoder's
// output over `source` (source_real: its attention_mask, SequenceOracle::set_source's).
std::vector<double> reference_logits(const Model& model, const std::vector<int32_t>& tokens,
                                     const std::vector<int32_t>& source = {}, const std::vector<bool>& source_real = {});
// The same with the weights of `model` read as `config` describes them (a config read another way).
// real: an encoder's attention_mask (SequenceOracle::encode's): no query sees a false (padding)
// position; empty: every position real. std::invalid_argument where a query sees no real key.
std::vector<double> reference_logits(const Model& model, const ModelConfig& config, const std::vector<int32_t>& tokens,
                                     const std::vector<bool>& real = {}, const std::vector<int32_t>& source = {},
                                     const std::vector<bool>& source_real = {});

}  // namespace kvc::engine
