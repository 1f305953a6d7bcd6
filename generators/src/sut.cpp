// The stateful properties' system under test. Every failure message names the command, the layer
// and the first difference, in absolute token positions.
#include "kvconform/sut.h"

#include <ATen/ATen.h>
#include <rapidcheck.h>

#include <iomanip>
#include <set>
#include <sstream>

#include "kvconform/attention.h"
#include "kvconform/backends.h"
#include "kvconform/inputs.h"
#include "kvconform/masks.h"
#include "kvconform/oracle.h"
#include "kvconform/positions.h"
#include "kvconform/reference.h"
#include "kvconform/tensors.h"
#include "kvconform/tolerance.h"

namespace kvc {

using campaign::Property;

namespace {

std::string rows_str(const positions::Rows& rows) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < rows.size(); ++i) {
    os << (i ? "," : "");
    if (rows[i]) os << *rows[i]; else os << "_";
  }
  return os.str() + "]";
}

std::string num(double v) {
  std::ostringstream os;
  os << std::setprecision(3) << std::scientific << v;
  return os.str();
}

std::string set_str(const std::set<int64_t>& s) {
  std::ostringstream os;
  os << "{";
  for (auto it = s.begin(); it != s.end(); ++it) os << (it == s.begin() ? "" : ",") << *it;
  return os.str() + "}";
}

// A position-tag tensor [1, 1, n, 1] float64 holding token + 1 (0 = never written).
positions::Rows rows_of_tags(const at::Tensor& tags) {
  positions::Rows rows;
  for (double v : values_of(tags)) rows.push_back(v == 0 ? std::nullopt : std::optional<int64_t>(static_cast<int64_t>(v) - 1));
  return rows;
}

// A reference layer together with its position-tag shadow: the same layer kind fed the token
// index + 1 in float64, so that any returned or stored row names the token it holds.
struct Tracked {
  const char* role;
  std::unique_ptr<CacheLayer> layer, tags;
};

struct StepView {  // what one layer did in one step
  MaskSizes sizes;
  KV out;
  positions::Rows returned;
  at::Tensor boolean;                 // the full boolean mask
  std::optional<at::Tensor> sdpa;     // nullopt when transformers would skip it
  masks::MaskQuery query;
  // transformers itself drops keys the window allows here (positions::loses_window_keys): the
  // step is judged against what the layer returns, and counted as a reproduced upstream deviation.
  bool lost_keys = false;
};

}  // namespace

struct SystemUnderTest::Impl {
  ScenarioConfig cfg;
  Property property;
  Mutation mutation;
  campaign::Observations* observations;
  std::vector<Tracked> layers;  // static, dynamic, then (sliding/chunked only) the twin
  Oracle oracle;

  Impl(const ScenarioConfig& c, Property p, Mutation m, campaign::Observations* obs)
      : cfg(c), property(p), mutation(m), observations(obs),
        oracle(OracleShape{c.batch, c.heads, c.kv_heads, c.head_dim}, c.attention, c.window, c.left_padding) {
    add("static", c.static_spec());
    // A dynamic layer whose configuration transformers itself gets wrong (window 1, positions.h)
    // is left out: the golden cases report that deviation; here it would only mask other bugs.
    if (!positions::upstream_deviation(c.dynamic_spec())) add("dynamic", c.dynamic_spec());
    checked = layers.size();
    if (c.attention != LayerType::Full) {
      LayerSpec twin = c.static_spec();
      twin.type = c.attention == LayerType::Sliding ? LayerType::Chunked : LayerType::Sliding;
      add("twin", twin);
    }
  }

  size_t checked = 0;  // the static and dynamic layers; a twin after them only serves LayerAgreement

  void add(const char* role, const LayerSpec& spec) {
    // The tag shadow is the same implementation (mutant included), so messages name real rows.
    layers.push_back({role, make_layer(spec, Profile::V5, mutation), make_layer(spec, Profile::V5, mutation)});
  }

