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
  }
  return "?";
}

std::string describe(const PlanStep& s, int64_t before) {
  const std::string seq = "seq " + std::to_string(s.seq);
  switch (s.kind) {
    case Kind::Extend: {
      const int64_t n = static_cast<int64_t>(s.tokens.size());
      return "extend " + seq + ": " + std::to_string(n) + (n == 1 ? " token at " + std::to_string(before)
                                                                  : " tokens at " + std::to_string(before) + ".." + std::to_string(before + n - 1));
    }
    case Kind::Rollback: return "rollback " + seq + " by " + std::to_string(s.n) + " (to " + std::to_string(before - s.n) + ")";
    case Kind::Reload: return "reload " + seq + " (" + std::to_string(before) + " tokens)";
    case Kind::Reset: return "reset";
  }
  return "?";
}

int64_t sequence_count(const Plan& p) {
  int64_t n = 1;
  for (const PlanStep& s : p.steps) n = std::max(n, s.seq + 1);
  return n;
}

int64_t max_tokens(const Plan& p) {
  std::map<int64_t, int64_t> len;
  int64_t most = 0;
  for (const PlanStep& s : p.steps) {
    if (s.kind == Kind::Extend) most = std::max(most, len[s.seq] += static_cast<int64_t>(s.tokens.size()));
    if (s.kind == Kind::Rollback) len[s.seq] -= s.n;
    if (s.kind == Kind::Reset) len.clear();
  }
  return most;
}

bool uses(const Plan& p, Kind k) {
  return std::any_of(p.steps.begin(), p.steps.end(), [&](const PlanStep& s) { return s.kind == k; });
}

std::string optional_operation(Kind k) {
  return k == Kind::Rollback ? "rollback" : k == Kind::Reload ? "reload" : "";
}

std::string invalid_reason(const Plan& p, int64_t vocab) {
  std::map<int64_t, int64_t> len;
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const PlanStep& s = p.steps[i];
    const std::string at = "step " + std::to_string(i) + ": ";
    if (s.seq < 0) return at + "seq is negative";
    if (s.kind == Kind::Extend) {
      if (s.tokens.empty()) return at + "extend without tokens";
      for (int32_t t : s.tokens)
        if (t < 0 || t >= vocab) return at + "token " + std::to_string(t) + " is outside the vocabulary of " + std::to_string(vocab);
      len[s.seq] += static_cast<int64_t>(s.tokens.size());
    } else if (s.kind == Kind::Rollback) {
      if (s.n <= 0 || s.n > len[s.seq])
        return at + "rollback by " + std::to_string(s.n) + " of a sequence of " + std::to_string(len[s.seq]) + " tokens";
      len[s.seq] -= s.n;
    } else if (s.kind == Kind::Reset) {
      len.clear();
    }
  }
  return "";
}

json to_json(const Plan& p) {
  json steps = json::array();
  for (const PlanStep& s : p.steps) {
    json j = {{"op", to_string(s.kind)}};
    if (s.kind != Kind::Reset) j["seq"] = s.seq;
    if (s.kind == Kind::Extend) j["tokens"] = s.tokens;
    if (s.kind == Kind::Rollback) j["n"] = s.n;
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
    if (op == "extend") step.kind = Kind::Extend;
    else if (op == "rollback") step.kind = Kind::Rollback;
    else if (op == "reload") step.kind = Kind::Reload;
    else if (op == "reset") step.kind = Kind::Reset;
    else bad(ptr + "/op", "\"" + op + "\" (expected extend, rollback, reload or reset)");
    if (s.contains("seq")) {
      if (!s["seq"].is_number_integer() || s["seq"].get<int64_t>() < 0 || s["seq"].get<int64_t>() > 15)
        bad(ptr + "/seq", "must be an integer in [0, 15]");
      step.seq = s["seq"];
    }
    if (step.kind == Kind::Extend) {
      if (!s.contains("tokens") || !s["tokens"].is_array() || s["tokens"].empty()) bad(ptr + "/tokens", "must be a non-empty array of token ids");
      for (const json& t : s["tokens"]) {
        if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > (1 << 24)) bad(ptr + "/tokens", "must hold token ids");
        step.tokens.push_back(t.get<int32_t>());
      }
    }
    if (step.kind == Kind::Rollback) {
      if (!s.contains("n") || !s["n"].is_number_integer() || s["n"].get<int64_t>() <= 0) bad(ptr + "/n", "must be a positive integer");
      step.n = s["n"];
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
  return plans;
}

}  // namespace kvc::engine
