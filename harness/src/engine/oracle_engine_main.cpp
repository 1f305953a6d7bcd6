// kvc-oracle-engine: an engine-protocol worker (docs/engines.md) whose "engine" is the model oracle
// itself in float32, keeping every position (no eviction). It is the protocol in one file for engine
// authors, the engine suite's own positive control (it must pass every plan), and, with options, its
// negative controls: the adapter mutants (a wrong window or chunk; a config read wrong: chunk
// boundaries shifted, chunks read as windows, sinks or the attention soft-cap dropped, NoPE layers
// inverted, sliding and full layers swapped, K/V stored in bfloat16, one eviction late, a full layer
// keeping only its last 1024 keys, a glitch in one position's logits; a serving operation done wrong: a fork
// that shares what it should copy or starts from the wrong prefix, a chunked prefill whose window
// restarts at each chunk, a speculative rollback off by one, a batch that computes a sequence at
// another's offset, a context shift that moves the kept keys without re-rotating them, a recompute
// after a preemption that leaves out the last token, a turn that continues one token past its kept
// prefix) and worker
// faults (crash, hang, garbage, ansi (a coloured log line on stdout), exit at a given step; "abort@N": an assertion line on stderr, then a
// backtrace far longer than the tail a failure quotes, then SIGABRT, as ggml's asserts print; "load-error@L": a load error for a model of
// fewer than L layers, a second bug for shrinking to slide into), which the suite must catch. Option "logits": "last" or "none" answers only the last new position of a step, or
// none (the protocol's subset answer; a run judged on nothing is not a pass); "logprobs" and
// "last-logprobs" answer log-probabilities instead (buffer "logprobs", as a server does), and
// "logprobs-as-logits" sends them labelled as logits (a negative control: the judge must not pass it);
// option "deviate": MUTANT behaves as that mutant without the suite being told (what a known
// deviation excuses).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "kvconform/engine/model.h"
#include "kvconform/engine/steps.h"
#include "kvconform/framing.h"

using kvc::engine::Model;
using nlohmann::json;
using Oracle = kvc::engine::SequenceOracle<float>;

