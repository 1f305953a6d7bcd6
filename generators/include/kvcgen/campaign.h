// The built-in property campaign: each property runs over the traces of the one generator
// (scenario.h) on one of two engines (trace_engine.h), and its first failing trace is shrunk with the
// one shrinker (shrink.h). No LibTorch in this header.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kvconform/mutants.h"
#include "kvconform/results.h"
#include "kvconform/seeds.h"
#include "kvconform/tolerance.h"
#include "kvcgen/scenario.h"

namespace kvc::campaign {

enum class Property {
  StoredRows,         // 1: stored rows = last min(seen, capacity) tokens in order, unwritten rows zero
  ReturnedRows,       // 2: returned rows = tokens [kv_offset, kv_offset + kv_length), length == kv_length
  WindowCoverage,     // 3: each query attends exactly the keys the window rule allows
  AttentionVsOracle,  // 4: attention from the layer's K/V and mask matches the float64 oracle
  LayerAgreement,     // 5: static == dynamic outputs; sliding and chunked twins store the same rows
  BackendsVsOracle,   // 6: every CPU attention backend (backends.h) within the tolerance policy of the oracle
  LayerCalls,         // 7: crop, past recording and the attributes a caller reads keep their contract
};

const char* to_string(Property p);  // "stored_rows", ...
const char* describe(Property p);
Property parse_property(const std::string& s);  // throws std::invalid_argument
std::vector<Property> all_properties();

// The tolerance policy a property judges by, and its bound where one number applies (a dtype
// filter for attention_vs_oracle; -1 where it varies per dtype or step).
struct Judged {
  Policy policy;
  double bound;
};
Judged judged_by(Property p, std::optional<DType> dtype);

// Which implementation a property runs on. Fast: the position-level simulation (fastpath.h, no
// tensors; rows, mask sizes and masks only). Tensor: the LibTorch reference with position-tag
// shadows and the K/V bytes of every row. Auto: Fast where it covers the property (stored_rows,
// returned_rows, window_coverage), Tensor for the value properties.
enum class TraceEngineKind { Auto, Tensor, Fast };
const char* to_string(TraceEngineKind e);                  // "auto", "tensor", "fast"
TraceEngineKind parse_trace_engine(const std::string& s);  // throws std::invalid_argument
bool has_fast_path(Property p);
TraceEngineKind resolve(TraceEngineKind e, Property p);  // Auto -> Fast or Tensor; Fast without a fast path throws

struct Options {
  uint64_t seed = kvc::seeds::kDefaultSeed;  // fixed default: the same campaign every run
  int iterations = 100;                      // traces per property
  int max_size = 100;                        // the last trace's size (longer command sequences as it grows)
  Mutation mutation = Mutation::None;
  ConfigFilter filter;
  std::string reproduce;  // a reproduce string from an earlier failure: replays that case alone
  TraceEngineKind trace_engine =
      TraceEngineKind::Auto;  // the trace engine (run --trace-engine); not an inference engine (kvc::engine)
};

// Defaults overridden by KVC_SEED, KVC_ITERATIONS, KVC_MAX_SIZE, KVC_REPRODUCE, KVC_TRACE_ENGINE (or its old name KVC_ENGINE); a malformed
// value throws std::invalid_argument naming the variable.
Options options_from_env(Options defaults = {});

// Largest numerical errors seen against the oracle, per dtype (for the tolerance table).
struct Observations {
  std::map<std::string, double> max_error;  // "eager/float16" -> max |err|
  int steps = 0;
  int deviation_steps = 0;  // layer-steps where transformers drops keys its window allows (max_cache_len < W)
};

// The shrunk failing case in a form other tools can write out (fuzz turns it into a cases/ file).
struct Counterexample {
  ScenarioConfig config;
  std::vector<std::string> commands;       // every command of the shrunk sequence as shown, up to the failing one
  std::vector<int64_t> steps;              // tokens per update since the last Reset; the failing update is last
  std::vector<report::MaskPicture> masks;  // the failing update's masks where they differ from the window rule
};

struct Outcome {
  Property property;
  bool ok = false;
  int cases = 0;          // successful test cases before the end (or the failure)
  std::string params;     // "seed=…,iterations=…"
  std::string failure;    // shrunk counterexample and message, empty when ok
  std::string reproduce;  // pass back through Options::reproduce / KVC_REPRODUCE
  Observations observations;
  std::optional<Counterexample> counterexample;  // set when !ok and the failure came from a command
};

Outcome run(Property property, const Options& options);

// One sequence of updates on several layers (a golden case's shape), checked on the fast engine
// under the newest release's behaviours: the failure message, empty when every step holds. Layers
// transformers itself gets wrong (positions::upstream_deviation) are left out.
struct FastTrace {
  std::vector<LayerSpec> layers;
  int64_t batch = 1;
  LeftPadding left_padding;
  std::vector<int64_t> steps;  // tokens per update; 0 resets every layer (Step::is_reset)
};
std::string check_fast(Property property, const FastTrace& trace, Mutation mutation = Mutation::None);

}  // namespace kvc::campaign
