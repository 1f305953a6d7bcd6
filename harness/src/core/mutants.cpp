// Names of the deliberately wrong implementations (mutants.h). The mutant layers live in
// layers.cpp (LibTorch), the mutant masks in masks.cpp and fastpath.cpp; this file stays
// torch-free so that the fast path and torch-free tools can name them too.
#include "kvconform/mutants.h"

#include <iostream>
#include <stdexcept>

namespace kvc {

// "window_off_by_one+1", ... (mutants.h): a mistake the engine level also has is named as the engine
// mutant and the diagnosis name it (docs/mutants.md).
const char* to_string(Mutation m) {
  switch (m) {
    case Mutation::None: return "none";
    case Mutation::WindowTooWide: return "window_off_by_one+1";
    case Mutation::ExtendAfterFullKeepsOldest: return "extend_after_full_keeps_oldest";
    case Mutation::KvOffsetTooSmall: return "kv_offset_too_small";
    case Mutation::BecomingFullKeepsFirst: return "becoming_full_keeps_first";
    case Mutation::DynamicKeepsWindow: return "dynamic_keeps_window";
    case Mutation::ChunkIgnoresLeftPadding: return "chunk_ignores_left_padding";
    case Mutation::CapacityMax: return "capacity_max";
    case Mutation::KernelSoftmaxInInputDtype: return "kernel_softmax_in_input_dtype";
    case Mutation::KernelF16Accumulation: return "kernel_f16_accumulation";
    case Mutation::KernelNoMaxSubtraction: return "kernel_no_max_subtraction";
    case Mutation::CropKeepsPastRows: return "crop_keeps_past_rows";
    case Mutation::StaticCropKeepsWritePosition: return "static_crop_keeps_write_position";
    case Mutation::ResetDropsRows: return "reset_drops_rows";
    case Mutation::StaticResetKeepsCount: return "static_reset_keeps_count";
    case Mutation::AlwaysCroppable: return "always_croppable";
    case Mutation::PastRecordingIgnored: return "past_recording_ignored";
    case Mutation::PositiveCropAccepted: return "positive_crop_accepted";
    case Mutation::BuilderSizedFromOwnLayer: return "builder_sized_from_own_layer";
    case Mutation::BuilderOffsetFromSizedLayer: return "builder_offset_from_sized_layer";
    case Mutation::FlexWithoutQueryOffset: return "flex_without_query_offset";
    case Mutation::BuilderWithoutCacheSizedByStep: return "builder_without_cache_sized_by_step";
    case Mutation::BuilderPackedAcrossDocuments: return "builder_packed_across_documents";
    case Mutation::BuilderIgnoresLayerIdx: return "builder_ignores_layer_idx";
    case Mutation::BuilderWithoutAndMask: return "builder_without_and_mask";
    case Mutation::BuilderWithoutOrMask: return "builder_without_or_mask";
    case Mutation::Builder4dMaskRebuilt: return "builder_4d_mask_rebuilt";
    case Mutation::FlashMaskUncut: return "flash_mask_uncut";
    case Mutation::BuilderWithoutBlockOverlay: return "builder_without_block_overlay";
    case Mutation::BuilderAcceptsNonCallable: return "builder_accepts_non_callable";
    case Mutation::BuilderAbsentTypeAsFull: return "builder_absent_type_as_full";
    case Mutation::UnregisteredAttentionMasked: return "unregistered_attention_masked";
    case Mutation::WarmUpSizesCountTokens: return "warm_up_sizes_count_tokens";
    case Mutation::StaleRowsAfterReset: return "stale_rows_after_reset";
  }
  return "?";
}

std::vector<Mutation> all_mutations() {
  return {Mutation::WindowTooWide,      Mutation::ExtendAfterFullKeepsOldest,
          Mutation::KvOffsetTooSmall,   Mutation::BecomingFullKeepsFirst,
          Mutation::DynamicKeepsWindow, Mutation::ChunkIgnoresLeftPadding,
          Mutation::CapacityMax};
}

std::vector<Mutation> kernel_mutations() {
  return {Mutation::KernelSoftmaxInInputDtype, Mutation::KernelF16Accumulation, Mutation::KernelNoMaxSubtraction};
}

std::vector<Mutation> layer_api_mutations() {
  return {Mutation::CropKeepsPastRows,
          Mutation::StaticCropKeepsWritePosition,
          Mutation::ResetDropsRows,
          Mutation::StaticResetKeepsCount,
          Mutation::AlwaysCroppable,
          Mutation::PastRecordingIgnored,
          Mutation::PositiveCropAccepted,
          Mutation::BuilderSizedFromOwnLayer,
          Mutation::BuilderOffsetFromSizedLayer,
          Mutation::FlexWithoutQueryOffset,
          Mutation::BuilderWithoutCacheSizedByStep,
          Mutation::BuilderPackedAcrossDocuments,
          Mutation::BuilderIgnoresLayerIdx,
          Mutation::BuilderWithoutAndMask,
          Mutation::BuilderWithoutOrMask,
          Mutation::Builder4dMaskRebuilt,
          Mutation::FlashMaskUncut,
          Mutation::BuilderWithoutBlockOverlay,
          Mutation::BuilderAcceptsNonCallable,
          Mutation::BuilderAbsentTypeAsFull,
          Mutation::UnregisteredAttentionMasked,
          Mutation::WarmUpSizesCountTokens};
}

std::vector<Mutation> storage_mutations() { return {Mutation::StaleRowsAfterReset}; }

bool is_kernel_mutation(Mutation m) {
  return m == Mutation::KernelSoftmaxInInputDtype || m == Mutation::KernelF16Accumulation ||
         m == Mutation::KernelNoMaxSubtraction;
}

Mutation parse_mutation(const std::string& s) {
  if (s == "none") return Mutation::None;
  // The spelling a mutant replaced, accepted for one release: the mistake's one name is the engine
  // mutant's and the diagnosis's (docs/mutants.md).
  if (s == "window_too_wide") {
    std::cerr << "kvconform: --mutant window_too_wide is deprecated (accepted for one release): it is now window_off_by_one+1\n";
    return Mutation::WindowTooWide;
  }
  std::string names;
  std::vector<Mutation> every = all_mutations();
  for (Mutation m : kernel_mutations()) every.push_back(m);
  for (Mutation m : layer_api_mutations()) every.push_back(m);
  for (Mutation m : storage_mutations()) every.push_back(m);
  for (Mutation m : every) {
    if (s == to_string(m)) return m;
    names += std::string(names.empty() ? "" : ", ") + to_string(m);
  }
  throw std::invalid_argument("unknown mutant '" + s + "' (expected one of: none, " + names + ")");
}

}  // namespace kvc
