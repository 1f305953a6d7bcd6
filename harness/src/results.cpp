#include "kvconform/results.h"

namespace kvc::report {

const char* to_string(Status s) {
  switch (s) {
    case Status::Pass: return "OK";
    case Status::Fail: return "FAIL";
    case Status::Deviation: return "DEVIATION";
    case Status::Skipped: return "SKIP";
  }
  return "?";
}

int RunSummary::count(Status s) const {
  int n = 0;
  for (const CaseResult& c : cases) n += c.status == s;
  return n;
}

}  // namespace kvc::report
