#include "kvconform/engine/check.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <future>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

namespace kvc::engine {

using nlohmann::json;
using DKind = Diagnosis::Kind;

namespace {

std::string num(double v) {
  std::ostringstream s;
  s.precision(3);
  s << v;
  return s.str();
}

// Keys an engine may have lost at a step: from then on, that sequence's sliding layers see no key
// before `before` (a rollback or reload that kept less than the window).
struct Loss {
  size_t step = 0;
  int64_t before = 0;
};

// How a hypothesis runs the plan's serving operations wrong: keys lost at steps, every chunk of a
// chunked extend seeing no key before it, forks starting `fork_by` tokens off their prefix, spec
// cycles rejecting `spec_by` tokens more than they say, shifts moving keys without re-rotating them.
struct Departure {
  std::vector<Loss> losses;
  bool chunks_restart = false;
  int64_t fork_by = 0, spec_by = 0;
  bool shift_unrotated = false;
};

// A plan's sequences in the model oracle, one SequenceOracle per sequence, each step applied as the
// engine is asked it; `options` apply to sequence `only_seq` alone where it is set.
template <class T>
class PlanOracle {
 public:
  // `reading`: the config as the hypothesis reads it (null: the model's own).
  PlanOracle(const Model& model, OracleOptions options, Departure departure = {}, int64_t only_seq = -1,
             std::shared_ptr<const ModelConfig> reading = nullptr)
      : model_(model),
        options_(std::move(options)),
        departure_(std::move(departure)),
        only_seq_(only_seq),
        reading_(std::move(reading)) {}

  // The logits of the step's new positions (rows as PlanStep::positions()), empty for a step without any.
  std::vector<double> apply(const PlanStep& s, size_t index) {
    std::vector<double> out;
    apply(s, index, out, nullptr);
    return out;
  }
  // The same, row by row: `ok(row, logits)` is asked after each row and a false answer stops the
  // step there (the hypothesis is refuted; its oracle is not used again).
  using RowCheck = std::function<bool(size_t row, const double* logits)>;
  bool apply(const PlanStep& s, size_t index, std::vector<double>& out, const RowCheck& ok) {
    if (const int64_t lost = s.may_lose_keys_of(); lost >= 0)
      for (const Loss& loss : departure_.losses)
        if (loss.step == index) seq(lost).forget_before(loss.before);
    Run run{*this, out, ok};
    return s.visit([&](const auto& step) { return step.oracle(run); });
  }