namespace {

// One reply on stdout (kvconform/framing.h); the host gone, the engine ends.
void send(const json& h, const std::string& payload = "") {
  if (!kvc::framing::send(1, h, payload.data(), payload.size())) std::exit(0);
}

struct State {
  std::unique_ptr<Model> model;
  kvc::engine::OracleOptions options;
  // Shared pointers only so that the fork_shared mutant can alias two sequences.
  std::map<int64_t, std::shared_ptr<Oracle>> seqs;
  std::string fault;  // "crash", "abort", "hang", "garbage", "exit" (at step fault_step), "load-error" (below fault_step layers)
  int64_t fault_step = -1;
  std::string mutant = "none";
  std::string logits =
      "all";  // all, last, none (which new positions a step answers), logprobs, last-logprobs, logprobs-as-logits
  Oracle& seq(int64_t s) {
    auto& slot = seqs[s];
    if (!slot) slot = std::make_shared<Oracle>(*model, options);
    return *slot;
  }
};

// The family-feature mutants that change the loaded description or the run's windows (rope_all_rotary,
// shared_kv_full, window_on_every_layer, full_attention_capped); "" when applied, else why the model has nothing for the mutant
// to change (the load answers unsupported: a SKIP).
std::string apply_model_mutant(const std::string& mutant, kvc::engine::ModelConfig& k, kvc::engine::OracleOptions& o) {
  const size_t n = static_cast<size_t>(k.layers);
  if (mutant == "rope_all_rotary") {
    if (std::count(k.rope_angles.begin(), k.rope_angles.end(), 0) == static_cast<long>(k.rope_angles.size()) &&
        (k.rotary_dim == 0 || k.rotary_dim == k.head_dim) &&
        std::all_of(k.rotary_dims.begin(), k.rotary_dims.end(), [&](int64_t d) { return d == k.head_dim; }))
      return "the model rotates every frequency already";
    std::fill(k.rope_angles.begin(), k.rope_angles.end(), 0);
    k.rotary_dim = 0;
    k.rotary_dims.clear();
  } else if (mutant == "shared_kv_full") {
    bool any = false;
    for (size_t l = 0; l < n; ++l)
      if (k.shares_kv(static_cast<int64_t>(l)) && o.windows[l] > 0) o.windows[l] = 0, any = true;
    if (!any) return "the model has no sliding layer that shares another's K/V";
  } else if (mutant == "full_attention_capped") {
    // A full layer that keeps only its last 1024 keys (a cache sized for a window it does not have).
    bool any = false;
    for (size_t l = 0; l < n; ++l)
      if (k.attention(static_cast<int64_t>(l)) == kvc::engine::Attention::Full) o.windows[l] = 1024, any = true;
    if (!any) return "the model has no full layer";
  } else if (mutant == "window_on_every_layer") {
    if (k.sliding_window <= 0 || std::count(o.windows.begin(), o.windows.end(), k.sliding_window) == static_cast<long>(n))
      return "the model has no full layer beside a configured window";
    std::fill(o.windows.begin(), o.windows.end(), k.sliding_window);
  }
  return "";
}

void append(std::vector<double>& all, const std::vector<double>& more) { all.insert(all.end(), more.begin(), more.end()); }

// The answer to a step with new positions: all rows, or the subset the "logits" option names.
// The glitch mutant adds 0.5 to token 1's logit at position W (first: the position of the first row; -1 for a batch).
void send_logits(const State& st, std::vector<double> logits, int64_t first = -1) {
  const int64_t vocab = st.model->config.vocab;
  const int64_t rows = static_cast<int64_t>(logits.size()) / vocab;
  const int64_t glitch = st.model->config.local_span() - first;
  if (st.mutant == "position_glitch" && first >= 0 && glitch >= 0 && glitch < rows)
    logits[static_cast<size_t>(glitch * vocab + 1)] += 0.5;
  const bool logprobs = st.logits.find("logprobs") != std::string::npos;
  // An adapter's row bookkeeping gone wrong: every row the step's first position's, or each row the
  // position before it's (the first its own): the suite's hint must name them.
  if (st.logits == "first-repeated" || st.logits == "shifted")
    for (int64_t r = rows - 1; r >= 1; --r)
      std::copy_n(logits.begin() + (st.logits == "shifted" ? r - 1 : 0) * vocab, vocab, logits.begin() + r * vocab);
  std::vector<int64_t> keep;
  if (st.logits == "all" || st.logits == "logprobs" || st.logits == "logprobs-as-logits" || st.logits == "first-repeated" ||
      st.logits == "shifted")
    for (int64_t r = 0; r < rows; ++r) keep.push_back(r);
  else if (st.logits == "last" || st.logits == "last-logprobs") keep.push_back(rows - 1);
  std::string payload(keep.size() * static_cast<size_t>(vocab) * 4, '\0');
  for (size_t k = 0; k < keep.size(); ++k) {
    const double* row = logits.data() + keep[k] * vocab;
    double lse = 0;
    if (logprobs) {  // log-softmax in double, rounded once to float32 as the logits are
      const double top = *std::max_element(row, row + vocab);
      for (int64_t v = 0; v < vocab; ++v) lse += std::exp(row[v] - top);
      lse = top + std::log(lse);
    }
    for (int64_t v = 0; v < vocab; ++v) {
      const float f = static_cast<float>(row[v] - lse);
      std::memcpy(payload.data() + 4 * (k * static_cast<size_t>(vocab) + static_cast<size_t>(v)), &f, 4);
    }
  }
  const std::string name = logprobs && st.logits != "logprobs-as-logits" ? "logprobs" : "logits";
  json reply = {
      {"status", "ok"},
      {"buffers", {{{"name", name}, {"dtype", "float32"}, {"shape", {keep.size(), vocab}}, {"nbytes", payload.size()}}}}};
  if (keep.size() != static_cast<size_t>(rows)) reply["rows"] = keep;
  send(reply, payload);
}

// The oracle engine's answer to each kind of step (one method per row of the step table, steps.h):
// what a worker writes to serve an operation.
struct Serve {
  State& st;
  void operator()(const kvc::engine::Extend& s) {
    Oracle& o = st.seq(s.seq);
    const int64_t first = o.length();
    send_logits(st, o.extend(s.tokens), first);
  }
  void operator()(const kvc::engine::Chunked& s) {
    Oracle& o = st.seq(s.seq);
    const int64_t first = o.length();
    std::vector<double> all;
    for (size_t at = 0; at < s.tokens.size(); at += static_cast<size_t>(s.chunk)) {
      // The mutant's window restarts at each chunk: a chunk's sliding layers see no earlier key.
      if (st.mutant == "window_restarts_per_chunk") o.forget_before(o.length());
      append(all, o.extend(std::vector<int32_t>(
                      s.tokens.begin() + static_cast<long>(at),
                      s.tokens.begin() + static_cast<long>(std::min(s.tokens.size(), at + static_cast<size_t>(s.chunk))))));
    }
    send_logits(st, all, first);
  }
  void operator()(const kvc::engine::Spec& s) {
    Oracle& o = st.seq(s.seq);
    const int64_t first = o.length();
    const std::vector<double> logits = o.extend(s.draft);
    // The mutant rolls back one token more than the draft rejected.
    const int64_t n = std::min<int64_t>(s.reject + (st.mutant == "spec_rollback_off_by_one" ? 1 : 0), o.length());
    if (n > 0) o.truncate(n);
    send_logits(st, logits, first);
  }
  void operator()(const kvc::engine::Batch& s) {
    std::vector<double> all;
    const int64_t first_length = s.items.empty() ? 0 : st.seq(s.items[0].seq).length();
    for (const kvc::engine::BatchItem& item : s.items) {
      Oracle& o = st.seq(item.seq);
      if (st.mutant == "batch_offset" && o.length() != first_length) {
        // The mutant computes this sequence's rows at the first item's offset: its cache cut
        // back or padded (with its first token) to that length.
        Oracle at_offset = o;
        if (at_offset.length() > first_length) at_offset.truncate(at_offset.length() - first_length);
        else at_offset.extend(std::vector<int32_t>(static_cast<size_t>(first_length - at_offset.length()), item.tokens.front()));
        append(all, at_offset.extend(item.tokens));
        o.extend(item.tokens);
      } else {
        append(all, o.extend(item.tokens));
      }
    }
    send_logits(st, all);
  }
  void operator()(const kvc::engine::Fork& s) {
    Oracle& source = st.seq(s.from);
    if (s.length > source.length())
      throw std::invalid_argument("fork of " + std::to_string(s.length) + " tokens of a sequence of " +
                                  std::to_string(source.length()));
    if (st.mutant == "fork_shared") {
      // The mutant shares the source's state instead of copying it: cutting the fork cuts the
      // source, and either one's extends land in both.
      st.seqs[s.seq] = st.seqs[s.from];
      if (source.length() > s.length) source.truncate(source.length() - s.length);
    } else {
      auto copy = std::make_shared<Oracle>(source);
      // The mutant starts the fork from a prefix one token short.
      const int64_t keep = st.mutant == "fork_off_by_one" ? std::max<int64_t>(0, s.length - 1) : s.length;
      if (copy->length() > keep) copy->truncate(copy->length() - keep);
      st.seqs[s.seq] = copy;
    }
    send({{"status", "ok"}});
  }
  void operator()(const kvc::engine::Shift& s) {
    // llama.cpp's context shift on the cached K/V; the mutant moves the keys without re-rotating them.
    Oracle& o = st.seq(s.seq);
    // shift_discard_off_by_one drops one token more than asked, where there is one
    const int64_t more = st.mutant == "shift_discard_off_by_one" && s.keep + s.discard < o.length() ? 1 : 0;
    o.shift(s.keep, s.discard + more, st.mutant != "shift_not_rerotated");
    send({{"status", "ok"}});
  }
  void operator()(const kvc::engine::Rollback& s) {
    st.seq(s.seq).truncate(s.drop);
    send({{"status", "ok"}});
  }
  void operator()(const kvc::engine::Reload& s) {
    Oracle copy = st.seq(s.seq);
    st.seqs.erase(s.seq);
    st.seqs[s.seq] = std::make_shared<Oracle>(copy);
    send({{"status", "ok"}});
  }
  void operator()(const kvc::engine::Preempt& s) {
    // The recompute from the sequence's tokens is the state it had (position p's keys depend only on
    // tokens 0..p), so the oracle keeps it; the mutant's recompute leaves out the last token.
    Oracle& o = st.seq(s.seq);
    if (st.mutant == "preempt_short" && o.length() > 0) o.truncate(1);
    send({{"status", "ok"}});
  }
  void operator()(const kvc::engine::Turn& s) {
    // The kept prefix, then the new tokens; the mutant continues from one old token past the prefix.
    Oracle& o = st.seq(s.seq);
    const int64_t keep = st.mutant == "turn_past" && s.keep < o.length() ? s.keep + 1 : s.keep;
    if (o.length() > keep) o.truncate(o.length() - keep);
    const int64_t first = o.length();
    send_logits(st, o.extend(s.tokens), first);
  }
  void operator()(const kvc::engine::Reset&) {
    st.seqs.clear();
    send({{"status", "ok"}});
  }
};

}  // namespace

