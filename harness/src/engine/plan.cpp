#include "kvconform/engine/plan.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

namespace kvc::engine {

using nlohmann::json;
using Kind = PlanStep::Kind;

const char* to_string(Kind k) {
  switch (k) {
    case Kind::Extend: return "extend";
    case Kind::Rollback: return "rollback";
    case Kind::Reload: return "reload";
    case Kind::Reset: return "reset";
    case Kind::Fork: return "fork";
    case Kind::Chunked: return "chunked";
    case Kind::Spec: return "spec";
    case Kind::Batch: return "batch";
    case Kind::Shift: return "shift";
  }
  return "?";
}

void apply_step(const PlanStep& s, Lengths& len) {
  switch (s.kind) {
    case Kind::Extend:
    case Kind::Chunked: len[s.seq] += static_cast<int64_t>(s.tokens.size()); break;
    case Kind::Spec: len[s.seq] += static_cast<int64_t>(s.tokens.size()) - s.n; break;
    case Kind::Rollback:
    case Kind::Shift: len[s.seq] -= s.n; break;
    case Kind::Fork: len[s.seq] = s.n; break;
    case Kind::Batch:
      for (const BatchItem& item : s.items) len[item.seq] += static_cast<int64_t>(item.tokens.size());
      break;
    case Kind::Reset: len.clear(); break;
    case Kind::Reload: break;
  }
}

std::vector<std::pair<int64_t, int64_t>> new_positions(const PlanStep& s, const Lengths& before) {
  std::vector<std::pair<int64_t, int64_t>> out;
  auto add = [&](int64_t seq, const std::vector<int32_t>& tokens) {
    const auto it = before.find(seq);
    const int64_t first = it == before.end() ? 0 : it->second;
    for (size_t k = 0; k < tokens.size(); ++k) out.emplace_back(seq, first + static_cast<int64_t>(k));
  };
  if (s.kind == Kind::Extend || s.kind == Kind::Chunked || s.kind == Kind::Spec) add(s.seq, s.tokens);
  if (s.kind == Kind::Batch)
    for (const BatchItem& item : s.items) add(item.seq, item.tokens);
  return out;
}

namespace {
std::string span(int64_t first, int64_t n) {
  return std::to_string(n) + (n == 1 ? " token at " + std::to_string(first)
                                     : " tokens at " + std::to_string(first) + ".." + std::to_string(first + n - 1));
}
int64_t length_of(const Lengths& len, int64_t seq) {
  const auto it = len.find(seq);
  return it == len.end() ? 0 : it->second;
}
}  // namespace

std::string describe(const PlanStep& s, const Lengths& len) {
  const std::string seq = "seq " + std::to_string(s.seq);
  const int64_t before = length_of(len, s.seq);
  const int64_t n = static_cast<int64_t>(s.tokens.size());
  switch (s.kind) {
    case Kind::Extend: return "extend " + seq + ": " + span(before, n);
    case Kind::Chunked: return "chunked extend " + seq + " in chunks of " + std::to_string(s.chunk) + ": " + span(before, n);
    case Kind::Spec:
      return "spec cycle " + seq + ": draft " + span(before, n) + ", reject " + std::to_string(s.n) + " (to " +
             std::to_string(before + n - s.n) + ")";
    case Kind::Rollback: return "rollback " + seq + " by " + std::to_string(s.n) + " (to " + std::to_string(before - s.n) + ")";
    case Kind::Reload: return "reload " + seq + " (" + std::to_string(before) + " tokens)";
    case Kind::Reset: return "reset";
    case Kind::Shift:
      return "shift " + seq + ": discard " + span(s.keep, s.n) + ", move " + std::to_string(before - s.keep - s.n) + " down (to " +
             std::to_string(before - s.n) + ")";
    case Kind::Fork:
      return "fork " + seq + " from the first " + std::to_string(s.n) + " of seq " + std::to_string(s.from) + "'s " +
             std::to_string(length_of(len, s.from)) + " tokens";
    case Kind::Batch: {
      std::string out = "batch of " + std::to_string(s.items.size()) + ":";
      for (size_t i = 0; i < s.items.size(); ++i)
        out += (i ? ", seq " : " seq ") + std::to_string(s.items[i].seq) + " " +
               span(length_of(len, s.items[i].seq), static_cast<int64_t>(s.items[i].tokens.size()));
      return out;
    }
  }
  return "?";
}

int64_t sequence_count(const Plan& p) {
  int64_t n = 1;
  for (const PlanStep& s : p.steps) {
    n = std::max(n, s.seq + 1);
    if (s.kind == Kind::Fork) n = std::max(n, s.from + 1);
    for (const BatchItem& item : s.items) n = std::max(n, item.seq + 1);
  }
  return n;
}

int64_t max_tokens(const Plan& p) {
  Lengths len;
  int64_t most = 0;
  for (const PlanStep& s : p.steps) {
    // A spec cycle holds its whole draft before it rejects part of it.
    if (s.kind == Kind::Spec) most = std::max(most, length_of(len, s.seq) + static_cast<int64_t>(s.tokens.size()));
    apply_step(s, len);
    for (const auto& [seq, l] : len) most = std::max(most, l);
  }
  return most;
}

bool uses(const Plan& p, Kind k) {
  return std::any_of(p.steps.begin(), p.steps.end(), [&](const PlanStep& s) { return s.kind == k; });
}

std::string optional_operation(Kind k) {
  return k == Kind::Extend || k == Kind::Reset ? "" : to_string(k);
}

std::string invalid_reason(const Plan& p, int64_t vocab) {
  Lengths len;
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const PlanStep& s = p.steps[i];
    const std::string at = "step " + std::to_string(i) + ": ";
    auto bad_tokens = [&](const std::vector<int32_t>& tokens) -> std::string {
      if (tokens.empty()) return std::string(to_string(s.kind)) + " without tokens";
      for (int32_t t : tokens)
        if (t < 0 || t >= vocab) return "token " + std::to_string(t) + " is outside the vocabulary of " + std::to_string(vocab);
      return "";
    };
    if (s.seq < 0) return at + "seq is negative";
    if (s.kind == Kind::Extend || s.kind == Kind::Chunked || s.kind == Kind::Spec)
      if (const std::string why = bad_tokens(s.tokens); !why.empty()) return at + why;
    if (s.kind == Kind::Chunked && s.chunk <= 0) return at + "chunk " + std::to_string(s.chunk) + " is not positive";
    if (s.kind == Kind::Spec && (s.n < 0 || s.n > static_cast<int64_t>(s.tokens.size())))
      return at + "spec rejects " + std::to_string(s.n) + " of a draft of " + std::to_string(s.tokens.size()) + " tokens";
    if (s.kind == Kind::Rollback && (s.n <= 0 || s.n > length_of(len, s.seq)))
      return at + "rollback by " + std::to_string(s.n) + " of a sequence of " + std::to_string(length_of(len, s.seq)) + " tokens";
    if (s.kind == Kind::Shift && (s.n <= 0 || s.keep < 0 || s.keep + s.n > length_of(len, s.seq)))
      return at + "shift discarding " + std::to_string(s.n) + " after " + std::to_string(s.keep) + " of a sequence of " +
             std::to_string(length_of(len, s.seq)) + " tokens";
    if (s.kind == Kind::Fork) {
      if (s.from < 0 || s.from == s.seq) return at + "fork from seq " + std::to_string(s.from) + " into seq " + std::to_string(s.seq);
      if (s.n < 0 || s.n > length_of(len, s.from))
        return at + "fork of the first " + std::to_string(s.n) + " tokens of a sequence of " + std::to_string(length_of(len, s.from));
    }
    if (s.kind == Kind::Batch) {
      if (s.items.empty()) return at + "batch without items";
      std::vector<int64_t> seen;
      for (const BatchItem& item : s.items) {
        if (item.seq < 0) return at + "seq is negative";
        if (std::find(seen.begin(), seen.end(), item.seq) != seen.end()) return at + "seq " + std::to_string(item.seq) + " twice in one batch";
        seen.push_back(item.seq);
        if (const std::string why = bad_tokens(item.tokens); !why.empty()) return at + why;
      }
    }
    apply_step(s, len);
  }
  return "";
}