 private:
  // What a row of the step table runs its oracle on (steps.h, `oracle`): the sequences' oracles, the
  // departure, and extend, which appends the rows to `out` and checks them as they come.
  struct Run {
    PlanOracle& plan;
    std::vector<double>& out;
    const RowCheck& ok;
    SequenceOracle<T>& seq(int64_t s) { return plan.seq(s); }
    const Departure& departure() const { return plan.departure_; }
    void clear() { plan.seqs_.clear(); }
    // A fresh forward of the prefix: the source's oracle cut back to `length` tokens (clamped).
    void fork(int64_t into, int64_t from, int64_t length) {
      auto copy = std::make_unique<SequenceOracle<T>>(plan.seq(from));
      const int64_t keep = std::clamp<int64_t>(length, 0, copy->length());
      if (copy->length() > keep) copy->truncate(copy->length() - keep);
      plan.seqs_[into] = std::move(copy);
    }
    // In pieces that double from 16 tokens where rows are checked (a refuted hypothesis stops soon
    // after its first wrong row, and the rows after it are never read), whole otherwise: the oracle
    // computes a piece layer by layer, far faster than token by token, with the same logits.
    bool extend(SequenceOracle<T>& o, const std::vector<int32_t>& tokens, size_t from, size_t to) {
      const size_t V = static_cast<size_t>(plan.model_.config.vocab);
      size_t piece = ok ? 16 : to - from;
      for (size_t at = from; at < to; at += piece, piece = std::min<size_t>(2 * piece, 1024)) {
        const size_t end = std::min(to, at + piece);
        const size_t before = out.size() / V;
        const std::vector<double> l = o.extend(std::vector<int32_t>(tokens.begin() + static_cast<std::ptrdiff_t>(at),
                                                                    tokens.begin() + static_cast<std::ptrdiff_t>(end)));
        out.insert(out.end(), l.begin(), l.end());
        if (ok)
          for (size_t r = before; r < out.size() / V; ++r)
            if (!ok(r, out.data() + r * V)) return false;
      }
      return true;
    }
  };
  SequenceOracle<T>& seq(int64_t s) {
    auto& slot = seqs_[s];
    const bool departs = only_seq_ < 0 || s == only_seq_;
    if (!slot)
      slot = std::make_unique<SequenceOracle<T>>(model_, departs && reading_ ? *reading_ : model_.config,
                                                 departs ? options_ : OracleOptions{});
    return *slot;
  }
  const Model& model_;
  OracleOptions options_;
  Departure departure_;
  int64_t only_seq_;
  std::shared_ptr<const ModelConfig> reading_;
  std::map<int64_t, std::unique_ptr<SequenceOracle<T>>> seqs_;
};

// One alternative to the rule: its diagnosis, the oracle that computes it, and for the positional
// ones the (seq, position) they are about, which a matched row after it must confirm.
struct Hypothesis {
  Diagnosis diagnosis;
  Departure departure;
  int64_t only_seq = -1;
  bool glitch = false;  // the rule's own oracle, the row at (seq, position) not compared
  bool positional = false;
  int64_t seq = -1, position = -1;
};

Diagnosis diagnosis(DKind kind, json params, std::string text, OracleOptions options = {}) {
  Diagnosis d;
  d.kind = kind;
  d.params = std::move(params);
  d.text = std::move(text);
  d.options = std::move(options);
  return d;
}

const char* type_name(Attention a) { return a == Attention::Sliding ? "sliding" : a == Attention::Chunked ? "chunked" : "full"; }

// The hypotheses a model and plan admit, in the order they are named: the layers' rules, the
// features (sinks, NoPE, rope bases, soft-caps, K/V precision), then the serving operations.
std::vector<Hypothesis> hypotheses(const Model& model, const Plan& plan, const std::string& kv_declared) {
  const ModelConfig& c = model.config;
  const size_t layers = static_cast<size_t>(c.layers);
  std::vector<Attention> rule(layers);
  std::vector<int64_t> w(layers), cs(layers);
  for (size_t l = 0; l < layers; ++l) {
    rule[l] = c.attention(static_cast<int64_t>(l));
    w[l] = c.windows[l];
    cs[l] = l < c.chunks.size() ? c.chunks[l] : 0;
  }
  auto has = [&](Attention a) { return std::find(rule.begin(), rule.end(), a) != rule.end(); };
  const bool sliding = std::any_of(w.begin(), w.end(), [](int64_t x) { return x > 0; });
  const bool any_window_free = std::any_of(w.begin(), w.end(), [](int64_t x) { return x == 0; });
  std::vector<Hypothesis> out;
  auto add = [&](DKind k, json params, std::string text, OracleOptions o) {
    Hypothesis h;
    h.diagnosis = diagnosis(k, std::move(params), std::move(text), std::move(o));
    out.push_back(std::move(h));
  };
  // A config read another way: the model's description with `edit` applied.
  auto read_as = [&](DKind k, json params, std::string text, auto edit) {
    auto reading = std::make_shared<ModelConfig>(c);
    edit(*reading);
    Hypothesis h;
    h.diagnosis = diagnosis(k, std::move(params), std::move(text));
    h.diagnosis.reading = std::move(reading);
    out.push_back(std::move(h));
  };
  auto windows = [&](auto f) {
    OracleOptions o;
    for (size_t l = 0; l < layers; ++l) o.windows.push_back(f(l));
    return o;
  };
  if (sliding) {
    add(DKind::WindowOffByOne, {{"delta", 1}}, "a window of W+1 on the sliding layers (one key too many)",
        windows([&](size_t l) { return w[l] > 0 ? w[l] + 1 : 0; }));
    if (c.sliding_window > 1)
      add(DKind::WindowOffByOne, {{"delta", -1}}, "a window of W-1 on the sliding layers (one key too few)",
          windows([&](size_t l) { return w[l] > 0 ? w[l] - 1 : 0; }));
    add(DKind::FullOnSliding, json::object(), "full attention on the sliding layers", windows([](size_t) { return int64_t{0}; }));
  }
  if (any_window_free && c.sliding_window > 0)
    add(DKind::WindowOnEveryLayer, json::object(), "the sliding window applied to the full-attention layers too",
        windows([&](size_t) { return c.sliding_window; }));
  if (sliding && has(Attention::Full))
    add(DKind::LayersSwapped, json::object(),
        "the sliding and the full-attention layers swapped (max_window_layers or the layer pattern read the other way round)",
        windows([&](size_t l) {
          return rule[l] == Attention::Full ? c.sliding_window : rule[l] == Attention::Sliding ? 0 : w[l];
        }));
  if (sliding) {
    OracleOptions o;
    o.windows = w;
    for (size_t l = 0; l < layers; ++l) o.chunks.push_back(w[l] > 0 ? w[l] : cs[l]);
    add(DKind::SlidingAsChunked, json::object(), "chunks of W on the sliding layers instead of a sliding window", o);
  }
  // Chunked layers, through OracleOptions::chunks: one chunk size off, no chunking, the chunk read as
  // a sliding window (the window a chunked layer is most often mistaken for), the chunk size taken
  // from another config value, and the chunk boundaries shifted by one.
  if (has(Attention::Chunked)) {
    auto chunked = [&](auto f, bool as_window) {
      OracleOptions o;
      o.windows = w;
      for (size_t l = 0; l < layers; ++l) {
        o.chunks.push_back(cs[l] > 0 && !as_window ? f(cs[l]) : 0);
        if (cs[l] > 0 && as_window) o.windows[l] = cs[l];
      }
      return o;
    };
    add(DKind::ChunkOffByOne, {{"delta", 1}}, "a chunk of C+1 on the chunked layers",
        chunked([](int64_t x) { return x + 1; }, false));
    add(DKind::ChunkOffByOne, {{"delta", -1}}, "a chunk of C-1 on the chunked layers",
        chunked([](int64_t x) { return std::max<int64_t>(1, x - 1); }, false));
    add(DKind::FullOnChunked, json::object(), "full attention on the chunked layers",
        chunked([](int64_t) { return int64_t{0}; }, false));
    add(DKind::ChunkedAsSliding, json::object(), "a sliding window of C on the chunked layers instead of chunks",
        chunked([](int64_t x) { return x; }, true));
    const int64_t C = c.chunk_size, longest = max_tokens(plan);
    std::set<int64_t> seen{C - 1, C, C + 1};
    for (auto [from, size] : std::vector<std::pair<std::string, int64_t>>{{"sliding_window", c.sliding_window},
                                                                          {"head_dim", c.head_dim},
                                                                          {"hidden_size", c.hidden},
                                                                          {"intermediate_size", c.intermediate},
                                                                          {"8192", 8192}}) {
      // A chunk at least as long as the plan is full attention, named above.
      if (size <= 1 || size >= longest || !seen.insert(size).second) continue;
      add(DKind::ChunkSize, {{"chunk", size}, {"from", from}},
          "a chunk of " + std::to_string(size) + " on the chunked layers (" +
              (from == "8192" ? "a hard-coded size" : "the config's " + from) + ") instead of C",
          chunked([size = size](int64_t) { return size; }, false));  // a copy: clang 14 captures no binding
    }
    for (int64_t shift : {1, -1}) {
      OracleOptions o = chunked([](int64_t x) { return x; }, false);
      o.chunk_shift = shift;
      add(DKind::ChunkShifted, {{"shift", shift}},
          std::string("the chunk boundaries shifted by ") + (shift > 0 ? "+1" : "-1") + " (chunks start at k*C" +
              (shift > 0 ? "+1" : "-1") + ")",
          o);
    }
  }
  if (c.sinks)
    read_as(DKind::SinksDropped, json::object(), "the attention sinks left out of the softmax",
            [](ModelConfig& r) { r.sinks = false; });
  const size_t nope = static_cast<size_t>(std::count(c.rope_layers.begin(), c.rope_layers.end(), false));
  if (nope > 0) {
    read_as(DKind::NopeGivenRope, json::object(), "rope on the NoPE layers too",
            [&](ModelConfig& r) { r.rope_layers.assign(layers, true); });
    if (nope < layers)
      read_as(DKind::NopeInverted, json::object(),
              "rope on the NoPE layers and none on the rope layers (no_rope_layers read inverted)",
              [&](ModelConfig& r) { r.rope_layers.flip(); });
  }
  // A wrong rope base on one layer type: another type's base, or the default 10000.
  std::map<Attention, double> base;
  for (size_t l = 0; l < layers; ++l)
    if (c.rope(static_cast<int64_t>(l)))
      base[rule[l]] = rule[l] == Attention::Sliding && c.rope_local_theta > 0 ? c.rope_local_theta : c.rope_theta;
  for (const auto& [type, own] : base) {
    std::set<double> others{10000.0};
    for (const auto& [t, b] : base) others.insert(b);
    for (double alt : others) {
      if (alt == own) continue;
      read_as(DKind::RopeBase, {{"layer_type", type_name(type)}, {"base", alt}},
              "a rope base of " + num(alt) + " on the " + type_name(type) + " layers (the config's is " + num(own) + ")",
              [&, type = type](ModelConfig& r) {  // a copy of the binding: clang 14 captures none
                r.rope_thetas.clear();
                for (size_t l = 0; l < layers; ++l)
                  r.rope_thetas.push_back(rule[l] == type                                           ? alt
                                          : rule[l] == Attention::Sliding && c.rope_local_theta > 0 ? c.rope_local_theta
                                                                                                    : c.rope_theta);
              });
    }
  }
  if (c.attn_softcap > 0 || c.final_softcap > 0) {
    auto dropped = [&](bool attn, bool fin, const char* which, std::string text) {
      read_as(DKind::SoftcapDropped, {{"which", which}}, std::move(text), [&](ModelConfig& r) {
        if (attn) r.attn_softcap = 0;
        if (fin) r.final_softcap = 0;
      });
    };
    if (c.attn_softcap > 0)
      dropped(true, false, "attention",
              "the attention scores' soft-cap (attn_logit_softcapping " + num(c.attn_softcap) + ") left out");
    if (c.final_softcap > 0)
      dropped(false, true, "final", "the final logits' soft-cap (final_logit_softcapping " + num(c.final_softcap) + ") left out");
    if (c.attn_softcap > 0 && c.final_softcap > 0)
      dropped(true, true, "both", "both soft-caps (attention and final logits) left out");
  }
  // K/V stored below the precision the engine declares.
  for (const char* precision : {"float16", "bfloat16"}) {
    if (kv_declared == precision) continue;
    OracleOptions o;
    (std::string(precision) == "float16" ? o.kv_half : o.kv_bf16) = true;
    add(DKind::KvRounded, {{"precision", precision}},
        std::string("K and V rounded to ") + precision + " as they are stored (the engine declares " + kv_declared + ")", o);
  }
  // A serving operation done wrong, the window right.
  auto operation = [&](bool used, DKind k, json params, std::string text, Departure d) {
    if (!used) return;
    Hypothesis h;
    h.diagnosis = diagnosis(k, std::move(params), std::move(text));
    h.departure = std::move(d);
    out.push_back(std::move(h));
  };
  operation(uses<Chunked>(plan), DKind::ChunksRestart, json::object(),
            "the window restarting at each chunk of the chunked extends (a chunk's sliding layers see no key before it)",
            {{}, true, 0, 0});
  operation(uses<Fork>(plan), DKind::ForkOffByOne, {{"delta", -1}}, "the forks starting one token short of their prefix",
            {{}, false, -1, 0});
  operation(uses<Fork>(plan), DKind::ForkOffByOne, {{"delta", 1}}, "the forks starting one token past their prefix",
            {{}, false, 1, 0});
  operation(uses<Spec>(plan), DKind::SpecRollbackOffByOne, {{"delta", 1}},
            "the spec cycles rolling back one token more than they reject", {{}, false, 0, 1});
  operation(uses<Spec>(plan), DKind::SpecRollbackOffByOne, {{"delta", -1}},
            "the spec cycles rolling back one token less than they reject", {{}, false, 0, -1});
  operation(uses<Shift>(plan), DKind::ShiftNotRerotated, json::object(),
            "the kept keys not re-rotated after a shift (moved down, still rotated for their old positions)",
            {{}, false, 0, 0, true});
  return out;
}

// log(sum(exp(row))) of one row of logits, in double.
double log_sum_exp(const double* row, int64_t vocab) {
  const double top = *std::max_element(row, row + vocab);
  double sum = 0;
  for (int64_t v = 0; v < vocab; ++v) sum += std::exp(row[v] - top);
  return top + std::log(sum);
}

// An oracle's rows in the space the engine answered them: as they are, or each row log-softmaxed
// where the engine answered log-probabilities (a server's answer), so that the judge, the
// same-dtype bound and every diagnosis compare like with like.
std::vector<double> as_answered(std::vector<double> rows, int64_t vocab, bool logprobs) {
  if (!logprobs) return rows;
  for (size_t at = 0; at + static_cast<size_t>(vocab) <= rows.size(); at += static_cast<size_t>(vocab)) {
    const double lse = log_sum_exp(rows.data() + at, vocab);
    for (int64_t v = 0; v < vocab; ++v) rows[at + static_cast<size_t>(v)] -= lse;
  }
  return rows;
}

// |engine - want| at the worst token of one row (infinite where the engine's logit is not finite);
// `want` is logits, log-softmaxed first where the engine answered log-probabilities.
double row_error(const float* got, const double* want, int64_t vocab, bool logprobs = false) {
  const double lse = logprobs ? log_sum_exp(want, vocab) : 0;
  double worst = 0;
  for (int64_t v = 0; v < vocab; ++v)
    worst = std::max(worst, std::isfinite(got[v]) ? std::abs(got[v] - (want[v] - lse)) : INFINITY);
  return worst;
}

// The live hypotheses as the plan runs: each step the engine answered is applied to each hypothesis's
// oracle, and one whose logits the engine's answer departs from by more than the bound is dropped.
class Diagnoser {
 public:
  Diagnoser(const Model& model, const Plan& plan, const std::string& kv_declared)
      : model_(model), plan_(plan), truth_(model, {}) {
    for (Hypothesis& h : hypotheses(model, plan, kv_declared)) add(std::move(h));
  }

