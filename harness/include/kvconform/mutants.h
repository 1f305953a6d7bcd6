// Deliberately wrong implementations. Each one is a bug class seen upstream (see
// docs/rules.md, section 5); the test suite proves that the property campaign catches every one.
#pragma once

#include <string>
#include <vector>

namespace kvc {

enum class Mutation {
  None,
  WindowTooWide,               // sliding mask admits W tokens before the query instead of W - 1
  ExtendAfterFullKeepsOldest,  // multi-token update on a full static layer keeps its oldest row
  KvOffsetTooSmall,            // get_mask_sizes reports kv_offset one too small once full
  BecomingFullKeepsFirst,      // becoming-full update stores the first C rows instead of the last
  DynamicKeepsWindow,          // dynamic sliding layer keeps W rows instead of W - 1
  ChunkIgnoresLeftPadding,     // chunk boundaries counted from 0 instead of after left padding
  CapacityMax,                 // static sliding capacity max(W, L) instead of min(W, L)
  // Kernel mutants: the reference is untouched; the backend suite's own kernel (`windowed`) computes
  // wrongly (backends::kernel_fault). Caught by the numerics cases (scenario.h, numeric_scenarios).
  KernelSoftmaxInInputDtype,  // scores, running max, exp and the softmax sum in the input dtype (P@V in float32)
  KernelF16Accumulation,      // QK dot products, softmax sum and P@V accumulators in the 16-bit input dtype
  KernelNoMaxSubtraction,     // exp(score) without subtracting the running max: overflows on large logits
  // Layer-API mutants: the reference's reset, crop, past recording and attributes (the call steps
  // of case files, and the property layer_calls' Crop, Record and Read commands).
  CropKeepsPastRows,             // a crop past the window (past recording) keeps every row before the removed ones
  StaticCropKeepsWritePosition,  // a static crop lowers the Python int count but not the tensor one
  ResetDropsRows,                // the max_length releases' reset drops a layer's rows instead of zeroing them
  StaticResetKeepsCount,         // a static sliding layer's reset leaves its Python int count (cumulative_length_int)
  AlwaysCroppable,               // a static sliding layer larger than its window says is_croppable
  PastRecordingIgnored,          // activate_past_recording does nothing
  PositiveCropAccepted,          // a dynamic layer takes crop(n > 0) as max_length where the release raises
  // Mask-builder mutants: the masks the release's own create_*_mask return (a fixture's
  // mask_builders), which only golden replay compares; listed with the layer-API mutants.
  BuilderSizedFromOwnLayer,     // a builder sizes each kind's mask from the first layer of its type, not of its kind
  BuilderOffsetFromSizedLayer,  // before 5.14 the builders' query offset comes from the sized layer, not layer 0
  FlexWithoutQueryOffset,       // the flex mask function evaluated without the query offset
  // The builder arguments of a case's mask_builder_call (cases/README.md), one mutant each:
  BuilderWithoutCacheSizedByStep,  // without a cache, from 5.4 the mask spans the step, not the 2D mask
  BuilderPackedAcrossDocuments,    // packed position_ids remap positions but documents are not kept apart
  BuilderIgnoresLayerIdx,          // an explicit layer_idx is ignored (the builder's own choice of layer)
  BuilderWithoutAndMask,           // and_mask_function dropped
  BuilderWithoutOrMask,            // or_mask_function dropped
  Builder4dMaskRebuilt,            // a 4D mask is not passed through: the builder's own mask from its 2D form
  FlashMaskUncut,                  // flash_attention_mask returns the whole 2D mask, not its last kv_length keys
  BuilderWithoutBlockOverlay,      // block_sequence_ids dropped (no bidirectional blocks)
  BuilderAcceptsNonCallable,       // a mask function that is not callable is ignored instead of refused
  BuilderAbsentTypeAsFull,         // a builder of a type the cache lacks makes a causal mask, without its window
  UnregisteredAttentionMasked,     // an attention implementation the mask interface lacks gets eager's mask, not none
  // A static sliding layer's mask sizes while it is still filling count its tokens, not its
  // capacity (transformers #45940's proposed change); golden replay's warm-up cases catch it.
  WarmUpSizesCountTokens,
  // Storage mutants: the reference is untouched; the cache of the backend that keeps one
  // (backends::Storage, `windowed_cache`) is kept wrongly, its attention right. Caught by the backend
  // suite's stored-state check alone.
  StaleRowsAfterReset,  // a reset keeps the previous sequence's rows in the slots the new one has not written
};

const char* to_string(Mutation m);              // "window_off_by_one+1", ...
Mutation parse_mutation(const std::string& s);  // throws std::invalid_argument
std::vector<Mutation> all_mutations();          // every mutant of the reference, None excluded
std::vector<Mutation> kernel_mutations();       // every kernel mutant (the reference untouched)
bool is_kernel_mutation(Mutation m);
std::vector<Mutation> layer_api_mutations();  // every layer-API mutant (golden replay's call steps)
std::vector<Mutation> storage_mutations();    // every storage mutant (a backend's own cache, the reference untouched)

}  // namespace kvc
