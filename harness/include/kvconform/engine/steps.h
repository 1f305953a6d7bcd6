// The step table: every kind of plan step, defined once. A kind is one struct (a command, as
// RapidCheck's Command or a Hypothesis @rule): its named fields, its protocol op, the optional
// operation an engine must list to be sent it, its operation mutants, `pre` (when it may run),
// `apply` to the sequence lengths, the positions whose logits it returns and the judge checks, its
// oracle (how the model oracle runs it, and how a departure from it is run), how the campaign draws
// it, its JSON in and out (plans and the protocol share the fields) and how it prints. `PlanStep`
// holds one of them; the code outside this table asks the step, never which kind it is.
// Adding a serving operation is one struct here (and its row in `StepKinds`) plus one method per
// worker; engines/protocol.json is generated from this table (`kvconform engine --protocol`).
// No LibTorch here.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvc::engine {

class PlanStep;

// Sequence lengths as the steps run (PlanStep::apply).
using Lengths = std::map<int64_t, int64_t>;
// (sequence, position) of each row of a step's logits, in order.
using Positions = std::vector<std::pair<int64_t, int64_t>>;

// A mutant that does one operation wrong (the window right): its name (the name of the mistake: the
// diagnosis kind it is caught as where it has one, docs/mutants.md), what it does, and the spelling
// it replaced (accepted for one release, with a note naming the new one; "" for none).
struct OperationMutant {
  const char* name;
  const char* does;
  const char* old = "";
};

// Reads a step's fields from a plan file or a request header; throws std::invalid_argument naming the
// file and the JSON pointer of the bad field.
struct StepReader {
  const nlohmann::json& j;
  std::string ptr, file;
  [[noreturn]] void bad(const std::string& at, const std::string& why) const;
  int64_t seq(const nlohmann::json& obj, const std::string& key, const std::string& at) const;  // in [0, 15]
  std::vector<int32_t> tokens(const nlohmann::json& obj, const std::string& at) const;          // non-empty token ids
  int64_t integer(const std::string& key, int64_t least, const std::string& what) const;        // j[key] >= least
  int64_t seq() const { return j.contains("seq") ? seq(j, "seq", ptr) : 0; }
};

// One raw draw of the engine campaign: its kind, size, sequence and a variant (which window or block
// edge a fork diverges at, which chunk size, how many draft tokens a spec cycle rejects, the batch's
// other length). A shrunk draw is simpler: fewer steps, kind 0 (an extend), smaller, on sequence 0,
// variant 0 (each operation's plainest form).
struct DrawnStep {
  int kind = 0, size = 1, seq = 0, variant = 0;
};

// What a row's draw may use: the engine's operations, the lengths so far, the plan's token streams.
struct DrawContext {
  std::vector<std::string> operations;
  int64_t window = 1, vocab = 2;  // window >= 1
  uint64_t seed = 0, salt = 0;
  Lengths len;
  // The chunked layers' C (0: the model has none). A chunk's boundaries are absolute (k*C), not a
  // distance back from the query as a window's edge is: on a chunked model the operations' variants
  // 1-7 aim at the chunk starts near the sequence's length instead of the window's edges (variant 0
  // stays each operation's plainest form, where the shrinker goes).
  int64_t chunk = 0;
  bool has(const char* operation) const;
  int64_t length(int64_t seq) const;
  std::vector<int32_t> tokens(int64_t n, int size) const;  // the draw's tokens, from (seed, salt, size)
  // Variant v's (1-7) position at a chunk boundary at or behind `length`, with c0 the start of the chunk
  // `length` is in: c0 - 1, c0, c0 + 1 (the chunk's front, which a cache keeping one chunk evicted the
  // previous chunk for), the previous chunk's start, one after and one before it, half-way into the
  // current chunk; clamped to [0, length]. -1 where the model has no chunk or v is 0.
  int64_t chunk_behind(int64_t length, int variant) const;
  // Variant v's (1-7) length past `length` at the next chunk starts (next = c0 + C): next - 1, next,
  // next + 1, next + C - 1, next + C, next + C + 1, next + C/2. -1 where the model has no chunk or v is 0.
  int64_t chunk_ahead(int64_t length, int variant) const;
};