  void feed(size_t i, const Recorded& rec, double bound) {
    const PlanStep& s = plan_.steps[i];
    const auto positions = s.positions(len_);
    const std::vector<double> truth = truth_.apply(s, i);
    const int64_t V = model_.config.vocab;
    if (!positional_)
      // The first row the rule does not explain: where the positional hypotheses start.
      for (size_t k = 0; k * static_cast<size_t>(V) < rec.logits[i].size(); ++k)
        if (row_error(rec.logits[i].data() + k * static_cast<size_t>(V), truth.data() + rec.row(i, k) * V, V, rec.logprob(i)) >
            bound) {
          positional_ = true;
          const auto [seq, pos] = positions[static_cast<size_t>(rec.row(i, k))];
          add_positional(i, seq, pos);
          break;
        }
    // Which answered row (k) holds each new position's row, -1 for one the engine did not answer.
    std::vector<int64_t> answered(positions.size(), -1);
    for (size_t k = 0; k * static_cast<size_t>(V) < rec.logits[i].size(); ++k)
      answered[static_cast<size_t>(rec.row(i, k))] = static_cast<int64_t>(k);
    for (Live& l : live_) {
      if (!l.alive) continue;
      int64_t skip = -1;
      if (l.h.glitch)
        for (size_t r = 0; r < positions.size(); ++r)
          if (positions[r] == std::pair{l.h.seq, l.h.position}) skip = static_cast<int64_t>(r);
      // A refuted hypothesis stops at its first row off the engine's answer.
      auto ok = [&](size_t row, const double* want) {
        const int64_t k = answered[row];
        return k < 0 || static_cast<int64_t>(row) == skip ||
               row_error(rec.logits[i].data() + static_cast<size_t>(k) * static_cast<size_t>(V), want, V, rec.logprob(i)) <=
                   bound;
      };
      bool fits = true;
      if (l.oracle) {
        std::vector<double> want;
        fits = l.oracle->apply(s, i, want, ok);
      } else {
        for (size_t r = 0; r < positions.size() && fits; ++r) fits = ok(r, truth.data() + r * static_cast<size_t>(V));
      }
      if (!fits) {
        l.alive = false;
        continue;
      }
      if (rec.logits[i].empty()) continue;
      if (l.h.positional)
        for (size_t k = 0; k * static_cast<size_t>(V) < rec.logits[i].size(); ++k) {
          const auto [seq, pos] = positions[static_cast<size_t>(rec.row(i, k))];
          if (seq == l.h.seq && pos > l.h.position) l.confirmed = true;
        }
    }
    s.apply(len_);
  }

  // Nothing more to learn: at most one hypothesis lives, and it needs no later row.
  bool settled() const {
    int live = 0;
    for (const Live& l : live_)
      if (l.alive) {
        ++live;
        if (!l.confirmed) return false;
      }
    return live <= 1;
  }

  std::vector<Diagnosis> fits() const {
    std::vector<Diagnosis> out;
    for (const Live& l : live_)
      if (l.alive && l.confirmed) out.push_back(l.h.diagnosis);
    return out;
  }

  std::string tried() const {
    std::vector<std::string> kinds;
    for (const Live& l : live_)
      if (std::find(kinds.begin(), kinds.end(), to_string(l.h.diagnosis.kind)) == kinds.end())
        kinds.push_back(to_string(l.h.diagnosis.kind));
    std::string s;
    for (const std::string& k : kinds) s += k + ", ";
    return s + to_string(DKind::LostKeys);
  }

 private:
  struct Live {
    Hypothesis h;
    std::unique_ptr<PlanOracle<double>> oracle;  // null: the rule's own (the glitch)
    bool alive = true, confirmed = true;
  };
  void add(Hypothesis h) {
    Live l;
    if (!h.glitch)
      l.oracle = std::make_unique<PlanOracle<double>>(model_, h.diagnosis.options, h.departure, h.only_seq, h.diagnosis.reading);
    l.confirmed = !h.positional;
    l.h = std::move(h);
    live_.push_back(std::move(l));
  }
  // One eviction off by one and a glitch, at the first failing row; their oracles replay the steps
  // before it.
  void add_positional(size_t step, int64_t seq, int64_t pos) {
    const std::string at =
        "position " + std::to_string(pos) + (sequence_count(plan_) > 1 ? " of seq " + std::to_string(seq) : "");
    const json where = {{"seq", seq}, {"position", pos}};
    const size_t first = live_.size();
    if (model_.config.sliding_window > 0)
      for (int64_t delta : {1, -1}) {
        if (delta < 0 && model_.config.sliding_window < 2) continue;
        Hypothesis h;
        h.diagnosis.options.window_delta_position = pos;
        h.diagnosis.options.window_delta = delta;
        json p = where;
        p["delta"] = delta;
        h.diagnosis = diagnosis(
            DKind::EvictionOffByOne, p,
            "one eviction off by one: at " + at + " alone the sliding layers see W" + (delta > 0 ? "+1" : "-1") + " keys",
            h.diagnosis.options);
        h.only_seq = seq;
        h.positional = true;
        h.seq = seq, h.position = pos;
        add(std::move(h));
      }
    // A full-attention cache that keeps only its last N keys first departs from the rule at position
    // N, the first query that loses key 0: the first failing position names the cap. A cap of W is
    // the window on every layer, named already.
    const ModelConfig& c = model_.config;
    bool full = false;
    for (int64_t l = 0; l < c.layers; ++l) full = full || c.attention(l) == Attention::Full;
    if (full && pos >= 1 && pos != c.sliding_window) {
      OracleOptions capped;
      for (int64_t l = 0; l < c.layers; ++l)
        capped.windows.push_back(c.attention(l) == Attention::Full ? pos : c.windows[static_cast<size_t>(l)]);
      Hypothesis h;
      h.diagnosis = diagnosis(DKind::FullCapped, {{"keys", pos}},
                              "the full-attention layers keeping only their last " + std::to_string(pos) +
                                  " keys (a cache capped at " + std::to_string(pos) + ")",
                              std::move(capped));
      add(std::move(h));
    }
    Hypothesis g;
    g.diagnosis = diagnosis(DKind::PositionGlitch, where, "a glitch at " + at + " alone (every other position matches the rule)");
    g.glitch = g.positional = true;
    g.seq = seq, g.position = pos;
    add(std::move(g));
    for (size_t l = first; l < live_.size(); ++l)
      if (live_[l].oracle)
        for (size_t i = 0; i < step; ++i) live_[l].oracle->apply(plan_.steps[i], i);
  }

