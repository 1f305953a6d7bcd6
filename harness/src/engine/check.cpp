#include "kvconform/engine/check.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <sstream>

#include "kvconform/tolerance.h"

namespace kvc::engine {

using nlohmann::json;
using Kind = PlanStep::Kind;

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

// How a diagnosis re-runs the plan's serving operations wrong: keys lost at steps, every chunk of a
// chunked extend seeing no key before it, forks starting `fork_by` tokens off their prefix, spec
// cycles rejecting `spec_by` tokens more than they say.
struct Departure {
  std::vector<Loss> losses;
  bool chunks_restart = false;
  int64_t fork_by = 0, spec_by = 0;
};

// Runs the plan's steps through oracles (one per sequence) with the given options, calling
// `on_logits(step index, logits)` for every step with new positions (rows as new_positions()).
template <class T, class F>
void run_oracle(const Model& model, const Plan& plan, size_t steps, const Departure& departure, const OracleOptions& options,
                F&& on_logits) {
  std::map<int64_t, std::unique_ptr<SequenceOracle<T>>> seqs;
  auto seq = [&](int64_t s) -> SequenceOracle<T>& {
    auto& slot = seqs[s];
    if (!slot) slot = std::make_unique<SequenceOracle<T>>(model, options);
    return *slot;
  };
  for (size_t i = 0; i < steps && i < plan.steps.size(); ++i) {
    const PlanStep& s = plan.steps[i];
    for (const Loss& loss : departure.losses)
      if (loss.step == i) seq(s.seq).forget_before(loss.before);
    switch (s.kind) {
      case Kind::Extend: on_logits(i, seq(s.seq).extend(s.tokens)); break;
      case Kind::Chunked: {
        // Chunking changes nothing: position p's logits depend only on tokens 0..p.
        if (!departure.chunks_restart) {
          on_logits(i, seq(s.seq).extend(s.tokens));
          break;
        }
        std::vector<double> all;
        for (size_t at = 0; at < s.tokens.size(); at += static_cast<size_t>(s.chunk)) {
          SequenceOracle<T>& o = seq(s.seq);
          o.forget_before(o.length());
          const auto end = s.tokens.begin() + static_cast<long>(std::min(s.tokens.size(), at + static_cast<size_t>(s.chunk)));
          const std::vector<double> l = o.extend(std::vector<int32_t>(s.tokens.begin() + static_cast<long>(at), end));
          all.insert(all.end(), l.begin(), l.end());
        }
        on_logits(i, all);
        break;
      }
      case Kind::Spec: {
        on_logits(i, seq(s.seq).extend(s.tokens));
        const int64_t n = std::clamp<int64_t>(s.n + departure.spec_by, 0, seq(s.seq).length());
        if (n > 0) seq(s.seq).truncate(n);
        break;
      }
      case Kind::Batch: {
        std::vector<double> all;
        for (const BatchItem& item : s.items) {
          const std::vector<double> l = seq(item.seq).extend(item.tokens);
          all.insert(all.end(), l.begin(), l.end());
        }
        on_logits(i, all);
        break;
      }
      case Kind::Fork: {
        // A fresh forward of the prefix: the source's oracle cut back to it (the prefix property).
        auto copy = std::make_unique<SequenceOracle<T>>(seq(s.from));
        const int64_t keep = std::clamp<int64_t>(s.n + departure.fork_by, 0, copy->length());
        if (copy->length() > keep) copy->truncate(copy->length() - keep);
        seqs[s.seq] = std::move(copy);
        break;
      }
      case Kind::Rollback: seq(s.seq).truncate(s.n); break;
      case Kind::Reset: seqs.clear(); break;
      case Kind::Reload: break;
    }
  }
}

// An oracle's logits of step `step` in the space the engine answered it: as they are, or each row
// log-softmaxed where the engine answered log-probabilities (a server's answer), so that the judge,
// the same-dtype bound and every diagnosis compare like with like.
std::vector<double> as_answered(const Recorded& rec, size_t step, int64_t vocab, std::vector<double> rows) {
  if (!rec.logprob(step)) return rows;
  const size_t n = static_cast<size_t>(vocab);
  for (size_t at = 0; at + n <= rows.size(); at += n) {
    double top = -INFINITY, sum = 0;
    for (size_t v = 0; v < n; ++v) top = std::max(top, rows[at + v]);
    for (size_t v = 0; v < n; ++v) sum += std::exp(rows[at + v] - top);
    const double lse = top + std::log(sum);
    for (size_t v = 0; v < n; ++v) rows[at + v] -= lse;
  }
  return rows;
}

// The max error of the recorded logits against an oracle variant over every recorded extend.
double variant_error(const Model& model, const Plan& plan, const Recorded& rec, const Departure& departure,
                     const OracleOptions& options) {
  double worst = 0;
  run_oracle<double>(model, plan, rec.logits.size(), departure, options,
                     [&](size_t i, const std::vector<double>& raw) {
                       const std::vector<double> want = as_answered(rec, i, model.config.vocab, raw);
                       const std::vector<float>& got = rec.logits[i];
                       const size_t vocab = static_cast<size_t>(model.config.vocab);
                       for (size_t k = 0; k * vocab < got.size(); ++k) {
                         const size_t at = static_cast<size_t>(rec.row(i, k)) * vocab;
                         for (size_t v = 0; v < vocab; ++v)
                           worst = std::max(worst, std::isfinite(got[k * vocab + v]) ? std::abs(got[k * vocab + v] - want[at + v]) : INFINITY);
                       }
                     });
  return worst;
}

}  // namespace

