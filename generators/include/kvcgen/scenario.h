// The one generator of the campaigns: a configuration and a sequence of commands (Prefill / Decode
// / Extend / Reset), drawn from a seed with a plain PRNG, their preconditions, and the
// simplifications the one shrinker (shrink.h) tries. The one loop (search.h) draws and shrinks them
// for the properties (both engines) and the plugin campaign; the metamorphic tests and the corpus
// draw their configurations here too (rc_gen.h). No LibTorch, no RapidCheck.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kvconform/inputs.h"
#include "kvconform/types.h"

namespace kvc {

struct ScenarioConfig {
  LayerType attention = LayerType::Sliding;  // sliding or chunked layers; Full exercises full layers
  int64_t window = 4;                        // sliding_window or attention_chunk_size
  int64_t max_cache_len = 8;                 // static layers
  int64_t batch = 1, heads = 1, kv_heads = 1, head_dim = 4;
  DType dtype = DType::Float32;
  LeftPadding left_padding;  // nullopt: no attention_mask
  uint64_t seed = 0;         // inputs are kvc-mix64-v1(seed)
  int64_t max_tokens = 0;    // total tokens a sequence may reach (speed and validity)

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

// The tokens a generated sequence may reach (ScenarioConfig::max_tokens): long enough to wrap a
// static buffer a few times, bounded where a static layer cannot serve more (max_cache_len below
// the window, or a full layer). Both engines' draws use it.
int64_t token_limit(const ScenarioConfig& c);

// A command of a trace. Prefill: the first update of a sequence, n tokens (n > every row's left
// padding). Decode: one token. Extend: n >= 2 tokens after the first update (prefix caching, chat
// continuation), also once full. Reset: clears every layer; the next command starts a new sequence.
// The layer API's call steps (drawn for the property layer_calls only, so the other properties'
// traces stay what they were for every seed): Crop, crop(-n) on every layer, the last n tokens
// gone (speculative decoding's rollback); Record, activate_past_recording() before a sequence's
// first update; Read, the attributes a caller reads (is_croppable, is_compileable,
// get_seq_length(), get_max_cache_shape()); LayerReset, the layers' own reset() (the case files'
// call step "reset"): the same layers, emptied, serve the next sequence (Reset instead clears them as
// a new layer is), past recording kept on.
enum class CommandKind { Prefill, Decode, Extend, Reset, Crop, Record, Read, LayerReset };
struct Command {
  CommandKind kind;
  int64_t n;                 // tokens (Prefill, Extend, Crop: removed); 1 for Decode, 0 otherwise
  const char* name() const;  // "Prefill", ... as failure messages name the step
  std::string show() const;  // "Prefill(5)", "Decode", "Crop(2)", ...
};

// What a trace's preconditions read: the tokens the sequence holds and whether past recording was
// asked for it (RapidCheck's model state).
struct TraceModel {
  int64_t seen = 0;
  bool recording = false;  // Record ran before this sequence's first update
  int64_t crop_point = 0;  // the tokens held right after the sequence's last crop (0: none yet)
};

// What a command runs on: a trace engine's system (the tensor engine's SystemUnderTest, the fast
// engine's layers). Each judges as it runs and fails with its engine's message.
class TraceSystem {
 public:
  virtual ~TraceSystem() = default;
  virtual void update(const TraceModel& before, int64_t q, const char* command) = 0;  // q new tokens
  virtual void reset() = 0;                                                           // a new sequence
  // A layer method other than update on every layer (layer_calls only), judged against the rules.
  virtual void crop(const TraceModel& before, int64_t n) = 0;
  virtual void record_past(const TraceModel& before) = 0;
  virtual void read_attributes(const TraceModel& before) = 0;
  virtual void reset_layers(const TraceModel& before) = 0;
};

// One kind of command, defined once (as a RapidCheck Command): its name, its precondition on the
// model, what it does to the model, how it shows, the fewest tokens the shrinker may bring it to,
// and how it runs on a system. The runners, the generator's checks and the shrinker ask the row,
// never which kind a command is.
struct CommandRow {
  CommandKind kind;
  const char* name;
  bool (*allowed)(const Command& cmd, const ScenarioConfig& c, const TraceModel& m);
  void (*apply)(const Command& cmd, TraceModel& m);
  int64_t (*least)(const Command& cmd, const ScenarioConfig& c);  // the shrinker's floor for n
  void (*run)(const Command& cmd, TraceSystem& system, const TraceModel& before);
  // A counterexample's updates since the sequence started: false where the command cannot be
  // written as one (a crop), and the steps are then left out.
  bool (*record)(const Command& cmd, std::vector<int64_t>& steps);
};
const CommandRow& row(CommandKind kind);
struct Trace {
  ScenarioConfig config;
  std::vector<Command> commands;
};
// Runs a replayable trace's commands on `system` from its empty layers; `at` is the command running.
void run_trace(const Trace& t, TraceSystem& system, size_t& at);

// The one generator's PRNG (kvc-mix64-v1 over a Weyl sequence). RapidCheck's generators cost more
// than the fast engine's whole check (17 to 104 times, docs/performance.md), so nothing random in a
// campaign draws through them.
struct Rng {
  uint64_t state;
  uint64_t next() { return inputs::mix64(state += 0x9E3779B97F4A7C15ULL); }
  int64_t in(int64_t lo, int64_t hi_exclusive) {  // uniform in [lo, hi)
    return lo + static_cast<int64_t>(next() % static_cast<uint64_t>(hi_exclusive - lo));
  }
  template <typename T>
  T weighted(std::initializer_list<std::pair<int, T>> choices) {  // by integer weights
    int total = 0;
    for (const auto& c : choices) total += c.first;
    int64_t r = in(0, total);
    for (const auto& c : choices)
      if ((r -= c.first) < 0) return c.second;
    return choices.begin()->second;
  }
  template <typename T>
  T element(std::initializer_list<T> choices) {  // uniform
    return choices.begin()[in(0, static_cast<int64_t>(choices.size()))];
  }
};

// The configuration drawn from `state` (the corpus and the plugin campaign draw theirs here).
ScenarioConfig draw_config(uint64_t state, const ConfigFilter& filter = {});
// Trace `index` of the campaign with `seed` (seeds::case_seed), at `size`: longer sequences as it
// grows (0 to a campaign's max_size, as RapidCheck sizes grow). Every command meets its precondition.
// With `calls` (the property layer_calls) the call steps are drawn too (Crop twice as often as each
// other kind; LayerReset from a fifth draw, after the others, so earlier call traces keep their start) and head_dim is at most 4; without, every draw is what it was before they existed.
Trace draw_trace(uint64_t seed, int64_t index, int size, const ConfigFilter& filter = {}, bool calls = false);

// The command's precondition on the tokens the sequence holds so far (no past recording asked).
bool allowed(const Command& cmd, const ScenarioConfig& c, int64_t seen);
// Whether a layer of `spec` serves crop(-n) as a rollback to the first seen - n tokens, by
// transformers' documented contract: a dynamic full layer always; a dynamic sliding one before its
// window, or past it with past recording and n within the tokens fed since the last crop; a static
// full one always (it never slides); a static sliding one only where is_croppable (max_cache_len <=
// window) and while it has not slid (seen <= its rows). A crop is drawn where the dynamic layer
// serves it; a layer that does not is left out of the judging until the next Reset.
bool serves_crop(const LayerSpec& spec, const TraceModel& m, int64_t n);

bool replayable(const Trace& t);  // every command allowed in turn

// Simpler cases than a failing one, most aggressive first, for shrink::greedy (possibly not
// replayable: the shrinker skips those). simpler_configs: the configuration alone (smaller window,
// batch, cache, heads, no padding), each with max_tokens and the padding brought into range.
std::vector<ScenarioConfig> simpler_configs(const ScenarioConfig& c);
std::vector<Trace> simplifications(const Trace& t);

}  // namespace kvc
