#include "kvcgen/search.h"

#include <cstdio>
#include <stdexcept>

namespace kvc::search {

std::string reproduce_string(const CaseId& id) {
  return "trace:" + std::to_string(id.seed) + ":" + std::to_string(id.index) + ":" + std::to_string(id.size);
}

CaseId parse_reproduce(const std::string& text) {
  unsigned long long s = 0;
  long long i = 0;
  int z = 0;
  char tail = 0;
  const bool known = text.rfind("trace:", 0) == 0 || text.rfind("fast:", 0) == 0;
  const char* rest = known ? text.c_str() + text.find(':') + 1 : "";
  if (!known || std::sscanf(rest, "%llu:%lld:%d%c", &s, &i, &z, &tail) != 3 || i < 0 || z < 0 || rest[0] == '-')
    throw std::invalid_argument("reproduce string is malformed: '" + text + "' (expected trace:SEED:INDEX:SIZE)");
  return {s, i, z};
}

}  // namespace kvc::search