  const Model& model_;
  const Plan& plan_;
  PlanOracle<double> truth_;
  std::vector<Live> live_;
  Lengths len_;
  bool positional_ = false;
};

// Keys lost at a rollback or reload: from the step on, that sequence's sliding layers see no key
// before some position P. The smallest loss that explains the recorded logits is named.
std::vector<Diagnosis> lost_keys(const Model& model, const Plan& plan, const Recorded& rec, const std::vector<double>& bounds) {
  const ModelConfig& c = model.config;
  if (c.sliding_window <= 0) return {};
  std::vector<Lengths> len_before;
  {
    Lengths l;
    for (size_t i = 0; i < rec.logits.size(); ++i) {
      len_before.push_back(l);
      plan.steps[i].apply(l);
    }
  }
  auto fits = [&](const Departure& d) {
    PlanOracle<double> o(model, {}, d);
    for (size_t i = 0; i < rec.logits.size(); ++i) {
      std::vector<int64_t> answered(plan.steps[i].positions(len_before[i]).size(), -1);
      for (size_t k = 0; k * static_cast<size_t>(c.vocab) < rec.logits[i].size(); ++k)
        answered[static_cast<size_t>(rec.row(i, k))] = static_cast<int64_t>(k);
      std::vector<double> want;
      const bool ok = o.apply(plan.steps[i], i, want, [&](size_t row, const double* w) {
        const int64_t k = answered[row];
        return k < 0 ||
               row_error(rec.logits[i].data() + static_cast<size_t>(k * c.vocab), w, c.vocab, rec.logprob(i)) <= bounds[i];
      });
      if (!ok) return false;
    }
    return true;
  };
  Lengths len;
  for (size_t i = 0; i < plan.steps.size() && i < rec.logits.size(); ++i) {
    const PlanStep& s = plan.steps[i];
    s.apply(len);
    const int64_t seq = s.may_lose_keys_of();
    if (seq < 0) continue;
    const int64_t L = len[seq];
    for (int64_t p = L; p >= std::max<int64_t>(0, L - 2 * c.sliding_window - 2); --p) {
      if (!fits(Departure{{{i, p}}})) continue;
      const int64_t wants = std::max<int64_t>(0, L - c.sliding_window + 1);
      return {diagnosis(DKind::LostKeys, {{"step", i}, {"op", s.op()}, {"from", L}, {"before", p}, {"wants", wants}},
                        "the " + std::string(s.op()) + " at step " + std::to_string(i) + " losing keys: from position " +
                            std::to_string(L) + " on, the sliding layers see no key before position " + std::to_string(p) +
                            " (the window wants " + std::to_string(wants) + ")")};
    }
  }
  return {};
}

// The first failing position drawn per layer rule: the keys the rule allows beside the keys the
// diagnosis says the engine used ('#' both, '.' neither, '+' used but not allowed, '-' allowed but
// not used), one picture per distinct pair.
std::vector<report::MaskPicture> pictures(const Model& model, const Diagnosis& d, size_t step, int64_t seq, int64_t pos) {
  const ModelConfig& c = model.config;
  std::vector<report::MaskPicture> out;
  std::set<std::string> drawn;
  const int64_t forgotten = d.kind == DKind::LostKeys ? d.params.value("before", int64_t{0}) : 0;
  for (int64_t l = 0; l < c.layers; ++l) {
    const Attention a = c.attention(l);
    const size_t li = static_cast<size_t>(l);
    const int64_t span = a == Attention::Sliding ? c.windows[li] : a == Attention::Chunked ? c.chunks[li] : 0;
    const int64_t rule_first = first_visible_key(c, {}, l, pos);
    const int64_t used_first = first_visible_key(c, d.options, l, pos, forgotten);
    if (!drawn.insert(std::string(to_string(a)) + "/" + std::to_string(rule_first) + "/" + std::to_string(used_first)).second)
      continue;
    report::MaskPicture m;
    m.title = "step " + std::to_string(step) + (seq > 0 ? " seq " + std::to_string(seq) : "") + " position " +
              std::to_string(pos) + ", layer " + std::to_string(l) + " (" + to_string(a) +
              (span ? std::string(a == Attention::Chunked ? " C=" : " W=") + std::to_string(span) : "") +
              "): the rule's keys beside " + d.id() + "'s";
    m.query_positions = {pos};
    m.kv_length = pos + 1;
    m.window = span;
    m.layer_type = std::string(to_string(a)) + "_attention";
    std::string row;
    for (int64_t j = 0; j <= pos; ++j) {
      const bool allowed = j >= rule_first, used = j >= used_first;
      row += allowed && used ? '#' : !allowed && !used ? '.' : used ? '+' : '-';
    }
    m.rows = {row};
    out.push_back(std::move(m));
  }
  return out;
}

std::string kv_declared_of(const OracleOptions& same_dtype) { return same_dtype.kv_half ? "float16" : "float32"; }

// Keys lost at a rollback or reload are looked for where nothing else fits, or only a single
// position does (a loss that shows at one position looks like one eviction off by one there); a
// loss found is named first.
std::vector<Diagnosis> with_lost_keys(std::vector<Diagnosis> fits, const Model& model, const Plan& plan, const Recorded& rec,
                                      const std::vector<double>& bounds) {
  const bool positional = std::all_of(fits.begin(), fits.end(), [](const Diagnosis& d) {
    return d.kind == DKind::EvictionOffByOne || d.kind == DKind::PositionGlitch;
  });
  if (!positional) return fits;
  std::vector<Diagnosis> out = lost_keys(model, plan, rec, bounds);
  out.insert(out.end(), fits.begin(), fits.end());
  return out;
}

}  // namespace

double window_move_needed(const WindowSensitivity& s, double min) {
  return std::max(min, 10 * std::max(kEngineRule.floor, kEngineRule.factor * s.float32_error));
}

const char* to_string(DKind k) {
  switch (k) {
    case DKind::WindowOffByOne: return "window_off_by_one";
    case DKind::FullOnSliding: return "full_attention_on_sliding";
    case DKind::WindowOnEveryLayer: return "window_on_every_layer";
    case DKind::FullCapped: return "full_attention_capped";
    case DKind::LayersSwapped: return "layer_types_swapped";
    case DKind::SlidingAsChunked: return "sliding_as_chunked";
    case DKind::ChunkOffByOne: return "chunk_off_by_one";
    case DKind::FullOnChunked: return "full_attention_on_chunked";
    case DKind::ChunkedAsSliding: return "chunked_as_sliding";
    case DKind::ChunkSize: return "chunk_size";
    case DKind::ChunkShifted: return "chunk_boundaries_shifted";
    case DKind::SinksDropped: return "sinks_dropped";
    case DKind::NopeGivenRope: return "nope_given_rope";
    case DKind::NopeInverted: return "nope_inverted";
    case DKind::RopeBase: return "rope_base";
    case DKind::SoftcapDropped: return "softcap_dropped";
    case DKind::KvRounded: return "kv_rounded";
    case DKind::EvictionOffByOne: return "eviction_off_by_one";
    case DKind::PositionGlitch: return "position_glitch";
    case DKind::ChunksRestart: return "window_restarts_per_chunk";
    case DKind::ForkOffByOne: return "fork_off_by_one";
    case DKind::SpecRollbackOffByOne: return "spec_rollback_off_by_one";
    case DKind::ShiftNotRerotated: return "shift_not_rerotated";
    case DKind::LostKeys: return "lost_keys";
    case DKind::Unexplained: return "unexplained";
  }
  return "?";
}

std::optional<DKind> diagnosis_kind(const std::string& name) {
  for (int k = 0; k <= static_cast<int>(DKind::Unexplained); ++k)
    if (name == to_string(static_cast<DKind>(k))) return static_cast<DKind>(k);
  return std::nullopt;
}

std::vector<std::string> diagnosis_kind_names() {
  std::vector<std::string> out;
  for (int k = 0; k <= static_cast<int>(DKind::Unexplained); ++k) out.push_back(to_string(static_cast<DKind>(k)));
  return out;
}

std::string Diagnosis::id() const {
  std::string s = to_string(kind);
  if (params.empty()) return s;
  std::string inner;
  for (const auto& [key, value] : params.items())
    inner += (inner.empty() ? "" : ",") + key + "=" + (value.is_string() ? value.get<std::string>() : value.dump());
  return s + "(" + inner + ")";
}

std::string explain(const std::vector<Diagnosis>& fits) {
  std::string s;
  for (const Diagnosis& d : fits) s += (s.empty() ? "consistent with " : " or with ") + d.text;
  return s;
}

// ---------------------------------------------------------------------------------------------------

namespace {

std::string step_text(const PlanStep& step) {
  Plan one;
  one.steps = {step};
  return to_json(one)["steps"][0].dump();
}

// One oracle behind the memo: its rows of a step are the kept ones where there are, computed (after
// the steps it skipped) where not.
template <class T>
class Kept {
 public:
  Kept(const Model& model, const OracleOptions& options, const char* type)
      : oracle_(model, options),
        key_(model.digest.empty() || !oracle_memo_on() ? "" : oracle_rows_key(model.digest, type, options)) {}
  // Advances the key; true where the step's rows are kept (into `rows`), and the oracle then stays behind.
  bool kept(const PlanStep& step, size_t index, std::vector<double>& rows) {
    if (key_.empty()) return false;
    key_ = next_oracle_rows_key(key_, step_text(step));
    std::optional<std::vector<double>> found = find_oracle_rows(key_);
    if (!found) return false;
    rows = std::move(*found);
    behind_.emplace_back(step, index);
    return true;
  }
  std::vector<double> compute(const PlanStep& step, size_t index) {
    for (const auto& [s, i] : behind_) oracle_.apply(s, i);
    behind_.clear();
    std::vector<double> rows = oracle_.apply(step, index);
    if (!key_.empty()) keep_oracle_rows(key_, rows);
    return rows;
  }

