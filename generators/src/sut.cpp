// The tensor engine: the LibTorch reference layers checked step by step (SystemUnderTest). Every
// failure message names the command, the layer and the first difference, in absolute token positions.
#include "kvcgen/sut.h"

#include <ATen/ATen.h>
#include <rapidcheck.h>

#include <functional>
#include <iomanip>
#include <sstream>

#include "kvcgen/position_checks.h"
#include "kvcgen/rc_check.h"
#include "kvcgen/trace_engine.h"
#include "kvconform/attention.h"
#include "kvconform/backends.h"
#include "kvconform/inputs.h"
#include "kvconform/masks.h"
#include "kvconform/positions.h"
#include "kvconform/reference.h"
#include "kvconform/step_driver.h"
#include "kvconform/tensors.h"
#include "kvconform/tolerance.h"

namespace kvc {

using campaign::Property;

namespace {

std::string num(double v) {
  std::ostringstream os;
  os << std::setprecision(3) << std::scientific << v;
  return os.str();
}

// The first line of an exception's text: LibTorch appends its C++ stack trace ("Exception raised
// from ...", "frame #N: ...") to c10::Error::what(), and a failure's message is its last line.
std::string reason(const std::exception& e) {
  const std::string what = e.what();
  return what.substr(0, what.find('\n'));
}

}  // namespace

struct SystemUnderTest::Impl {
  ScenarioConfig cfg;
  Property property;
  Mutation mutation;
  campaign::Observations* observations;
  Scenario scenario;
  std::unique_ptr<StepDriver> driver;
  size_t checked = 0;  // the static and dynamic layers; a twin after them only serves LayerAgreement

  Impl(const ScenarioConfig& c, Property p, Mutation m, campaign::Observations* obs)
      : cfg(c), property(p), mutation(m), observations(obs) {
    scenario.name = "property";
    scenario.cache = CacheKind::Static;
    scenario.layer_types = {c.attention};
    scenario.window = c.window;
    scenario.max_cache_len = c.max_cache_len;
    scenario.batch = c.batch, scenario.heads = c.heads, scenario.kv_heads = c.kv_heads, scenario.head_dim = c.head_dim;
    scenario.dtype = c.dtype;
    scenario.left_padding = c.left_padding;
    scenario.seed = c.seed;
    DriverOptions o;
    o.mutation = m;
    o.track_rows = true;
    o.oracle = true;
    o.record_calls = p == Property::LayerCalls;  // the call steps are judged here (the driver's oracle follows a crop)
    // Every layer is fed the same inputs (input layer 0).
    o.layers.push_back({c.static_spec(), 0, "static"});
    // A dynamic layer whose configuration transformers itself gets wrong (window 1, positions.h)
    // is left out: the golden cases report that deviation; here it would only mask other bugs.
    if (!positions::upstream_deviation(c.dynamic_spec())) o.layers.push_back({c.dynamic_spec(), 0, "dynamic"});
    checked = o.layers.size();
    if (c.attention != LayerType::Full) {
      LayerSpec twin = c.static_spec();
      twin.type = c.attention == LayerType::Sliding ? LayerType::Chunked : LayerType::Sliding;
      o.layers.push_back({twin, 0, "twin"});
    }
    driver = std::make_unique<StepDriver>(scenario, o);
    retired.assign(o.layers.size(), false);
  }

  // layer_calls: a layer that a crop left outside its contract (serves_crop) is not judged again
  // until the next sequence; transformers gives no promise for it.
  std::vector<bool> retired;
  TraceModel model;  // the model before the running command (layer_calls' rules read it)

  std::string who(const std::string& where, const LayerStep& v) const {
    return where + ": " + v.driven->role + " " + v.driven->spec.describe();
  }

  // [batch, heads, rows, head_dim] holding each listed token's generated values, zeros elsewhere.
  at::Tensor token_block(inputs::TensorId id, int64_t heads, const positions::Rows& rows) const {
    std::vector<double> v;
    v.reserve(static_cast<size_t>(cfg.batch * heads * static_cast<int64_t>(rows.size()) * cfg.head_dim));
    for (int64_t b = 0; b < cfg.batch; ++b)
      for (int64_t h = 0; h < heads; ++h)
        for (const auto& r : rows)
          for (int64_t d = 0; d < cfg.head_dim; ++d) v.push_back(r ? inputs::element(cfg.seed, id, 0, b, h, *r, d) : 0.0);
    return from_values(v, {cfg.batch, heads, static_cast<int64_t>(rows.size()), cfg.head_dim}, cfg.dtype);
  }

