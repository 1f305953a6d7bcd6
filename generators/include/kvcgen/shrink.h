// The one shrinker, used by the one campaign loop (search.h: the properties on either engine, the
// plugin and engine campaigns) and the differential fuzzer. Greedy, as RapidCheck's is: take the
// first simplification that still fails and start again from it, until none does. Deterministic:
// the same failing case and the same simplifications give the same result.
#pragma once

#include <limits>
#include <utility>

namespace kvc::shrink {

// `simplifications(c)` lists smaller cases than c, most promising first; `still_fails(c)` says
// whether c is a valid case that still fails. Returns how many simplifications were kept (at most
// `limit`, so that a slow check cannot shrink for ever).
template <typename Case, typename Simplifications, typename StillFails>
int greedy(Case& failing, Simplifications simplifications, StillFails still_fails, int limit = std::numeric_limits<int>::max()) {
  int kept = 0;
  for (bool improved = true; improved && kept < limit;) {
    improved = false;
    for (auto& candidate : simplifications(failing)) {
      if (!still_fails(candidate)) continue;
      failing = std::move(candidate);
      improved = true;
      ++kept;
      break;
    }
  }
  return kept;
}

}  // namespace kvc::shrink
