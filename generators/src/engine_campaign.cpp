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

Plan plan_from_draw(const std::string& model, const std::vector<DrawnStep>& draw, int64_t vocab, int64_t window, uint64_t seed,
                    const std::vector<std::string>& operations) {
  auto has = [&](const char* op) { return std::find(operations.begin(), operations.end(), op) != operations.end(); };
  const bool rollback = has("rollback"), reload = has("reload"), sequences = has("sequences");
  const int64_t w = std::max<int64_t>(window, 1);
  Plan p{"campaign", model, {}};
  Lengths len;
  uint64_t salt = 0;
  auto tokens = [&](int64_t n, int size) { return tokens_for(seed, salt * 1000003 + static_cast<uint64_t>(size), n, vocab); };
  for (const DrawnStep& d : draw) {
    PlanStep s;
    s.seq = sequences ? d.seq : 0;
    ++salt;
    const int64_t size = d.size, v = d.variant % 8, other = 1 - s.seq;
    // kinds 0-5 extend (size tokens), 6 a long extend (size x 16), 7 rollback (size), 8 reload,
    // 9 reset, 10 a deep rollback (size x 16: behind what a sliding cache keeps), 11 fork (from the
    // other sequence, at the variant's edge), 12 chunked (size tokens, the variant's chunk), 13 spec
    // (a draft of size tokens, the variant's rejections), 14 batch (size tokens and the variant's
    // count on the other sequence)
    // A deep rollback's upper variants are a context shift where the engine lists one (the draw
    // stream stays the same for every engine): discard size tokens after the variant's keep.
    if (d.kind == 10 && v >= 4 && has("shift") && len[s.seq] > 1) {
      const int64_t L = len[s.seq];
      const int64_t keep[] = {1, w - 1, w, 0};
      s.kind = Kind::Shift;
      s.keep = std::clamp<int64_t>(keep[v - 4], 0, L - 1);
      s.n = std::clamp<int64_t>(size, 1, L - s.keep);
    } else if ((d.kind == 7 || d.kind == 10) && rollback && len[s.seq] > 0) {
      s.kind = Kind::Rollback;
      s.n = std::min<int64_t>(d.kind == 10 ? 16 * size : size, len[s.seq]);
    } else if (d.kind == 8 && reload && len[s.seq] > 0) {
      s.kind = Kind::Reload;
    } else if (d.kind == 9) {
      s.kind = Kind::Reset;
    } else if (d.kind == 11 && has("fork") && sequences && len[other] > 0) {
      const int64_t L = len[other], last_block = ((L - 1) / kBlock) * kBlock;
      const int64_t at[] = {L, w - 1, w, w + 1, kBlock - 1, kBlock, kBlock + 1, last_block + (L - last_block + 1) / 2};
      s.kind = Kind::Fork;
      s.from = other;
      s.n = std::clamp<int64_t>(at[v], 1, L);
    } else if (d.kind == 12 && has("chunked")) {
      const int64_t chunk[] = {w, 1, w - 1, w + 1, 2 * w, 2 * w + 1, 3, w + 2};
      s.kind = Kind::Chunked;
      s.tokens = tokens(size, d.size);
      s.chunk = std::max<int64_t>(1, chunk[v]);
    } else if (d.kind == 13 && has("spec")) {
      const int64_t rejected[] = {1, 0, w - 1, w, w + 1, size, size - 1, 2 * w};
      s.kind = Kind::Spec;
      s.tokens = tokens(size, d.size);
      s.n = std::clamp<int64_t>(rejected[v], 0, size);
    } else if (d.kind == 14 && has("batch") && sequences) {
      const int64_t count[] = {1, 2, w - 1, w, w + 1, 2 * w + 1, 3, 5};
      s.kind = Kind::Batch;
      s.items.push_back({s.seq, tokens(size, d.size)});
      s.items.push_back({other, tokens_for(seed ^ 0x5bd1e995u, salt, std::max<int64_t>(1, count[v]), vocab)});
    } else {
      s.tokens = tokens(d.kind == 6 ? 16 * size : size, d.size);
    }
    apply_step(s, len);
    p.steps.push_back(std::move(s));
  }
  if (std::none_of(p.steps.begin(), p.steps.end(), [](const PlanStep& s) { return !new_positions(s, {}).empty(); })) {
    PlanStep s;
    s.tokens = tokens_for(seed, 0, 1, vocab);
    p.steps.push_back(s);
  }
  return p;
}

namespace {

using Draw = std::vector<DrawnStep>;

// Plan i's raw draw: up to `size` steps (plan_from_draw makes each a valid step).
Draw draw_plan(const search::CaseId& id) {
  Rng r{seeds::case_seed(id.seed, static_cast<uint64_t>(id.index))};
  Draw d(static_cast<size_t>(r.in(0, id.size + 1)));
  for (DrawnStep& s : d) {
    s.kind = static_cast<int>(r.in(0, 15));
    s.size = static_cast<int>(r.in(1, 41));
    s.seq = static_cast<int>(r.in(0, 2));
    s.variant = static_cast<int>(r.in(0, 8));
  }
  return d;
}

// Smaller draws: one step fewer, then a step made an extend, shorter, on sequence 0, or its
// operation's plainest variant (a fork of the whole source, chunks of W, one rejected draft token,
// one token on the batch's other sequence).
std::vector<Draw> simplifications(const Draw& d) {
  std::vector<Draw> out;
  for (size_t i = d.size(); i-- > 0;) {
    Draw s = d;
    s.erase(s.begin() + static_cast<long>(i));
    out.push_back(std::move(s));
  }
  for (size_t i = 0; i < d.size(); ++i) {
    const DrawnStep& x = d[i];
    auto with = [&](auto change) {
      Draw s = d;
      change(s[i]);
      out.push_back(std::move(s));
    };
    if (x.kind != 0) with([](DrawnStep& s) { s.kind = 0; });
    if (x.size > 1) with([](DrawnStep& s) { s.size = 1; });
    if (x.size / 2 > 1) with([](DrawnStep& s) { s.size /= 2; });
    if (x.seq != 0) with([](DrawnStep& s) { s.seq = 0; });
    if (x.variant != 0) with([](DrawnStep& s) { s.variant = 0; });
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
  std::vector<std::string> operations;
  for (const auto& op : engine.info().value("operations", nlohmann::json::array()))
    if (op.is_string()) operations.push_back(op);
  int passes = 0, skips = 0;
  double bound = 0;
  const auto check = [&](const Draw& draw, bool shrinking) -> std::optional<report::CaseResult> {
    const Plan plan = plan_from_draw(model.config.name, draw, model.config.vocab, model.config.local_span(), o.seed, operations);
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
  Plan shrunk = plan_from_draw(model.config.name, *found.failing, model.config.vocab, model.config.local_span(), o.seed, operations);
  shrunk.name = "campaign-shrunk";
  r.message = "shrunk to " + std::to_string(shrunk.steps.size()) + " steps: " + found.failure->message;
  r.detail = found.failure->detail;
  r.bound = found.failure->bound;
  out.shrunk = std::move(shrunk);
  r.reproduce = "--reproduce '" + found.reproduce + "'";
  return out;
}

}  // namespace kvc::engine