  // [batch, heads, rows, head_dim] holding each listed token's generated values, zeros elsewhere.
  at::Tensor token_block(inputs::TensorId id, int64_t heads, const positions::Rows& rows) const {
    std::vector<double> v;
    v.reserve(static_cast<size_t>(cfg.batch * heads * static_cast<int64_t>(rows.size()) * cfg.head_dim));
    for (int64_t b = 0; b < cfg.batch; ++b)
      for (int64_t h = 0; h < heads; ++h)
        for (const auto& r : rows)
          for (int64_t d = 0; d < cfg.head_dim; ++d)
            v.push_back(r ? inputs::element(cfg.seed, id, 0, b, h, *r, d) : 0.0);
    return from_values(v, {cfg.batch, heads, static_cast<int64_t>(rows.size()), cfg.head_dim}, cfg.dtype);
  }

  StepView run_layer(Tracked& t, int64_t seen, int64_t q, const at::Tensor& k, const at::Tensor& v) {
    StepView s;
    s.sizes = t.layer->get_mask_sizes(q);
    s.out = t.layer->update(k, v);
    const at::Tensor tag = at::arange(seen + 1, seen + q + 1, at::kDouble).view({1, 1, q, 1});
    s.returned = rows_of_tags(t.tags->update(tag, tag).keys);
    masks::MaskQuery& m = s.query;
    m.type = t.layer->spec().type;
    m.window = cfg.window;
    m.batch = cfg.batch;
    for (int64_t i = 0; i < q; ++i) m.query_positions.push_back(seen + i);
    m.sizes = s.sizes;
    m.left_padding = cfg.left_padding;
    m.tokens_so_far = seen + q;
    m.allow_skip = masks::allow_is_causal_skip(Profile::V5, t.layer->spec().cache, q);
    s.boolean = masks::boolean_mask(m, mutation);
    s.sdpa = masks::can_skip(m) ? std::nullopt : std::optional<at::Tensor>(s.boolean);
    s.lost_keys = positions::loses_window_keys(t.layer->spec(), seen, q, cfg.left_padding.value_or(std::vector<int64_t>{}));
    const bool judges_window = property != Property::StoredRows && property != Property::ReturnedRows;
    if (s.lost_keys && judges_window && observations) ++observations->deviation_steps;
    return s;
  }

  void check_stored(const Tracked& t, int64_t seen_after, const std::string& where) {
    const positions::Rows expected = positions::stored_rows(t.layer->spec(), seen_after);
    const positions::Rows actual = rows_of_tags(t.tags->keys());
    // The tag shadow runs the reference; the real layer's rows are then checked bit for bit.
    if (actual != expected)
      RC_FAIL(where + ": " + t.role + " " + t.layer->spec().describe() + " stores tokens " + rows_str(actual) +
              ", expected " + rows_str(expected));
    if (!at::equal(t.layer->keys(), token_block(inputs::kKey, cfg.kv_heads, expected)) ||
        !at::equal(t.layer->values(), token_block(inputs::kValue, cfg.kv_heads, expected)))
      RC_FAIL(where + ": " + t.role + " " + t.layer->spec().describe() + " stored K/V shape " +
              std::to_string(t.layer->keys().size(2)) + " rows; bytes differ from tokens " + rows_str(expected));
  }

  void check_returned(const Tracked& t, const StepView& s, int64_t seen, int64_t q, const std::string& where) {
    const std::string who = where + ": " + t.role + " " + t.layer->spec().describe();
    const MaskSizes documented = positions::mask_sizes(t.layer->spec(), seen, q);
    if (s.sizes != documented)
      RC_FAIL(who + " get_mask_sizes = (kv_length " + std::to_string(s.sizes.kv_length) + ", kv_offset " +
              std::to_string(s.sizes.kv_offset) + "), documented (" + std::to_string(documented.kv_length) + ", " +
              std::to_string(documented.kv_offset) + ")");
    if (s.out.keys.size(2) != s.sizes.kv_length)
      RC_FAIL(who + " update returned " + std::to_string(s.out.keys.size(2)) + " rows but get_mask_sizes said kv_length " +
              std::to_string(s.sizes.kv_length));
    positions::Rows expected;
    for (int64_t j = 0; j < s.sizes.kv_length; ++j) {
      const int64_t tok = s.sizes.kv_offset + j;
      expected.push_back(tok < seen + q ? std::optional<int64_t>(tok) : std::nullopt);
    }
    if (s.returned != expected)
      RC_FAIL(who + " returned tokens " + rows_str(s.returned) + ", expected " + rows_str(expected) +
              " (kv_offset " + std::to_string(s.sizes.kv_offset) + ")");
    if (!at::equal(s.out.keys, token_block(inputs::kKey, cfg.kv_heads, expected)) ||
        !at::equal(s.out.values, token_block(inputs::kValue, cfg.kv_heads, expected)))
      RC_FAIL(who + " returned K/V bytes differ from tokens " + rows_str(expected));
  }