int main() {
  State st;
  // Every optional operation of the step table, and several sequences.
  const json protocol = kvc::engine::protocol_description();
  json operations = json::array();
  for (const json& o : protocol["operations"]) operations.push_back(o["name"]);
  for (;;) {
    std::string header;
    try {
      if (!kvc::framing::read_header(0, header)) return 0;
    } catch (const std::exception& e) {  // out of frame: nothing after it can be read
      std::fprintf(stderr, "kvc-oracle-engine: bad frame: %s\n", e.what());
      return 1;
    }
    const json h = json::parse(header, nullptr, false);
    const std::string op = h.is_object() ? h.value("op", "") : "";
    try {
      if (op == "hello") {
        send({{"status", "ok"},
              {"name", "kvc-oracle-engine"},
              {"version", "1"},
              {"description", "the model oracle in float32, every position kept"},
              {"operations", operations}});
        continue;
      }
      if (h.contains("step") && h["step"] == st.fault_step) {
        if (st.fault == "crash") std::raise(SIGSEGV);
        if (st.fault == "abort") {
          std::fprintf(stderr, "kvc-oracle-engine: ASSERT(fault != abort) failed at step %lld\n",
                       static_cast<long long>(st.fault_step));
          for (int frame = 0; frame < 400; ++frame)
            std::fprintf(stderr, "#%d 0x%016x in frame_%d () from a backtrace\n", frame, frame, frame);
          std::fflush(stderr);
          std::abort();
        }
        if (st.fault == "exit") std::exit(3);
        if (st.fault == "hang") pause();
        if (st.fault == "garbage") {
          std::fputs("a stray print on stdout", stdout);
          std::fflush(stdout);
          pause();
        }
        if (st.fault == "ansi") {  // a native library's coloured log line on fd 1 (mistral.rs's tracing)
          std::fputs("\x1b[2m2026-12-06T21:51:42Z\x1b[0m \x1b[32m INFO\x1b[0m mistralrs_core: loading\n", stdout);
          std::fflush(stdout);
          pause();
        }
      }
      if (op == "load") {
        st.model = std::make_unique<Model>(kvc::engine::load_model(h.at("model").get<std::string>()));
        st.seqs.clear();
        st.options = {};
        st.fault.clear();
        st.fault_step = -1;
        st.logits = "all";
        const json options = h.value("options", json::object());
        std::string deviate = "none";
        for (const auto& [key, value] : options.items()) {
          if (key == "fault") {
            const std::string f = value;  // "crash@3"
            st.fault = f.substr(0, f.find('@'));
            st.fault_step = std::stoll(f.substr(f.find('@') + 1));
          } else if (key == "logits") {
            st.logits = value.is_string() ? value.get<std::string>() : "";
            if (st.logits != "all" && st.logits != "last" && st.logits != "none" && st.logits != "logprobs" &&
                st.logits != "last-logprobs" && st.logits != "logprobs-as-logits" && st.logits != "first-repeated" &&
                st.logits != "shifted")
              throw std::invalid_argument(
                  "option \"logits\": " + value.dump() +
                  " (expected \"all\", \"last\", \"none\", \"logprobs\", \"last-logprobs\", \"logprobs-as-logits\", "
                  "\"first-repeated\" or \"shifted\")");
          } else if (key == "deviate") {
            // The engine's own deviation, one of the mutants' behaviours the suite is not told of: a
            // known deviation may excuse it (a mutant run never is).
            deviate = value.is_string() ? kvc::engine::canonical_mutant(value.get<std::string>()) : "";
          } else {
            throw std::invalid_argument("unknown option \"" + key + "\" (kvc-oracle-engine knows: fault, logits, deviate)");
          }
        }
        const std::string told = kvc::engine::canonical_mutant(h.value("mutant", "none"));
        const std::string mutant = told != "none" ? told : deviate;
        st.mutant = mutant;
        const bool model_mutant = mutant == "rope_all_rotary" || mutant == "shared_kv_full" ||
                                  mutant == "window_on_every_layer" || mutant == "full_attention_capped";
        // The mutants: a window or chunk one too large or small or none (window_off_by_one+1, window_off_by_one-1, full_attention_on_sliding:
        // the same on chunked layers), a config read wrong (the model's description edited, as the diagnoses read it),
        // a logit glitch at one position, or a serving operation done wrong (below, per operation).
        const kvc::engine::ModelConfig& cfg = st.model->config;
        kvc::engine::OracleOptions& o = st.options;
        o.windows = cfg.windows;
        o.chunks = cfg.chunks.empty() ? std::vector<int64_t>(cfg.windows.size(), 0) : cfg.chunks;
        auto each = [](std::vector<int64_t>& v, auto f) {
          for (int64_t& x : v) x = f(x);
        };
        std::vector<std::string> operation_mutants = kvc::engine::operation_mutants();
        operation_mutants.insert(operation_mutants.end(), {"none", "position_glitch"});
        if (mutant == "window_off_by_one+1") {
          each(o.windows, [](int64_t w) { return w > 0 ? w + 1 : 0; });
          each(o.chunks, [](int64_t c) { return c > 0 ? c + 1 : 0; });
        } else if (mutant == "window_off_by_one-1") {
          each(o.windows, [](int64_t w) { return w > 1 ? w - 1 : w; });
          each(o.chunks, [](int64_t c) { return c > 1 ? c - 1 : c; });
        } else if (mutant == "full_attention_on_sliding") {
          each(o.windows, [](int64_t) { return int64_t{0}; });
          each(o.chunks, [](int64_t) { return int64_t{0}; });
        } else if (mutant == "chunk_boundaries_shifted") {
          o.chunk_shift = 1;  // chunks start at k*C + 1
        } else if (mutant == "chunked_as_sliding") {
          for (size_t l = 0; l < o.chunks.size(); ++l)
            if (o.chunks[l] > 0) o.windows[l] = o.chunks[l], o.chunks[l] = 0;
        } else if (mutant == "sinks_dropped") {
          st.model->config.sinks = false;
        } else if (mutant == "nope_inverted") {
          std::vector<bool> inverted;
          for (int64_t l = 0; l < cfg.layers; ++l) inverted.push_back(!cfg.rope(l));
          st.model->config.rope_layers = std::move(inverted);
        } else if (mutant == "layer_types_swapped") {
          // max_window_layers read the other way round: the full layers slide and the sliding ones do not.
          for (int64_t l = 0; l < cfg.layers; ++l) {
            const auto rule = cfg.attention(l);
            if (rule == kvc::engine::Attention::Sliding) o.windows[static_cast<size_t>(l)] = 0;
            if (rule == kvc::engine::Attention::Full) o.windows[static_cast<size_t>(l)] = cfg.sliding_window;
          }
        } else if (mutant == "softcap_dropped") {
          st.model->config.attn_softcap = 0;
        } else if (mutant == "kv_rounded") {
          o.kv_bf16 = true;
        } else if (mutant == "eviction_off_by_one") {
          // The first eviction is late: the query at position W still sees key 0.
          o.window_delta_position = cfg.local_span();
          o.window_delta = 1;
        } else if (model_mutant) {
          // A family feature read wrong, the window right (apply_model_mutant, below the switch).
        } else if (std::find(operation_mutants.begin(), operation_mutants.end(), mutant) == operation_mutants.end()) {
          throw std::invalid_argument("unknown mutant \"" + mutant + "\"");
        }
        if (model_mutant) {
          // A family feature read wrong, the window right; a model without the feature refuses.
          const std::string refusal = apply_model_mutant(mutant, st.model->config, st.options);
          if (!refusal.empty()) {
            send({{"status", "unsupported"}, {"error", "mutant " + mutant + ": " + refusal}});
            continue;
          }
        }
        if (st.fault == "load-error" && st.model->config.layers < st.fault_step) {
          // Shaped as a Python adapter's error: the exception type and where it was raised.
          send({{"status", "error"},
                {"error", "ValueError: a model of " + std::to_string(st.model->config.layers) +
                              (st.model->config.layers == 1 ? " layer" : " layers") + ", fewer than " +
                              std::to_string(st.fault_step) + " (oracle_engine_main.cpp:" + std::to_string(__LINE__) +
                              " in load)"}});
          continue;
        }
        send({{"status", "ok"}, {"vocab", st.model->config.vocab}});
      } else {
        // A plan step, read by the step table (an unknown op or a bad field is the error's message).
        kvc::engine::PlanStep::from_json(h, "", "request").visit(Serve{st});
      }
    } catch (const std::exception& e) {
      send({{"status", "error"}, {"error", e.what()}});
    }
  }
}
