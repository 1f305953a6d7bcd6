// Metamorphic properties of cache + attention, each with a mutant proven to be caught:
//   prefill of n tokens == n single decodes          (caught: BecomingFullKeepsFirst)
//   a batch == its rows run one by one               (caught: windowed kernel FirstRowPadding)
//   a sliding window of W == an explicit mask        (caught: windowed kernel WindowOffByOne)
//   static == dynamic                                (campaign property layer_agreement; its
//                                                     mutant BecomingFullKeepsFirst in mutants_test)
// All in float64, so any difference above 1e-9 is a wrong row, mask or window, not rounding.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <sstream>

#include "kvconform/attention.h"
#include "kvconform/backends.h"
#include "kvconform/inputs.h"
#include "kvconform/masks.h"
#include "kvconform/positions.h"
#include "kvconform/reference.h"
#include "kvconform/step_driver.h"
#include "kvcgen/rc_check.h"
#include "kvcgen/rc_gen.h"
#include "kvconform/tensors.h"

namespace kvc {
namespace {

constexpr double kTol = 1e-9;

// Runs a RapidCheck property quietly with the campaign's default seed; returns the failure text
// (empty when it holds).
std::string check(const std::string& id, std::function<void()> property, int iterations = 100) {
  rc_check::Params params;
  params.id = id;
  params.iterations = iterations;
  params.max_size = 50;  // keeps sequences short: the default suite must stay fast
  return rc_check::check(params, property).failure;
}

double gap(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

// The attention outputs [B, H, D] of every token of a step sequence, float64, from a reference layer.
struct Run {
  const ScenarioConfig& c;
  LayerSpec spec;
  Mutation mutation = Mutation::None;
  backends::Fault fault = backends::Fault::None;
  bool use_kernel = false;  // the windowed kernel instead of float64 attention with transformers' mask
  int64_t only_row = -1;    // >= 0: run batch row `only_row` of the inputs alone (batch 1)

  std::vector<at::Tensor> outputs(const std::vector<int64_t>& steps) const {
    Scenario s;
    s.cache = spec.cache;
    s.layer_types = {spec.type};
    s.window = spec.window;
    s.max_cache_len = spec.max_cache_len;
    s.batch = c.batch, s.heads = c.heads, s.kv_heads = c.kv_heads, s.head_dim = c.head_dim;
    s.dtype = DType::Float64;
    s.left_padding = c.left_padding;
    s.seed = c.seed;
    for (int64_t q : steps) s.steps.push_back({q, std::nullopt});
    if (only_row >= 0) {  // the row's own inputs, cut from the whole batch's, as a batch of one
      int64_t seen = 0;
      for (int64_t q : steps) {
        auto row = [&](inputs::TensorId id, int64_t heads) {
          const std::vector<double> all = inputs::block(c.seed, id, 0, c.batch, heads, seen, q, c.head_dim);
          const auto per_row = static_cast<size_t>(heads * q * c.head_dim);
          return std::vector<double>(all.begin() + static_cast<std::ptrdiff_t>(per_row * only_row),
                                     all.begin() + static_cast<std::ptrdiff_t>(per_row * (only_row + 1)));
        };
        s.explicit_q.push_back(row(inputs::kQuery, c.heads));
        s.explicit_k.push_back(row(inputs::kKey, c.kv_heads));
        s.explicit_v.push_back(row(inputs::kValue, c.kv_heads));
        seen += q;
      }
      s.batch = 1;
      if (c.left_padding) s.left_padding = std::vector<int64_t>{(*c.left_padding)[only_row]};
    }
    DriverOptions options;
    options.mutation = mutation;
    StepDriver driver(s, options);
    std::vector<at::Tensor> out;
    driver.run([&](LayerStep& v) {
      if (v.update_error) std::rethrow_exception(v.update_error);
      const at::Tensor o = use_kernel
                               ? backends::windowed(v.query, v.returned.keys, v.returned.values, v.mask.query_positions,
                                                    v.mask.sizes.kv_offset, backends::kernel_window(v.mask), fault)
                               : attention::exact(v.query, v.returned.keys, v.returned.values, masks::boolean_mask(v.mask));
      for (int64_t i = 0; i < v.q; ++i) out.push_back(o.select(2, i));
    });
    return out;
  }
};

std::string steps_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

// --- prefill of n tokens, then m decodes == n + m single decodes (both layer kinds)
std::string prefill_equals_decodes(Mutation mutation) {
  return check("prefill_equals_decodes", [mutation] {
    ScenarioConfig c = *gen_config();
    c.left_padding = std::nullopt;  // a one-token first step cannot cover padding
    const int64_t n = *rc::gen::inRange<int64_t>(1, c.max_tokens + 1);
    const int64_t m = *rc::gen::inRange<int64_t>(0, c.max_tokens - n + 1);
    std::vector<int64_t> prefill = {n}, decodes(static_cast<size_t>(n + m), 1);
    prefill.resize(static_cast<size_t>(1 + m), 1);
    for (const LayerSpec& spec : {c.static_spec(), c.dynamic_spec()}) {
      if (positions::upstream_deviation(spec)) continue;
      // Where transformers drops window keys (max_cache_len < W), a prefill sees keys that later
      // decodes no longer have: the relation does not hold upstream (docs/deviations.md).
      bool lost = false;
      for (int64_t seen = 0, i = 0; i < static_cast<int64_t>(decodes.size()); seen += decodes[i++])
        lost |= positions::loses_window_keys(spec, seen, decodes[i]);
      if (lost) continue;
      const Run run{c, spec, mutation};
      const auto a = run.outputs(prefill), b = run.outputs(decodes);
      for (size_t t = 0; t < a.size(); ++t)
        if (gap(a[t], b[t]) > kTol)
          RC_FAIL(spec.describe() + ": token " + std::to_string(t) + " differs by " + std::to_string(gap(a[t], b[t])) +
                  " between steps " + steps_str(prefill) + " and " + steps_str(decodes));
    }
  });
}

TEST(Metamorphic, PrefillEqualsSingleDecodes) { EXPECT_EQ(prefill_equals_decodes(Mutation::None), ""); }
TEST(Metamorphic, PrefillEqualsSingleDecodesCatchesBecomingFullKeepsFirst) {
  const std::string f = prefill_equals_decodes(Mutation::BecomingFullKeepsFirst);
  EXPECT_NE(f.find("differs by"), std::string::npos) << f;
  RecordProperty("counterexample", f);
}

// --- a batch with per-row left padding == each row alone
std::string batch_equals_rows(backends::Fault fault) {
  return check("batch_equals_rows", [fault] {
    ScenarioConfig c = *gen_config();
    c.batch = *rc::gen::inRange<int64_t>(2, 5);
    c.left_padding = *rc::gen::container<std::vector<int64_t>>(
        static_cast<size_t>(c.batch), rc::gen::inRange<int64_t>(0, std::max<int64_t>(c.max_tokens - 1, 1)));
    int64_t lp = 0;
    for (int64_t x : *c.left_padding) lp = std::max(lp, x);
    std::vector<int64_t> steps = {*rc::gen::inRange<int64_t>(lp + 1, std::max(lp + 2, c.max_tokens + 1))};
    int64_t seen = steps[0];
    while (seen < c.max_tokens && *rc::gen::inRange(0, 4) != 0) {
      const int64_t q = *rc::gen::inRange<int64_t>(1, c.max_tokens - seen + 1);
      steps.push_back(q);
      seen += q;
    }
    RC_PRE(seen <= c.max_tokens);
    const LayerSpec spec = *rc::gen::element(c.static_spec(), c.dynamic_spec());
    RC_PRE(!positions::upstream_deviation(spec));
    const Run whole{c, spec, Mutation::None, fault, true};
    const auto batch = whole.outputs(steps);
    for (int64_t b = 0; b < c.batch; ++b) {
      Run alone = whole;
      alone.only_row = b;
      const auto single = alone.outputs(steps);
      for (size_t t = 0; t < batch.size(); ++t) {
        const double d = gap(batch[t].select(0, b), single[t].select(0, 0));
        if (d > kTol)
          RC_FAIL(spec.describe() + ": batch row " + std::to_string(b) + " token " + std::to_string(t) +
                  " differs from the row run alone by " + std::to_string(d));
      }
    }
  });
}

TEST(Metamorphic, BatchEqualsRowsOneByOne) { EXPECT_EQ(batch_equals_rows(backends::Fault::None), ""); }
TEST(Metamorphic, BatchEqualsRowsCatchesFirstRowPadding) {
  const std::string f = batch_equals_rows(backends::Fault::FirstRowPadding);
  EXPECT_NE(f.find("differs from the row run alone"), std::string::npos) << f;
  RecordProperty("counterexample", f);
}

// --- the windowed kernel's window_size = (W - 1, 0) (or chunk size + left padding) == float64
// attention with an explicit mask written from the rule over absolute positions (positions.h),
// for arbitrary query positions, kv_offset and padding.
std::string window_equals_explicit_mask(backends::Fault fault) {
  return check("window_equals_explicit_mask", [fault] {
    const LayerType type = *rc::gen::element(LayerType::Sliding, LayerType::Chunked, LayerType::Full);
    const int64_t W = *rc::gen::inRange<int64_t>(1, 12), B = *rc::gen::inRange<int64_t>(1, 4);
    const int64_t offset = *rc::gen::inRange<int64_t>(0, 20), nk = *rc::gen::inRange<int64_t>(1, 24);
    const int64_t nq = *rc::gen::inRange<int64_t>(1, nk + 1);
    std::vector<int64_t> qpos;
    for (int64_t i = 0; i < nq; ++i) qpos.push_back(offset + nk - nq + i);  // the newest tokens, as after an update
    const auto lp = *rc::gen::container<std::vector<int64_t>>(static_cast<size_t>(B), rc::gen::inRange<int64_t>(0, offset + nk));
    backends::KernelWindow w;
    w.type = type;
    if (type == LayerType::Sliding) w.left = W - 1;
    if (type == LayerType::Chunked) w.chunk = W;
    w.left_padding = lp;
    std::vector<double> mask;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < nq; ++i)
        for (int64_t j = 0; j < nk; ++j) {
          const int64_t k = offset + j;
          mask.push_back(k >= lp[b] && positions::window_allows(type, W, lp[b], qpos[i], k));
        }
    const at::Tensor M = from_values(mask, {B, 1, nq, nk}, DType::Float64).to(at::kBool);
    const at::Tensor q = at::randn({B, 2, nq, 4}, at::kDouble), k = at::randn({B, 1, nk, 4}, at::kDouble);
    const at::Tensor v = at::randn({B, 1, nk, 4}, at::kDouble);
    const double d = gap(backends::windowed(q, k, v, qpos, offset, w, fault), attention::exact(q, k, v, M));
    if (d > kTol)
      RC_FAIL(std::string(to_string(type)) + " W=" + std::to_string(W) + " kv_offset=" + std::to_string(offset) +
              ": kernel and explicit mask differ by " + std::to_string(d));
  });
}

TEST(Metamorphic, WindowEqualsExplicitMask) { EXPECT_EQ(window_equals_explicit_mask(backends::Fault::None), ""); }
TEST(Metamorphic, WindowEqualsExplicitMaskCatchesWindowOffByOne) {
  const std::string f = window_equals_explicit_mask(backends::Fault::WindowOffByOne);
  EXPECT_NE(f.find("kernel and explicit mask differ"), std::string::npos) << f;
  RecordProperty("counterexample", f);
}
TEST(Metamorphic, WindowEqualsExplicitMaskCatchesIgnoredKvOffset) {
  const std::string f = window_equals_explicit_mask(backends::Fault::IgnoreKvOffset);
  EXPECT_NE(f.find("kernel and explicit mask differ"), std::string::npos) << f;
  RecordProperty("counterexample", f);
}

}  // namespace
}  // namespace kvc