namespace steps {
std::string span(int64_t first, int64_t n);  // "3 tokens at 12..14"
int64_t length_of(const Lengths& len, int64_t seq);
std::string bad_tokens(const char* op, const std::vector<int32_t>& tokens, int64_t vocab);  // "" when valid
Positions new_rows(int64_t seq, size_t count, const Lengths& before);
}  // namespace steps

// ---- The rows. Each has: op, operation ("" when every engine serves it), mutants, logits (answered
// with the logits of its new positions), and the members pre, apply, positions, fields, read,
// describe, oracle, draw. ----

// Feeds tokens to a sequence; its logits are every new position's.
struct Extend {
  static constexpr const char* op = "extend";
  static constexpr const char* operation = "";
  static constexpr std::array<OperationMutant, 0> mutants{};
  static constexpr bool logits = true;
  static constexpr const char* about = "feeds `tokens` to sequence `seq`; answers the logits of each new position";
  int64_t seq = 0;
  std::vector<int32_t> tokens;

  std::string pre(const Lengths&, int64_t vocab) const { return steps::bad_tokens(op, tokens, vocab); }
  void apply(Lengths& len) const { len[seq] += static_cast<int64_t>(tokens.size()); }
  Positions positions(const Lengths& before) const { return steps::new_rows(seq, tokens.size(), before); }
  nlohmann::json fields() const { return {{"seq", seq}, {"tokens", tokens}}; }
  static Extend read(const StepReader& r) { return {r.seq(), r.tokens(r.j, r.ptr)}; }
  std::string describe(const Lengths& len) const {
    return "extend seq " + std::to_string(seq) + ": " +
           steps::span(steps::length_of(len, seq), static_cast<int64_t>(tokens.size()));
  }
  template <class O>
  bool oracle(O& o) const {
    return o.extend(o.seq(seq), tokens, 0, tokens.size());
  }
  // Takes any draw: kinds 3-5 an extend at the window's edges (the variant's: size, 1, W-1, W, W+1,
  // 2W, 2W+1, W+size tokens; to the next chunk starts on a chunked model, DrawContext::chunk_ahead), 6 a long extend (size x 16, or past llama.cpp's 256-cell SWA padding
  // or a 1024-key cap), any other `size` tokens (0-2, and a draw whose operation the engine lacks).
  static bool draw(const DrawnStep& d, int64_t seq, DrawContext& c, std::vector<PlanStep>& out);
};

// Drops the last `drop` tokens of a sequence.
struct Rollback {
  static constexpr const char* op = "rollback";
  static constexpr const char* operation = "rollback";
  static constexpr std::array<OperationMutant, 0> mutants{};
  static constexpr bool logits = false;
  static constexpr const char* about = "drops the last `n` tokens of sequence `seq`";
  static constexpr bool may_lose_keys = true;  // an engine that evicted keys cannot give them back
  int64_t seq = 0;
  int64_t drop = 0;  // "n" in JSON

  std::string pre(const Lengths& len, int64_t) const {
    if (drop <= 0 || drop > steps::length_of(len, seq))
      return "rollback by " + std::to_string(drop) + " of a sequence of " + std::to_string(steps::length_of(len, seq)) +
             " tokens";
    return "";
  }
  void apply(Lengths& len) const { len[seq] -= drop; }
  Positions positions(const Lengths&) const { return {}; }
  nlohmann::json fields() const { return {{"seq", seq}, {"n", drop}}; }
  static Rollback read(const StepReader& r) { return {r.seq(), r.integer("n", 1, "must be a positive integer")}; }
  std::string describe(const Lengths& len) const {
    return "rollback seq " + std::to_string(seq) + " by " + std::to_string(drop) + " (to " +
           std::to_string(steps::length_of(len, seq) - drop) + ")";
  }
  template <class O>
  bool oracle(O& o) const {
    o.seq(seq).truncate(drop);
    return true;
  }
  // Kinds 7 (size; on a chunked model back to the variant's chunk boundary, DrawContext::chunk_behind)
  // and 10 (a deep rollback, size x 16: behind what a sliding cache keeps).
  static bool draw(const DrawnStep& d, int64_t seq, DrawContext& c, std::vector<PlanStep>& out);
};

