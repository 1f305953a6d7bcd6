// The fast path (fastpath.h, plain C++) against the LibTorch reference (reference.h, masks.h): two
// separate implementations of the same transformers code. On generated traces of every layer kind,
// for every behaviour generation of the release table and every mutant, they must agree on every
// mask size, returned and stored row, raise (by exception type), boolean mask, skip decision and
// eager-mask byte.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <typeinfo>

#include "kvconform/behaviours.h"
#include "kvconform/fastpath.h"
#include "kvconform/inputs.h"
#include "kvconform/masks.h"
#include "kvconform/reference.h"
#include "kvconform/tensors.h"

namespace kvc {
namespace {

// The distinct Behaviours of the release table, each with the first release that has it.
std::vector<std::pair<std::string, Behaviours>> generations() {
  std::vector<std::pair<std::string, Behaviours>> out;
  for (const ReleaseRow& row : release_table()) {
    bool seen = false;
    for (const auto& g : out) seen = seen || g.second == row.behaviours;
    if (!seen) out.emplace_back(row.first, row.behaviours);
  }
  return out;
}

fast::TokenRows tag_rows(const at::Tensor& tags) {
  fast::TokenRows rows;
  for (double v : values_of(tags)) rows.push_back(static_cast<int64_t>(v) - 1);  // 0 (unwritten) -> -1
  return rows;
}

const char* kind_of(const std::exception& e) {
  if (dynamic_cast<const std::out_of_range*>(&e)) return "out_of_range";
  if (dynamic_cast<const std::invalid_argument*>(&e)) return "invalid_argument";
  return "runtime_error";
}

struct Draw {
  uint64_t state;
  int64_t operator()(int64_t lo, int64_t hi) {  // uniform in [lo, hi]
    return lo + static_cast<int64_t>(inputs::mix64(++state) % static_cast<uint64_t>(hi - lo + 1));
  }
};

struct Tally {
  int64_t compared = 0, differences = 0;
  std::string first;  // the first difference, for the failure message
  void differ(bool differs, const std::string& what) {
    if (!differs) return;
    if (differences++ == 0) first = what;
  }
};

// One random trace through both implementations: the fast path with `fast_mutation`, the tensor
// reference with `tensor_mutation` (equal for the agreement test; different to show that the
// comparison catches a wrong implementation).
void compare_trace(Draw& draw, const std::string& release, const Behaviours& b, Mutation fast_mutation, Mutation tensor_mutation,
                   Tally& tally) {
  const CacheKind cache = draw(0, 1) ? CacheKind::Static : CacheKind::Dynamic;
  const LayerType type = static_cast<LayerType>(draw(0, 2));
  const LayerSpec spec{cache, type, draw(1, 6), draw(1, 8)};
  const DType dtype = static_cast<DType>(draw(0, 3));
  const int64_t batch = draw(1, 2);
  LeftPadding padding;
  if (draw(0, 1)) {
    padding.emplace();
    for (int64_t r = 0; r < batch; ++r) padding->push_back(draw(0, 3));
  }
  const std::string where = release + " " + to_string(tensor_mutation) + " " + spec.describe();
  auto tagged = make_layer(spec, b, tensor_mutation);
  fast::Layer layer(spec, b, fast_mutation);
  fast::TokenRows returned;
  std::vector<uint8_t> fmask;
  std::string fbytes;
  int64_t seen = 0;
  for (int step = 0; step < 12; ++step) {
    const int64_t q = seen == 0 ? draw(1, 6) : draw(1, 3);
    // The cache_position API passes positions: arange from the cumulative length, or now and then a
    // case's own (also past a static buffer, to compare the raises).
    std::optional<std::vector<int64_t>> pos;
    if (b.cache_api == CacheApi::CachePosition) {
      const int64_t from = draw(0, 5) == 0 ? draw(0, seen + 2) : seen;
      pos.emplace();
      for (int64_t i = 0; i < q; ++i) pos->push_back(from + i);
    }
    const std::string at_step = where + " step " + std::to_string(step) + " q " + std::to_string(q) + ": ";
    const int64_t before = tally.differences;
    const MaskSizes sizes = pos ? tagged->mask_sizes_for_positions(*pos) : tagged->get_mask_sizes(q);
    tally.differ((pos ? layer.mask_sizes_for_positions(*pos) : layer.get_mask_sizes(q)) != sizes, at_step + "mask sizes");

    // The masks, as run_case builds them for this step (from the reference's sizes).
    MaskRequest m;  // built by hand here, by mask_request() for the fast path
    m.type = type;
    m.window = spec.window;
    m.batch = batch;
    for (int64_t i = 0; i < q; ++i) m.query_positions.push_back(pos ? (*pos)[static_cast<size_t>(i)] : seen + i);
    m.sizes = sizes;
    m.left_padding = padding;
    m.seen_after = seen + q;
    m.skip_empty_cache = b.sdpa_skip_empty_cache;
    m.allow_skip = allow_is_causal_skip(b, cache, q);
    m.mutation = tensor_mutation;
    const MaskRequest f = mask_request(spec, b, batch, padding, seen, q, pos, sizes, fast_mutation);
    tally.differ(f.allow_skip != m.allow_skip, at_step + "allow_is_causal_skip");
    const at::Tensor boolean = masks::boolean_mask(m);
    fast::boolean_mask(f, fmask);
    const at::Tensor flat = boolean.to(at::kByte).contiguous().view(-1);
    tally.differ(std::vector<uint8_t>(flat.data_ptr<uint8_t>(), flat.data_ptr<uint8_t>() + flat.numel()) != fmask,
                 at_step + "boolean mask");
    tally.differ(fast::skips(f) != masks::can_skip(m), at_step + "sdpa mask skipped");
    const at::Tensor additive = masks::additive_mask(boolean, scalar_type(dtype)).contiguous();
    fast::additive_mask_bytes(fmask, dtype, fbytes);
    tally.differ(std::string(static_cast<const char*>(additive.data_ptr()), additive.numel() * additive.element_size()) != fbytes,
                 at_step + "eager mask bytes");

    const at::Tensor tag = at::arange(seen + 1, seen + q + 1, at::kDouble).view({1, 1, q, 1});
    std::string tensor_raise, fast_raise;
    fast::TokenRows want;
    try {
      want = tag_rows(tagged->update(tag, tag, pos).keys);
    } catch (const std::exception& e) {
      tensor_raise = kind_of(e);
    }
    try {
      layer.update(q, returned, pos ? &*pos : nullptr);
    } catch (const std::exception& e) {
      fast_raise = kind_of(e);
    }
    tally.differ(fast_raise != tensor_raise, at_step + "raise: fast '" + fast_raise + "', tensor '" + tensor_raise + "'");
    tally.differ(layer.cumulative() != tagged->cumulative_length(), at_step + "cumulative length");
    ++tally.compared;
    if (!tensor_raise.empty() || !fast_raise.empty()) return;
    tally.differ(returned != want, at_step + "returned rows");
    tally.differ(layer.stored() != tag_rows(tagged->keys()), at_step + "stored rows");
    if (tally.differences > before) return;  // the states have parted: the rest of the trace says nothing
    seen += q;
  }
}

std::vector<Mutation> with_none() {
  std::vector<Mutation> m = all_mutations();
  m.insert(m.begin(), Mutation::None);
  return m;
}

TEST(FastPath, AgreesWithTheTensorReferenceForEveryBehaviourGeneration) {
  const auto gens = generations();
  ASSERT_GE(gens.size(), 4u);  // 4.56 pre-merge, 4.57 cache_position, 5.x query_length and its SDPA rows
  bool pre_merge = false;
  for (const auto& [release, b] : gens) {
    pre_merge = pre_merge || b.sliding_layer == SlidingLayer::PreMerge;
    for (Mutation mutation : with_none()) {  // a mutant is the same mutant on both engines
      Draw draw{inputs::mix64(release.size() * 131 + static_cast<uint64_t>(mutation))};
      Tally tally;
      const int traces = mutation == Mutation::None ? 150 : 30;
      for (int t = 0; t < traces; ++t) compare_trace(draw, release, b, mutation, mutation, tally);
      EXPECT_EQ(tally.differences, 0) << tally.first;
      EXPECT_GT(tally.compared, 2 * traces) << release << " " << to_string(mutation);
    }
  }
  EXPECT_TRUE(pre_merge) << "the release table has no pre-merge generation any more: the fast path's is untested";
}

// The comparison can fail: against each mutant of the reference, the unmutated fast path differs
// somewhere (for the static mutants, under a release that has the merged layer they change).
TEST(FastPath, ComparisonCatchesEveryMutantOfTheReference) {
  const Behaviours newest{};
  for (Mutation mutation : all_mutations()) {
    Draw draw{inputs::mix64(static_cast<uint64_t>(mutation) + 1)};
    Tally tally;
    for (int t = 0; t < 200; ++t) compare_trace(draw, "newest", newest, Mutation::None, mutation, tally);
    EXPECT_GT(tally.differences, 0) << to_string(mutation) << " agreed with the unmutated fast path";
  }
}

}  // namespace
}  // namespace kvc
