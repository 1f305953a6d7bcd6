// The scenarios of transformers' tests/utils/test_cache_utils.py (B = H = D = 1, scalar values),
// and the bad inputs the reference must reject with a message instead of corrupting the cache.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "kvconform/reference.h"
#include "kvconform/tensors.h"

namespace kvc {
namespace {

at::Tensor seq(std::vector<double> v) { return from_values(v, {1, 1, static_cast<int64_t>(v.size()), 1}, DType::Float32); }
std::vector<double> flat(const at::Tensor& t) { return values_of(t); }

KV feed(CacheLayer& layer, std::vector<double> v) { return layer.update(seq(v), seq(v)); }

TEST(StaticSlidingLayer, TransformersExamplesWindow4) {
  const LayerSpec spec{CacheKind::Static, LayerType::Sliding, 4, 4};
  auto a = make_layer(spec);
  feed(*a, {1, 2});
  feed(*a, {3});
  EXPECT_EQ(flat(a->keys()), (std::vector<double>{1, 2, 3, 0}));

  auto b = make_layer(spec);
  feed(*b, {1, 2, 3, 4});
  EXPECT_EQ(flat(feed(*b, {5}).keys), (std::vector<double>{2, 3, 4, 5}));

  auto c = make_layer(spec);
  EXPECT_EQ(flat(feed(*c, {1, 2, 3, 4, 5, 6}).keys), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(flat(c->keys()), (std::vector<double>{3, 4, 5, 6}));
}

TEST(HybridCache, FullPlusSlidingWindow2) {
  auto cache = make_cache(CacheKind::Static, {LayerType::Full, LayerType::Sliding}, 2, 4);
  CacheLayer& sliding = *cache[1];
  EXPECT_EQ(sliding.get_mask_sizes(3), (MaskSizes{3, 0}));
  EXPECT_EQ(flat(feed(sliding, {10, 20, 30}).keys), (std::vector<double>{10, 20, 30}));
  EXPECT_EQ(flat(sliding.keys()), (std::vector<double>{20, 30}));
  EXPECT_EQ(flat(feed(sliding, {50}).keys), (std::vector<double>{30, 50}));
  EXPECT_EQ(flat(feed(*cache[0], {10, 20, 30}).keys), (std::vector<double>{10, 20, 30, 0}));
}

TEST(ChunkedLayer, MultiTokenUpdateAfterFull) {
  auto layer = make_layer({CacheKind::Static, LayerType::Chunked, 2, 4});
  feed(*layer, {10, 20, 30});
  feed(*layer, {50});
  EXPECT_EQ(layer->get_mask_sizes(2), (MaskSizes{3, 3}));
  EXPECT_EQ(flat(feed(*layer, {60, 70}).keys), (std::vector<double>{50, 60, 70}));
  EXPECT_EQ(flat(layer->keys()), (std::vector<double>{60, 70}));
}

TEST(DynamicSlidingLayer, KeepsWindowMinusOneRows) {
  auto layer = make_layer({CacheKind::Dynamic, LayerType::Sliding, 3, 0});
  EXPECT_EQ(flat(feed(*layer, {1, 2, 3, 4}).keys), (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(flat(layer->keys()), (std::vector<double>{3, 4}));
  EXPECT_EQ(layer->seq_length(), 4);
}

// Faithful to Python: keys[:, :, -1 + 1:] keeps everything (positions.h: upstream_deviation).
TEST(DynamicSlidingLayer, WindowOneKeepsEverythingLikePython) {
  auto layer = make_layer({CacheKind::Dynamic, LayerType::Sliding, 1, 0});
  feed(*layer, {1, 2});
  EXPECT_EQ(layer->get_mask_sizes(1), (MaskSizes{1, 2}));
  EXPECT_EQ(feed(*layer, {3}).keys.size(2), 3);
}

TEST(StaticFullLayer, CachePositionApiFallsBackToArangeWithoutPositions) {
  auto v5 = make_layer({CacheKind::Static, LayerType::Full, 0, 4}, behaviours_for_release("5.24.0"));
  auto v457 = make_layer({CacheKind::Static, LayerType::Full, 0, 4}, behaviours_for_release("4.57.6"));
  for (auto* l : {v5.get(), v457.get()}) {
    feed(*l, {1, 2});
    feed(*l, {3});
  }
  EXPECT_EQ(flat(v5->keys()), (std::vector<double>{1, 2, 3, 0}));
  EXPECT_EQ(flat(v457->keys()), (std::vector<double>{3, 2, 0, 0}));  // overwrote position 0
  EXPECT_EQ(v457->seq_length(), 2);                                  // 4.57 counts non-zero rows
  v457->update(seq({7}), seq({7}), std::vector<int64_t>{2});
  EXPECT_EQ(flat(v457->keys()), (std::vector<double>{3, 2, 7, 0}));
}

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "no exception";
}

TEST(BadInput, RejectedWithTheValuesNamed) {
  auto layer = make_layer({CacheKind::Static, LayerType::Sliding, 4, 8});
  EXPECT_NE(error_of([&] {
              layer->update(at::zeros({1, 1, 0, 1}), at::zeros({1, 1, 0, 1}));
            }).find("zero-token"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              layer->update(at::zeros({1, 1, 2, 1}), at::zeros({1, 1, 3, 1}));
            }).find("differ in shape"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              layer->update(at::zeros({1, 1, 2}), at::zeros({1, 1, 2}));
            }).find("expected [batch"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              layer->update(at::zeros({1, 1, 1, 1}), at::zeros({1, 1, 1, 1}, at::kHalf));
            }).find("values are"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              layer->update(at::zeros({1, 1, 1, 1}, at::kLong), at::zeros({1, 1, 1, 1}, at::kLong));
            }).find("floating"),
            std::string::npos);
  layer->update(at::ones({2, 1, 1, 4}), at::ones({2, 1, 1, 4}));
  EXPECT_NE(error_of([&] {
              layer->update(at::ones({3, 1, 1, 4}), at::ones({3, 1, 1, 4}));
            }).find("batch changed after initialisation: 2 -> 3"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              layer->update(at::ones({2, 2, 1, 4}), at::ones({2, 2, 1, 4}));
            }).find("kv_heads changed"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              layer->update(at::ones({2, 1, 1, 4}, at::kHalf), at::ones({2, 1, 1, 4}, at::kHalf));
            }).find("dtype changed"),
            std::string::npos);
  // A rejected update leaves the cache as it was.
  EXPECT_EQ(layer->cumulative_length(), 1);
  EXPECT_EQ(values_of(layer->keys().select(0, 0).select(0, 0).select(0, 0)), (std::vector<double>{1, 1, 1, 1}));

  auto full = make_layer({CacheKind::Static, LayerType::Full, 0, 2});
  EXPECT_NE(error_of([&] { full->update(seq({1, 2, 3}), seq({1, 2, 3})); }).find("position 2 is outside"), std::string::npos);
  EXPECT_THROW(make_layer({CacheKind::Static, LayerType::Sliding, 4, 0}), std::invalid_argument);
  EXPECT_THROW(make_layer({CacheKind::Dynamic, LayerType::Chunked, -2, 0}), std::invalid_argument);
}

