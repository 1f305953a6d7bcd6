// How the campaign's test parameters print (gtest's PrintTo, found by argument-dependent lookup): the
// names of ctest's parameterised tests (gtest_discover_tests prints the parameter), where gtest's
// default printed the enums' bytes. One header: the test files share a unity batch.
#pragma once

#include <ostream>

#include "kvcgen/campaign.h"

namespace kvc::campaign {
inline void PrintTo(Property p, std::ostream* os) { *os << to_string(p); }
inline void PrintTo(TraceEngineKind k, std::ostream* os) { *os << to_string(k); }
}  // namespace kvc::campaign