json to_json(const Plan& p) {
  json steps = json::array();
  for (const PlanStep& s : p.steps) {
    json j = {{"op", to_string(s.kind)}};
    if (s.kind != Kind::Reset && s.kind != Kind::Batch) j["seq"] = s.seq;
    if (s.kind == Kind::Extend || s.kind == Kind::Chunked || s.kind == Kind::Spec) j["tokens"] = s.tokens;
    if (s.kind == Kind::Rollback || s.kind == Kind::Spec) j["n"] = s.n;
    if (s.kind == Kind::Chunked) j["chunk"] = s.chunk;
    if (s.kind == Kind::Fork) j["from"] = s.from, j["length"] = s.n;
    if (s.kind == Kind::Shift) j["keep"] = s.keep, j["discard"] = s.n;
    if (s.kind == Kind::Batch) {
      j["items"] = json::array();
      for (const BatchItem& item : s.items) j["items"].push_back({{"seq", item.seq}, {"tokens", item.tokens}});
    }
    steps.push_back(j);
  }
  return {{"format", "kvconform-engine-plan-v1"}, {"name", p.name}, {"model", p.model}, {"steps", steps}};
}

Plan plan_from_json(const json& j, const std::string& file) {
  auto bad = [&](const std::string& ptr, const std::string& why) { throw std::invalid_argument(file + ": " + ptr + ": " + why); };
  if (!j.is_object()) bad("", "a plan is a JSON object");
  if (j.value("format", "") != "kvconform-engine-plan-v1") bad("/format", "must be \"kvconform-engine-plan-v1\"");
  Plan p;
  if (!j.contains("model") || !j["model"].is_string() || j["model"].get<std::string>().empty()) bad("/model", "must name a model of the zoo");
  p.model = j["model"];
  p.name = j.value("name", "plan");
  if (!j.contains("steps") || !j["steps"].is_array() || j["steps"].empty()) bad("/steps", "must be a non-empty array");
  for (size_t i = 0; i < j["steps"].size(); ++i) {
    const json& s = j["steps"][i];
    const std::string ptr = "/steps/" + std::to_string(i);
    if (!s.is_object()) bad(ptr, "must be an object");
    PlanStep step;
    const std::string op = s.value("op", "");
    bool known = false;
    for (Kind k : {Kind::Extend, Kind::Rollback, Kind::Reload, Kind::Reset, Kind::Fork, Kind::Chunked, Kind::Spec, Kind::Batch, Kind::Shift})
      if (op == to_string(k)) step.kind = k, known = true;
    if (!known) bad(ptr + "/op", "\"" + op + "\" (expected extend, rollback, reload, reset, fork, chunked, spec, batch or shift)");
    auto seq_at = [&](const json& obj, const std::string& key, const std::string& at) {
      if (!obj[key].is_number_integer() || obj[key].get<int64_t>() < 0 || obj[key].get<int64_t>() > 15)
        bad(at + "/" + key, "must be an integer in [0, 15]");
      return obj[key].get<int64_t>();
    };
    auto tokens_at = [&](const json& obj, const std::string& at) {
      if (!obj.contains("tokens") || !obj["tokens"].is_array() || obj["tokens"].empty()) bad(at + "/tokens", "must be a non-empty array of token ids");
      std::vector<int32_t> out;
      for (size_t k = 0; k < obj["tokens"].size(); ++k) {
        const json& t = obj["tokens"][k];
        if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > (1 << 24)) bad(at + "/tokens/" + std::to_string(k), "must be a token id");
        out.push_back(t.get<int32_t>());
      }
      return out;
    };
    auto int_at = [&](const std::string& key, int64_t least, const std::string& what) {
      if (!s.contains(key) || !s[key].is_number_integer() || s[key].get<int64_t>() < least) bad(ptr + "/" + key, what);
      return s[key].get<int64_t>();
    };
    if (s.contains("seq")) step.seq = seq_at(s, "seq", ptr);
    if (step.kind == Kind::Extend || step.kind == Kind::Chunked || step.kind == Kind::Spec) step.tokens = tokens_at(s, ptr);
    if (step.kind == Kind::Rollback) step.n = int_at("n", 1, "must be a positive integer");
    if (step.kind == Kind::Spec) {
      step.n = int_at("n", 0, "must be the number of rejected draft tokens (an integer >= 0)");
      if (step.n > static_cast<int64_t>(step.tokens.size())) bad(ptr + "/n", "rejects more than the draft's " + std::to_string(step.tokens.size()) + " tokens");
    }
    if (step.kind == Kind::Chunked) step.chunk = int_at("chunk", 1, "must be a positive integer (tokens per chunk)");
    if (step.kind == Kind::Fork) {
      if (!s.contains("from")) bad(ptr + "/from", "must name the source sequence");
      step.from = seq_at(s, "from", ptr);
      if (step.from == step.seq) bad(ptr + "/from", "must differ from seq");
      step.n = int_at("length", 0, "must be the length of the source's prefix (an integer >= 0)");
    }
    if (step.kind == Kind::Shift) {
      step.keep = int_at("keep", 0, "must be the number of positions kept before the discarded ones (an integer >= 0)");
      step.n = int_at("discard", 1, "must be the number of positions discarded (a positive integer)");
    }
    if (step.kind == Kind::Batch) {
      if (!s.contains("items") || !s["items"].is_array() || s["items"].empty()) bad(ptr + "/items", "must be a non-empty array of {seq, tokens}");
      for (size_t k = 0; k < s["items"].size(); ++k) {
        const json& item = s["items"][k];
        const std::string at = ptr + "/items/" + std::to_string(k);
        if (!item.is_object() || !item.contains("seq")) bad(at, "must be an object {seq, tokens}");
        BatchItem b{seq_at(item, "seq", at), tokens_at(item, at)};
        for (const BatchItem& other : step.items)
          if (other.seq == b.seq) bad(at + "/seq", "sequence " + std::to_string(b.seq) + " is already in this batch");
        step.items.push_back(std::move(b));
      }
    }
    p.steps.push_back(std::move(step));
  }
  return p;
}