  // The position-level part of each row and mask property is position_checks.h's, shared with
  // the fast engine; the tensor engine adds the K/V bytes.
  campaign::PositionChecks positions_checks;
  static campaign::StepAt at(const LayerStep& v, const char* command) {
    return {command, v.driven->role.c_str(), &v.driven->spec, v.seen, v.q};
  }

  void check_stored(const LayerStep& v, const char* command) {
    const campaign::StepAt where = at(v, command);
    if (std::string e = positions_checks.stored(where, campaign::token_rows(v.stored_rows)); !e.empty()) RC_FAIL(e);
    // The tag shadow runs the reference; the real layer's rows are then checked bit for bit.
    const positions::Rows expected = positions::stored_rows(v.driven->spec, v.seen + v.q);
    if (!at::equal(v.cache->keys(), token_block(inputs::kKey, cfg.kv_heads, expected)) ||
        !at::equal(v.cache->values(), token_block(inputs::kValue, cfg.kv_heads, expected)))
      RC_FAIL(where.who() + " stored K/V shape " + std::to_string(v.cache->keys().size(2)) + " rows; bytes differ from tokens " +
              campaign::rows_str(expected));
  }

  void check_returned(const LayerStep& s, const char* command) {
    const campaign::StepAt where = at(s, command);
    if (std::string e = positions_checks.returned(where, s.sizes, campaign::token_rows(s.returned_rows)); !e.empty()) RC_FAIL(e);
    if (s.returned.keys.size(2) != s.sizes.kv_length)
      RC_FAIL(where.who() + " update returned " + std::to_string(s.returned.keys.size(2)) +
              " rows but get_mask_sizes said kv_length " + std::to_string(s.sizes.kv_length));
    if (!at::equal(s.returned.keys, token_block(inputs::kKey, cfg.kv_heads, s.returned_rows)) ||
        !at::equal(s.returned.values, token_block(inputs::kValue, cfg.kv_heads, s.returned_rows)))
      RC_FAIL(where.who() + " returned K/V bytes differ from tokens " + campaign::rows_str(s.returned_rows));
  }

  // What each query really attends: the tokens held by its unmasked columns.
  void check_coverage(const LayerStep& s, const char* command) {
    const at::Tensor boolean = masks::boolean_mask(s.mask).contiguous();
    const uint8_t* p = reinterpret_cast<const uint8_t*>(boolean.data_ptr<bool>());
    const std::vector<uint8_t> mask(p, p + boolean.numel());
    if (std::string e =
            positions_checks.coverage(at(s, command), cfg.batch, cfg.left_padding, s.sizes, campaign::token_rows(s.returned_rows),
                                      mask, masks::can_skip(s.mask), s.lost_keys);
        !e.empty())
      RC_FAIL(e);
  }

  double max_error(const at::Tensor& got, const at::Tensor& expected, const at::Tensor& rows) const {
    const at::Tensor diff = (got.to(at::kDouble) - expected).abs().masked_fill(rows.logical_not(), 0.0);
    if (!diff.isfinite().all().item<bool>()) return std::numeric_limits<double>::infinity();
    return diff.numel() ? diff.max().item<double>() : 0.0;
  }

  void observe(const std::string& key, double err) {
    if (!observations) return;
    double& slot = observations->max_error[key];
    slot = std::max(slot, err);
  }