// Saves a sequence's state with the engine's state API, drops it and loads it back.
struct Reload {
  static constexpr const char* op = "reload";
  static constexpr const char* operation = "reload";
  static constexpr std::array<OperationMutant, 0> mutants{};
  static constexpr bool logits = false;
  static constexpr const char* about =
      "saves sequence `seq`'s state with the engine's state API, drops the sequence and loads the state back";
  static constexpr bool may_lose_keys = true;
  int64_t seq = 0;

  std::string pre(const Lengths&, int64_t) const { return ""; }
  void apply(Lengths&) const {}
  Positions positions(const Lengths&) const { return {}; }
  nlohmann::json fields() const { return {{"seq", seq}}; }
  static Reload read(const StepReader& r) { return {r.seq()}; }
  std::string describe(const Lengths& len) const {
    return "reload seq " + std::to_string(seq) + " (" + std::to_string(steps::length_of(len, seq)) + " tokens)";
  }
  template <class O>
  bool oracle(O&) const {
    return true;
  }
  // Kind 8; its upper variants (6, 7) are followed by a deep rollback (size x 16).
  static bool draw(const DrawnStep& d, int64_t seq, DrawContext& c, std::vector<PlanStep>& out);
};

// A preemption: the engine gives back a sequence's cache (every block of it, the sliding layers'
// wrapped ones too, as a scheduler does under memory pressure) and recomputes it from the sequence's
// tokens before it runs again. Position p's keys depend only on tokens 0..p, so the recompute is the
// state the sequence had: the logits after it are those of the plan without it, and, unlike a reload
// (which restores what the engine kept), no key is lost. A sequence a shift moved keeps its keys as
// the shift left them (a recompute of its kept tokens would be a fresh forward at their new
// positions, not the shifted keys: an engine with both refuses a preempt of a shifted sequence).
struct Preempt {
  static constexpr const char* op = "preempt";
  static constexpr const char* operation = "preempt";
  static constexpr std::array<OperationMutant, 1> mutants{
      {{"preempt_short", "the recompute after a preemption leaves out the sequence's last token (the one sampled before it)",
        "preempt-short"}}};
  static constexpr bool logits = false;
  static constexpr const char* about =
      "sequence `seq`'s cache is dropped (every block given back) and recomputed from its tokens; nothing it holds changes";
  int64_t seq = 0;

  std::string pre(const Lengths&, int64_t) const { return ""; }
  void apply(Lengths&) const {}
  Positions positions(const Lengths&) const { return {}; }
  nlohmann::json fields() const { return {{"seq", seq}}; }
  static Preempt read(const StepReader& r) { return {r.seq()}; }
  std::string describe(const Lengths& len) const {
    return "preempt seq " + std::to_string(seq) + " (" + std::to_string(steps::length_of(len, seq)) + " tokens recomputed)";
  }
  template <class O>
  bool oracle(O&) const {
    return true;
  }
  // Kind 8's odd variants where the engine lists preempt (a reload's draws otherwise); its upper
  // variant (7) is followed by a deep rollback (size x 16), as a reload's are.
  static bool draw(const DrawnStep& d, int64_t seq, DrawContext& c, std::vector<PlanStep>& out);
};