Plan load_plan(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(path + ": cannot be read");
  std::stringstream s;
  s << in.rdbuf();
  const json j = json::parse(s.str(), nullptr, false);
  if (j.is_discarded()) throw std::invalid_argument(path + ": not valid JSON");
  return plan_from_json(j, path);
}

std::vector<int32_t> tokens_for(uint64_t seed, uint64_t salt, int64_t count, int64_t vocab) {
  // splitmix64: a fixed, platform-independent stream.
  uint64_t x = seed * 0x9E3779B97F4A7C15ull ^ (salt + 0x632BE59BD9B4E019ull);
  std::vector<int32_t> out;
  for (int64_t i = 0; i < count; ++i) {
    uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    out.push_back(static_cast<int32_t>(1 + z % static_cast<uint64_t>(vocab - 1)));
  }
  return out;
}

std::vector<Plan> fixed_plans(const std::string& model, int64_t W, int64_t vocab) {
  std::vector<Plan> plans;
  uint64_t salt = 0;
  auto plan = [&](const std::string& name, std::vector<PlanStep> steps) { plans.push_back({name, model, std::move(steps)}); };
  auto ext = [&](int64_t n, int64_t seq = 0) {
    PlanStep s;
    s.seq = seq;
    s.tokens = tokens_for(static_cast<uint64_t>(W), ++salt, n, vocab);
    return s;
  };
  auto roll = [](int64_t n, int64_t seq = 0) {
    PlanStep s;
    s.kind = Kind::Rollback;
    s.seq = seq;
    s.n = n;
    return s;
  };
  auto reload = [](int64_t seq = 0) {
    PlanStep s;
    s.kind = Kind::Reload;
    s.seq = seq;
    return s;
  };
  auto decodes = [&](std::vector<PlanStep> s, int64_t n) {
    for (int64_t i = 0; i < n; ++i) s.push_back(ext(1));
    return s;
  };
  const int64_t w = std::max<int64_t>(W, 1);
  if (w > 1) plan("prefill_lt_w", decodes({ext(w - 1)}, 2));
  plan("prefill_eq_w", decodes({ext(w)}, 2));
  plan("prefill_gt_w", decodes({ext(2 * w + 1)}, 2));
  plan("decode_across_w", decodes({ext(1)}, 2 * w + 2));
  plan("extend_after_full", {ext(w), ext(3), ext(w + 2), ext(1), ext(2 * w + 1), ext(1)});
  // Past llama.cpp's 256-cell padding of its SWA cache and any ring of a few windows: >= 600 tokens,
  // mostly in multi-token extends (cheap for every engine), with decodes between them.
  {
    std::vector<PlanStep> s{ext(40)};
    for (int i = 0; i < 18; ++i) {
      s.push_back(ext(1 + (i * 7) % 29));
      s.push_back(ext(1));
      s.push_back(ext(w + i % 3));
    }
    int64_t total = 0;
    for (const PlanStep& x : s) total += static_cast<int64_t>(x.tokens.size());
    while (total < 620) {
      s.push_back(ext(31));
      total += 31;
    }
    s.push_back(ext(1));
    plan("long_run", s);
  }
  // Past 1024 keys on every layer: a full layer whose cache silently keeps only its last 1024 keys
  // (sized like a window it does not have) answers wrong from position 1024 on; long_run stops short.
  plan("past_1024", {ext(1024 + w + 1), ext(1), ext(64)});
  plan("rollback", {ext(2 * w + 3), roll(std::min<int64_t>(w, 2 * w + 2)), ext(3), ext(1)});
  plan("rollback_one", decodes({ext(2 * w + 3), roll(1)}, 2));
  plan("reload", {ext(2 * w + 3), reload(), ext(1), ext(4)});
  {
    std::vector<PlanStep> s{ext(300), ext(1)};
    s.push_back(roll(3));
    s.push_back(ext(2));
    s.push_back(ext(1));
    plan("rollback_after_long_run", s);
  }
  plan("reload_after_long_run", {ext(300), ext(1), reload(), ext(1), ext(3)});
  // Back far behind the window after the cache has slid: an engine that evicted those keys must
  // refuse, not answer from a cache that no longer holds the window (speculative decoding, prefix reuse).
  plan("deep_rollback_after_long_run", {ext(300), roll(280), ext(2), ext(1)});
  {
    PlanStep reset;
    reset.kind = Kind::Reset;
    plan("reset", {ext(w + 2), reset, ext(3), ext(1)});
  }
  plan("two_sequences", {ext(w + 1, 0), ext(2, 1), ext(1, 0), ext(w + 3, 1), ext(2, 0), ext(1, 1), ext(1, 0)});

  // Prefix caching: sequence 1 starts from a prefix of sequence 0 (past two blocks and the window)
  // diverging at, just before and just after a window edge and a block edge, and inside the last
  // block; then both go on, so a fork that shares what it should copy is caught on either side.
  {
    const int64_t source = 2 * kBlock + 5 + 2 * w;
    auto fork = [&](int64_t length) {
      PlanStep s;
      s.kind = Kind::Fork;
      s.seq = 1;
      s.from = 0;
      s.n = length;
      return s;
    };
    const int64_t last_block = (source / kBlock) * kBlock;
    for (auto [name, length] : {std::pair{"fork_lt_w", w - 1}, {"fork_eq_w", w}, {"fork_gt_w", w + 1}, {"fork_lt_block", kBlock - 1},
                                {"fork_eq_block", kBlock}, {"fork_gt_block", kBlock + 1},
                                {"fork_in_last_block", last_block + std::max<int64_t>(1, (source - last_block) / 2)}})
      plan(name, {ext(source), fork(length), ext(w + 2, 1), ext(2, 0), ext(1, 1), ext(1, 0)});
  }
  // Chunked prefill: one extend the engine processes in chunks of c, through its own chunking knob;
  // a count that is a multiple of c past two windows, then again once the window is full. The ragged
  // plan's counts leave a partial last chunk.
  {
    auto chunked = [&](int64_t n, int64_t c) {
      PlanStep s = ext(n);
      s.kind = Kind::Chunked;
      s.chunk = c;
      return s;
    };
    auto multiple = [&](int64_t c) { return c * ((2 * w + 2 + c - 1) / c); };
    std::vector<std::pair<std::string, int64_t>> sizes{{"chunked_1", 1}};
    if (w > 2) sizes.push_back({"chunked_lt_w", w - 1});
    if (w > 1) sizes.push_back({"chunked_eq_w", w});
    sizes.insert(sizes.end(), {{"chunked_gt_w", w + 1}, {"chunked_2w", 2 * w}, {"chunked_2w_plus_1", 2 * w + 1}});
    for (const auto& [name, c] : sizes) plan(name, {chunked(multiple(c), c), ext(1), chunked(multiple(c), c), ext(1)});
    plan("chunked_ragged", {chunked(multiple(w) + w / 2 + 1, w), ext(1), chunked(2 * w + 3, w + 1), ext(1)});
  }
  // Speculative decoding: cycles of a draft of k tokens fed in one step and r of them rejected, k and
  // r around the window, once the window is full.
  {
    auto spec = [&](int64_t k, int64_t r) {
      PlanStep s = ext(k);
      s.kind = Kind::Spec;
      s.n = std::min(r, k);
      return s;
    };
    plan("spec_cycles", {ext(2 * w + 1), spec(w, w - 1), spec(w + 1, w + 1), spec(std::max<int64_t>(w - 1, 1), 1), spec(2 * w, w),
                         spec(w + 1, 0), spec(1, 1), ext(1)});
  }
  // Continuous batching: sequences of different lengths advanced in one engine call, one of them
  // past its window while the others are not.
  {
    auto batch = [&](std::vector<std::pair<int64_t, int64_t>> parts) {
      PlanStep s;
      s.kind = Kind::Batch;
      for (auto [seq, n] : parts) s.items.push_back({seq, ext(n, seq).tokens});
      return s;
    };
    plan("batch", {batch({{0, 2 * w + 1}, {1, 2}}), batch({{0, 1}, {1, w + 1}}), batch({{0, 3}, {1, 1}, {2, w}}), batch({{2, 1}, {1, 1}}),
                   ext(1, 0)});
  }
  // Context shift (llama.cpp): positions [keep, keep + n) discarded, the later ones moved down with
  // their keys re-rotated; discarding across the window edge after the first token (llama.cpp's
  // n_keep), discarding from the start, twice in a row once the window has slid, and after a long run.
  {
    auto shift = [](int64_t keep, int64_t n) {
      PlanStep s;
      s.kind = Kind::Shift;
      s.keep = keep;
      s.n = n;
      return s;
    };
    plan("shift_across_w", {ext(2 * w + 3), shift(1, w + 1), ext(1), ext(w), ext(1)});
    plan("shift_from_start", {ext(w + 3), shift(0, std::max<int64_t>(1, w - 1)), ext(2), ext(1)});
    plan("shift_twice", {ext(3 * w + 2), shift(1, w), ext(1), shift(2, w + 1), ext(w + 1), ext(1)});
    // Past a 256-cell SWA cache: llama.cpp shifts only where its SWA cache is as large as the full one.
    plan("shift_after_long_run", {ext(300), ext(1), shift(1, 150), ext(1), ext(3)});
  }
  return plans;
}

}  // namespace kvc::engine
