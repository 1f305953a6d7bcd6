#include "kvconform/behaviours.h"

#include <cctype>
#include <stdexcept>

namespace kvc {

namespace {

// The release table, read from the releases' own sources (cache_utils.py, masking_utils.py of every
// release 4.56.0..5.24.0, CPU code paths) and held to golden/behaviours.json, the behaviours
// golden/timeline.py measured by running each of those 53 releases (behaviours_test.cpp): the
// same four ranges. A row holds from its release up to the next row's.
//  4.56.0  SlidingWindowLayer + ChunkedSlidingLayer; update/get_mask_sizes take cache_position;
//          allow_is_causal_skip = not is_compileable; StaticLayer counts non-zero rows.
//  4.57.0  StaticSlidingWindowLayer serves sliding and chunked layers (#40893, #40907).
//  5.4.0   cache_position gone from the cache API: update(k, v) writes at cumulative_length,
//          get_mask_sizes(query_length), StaticLayer.get_seq_length = cumulative_length.
//  5.14.0  allow_is_causal_skip = not (is_compileable and q_length == 1) in every create_*_mask
//          (before, only create_causal_mask on XPU machines), and _ignore_causal_mask_sdpa's
//          empty-cache (q_offset == 0) prefill rule.
//  5.13.0 and 5.23.0 change only the SDPA GQA path (SdpaGqaPath, not in the JSON record):
//          enable_gqa only for head_dim <= 256 from 5.13.0, pack_gqa on masked decode from 5.23.0.
//  The layer API (LayerApi, not in the JSON record): max_length up to 5.13 (4.56.2, 4.57.6, 5.0.0,
//          5.6.0, 5.10.1 and 5.13.1 read; 5.14.0 already has past recording), tokens_to_remove from
//          5.24.0 (5.23.0 has no static crop and no is_croppable on StaticLayer); the forms between
//          (5.14.0, 5.15.0, 5.16.0, 5.18.0, 5.20.0, 5.22.0, 5.23.0 read) are not modelled.
//  The builders' query offset (BuilderQueryOffset, not in the JSON record): layer 0's count from
//          5.4 (5.6.0, 5.10.1, 5.13.1 read), the sized layer's from 5.14.0 (5.14.0 to 5.25.0 read).
const std::vector<ReleaseRow>& rows() {
  using C = CacheApi;
  using L = SlidingLayer;
  using S = SdpaSkip;
  using N = StaticSeqLength;
  using A = LayerApi;
  using Q = BuilderQueryOffset;
  const SdpaGqaPath repeat{0, false}, limited{256, false}, packed{256, true};
  static const std::vector<ReleaseRow> table = {
      {"4.56.0", {C::CachePosition, L::PreMerge, S::NotCompileable, false, N::NonzeroRows, repeat, A::MaxLength, Q::FirstLayer}},
      {"4.57.0", {C::CachePosition, L::Merged, S::NotCompileable, false, N::NonzeroRows, repeat, A::MaxLength, Q::FirstLayer}},
      {"5.4.0", {C::QueryLength, L::Merged, S::NotCompileable, false, N::Cumulative, repeat, A::MaxLength, Q::FirstLayer}},
      {"5.13.0", {C::QueryLength, L::Merged, S::NotCompileable, false, N::Cumulative, limited, A::MaxLength, Q::FirstLayer}},
      {"5.14.0",
       {C::QueryLength, L::Merged, S::NotCompileableDecode, true, N::Cumulative, limited, A::Unmodelled, Q::SizedLayer}},
      {"5.23.0", {C::QueryLength, L::Merged, S::NotCompileableDecode, true, N::Cumulative, packed, A::Unmodelled, Q::SizedLayer}},
      {"5.24.0",
       {C::QueryLength, L::Merged, S::NotCompileableDecode, true, N::Cumulative, packed, A::TokensToRemove, Q::SizedLayer}},
  };
  return table;
}

}  // namespace

const char* to_string(LayerApi api) {
  switch (api) {
    case LayerApi::MaxLength: return "max_length";
    case LayerApi::Unmodelled: return "unmodelled";
    case LayerApi::TokensToRemove: return "tokens_to_remove";
  }
  return "?";
}

namespace {

template <typename E>
struct Names {
  const char* key;
  std::vector<std::pair<E, const char*>> values;
  const char* name(E e) const {
    for (const auto& [v, n] : values)
      if (v == e) return n;
    return "?";
  }
  E parse(const nlohmann::json& record) const {
    if (!record.contains(key)) throw std::invalid_argument(std::string("behaviours: missing key '") + key + "'");
    const nlohmann::json& j = record.at(key);
    std::string accepted;
    for (const auto& [v, n] : values) {
      if (j.is_string() && j.get<std::string>() == n) return v;
      accepted += std::string(accepted.empty() ? "" : ", ") + n;
    }
    throw std::invalid_argument(std::string("behaviours.") + key + ": unknown value " + j.dump() +
                                " (expected one of: " + accepted + ")");
  }
};

const Names<CacheApi> kCacheApi{"cache_api",
                                {{CacheApi::CachePosition, "cache_position"}, {CacheApi::QueryLength, "query_length"}}};
const Names<SlidingLayer> kSlidingLayer{"sliding_layer",
                                        {{SlidingLayer::PreMerge, "pre_merge"}, {SlidingLayer::Merged, "merged"}}};
const Names<SdpaSkip> kSdpaSkip{
    "sdpa_skip", {{SdpaSkip::NotCompileable, "not_compileable"}, {SdpaSkip::NotCompileableDecode, "not_compileable_decode"}}};
const Names<StaticSeqLength> kStaticSeqLength{
    "static_seq_length", {{StaticSeqLength::NonzeroRows, "nonzero_rows"}, {StaticSeqLength::Cumulative, "cumulative"}}};
const char* kSkipEmptyCache = "sdpa_skip_empty_cache";

bool older(const std::vector<int>& a, const std::vector<int>& b) { return a < b; }

}  // namespace

const std::vector<ReleaseRow>& release_table() { return rows(); }

std::vector<int> release_components(const std::string& version) {
  std::vector<int> parts;
  size_t i = 0;
  while (i < version.size() && parts.size() < 3) {
    if (!std::isdigit(static_cast<unsigned char>(version[i]))) break;
    size_t end = i;
    while (end < version.size() && std::isdigit(static_cast<unsigned char>(version[end]))) ++end;
    parts.push_back(std::stoi(version.substr(i, end - i)));
    i = end;
    if (i < version.size() && version[i] == '.') ++i;
    else break;
  }
  if (parts.empty()) throw std::invalid_argument("'" + version + "' is not a transformers release number (expected e.g. 4.57.6)");
  parts.resize(3, 0);
  return parts;
}

Behaviours behaviours_for_release(const std::string& version) {
  const std::vector<int> v = release_components(version);
  const auto& table = rows();
  if (older(v, release_components(table.front().first)))
    throw std::invalid_argument("transformers " + version + " is older than the oldest release kvconform models (" +
                                table.front().first + ")");
  // The last row whose first release is not newer than `version`. A release newer than every row
  // (one published after the table was written) gets the newest row: behaviours change rarely, and
  // the golden sweep (golden/behaviours.json, behaviours_test.cpp) catches a row that went stale.
  const ReleaseRow* found = &table.front();
  for (const ReleaseRow& row : table)
    if (!older(v, release_components(row.first))) found = &row;
  return found->behaviours;
}

nlohmann::json to_json(const Behaviours& b) {
  return {{kCacheApi.key, kCacheApi.name(b.cache_api)},
          {kSlidingLayer.key, kSlidingLayer.name(b.sliding_layer)},
          {kSdpaSkip.key, kSdpaSkip.name(b.sdpa_skip)},
          {kSkipEmptyCache, b.sdpa_skip_empty_cache},
          {kStaticSeqLength.key, kStaticSeqLength.name(b.static_seq_length)}};
}

Behaviours behaviours_from_json(const nlohmann::json& record) {
  if (!record.is_object()) throw std::invalid_argument("behaviours: expected an object, got " + record.dump());
  const nlohmann::json known = to_json(Behaviours{});
  for (const auto& item : record.items())
    if (!known.contains(item.key()))
      throw std::invalid_argument("behaviours." + item.key() +
                                  ": a behaviour the C++ reference does not model (add it to behaviours.h)");
  Behaviours b;
  b.cache_api = kCacheApi.parse(record);
  b.sliding_layer = kSlidingLayer.parse(record);
  b.sdpa_skip = kSdpaSkip.parse(record);
  if (!record.contains(kSkipEmptyCache))
    throw std::invalid_argument(std::string("behaviours: missing key '") + kSkipEmptyCache + "'");
  if (!record.at(kSkipEmptyCache).is_boolean())
    throw std::invalid_argument(std::string("behaviours.") + kSkipEmptyCache + ": expected true or false, got " +
                                record.at(kSkipEmptyCache).dump());
  b.sdpa_skip_empty_cache = record.at(kSkipEmptyCache).get<bool>();
  b.static_seq_length = kStaticSeqLength.parse(record);
  return b;
}

std::vector<std::string> differing_keys(const nlohmann::json& expected, const nlohmann::json& got) {
  std::vector<std::string> out;
  for (const auto& item : expected.items()) {
    const std::string g = got.contains(item.key()) ? got.at(item.key()).dump() : "(missing)";
    if (!got.contains(item.key()) || got.at(item.key()) != item.value())
      out.push_back(item.key() + ": " + item.value().dump() + " vs " + g);
  }
  for (const auto& item : got.items())
    if (!expected.contains(item.key())) out.push_back(item.key() + ": (missing) vs " + item.value().dump());
  return out;
}

}  // namespace kvc