std::string diagnose(const Model& model, const Plan& plan, const Recorded& rec, double bound) {
  const ModelConfig& c = model.config;
  const std::vector<int64_t>& w = c.windows;
  auto with = [&](auto f) {
    OracleOptions o;
    for (size_t l = 0; l < w.size(); ++l) o.windows.push_back(f(w[l]));
    return o;
  };
  const bool any_sliding = std::any_of(w.begin(), w.end(), [](int64_t x) { return x > 0; });
  const bool any_full = std::any_of(w.begin(), w.end(), [](int64_t x) { return x == 0; });
  struct Variant {
    std::string explanation;
    OracleOptions options;
  };
  std::vector<Variant> variants;
  if (any_sliding) {
    variants.push_back({"a window of W+1 on the sliding layers (one key too many)", with([](int64_t x) { return x > 0 ? x + 1 : 0; })});
    if (c.sliding_window > 1)
      variants.push_back({"a window of W-1 on the sliding layers (one key too few)", with([](int64_t x) { return x > 0 ? x - 1 : 0; })});
    variants.push_back({"full attention on the sliding layers", with([](int64_t) { return int64_t{0}; })});
  }
  if (any_full && c.sliding_window > 0)
    variants.push_back({"the sliding window applied to the full-attention layers too", with([&](int64_t) { return c.sliding_window; })});
  // Chunked layers, the same way through OracleOptions::chunks: one chunk size off, no chunking, and
  // the chunk read as a sliding window (the window a chunked layer is most often mistaken for).
  std::vector<int64_t> cs(w.size(), 0);
  for (size_t l = 0; l < w.size(); ++l) cs[l] = l < c.chunks.size() ? c.chunks[l] : 0;
  if (std::any_of(cs.begin(), cs.end(), [](int64_t x) { return x > 0; })) {
    auto chunked = [&](auto f, bool as_window) {
      OracleOptions o;
      o.windows = w;
      for (size_t l = 0; l < cs.size(); ++l) {
        o.chunks.push_back(cs[l] > 0 && !as_window ? f(cs[l]) : 0);
        if (cs[l] > 0 && as_window) o.windows[l] = cs[l];
      }
      return o;
    };
    variants.push_back({"a chunk of C+1 on the chunked layers", chunked([](int64_t x) { return x + 1; }, false)});
    variants.push_back({"a chunk of C-1 on the chunked layers", chunked([](int64_t x) { return std::max<int64_t>(1, x - 1); }, false)});
    variants.push_back({"full attention on the chunked layers", chunked([](int64_t) { return int64_t{0}; }, false)});
    variants.push_back({"a sliding window of C on the chunked layers instead of chunks", chunked([](int64_t x) { return x; }, true)});
  }
  // Every explanation that fits is named: a plan too short to tell W+1 from full attention says so.
  std::string fits;
  for (const Variant& v : variants)
    if (variant_error(model, plan, rec, {}, v.options) <= bound) fits += (fits.empty() ? "consistent with " : " or with ") + v.explanation;
  if (!fits.empty()) return fits;
  // A serving operation done wrong, with the window right.
  struct Operation {
    Kind kind;
    std::string explanation;
    Departure departure;
  };
  std::vector<Operation> operations{
      {Kind::Chunked, "the window restarting at each chunk of the chunked extends (a chunk's sliding layers see no key before it)", {{}, true, 0, 0}},
      {Kind::Fork, "the forks starting one token short of their prefix", {{}, false, -1, 0}},
      {Kind::Fork, "the forks starting one token past their prefix", {{}, false, 1, 0}},
      {Kind::Spec, "the spec cycles rolling back one token more than they reject", {{}, false, 0, 1}},
      {Kind::Spec, "the spec cycles rolling back one token less than they reject", {{}, false, 0, -1}}};
  for (const Operation& op : operations)
    if (uses(plan, op.kind) && variant_error(model, plan, rec, op.departure, {}) <= bound)
      fits += (fits.empty() ? "consistent with " : " or with ") + op.explanation;
  if (!fits.empty()) return fits;
  // Keys lost at a rollback or reload: from the step on, that sequence's sliding layers see no key
  // before some position P. The smallest loss that explains the logits is named.
  Lengths len;
  for (size_t i = 0; i < plan.steps.size() && i < rec.logits.size(); ++i) {
    const PlanStep& s = plan.steps[i];
    apply_step(s, len);
    if ((s.kind != Kind::Rollback && s.kind != Kind::Reload) || !any_sliding) continue;
    const int64_t L = len[s.seq];
    for (int64_t p = L; p >= std::max<int64_t>(0, L - 2 * c.sliding_window - 2); --p) {
      if (variant_error(model, plan, rec, Departure{{{i, p}}}, {}) <= bound)
        return "consistent with the " + std::string(to_string(s.kind)) + " at step " + std::to_string(i) +
               " losing keys: from position " + std::to_string(L) + " on, the sliding layers see no key before position " +
               std::to_string(p) + " (the window wants " + std::to_string(std::max<int64_t>(0, L - c.sliding_window + 1)) + ")";
    }
  }
  return "";
}