  // What each query really attends: the tokens held by its unmasked columns.
  void check_coverage(const Tracked& t, const StepView& s, int64_t seen, int64_t q, const std::string& where) {
    const std::string who = where + ": " + t.role + " " + t.layer->spec().describe();
    const int64_t cols = s.boolean.size(3);
    if (cols != static_cast<int64_t>(s.returned.size()))
      RC_FAIL(who + " mask has " + std::to_string(cols) + " key columns but update returned " +
              std::to_string(s.returned.size()) + " rows");
    auto check_pattern = [&](const at::Tensor& mask, const char* form) {
      const at::Tensor m = mask.to(at::kBool).contiguous();
      const bool* p = m.data_ptr<bool>();
      for (int64_t b = 0; b < cfg.batch; ++b)
        for (int64_t i = 0; i < q; ++i) {
          std::set<int64_t> sees, allowed;
          for (int64_t j = 0; j < cols; ++j) {
            if (!p[(b * q + i) * cols + j]) continue;
            if (!s.returned[j])
              RC_FAIL(who + " " + form + ": query " + std::to_string(seen + i) + " (row " + std::to_string(b) +
                      ") attends column " + std::to_string(j) + ", an unwritten row");
            if (!sees.insert(*s.returned[j]).second)
              RC_FAIL(who + " " + form + ": query " + std::to_string(seen + i) + " attends token " +
                      std::to_string(*s.returned[j]) + " twice");
          }
          for (int64_t k = 0; k < seen + q; ++k)
            if (oracle.visible(b, seen + i, k) && (!s.lost_keys || k >= s.sizes.kv_offset)) allowed.insert(k);
          if (sees != allowed)
            RC_FAIL(who + " " + form + ": query " + std::to_string(seen + i) + " (row " + std::to_string(b) +
                    ") attends " + set_str(sees) + ", the window rule allows " + set_str(allowed));
        }
    };
    check_pattern(s.boolean, "boolean mask");
    if (!s.sdpa) check_pattern(masks::implied_by_skip(s.query), "skipped mask (is_causal)");
  }

