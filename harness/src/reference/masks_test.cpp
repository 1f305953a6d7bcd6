// Mask scenarios of transformers' tests/utils/test_masking_utils.py and the skip decision.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "kvconform/masks.h"
#include "kvconform/tensors.h"

namespace kvc::masks {
namespace {

std::vector<std::string> rows(const at::Tensor& mask, int64_t b) {
  std::vector<std::string> out;
  const at::Tensor m = mask[b][0];
  for (int64_t i = 0; i < m.size(0); ++i) {
    std::string s;
    for (int64_t j = 0; j < m.size(1); ++j) s += m[i][j].item<bool>() ? '1' : '0';
    out.push_back(s);
  }
  return out;
}

MaskRequest prefill(LayerType type, int64_t window, int64_t n) {
  MaskRequest m;
  m.type = type;
  m.window = window;
  for (int64_t i = 0; i < n; ++i) m.query_positions.push_back(i);
  m.sizes = {n, 0};
  m.seen_after = n;
  return m;
}

TEST(Masks, SlidingWindow3) {
  EXPECT_EQ(rows(boolean_mask(prefill(LayerType::Sliding, 3, 5)), 0),
            (std::vector<std::string>{"10000", "11000", "11100", "01110", "00111"}));
}

// Chunk 3 with 4 left-padding tokens on the second row: its chunks start at position 4.
TEST(Masks, ChunkedWithLeftPadding) {
  MaskRequest m = prefill(LayerType::Chunked, 3, 9);
  m.batch = 2;
  m.left_padding = std::vector<int64_t>{0, 4};
  const at::Tensor mask = boolean_mask(m);
  EXPECT_EQ(rows(mask, 0)[4], "000110000");
  EXPECT_EQ(rows(mask, 1), (std::vector<std::string>{"000000000", "000000000", "000000000", "000000000", "000010000", "000011000",
                                                     "000011100", "000000010", "000000011"}));
  MaskRequest wrong = m;
  EXPECT_NE(rows(boolean_mask(wrong, Mutation::ChunkIgnoresLeftPadding), 1), rows(mask, 1));
}

TEST(Masks, OffsetsMapColumnsToAbsolutePositions) {
  MaskRequest m;
  m.type = LayerType::Sliding;
  m.window = 3;
  m.query_positions = {6};
  m.sizes = {3, 4};  // keys 4, 5, 6
  m.seen_after = 7;
  EXPECT_EQ(rows(boolean_mask(m), 0), (std::vector<std::string>{"111"}));
  m.query_positions = {5, 6};
  m.sizes = {4, 3};  // keys 3..6
  EXPECT_EQ(rows(boolean_mask(m), 0), (std::vector<std::string>{"1110", "0111"}));
}

TEST(Masks, SkipOnlyWhenAllowedAndNothingLocalOrPadded) {
  MaskRequest m = prefill(LayerType::Full, 0, 4);
  EXPECT_FALSE(can_skip(m));  // static caches never skip
  m.allow_skip = true;
  EXPECT_TRUE(can_skip(m));
  m.left_padding = std::vector<int64_t>{0};
  EXPECT_TRUE(can_skip(m));  // an all-ones attention_mask still skips
  m.left_padding = std::vector<int64_t>{1};
  EXPECT_FALSE(can_skip(m));
  MaskRequest s = prefill(LayerType::Sliding, 4, 4);
  s.allow_skip = true;
  EXPECT_FALSE(can_skip(s));  // kv_length reaches the window
  s = prefill(LayerType::Sliding, 5, 4);
  s.allow_skip = true;
  EXPECT_TRUE(can_skip(s));
}

TEST(Masks, AdditiveFormUsesTheDtypeMinimumNotInfinity) {
  const at::Tensor b = boolean_mask(prefill(LayerType::Sliding, 2, 3));
  const at::Tensor half = additive_mask(b, at::kHalf);
  EXPECT_EQ(half[0][0][0][1].item<double>(), -65504.0);
  EXPECT_EQ(half[0][0][1][1].item<double>(), 0.0);
  EXPECT_EQ(additive_mask(b, at::kFloat)[0][0][2][0].item<float>(), std::numeric_limits<float>::lowest());
  EXPECT_TRUE(additive_mask(b, at::kBFloat16).isfinite().all().item<bool>());
}

TEST(Masks, BadInput) {
  MaskRequest m = prefill(LayerType::Sliding, 0, 2);
  EXPECT_THROW(boolean_mask(m), std::invalid_argument);
  m.window = 2;
  m.left_padding = std::vector<int64_t>{1, 2};
  EXPECT_THROW(boolean_mask(m), std::invalid_argument);
}

}  // namespace
}  // namespace kvc::masks