// Empties every sequence.
struct Reset {
  static constexpr const char* op = "reset";
  static constexpr const char* operation = "";
  static constexpr std::array<OperationMutant, 0> mutants{};
  static constexpr bool logits = false;
  static constexpr const char* about = "every sequence is empty";

  std::string pre(const Lengths&, int64_t) const { return ""; }
  void apply(Lengths& len) const { len.clear(); }
  Positions positions(const Lengths&) const { return {}; }
  nlohmann::json fields() const { return nlohmann::json::object(); }
  static Reset read(const StepReader&) { return {}; }
  std::string describe(const Lengths&) const { return "reset"; }
  template <class O>
  bool oracle(O& o) const {
    o.clear();
    return true;
  }
  // Kind 9.
  static bool draw(const DrawnStep& d, int64_t seq, DrawContext& c, std::vector<PlanStep>& out);
};

// Sequence `seq` (its old contents dropped) starts from the first `length` tokens of `from`.
struct Fork {
  static constexpr const char* op = "fork";
  static constexpr const char* operation = "fork";
  static constexpr std::array<OperationMutant, 2> mutants{
      {{"fork_shared", "the fork shares the state it should copy", "fork-shared"},
       {"fork_off_by_one", "the fork starts one token short of the prefix", "fork-prefix"}}};
  static constexpr bool logits = false;
  static constexpr const char* about =
      "sequence `seq` (its old contents dropped) starts from the first `length` tokens of sequence `from`, which goes on unchanged";
  int64_t seq = 0;
  int64_t from = 0;
  int64_t length = 0;

  std::string pre(const Lengths& len, int64_t) const {
    if (from < 0 || from == seq) return "fork from seq " + std::to_string(from) + " into seq " + std::to_string(seq);
    if (length < 0 || length > steps::length_of(len, from))
      return "fork of the first " + std::to_string(length) + " tokens of a sequence of " +
             std::to_string(steps::length_of(len, from));
    return "";
  }
  void apply(Lengths& len) const { len[seq] = length; }
  Positions positions(const Lengths&) const { return {}; }
  nlohmann::json fields() const { return {{"seq", seq}, {"from", from}, {"length", length}}; }
  static Fork read(const StepReader& r);
  std::string describe(const Lengths& len) const {
    return "fork seq " + std::to_string(seq) + " from the first " + std::to_string(length) + " of seq " + std::to_string(from) +
           "'s " + std::to_string(steps::length_of(len, from)) + " tokens";
  }
  // A fresh forward of the prefix: the source's oracle cut back to it (the prefix property); a
  // departure starts it fork_by tokens off.
  template <class O>
  bool oracle(O& o) const {
    o.fork(seq, from, length + o.departure().fork_by);
    return true;
  }
  // Kind 11: from the other sequence, at the variant's edge (on a chunked model its chunk boundary,
  // DrawContext::chunk_behind; else its whole length, W-1, W, W+1, the
  // block's edges, half-way into its last block).
  static bool draw(const DrawnStep& d, int64_t seq, DrawContext& c, std::vector<PlanStep>& out);
};

// An extend the engine processes in chunks of `chunk` tokens through its own chunking.
struct Chunked {
  static constexpr const char* op = "chunked";
  static constexpr const char* operation = "chunked";
  static constexpr std::array<OperationMutant, 1> mutants{
      {{"window_restarts_per_chunk", "each chunk's sliding layers see no key before the chunk", "chunked-restart"}}};
  static constexpr bool logits = true;
  static constexpr const char* about =
      "as `extend`, the engine processing the tokens in chunks of `chunk` through its own chunking";
  int64_t seq = 0;
  std::vector<int32_t> tokens;
  int64_t chunk = 0;

