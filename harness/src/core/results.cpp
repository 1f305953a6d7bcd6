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

std::string case_id(const CaseResult& r) {
  if (r.suite == "backend") return r.suite + "/" + r.name + "/" + r.backend + "/" + r.dtype;
  if (r.suite == "plugin") return r.suite + "/" + r.backend + "/" + r.name + "/" + r.dtype;
  if (r.suite == "engine") return r.suite + "/" + r.backend + "/" + r.name;
  return r.suite + "/" + r.name;
}

}  // namespace kvc::report
