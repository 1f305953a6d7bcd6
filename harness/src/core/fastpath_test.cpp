// The fast path against the documented rules (positions.h) on every short update sequence of small
// layers, transformers' own test examples, and each layer mutant shown to break the agreement.
#include <gtest/gtest.h>

#include <functional>

#include "kvconform/fastpath.h"
#include "kvconform/positions.h"

namespace kvc::fast {
namespace {

TokenRows rows(const positions::Rows& r) {
  TokenRows out;
  for (const auto& x : r) out.push_back(x ? *x : kUnwritten);
  return out;
}

TEST(FastLayer, TransformersExamplesWindow4) {
  Layer a({CacheKind::Static, LayerType::Sliding, 4, 4});
  TokenRows out;
  a.update(2, out);
  a.update(1, out);
  EXPECT_EQ(a.stored(), (TokenRows{0, 1, 2, kUnwritten}));
  Layer b({CacheKind::Static, LayerType::Sliding, 4, 4});
  b.update(4, out);
  b.update(1, out);
  EXPECT_EQ(out, (TokenRows{1, 2, 3, 4}));
  Layer c({CacheKind::Static, LayerType::Sliding, 4, 4});
  c.update(6, out);
  EXPECT_EQ(out, (TokenRows{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(c.stored(), (TokenRows{2, 3, 4, 5}));
  Layer d({CacheKind::Dynamic, LayerType::Sliding, 3, 0});
  d.update(4, out);
  EXPECT_EQ(out, (TokenRows{0, 1, 2, 3}));
  EXPECT_EQ(d.stored(), (TokenRows{2, 3}));
}

// Every sequence of updates of 1..4 tokens up to `total` tokens, on every layer kind with windows
// and cache lengths 1..5; `visit` sees each step and returns false on a disagreement.
using Visit = std::function<bool(Layer&, int64_t seen, int64_t q, const MaskSizes& sizes, const TokenRows& returned)>;
int64_t disagreements(Mutation mutation, const Visit& visit, int64_t total = 9) {
  int64_t bad = 0;
  for (CacheKind cache : {CacheKind::Static, CacheKind::Dynamic})
    for (LayerType type : {LayerType::Sliding, LayerType::Chunked, LayerType::Full})
      for (int64_t w = 1; w <= 5; ++w)
        for (int64_t l = 1; l <= 5; ++l) {
          const LayerSpec spec{cache, type, w, l};
          if (positions::upstream_deviation(spec)) continue;
          const int64_t limit =
              positions::max_total_tokens(spec) < 0 ? total : std::min(total, positions::max_total_tokens(spec));
          std::function<void(Layer, int64_t)> walk = [&](Layer layer, int64_t seen) {
            for (int64_t q = 1; q <= 4 && seen + q <= limit; ++q) {
              Layer next = layer;
              const MaskSizes sizes = next.get_mask_sizes(q);
              TokenRows returned;
              next.update(q, returned);
              if (!visit(next, seen, q, sizes, returned)) ++bad;
              else walk(next, seen + q);
            }
          };
          walk(Layer(spec, Behaviours{}, mutation), 0);
        }
  return bad;
}

bool stored_ok(Layer& l, int64_t seen, int64_t q, const MaskSizes&, const TokenRows&) {
  return l.stored() == rows(positions::stored_rows(l.spec(), seen + q));
}
bool returned_ok(Layer& l, int64_t seen, int64_t q, const MaskSizes& sizes, const TokenRows& returned) {
  return sizes == positions::mask_sizes(l.spec(), seen, q) && returned == rows(positions::returned_rows(l.spec(), seen, q));
}

TEST(FastLayer, AgreesWithTheDocumentedRulesOnEveryShortSequence) {
  EXPECT_EQ(disagreements(Mutation::None, stored_ok), 0);
  EXPECT_EQ(disagreements(Mutation::None, returned_ok), 0);
}

TEST(FastLayer, EveryLayerMutantBreaksTheAgreement) {
  EXPECT_GT(disagreements(Mutation::CapacityMax, stored_ok), 0);
  EXPECT_GT(disagreements(Mutation::BecomingFullKeepsFirst, stored_ok), 0);
  EXPECT_GT(disagreements(Mutation::DynamicKeepsWindow, stored_ok), 0);
  EXPECT_GT(disagreements(Mutation::ExtendAfterFullKeepsOldest, returned_ok), 0);
  EXPECT_GT(disagreements(Mutation::KvOffsetTooSmall, returned_ok), 0);
}

TEST(FastLayer, StaticWritesAtCachePositionOrTheApiDefault) {
  TokenRows out;
  const Behaviours v4 = behaviours_for_release("4.57.6");
  ASSERT_EQ(v4.cache_api, CacheApi::CachePosition);
  Layer arange({CacheKind::Static, LayerType::Full, 0, 4}, v4);
  arange.update(2, out);
  arange.update(1, out);  // the cache_position API without cache_position: arange(q) again
  EXPECT_EQ(arange.stored(), (TokenRows{2, 1, kUnwritten, kUnwritten}));
  Layer cumulative({CacheKind::Static, LayerType::Full, 0, 4});
  cumulative.update(2, out);
  cumulative.update(1, out);  // the query_length API: at the cumulative length
  EXPECT_EQ(cumulative.stored(), (TokenRows{0, 1, 2, kUnwritten}));
  Layer at({CacheKind::Static, LayerType::Full, 0, 4}, v4);
  const std::vector<int64_t> pos{3};
  at.update(1, out, &pos);
  EXPECT_EQ(at.stored(), (TokenRows{kUnwritten, kUnwritten, kUnwritten, 0}));
  const std::vector<int64_t> outside{4};
  EXPECT_THROW(at.update(1, out, &outside), std::out_of_range);
}

// 4.56's SlidingWindowLayer (sliding_layer pre_merge), branch by branch as layers_456_test.cpp
// checks the tensor layer: a prefill longer than the buffer returns only the new tokens, a
// multi-token update once full raises, and there is no update without cache_position.
TEST(FastLayer, PreMergeSlidingLayer) {
  const Behaviours b456 = behaviours_for_release("4.56.2");
  ASSERT_EQ(b456.sliding_layer, SlidingLayer::PreMerge);
  const LayerSpec spec{CacheKind::Static, LayerType::Sliding, 3, 8};
  auto positions = [](int64_t from, int64_t n) {
    std::vector<int64_t> p;
    for (int64_t i = 0; i < n; ++i) p.push_back(from + i);
    return p;
  };
  TokenRows out;
  Layer long_prefill(spec, b456);
  EXPECT_EQ(long_prefill.mask_sizes_for_positions(positions(0, 5)), (MaskSizes{5, 0}));
  const auto p5 = positions(0, 5);
  long_prefill.update(5, out, &p5);
  EXPECT_EQ(out, (TokenRows{0, 1, 2, 3, 4}));
  EXPECT_EQ(long_prefill.stored(), (TokenRows{2, 3, 4}));
  const auto p1 = positions(5, 1);
  EXPECT_EQ(long_prefill.mask_sizes_for_positions(p1), (MaskSizes{3, 3}));
  long_prefill.update(1, out, &p1);
  EXPECT_EQ(out, (TokenRows{3, 4, 5}));
  const auto p2 = positions(6, 2);
  EXPECT_THROW(long_prefill.update(2, out, &p2), std::runtime_error);
  EXPECT_EQ(long_prefill.cumulative(), 8);  // Python counts before it raises
  Layer in_place(spec, b456);
  const auto p0 = positions(0, 2);
  in_place.update(2, out, &p0);
  EXPECT_EQ(out, (TokenRows{0, 1, kUnwritten}));
  EXPECT_THROW(in_place.update(1, out), std::invalid_argument);
  // ChunkedSlidingLayer: the merged layer's update, mask sizes from the first cache position.
  Layer chunked({CacheKind::Static, LayerType::Chunked, 3, 8}, b456);
  EXPECT_EQ(chunked.mask_sizes_for_positions(positions(4, 1)), (MaskSizes{3, 2}));
  EXPECT_EQ(chunked.get_mask_sizes(1), (MaskSizes{3, 0}));
}

// Mask mutations and the static mutants do not touch the pre-merge layers (make_mutant_layer).
TEST(FastLayer, StaticMutantsLeaveThePreMergeLayersAlone) {
  const Behaviours b456 = behaviours_for_release("4.56.2");
  Layer mutant({CacheKind::Static, LayerType::Chunked, 2, 8}, b456, Mutation::CapacityMax);
  TokenRows out;
  mutant.update(3, out);
  EXPECT_EQ(mutant.stored(), (TokenRows{1, 2}));
}

// The fast engine (fast_engine.cpp) finds the keys a query may see as one run ending at the
// query whose start never moves back as the query advances; that holds of every window rule.
TEST(WindowRule, AllowsOneRunEndingAtTheQueryThatOnlyMovesForward) {
  for (LayerType type : {LayerType::Sliding, LayerType::Chunked, LayerType::Full})
    for (int64_t w = 1; w <= 6; ++w)
      for (int64_t lp = 0; lp <= 4; ++lp) {
        int64_t previous_start = 0;
        for (int64_t q = 0; q <= 24; ++q) {
          int64_t start = q + 1;
          for (int64_t k = 0; k <= q; ++k)
            if (positions::window_allows(type, w, lp, q, k)) start = std::min(start, k);
          for (int64_t k = start; k <= q; ++k)
            EXPECT_TRUE(positions::window_allows(type, w, lp, q, k)) << to_string(type) << " W=" << w << " q=" << q;
          EXPECT_GE(start, previous_start) << to_string(type) << " W=" << w << " lp=" << lp << " q=" << q;
          previous_start = start;
        }
      }
}

// The mask over absolute positions against positions::window_allows, and each mask mutant.
int64_t mask_disagreements(Mutation mutation) {
  int64_t bad = 0;
  for (LayerType type : {LayerType::Sliding, LayerType::Chunked, LayerType::Full})
    for (int64_t w = 1; w <= 5; ++w)
      for (int64_t lp : {0, 1, 3})
        for (int64_t seen = 0; seen <= 6; ++seen)
          for (int64_t q = 1; q <= 3; ++q) {
            const std::vector<int64_t> padding{lp, 0};
            MaskRequest m;
            m.type = type;
            m.window = w;
            m.batch = 2;
            for (int64_t i = 0; i < q; ++i) m.query_positions.push_back(seen + i);
            m.sizes = {seen + q, 0};
            m.left_padding = padding;
            m.seen_after = seen + q;
            std::vector<uint8_t> mask;
            boolean_mask(m, mask, mutation);
            for (int64_t b = 0; b < 2; ++b)
              for (int64_t i = 0; i < q; ++i)
                for (int64_t k = 0; k < seen + q; ++k) {
                  const int64_t pad = padding[static_cast<size_t>(b)];
                  const bool want = k >= pad && positions::window_allows(type, w, pad, seen + i, k);
                  bad += mask[static_cast<size_t>((b * q + i) * (seen + q) + k)] != want;
                }
          }
  return bad;
}

TEST(FastMask, MatchesTheWindowRuleAndCatchesMaskMutants) {
  EXPECT_EQ(mask_disagreements(Mutation::None), 0);
  EXPECT_GT(mask_disagreements(Mutation::WindowTooWide), 0);
  EXPECT_GT(mask_disagreements(Mutation::ChunkIgnoresLeftPadding), 0);
}

TEST(FastMask, SkipDecisions) {
  MaskRequest m;
  m.type = LayerType::Sliding;
  m.window = 8;
  m.query_positions = {5};
  m.sizes = {6, 0};
  m.seen_after = 6;
  const Behaviours v5, v4 = behaviours_for_release("4.57.6");
  m.allow_skip = allow_is_causal_skip(v5, CacheKind::Dynamic, 1);
  EXPECT_TRUE(skips(m));  // a decode that sees every key
  m.sizes = {8, 0};
  EXPECT_FALSE(skips(m));  // the window shows
  EXPECT_FALSE(allow_is_causal_skip(v5, CacheKind::Static, 1));
  EXPECT_TRUE(allow_is_causal_skip(v5, CacheKind::Static, 3));
  EXPECT_FALSE(allow_is_causal_skip(v4, CacheKind::Static, 3));
  // sdpa_skip_empty_cache: a prefill into a static buffer leaves the unwritten tail to is_causal.
  m.query_positions = {0, 1, 2};
  m.sizes = {6, 0};
  m.seen_after = 3;
  m.allow_skip = true;
  EXPECT_TRUE(skips(m));
  m.skip_empty_cache = false;
  EXPECT_FALSE(skips(m));
}

TEST(FastMask, AdditiveBytesAreZeroOrTheDtypeMinimum) {
  std::string bytes;
  additive_mask_bytes({1, 0}, DType::BFloat16, bytes);
  EXPECT_EQ(bytes, std::string("\x00\x00\x7f\xff", 4));
  additive_mask_bytes({0}, DType::Float32, bytes);
  EXPECT_EQ(bytes, std::string("\xff\xff\x7f\xff", 4));
}

}  // namespace
}  // namespace kvc::fast
