#include "kvconform/mask_request.h"

#include <stdexcept>
#include <string>

namespace kvc {

void MaskRequest::check() const {
  if (type != LayerType::Full && window <= 0)
    throw std::invalid_argument("mask: window must be positive, got " + std::to_string(window));
  if (left_padding && static_cast<int64_t>(left_padding->size()) != batch)
    throw std::invalid_argument("mask: left_padding has " + std::to_string(left_padding->size()) + " rows for batch " +
                                std::to_string(batch));
}

bool allow_is_causal_skip(const Behaviours& behaviours, CacheKind cache, int64_t query_length) {
  // Static caches are "compileable": never skipped, or only not on a decode step.
  const bool compileable = cache == CacheKind::Static;
  return behaviours.sdpa_skip == SdpaSkip::NotCompileable ? !compileable : !(compileable && query_length == 1);
}

void assign_mask_request(MaskRequest& m, const LayerSpec& spec, const Behaviours& behaviours, int64_t batch,
                         const LeftPadding& left_padding, int64_t t0, int64_t q,
                         const std::optional<std::vector<int64_t>>& cache_position, MaskSizes sizes, Mutation mutation) {
  m.type = spec.type;
  m.window = spec.window;
  m.batch = batch;
  if (cache_position) {
    m.query_positions.assign(cache_position->begin(), cache_position->end());
  } else {
    m.query_positions.resize(static_cast<size_t>(q));
    for (int64_t i = 0; i < q; ++i) m.query_positions[static_cast<size_t>(i)] = t0 + i;
  }
  m.sizes = sizes;
  m.left_padding = left_padding;
  m.seen_after = t0 + q;
  m.allow_skip = allow_is_causal_skip(behaviours, spec.cache, q);
  m.skip_empty_cache = behaviours.sdpa_skip_empty_cache;
  m.mutation = mutation;
}

MaskRequest mask_request(const LayerSpec& spec, const Behaviours& behaviours, int64_t batch, const LeftPadding& left_padding,
                         int64_t t0, int64_t q, const std::optional<std::vector<int64_t>>& cache_position, MaskSizes sizes,
                         Mutation mutation) {
  MaskRequest m;
  assign_mask_request(m, spec, behaviours, batch, left_padding, t0, q, cache_position, sizes, mutation);
  return m;
}

}  // namespace kvc
