#include "kvcgen/engine_campaign.h"

#include <algorithm>
#include <map>
#include <stdexcept>

#include "kvcgen/scenario.h"
#include "kvcgen/search.h"
#include "kvconform/seeds.h"
#include "kvconform/tolerance.h"

namespace kvc::engine {

using Kind = PlanStep::Kind;

Plan plan_from_draw(const std::string& model, const std::vector<std::tuple<int, int, int>>& draw, int64_t vocab, uint64_t seed,
                    bool rollback, bool reload, bool sequences) {
  Plan p{"campaign", model, {}};
  std::map<int64_t, int64_t> len;
  uint64_t salt = 0;
  for (const auto& [kind, size, seq_draw] : draw) {
    PlanStep s;
    s.seq = sequences ? seq_draw : 0;
    ++salt;
    // kinds 0-5 extend (size tokens), 6 a long extend (size x 16), 7 rollback (size), 8 reload,
    // 9 reset, 10 a deep rollback (size x 16: behind what a sliding cache keeps)
    if ((kind == 7 || kind == 10) && rollback && len[s.seq] > 0) {
      s.kind = Kind::Rollback;
      s.n = std::min<int64_t>(kind == 10 ? 16 * size : size, len[s.seq]);
      len[s.seq] -= s.n;
    } else if (kind == 8 && reload && len[s.seq] > 0) {
      s.kind = Kind::Reload;
    } else if (kind == 9) {
      s.kind = Kind::Reset;
      len.clear();
    } else {
      const int64_t n = kind == 6 ? 16 * size : size;
      s.tokens = tokens_for(seed, salt * 1000003 + static_cast<uint64_t>(size), n, vocab);
      len[s.seq] += n;
    }
    p.steps.push_back(std::move(s));
  }
  if (p.steps.empty() || std::all_of(p.steps.begin(), p.steps.end(), [](const PlanStep& s) { return s.kind != Kind::Extend; })) {
    PlanStep s;
    s.tokens = tokens_for(seed, 0, 1, vocab);
    p.steps.push_back(s);
  }
  return p;
}

namespace {

using Draw = std::vector<std::tuple<int, int, int>>;

// Plan i's raw draw: up to `size` (kind, size, seq) triples (plan_from_draw makes each a valid step).
Draw draw_plan(const search::CaseId& id) {
  Rng r{seeds::case_seed(id.seed, static_cast<uint64_t>(id.index))};
  Draw d(static_cast<size_t>(r.in(0, id.size + 1)));
  for (auto& [kind, size, seq] : d) {
    kind = static_cast<int>(r.in(0, 11));
    size = static_cast<int>(r.in(1, 41));
    seq = static_cast<int>(r.in(0, 2));
  }
  return d;
}

// Smaller draws: one step fewer, then a step made an extend, shorter, or on sequence 0.
std::vector<Draw> simplifications(const Draw& d) {
  std::vector<Draw> out;
  for (size_t i = d.size(); i-- > 0;) {
    Draw s = d;
    s.erase(s.begin() + static_cast<long>(i));
    out.push_back(std::move(s));
  }
  for (size_t i = 0; i < d.size(); ++i) {
    const auto& [kind, size, seq] = d[i];
    if (kind != 0) {
      Draw s = d;
      std::get<0>(s[i]) = 0;
      out.push_back(std::move(s));
    }
    if (size > 1) {
      Draw s = d;
      std::get<1>(s[i]) = 1;
      out.push_back(s);
      std::get<1>(s[i]) = size / 2 > 1 ? size / 2 : 1;
      if (size / 2 > 1) out.push_back(std::move(s));
    }
    if (seq != 0) {
      Draw s = d;
      std::get<2>(s[i]) = 0;
      out.push_back(std::move(s));
    }
  }
  return out;
}

}  // namespace

CampaignOutcome run_campaign(EngineClient& engine, const Model& model, const std::string& model_dir, const CampaignOptions& o) {
  CampaignOutcome out;
  report::CaseResult& r = out.result;
  r.suite = "engine";
  r.name = model.config.name + "/campaign";
  r.backend = engine.spec().name;
  r.dtype = "float32";
  r.params = "seed=" + std::to_string(o.seed) + ",iterations=" + std::to_string(o.iterations);
  if (engine.spec().mutant != "none") r.params += ",mutant=" + engine.spec().mutant;
  r.policy = to_string(Policy::SameDtypeReference);
  if (Reply hello = engine.hello(); !hello.ok()) {
    r.status = report::Status::Fail;
    r.message = hello.message;
    return out;
  }
  const bool rollback = engine.supports("rollback"), reload = engine.supports("reload"), sequences = engine.supports("sequences");
  int passes = 0, skips = 0;
  double bound = 0;
  const auto check = [&](const Draw& draw, bool shrinking) -> std::optional<report::CaseResult> {
    const Plan plan = plan_from_draw(model.config.name, draw, model.config.vocab, o.seed, rollback, reload, sequences);
    report::CaseResult c;
    try {
      c = check_plan(engine, model, model_dir, plan, o.check);
    } catch (const std::exception& e) {  // a failure of this plan, not of the run
      c.status = report::Status::Fail;
      c.message = std::string("the check raised: ") + e.what();
    }
    bound = std::max(bound, c.bound);
    if (c.status == report::Status::Fail) return c;
    if (!shrinking) {
      ++passes;
      if (c.status == report::Status::Skipped) ++skips;
    }
    return std::nullopt;
  };
  const search::Budget budget{o.seed, o.iterations, o.max_size, o.reproduce};
  const auto found = search::run<Draw, report::CaseResult>(budget, draw_plan, check, simplifications,
                                                            [](const Draw&) { return true; });
  r.bound = bound;
  if (found.ok()) {
    r.status = skips == passes && passes > 0 ? report::Status::Skipped : report::Status::Pass;
    r.message = std::to_string(found.passed) + " random plans" + (skips ? ", " + std::to_string(skips) + " skipped" : "");
    return out;
  }
  r.status = report::Status::Fail;
  Plan shrunk = plan_from_draw(model.config.name, *found.failing, model.config.vocab, o.seed, rollback, reload, sequences);
  shrunk.name = "campaign-shrunk";
  r.message = "shrunk to " + std::to_string(shrunk.steps.size()) + " steps: " + found.failure->message;
  r.detail = found.failure->detail;
  r.bound = found.failure->bound;
  out.shrunk = std::move(shrunk);
  r.reproduce = "--reproduce '" + found.reproduce + "'";
  return out;
}

}  // namespace kvc::engine
