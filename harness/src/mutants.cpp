// The mutant layers: each differs from the reference in exactly one named step.
#include <ATen/ATen.h>

#include <stdexcept>

#include "layers_impl.h"

namespace kvc {

namespace {
using detail::DynamicSlidingLayer;
using detail::StaticSlidingLayer;

struct ExtendAfterFullKeepsOldest : StaticSlidingLayer {
  using StaticSlidingLayer::StaticSlidingLayer;
  at::Tensor kept_when_full(const at::Tensor& buffer) const override { return buffer; }
};

struct KvOffsetTooSmall : StaticSlidingLayer {
  using StaticSlidingLayer::StaticSlidingLayer;
  MaskSizes get_mask_sizes(int64_t q) const override {
    MaskSizes m = StaticSlidingLayer::get_mask_sizes(q);
    if (m.kv_offset > 0) m.kv_offset -= 1;
    return m;
  }
};

struct BecomingFullKeepsFirst : StaticSlidingLayer {
  using StaticSlidingLayer::StaticSlidingLayer;
  at::Tensor rows_to_store(const at::Tensor& full, bool becoming_full) const override {
    return becoming_full ? full.slice(2, 0, capacity()) : StaticSlidingLayer::rows_to_store(full, false);
  }
};

struct CapacityMax : StaticSlidingLayer {
  using StaticSlidingLayer::StaticSlidingLayer;
  int64_t capacity() const override { return std::max(spec_.window, spec_.max_cache_len); }
};

struct DynamicKeepsWindow : DynamicSlidingLayer {
  using DynamicSlidingLayer::DynamicSlidingLayer;
  int64_t kept_rows() const override { return spec_.window; }
};

template <typename T>
std::unique_ptr<CacheLayer> only_if(bool applies, const LayerSpec& spec, const Behaviours& b) {
  return applies ? std::make_unique<T>(spec, b) : nullptr;
}
}  // namespace

// nullptr when the mutation does not touch this kind of layer (the reference is used instead).
std::unique_ptr<CacheLayer> make_mutant_layer(const LayerSpec& spec, const Behaviours& b, Mutation mutation) {
  // The static mutants are variants of the merged layer (4.57+); the pre-merge layers have none.
  const bool static_sliding =
      spec.cache == CacheKind::Static && spec.is_sliding() && b.sliding_layer == SlidingLayer::Merged;
  const bool dynamic_sliding = spec.cache == CacheKind::Dynamic && spec.is_sliding();
  switch (mutation) {
    case Mutation::ExtendAfterFullKeepsOldest: return only_if<ExtendAfterFullKeepsOldest>(static_sliding, spec, b);
    case Mutation::KvOffsetTooSmall: return only_if<KvOffsetTooSmall>(static_sliding, spec, b);
    case Mutation::BecomingFullKeepsFirst: return only_if<BecomingFullKeepsFirst>(static_sliding, spec, b);
    case Mutation::CapacityMax: return only_if<CapacityMax>(static_sliding, spec, b);
    case Mutation::DynamicKeepsWindow: return only_if<DynamicKeepsWindow>(dynamic_sliding, spec, b);
    default: return nullptr;  // mask mutations live in masks.cpp
  }
}

const char* to_string(Mutation m) {
  switch (m) {
    case Mutation::None: return "none";
    case Mutation::WindowTooWide: return "window_too_wide";
    case Mutation::ExtendAfterFullKeepsOldest: return "extend_after_full_keeps_oldest";
    case Mutation::KvOffsetTooSmall: return "kv_offset_too_small";
    case Mutation::BecomingFullKeepsFirst: return "becoming_full_keeps_first";
    case Mutation::DynamicKeepsWindow: return "dynamic_keeps_window";
    case Mutation::ChunkIgnoresLeftPadding: return "chunk_ignores_left_padding";
    case Mutation::CapacityMax: return "capacity_max";
  }
  return "?";
}

std::vector<Mutation> all_mutations() {
  return {Mutation::WindowTooWide,         Mutation::ExtendAfterFullKeepsOldest, Mutation::KvOffsetTooSmall,
          Mutation::BecomingFullKeepsFirst, Mutation::DynamicKeepsWindow,        Mutation::ChunkIgnoresLeftPadding,
          Mutation::CapacityMax};
}

Mutation parse_mutation(const std::string& s) {
  if (s == "none") return Mutation::None;
  std::string names;
  for (Mutation m : all_mutations()) {
    if (s == to_string(m)) return m;
    names += std::string(names.empty() ? "" : ", ") + to_string(m);
  }
  throw std::invalid_argument("unknown mutant '" + s + "' (expected one of: none, " + names + ")");
}

}  // namespace kvc