 private:
  PlanOracle<T> oracle_;
  std::string key_;  // of the steps so far; empty: nothing is kept
  std::vector<std::pair<PlanStep, size_t>> behind_;
};

}  // namespace

struct SequenceModel::Oracles {
  Kept<double> truth;
  Kept<float> reference;
};

SequenceModel::SequenceModel(const Model& model, const OracleOptions& same_dtype)
    : oracles_(std::make_unique<Oracles>(Oracles{Kept<double>(model, {}, "float64"), Kept<float>(model, same_dtype, "float32")})),
      vocab_(model.config.vocab) {}
SequenceModel::~SequenceModel() = default;

SequenceModel::Expected SequenceModel::apply(const PlanStep& step, size_t index, bool logprobs) {
  Expected e;
  e.positions = step.positions(lengths_);
  std::vector<double> truth, reference;
  const bool truth_kept = oracles_->truth.kept(step, index, truth),
             reference_kept = oracles_->reference.kept(step, index, reference);
  // The float32 reference beside the float64 oracle on a second core where both are computed and the
  // step is long enough to pay for a thread (the two share nothing, so each gives the same bits either way).
  std::future<std::vector<double>> beside;
  if (!reference_kept && !truth_kept && e.positions.size() >= 32)
    beside = std::async(std::launch::async, [&] { return oracles_->reference.compute(step, index); });
  if (!truth_kept) truth = oracles_->truth.compute(step, index);
  if (!reference_kept) reference = beside.valid() ? beside.get() : oracles_->reference.compute(step, index);
  e.logits = as_answered(std::move(truth), vocab_, logprobs);
  const std::vector<double> ref = as_answered(std::move(reference), vocab_, logprobs);
  for (size_t k = 0; k < ref.size(); ++k) e.reference_error = std::max(e.reference_error, std::abs(ref[k] - e.logits[k]));
  step.apply(lengths_);
  return e;
}

std::vector<Diagnosis> diagnose(const Model& model, const Plan& plan, const Recorded& rec, double bound) {
  Diagnoser d(model, plan, "float32");
  for (size_t i = 0; i < rec.logits.size() && i < plan.steps.size(); ++i) d.feed(i, rec, bound);
  return with_lost_keys(d.fits(), model, plan, rec, std::vector<double>(rec.logits.size(), bound));
}

namespace {

// Judges a finished case by the engine's expectations (CheckOptions::expectations): a failure one
// expects becomes its expected failure, a pass counts for the entries that apply to it. A mutant run
// is never excused.
void judge(report::CaseResult& r, const EngineClient& engine, const Model& model, const Plan& plan, const CheckOptions& options,
           const expect::Failure& failure) {
  if (!options.expectations || engine.spec().mutant != "none") return;
  options.expectations->judge(r, report::id_of(report::EngineKey{engine.spec().name, plan.model, plan.name}),
                              to_string(model.config.family), failure);
}

expect::Failure logit_failure(const std::vector<Diagnosis>& fits, const std::string& error) {
  expect::Failure f;
  f.error = error;
  f.logits = true;
  for (const Diagnosis& d : fits) f.diagnoses.emplace_back(to_string(d.kind), d.params);
  return f;
}

// What a failing step's answered rows look like, where an adapter's row bookkeeping explains more
// than any cache hypothesis: every row the same (one position's row sent for each), or each row the
// oracle's row of the position before or after it (rows off by one). Rows of one sequence only;
// empty when neither holds or fewer than two rows were answered.
std::string row_hint(const std::vector<float>& got, const SequenceModel::Expected& e, const Recorded& rec, size_t step,
                     int64_t vocab, double bound) {
  const size_t n = got.size() / static_cast<size_t>(vocab);
  if (n < 2) return "";
  std::vector<int64_t> idx(n);
  for (size_t k = 0; k < n; ++k) {
    idx[k] = rec.row(step, k);
    if (e.positions[static_cast<size_t>(idx[k])].first != e.positions[static_cast<size_t>(idx[0])].first) return "";
  }
  auto dist = [&](const float* a, auto b) {  // b: an engine row (float) or an oracle row (double)
    double d = 0;
    for (int64_t v = 0; v < vocab; ++v)
      d = std::max(d, std::isfinite(a[v]) ? std::abs(a[v] - static_cast<double>(b[v])) : INFINITY);
    return d;
  };
  bool same = true, oracle_same = true;
  for (size_t k = 1; k < n; ++k) {
    same = same && dist(got.data() + k * static_cast<size_t>(vocab), got.data()) <= bound;
    double o = 0;
    for (int64_t v = 0; v < vocab; ++v)
      o = std::max(
          o, std::abs(e.logits[static_cast<size_t>(idx[k] * vocab + v)] - e.logits[static_cast<size_t>(idx[0] * vocab + v)]));
    oracle_same = oracle_same && o <= bound;
  }
  if (same && !oracle_same)
    return "the engine answered the same row for all " + std::to_string(n) +
           " positions of the step (one position's logits sent for every position?)";
  for (int shift : {-1, 1}) {
    bool fits = true;
    size_t compared = 0;
    for (size_t k = 0; k < n && fits; ++k) {
      const int64_t want = idx[k] + shift;
      if (want < 0 || want >= static_cast<int64_t>(e.positions.size()) ||
          e.positions[static_cast<size_t>(want)].first != e.positions[static_cast<size_t>(idx[k])].first)
        continue;
      fits = dist(got.data() + k * static_cast<size_t>(vocab), e.logits.data() + want * vocab) <= bound;
      ++compared;
    }
    if (fits && compared + 1 >= n && compared >= 1)
      return std::string("the engine's rows are the oracle's shifted by one position (each row is the position ") +
             (shift < 0 ? "before" : "after") + " it's: an off-by-one in the adapter's row bookkeeping?)";
  }
  return "";
}

}  // namespace

namespace {

// The case's record before anything runs: its id, dtype, parameters and the command that reruns it.
report::CaseResult open_case(const EngineClient& engine, const Model& model, const Plan& plan, const CheckOptions& options) {
  report::CaseResult r = report::named(report::EngineKey{engine.spec().name, plan.model, plan.name});
  r.dtype = "float32";
  r.reproduce = options.reproduce;
  const ModelConfig& c = model.config;
  int64_t tokens = 0;
  for (const PlanStep& s : plan.steps) tokens += static_cast<int64_t>(s.positions({}).size());
  r.params = (c.sliding_window > 0 || c.chunk_size == 0 ? "W=" : "C=") + std::to_string(c.local_span()) +
             ",steps=" + std::to_string(plan.steps.size()) + ",tokens=" + std::to_string(tokens);
  if (engine.spec().mutant != "none") r.params += ",mutant=" + engine.spec().mutant;
  return r;
}

// Where the engine says its arithmetic is coarser than float32 (docs/engines.md, "precision"), the
// same-dtype reference is too: FlashAttention's rule, a reference in the kernel's own precision.
// A quantized cache names its block format per side ("k", "v": "q8_0" or "q4_0", over "kv" on that
// side), and a kernel that converts the queries to K's dot type says so ("q": "q8_0"): the reference
// stores and reads them through the same blocks (kv_blocks.h), float64-free of anything else.
OracleOptions same_dtype_of(const json& load_header, std::string& dtype) {
  const json precision = load_header.value("precision", json::object());
  OracleOptions same_dtype;
  same_dtype.kv_half = precision.value("kv", "float32") == "float16";
  same_dtype.q_half = precision.value("q", "float32") == "float16";
  same_dtype.gelu_half = precision.value("gelu", "float32") == "float16";
  auto block = [&](const char* key) {
    const json v = precision.value(key, json());
    if (!v.is_string()) return KvBlock::None;
    return kv_block_named(v.get<std::string>()).value_or(KvBlock::None);
  };
  same_dtype.k_block = block("k"), same_dtype.v_block = block("v"), same_dtype.q_block = block("q");
  if (same_dtype.kv_half || same_dtype.q_half || same_dtype.gelu_half || same_dtype.k_block != KvBlock::None ||
      same_dtype.v_block != KvBlock::None || same_dtype.q_block != KvBlock::None) {
    dtype = "float32";
    // kv-f16 only where a side is stored as float16 (not where both are blocks).
    const bool kv_f16 = same_dtype.kv_half && (same_dtype.k_block == KvBlock::None || same_dtype.v_block == KvBlock::None);
    for (auto [key, on] : {std::pair{"kv", kv_f16}, {"q", same_dtype.q_half}, {"gelu", same_dtype.gelu_half}})
      if (on) dtype += std::string("/") + key + "-f16";
    for (auto [key, b] : {std::pair{"k", same_dtype.k_block}, {"v", same_dtype.v_block}, {"q", same_dtype.q_block}})
      if (b != KvBlock::None) dtype += std::string("/") + key + "-" + kv_block_name(b);
  }
  return same_dtype;
}

// The plan's run: the engine and the sequence model side by side, each step sent to the first and
// applied to the second; the engine's answers recorded and the rule's bound over the steps so far
// (the same-dtype reference's error grows with the positions it has seen).
class PlanRun {
 public:
  PlanRun(EngineClient& engine, const Model& model, const Plan& plan, const OracleOptions& same_dtype, const ReferenceRule& rule,
          std::string id)
      : engine_(engine),
        plan_(plan),
        vocab_(model.config.vocab),
        rule_(rule),
        id_(std::move(id)),
        expected(model, same_dtype),
        bound(rule.floor) {}