  at::Tensor check_attention(const LayerStep& s, const at::Tensor& O, const at::Tensor& rows, const std::string& where,
                             bool check) {
    const std::string who = this->who(where, s);
    const at::Tensor& Q = s.query;
    const at::Tensor boolean = masks::boolean_mask(s.mask);
    const bool skipped = masks::can_skip(s.mask);
    at::Tensor exact, eager, sdpa;
    try {
      exact = attention::exact(Q, s.returned.keys, s.returned.values, boolean);
      if (!check) return exact;
      eager = attention::eager(Q, s.returned.keys, s.returned.values, masks::additive_mask(boolean, Q.scalar_type()));
      sdpa = attention::sdpa(Q, s.returned.keys, s.returned.values, skipped ? std::nullopt : std::optional<at::Tensor>(boolean));
    } catch (const std::exception& e) {
      RC_FAIL(who + " attention failed: " + reason(e));
    }
    const double e_exact = max_error(exact, O, rows);
    // Where transformers drops keys (lost_keys), the oracle of the full window does not apply: the
    // kernels are judged against the float64 attention over what the layer returned.
    if (!s.lost_keys && e_exact > kExactTolerance)
      RC_FAIL(who + " float64 attention over the returned K/V differs from the oracle by " + num(e_exact));
    const at::Tensor truth = s.lost_keys ? exact : O;
    const at::Tensor judged_rows = s.lost_keys ? boolean.any(-1, true).logical_and(rows) : rows;
    // SDPA attends what the mask it was given allows: the implied causal pattern when skipped.
    const at::Tensor truth_sdpa =
        s.lost_keys && skipped ? attention::exact(Q, s.returned.keys, s.returned.values, masks::implied_by_skip(s.mask)) : truth;
    for (auto [name, out] : {std::pair<const char*, at::Tensor>{"eager", eager}, {"sdpa", sdpa}}) {
      const double err = max_error(out, std::string(name) == "sdpa" ? truth_sdpa : truth, judged_rows);
      const Tolerance tol = std::string(name) == "eager" ? eager_tolerance(cfg.dtype) : attention_tolerance(cfg.dtype);
      observe(std::string(name) + "/" + to_string(cfg.dtype), err);
      if (err > tol.absolute)
        RC_FAIL(who + " " + name + " attention in " + to_string(cfg.dtype) + " differs from the oracle by " + num(err) +
                " > tolerance " + num(tol.absolute));
    }
    return exact;
  }

  // Every CPU backend over the layer's returned K/V, judged by the tolerance policy (backends.h).
  std::vector<std::unique_ptr<backends::Backend>> backend_list;
  void check_backends(const LayerStep& s, const at::Tensor& O, const at::Tensor& rows, const std::string& where) {
    if (backend_list.empty()) backend_list = backends::all();
    const std::string who = this->who(where, s);
    const std::string dt = to_string(cfg.dtype);
    const at::Tensor& Q = s.query;
    const at::Tensor boolean = masks::boolean_mask(s.mask);
    const backends::Call call{Q, s.returned.keys, s.returned.values, s.mask};
    at::Tensor reference;
    try {
      reference = backends::math_reference(Q, s.returned.keys, s.returned.values, boolean);
    } catch (const std::exception& e) {
      RC_FAIL(who + " math reference failed: " + reason(e));
    }
    at::Tensor truth = O;
    if (s.lost_keys) {  // see check_attention: judged against what the layer returned
      try {
        truth = attention::exact(Q, s.returned.keys, s.returned.values, boolean);
      } catch (const std::exception& e) {
        RC_FAIL(who + " float64 attention failed: " + reason(e));
      }
    }
    const at::Tensor judged_rows = s.lost_keys ? boolean.any(-1, true).logical_and(rows) : rows;
    const double reference_error = backends::reference_error(reference, truth, judged_rows);
    for (const auto& be : backend_list) {
      // The mask-free windowed kernel implements the window rule itself, which transformers breaks here.
      if (s.lost_keys && (be->name() == "windowed" || be->name() == "windowed_cache" || be->name() == "sdpa_is_causal")) continue;
      backends::Verdict v;
      try {
        v = backends::judge(be->run(call), reference_error, truth, judged_rows, be->judged_as(cfg.dtype));
      } catch (const std::exception& e) {
        RC_FAIL(who + " backend " + be->name() + " threw: " + reason(e));
      }
      observe(be->name() + "/" + dt, v.error);
      observe("math_reference/" + dt, v.reference_error);
      // The ratio only where the factor term binds (above the floor): that is what the factor must cover.
      const ReferenceRule pol = reference_rule(be->judged_as(cfg.dtype));
      if (pol.factor * v.reference_error > pol.floor) observe("ratio/" + be->name() + "/" + dt, v.error / v.reference_error);
      if (!v.ok && !(v.only_masked_rows_nonfinite && backends::known_deviation(be->name(), cfg.dtype)))
        RC_FAIL(who + " backend " + be->name() + " in " + dt + ": " + v.problem);
    }
  }