// from_values fills tensors itself (golden replay's inputs, no copy kernel per step); each value
// must come out in the bytes torch's own double -> dtype copy gives, roundings and ties included.
TEST(FromValues, ConvertsEveryDtypeExactlyAsTorchDoes) {
  std::vector<double> values = {0.0,
                                -0.0,
                                1.0 / 3,
                                -2.5,
                                65504.0,
                                65520.0,
                                1e-8,
                                6e-8,
                                1e300,
                                -1e-300,
                                std::numeric_limits<double>::infinity(),
                                1.0 + 0x1p-11 + 0x1p-40};
  uint64_t x = 12345;
  for (int i = 0; i < 4000; ++i) {  // random doubles across many magnitudes
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    values.push_back(std::ldexp(static_cast<double>(x >> 11) / 0x1p53 - 0.5, static_cast<int>(x % 64) - 32));
  }
  for (DType d : {DType::Float32, DType::Float16, DType::BFloat16, DType::Float64}) {
    const at::Tensor ours = from_values(values, {static_cast<int64_t>(values.size())}, d);
    const at::Tensor torch_copy =
        at::tensor(at::ArrayRef<double>(values), at::TensorOptions().dtype(at::kDouble)).to(scalar_type(d));
    ASSERT_EQ(ours.scalar_type(), torch_copy.scalar_type());
    EXPECT_EQ(0, std::memcmp(ours.data_ptr(), torch_copy.data_ptr(), values.size() * ours.element_size())) << to_string(d);
  }
}

}  // namespace
}  // namespace kvc
