// Random scenarios for the model-based (stateful) property tests: a configuration, a position-level
// model of the cache, and the commands Prefill / Decode / Extend / Reset. No LibTorch here: the
// system under test is reached through sut.h.
#pragma once

#include <rapidcheck.h>
#include <rapidcheck/state.h>

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "kvconform/types.h"

namespace kvc {

struct ScenarioConfig {
  LayerType attention = LayerType::Sliding;  // sliding or chunked layers; Full exercises full layers
  int64_t window = 4;                        // sliding_window or attention_chunk_size
  int64_t max_cache_len = 8;                 // static layers
  int64_t batch = 1, heads = 1, kv_heads = 1, head_dim = 4;
  DType dtype = DType::Float32;
  LeftPadding left_padding;                  // nullopt: no attention_mask
  uint64_t seed = 0;                         // inputs are kvc-mix64-v1(seed)
  int64_t max_tokens = 0;                    // total tokens a sequence may reach (speed and validity)

  LayerSpec static_spec() const { return {CacheKind::Static, attention, window, max_cache_len}; }
  LayerSpec dynamic_spec() const { return {CacheKind::Dynamic, attention, window, max_cache_len}; }
  int64_t max_left_padding() const;
  std::string describe() const;  // compact one-line form for reports
};

void showValue(const ScenarioConfig& c, std::ostream& os);

// Filters a campaign can put on the generated configurations (CLI --attention / --dtype).
struct ConfigFilter {
  std::optional<LayerType> attention;
  std::optional<DType> dtype;
};

rc::Gen<ScenarioConfig> gen_config(const ConfigFilter& filter = {});

// The tokens a generated sequence may reach (ScenarioConfig::max_tokens): long enough to wrap a
// static buffer a few times, bounded where a static layer cannot serve more (max_cache_len below
// the window, or a full layer). Both engines' draws use it.
int64_t token_limit(const ScenarioConfig& c);

// What the model knows: the configuration and how many tokens the current sequence holds.
struct CacheModel {
  ScenarioConfig config;
  int64_t seen = 0;
};

class SystemUnderTest;  // sut.h
using CacheCommand = rc::state::Command<CacheModel, SystemUnderTest>;

// The first update of a sequence: n tokens (n > every row's left padding).
struct Prefill : CacheCommand {
  int64_t n;
  explicit Prefill(const CacheModel& m);
  void checkPreconditions(const CacheModel& m) const override;
  void apply(CacheModel& m) const override;
  void run(const CacheModel& m, SystemUnderTest& sut) const override;
  void show(std::ostream& os) const override;
};

// One generated token.
struct Decode : CacheCommand {
  explicit Decode(const CacheModel&) {}
  void checkPreconditions(const CacheModel& m) const override;
  void apply(CacheModel& m) const override;
  void run(const CacheModel& m, SystemUnderTest& sut) const override;
  void show(std::ostream& os) const override;
};

// Several tokens after the first update (prefix caching, chat continuation), also once full.
struct Extend : CacheCommand {
  int64_t n;
  explicit Extend(const CacheModel& m);
  void checkPreconditions(const CacheModel& m) const override;
  void apply(CacheModel& m) const override;
  void run(const CacheModel& m, SystemUnderTest& sut) const override;
  void show(std::ostream& os) const override;
};

// Clears every layer; the next command starts a new sequence.
struct Reset : CacheCommand {
  explicit Reset(const CacheModel&) {}
  void checkPreconditions(const CacheModel& m) const override;
  void apply(CacheModel& m) const override;
  void run(const CacheModel& m, SystemUnderTest& sut) const override;
  void show(std::ostream& os) const override;
};

}  // namespace kvc