  std::string what(size_t i) const {
    return "step " + std::to_string(i) + " (" + plan_.steps[i].describe(expected.lengths()) + ")";
  }

  // Sends step i; false (and `why` set, `as` the status where the engine refused it) when the engine
  // refused the step or failed; `error` is then the engine's own text.
  bool send(size_t i, std::string& why, std::string& error, report::Status* as) {
    const auto t = std::chrono::steady_clock::now();
    Reply got = engine_.step(plan_.steps[i], id_, static_cast<int64_t>(i), vocab_);
    engine_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    rec.logits.emplace_back();
    rec.rows.emplace_back();
    rec.logprobs.push_back(0);
    if (got.kind == Reply::Kind::Unsupported) {
      why = what(i) + ": the engine refused: " + got.message;
      error = got.message;
      if (as) *as = report::Status::Skipped;
      return false;
    }
    if (!got.ok()) {
      why = what(i) + ": " + got.message;
      error = got.message;
      return false;
    }
    rec.logits.back() = std::move(got.logits);
    rec.rows.back() = std::move(got.rows);
    rec.logprobs.back() = got.logprobs;
    return true;
  }
  // Applies step i to the sequence model: its expected rows, the step's bound. `judged`: the step is
  // judged, and its bound is the case's (the steps run on only for the diagnosis leave it).
  SequenceModel::Expected apply(size_t i, bool judged = true) {
    SequenceModel::Expected e = expected.apply(plan_.steps[i], i, rec.logprob(i));
    ref_error = std::max(ref_error, e.reference_error);
    bounds.push_back(std::max(rule_.floor, rule_.factor * ref_error));
    if (judged) bound = bounds.back();
    return e;
  }
  size_t answered() const { return rec.logits.size(); }

 private:
  EngineClient& engine_;
  const Plan& plan_;
  int64_t vocab_;
  ReferenceRule rule_;
  std::string id_;

