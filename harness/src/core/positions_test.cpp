#include <gtest/gtest.h>

#include "kvconform/positions.h"

namespace kvc::positions {
namespace {

const LayerSpec kStatic4{CacheKind::Static, LayerType::Sliding, 4, 4};
const LayerSpec kDynamic4{CacheKind::Dynamic, LayerType::Sliding, 4, 0};

Rows r(std::initializer_list<int64_t> v) {
  Rows out;
  for (int64_t x : v) out.push_back(x < 0 ? std::nullopt : std::optional<int64_t>(x));
  return out;
}

TEST(Positions, CapacityIsMinOfWindowAndMaxCacheLen) {
  EXPECT_EQ(capacity({CacheKind::Static, LayerType::Sliding, 4, 8}), 4);
  EXPECT_EQ(capacity({CacheKind::Static, LayerType::Chunked, 8, 3}), 3);
  EXPECT_EQ(capacity(kDynamic4), 3);
  EXPECT_EQ(capacity({CacheKind::Dynamic, LayerType::Full, 0, 0}), -1);
}

// The four branches of the static layer's get_mask_sizes (docs/rules.md, section 1).
TEST(Positions, StaticMaskSizesPerBranch) {
  EXPECT_EQ(mask_sizes(kStatic4, 0, 2), (MaskSizes{4, 0}));  // in place, room left
  EXPECT_EQ(mask_sizes(kStatic4, 2, 3), (MaskSizes{5, 0}));  // becoming full
  EXPECT_EQ(mask_sizes(kStatic4, 4, 1), (MaskSizes{4, 1}));  // full, decode
  EXPECT_EQ(mask_sizes(kStatic4, 6, 3), (MaskSizes{6, 3}));  // full, several tokens
}

TEST(Positions, DynamicMaskSizes) {
  EXPECT_EQ(mask_sizes(kDynamic4, 2, 1), (MaskSizes{3, 0}));
  EXPECT_EQ(mask_sizes(kDynamic4, 4, 1), (MaskSizes{4, 1}));
  EXPECT_EQ(mask_sizes(kDynamic4, 9, 2), (MaskSizes{5, 6}));
}

// transformers' tests: W = max_cache_len = 4; prefill [1,2] then 3 stores [1,2,3,0].
TEST(Positions, StoredRowsMatchTransformersExamples) {
  EXPECT_EQ(stored_rows(kStatic4, 3), r({0, 1, 2, -1}));
  EXPECT_EQ(stored_rows(kStatic4, 5), r({1, 2, 3, 4}));
  EXPECT_EQ(stored_rows(kStatic4, 6), r({2, 3, 4, 5}));
  EXPECT_EQ(stored_rows(kDynamic4, 6), r({3, 4, 5}));
}

TEST(Positions, ReturnedRowsFollowMaskSizes) {
  EXPECT_EQ(returned_rows(kStatic4, 0, 2), r({0, 1, -1, -1}));
  EXPECT_EQ(returned_rows(kStatic4, 4, 2), r({1, 2, 3, 4, 5}));
}

TEST(Positions, WindowRules) {
  EXPECT_TRUE(window_allows(LayerType::Sliding, 3, 0, 5, 3));
  EXPECT_FALSE(window_allows(LayerType::Sliding, 3, 0, 5, 2));  // q - W < k: the query plus W - 1
  EXPECT_FALSE(window_allows(LayerType::Sliding, 3, 0, 5, 6));  // causal
  EXPECT_TRUE(window_allows(LayerType::Chunked, 3, 0, 5, 3));
  EXPECT_FALSE(window_allows(LayerType::Chunked, 3, 0, 3, 2));
  // Chunk boundaries start after the left padding: with 4 pads and chunk 3, chunks are 4-6, 7-9.
  EXPECT_TRUE(window_allows(LayerType::Chunked, 3, 4, 6, 4));
  EXPECT_FALSE(window_allows(LayerType::Chunked, 3, 4, 7, 6));
  EXPECT_TRUE(window_allows(LayerType::Full, 0, 0, 9, 0));
}

TEST(Positions, FloorDivisionMatchesPython) {
  EXPECT_EQ(floor_div(-1, 3), -1);
  EXPECT_EQ(floor_div(-3, 3), -1);
  EXPECT_EQ(floor_div(-4, 3), -2);
  EXPECT_EQ(floor_div(4, 3), 1);
}

TEST(Positions, KnownUpstreamDeviation) {
  EXPECT_TRUE(upstream_deviation({CacheKind::Dynamic, LayerType::Sliding, 1, 0}).has_value());
  EXPECT_FALSE(upstream_deviation(kDynamic4).has_value());
}

TEST(Positions, SpecValidationNamesTheValue) {
  try {
    LayerSpec{CacheKind::Static, LayerType::Sliding, 0, 4}.validate();
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("window must be positive, got 0"), std::string::npos);
  }
  EXPECT_THROW((LayerSpec{CacheKind::Static, LayerType::Full, 4, -1}.validate()), std::invalid_argument);
  EXPECT_THROW(parse_dtype("fp8"), std::invalid_argument);
}

}  // namespace
}  // namespace kvc::positions