  void step(int64_t seen, int64_t q, const char* command) {
    const std::string where = std::string(command) + "(" + std::to_string(q) + ") after " + std::to_string(seen) + " tokens";
    if (driver->seen() != seen)
      RC_FAIL(where + ": the model holds " + std::to_string(seen) + " tokens, the driver " + std::to_string(driver->seen()));
    std::vector<LayerStep> views;
    driver->step({q, std::nullopt}, [&](LayerStep& v) {
      if (retired[v.layer]) {  // layer_calls: left outside its contract by a crop; not judged
        views.push_back(std::move(v));
        return;
      }
      if (v.update_error) {
        try {
          std::rethrow_exception(v.update_error);
        } catch (const std::exception& e) {
          RC_FAIL(who(where, v) + " threw: " + reason(e));
        }
      }
      const bool judges_window = property != Property::StoredRows && property != Property::ReturnedRows;
      if (v.lost_keys && judges_window && observations) ++observations->deviation_steps;
      views.push_back(std::move(v));
    });
    if (observations) ++observations->steps;
    switch (property) {
      case Property::StoredRows:
        for (size_t i = 0; i < checked; ++i) check_stored(views[i], command);
        break;
      case Property::ReturnedRows:
        for (size_t i = 0; i < checked; ++i) check_returned(views[i], command);
        break;
      case Property::WindowCoverage:
        for (size_t i = 0; i < checked; ++i) check_coverage(views[i], command);
        break;
      case Property::AttentionVsOracle:
      case Property::LayerAgreement: {
        const bool full_check = property == Property::AttentionVsOracle;
        const at::Tensor O = views[0].oracle_output(), rows = views[0].sees_any();
        std::vector<at::Tensor> exact;
        for (size_t i = 0; i < checked; ++i) exact.push_back(check_attention(views[i], O, rows, where, full_check));
        if (full_check) break;
        bool lost = false;
        for (size_t i = 0; i < checked; ++i) lost |= views[i].lost_keys;
        const double gap = checked > 1 && !lost ? max_error(exact[0], exact[1], rows) : 0.0;
        if (gap > kExactTolerance) RC_FAIL(where + ": static and dynamic layers' attention outputs differ by " + num(gap));
        if (views.size() > checked) {
          const LayerStep& first = views[0];
          const LayerStep& twin = views.back();
          if (first.stored_rows != twin.stored_rows || !at::equal(first.cache->keys(), twin.cache->keys()) ||
              !at::equal(first.cache->values(), twin.cache->values()))
            RC_FAIL(where + ": " + first.driven->spec.describe() + " stores " + campaign::rows_str(first.stored_rows) + " but " +
                    twin.driven->spec.describe() + " stores " + campaign::rows_str(twin.stored_rows));
        }
        break;
      }
      case Property::BackendsVsOracle: {
        const at::Tensor O = views[0].oracle_output(), rows = views[0].sees_any();
        for (size_t i = 0; i < checked; ++i) check_backends(views[i], O, rows, where);
        break;
      }
      case Property::LayerCalls: {
        // The oracle holds the kept tokens and the new ones (the driver drops what a crop removed);
        // every layer's is the same (one input layer), a layer that raised before has none.
        size_t base = 0;
        while (base + 1 < views.size() && !views[base].oracle) ++base;
        const at::Tensor O = views[base].oracle_output(), rows = views[base].sees_any();
        TraceModel after = model;
        after.seen += q;
        // The twin attends with the other kind's rule: the oracle judges the static and dynamic layers.
        for (size_t i = 0; i < checked; ++i) {
          if (retired[i]) continue;
          const at::Tensor exact = check_attention(views[i], O, rows, where, false);
          const double e = max_error(exact, O, rows);
          if (!views[i].lost_keys && e > kExactTolerance)
            RC_FAIL(who(where, views[i]) +
                    " float64 attention over the returned K/V differs from the oracle of the sequence's tokens by " + num(e));
          check_dynamic_rows(views[i], after, command);
        }
        break;
      }
    }
  }