  std::string pre(const Lengths&, int64_t vocab) const {
    if (std::string why = steps::bad_tokens(op, tokens, vocab); !why.empty()) return why;
    if (chunk <= 0) return "chunk " + std::to_string(chunk) + " is not positive";
    return "";
  }
  void apply(Lengths& len) const { len[seq] += static_cast<int64_t>(tokens.size()); }
  Positions positions(const Lengths& before) const { return steps::new_rows(seq, tokens.size(), before); }
  nlohmann::json fields() const { return {{"seq", seq}, {"tokens", tokens}, {"chunk", chunk}}; }
  static Chunked read(const StepReader& r) {
    return {r.seq(), r.tokens(r.j, r.ptr), r.integer("chunk", 1, "must be a positive integer (tokens per chunk)")};
  }
  std::string describe(const Lengths& len) const {
    return "chunked extend seq " + std::to_string(seq) + " in chunks of " + std::to_string(chunk) + ": " +
           steps::span(steps::length_of(len, seq), static_cast<int64_t>(tokens.size()));
  }
  // Chunking changes nothing: position p's logits depend only on tokens 0..p. The departure
  // restarts the window at each chunk.
  template <class O>
  bool oracle(O& o) const {
    if (!o.departure().chunks_restart) return o.extend(o.seq(seq), tokens, 0, tokens.size());
    for (size_t at = 0; at < tokens.size(); at += static_cast<size_t>(chunk)) {
      auto& s = o.seq(seq);
      s.forget_before(s.length());
      if (!o.extend(s, tokens, at, std::min(tokens.size(), at + static_cast<size_t>(chunk)))) return false;
    }
    return true;
  }
  // Kind 12: size tokens in the variant's chunk (W, 1, W-1, W+1, 2W, 2W+1, 3, W+2).
  static bool draw(const DrawnStep& d, int64_t seq, DrawContext& c, std::vector<PlanStep>& out);
};

// One speculative cycle: a draft fed in one step, then its last `reject` tokens dropped.
struct Spec {
  static constexpr const char* op = "spec";
  static constexpr const char* operation = "spec";
  static constexpr std::array<OperationMutant, 1> mutants{
      {{"spec_rollback_off_by_one", "a cycle rolls back one token more than it rejected", "spec-rollback"}}};
  static constexpr bool logits = true;
  static constexpr const char* about =
      "one speculative cycle: as `extend` for the draft `tokens`, then the last `n` of them (the rejected ones) are gone";
  int64_t seq = 0;
  std::vector<int32_t> draft;  // "tokens" in JSON
  int64_t reject = 0;          // "n" in JSON

  std::string pre(const Lengths&, int64_t vocab) const {
    if (std::string why = steps::bad_tokens(op, draft, vocab); !why.empty()) return why;
    if (reject < 0 || reject > static_cast<int64_t>(draft.size()))
      return "spec rejects " + std::to_string(reject) + " of a draft of " + std::to_string(draft.size()) + " tokens";
    return "";
  }
  void apply(Lengths& len) const { len[seq] += static_cast<int64_t>(draft.size()) - reject; }
  Positions positions(const Lengths& before) const { return steps::new_rows(seq, draft.size(), before); }
  // A cycle holds its whole draft before it rejects part of it.
  int64_t peak(const Lengths& before) const { return steps::length_of(before, seq) + static_cast<int64_t>(draft.size()); }
  nlohmann::json fields() const { return {{"seq", seq}, {"tokens", draft}, {"n", reject}}; }
  static Spec read(const StepReader& r);
  std::string describe(const Lengths& len) const {
    const int64_t before = steps::length_of(len, seq), n = static_cast<int64_t>(draft.size());
    return "spec cycle seq " + std::to_string(seq) + ": draft " + steps::span(before, n) + ", reject " + std::to_string(reject) +
           " (to " + std::to_string(before + n - reject) + ")";
  }
  // The departure rolls back spec_by tokens more than the cycle rejects.
  template <class O>
  bool oracle(O& o) const {
    auto& s = o.seq(seq);
    if (!o.extend(s, draft, 0, draft.size())) return false;
    const int64_t n = std::clamp<int64_t>(reject + o.departure().spec_by, 0, s.length());
    if (n > 0) s.truncate(n);
    return true;
  }
  // Kind 13: a draft of size tokens, the variant's rejections (1, 0, W-1, W, W+1, size, size-1, 2W; on
  // a chunked model down to the chunk boundary behind the draft's end, DrawContext::chunk_behind).
  static bool draw(const DrawnStep& d, int64_t seq, DrawContext& c, std::vector<PlanStep>& out);
};