std::vector<KnownDeviation> load_known_deviations(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(path + ": cannot be read");
  std::stringstream s;
  s << in.rdbuf();
  const json j = json::parse(s.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("deviations") || !j["deviations"].is_array())
    throw std::invalid_argument(path + ": expected {\"deviations\": [...]}");
  std::vector<KnownDeviation> out;
  for (size_t i = 0; i < j["deviations"].size(); ++i) {
    const json& d = j["deviations"][i];
    KnownDeviation k;
    for (auto [key, field] : {std::pair{"engine", &k.engine}, {"model", &k.model}, {"plan", &k.plan}, {"explanation", &k.explanation}, {"note", &k.note}}) {
      if (!d.contains(key) || !d[key].is_string())
        throw std::invalid_argument(path + ": /deviations/" + std::to_string(i) + "/" + key + ": must be a string");
      *field = d[key];
    }
    for (const std::string* re : {&k.engine, &k.model, &k.plan}) {
      try {
        std::regex test(*re);
      } catch (const std::regex_error& e) {
        throw std::invalid_argument(path + ": /deviations/" + std::to_string(i) + ": bad regex \"" + *re + "\": " + e.what());
      }
    }
    out.push_back(k);
  }
  return out;
}

report::CaseResult check_plan(EngineClient& engine, const Model& model, const std::string& model_dir, const Plan& plan,
                              const CheckOptions& options) {
  report::CaseResult r;
  r.suite = "engine";
  r.name = plan.model + "/" + plan.name;
  r.backend = engine.spec().name;
  r.dtype = "float32";
  r.reproduce = options.reproduce;
  const ModelConfig& c = model.config;
  int64_t tokens = 0;
  for (const PlanStep& s : plan.steps) tokens += static_cast<int64_t>(new_positions(s, {}).size());
  r.params = (c.sliding_window > 0 || c.chunk_size == 0 ? "W=" : "C=") + std::to_string(c.local_span()) + ",steps=" + std::to_string(plan.steps.size()) + ",tokens=" + std::to_string(tokens);
  if (engine.spec().mutant != "none") r.params += ",mutant=" + engine.spec().mutant;
  const std::string id = report::case_id(r);
  auto finish = [&](report::Status st, std::string msg) {
    r.status = st;
    r.message = std::move(msg);
    return r;
  };
  if (const std::string why = invalid_reason(plan, c.vocab); !why.empty()) return finish(report::Status::Fail, "invalid plan: " + why);

  Reply hello = engine.hello();
  if (!hello.ok()) return finish(report::Status::Fail, hello.message);
  for (Kind k : {Kind::Rollback, Kind::Reload, Kind::Fork, Kind::Chunked, Kind::Spec, Kind::Batch})
    if (uses(plan, k) && !engine.supports(optional_operation(k)))
      return finish(report::Status::Skipped, "the engine does not support " + optional_operation(k) + " (its hello lists " +
                                                 engine.info().value("operations", json::array()).dump() + ")");
  if (sequence_count(plan) > 1 && !engine.supports("sequences"))
    return finish(report::Status::Skipped, "the engine does not run several sequences (its hello lists " +
                                               engine.info().value("operations", json::array()).dump() + ")");
  Reply loaded = engine.load(model_dir, max_tokens(plan), sequence_count(plan), id);
  if (loaded.kind == Reply::Kind::Unsupported) return finish(report::Status::Skipped, "the engine refused the model: " + loaded.message);
  if (!loaded.ok()) return finish(report::Status::Fail, "load: " + loaded.message);
  if (loaded.header.value("vocab", int64_t{-1}) != c.vocab)
    return finish(report::Status::Fail, "load: the engine reports a vocabulary of " + loaded.header.value("vocab", json()).dump() +
                                            ", the model has " + std::to_string(c.vocab));
  // Where the engine says its arithmetic is coarser than float32 (docs/engines.md, "precision"), the
  // same-dtype reference is too: FlashAttention's rule, a reference in the kernel's own precision.
  const json precision = loaded.header.value("precision", json::object());
  OracleOptions same_dtype;
  same_dtype.kv_half = precision.value("kv", "float32") == "float16";
  same_dtype.q_half = precision.value("q", "float32") == "float16";
  same_dtype.gelu_half = precision.value("gelu", "float32") == "float16";
  if (same_dtype.kv_half || same_dtype.q_half || same_dtype.gelu_half) {
    r.dtype = "float32";
    for (auto [key, on] : {std::pair{"kv", same_dtype.kv_half}, {"q", same_dtype.q_half}, {"gelu", same_dtype.gelu_half}})
      if (on) r.dtype += std::string("/") + key + "-f16";
  }

  // The engine's logits, step by step; a refusal or a fault ends the run there.
  Recorded rec;
  const auto t0 = std::chrono::steady_clock::now();
  Lengths len;
  std::string stopped;  // why the run ended early
  report::Status stopped_as = report::Status::Fail;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep& s = plan.steps[i];
    const std::string what = "step " + std::to_string(i) + " (" + describe(s, len) + ")";
    Reply got = engine.step(s, id, static_cast<int64_t>(i), c.vocab);
    rec.logits.emplace_back();
    rec.rows.emplace_back();
    if (got.kind == Reply::Kind::Unsupported) {
      stopped = what + ": the engine refused: " + got.message;
      stopped_as = report::Status::Skipped;
      break;
    }
    if (!got.ok()) {
      stopped = what + ": " + got.message;
      break;
    }
    rec.logits.back() = std::move(got.logits);
    rec.rows.back() = std::move(got.rows);
    rec.logprobs.resize(rec.logits.size());
    rec.logprobs.back() = got.logprobs;
    apply_step(s, len);
  }

  const auto t1 = std::chrono::steady_clock::now();
  // The same-dtype reference: this plan's forward in float32 (K/V rounded as the engine stores them).
  std::vector<std::vector<double>> want(rec.logits.size());
  run_oracle<double>(model, plan, rec.logits.size(), {}, OracleOptions{},
                     [&](size_t i, const std::vector<double>& w) { want[i] = as_answered(rec, i, c.vocab, w); });
  double ref_error = 0;
  run_oracle<float>(model, plan, rec.logits.size(), {}, same_dtype, [&](size_t i, const std::vector<double>& raw) {
    const std::vector<double> w = as_answered(rec, i, c.vocab, raw);
    for (size_t k = 0; k < w.size(); ++k) ref_error = std::max(ref_error, std::abs(w[k] - want[i][k]));
  });
  const double bound = std::max(options.rule.floor, options.rule.factor * ref_error);
  if (options.timing) {
    options.timing->engine_s += std::chrono::duration<double>(t1 - t0).count();
    options.timing->oracle_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    options.timing->steps += static_cast<int64_t>(rec.logits.size());
  }
  r.policy = to_string(Policy::SameDtypeReference);
  r.bound = bound;

  double worst = 0;
  int64_t judged = 0;
  std::string failure;
  std::ostringstream detail;
  detail << "engine: " << engine.info().value("name", std::string("?")) << " " << engine.info().value("version", std::string()) << "\n";
  detail << "plan: " << to_json(plan).dump() << "\n";
  detail << "bound " << num(bound) << " = max(floor " << num(options.rule.floor) << ", " << options.rule.factor
         << " x float32 reference error " << num(ref_error) << ")\n";
  len.clear();
  for (size_t i = 0; i < rec.logits.size(); ++i) {
    const PlanStep& s = plan.steps[i];
    const std::string what = "step " + std::to_string(i) + " (" + describe(s, len) + ")";
    const auto positions = new_positions(s, len);
    apply_step(s, len);
    const std::vector<float>& got = rec.logits[i];
    if (got.empty()) continue;
    double step_worst = 0;
    for (size_t k = 0; k * c.vocab < got.size(); ++k) {
      const auto [seq, pos] = positions[static_cast<size_t>(rec.row(i, k))];
      const float* g = got.data() + k * c.vocab;
      const double* w = want[i].data() + rec.row(i, k) * c.vocab;
      double e = 0;
      int64_t at = 0, top_got = 0, top_want = 0;
      for (int64_t v = 0; v < c.vocab; ++v) {
        const double d = std::isfinite(g[v]) ? std::abs(g[v] - w[v]) : INFINITY;
        if (d > e) e = d, at = v;
        if (g[v] > g[top_got]) top_got = v;
        if (w[v] > w[top_want]) top_want = v;
      }
      double second = -INFINITY;
      for (int64_t v = 0; v < c.vocab; ++v)
        if (v != top_want) second = std::max(second, w[v]);
      ++judged;
      step_worst = std::max(step_worst, e);
      const std::string where = (s.kind == Kind::Batch ? "seq " + std::to_string(seq) + " " : "") + "position " + std::to_string(pos);
      if (failure.empty() && e > bound)
        failure = what + (rec.logprob(i) ? ": max |log-prob error| " : ": max |logit error| ") + num(e) + " at " + where + ", token id " + std::to_string(at) +
                  " (engine " + num(g[at]) + ", oracle " + num(w[at]) + ") > bound " + num(bound);
      else if (failure.empty() && top_got != top_want && w[top_want] - second > 2 * bound)
        failure = what + ": top-1 token at " + where + " is " + std::to_string(top_got) + ", the oracle's is " +
                  std::to_string(top_want);
    }
    worst = std::max(worst, step_worst);
    detail << what << ": max error " << num(step_worst);
    if (got.size() / static_cast<size_t>(c.vocab) < positions.size())
      detail << " (the engine answered " << got.size() / static_cast<size_t>(c.vocab) << " of " << positions.size() << " positions)";
    detail << "\n";
  }
  r.detail = detail.str();
  r.error = worst;
  const std::string summary = std::to_string(rec.logits.size()) + " steps, " + std::to_string(judged) + " positions judged, max error " +
                              num(worst) + " (bound " + num(bound) + ")";
  // An engine that answered logits for none of the new positions checked nothing: not a pass.
  if (failure.empty() && stopped.empty() && judged == 0)
    return finish(report::Status::Fail, "the engine answered no logits at any new position: nothing was judged (" + summary + ")");
  if (failure.empty() && stopped.empty()) return finish(report::Status::Pass, summary);
  std::string msg;
  if (failure.empty()) {
    if (stopped_as == report::Status::Skipped) return finish(stopped_as, stopped + " (" + summary + " before it)");
    msg = stopped + " (" + summary + " before it)";
  } else {
    const std::string why = diagnose(model, plan, rec, bound);
    const bool serving = uses(plan, Kind::Fork) || uses(plan, Kind::Chunked) || uses(plan, Kind::Spec);
    msg = failure + (why.empty() ? "; no single explanation fits (window W-1, W+1, full attention on sliding layers, the window on full layers, lost keys" +
                                       std::string(serving ? ", a serving operation done wrong)" : ")")
                                 : "; " + why);
    if (!stopped.empty()) msg += "; then " + stopped;
  }
  // A behaviour the engine is known to have is its DEVIATION; a mutant run is never excused.
  if (engine.spec().mutant == "none")
    for (const KnownDeviation& k : options.known)
      if (std::regex_search(engine.spec().name, std::regex(k.engine)) && std::regex_search(plan.model, std::regex(k.model)) &&
          std::regex_search(plan.name, std::regex(k.plan)) && msg.find(k.explanation) != std::string::npos)
        return finish(report::Status::Deviation, "known engine deviation (" + k.note + "): " + msg);
  return finish(report::Status::Fail, msg);
}

}  // namespace kvc::engine
