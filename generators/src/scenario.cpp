#include "kvcgen/scenario.h"

#include <algorithm>
#include <ostream>
#include <sstream>

#include "kvconform/positions.h"
#include "kvcgen/sut.h"

namespace kvc {

int64_t ScenarioConfig::max_left_padding() const {
  if (!left_padding) return 0;
  return *std::max_element(left_padding->begin(), left_padding->end());
}

std::string ScenarioConfig::describe() const {
  std::ostringstream os;
  os << to_string(attention) << " W=" << window << " L=" << max_cache_len << " B=" << batch << " H=" << heads
     << " Hkv=" << kv_heads << " D=" << head_dim << " " << to_string(dtype) << " left_padding=";
  if (!left_padding) {
    os << "none";
  } else {
    os << "[";
    for (size_t i = 0; i < left_padding->size(); ++i) os << (i ? "," : "") << (*left_padding)[i];
    os << "]";
  }
  os << " seed=" << seed << " max_tokens=" << max_tokens;
  return os.str();
}

void showValue(const ScenarioConfig& c, std::ostream& os) { os << c.describe(); }

namespace {
// Windows are mostly small (every branch is reached within a few steps), sometimes up to 64.
// Built from a band choice that shrinks to the first band, so counterexamples shrink to W near 1.
rc::Gen<int64_t> gen_window() {
  return rc::gen::exec([] {
    const int band = *rc::gen::weightedElement<int>({{6, 0}, {3, 1}, {1, 2}});
    const int64_t lo[] = {1, 9, 17}, hi[] = {9, 17, 65};
    return *rc::gen::inRange<int64_t>(lo[band], hi[band]);
  });
}

// max_cache_len below, equal to and above the window.
rc::Gen<int64_t> gen_max_cache_len(int64_t w) {
  return rc::gen::oneOf(rc::gen::inRange<int64_t>(1, w + 1), rc::gen::just(w),
                        rc::gen::inRange<int64_t>(w, 3 * w + 4));
}
}  // namespace

int64_t token_limit(const ScenarioConfig& c) {
  int64_t limit = std::min<int64_t>(3 * c.window + 8, 160);
  for (const LayerSpec& s : {c.static_spec(), c.dynamic_spec()}) {
    const int64_t bound = positions::max_total_tokens(s);
    if (bound >= 0) limit = std::min(limit, bound);
  }
  return limit;
}

rc::Gen<ScenarioConfig> gen_config(const ConfigFilter& filter) {
  return rc::gen::exec([filter] {
    ScenarioConfig c;
    c.attention = filter.attention ? *filter.attention
                                   : *rc::gen::weightedElement<LayerType>(
                                         {{4, LayerType::Sliding}, {4, LayerType::Chunked}, {1, LayerType::Full}});
    c.window = *gen_window();
    c.max_cache_len = *gen_max_cache_len(c.window);
    c.batch = *rc::gen::weightedElement<int64_t>({{4, 1}, {3, 2}, {1, 3}, {1, 4}});
    c.kv_heads = *rc::gen::elementOf(std::vector<int64_t>{1, 2});
    c.heads = c.kv_heads * *rc::gen::elementOf(std::vector<int64_t>{1, 2, 4});  // MHA, GQA, MQA
    c.head_dim = *rc::gen::weightedElement<int64_t>({{3, 1}, {4, 4}, {3, 8}, {1, 16}, {1, 64}});
    c.dtype = filter.dtype ? *filter.dtype
                           : *rc::gen::weightedElement<DType>({{4, DType::Float32},
                                                               {2, DType::Float16},
                                                               {2, DType::BFloat16},
                                                               {1, DType::Float64}});
    if (*rc::gen::inRange(0, 2) == 1) {
      const int64_t most = std::min<int64_t>(2 * c.window + 1, 12);
      c.left_padding = *rc::gen::container<std::vector<int64_t>>(
          static_cast<size_t>(c.batch), rc::gen::inRange<int64_t>(0, most + 1));
    }
    c.seed = *rc::gen::arbitrary<uint32_t>();
    const int64_t limit = c.max_tokens = token_limit(c);
    // The first update must hold at least one real token per row.
    if (c.left_padding)
      for (int64_t& lp : *c.left_padding) lp = std::min(lp, limit - 1);
    return c;
  });
}

namespace {
// Token counts biased toward the window boundaries, where the branches change.
rc::Gen<int64_t> gen_count(const ScenarioConfig& c, int64_t at_least, int64_t room) {
  const int64_t w = c.window;
  std::vector<int64_t> near = {w - 1, w, w + 1, 2 * w + 1, at_least, room};
  std::vector<int64_t> fits;
  for (int64_t n : near)
    if (n >= at_least && n <= room) fits.push_back(n);
  if (room < at_least) return rc::gen::just(at_least);  // precondition rejects it
  auto any = rc::gen::inRange<int64_t>(at_least, room + 1);
  if (fits.empty()) return any;
  return rc::gen::oneOf(rc::gen::elementOf(fits), any);
}
}  // namespace

Prefill::Prefill(const CacheModel& m)
    : n(*gen_count(m.config, m.config.max_left_padding() + 1, m.config.max_tokens)) {}
void Prefill::checkPreconditions(const CacheModel& m) const {
  RC_PRE(m.seen == 0);
  RC_PRE(n > m.config.max_left_padding() && n <= m.config.max_tokens);
}
void Prefill::apply(CacheModel& m) const { m.seen += n; }
void Prefill::run(const CacheModel& m, SystemUnderTest& sut) const { sut.step(m.seen, n, "Prefill"); }
void Prefill::show(std::ostream& os) const { os << "Prefill(" << n << ")"; }

void Decode::checkPreconditions(const CacheModel& m) const {
  RC_PRE(m.seen > 0 && m.seen + 1 <= m.config.max_tokens);
}
void Decode::apply(CacheModel& m) const { m.seen += 1; }
void Decode::run(const CacheModel& m, SystemUnderTest& sut) const { sut.step(m.seen, 1, "Decode"); }
void Decode::show(std::ostream& os) const { os << "Decode"; }

Extend::Extend(const CacheModel& m)
    : n(*gen_count(m.config, 2, std::max<int64_t>(m.config.max_tokens - m.seen, 2))) {}
void Extend::checkPreconditions(const CacheModel& m) const {
  RC_PRE(m.seen > 0 && n >= 2 && m.seen + n <= m.config.max_tokens);
}
void Extend::apply(CacheModel& m) const { m.seen += n; }
void Extend::run(const CacheModel& m, SystemUnderTest& sut) const { sut.step(m.seen, n, "Extend"); }
void Extend::show(std::ostream& os) const { os << "Extend(" << n << ")"; }

void Reset::checkPreconditions(const CacheModel& m) const { RC_PRE(m.seen > 0); }
void Reset::apply(CacheModel& m) const { m.seen = 0; }
void Reset::run(const CacheModel&, SystemUnderTest& sut) const { sut.reset(); }
void Reset::show(std::ostream& os) const { os << "Reset"; }

}  // namespace kvc