// One sequence's part of a batch step.
struct BatchItem {
  int64_t seq = 0;
  std::vector<int32_t> tokens;
};

// Several sequences advanced in one engine call.
struct Batch {
  static constexpr const char* op = "batch";
  static constexpr const char* operation = "batch";
  static constexpr std::array<OperationMutant, 1> mutants{
      {{"batch_offset", "a batch computes each sequence after the first at the first one's length", "batch-offset"}}};
  static constexpr bool logits = true;
  static constexpr const char* about = "several sequences (each once) advanced in one engine call: their logits item after item";
  static constexpr bool several_sequences = true;  // a position is named with its sequence
  std::vector<BatchItem> items;

  std::string pre(const Lengths&, int64_t vocab) const;
  void apply(Lengths& len) const {
    for (const BatchItem& item : items) len[item.seq] += static_cast<int64_t>(item.tokens.size());
  }
  Positions positions(const Lengths& before) const {
    Positions out;
    for (const BatchItem& item : items)
      for (auto& p : steps::new_rows(item.seq, item.tokens.size(), before)) out.push_back(p);
    return out;
  }
  nlohmann::json fields() const;
  static Batch read(const StepReader& r);
  std::string describe(const Lengths& len) const;
  template <class O>
  bool oracle(O& o) const {
    for (const BatchItem& item : items)
      if (!o.extend(o.seq(item.seq), item.tokens, 0, item.tokens.size())) return false;
    return true;
  }
  // Kind 14: size tokens, and the variant's count (1, 2, W-1, W, W+1, 2W+1, 3, 5) on the other sequence.
  static bool draw(const DrawnStep& d, int64_t seq, DrawContext& c, std::vector<PlanStep>& out);
};

// llama.cpp's context shift: positions [keep, keep + discard) dropped, the later ones moved down.
struct Shift {
  static constexpr const char* op = "shift";
  static constexpr const char* operation = "shift";
  static constexpr std::array<OperationMutant, 2> mutants{
      {{"shift_not_rerotated", "a shift moves the kept keys down without re-rotating them", "shift-no-rerotate"},
       {"shift_discard_off_by_one", "a shift discards one token more than asked, where one is left", "shift-discard+1"}}};
  static constexpr bool logits = false;
  static constexpr const char* about =
      "a context shift: positions `keep .. keep+discard-1` are gone and the later ones moved down by `discard`, their keys re-rotated";
  int64_t seq = 0;
  int64_t keep = 0;
  int64_t discard = 0;

  std::string pre(const Lengths& len, int64_t) const {
    if (discard <= 0 || keep < 0 || keep + discard > steps::length_of(len, seq))
      return "shift discarding " + std::to_string(discard) + " after " + std::to_string(keep) + " of a sequence of " +
             std::to_string(steps::length_of(len, seq)) + " tokens";
    return "";
  }
  void apply(Lengths& len) const { len[seq] -= discard; }
  Positions positions(const Lengths&) const { return {}; }
  nlohmann::json fields() const { return {{"seq", seq}, {"keep", keep}, {"discard", discard}}; }
  static Shift read(const StepReader& r) {
    return {r.seq(), r.integer("keep", 0, "must be the number of positions kept before the discarded ones (an integer >= 0)"),
            r.integer("discard", 1, "must be the number of positions discarded (a positive integer)")};
  }
  std::string describe(const Lengths& len) const {
    const int64_t before = steps::length_of(len, seq);
    return "shift seq " + std::to_string(seq) + ": discard " + steps::span(keep, discard) + ", move " +
           std::to_string(before - keep - discard) + " down (to " + std::to_string(before - discard) + ")";
  }
  // Not a fresh forward of the kept tokens: their cached K/V as computed, the moved keys re-rotated
  // (the departure leaves them at their old rotation).
  template <class O>
  bool oracle(O& o) const {
    o.seq(seq).shift(keep, discard, !o.departure().shift_unrotated);
    return true;
  }
  // Kind 10's upper variants (4-7) where the engine lists shift: discard size tokens after the
  // chunk's front (c0 - 1, c0, c0 + 1, the previous chunk's start) on a chunked model, else after the
  // variant's keep (1, W-1, W, 0); the draw stream stays the same for every engine.
  static bool draw(const DrawnStep& d, int64_t seq, DrawContext& c, std::vector<PlanStep>& out);
};

