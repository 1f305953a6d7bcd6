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
};

const char* to_string(Mutation m);             // "window_too_wide", ...
Mutation parse_mutation(const std::string& s);  // throws std::invalid_argument
std::vector<Mutation> all_mutations();          // every mutant, None excluded

}  // namespace kvc
