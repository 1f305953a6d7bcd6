// The position-level specification of transformers' cache layers and masks: which absolute token
// each row holds and which keys each query may see. Pure integer arithmetic, written from the
// documented rules (docs/rules.md), independent of the tensor reference
// so that the property tests compare two separate implementations.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kvconform/types.h"

namespace kvc::positions {

// Absolute token index held by a row; nullopt for a row never written (zeros).
using Rows = std::vector<std::optional<int64_t>>;

// Rows a layer keeps: static sliding min(W, L), dynamic sliding W - 1, static full L,
// dynamic full -1 (unbounded).
int64_t capacity(const LayerSpec& spec);

// get_mask_sizes for q new tokens after `seen` earlier ones.
MaskSizes mask_sizes(const LayerSpec& spec, int64_t seen, int64_t q);

// Stored rows after `seen` tokens have been written in order.
Rows stored_rows(const LayerSpec& spec, int64_t seen);

// Rows update() must return for q tokens after `seen`: tokens [kv_offset, kv_offset + kv_length),
// rows past the last written token are unwritten.
Rows returned_rows(const LayerSpec& spec, int64_t seen, int64_t q);

// The window rule over absolute positions, causality included, padding excluded.
// Sliding: q - W < k <= q. Chunked: k <= q and (k - lp) // W == (q - lp) // W (floor division).
bool window_allows(LayerType type, int64_t window, int64_t left_pad, int64_t q_pos, int64_t k_pos);

// Largest total sequence length a layer can serve at all: a full static layer raises past
// max_cache_len (index_copy_ out of bounds). -1 when unbounded. A static sliding layer whose
// max_cache_len is below the window goes on, but loses keys (loses_window_keys).
int64_t max_total_tokens(const LayerSpec& spec);

// Whether a step of q tokens after `seen` leaves some query without a key its window allows, because
// the layer no longer returns it: a static sliding/chunked layer with max_cache_len below the window
// keeps only max_cache_len tokens (capacity min(W, L)) and transformers then silently attends to fewer
// keys than the window rule allows. `left_padding` per row (chunk boundaries), empty = none.
bool loses_window_keys(const LayerSpec& spec, int64_t seen, int64_t q, const std::vector<int64_t>& left_padding = {});

// Python's floor division, which the chunked rule uses with negative operands (padding).
inline int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

}  // namespace kvc::positions

namespace kvc::positions {
// Where transformers itself breaks the rules above for a layer configuration, a one-line
// explanation; the reference stays faithful and runs report it as an upstream deviation.
std::optional<std::string> upstream_deviation(const LayerSpec& spec);
// The explanation for a step where loses_window_keys holds.
std::string lost_keys_deviation(const LayerSpec& spec);
}  // namespace kvc::positions