// A multi-turn request: the next prompt keeps the first `keep` tokens of the sequence and goes on
// with `tokens` (a chat's next turn, whose template renders the last answer anew: a server matches
// the common prefix, restores a checkpoint of its sliding cache at or before it and evaluates the
// rest). The same as a rollback to `keep` and an extend, in one request: the new positions' logits
// are a fresh forward of the kept prefix and the tokens. A turn behind what a sliding cache kept may
// lose keys (a server without a checkpoint that early must evaluate the prompt again).
struct Turn {
  static constexpr const char* op = "turn";
  static constexpr const char* operation = "turn";
  static constexpr std::array<OperationMutant, 1> mutants{
      {{"turn_past",
        "a turn continues from one token past the kept prefix (a checkpoint restored past the prompt's last common position)",
        "turn-past"}}};
  static constexpr bool logits = true;
  static constexpr const char* about =
      "a multi-turn request: sequence `seq` keeps its first `keep` tokens and goes on with `tokens`; answers the logits of each new position";
  static constexpr bool may_lose_keys = true;
  int64_t seq = 0;
  int64_t keep = 0;
  std::vector<int32_t> tokens;

  std::string pre(const Lengths& len, int64_t vocab) const {
    if (std::string why = steps::bad_tokens(op, tokens, vocab); !why.empty()) return why;
    if (keep < 0 || keep > steps::length_of(len, seq))
      return "turn keeping " + std::to_string(keep) + " of a sequence of " + std::to_string(steps::length_of(len, seq)) +
             " tokens";
    return "";
  }
  void apply(Lengths& len) const { len[seq] = keep + static_cast<int64_t>(tokens.size()); }
  Positions positions(const Lengths&) const { return steps::new_rows(seq, tokens.size(), {{seq, keep}}); }
  nlohmann::json fields() const { return {{"seq", seq}, {"keep", keep}, {"tokens", tokens}}; }
  static Turn read(const StepReader& r) {
    return {r.seq(), r.integer("keep", 0, "must be the number of the sequence's tokens the turn keeps (an integer >= 0)"),
            r.tokens(r.j, r.ptr)};
  }
  std::string describe(const Lengths& len) const {
    return "turn seq " + std::to_string(seq) + ": keep " + std::to_string(keep) + " of " +
           std::to_string(steps::length_of(len, seq)) + ", then " + steps::span(keep, static_cast<int64_t>(tokens.size()));
  }
  template <class O>
  bool oracle(O& o) const {
    auto& s = o.seq(seq);
    if (s.length() > keep) s.truncate(s.length() - keep);
    return o.extend(s, tokens, 0, tokens.size());
  }
  // Kind 7's upper variants (4-7) where the engine lists turn (a rollback's draws otherwise): keep
  // the sequence back to the variant's (its length - size, the window's edge behind it: L - W, L - W - 1,
  // L - W + 1; a chunk boundary on a chunked model), then size tokens.
  static bool draw(const DrawnStep& d, int64_t seq, DrawContext& c, std::vector<PlanStep>& out);
};

