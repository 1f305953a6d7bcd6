// summary.json: totals, per-backend counts and every case (format documented in docs/cli.md).
#include <nlohmann/json.hpp>

#include "kvconform/report.h"

namespace kvc::report {

namespace {
using Json = nlohmann::ordered_json;  // keys in the documented order, not sorted

Json counts(const RunSummary& run, const std::string* backend) {
  int n[4] = {0, 0, 0, 0}, total = 0;
  for (const CaseResult& c : run.cases) {
    if (backend && c.backend != *backend) continue;
    ++total;
    ++n[static_cast<int>(c.status)];
  }
  Json j;
  j["cases"] = total;
  j["passed"] = n[static_cast<int>(Status::Pass)];
  j["failed"] = n[static_cast<int>(Status::Fail)];
  j["deviations"] = n[static_cast<int>(Status::Deviation)];
  j["skipped"] = n[static_cast<int>(Status::Skipped)];
  return j;
}
}  // namespace

std::string summary_json(const RunSummary& run, const ReportOptions& options) {
  Json j;
  j["format"] = kSummaryFormat;
  j["tool_version"] = run.tool_version;
  j["command"] = run.command;
  j["seed"] = run.seed;
  j["ok"] = run.count(Status::Fail) == 0;
  j["totals"] = counts(run, nullptr);
  Json backends = Json::array();
  for (const std::string& b : backends_in_order(run)) {
    Json entry;
    entry["backend"] = b;
    entry.update(counts(run, &b));
    backends.push_back(entry);
  }
  j["backends"] = backends;
  if (options.timings) j["total_seconds"] = options.timings->total_seconds;
  Json cases = Json::array();
  for (size_t i = 0; i < run.cases.size(); ++i) {
    const CaseResult& c = run.cases[i];
    Json e;
    e["id"] = case_id(c);
    e["suite"] = c.suite;
    e["name"] = c.name;
    e["params"] = c.params;
    e["backend"] = c.backend;
    e["dtype"] = c.dtype;
    e["status"] = to_string(c.status);
    e["title"] = case_title(c);
    e["message"] = c.message;
    e["detail"] = c.detail;
    e["reproduce"] = c.reproduce;
    e["policy"] = c.policy.empty() ? Json(nullptr) : Json(c.policy);
    e["bound"] = c.bound >= 0 ? Json(c.bound) : Json(nullptr);
    e["error"] = c.error >= 0 ? Json(c.error) : Json(nullptr);
    e["margin"] = has_margin(c) ? Json(margin(c)) : Json(nullptr);
    e["margin_ratio"] = has_margin_ratio(c) ? Json(margin_ratio(c)) : Json(nullptr);
    Json masks = Json::array();
    for (const MaskPicture& m : c.masks) {
      Json p;
      p["title"] = m.title;
      p["layer_type"] = m.layer_type;
      p["window"] = m.window;
      p["kv_offset"] = m.kv_offset;
      p["kv_length"] = m.kv_length;
      p["query_positions"] = m.query_positions;
      p["rows"] = m.rows;
      masks.push_back(p);
    }
    e["masks"] = masks;
    if (options.timings && i < options.timings->case_seconds.size() && options.timings->case_seconds[i] >= 0)
      e["seconds"] = options.timings->case_seconds[i];
    cases.push_back(e);
  }
  j["cases"] = cases;
  // Invalid UTF-8 in a message becomes U+FFFD instead of an exception.
  return j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

}  // namespace kvc::report
