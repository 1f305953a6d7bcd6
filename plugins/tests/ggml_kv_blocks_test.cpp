// The same-dtype reference's quantized K/V (kvconform/engine/kv_blocks.h) against the ggml it mirrors:
// every row rounded by the header equals the row ggml's CPU backend stores (the type's from_float,
// as ggml_set_rows writes a cache row) and reads back (to_float), bit for bit. Rows from a seeded
// generator at several scales, plus the rows that test the rounding rules: values at exact halves of
// the q8_0 step (ties), a block whose largest magnitude is negative or repeated (q4_0's sign), a
// zero block, and scales whose float16 rounding matters.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "ggml-cpu.h"
#include "ggml.h"
#include "kvconform/engine/kv_blocks.h"

namespace {

using kvc::engine::KvBlock;

std::vector<float> through_ggml(const std::vector<float>& row, ggml_type type) {
  std::vector<uint8_t> blocks(ggml_row_size(type, static_cast<int64_t>(row.size())));
  ggml_get_type_traits_cpu(type)->from_float(row.data(), blocks.data(), static_cast<int64_t>(row.size()));
  std::vector<float> out(row.size());
  ggml_get_type_traits(type)->to_float(blocks.data(), out.data(), static_cast<int64_t>(row.size()));
  return out;
}

std::vector<float> through_header(std::vector<float> row, KvBlock format) {
  kvc::engine::round_kv_blocks(row.data(), static_cast<int64_t>(row.size()), format);
  return row;
}

std::vector<std::vector<float>> rows() {
  std::vector<std::vector<float>> out;
  std::mt19937 gen(53);
  for (float scale : {1e-3f, 0.37f, 1.0f, 2.5f, 40.0f, 3e4f}) {
    std::normal_distribution<float> normal(0.0f, scale);
    for (int r = 0; r < 40; ++r) {
      std::vector<float> row(128);
      for (float& x : row) x = normal(gen);
      out.push_back(row);
    }
  }
  // Ties: amax 127 makes the q8_0 multiplier exactly 1, so k + 0.5 is a tie (to even: 2, -2, 4).
  std::vector<float> ties(32, 0.0f);
  ties[0] = 127.0f, ties[1] = 2.5f, ties[2] = -2.5f, ties[3] = 3.5f, ties[4] = 0.5f, ties[5] = -126.5f;
  out.push_back(ties);
  // q4_0's scale takes the sign of the first value of largest magnitude.
  std::vector<float> negative(32, 0.25f);
  negative[7] = -3.0f, negative[9] = 3.0f, negative[11] = 1.4f;
  out.push_back(negative);
  std::vector<float> positive(32, -0.5f);
  positive[3] = 2.0f, positive[4] = -2.0f;
  out.push_back(positive);
  out.push_back(std::vector<float>(32, 0.0f));
  // A scale whose float16 rounding moves the stored values (d = 1/3 is no float16).
  std::vector<float> third(32);
  for (int j = 0; j < 32; ++j) third[static_cast<size_t>(j)] = (j - 16) * (127.0f / 3.0f) / 16.0f;
  out.push_back(third);
  return out;
}

void expect_bitwise_equal(const std::vector<float>& ggml, const std::vector<float>& header, size_t row) {
  ASSERT_EQ(ggml.size(), header.size());
  for (size_t j = 0; j < ggml.size(); ++j)
    ASSERT_EQ(0, std::memcmp(&ggml[j], &header[j], sizeof(float)))
        << "row " << row << " value " << j << ": ggml " << ggml[j] << ", kv_blocks.h " << header[j];
}

TEST(KvBlocks, Q8_0RowsEqualGgmlsStoredRowsBitForBit) {
  ggml_cpu_init();
  const auto all = rows();
  for (size_t i = 0; i < all.size(); ++i)
    expect_bitwise_equal(through_ggml(all[i], GGML_TYPE_Q8_0), through_header(all[i], KvBlock::Q8_0), i);
}

TEST(KvBlocks, Q4_0RowsEqualGgmlsStoredRowsBitForBit) {
  ggml_cpu_init();
  const auto all = rows();
  for (size_t i = 0; i < all.size(); ++i)
    expect_bitwise_equal(through_ggml(all[i], GGML_TYPE_Q4_0), through_header(all[i], KvBlock::Q4_0), i);
}

// The rounding moves values (else the two tests above would pass with an identity).
TEST(KvBlocks, TheFormatsRoundAndQ4_0IsCoarser) {
  const auto row = rows()[40];
  double e8 = 0, e4 = 0;
  const auto q8 = through_header(row, KvBlock::Q8_0), q4 = through_header(row, KvBlock::Q4_0);
  for (size_t j = 0; j < row.size(); ++j)
    e8 = std::max(e8, double(std::abs(q8[j] - row[j]))), e4 = std::max(e4, double(std::abs(q4[j] - row[j])));
  EXPECT_GT(e8, 0.0);
  EXPECT_GT(e4, 8 * e8);
  EXPECT_EQ(through_header(row, KvBlock::None), row);
}

}  // namespace