// The table: every kind, in protocol order (plans, the protocol's op list, engines/protocol.json).
using StepKinds = std::variant<Extend, Rollback, Reload, Reset, Fork, Chunked, Spec, Batch, Shift, Preempt, Turn>;
// The order a draw is offered to the rows: the shift a deep rollback may become first, the extend
// (which takes any draw) last.
using DrawOrder = std::variant<Shift, Turn, Rollback, Preempt, Reload, Reset, Fork, Chunked, Spec, Batch, Extend>;

// Calls f(Row{}) for each row of a variant's list, in order, until f returns true.
template <class Variant, class F, size_t I = 0>
bool for_each_row(F&& f) {
  if constexpr (I == std::variant_size_v<Variant>) {
    return false;
  } else {
    if (f(std::variant_alternative_t<I, Variant>{})) return true;
    return for_each_row<Variant, F, I + 1>(std::forward<F>(f));
  }
}

// One step of a plan: one row of the table, asked through its members.
class PlanStep {
 public:
  PlanStep() = default;  // an empty extend of sequence 0
  template <class S, class = std::enable_if_t<std::is_constructible_v<StepKinds, S>>>
  PlanStep(S s) : step_(std::move(s)) {}

  const char* op() const;
  // The operation an engine lists to be sent this step; "" when every engine serves it.
  std::string operation() const;
  bool logits() const;                                          // answered with its new positions' logits
  std::string pre(const Lengths& before, int64_t vocab) const;  // why it cannot run; "" when it can
  void apply(Lengths& len) const;
  Positions positions(const Lengths& before) const;  // the rows of its logits
  int64_t peak(const Lengths& before) const;         // the longest a sequence grows during it
  std::vector<int64_t> sequences() const;            // the sequences it names
  // The sequence whose keys it may lose (a rollback or a reload: an engine that evicted keys cannot
  // give them back), or -1.
  int64_t may_lose_keys_of() const;
  bool several_sequences() const;  // its positions are named with their sequence
  nlohmann::json to_json() const;  // {"op", fields...}
  static PlanStep from_json(const nlohmann::json& j, const std::string& ptr, const std::string& file);
  std::string describe(const Lengths& before) const;

  template <class S>
  const S* as() const {
    return std::get_if<S>(&step_);
  }
  template <class F>
  decltype(auto) visit(F&& f) const {
    return std::visit(std::forward<F>(f), step_);
  }

 private:
  StepKinds step_;
};

// Each step drawn from a raw draw: valid for the engine's operations and the lengths so far.
std::vector<PlanStep> draw_step(const DrawnStep& d, DrawContext& c);

// The protocol as data (engines/protocol.json): every op with its fields and what it does, the
// optional operations with their mutants.
nlohmann::json protocol_description();
// Every operation mutant, in table order; the operation of one (empty when it names none).
std::vector<std::string> operation_mutants();
std::string operation_of_mutant(const std::string& mutant);

// Every adapter mutant `--mutant` accepts (the load's "mutant"), by what it gets wrong: "window" (the
// engine told a wrong window), "operation" (a serving operation done wrong: the rows' mutants),
// "model" (a family feature of the config read wrong, which adapters implement where their engine
// can express it) and "config" (a config read wrong, the oracle engine's: the diagnoses' proofs).
// `diagnosis`: the diagnosis kind (check.h) the judge names it by, where it has one (a mistake has one
// name: the mutant's is the kind's, a signed one with its sign); `old`: the spelling it replaced.
struct EngineMutant {
  std::string name, kind, does, operation;  // operation: the operation an "operation" mutant needs
  std::string diagnosis, old;
};
std::vector<EngineMutant> engine_mutants();
// The mutant a `--mutant` value names: itself, or the new name of an old spelling (accepted for one
// release: `note` then says the new name); throws std::invalid_argument for no mutant, naming them all.
std::string canonical_mutant(const std::string& name, std::string* note = nullptr);

}  // namespace kvc::engine
