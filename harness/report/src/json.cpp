// summary.json: totals, per-backend counts and every case (format documented in docs/cli.md).
#include <nlohmann/json.hpp>

#include <stdexcept>

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
  // What the expectations files made of them (docs/expectations.md), only where one spoke: the
  // expected failures are among the deviations, the unexpected passes among the passed (or, under
  // --strict-expectations, the failed), the expected skips among the skipped.
  int expected = 0, unexpected = 0, skips = 0;
  for (const CaseResult& c : run.cases) {
    if (backend && c.backend != *backend) continue;
    expected += c.expectation.outcome == "expected_failure";
    unexpected += c.expectation.outcome == "unexpected_pass";
    skips += c.expectation.outcome == "expected_skip";
  }
  if (expected || unexpected || skips) {
    j["expected_failures"] = expected;
    j["unexpected_passes"] = unexpected;
    j["expected_skips"] = skips;
  }
  return j;
}
}  // namespace

std::string summary_json(const RunSummary& run, const ReportOptions& options) {
  Json j;
  j["format"] = kSummaryFormat;
  j["tool_version"] = run.tool_version;
  j["command"] = run.command;
  j["seed"] = run.seed;
  if (!run.record.subcommand.empty()) {
    const RunRecord& r = run.record;
    Json record;
    record["subcommand"] = r.subcommand;
    record["build"] = r.build;
    record["shard"] = {{"index", r.shard_index}, {"count", r.shard_count}};
    Json counters = Json::object();
    for (const auto& [key, value] : r.counters) counters[key] = value;
    record["counters"] = counters;
    record["files"] = r.files;
    j["run"] = record;
  }
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
    e["id"] = c.id;
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
    if (!c.expectation.outcome.empty()) {
      const CaseResult::Expectation& x = c.expectation;
      Json ex;
      ex["outcome"] = x.outcome;
      ex["file"] = x.file;
      ex["line"] = x.line;
      ex["case"] = x.pattern;
      ex["reason"] = x.reason;
      ex["link"] = x.link.empty() ? Json(nullptr) : Json(x.link);
      e["expectation"] = ex;
    }
    if (c.ordinal >= 0) e["ordinal"] = c.ordinal;
    if (options.timings && i < options.timings->case_seconds.size() && options.timings->case_seconds[i] >= 0)
      e["seconds"] = options.timings->case_seconds[i];
    cases.push_back(e);
  }
  j["cases"] = cases;
  // Invalid UTF-8 in a message becomes U+FFFD instead of an exception.
  return j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

namespace {
// A field of summary.json with the type the writer gives it; std::invalid_argument names the file
// and the JSON pointer otherwise.
class Reader {
 public:
  explicit Reader(std::string where) : where_(std::move(where)) {}
  [[noreturn]] void fail(const std::string& pointer, const std::string& problem) const {
    throw std::invalid_argument(where_ + ": " + pointer + ": " + problem);
  }
  const nlohmann::json& at(const nlohmann::json& j, const std::string& pointer, const char* key) const {
    if (!j.is_object() || !j.contains(key)) fail(pointer, std::string("missing \"") + key + "\"");
    return j[key];
  }
  std::string string(const nlohmann::json& j, const std::string& pointer, const char* key) const {
    const nlohmann::json& v = at(j, pointer, key);
    if (!v.is_string()) fail(pointer + "/" + key, "not a string");
    return v.get<std::string>();
  }
  int64_t integer(const nlohmann::json& j, const std::string& pointer, const char* key) const {
    const nlohmann::json& v = at(j, pointer, key);
    if (!v.is_number_integer()) fail(pointer + "/" + key, "not an integer");
    return v.get<int64_t>();
  }
  // A number or null (null: -1, "none measured").
  double number_or_null(const nlohmann::json& j, const std::string& pointer, const char* key) const {
    const nlohmann::json& v = at(j, pointer, key);
    if (v.is_null()) return -1;
    if (!v.is_number()) fail(pointer + "/" + key, "not a number or null");
    return v.get<double>();
  }
  const nlohmann::json& array(const nlohmann::json& j, const std::string& pointer, const char* key) const {
    const nlohmann::json& v = at(j, pointer, key);
    if (!v.is_array()) fail(pointer + "/" + key, "not an array");
    return v;
  }

 private:
  std::string where_;
};

Status parse_status(const Reader& in, const std::string& text, const std::string& pointer) {
  for (Status s : {Status::Pass, Status::Fail, Status::Deviation, Status::Skipped})
    if (text == to_string(s)) return s;
  in.fail(pointer, "status \"" + text + "\" is none of OK, FAIL, DEVIATION, SKIP");
}
}  // namespace

