#include "kvcgen/engine_campaign.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include "kvcgen/scenario.h"
#include "kvcgen/search.h"
#include "kvconform/regex.h"
#include "kvconform/regressions.h"
#include "kvconform/seeds.h"
#include "kvconform/tolerance.h"

namespace kvc::engine {

Plan plan_from_draw(const std::string& model, const std::vector<DrawnStep>& draw, int64_t vocab, int64_t window, uint64_t seed,
                    const std::vector<std::string>& operations, int64_t chunk) {
  // Each raw draw is offered to the step table's rows (steps.h, `draw`): the drawn kinds 0-2 are
  // extends, 3-5 extends at the window's edges, 6 a long extend, 7 a rollback, 8 a reload, 9 a reset,
  // 10 a deep rollback (or a shift), 11 a fork, 12 a chunked extend, 13 a spec cycle, 14 a batch.
  Plan p{"campaign", model, {}};
  DrawContext c{operations, std::max<int64_t>(window, 1), vocab, seed, 0, {}, std::max<int64_t>(chunk, 0)};
  for (const DrawnStep& d : draw)
    for (PlanStep& s : draw_step(d, c)) p.steps.push_back(std::move(s));
  if (std::none_of(p.steps.begin(), p.steps.end(), [](const PlanStep& s) { return !s.positions({}).empty(); }))
    p.steps.push_back(Extend{0, tokens_for(seed, 0, 1, vocab)});
  return p;
}

int64_t drawn_chunk(const Model& model) {
  const auto& chunks = model.config.chunks;
  return std::any_of(chunks.begin(), chunks.end(), [](int64_t c) { return c > 0; }) ? model.config.chunk_size : 0;
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
    if (x.size > 2) with([](DrawnStep& s) { --s.size; });  // the minimal length (W+1, not 2W)
    if (x.seq != 0) with([](DrawnStep& s) { s.seq = 0; });
    if (x.variant != 0) with([](DrawnStep& s) { s.variant = 0; });
  }
  return out;
}

// A campaign's case header (suite, name, engine, params, policy) and the engine's hello: the serving
// operations its plans may draw, or nullopt with `r` the hello's FAIL.
std::optional<std::vector<std::string>> open_campaign(EngineClient& engine, const std::string& model, const std::string& plan,
                                                      std::string params, report::CaseResult& r) {
  r = report::named(report::EngineKey{engine.spec().name, model, plan});
  r.dtype = "float32";
  r.params = std::move(params);
  if (engine.spec().mutant != "none") r.params += ",mutant=" + engine.spec().mutant;
  r.policy = to_string(Policy::SameDtypeReference);
  if (Reply hello = engine.hello(); !hello.ok()) {
    r.status = report::Status::Fail;
    r.message = hello.message;
    return std::nullopt;
  }
  std::vector<std::string> operations;
  for (const auto& op : engine.info().value("operations", nlohmann::json::array()))
    if (op.is_string()) operations.push_back(op);
  return operations;
}

}  // namespace

