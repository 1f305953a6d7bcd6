#include "kvcgen/engine_campaign.h"

#include <rapidcheck.h>

#include <algorithm>
#include <map>

#include "kvcgen/rc_check.h"
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
  std::optional<report::CaseResult> last_failure;
  std::optional<Plan> last_plan;
  int passes = 0, skips = 0;
  double bound = 0;
  rc_check::Params params;
  params.id = report::case_id(r);
  params.description = "random plans on " + model.config.name;
  params.seed = o.seed;
  params.iterations = o.iterations;
  params.max_size = o.max_size;
  params.reproduce = o.reproduce;
  const rc_check::Result res = rc_check::check(params, [&] {
    const auto draw = *rc::gen::container<std::vector<std::tuple<int, int, int>>>(
        rc::gen::tuple(rc::gen::inRange(0, 11), rc::gen::inRange(1, 41), rc::gen::inRange(0, 2)));
    Plan plan = plan_from_draw(model.config.name, draw, model.config.vocab, o.seed, rollback, reload, sequences);
    report::CaseResult c = check_plan(engine, model, model_dir, plan, o.check);
    bound = std::max(bound, c.bound);
    if (c.status == report::Status::Skipped) ++skips;
    if (c.status != report::Status::Fail) {
      ++passes;
      return;
    }
    last_failure = c;
    last_plan = plan;
    RC_FAIL(c.message);
  });
  r.bound = bound;
  if (res.ok) {
    r.status = skips == passes && passes > 0 ? report::Status::Skipped : report::Status::Pass;
    r.message = std::to_string(res.passed) + " random plans" + (skips ? ", " + std::to_string(skips) + " skipped" : "");
    return out;
  }
  r.status = report::Status::Fail;
  // The last failing run is the shrunk one: RapidCheck re-runs the minimal case last.
  if (last_failure && last_plan) {
    last_plan->name = "campaign-shrunk";
    out.shrunk = last_plan;
    r.message = "shrunk to " + std::to_string(last_plan->steps.size()) + " steps: " + last_failure->message;
    r.detail = last_failure->detail;
    r.bound = last_failure->bound;
  } else {
    r.message = res.failure;
  }
  r.reproduce = "--reproduce '" + res.reproduce + "'";
  return out;
}

}  // namespace kvc::engine