  // Rows whose query sees at least one key, [batch, 1, q, 1]: fully masked rows are compared apart.
  at::Tensor seeing_rows(int64_t seen, int64_t q) const {
    std::vector<double> any;
    for (int64_t b = 0; b < cfg.batch; ++b)
      for (int64_t i = 0; i < q; ++i) {
        bool sees = false;
        for (int64_t k = 0; k <= seen + i && !sees; ++k) sees = oracle.visible(b, seen + i, k);
        any.push_back(sees ? 1.0 : 0.0);
      }
    return from_values(any, {cfg.batch, 1, q, 1}, DType::Float64).to(at::kBool);
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

  at::Tensor check_attention(const Tracked& t, const StepView& s, const at::Tensor& Q, const at::Tensor& O,
                             const at::Tensor& rows, const std::string& where, bool check) {
    const std::string who = where + ": " + t.role + " " + t.layer->spec().describe();
    at::Tensor exact, eager, sdpa;
    try {
      exact = attention::exact(Q, s.out.keys, s.out.values, s.boolean);
      if (!check) return exact;
      eager = attention::eager(Q, s.out.keys, s.out.values, masks::additive_mask(s.boolean, Q.scalar_type()));
      sdpa = attention::sdpa(Q, s.out.keys, s.out.values, s.sdpa);
    } catch (const std::exception& e) {
      RC_FAIL(who + " attention failed: " + e.what());
    }
    const double e_exact = max_error(exact, O, rows);
    // Where transformers drops keys (lost_keys), the oracle of the full window does not apply: the
    // kernels are judged against the float64 attention over what the layer returned.
    if (!s.lost_keys && e_exact > kExactTolerance)
      RC_FAIL(who + " float64 attention over the returned K/V differs from the oracle by " + num(e_exact));
    const at::Tensor truth = s.lost_keys ? exact : O;
    const at::Tensor judged_rows = s.lost_keys ? s.boolean.any(-1, true).logical_and(rows) : rows;
    for (auto [name, out] : {std::pair<const char*, at::Tensor>{"eager", eager}, {"sdpa", sdpa}}) {
      const double err = max_error(out, truth, judged_rows);
      const Tolerance tol = std::string(name) == "eager" ? eager_tolerance(cfg.dtype) : attention_tolerance(cfg.dtype);
      observe(std::string(name) + "/" + to_string(cfg.dtype), err);
      if (err > tol.absolute)
        RC_FAIL(who + " " + name + " attention in " + to_string(cfg.dtype) + " differs from the oracle by " +
                num(err) + " > tolerance " + num(tol.absolute));
    }
    return exact;
  }

  // Every CPU backend over the layer's returned K/V, judged by the tolerance policy (backends.h).
  std::vector<std::unique_ptr<backends::Backend>> backend_list;
  void check_backends(const Tracked& t, const StepView& s, const at::Tensor& Q, const at::Tensor& O,
                      const at::Tensor& rows, const std::string& where) {
    if (backend_list.empty()) backend_list = backends::all();
    const std::string who = where + ": " + t.role + " " + t.layer->spec().describe();
    const std::string dt = to_string(cfg.dtype);
    const backends::Call call{Q, s.out.keys, s.out.values, s.query};
    at::Tensor reference;
    try {
      reference = backends::math_reference(Q, s.out.keys, s.out.values, masks::boolean_mask(s.query));
    } catch (const std::exception& e) {
      RC_FAIL(who + " math reference failed: " + e.what());
    }
    at::Tensor truth = O;
    if (s.lost_keys) {  // see check_attention: judged against what the layer returned
      try {
        truth = attention::exact(Q, s.out.keys, s.out.values, s.boolean);
      } catch (const std::exception& e) {
        RC_FAIL(who + " float64 attention failed: " + e.what());
      }
    }
    const at::Tensor judged_rows = s.lost_keys ? s.boolean.any(-1, true).logical_and(rows) : rows;
    const double reference_error = backends::reference_error(reference, truth, judged_rows);
    for (const auto& be : backend_list) {
      // The mask-free windowed kernel implements the window rule itself, which transformers breaks here.
      if (s.lost_keys && be->name() == "windowed") continue;
      backends::Verdict v;
      try {
        v = backends::judge(be->run(call), reference_error, truth, judged_rows, be->judged_as(cfg.dtype));
      } catch (const std::exception& e) {
        RC_FAIL(who + " backend " + be->name() + " threw: " + e.what());
      }
      observe(be->name() + "/" + dt, v.error);
      observe("math_reference/" + dt, v.reference_error);
      // The ratio only where the factor term binds (above the floor): that is what the factor must cover.
      const backends::Policy pol = backends::policy(be->judged_as(cfg.dtype));
      if (pol.factor * v.reference_error > pol.floor) observe("ratio/" + be->name() + "/" + dt, v.error / v.reference_error);
      if (!v.ok && !(v.only_masked_rows_nonfinite && backends::known_deviation(be->name(), cfg.dtype)))
        RC_FAIL(who + " backend " + be->name() + " in " + dt + ": " + v.problem);
    }
  }

  void step(int64_t seen, int64_t q, const char* command) {
    const std::string where = std::string(command) + "(" + std::to_string(q) + ") after " + std::to_string(seen) + " tokens";
    const int64_t B = cfg.batch, Hkv = cfg.kv_heads, H = cfg.heads, D = cfg.head_dim;
    const auto kv = inputs::block(cfg.seed, inputs::kKey, 0, B, Hkv, seen, q, D);
    const auto vv = inputs::block(cfg.seed, inputs::kValue, 0, B, Hkv, seen, q, D);
    const auto qv = inputs::block(cfg.seed, inputs::kQuery, 0, B, H, seen, q, D);
    const at::Tensor K = from_values(kv, {B, Hkv, q, D}, cfg.dtype), V = from_values(vv, {B, Hkv, q, D}, cfg.dtype);
    const at::Tensor Q = from_values(qv, {B, H, q, D}, cfg.dtype);
    oracle.append(kv, vv, q);  // generated values are exact in every dtype

    std::vector<StepView> views;
    for (Tracked& t : layers) {
      try {
        views.push_back(run_layer(t, seen, q, K, V));
      } catch (const std::exception& e) {
        RC_FAIL(where + ": " + t.role + " " + t.layer->spec().describe() + " threw: " + e.what());
      }
    }
    if (observations) ++observations->steps;
    switch (property) {
      case Property::StoredRows:
        for (size_t i = 0; i < checked; ++i) check_stored(layers[i], seen + q, where);
        break;
      case Property::ReturnedRows:
        for (size_t i = 0; i < checked; ++i) check_returned(layers[i], views[i], seen, q, where);
        break;
      case Property::WindowCoverage:
        for (size_t i = 0; i < checked; ++i) check_coverage(layers[i], views[i], seen, q, where);
        break;
      case Property::AttentionVsOracle:
      case Property::LayerAgreement: {
        const bool full_check = property == Property::AttentionVsOracle;
        const at::Tensor O = from_values(oracle.attend(qv, q), {B, H, q, D}, DType::Float64);
        const at::Tensor rows = seeing_rows(seen, q);
        std::vector<at::Tensor> exact;
        for (size_t i = 0; i < checked; ++i)
          exact.push_back(check_attention(layers[i], views[i], Q, O, rows, where, full_check));
        if (full_check) break;
        bool lost = false;
        for (size_t i = 0; i < checked; ++i) lost |= views[i].lost_keys;
        const double gap = checked > 1 && !lost ? max_error(exact[0], exact[1], rows) : 0.0;
        if (gap > kExactTolerance)
          RC_FAIL(where + ": static and dynamic layers' attention outputs differ by " + num(gap));
        if (layers.size() > checked) {
          const Tracked& twin = layers.back();
          const positions::Rows a = rows_of_tags(layers[0].tags->keys()), b = rows_of_tags(twin.tags->keys());
          if (a != b || !at::equal(layers[0].layer->keys(), twin.layer->keys()) ||
              !at::equal(layers[0].layer->values(), twin.layer->values()))
            RC_FAIL(where + ": " + layers[0].layer->spec().describe() + " stores " + rows_str(a) + " but " +
                    twin.layer->spec().describe() + " stores " + rows_str(b));
        }
        break;
      }
      case Property::BackendsVsOracle: {
        const at::Tensor O = from_values(oracle.attend(qv, q), {B, H, q, D}, DType::Float64);
        const at::Tensor rows = seeing_rows(seen, q);
        for (size_t i = 0; i < checked; ++i) check_backends(layers[i], views[i], Q, O, rows, where);
        break;
      }
    }
  }

  void reset() {
    for (Tracked& t : layers) {
      t.layer->reset();
      t.tags->reset();
    }
    oracle.reset();
  }
};

SystemUnderTest::SystemUnderTest(const ScenarioConfig& config, Property property, Mutation mutation,
                                 campaign::Observations* observations)
    : impl_(std::make_unique<Impl>(config, property, mutation, observations)) {}
SystemUnderTest::~SystemUnderTest() = default;
void SystemUnderTest::step(int64_t seen, int64_t q, const char* command) { impl_->step(seen, q, command); }
void SystemUnderTest::reset() { impl_->reset(); }

}  // namespace kvc
