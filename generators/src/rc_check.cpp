#include "kvcgen/rc_check.h"

#include <rapidcheck.h>
#include <rapidcheck/detail/TestListenerAdapter.h>

#include <sstream>
#include <stdexcept>
#include <unordered_map>

namespace kvc::rc_check {

Result check(const Params& p, const std::function<void()>& property) {
  rc::detail::TestMetadata metadata;
  metadata.id = p.id;
  metadata.description = p.description;
  rc::detail::TestParams params;
  params.seed = p.seed;
  params.maxSuccess = p.iterations;
  params.maxSize = p.max_size;
  std::unordered_map<std::string, rc::detail::Reproduce> reproduce_map;
  if (!p.reproduce.empty()) {
    try {
      reproduce_map = rc::detail::configFromString("reproduce=" + p.reproduce).reproduce;
    } catch (const std::exception& e) {
      throw std::invalid_argument("reproduce string is malformed: " + std::string(e.what()));
    }
  }
  rc::detail::TestListenerAdapter quiet;
  const rc::detail::TestResult result =
      rc::detail::checkProperty(rc::detail::toProperty(property), metadata, params, quiet, reproduce_map);
  Result out;
  if (result.is<rc::detail::SuccessResult>()) {
    out.passed = result.get<rc::detail::SuccessResult>().numSuccess;
    return out;
  }
  out.ok = false;
  std::ostringstream failure;
  rc::detail::printResultMessage(result, failure);
  out.failure = failure.str();
  if (result.is<rc::detail::FailureResult>()) {
    const auto& f = result.get<rc::detail::FailureResult>();
    out.passed = f.numSuccess;
    rc::detail::Configuration config;
    config.reproduce[metadata.id] = f.reproduce;
    std::string s = rc::detail::configToMinimalString(config);
    const std::string key = "reproduce=";
    if (auto at = s.find(key); at != std::string::npos) s = s.substr(at + key.size());
    out.reproduce = s.substr(0, s.find(' '));  // drop the other keys (seed=…) RapidCheck appends
  }
  return out;
}

std::string failure_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const rc::detail::CaseResult& r) {
    if (r.type != rc::detail::CaseResult::Type::Failure) return {};
    std::string message = without_internals(r.description);
    message.erase(0, message.find_first_not_of('\n'));
    return message;
  } catch (const std::exception& e) {
    return e.what();
  }
  return {};
}

std::string without_internals(const std::string& failure) {
  std::istringstream in(failure);
  std::string line, out;
  bool blank = false;  // the last line kept was empty: no two in a row
  while (std::getline(in, line)) {
    const bool location = line.size() > 1 && line.back() == ':' && line.find(".cpp:") != std::string::npos;
    if (location || line.rfind("RC_FAIL(", 0) == 0 || (line.empty() && blank)) continue;
    blank = line.empty();
    out += line + "\n";
  }
  if (!out.empty() && (failure.empty() || failure.back() != '\n')) out.pop_back();
  return out;
}

}  // namespace kvc::rc_check
