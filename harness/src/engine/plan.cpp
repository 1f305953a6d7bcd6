#include "kvconform/engine/plan.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

namespace kvc::engine {

using nlohmann::json;
int64_t sequence_count(const Plan& p) {
  int64_t n = 1;
  for (const PlanStep& s : p.steps)
    for (int64_t seq : s.sequences()) n = std::max(n, seq + 1);
  return n;
}

int64_t max_tokens(const Plan& p) {
  Lengths len;
  int64_t most = 0;
  for (const PlanStep& s : p.steps) {
    most = std::max(most, s.peak(len));
    s.apply(len);
  }
  return most;
}

std::vector<std::string> operations_used(const Plan& p) {
  std::vector<std::string> out;
  for_each_row<StepKinds>([&](auto row) {
    using S = decltype(row);
    if (std::string(S::operation).empty() || !uses<S>(p)) return false;
    out.push_back(S::operation);
    return false;
  });
  return out;
}

std::string invalid_reason(const Plan& p, int64_t vocab) {
  Lengths len;
  for (size_t i = 0; i < p.steps.size(); ++i) {
    if (const std::string why = p.steps[i].pre(len, vocab); !why.empty()) return "step " + std::to_string(i) + ": " + why;
    p.steps[i].apply(len);
  }
  return "";
}

json to_json(const Plan& p) {
  json steps = json::array();
  for (const PlanStep& s : p.steps) steps.push_back(s.to_json());
  return {{"format", "kvconform-engine-plan-v1"}, {"name", p.name}, {"model", p.model}, {"steps", steps}};
}

Plan plan_from_json(const json& j, const std::string& file) {
  auto bad = [&](const std::string& ptr, const std::string& why) { throw std::invalid_argument(file + ": " + ptr + ": " + why); };
  if (!j.is_object()) bad("", "a plan is a JSON object");
  if (j.value("format", "") != "kvconform-engine-plan-v1") bad("/format", "must be \"kvconform-engine-plan-v1\"");
  Plan p;
  if (!j.contains("model") || !j["model"].is_string() || j["model"].get<std::string>().empty())
    bad("/model", "must name a model of the zoo");
  p.model = j["model"];
  p.name = j.value("name", "plan");
  if (!j.contains("steps") || !j["steps"].is_array() || j["steps"].empty()) bad("/steps", "must be a non-empty array");
  for (size_t i = 0; i < j["steps"].size(); ++i) {
    const json& s = j["steps"][i];
    const std::string ptr = "/steps/" + std::to_string(i);
    if (!s.is_object()) bad(ptr, "must be an object");
    p.steps.push_back(PlanStep::from_json(s, ptr, file));
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
  auto tokens = [&](int64_t n) { return tokens_for(static_cast<uint64_t>(W), ++salt, n, vocab); };
  auto ext = [&](int64_t n, int64_t seq = 0) { return Extend{seq, tokens(n)}; };
  auto roll = [](int64_t n, int64_t seq = 0) { return Rollback{seq, n}; };
  auto reload = [](int64_t seq = 0) { return Reload{seq}; };
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
    for (const PlanStep& x : s) total += static_cast<int64_t>(x.positions({}).size());
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
  plan("reset", {ext(w + 2), Reset{}, ext(3), ext(1)});
  plan("two_sequences", {ext(w + 1, 0), ext(2, 1), ext(1, 0), ext(w + 3, 1), ext(2, 0), ext(1, 1), ext(1, 0)});

  // Prefix caching: sequence 1 starts from a prefix of sequence 0 (past two blocks and the window)
  // diverging at, just before and just after a window edge and a block edge, and inside the last
  // block; then both go on, so a fork that shares what it should copy is caught on either side.
  {
    const int64_t source = 2 * kBlock + 5 + 2 * w;
    auto fork = [&](int64_t length) { return Fork{1, 0, length}; };
    const int64_t last_block = (source / kBlock) * kBlock;
    for (auto [name, length] : {std::pair{"fork_lt_w", w - 1},
                                {"fork_eq_w", w},
                                {"fork_gt_w", w + 1},
                                {"fork_lt_block", kBlock - 1},
                                {"fork_eq_block", kBlock},
                                {"fork_gt_block", kBlock + 1},
                                {"fork_in_last_block", last_block + std::max<int64_t>(1, (source - last_block) / 2)}})
      plan(name, {ext(source), fork(length), ext(w + 2, 1), ext(2, 0), ext(1, 1), ext(1, 0)});
  }
  // Chunked prefill: one extend the engine processes in chunks of c, through its own chunking knob;
  // a count that is a multiple of c past two windows, then again once the window is full. The ragged
  // plan's counts leave a partial last chunk.
  {
    auto chunked = [&](int64_t n, int64_t c) { return Chunked{0, tokens(n), c}; };
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
    auto spec = [&](int64_t k, int64_t r) { return Spec{0, tokens(k), std::min(r, k)}; };
    plan("spec_cycles", {ext(2 * w + 1), spec(w, w - 1), spec(w + 1, w + 1), spec(std::max<int64_t>(w - 1, 1), 1), spec(2 * w, w),
                         spec(w + 1, 0), spec(1, 1), ext(1)});
  }
  // Continuous batching: sequences of different lengths advanced in one engine call, one of them
  // past its window while the others are not.
  {
    auto batch = [&](std::vector<std::pair<int64_t, int64_t>> parts) {
      Batch s;
      for (auto [seq, n] : parts) s.items.push_back({seq, tokens(n)});
      return s;
    };
    plan("batch", {batch({{0, 2 * w + 1}, {1, 2}}), batch({{0, 1}, {1, w + 1}}), batch({{0, 3}, {1, 1}, {2, w}}),
                   batch({{2, 1}, {1, 1}}), ext(1, 0)});
  }
  // Context shift (llama.cpp): positions [keep, keep + n) discarded, the later ones moved down with
  // their keys re-rotated; discarding across the window edge after the first token (llama.cpp's
  // n_keep), discarding from the start, twice in a row once the window has slid, and after a long run.
  {
    auto shift = [](int64_t keep, int64_t discard) { return Shift{0, keep, discard}; };
    plan("shift_across_w", {ext(2 * w + 3), shift(1, w + 1), ext(1), ext(w), ext(1)});
    plan("shift_from_start", {ext(w + 3), shift(0, std::max<int64_t>(1, w - 1)), ext(2), ext(1)});
    plan("shift_twice", {ext(3 * w + 2), shift(1, w), ext(1), shift(2, w + 1), ext(w + 1), ext(1)});
    // Past a 256-cell SWA cache: llama.cpp shifts only where its SWA cache is as large as the full one.
    plan("shift_after_long_run", {ext(300), ext(1), shift(1, 150), ext(1), ext(3)});
  }
  // Preemption and recompute: the sequence's cache given back once its sliding blocks have wrapped
  // (past two windows; past llama.cpp's 256-cell SWA padding) and recomputed from its tokens, then
  // decodes across the window; and one of two sequences preempted while the other goes on.
  plan("preempt_after_wrap", {ext(2 * w + 3), Preempt{0}, ext(1), ext(w), ext(1)});
  plan("preempt_after_long_run", {ext(300), ext(1), Preempt{0}, ext(1), ext(3)});
  plan("preempt_one_of_two", {ext(w + 2, 0), ext(2 * w + 1, 1), Preempt{1}, ext(1, 0), ext(1, 1), ext(w, 1), ext(1, 0)});
  // Multi-turn requests (a chat's next turn keeps a prefix and renders the rest anew): the last token
  // replaced once the window has slid, back behind the window (where a server restores a checkpoint
  // of its sliding cache, or evaluates the prompt again), and turn after turn.
  auto turn = [&](int64_t keep, int64_t n) { return Turn{0, keep, tokens(n)}; };
  plan("turn_last_replaced", {ext(2 * w + 3), turn(2 * w + 2, w), ext(1), ext(1)});
  plan("turn_behind_w", {ext(2 * w + 3), turn(w + 1, w + 2), ext(1), ext(1)});
  plan("turn_after_turn", {ext(w + 3), ext(4), turn(w + 5, w + 2), ext(3), turn(2 * w + 8, w), ext(1)});
  return plans;
}

}  // namespace kvc::engine