  // layer_calls: the rows a dynamic layer stores, by the contract: a full one every token, a sliding
  // one the last W - 1 (positions.h), or with past recording every token since W - 1 before the
  // last crop. Static layers keep a crop's removed rows to be overwritten, which is not a promise.
  void check_dynamic_rows(const LayerStep& v, const TraceModel& after, const char* command) {
    const LayerSpec& spec = v.driven->spec;
    if (spec.cache != CacheKind::Dynamic) return;
    positions::Rows expected;
    if (spec.is_sliding() && after.recording)
      for (int64_t t = std::max<int64_t>(after.crop_point - (spec.window - 1), 0); t < after.seen; ++t) expected.push_back(t);
    else expected = positions::stored_rows(spec, after.seen);
    if (v.stored_rows != expected)
      RC_FAIL(std::string(command) + " at " + std::to_string(after.seen) + " tokens: " + v.driven->role + " " + spec.describe() +
              (after.recording ? " (past recording on)" : "") + " stores tokens " + campaign::rows_str(v.stored_rows) +
              ", expected " + campaign::rows_str(expected));
  }

  // A call step on every layer; `judge` sees each layer that is still judged, with what it raised.
  void call(const LayerCall& call, const std::function<void(const LayerStep&, const char* raised, const std::string&)>& judge) {
    Step st;
    st.call = call;
    driver->step(st, [&](LayerStep& v) {
      if (retired[v.layer] || v.failed_at >= 0) return;
      const char* raised = "";
      std::string message;
      if (v.call_error) {
        try {
          std::rethrow_exception(v.call_error);
        } catch (const PythonError& e) {
          raised = e.type() == "AttributeError" ? "AttributeError" : e.type() == "TypeError" ? "TypeError" : "RuntimeError";
          message = reason(e);
        } catch (const std::invalid_argument& e) {
          raised = "ValueError";
          message = reason(e);
        }
      }
      judge(v, raised, message);
    });
  }

  void crop(const TraceModel& before, int64_t n) {
    const std::string where = "Crop(" + std::to_string(n) + ") after " + std::to_string(before.seen) + " tokens";
    std::vector<bool> serves(retired.size());
    for (size_t l = 0; l < serves.size(); ++l) serves[l] = serves_crop(driver->layers()[l].spec, before, n);
    TraceModel after = before;
    after.crop_point = after.seen -= n;
    call({&layer_method("crop"), -n}, [&](const LayerStep& v, const char* raised, const std::string& message) {
      if (!serves[v.layer]) return;
      if (*raised) RC_FAIL(who(where, v) + " raised " + raised + " (" + message + "), where its contract serves the crop");
      if (v.seq_length_after != after.seen)
        RC_FAIL(who(where, v) + " get_seq_length() is " + std::to_string(v.seq_length_after) + " after the crop, expected " +
                std::to_string(after.seen));
      check_dynamic_rows(v, after, "Crop");
    });
    for (size_t l = 0; l < serves.size(); ++l) retired[l] = retired[l] || !serves[l];
  }

  // activate_past_recording: DynamicSlidingWindowLayer's alone; every other layer class has no such
  // attribute (AttributeError).
  void record_past(const TraceModel& before) {
    const std::string where = "Record before the first update";
    call({&layer_method("activate_past_recording"), 0}, [&](const LayerStep& v, const char* raised, const std::string& message) {
      const LayerSpec& spec = v.driven->spec;
      const char* expected = spec.cache == CacheKind::Dynamic && spec.is_sliding() ? "" : "AttributeError";
      if (std::string(raised) != expected)
        RC_FAIL(who(where, v) +
                (*raised ? std::string(" raised ") + raised + " (" + message + ")" : std::string(" raised nothing")) +
                ", expected " + (*expected ? expected : "no raise"));
    });
  }