CampaignOutcome run_campaign(EngineClient& engine, const Model& model, const std::string& model_dir, const CampaignOptions& o) {
  CampaignOutcome out;
  report::CaseResult& r = out.result;
  const auto opened = open_campaign(engine, model.config.name, "campaign",
                                    "seed=" + std::to_string(o.seed) + ",iterations=" + std::to_string(o.iterations), r);
  if (!opened) return out;
  const std::vector<std::string>& operations = *opened;
  int passes = 0, skips = 0;
  double bound = 0;
  const auto check = [&](const Draw& draw, bool shrinking) -> std::optional<report::CaseResult> {
    const Plan plan = plan_from_draw(model.config.name, draw, model.config.vocab, model.config.local_span(), o.seed, operations,
                                     drawn_chunk(model));
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
  const auto found =
      search::run<Draw, report::CaseResult>(budget, draw_plan, check, simplifications, [](const Draw&) { return true; });
  r.bound = bound;
  if (found.ok()) {
    r.status = skips == passes && passes > 0 ? report::Status::Skipped : report::Status::Pass;
    r.message = std::to_string(found.passed) + " random plans" + (skips ? ", " + std::to_string(skips) + " skipped" : "");
    return out;
  }
  r.status = report::Status::Fail;
  Plan shrunk = plan_from_draw(model.config.name, *found.failing, model.config.vocab, model.config.local_span(), o.seed,
                               operations, drawn_chunk(model));
  shrunk.name = "campaign-shrunk";
  r.message = "shrunk to " + std::to_string(shrunk.steps.size()) + " steps: " + found.failure->message;
  r.detail = found.failure->detail;
  r.bound = found.failure->bound;
  out.shrunk = std::move(shrunk);
  r.reproduce = "--reproduce '" + found.reproduce + "'";
  return out;
}

// ---- The model campaign ----

nlohmann::json to_json(const ModelRecipe& r) {
  return {{"name", r.name}, {"folder", r.folder}, {"layout", r.layout}, {"config", r.config}};
}

ModelRecipe recipe_from_json(const nlohmann::json& j, const std::string& file) {
  auto bad = [&](const std::string& ptr, const std::string& why) { throw std::invalid_argument(file + ": " + ptr + ": " + why); };
  if (!j.is_object()) bad("", "a model recipe is a JSON object {\"name\", \"folder\", \"layout\", \"config\"}");
  ModelRecipe r;
  for (const char* key : {"name", "layout"})
    if (!j.contains(key) || !j[key].is_string() || j[key].get<std::string>().empty())
      bad(std::string("/") + key, "must be a non-empty string");
  r.name = j["name"];
  r.layout = j["layout"];
  r.folder = j.value("folder", r.name);
  if (!j.contains("config") || !j["config"].is_object()) bad("/config", "must be the model's config.json, an object");
  r.config = j["config"];
  try {
    regressions::check_names("engine", r.folder);
  } catch (const std::exception&) {
    bad("/folder", "\"" + r.folder + "\" is not a folder name (letters, digits, '.', '_', '-')");
  }
  parse_config(r.config, file + ": /config");
  return r;
}

namespace {

using json = nlohmann::json;

// The rule of every layer, as the forward applies it: what a respelt pattern must keep.
struct Rules {
  std::vector<int64_t> windows, chunks;
  std::vector<bool> rope;
  bool operator==(const Rules& o) const { return windows == o.windows && chunks == o.chunks && rope == o.rope; }
};
Rules rules_of(const ModelConfig& c) {
  Rules r{c.windows, c.chunks, {}};
  for (int64_t l = 0; l < c.layers; ++l) r.rope.push_back(c.rope(l));
  if (r.chunks.empty()) r.chunks.assign(static_cast<size_t>(c.layers), 0);
  return r;
}

std::optional<ModelConfig> parsed(const json& config) {
  try {
    ModelConfig c = parse_config(config, "config.json");
    if (c.layers < 1) return std::nullopt;
    return c;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// The config without layer `i`: every per-layer list loses its entry, counts of layers follow.
json without_layer(json c, int64_t i, int64_t n) {
  for (auto it = c.begin(); it != c.end(); ++it)
    if (it.value().is_array() && static_cast<int64_t>(it.value().size()) == n && it.key() != "architectures")
      it.value().erase(static_cast<size_t>(i));
  c["num_hidden_layers"] = n - 1;
  if (c.contains("moe_layers") && c["moe_layers"].is_array()) {  // layer indices
    json kept = json::array();
    for (const json& l : c["moe_layers"])
      if (l.is_number_integer() && l.get<int64_t>() != i)
        kept.push_back(l.get<int64_t>() > i ? l.get<int64_t>() - 1 : l.get<int64_t>());
    c["moe_layers"] = kept;
  }
  if (c.contains("max_window_layers") && c["max_window_layers"].is_number_integer() && i < c["max_window_layers"].get<int64_t>())
    c["max_window_layers"] = c["max_window_layers"].get<int64_t>() - 1;
  if (c.contains("num_kv_shared_layers") && c["num_kv_shared_layers"].is_number_integer())
    c["num_kv_shared_layers"] = std::min<int64_t>(c["num_kv_shared_layers"].get<int64_t>(), n - 2);
  return c;
}

}  // namespace

std::string error_class(const std::string& error) {
  static const Regex exception(
      R"(json\.exception\.[a-z_]+\.[0-9]+|\b[A-Za-z_.]*(Error|Exception)\b|crashed|exited with status [0-9]+|protocol error|converter failed|timed out)");
  static const Regex where(R"(\(([^()]+:[0-9]+ in [^()]+)\))");
  std::string kind;
  RegexMatch e;
  if (exception.search(error, e)) kind = e.str(0);
  if (RegexMatch w; where.search(error, w)) kind += " at " + w.str(1);
  return kind;
}

bool same_bug(const Failure& a, const Failure& b) { return same_failure(a, b, error_class); }

std::vector<json> simpler_configs(const json& config) {
  std::vector<json> out;
  const std::optional<ModelConfig> base = parsed(config);
  if (!base) return out;
  std::set<std::string> seen{config.dump()};
  auto offer = [&](const json& c) {
    if (!seen.insert(c.dump()).second) return;
    if (parsed(c)) out.push_back(c);
  };
  const int64_t n = base->layers;
  if (n > 1)
    for (int64_t i = n; i-- > 0;) offer(without_layer(config, i, n));
  for (const char* key : {"sliding_window", "attention_chunk_size"})
    if (config.contains(key) && config[key].is_number_integer() && config[key].get<int64_t>() > 1) {
      const int64_t w = config[key].get<int64_t>();
      for (int64_t smaller : {w / 2, w - 1}) {
        json c = config;
        c[key] = smaller;
        offer(c);
      }
    }
  {
    // The pattern spelt out, legacy keys gone, where that keeps every layer's rule.
    const Rules rules = rules_of(*base);
    json c = config;
    json types = json::array();
    for (int64_t l = 0; l < n; ++l)
      types.push_back(base->attention(l) == Attention::Sliding   ? "sliding_attention"
                      : base->attention(l) == Attention::Chunked ? "chunked_attention"
                                                                 : "full_attention");
    c["layer_types"] = types;
    for (const char* legacy : {"sliding_window_pattern", "max_window_layers"}) c.erase(legacy);
    if (c.contains("no_rope_layer_interval")) {
      json rope = json::array();
      for (int64_t l = 0; l < n; ++l) rope.push_back(base->rope(l) ? 1 : 0);
      c.erase("no_rope_layer_interval");
      c["no_rope_layers"] = rope;
    }
    if (const auto respelt = parsed(c); respelt && rules_of(*respelt) == rules) offer(c);
  }
  // Features off, each alone.
  const std::pair<const char*, json> off[] = {{"attn_logit_softcapping", nullptr},
                                              {"final_logit_softcapping", nullptr},
                                              {"use_qk_norm", false},
                                              {"attn_temperature_tuning", false},
                                              {"attention_bias", false},
                                              {"num_kv_shared_layers", 0},
                                              {"attention_k_eq_v", false},
                                              {"num_experts_per_tok", 1},
                                              {"layer_rope_theta", nullptr}};
  for (const auto& [key, value] : off)
    if (config.contains(key) && config[key] != value) {
      json c = config;
      c[key] = value;
      offer(c);
    }
  // Fewer and smaller heads (cohere2 derives head_dim from the heads: its heads stay).
  if (config.value("model_type", "") != "cohere2") {
    const int64_t heads = config.value("num_attention_heads", int64_t{0}), kv = config.value("num_key_value_heads", heads);
    if (kv > 1) {
      json c = config;
      c["num_key_value_heads"] = 1;
      offer(c);
    }
    if (heads > kv && kv > 0) {
      json c = config;
      c["num_attention_heads"] = kv;
      offer(c);
    }
    if (config.contains("head_dim") && config["head_dim"].is_number_integer() && config["head_dim"].get<int64_t>() > 8) {
      json c = config;
      c["head_dim"] = 8;
      if (c.contains("global_head_dim")) c["global_head_dim"] = 16;
      offer(c);
    }
  }
  return out;
}

std::string describe_model(const ModelConfig& c) {
  std::ostringstream s;
  s << c.layers << (c.layers == 1 ? " layer: " : " layers: ");
  for (int64_t l = 0; l < c.layers; ++l) {
    if (l) s << ", ";
    const Attention a = c.attention(l);
    s << to_string(a);
    if (a == Attention::Sliding) s << " " << c.windows[static_cast<size_t>(l)];
    if (a == Attention::Chunked) s << " " << c.chunks[static_cast<size_t>(l)];
    if (!c.rope(l)) s << " NoPE";
  }
  s << "; head_dim " << c.head_dim << ", " << c.heads << "/" << c.kv_heads << " heads";
  if (c.sinks) s << ", sinks";
  if (c.moe.experts) s << ", MoE top-" << c.moe.top_k;
  return s.str();
}

ModelCampaignOutcome run_model_campaign(EngineClient& engine, const std::string& family, const ModelSource& source,
                                        const CampaignOptions& o) {
  ModelCampaignOutcome out;
  report::CaseResult& r = out.result;
  const auto opened =
      open_campaign(engine, "drawn-" + family, "model-campaign",
                    "family=" + family + ",seed=" + std::to_string(o.seed) + ",iterations=" + std::to_string(o.iterations), r);
  if (!opened) return out;
  const std::vector<std::string>& operations = *opened;

  struct Pair {
    ModelRecipe model;
    Draw plan;
  };
  std::map<std::string, std::pair<std::string, Model>> written;  // folder -> (checkpoint folder, model)
  auto model_of = [&](const ModelRecipe& recipe) -> const std::pair<std::string, Model>& {
    auto it = written.find(recipe.folder);
    if (it == written.end()) {
      const std::string dir = source.write(recipe);
      it = written.emplace(recipe.folder, std::make_pair(dir, load_model(dir))).first;
    }
    return it->second;
  };
  auto plan_of = [&](const Pair& p, const Model& m) {
    return plan_from_draw(p.model.folder, p.plan, m.config.vocab, m.config.local_span(), o.seed, operations, drawn_chunk(m));
  };
  int passes = 0, skips = 0, deviations = 0, redrawn = 0;
  std::string first_deviation, first_skip;
  Failure found_failure;  // the failure the first failing pair had: shrinking keeps it
  double bound = 0;
  // A drawn model whose windows are to be judged must move its logits far above the bound when a
  // window is one token off (window_sensitivity): one that does not is redrawn from another stream
  // of the same seed and index, and if none of kDraws is sensitive it is not judged (a SKIP).
  constexpr int kDraws = 4;
  std::map<std::string, std::string> insensitive;  // folder -> why it is not judged
  const auto needed = [&](const WindowSensitivity& s) { return window_move_needed(s, o.min_window_sensitivity); };
  const auto draw = [&](const search::CaseId& id) {
    ModelRecipe recipe;
    std::optional<WindowSensitivity> moved;
    for (int t = 0; t < kDraws; ++t) {
      recipe = source.draw(family, t == 0 ? id.seed : id.seed ^ (0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(t)), id.index);
      try {
        moved = window_sensitivity(model_of(recipe).second);
      } catch (const std::exception&) {
        return Pair{recipe, draw_plan(id)};  // a draw that cannot be written or loaded is checked as it is: that is its finding
      }
      if (!moved || moved->moved >= needed(*moved)) return Pair{recipe, draw_plan(id)};  // no window, or a sensitive one
      ++redrawn;
    }
    std::ostringstream why;
    why << recipe.folder << ": no window-sensitive draw in " << kDraws << " (a window one token larger moves the logits by "
        << moved->moved << ", needed " << needed(*moved) << ")";
    insensitive[recipe.folder] = why.str();
    return Pair{recipe, draw_plan(id)};
  };
  const auto check = [&](const Pair& p, bool shrinking) -> std::optional<report::CaseResult> {
    if (!shrinking && insensitive.count(p.model.folder)) {  // never judged
      ++passes;
      if (!skips++) first_skip = insensitive[p.model.folder];
      return std::nullopt;
    }
    Judged judged;
    report::CaseResult& c = judged.result;
    try {
      const auto& [dir, model] = model_of(p.model);
      judged = judge_plan(engine, model, dir, plan_of(p, model), o.check);
    } catch (const std::exception& e) {
      if (shrinking) return std::nullopt;  // a simplification that cannot be written or loaded is no case
      c.status = report::Status::Fail;
      c.message = std::string("the check raised: ") + e.what();
      judged.failure = {Failure::Where::Step, {}, e.what()};
    }
    bound = std::max(bound, c.bound);
    if (c.status == report::Status::Fail) {
      if (!shrinking) found_failure = judged.failure;
      if (shrinking && !same_bug(judged.failure, found_failure))
        return std::nullopt;  // another bug: not a simplification of this one
      return c;
    }
    if (!shrinking) {
      ++passes;
      if (c.status == report::Status::Skipped && !skips++) first_skip = c.message;
      if (c.status == report::Status::Deviation && !deviations++) first_deviation = p.model.folder + ": " + c.message;
    }
    return std::nullopt;
  };
  const auto simpler = [&](const Pair& p) {
    std::vector<Pair> s;
    for (json& c : simpler_configs(p.model.config)) {
      ModelRecipe m = p.model;
      m.config = std::move(c);
      m.folder = m.name + "-" + regressions::content_hash(m.config.dump()).substr(0, 8);
      s.push_back({std::move(m), p.plan});
    }
    for (Draw& d : simplifications(p.plan)) s.push_back({p.model, std::move(d)});
    return s;
  };
  const search::Budget budget{o.seed, o.iterations, o.max_size, o.reproduce};
  const auto found = search::run<Pair, report::CaseResult>(budget, draw, check, simpler, [](const Pair&) { return true; });
  r.bound = bound;
  if (found.ok()) {
    // A known deviation on any pair makes the campaign that deviation: it is reported, never a pass.
    r.status = deviations                      ? report::Status::Deviation
               : skips == passes && passes > 0 ? report::Status::Skipped
                                               : report::Status::Pass;
    r.message =
        std::to_string(found.passed) + " drawn models and plans" +
        (redrawn ? " (" + std::to_string(redrawn) + " window-insensitive " + (redrawn == 1 ? "draw" : "draws") + " redrawn)"
                 : "") +
        (skips ? ", " + std::to_string(skips) + " skipped (the first: " + first_skip + ")" : "") +
        (deviations ? ", " + std::to_string(deviations) + (deviations == 1 ? " known deviation" : " known deviations") +
                          ", the first on " + first_deviation
                    : "");
    return out;
  }
  r.status = report::Status::Fail;
  const Pair& shrunk = *found.failing;
  std::string model_text = shrunk.model.folder;
  try {
    const auto& [dir, model] = model_of(shrunk.model);
    Plan plan = plan_of(shrunk, model);
    plan.name = "model-campaign-shrunk";
    model_text = describe_model(model.config);
    r.message = "shrunk to " + std::to_string(plan.steps.size()) + (plan.steps.size() == 1 ? " step on " : " steps on ") +
                model_text + ": " + found.failure->message;
    out.shrunk = std::move(plan);
    out.model = shrunk.model;
  } catch (const std::exception& e) {  // the first draw itself failed to load: nothing to shrink
    r.message = found.failure->message;
  }
  r.detail = found.failure->detail;
  r.bound = found.failure->bound;
  r.reproduce = "--reproduce '" + found.reproduce + "'";
  return out;
}

}  // namespace kvc::engine