 public:
  SequenceModel expected;
  Recorded rec;
  std::vector<double> bounds;  // per step applied
  double engine_s = 0, ref_error = 0, bound;
};

// One step's answer against the model's rows: the worst error, the positions judged, and the first
// row that breaks the rule (beyond the bound, or another top-1 token where the oracle's is clear).
struct StepVerdict {
  double worst = 0;
  int64_t judged = 0;
  std::string bad;  // empty: every row within the rule
  int64_t seq = -1, position = -1;
};
StepVerdict judge_step(const std::string& what, const PlanStep& s, const SequenceModel::Expected& e, const Recorded& rec,
                       size_t i, int64_t vocab, double bound) {
  StepVerdict v;
  const std::vector<float>& got = rec.logits[i];
  for (size_t k = 0; k * vocab < got.size(); ++k) {
    const auto [seq, pos] = e.positions[static_cast<size_t>(rec.row(i, k))];
    const float* g = got.data() + k * vocab;
    const double* w = e.logits.data() + rec.row(i, k) * vocab;
    double err = 0;
    int64_t at = 0, top_got = 0, top_want = 0;
    for (int64_t t = 0; t < vocab; ++t) {
      const double d = std::isfinite(g[t]) ? std::abs(g[t] - w[t]) : INFINITY;
      if (d > err) err = d, at = t;
      if (g[t] > g[top_got]) top_got = t;
      if (w[t] > w[top_want]) top_want = t;
    }
    double second = -INFINITY;
    for (int64_t t = 0; t < vocab; ++t)
      if (t != top_want) second = std::max(second, w[t]);
    ++v.judged;
    v.worst = std::max(v.worst, err);
    const std::string where =
        (s.several_sequences() ? "seq " + std::to_string(seq) + " " : "") + "position " + std::to_string(pos);
    std::string bad;
    if (err > bound)
      bad = what + (rec.logprob(i) ? ": max |log-prob error| " : ": max |logit error| ") + num(err) + " at " + where +
            ", token id " + std::to_string(at) + " (engine " + num(g[at]) + ", oracle " + num(w[at]) + ") > bound " + num(bound);
    else if (top_got != top_want && w[top_want] - second > 2 * bound)
      bad =
          what + ": top-1 token at " + where + " is " + std::to_string(top_got) + ", the oracle's is " + std::to_string(top_want);
    if (!bad.empty() && v.bad.empty()) v.bad = bad, v.seq = seq, v.position = pos;
  }
  return v;
}

// The diagnosis of a logit failure at step `failed`: the hypotheses that still match the engine's
// answers; while more than one does, the plan goes on from step `next`, its steps only telling them
// apart.
struct Diagnosed {
  std::vector<Diagnosis> fits;
  std::string tried, then;  // the hypotheses' kinds; why the plan stopped going on
  size_t told_apart = 0;    // steps run after the failing one
};
Diagnosed diagnose_failure(PlanRun& run, const Model& model, const Plan& plan, const OracleOptions& same_dtype, size_t next) {
  Diagnosed out;
  Diagnoser d(model, plan, kv_declared_of(same_dtype));
  for (size_t k = 0; k < run.answered(); ++k) d.feed(k, run.rec, run.bounds[k]);
  for (size_t i = next; !d.settled() && i < plan.steps.size(); ++i, ++out.told_apart) {
    std::string error;
    if (!run.send(i, out.then, error, nullptr)) break;
    run.apply(i, false);
    d.feed(i, run.rec, run.bounds.back());
  }
  // The step that failed to answer.
  if (run.rec.logits.size() > run.bounds.size()) run.rec.logits.pop_back(), run.rec.rows.pop_back(), run.rec.logprobs.pop_back();
  out.fits = with_lost_keys(d.fits(), model, plan, run.rec, run.bounds);
  out.tried = d.tried();
  return out;
}

std::string diagnosis_ids(const std::vector<Diagnosis>& fits) {
  std::string ids;
  for (const Diagnosis& f : fits) ids += (ids.empty() ? "" : " | ") + f.id();
  return ids;
}

// The case's detail: the engine, the plan, the bound and how it was reached, each step's worst
// error, and the diagnosis.
std::string detail_text(const EngineClient& engine, const Plan& plan, const ReferenceRule& rule, const PlanRun& run,
                        const std::string& steps, const std::string& failure, const Diagnosed& diagnosed) {
  std::ostringstream detail;
  detail << "engine: " << engine.info().value("name", std::string("?")) << " " << engine.info().value("version", std::string())
         << "\n";
  detail << "plan: " << to_json(plan).dump() << "\n";
  detail << "bound " << num(run.bound) << " = max(floor " << num(rule.floor) << ", " << rule.factor
         << " x float32 reference error " << num(run.ref_error) << ")\n";
  detail << steps;
  if (diagnosed.told_apart)
    detail << "the plan went on " << diagnosed.told_apart << " more steps to tell the explanations apart\n";
  if (!failure.empty())
    detail << "diagnosis: "
           << (diagnosed.fits.empty() ? std::string(to_string(DKind::Unexplained)) : diagnosis_ids(diagnosed.fits)) << "\n";
  return detail.str();
}

// A logit failure's message: the failing row, then what it is consistent with (or that nothing is).
// An unexplained failure carries the hint of what its rows look like (row_hint), where one applies.
std::string logits_message(const std::string& failure, const Diagnosed& diagnosed, const std::string& hint) {
  std::string msg =
      failure + (diagnosed.fits.empty() ? "; no single explanation fits (tried " + diagnosed.tried + ")" +
                                              (hint.empty() ? "" : "; hint: " + hint) + " [unexplained]"
                                        : "; " + explain(diagnosed.fits) + " [" + diagnosis_ids(diagnosed.fits) + "]");
  if (!diagnosed.then.empty()) msg += "; then " + diagnosed.then;
  return msg;
}

// Why no plan of causal steps applies to a model, on any engine and in any pair of an engine's cache paths; empty
// where they apply. An encoder's positions see later tokens (its model level is encoder_agreement.py); an
// encoder-decoder's decoder reads a source through its cross-attention, which the plans do not give.
std::string no_causal_plan_reason(const ModelConfig& c) {
  if (c.bidirectional)
    return std::string("an encoder (") + to_string(c.family) +
           ", bidirectional): the plans extend a causal sequence; its forward is judged by "
           "engines/transformers/encoder_agreement.py";
  if (c.encoder)
    return std::string("an encoder-decoder (") + to_string(c.family) +
           "): the plans extend one causal sequence with no source for its cross-attention; its forward is judged by "
           "engines/transformers/encoder_agreement.py";
  return "";
}

}  // namespace

Judged judge_plan(EngineClient& engine, const Model& model, const std::string& model_dir, const Plan& plan,
                  const CheckOptions& options) {
  Judged out;
  report::CaseResult& r = out.result;
  r = open_case(engine, model, plan, options);
  const ModelConfig& c = model.config;
  const std::string id = r.id;
  auto finish = [&](report::Status st, std::string msg, Failure::Where where = Failure::Where::Step, std::string error = "") {
    r.status = st;
    r.message = std::move(msg);
    if (st == report::Status::Fail || st == report::Status::Deviation)
      out.failure.where = where, out.failure.error = std::move(error);
    return out;
  };
  if (const std::string why = no_causal_plan_reason(c); !why.empty()) return finish(report::Status::Skipped, why);
  // `pre` of every step, before the engine is started: a plan that cannot run is not sent.
  if (const std::string why = invalid_reason(plan, c.vocab); !why.empty())
    return finish(report::Status::Fail, "invalid plan: " + why);

  Reply hello = engine.hello();
  if (!hello.ok()) return finish(report::Status::Fail, hello.message, Failure::Where::Step, hello.message);
  for (const std::string& operation : operations_used(plan))
    if (!engine.supports(operation))
      return finish(report::Status::Skipped, "the engine does not support " + operation + " (its hello lists " +
                                                 engine.info().value("operations", json::array()).dump() + ")");
  if (sequence_count(plan) > 1 && !engine.supports("sequences"))
    return finish(report::Status::Skipped, "the engine does not run several sequences (its hello lists " +
                                               engine.info().value("operations", json::array()).dump() + ")");
  Reply loaded = engine.load(model_dir, max_tokens(plan), sequence_count(plan), id);
  if (loaded.kind == Reply::Kind::Unsupported)
    return finish(report::Status::Skipped, "the engine refused the model: " + loaded.message);
  if (!loaded.ok()) {
    const std::string msg = "load: " + loaded.message;
    finish(report::Status::Fail, msg, Failure::Where::Load, loaded.message);
    judge(r, engine, model, plan, options, {loaded.message, false, {}});
    return out;
  }
  if (loaded.header.value("vocab", int64_t{-1}) != c.vocab) {
    const std::string why = "the engine reports a vocabulary of " + loaded.header.value("vocab", json()).dump() +
                            ", the model has " + std::to_string(c.vocab);
    return finish(report::Status::Fail, "load: " + why, Failure::Where::Load, why);
  }
  const OracleOptions same_dtype = same_dtype_of(loaded.header, r.dtype);
  r.policy = to_string(Policy::SameDtypeReference);

  // The plan as stateful commands: each step goes to the engine and to the sequence model, and the
  // engine's answer is judged against the model's before the next step.
  PlanRun run(engine, model, plan, same_dtype, options.rule, id);
  double worst = 0;
  int64_t judged = 0;
  std::string failure, stopped, error;  // the first failing row; why the run ended early; the engine's text
  std::string hint;                     // what the failing step's rows look like, for an unexplained failure
  report::Status stopped_as = report::Status::Fail;
  std::ostringstream steps;
  size_t failed_at = 0;
  int64_t fail_seq = -1, fail_pos = -1;
  const auto t0 = std::chrono::steady_clock::now();
  size_t i = 0;
  for (; i < plan.steps.size() && failure.empty(); ++i) {
    const std::string what = run.what(i);
    if (!run.send(i, stopped, error, &stopped_as)) break;
    const SequenceModel::Expected e = run.apply(i);
    if (run.rec.logits[i].empty()) continue;
    const StepVerdict v = judge_step(what, plan.steps[i], e, run.rec, i, c.vocab, run.bound);
    judged += v.judged;
    if (!v.bad.empty()) {
      failure = v.bad, failed_at = i, fail_seq = v.seq, fail_pos = v.position;
      hint = row_hint(run.rec.logits[i], e, run.rec, i, c.vocab, run.bound);
    }
    worst = std::max(worst, v.worst);
    steps << what << ": max error " << num(v.worst);
    const size_t rows = run.rec.logits[i].size() / static_cast<size_t>(c.vocab);
    if (rows < e.positions.size()) steps << " (the engine answered " << rows << " of " << e.positions.size() << " positions)";
    steps << "\n";
  }
  const size_t ran = run.answered();

  Diagnosed diagnosed;
  if (!failure.empty()) diagnosed = diagnose_failure(run, model, plan, same_dtype, i);
  if (options.timing) {
    options.timing->engine_s += run.engine_s;
    options.timing->oracle_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() - run.engine_s;
    options.timing->steps += static_cast<int64_t>(run.rec.logits.size());
  }
  if (!diagnosed.fits.empty()) r.masks = pictures(model, diagnosed.fits.front(), failed_at, fail_seq, fail_pos);
  r.bound = run.bound;
  r.error = worst;
  r.detail = detail_text(engine, plan, options.rule, run, steps.str(), failure, diagnosed);
  const std::string summary = std::to_string(ran) + " steps, " + std::to_string(judged) + " positions judged, max error " +
                              num(worst) + " (bound " + num(run.bound) + ")";
  // An engine that answered logits for none of the new positions checked nothing: not a pass.
  if (failure.empty() && stopped.empty() && judged == 0)
    return finish(report::Status::Fail,
                  "the engine answered no logits at any new position: nothing was judged (" + summary + ")");
  if (failure.empty() && stopped.empty()) {
    finish(report::Status::Pass, summary);
    judge(r, engine, model, plan, options, {});
    return out;
  }
  if (failure.empty() && stopped_as == report::Status::Skipped)
    return finish(stopped_as, stopped + " (" + summary + " before it)");
  const std::string msg = failure.empty() ? stopped + " (" + summary + " before it)" : logits_message(failure, diagnosed, hint);
  const bool logits = !failure.empty();
  out.failure.fits = diagnosed.fits;
  const Failure::Where where = logits ? Failure::Where::Logits : Failure::Where::Step;
  finish(report::Status::Fail, msg, where, error);
  // The engine's expectations (an expected failure becomes its DEVIATION), judged on the typed failure.
  expect::Failure as = logit_failure(diagnosed.fits, stopped + diagnosed.then);
  as.logits = logits;
  judge(r, engine, model, plan, options, as);
  return out;
}

report::CaseResult check_plan(EngineClient& engine, const Model& model, const std::string& model_dir, const Plan& plan,
                              const CheckOptions& options) {
  return judge_plan(engine, model, model_dir, plan, options).result;
}

// ---- A configuration pair: two cache paths of one engine judged against each other ----

report::CaseResult check_pair(EngineClient& a, EngineClient& b, const std::string& name, const Model& model,
                              const std::string& model_dir, const Plan& plan, const CheckOptions& options) {
  report::CaseResult r = report::named(report::EngineKey{name, plan.model, plan.name});
  r.dtype = "float32";
  r.reproduce = options.reproduce;
  r.params = "a=" + a.spec().name + ",b=" + b.spec().name + ",steps=" + std::to_string(plan.steps.size());
  r.policy = to_string(Policy::SameDtypeReference);
  const ModelConfig& c = model.config;
  auto finish = [&](report::Status st, std::string msg) {
    r.status = st;
    r.message = std::move(msg);
    return r;
  };
  if (const std::string why = no_causal_plan_reason(c); !why.empty()) return finish(report::Status::Skipped, why);
  if (const std::string why = invalid_reason(plan, c.vocab); !why.empty())
    return finish(report::Status::Fail, "invalid plan: " + why);
  // Each side as the engine check opens it: hello, the plan's operations, the load.
  OracleOptions same_dtype;
  for (auto [side, engine] : {std::pair{"A", &a}, {"B", &b}}) {
    const std::string who = std::string(side) + " (" + engine->spec().name + ")";
    Reply hello = engine->hello();
    if (!hello.ok()) return finish(report::Status::Fail, who + ": " + hello.message);
    for (const std::string& operation : operations_used(plan))
      if (!engine->supports(operation)) return finish(report::Status::Skipped, who + " does not support " + operation);
    if (sequence_count(plan) > 1 && !engine->supports("sequences"))
      return finish(report::Status::Skipped, who + " does not run several sequences");
    Reply loaded = engine->load(model_dir, max_tokens(plan), sequence_count(plan), r.id);
    if (loaded.kind == Reply::Kind::Unsupported)
      return finish(report::Status::Skipped, who + " refused the model: " + loaded.message);
    if (!loaded.ok()) return finish(report::Status::Fail, who + ": load: " + loaded.message);
    if (loaded.header.value("vocab", int64_t{-1}) != c.vocab)
      return finish(report::Status::Fail, who + ": load: another vocabulary");
    // The coarser of the two sides' declared precisions sizes the bound.
    std::string dtype;
    const OracleOptions o = same_dtype_of(loaded.header, dtype);
    same_dtype.kv_half |= o.kv_half, same_dtype.q_half |= o.q_half, same_dtype.gelu_half |= o.gelu_half;
    // A block format is coarser than any float type; q4_0 coarser than q8_0.
    for (auto [mine, theirs] :
         {std::pair{&same_dtype.k_block, o.k_block}, {&same_dtype.v_block, o.v_block}, {&same_dtype.q_block, o.q_block}})
      *mine = std::max(*mine, theirs);
  }
  // The bound each side is held to against the oracle (the same-dtype reference's error over the
  // steps so far, times the rule's factor): two cache paths of one computation differ by less.
  SequenceModel expected(model, same_dtype);
  double ref_error = 0, bound = options.rule.floor, worst = 0;
  int64_t compared = 0;
  const int64_t V = c.vocab;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep& s = plan.steps[i];
    const std::string what = "step " + std::to_string(i) + " (" + s.describe(expected.lengths()) + ")";
    Reply ra = a.step(s, r.id, static_cast<int64_t>(i), V), rb = b.step(s, r.id, static_cast<int64_t>(i), V);
    for (auto [side, got] : {std::pair{"A", &ra}, {"B", &rb}}) {
      if (got->kind == Reply::Kind::Unsupported)
        return finish(report::Status::Skipped, what + ": " + side + " refused: " + got->message);
      if (!got->ok()) return finish(report::Status::Fail, what + ": " + side + ": " + got->message);
    }
    const SequenceModel::Expected e = expected.apply(s, i, ra.logprobs);
    ref_error = std::max(ref_error, e.reference_error);
    bound = std::max(options.rule.floor, options.rule.factor * ref_error);
    if (ra.logits.empty() || rb.logits.empty()) continue;
    if (ra.logprobs != rb.logprobs)
      return finish(report::Status::Fail, what + ": one side answered logits, the other log-probabilities");
    // The rows both sides answered (each may answer a subset of the new positions).
    std::map<int64_t, size_t> of_b;
    for (size_t k = 0; k * static_cast<size_t>(V) < rb.logits.size(); ++k)
      of_b[rb.rows.empty() ? static_cast<int64_t>(k) : rb.rows[k]] = k;
    for (size_t k = 0; k * static_cast<size_t>(V) < ra.logits.size(); ++k) {
      const int64_t row = ra.rows.empty() ? static_cast<int64_t>(k) : ra.rows[k];
      const auto other = of_b.find(row);
      if (other == of_b.end()) continue;
      const float* x = ra.logits.data() + k * static_cast<size_t>(V);
      const float* y = rb.logits.data() + other->second * static_cast<size_t>(V);
      double err = 0;
      for (int64_t v = 0; v < V; ++v)
        err = std::max(err, std::isfinite(x[v]) && std::isfinite(y[v]) ? std::abs(double(x[v]) - y[v]) : INFINITY);
      ++compared;
      worst = std::max(worst, err);
      if (err > bound) {
        const auto [seq, pos] = e.positions[static_cast<size_t>(row)];
        r.error = err, r.bound = bound;
        return finish(report::Status::Fail, what + ": seq " + std::to_string(seq) + " position " + std::to_string(pos) +
                                                ": the two configurations disagree: max |A - B| " + num(err) + " > bound " +
                                                num(bound));
      }
    }
  }
  r.error = worst, r.bound = bound;
  const std::string summary = std::to_string(plan.steps.size()) + " steps, " + std::to_string(compared) +
                              " positions compared, max |A - B| " + num(worst) + " (bound " + num(bound) + ")";
  if (compared == 0)
    return finish(report::Status::Fail, "no position answered by both sides: nothing was compared (" + summary + ")");
  return finish(report::Status::Pass, summary);
}

bool same_failure(const Failure& a, const Failure& b, const std::function<std::string(const std::string&)>& error_class) {
  if (a.where != b.where) return false;
  if (a.where != Failure::Where::Logits) return error_class(a.error) == error_class(b.error);
  if (a.fits.empty() || b.fits.empty()) return a.fits.empty() && b.fits.empty();  // unexplained stays unexplained
  for (const Diagnosis& x : a.fits)
    for (const Diagnosis& y : b.fits)
      if (x.kind == y.kind) return true;
  return false;
}

}  // namespace kvc::engine