  // The attributes a caller reads, by the contract: is_croppable (a static sliding layer only where
  // max_cache_len <= window), is_compileable (static layers), get_seq_length() (the tokens held) and
  // get_max_cache_shape() (static: its rows; dynamic sliding: its window; dynamic full: -1).
  void read_attributes(const TraceModel& before) {
    const std::string where = "Read after " + std::to_string(before.seen) + " tokens";
    for (size_t l = 0; l < retired.size(); ++l) {
      if (retired[l]) continue;
      const CacheLayer& layer = driver->layer(l);
      const LayerSpec& spec = driver->layers()[l].spec;
      const std::string who = where + ": " + driver->layers()[l].role + " " + spec.describe();
      const bool is_static = spec.cache == CacheKind::Static;
      const bool croppable = !(is_static && spec.is_sliding()) || spec.max_cache_len <= spec.window;
      const int64_t max_shape = is_static ? (spec.is_sliding() ? std::min(spec.window, spec.max_cache_len) : spec.max_cache_len)
                                : spec.is_sliding() ? spec.window
                                                    : -1;
      const std::optional<bool> got = layer.is_croppable();
      if (got != std::optional<bool>(croppable))
        RC_FAIL(who + " is_croppable is " + (got ? (*got ? "True" : "False") : "absent") + ", expected " +
                (croppable ? "True" : "False"));
      if (layer.is_compileable() != is_static)
        RC_FAIL(who + " is_compileable is " + (layer.is_compileable() ? "True" : "False") + ", expected " +
                (is_static ? "True" : "False"));
      if (layer.seq_length() != before.seen)
        RC_FAIL(who + " get_seq_length() is " + std::to_string(layer.seq_length()) + ", expected " + std::to_string(before.seen));
      if (layer.max_length() != max_shape)
        RC_FAIL(who + " get_max_cache_shape() is " + std::to_string(layer.max_length()) + ", expected " +
                std::to_string(max_shape));
    }
  }

  void reset() {
    driver->step({0, std::nullopt}, [](LayerStep&) {});
    retired.assign(retired.size(), false);
  }

  // The layers' own reset(), by its docstring ("resets the cache values while preserving the
  // objects"): nothing raised, get_seq_length() 0, a dynamic layer storing no rows; the next tokens
  // are a new sequence on the same layers (judged by every rule as it runs). A layer a crop left
  // outside its contract is empty again, so judged again.
  void reset_layers(const TraceModel& before) {
    const std::string where = "LayerReset after " + std::to_string(before.seen) + " tokens";
    const TraceModel after{0, before.recording, 0};
    call({&layer_method("reset"), 0}, [&](const LayerStep& v, const char* raised, const std::string& message) {
      if (*raised) RC_FAIL(who(where, v) + " raised " + raised + " (" + message + ")");
      if (v.seq_length_after != 0)
        RC_FAIL(who(where, v) + " get_seq_length() is " + std::to_string(v.seq_length_after) + " after reset(), expected 0");
      check_dynamic_rows(v, after, "LayerReset");
    });
    retired.assign(retired.size(), false);
  }
};

SystemUnderTest::SystemUnderTest(const ScenarioConfig& config, Property property, Mutation mutation,
                                 campaign::Observations* observations)
    : impl_(std::make_unique<Impl>(config, property, mutation, observations)) {}
SystemUnderTest::~SystemUnderTest() = default;
void SystemUnderTest::step(int64_t seen, int64_t q, const char* command) { impl_->step(seen, q, command); }
void SystemUnderTest::reset() { impl_->reset(); }
void SystemUnderTest::update(const TraceModel& before, int64_t q, const char* command) {
  impl_->model = before;
  impl_->step(before.seen, q, command);
}
void SystemUnderTest::crop(const TraceModel& before, int64_t n) { impl_->crop(before, n); }
void SystemUnderTest::record_past(const TraceModel& before) { impl_->record_past(before); }
void SystemUnderTest::read_attributes(const TraceModel& before) { impl_->read_attributes(before); }
void SystemUnderTest::reset_layers(const TraceModel& before) { impl_->reset_layers(before); }

namespace campaign {
namespace {

// A trace command by command on a fresh SystemUnderTest; its checks fail with RC_FAIL.
class TensorEngine : public TraceEngine {
 public:
  TensorEngine(Property p, Mutation m, Observations* observations) : property_(p), mutation_(m), observations_(observations) {}
  std::optional<TraceFailure> run(const Trace& t) override {
    size_t at = 0;
    std::string message = rc_check::failure_of([&] {
      SystemUnderTest sut(t.config, property_, mutation_, observations_);
      run_trace(t, sut, at);
    });
    if (message.empty()) return std::nullopt;
    return TraceFailure{std::move(message), at};
  }

 private:
  Property property_;
  Mutation mutation_;
  Observations* observations_;
};

}  // namespace

std::unique_ptr<TraceEngine> make_tensor_engine(Property p, Mutation m, Observations* observations) {
  return std::make_unique<TensorEngine>(p, m, observations);
}

}  // namespace campaign
}  // namespace kvc
