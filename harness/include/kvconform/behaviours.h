// The observable behaviours in which transformers releases differ, by name, and the one place
// that maps a release number to them (behaviours_for_release). Everything in the reference that
// depends on the release asks a Behaviours value, never a version string. No LibTorch here.
//
// The JSON form is the record golden/dump.py writes into each fixture ("behaviours") and
// golden/behaviours.json (release -> record) measured by its timeline sweep; the values are the
// strings below, exactly.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace kvc {

// cache_position: update(k, v, cache_kwargs={"cache_position"}), get_mask_sizes(cache_position),
//   StaticLayer writes at cache_position (arange(q) without one).
// query_length: update(k, v) writes at the cumulative length, get_mask_sizes(query_length).
enum class CacheApi { CachePosition, QueryLength };
// pre_merge: static sliding layers are SlidingWindowLayer (sliding) and ChunkedSlidingLayer
//   (chunked), with mask sizes from the first cache position; merged: StaticSlidingWindowLayer.
enum class SlidingLayer { PreMerge, Merged };
// create_*_mask's allow_is_causal_skip: never for a compileable (static) cache, or only not on a
// compileable cache's q_length == 1 step.
enum class SdpaSkip { NotCompileable, NotCompileableDecode };
// StaticLayer.get_seq_length: rows with a non-zero value (batch 0, head 0), or the cumulative count.
enum class StaticSeqLength { NonzeroRows, Cumulative };

// How sdpa_attention_forward shares kv heads among query heads (GQA) on the CPU; the paths round
// differently, so bitwise golden replay must take the release's. SDPA's own enable_gqa is used only
// without a mask and, from 5.13, only for head_dim <= 256 (0 = no limit); from 5.23 a masked
// single-query step folds a kv head's query heads into the query length (pack_gqa) instead of
// repeating K/V. Read from each release's integrations/sdpa_attention.py and confirmed by the
// pinned fixtures replaying bit for bit (4.56.2, 4.57.6, 5.13.1, 5.24.0); dump.py does not measure
// it yet, so it is not part of the JSON record and the release table alone decides it.
struct SdpaGqaPath {
  int64_t enable_gqa_max_head_dim = 256;
  bool pack_gqa_decode = true;
  bool operator==(const SdpaGqaPath& o) const {
    return enable_gqa_max_head_dim == o.enable_gqa_max_head_dim && pack_gqa_decode == o.pack_gqa_decode;
  }
};

// The layer API beyond update and get_mask_sizes: reset, crop, activate_past_recording and the
// attributes a caller reads (is_croppable, the maximum length). Read from the releases' own
// cache_utils.py and held to the pinned fixtures' call steps (cases with "call" steps); dump.py
// does not probe it, so like SdpaGqaPath it is not part of the JSON record.
//  max_length: crop(max_length) on dynamic layers only (a negative argument removes that many
//    tokens; a dynamic sliding layer refuses once it has seen its window); static layers have no
//    crop; reset zeroes every layer's rows and keeps them (a dynamic layer then concatenates onto
//    its zeroed rows); no activate_past_recording, no is_croppable (4.56 to 5.13).
//  tokens_to_remove: crop(tokens_to_remove) on every layer, negative only (a positive one raises);
//    a dynamic sliding layer past its window crops only with past recording
//    (activate_past_recording), which keeps every row until the next crop; a static layer only
//    lowers its counters; reset drops a dynamic layer's rows; is_croppable (5.24).
//  unmodelled: the releases between, each with a form of its own (5.16: tokens_to_remove with a
//    deprecated positive path and no is_croppable; 5.20: is_croppable, no static crop), which the
//    reference does not model: a call step under them fails naming the release range.
enum class LayerApi { MaxLength, Unmodelled, TokensToRemove };
const char* to_string(LayerApi api);

// Where the release's create_*_mask builders, called as a model calls them (no layer_idx: the mask
// of a kind is sized from the first layer of that kind, sliding and chunked counting as one), take
// the first query's position on the query_length API:
//  first_layer: past_key_values.get_seq_length(), layer 0's count whatever the mask's kind (5.4 to
//    5.13): after a reset or crop that leaves layers with different counts, a full layer's mask is
//    placed by a sliding layer's count;
//  sized_layer: get_query_offset(layer_idx), the count of the layer it sizes from (from 5.14).
// The cache_position API (before 5.4) takes cache_position. Read from the releases' masking_utils.py
// (5.0.0 to 5.25.0) and held to the fixtures' mask_builders records, in which dump.py records the
// layers each builder asked; like SdpaGqaPath it is not part of the JSON record.
enum class BuilderQueryOffset { FirstLayer, SizedLayer };

struct Behaviours {
  // Defaults are the newest row of the release table (a unit test holds them to it).
  CacheApi cache_api = CacheApi::QueryLength;
  SlidingLayer sliding_layer = SlidingLayer::Merged;
  SdpaSkip sdpa_skip = SdpaSkip::NotCompileableDecode;
  // sdpa_mask may be skipped when the first query is at 0 and the only padding is the unwritten tail.
  bool sdpa_skip_empty_cache = true;
  StaticSeqLength static_seq_length = StaticSeqLength::Cumulative;
  SdpaGqaPath sdpa_gqa;                                                      // not in the JSON record (see SdpaGqaPath)
  LayerApi layer_api = LayerApi::TokensToRemove;                             // not in the JSON record (see LayerApi)
  BuilderQueryOffset builder_query_offset = BuilderQueryOffset::SizedLayer;  // not in the JSON record

  bool operator==(const Behaviours& o) const {
    return cache_api == o.cache_api && sliding_layer == o.sliding_layer && sdpa_skip == o.sdpa_skip &&
           sdpa_skip_empty_cache == o.sdpa_skip_empty_cache && static_seq_length == o.static_seq_length &&
           sdpa_gqa == o.sdpa_gqa && layer_api == o.layer_api && builder_query_offset == o.builder_query_offset;
  }
  bool operator!=(const Behaviours& o) const { return !(*this == o); }
};

// One row of the release table: the behaviours of every release from `first` up to the next row's.
struct ReleaseRow {
  std::string first;
  Behaviours behaviours;
};
const std::vector<ReleaseRow>& release_table();

// THE mapping from a transformers release ("4.57.6", "5.14", "5.0.0rc1") to its behaviours.
// Throws std::invalid_argument for a string that is not a release number or a release older than
// the table's first row. A release newer than the newest row gets the newest row's behaviours.
Behaviours behaviours_for_release(const std::string& version);

// The JSON record: {"cache_api": "...", "sliding_layer": "...", ...}.
nlohmann::json to_json(const Behaviours& b);
// Reads a record. Throws std::invalid_argument naming the key for a missing key, an unknown value
// or a key the C++ reference does not model (a behaviour measured upstream but not implemented
// here must not be silently ignored).
Behaviours behaviours_from_json(const nlohmann::json& record);
// "key: expected 'a', got 'b'" for every key on which the two records differ (JSON-level, so that
// keys unknown to the C++ side are reported too); empty when equal.
std::vector<std::string> differing_keys(const nlohmann::json& expected, const nlohmann::json& got);

// Release numbers as integer components, for ordering ("5.0.0rc1" -> {5, 0, 0}).
std::vector<int> release_components(const std::string& version);

}  // namespace kvc