ReadSummary read_summary_json(std::string_view text, const std::string& where) {
  const Reader in(where);
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) in.fail("", "not a JSON object");
  if (const std::string format = in.string(j, "", "format"); format != kSummaryFormat)
    in.fail("/format", "\"" + format + "\", expected \"" + kSummaryFormat + "\"");
  ReadSummary out;
  RunSummary& run = out.run;
  run.tool_version = in.string(j, "", "tool_version");
  run.command = in.string(j, "", "command");
  const nlohmann::json& seed = in.at(j, "", "seed");
  if (!seed.is_number_unsigned() && !(seed.is_number_integer() && seed.get<int64_t>() >= 0))
    in.fail("/seed", "not an integer >= 0");
  run.seed = seed.get<uint64_t>();
  if (j.contains("run")) {
    const nlohmann::json& r = j["run"];
    RunRecord& record = run.record;
    record.subcommand = in.string(r, "/run", "subcommand");
    record.build = in.string(r, "/run", "build");
    const nlohmann::json& shard = in.at(r, "/run", "shard");
    record.shard_index = in.integer(shard, "/run/shard", "index");
    record.shard_count = in.integer(shard, "/run/shard", "count");
    if (record.shard_count < 1 || record.shard_index < 0 || record.shard_index >= record.shard_count)
      in.fail("/run/shard", "index " + std::to_string(record.shard_index) + " of count " + std::to_string(record.shard_count) +
                                " is not 0 <= index < count");
    if (!in.at(r, "/run", "counters").is_object()) in.fail("/run/counters", "not an object");
    const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(text, nullptr, false);  // counters keep their order
    const nlohmann::ordered_json& counters = ordered["run"]["counters"];
    for (const auto& [key, value] : counters.items()) {
      if (!value.is_number_integer()) in.fail("/run/counters/" + key, "not an integer");
      record.counters.emplace_back(key, value.get<int64_t>());
    }
    const nlohmann::json& files = in.array(r, "/run", "files");
    for (size_t i = 0; i < files.size(); ++i) {
      if (!files[i].is_string()) in.fail("/run/files/" + std::to_string(i), "not a string");
      record.files.push_back(files[i].get<std::string>());
    }
  }
  if (j.contains("total_seconds")) out.timings = Timings{in.number_or_null(j, "", "total_seconds"), {}};
  const nlohmann::json& cases = in.array(j, "", "cases");
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string at = "/cases/" + std::to_string(i);
    const nlohmann::json& e = cases[i];
    CaseResult c;
    c.suite = in.string(e, at, "suite");
    c.name = in.string(e, at, "name");
    c.params = in.string(e, at, "params");
    c.backend = in.string(e, at, "backend");
    c.dtype = in.string(e, at, "dtype");
    c.status = parse_status(in, in.string(e, at, "status"), at + "/status");
    c.message = in.string(e, at, "message");
    c.detail = in.string(e, at, "detail");
    c.reproduce = in.string(e, at, "reproduce");
    const nlohmann::json& policy = in.at(e, at, "policy");
    if (!policy.is_null() && !policy.is_string()) in.fail(at + "/policy", "not a string or null");
    c.policy = policy.is_null() ? "" : policy.get<std::string>();
    c.bound = in.number_or_null(e, at, "bound");
    c.error = in.number_or_null(e, at, "error");
    const nlohmann::json& masks = in.array(e, at, "masks");
    for (size_t m = 0; m < masks.size(); ++m) {
      const std::string mat = at + "/masks/" + std::to_string(m);
      MaskPicture p;
      p.title = in.string(masks[m], mat, "title");
      p.layer_type = in.string(masks[m], mat, "layer_type");
      p.window = in.integer(masks[m], mat, "window");
      p.kv_offset = in.integer(masks[m], mat, "kv_offset");
      p.kv_length = in.integer(masks[m], mat, "kv_length");
      for (const nlohmann::json& q : in.array(masks[m], mat, "query_positions")) {
        if (!q.is_number_integer()) in.fail(mat + "/query_positions", "not integers");
        p.query_positions.push_back(q.get<int64_t>());
      }
      for (const nlohmann::json& row : in.array(masks[m], mat, "rows")) {
        if (!row.is_string()) in.fail(mat + "/rows", "not strings");
        p.rows.push_back(row.get<std::string>());
      }
      c.masks.push_back(std::move(p));
    }
    if (e.contains("expectation")) {
      const nlohmann::json& x = e["expectation"];
      const std::string xat = at + "/expectation";
      c.expectation.outcome = in.string(x, xat, "outcome");
      if (c.expectation.outcome != "expected_failure" && c.expectation.outcome != "unexpected_pass" &&
          c.expectation.outcome != "expected_skip")
        in.fail(xat + "/outcome",
                "\"" + c.expectation.outcome + "\" is none of expected_failure, unexpected_pass, expected_skip");
      c.expectation.file = in.string(x, xat, "file");
      c.expectation.line = in.integer(x, xat, "line");
      c.expectation.pattern = in.string(x, xat, "case");
      c.expectation.reason = in.string(x, xat, "reason");
      const nlohmann::json& link = in.at(x, xat, "link");
      if (!link.is_null() && !link.is_string()) in.fail(xat + "/link", "not a string or null");
      c.expectation.link = link.is_null() ? "" : link.get<std::string>();
    }
    if (e.contains("ordinal")) c.ordinal = in.integer(e, at, "ordinal");
    // The id and title are derived fields: a file whose id does not follow from its fields was
    // edited or written by something else.
    c.id = in.string(e, at, "id");
    if (const std::string of_fields = id_of(key_of(c)); c.id != of_fields)
      in.fail(at + "/id", "\"" + c.id + "\" is not the id of its fields (\"" + of_fields + "\")");
    if (out.timings) out.timings->case_seconds.push_back(e.contains("seconds") ? in.number_or_null(e, at, "seconds") : -1);
    run.cases.push_back(std::move(c));
  }
  return out;
}

}  // namespace kvc::report
