// The common currency of a run: every check (property, golden step, backend, plugin) ends as one
// CaseResult, and every report (terminal line, JUnit, JSON, Markdown, HTML) is written from these.
// No LibTorch here.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace kvc::report {

enum class Status { Pass, Fail, Deviation, Skipped };  // Deviation: transformers itself breaks a rule
const char* to_string(Status s);                       // "OK", "FAIL", "DEVIATION", "SKIP"

// A mask drawn for a person: rows are queries, columns absolute key positions
// [kv_offset, kv_offset + kv_length). Cells: '#' attended as expected, '.' masked as expected,
// '+' attended but must not be, '-' must be attended but is masked, ' ' no key there.
struct MaskPicture {
  std::string title;                     // "static/sliding_attention(W=4,L=8) step 3 batch row 0"
  std::vector<int64_t> query_positions;  // one per row
  int64_t kv_offset = 0;
  int64_t kv_length = 0;
  int64_t window = 0;             // 0 for full attention
  std::string layer_type;         // "sliding_attention", ...
  std::vector<std::string> rows;  // each kv_length characters
};

// The fields that name a case, one struct per suite; id_of joins them into the case's id (what
// `kvconform run --list` prints, --filter matches, ctest's case/<id> and every report say). A suite
// names a case by its key before it runs (named below), as llama.cpp's test-backend-ops names a
// case by its vars().
struct GoldenKey {  // golden/<release>/<case>
  std::string release, name;
};
struct BackendKey {  // backend/<scenario>/<cache>/<backend>/<dtype>
  std::string scenario, cache, backend, dtype;
};
struct PropertyKey {  // property/<name>
  std::string property;
};
struct PluginKey {  // plugin/<plugin>/<case>/<dtype>
  std::string plugin, name, dtype;
};
struct EngineKey {  // engine/<engine>/<model>/<plan>
  std::string engine, model, plan;
};
// A line of a command that runs no registry (fuzz's rounds, the differential campaign): <suite>/<name>.
struct CampaignKey {
  std::string suite, name;
};
using CaseKey = std::variant<GoldenKey, BackendKey, PropertyKey, PluginKey, EngineKey, CampaignKey>;

std::string suite_of(const CaseKey& key);  // "golden", "backend", "property", "plugin", "engine", or the campaign's
std::string id_of(const CaseKey& key);

struct CaseResult {
  std::string id;       // id_of(its key): set by named(), never derived from the fields below
  std::string suite;    // "property", "golden", "backend", "plugin", "engine"
  std::string name;     // "stored_rows", "4.57.6/static_sliding_w4_decode", ...
  std::string params;   // compact "key=value,..." as printed in NAME(params)
  std::string backend;  // "reference", "eager", "sdpa", "sdpa_is_causal", "windowed", plugin name
  std::string dtype;    // "float32", ... or "mixed"
  Status status = Status::Pass;
  std::string message;             // one line: the first failure, naming step, field, index, both values
  std::string detail;              // more lines: shrunk counterexample, expected vs got values
  std::string reproduce;           // the exact command that reproduces this case
  std::vector<MaskPicture> masks;  // for failures where a mask explains it
  // The tolerance policy its numbers were judged by (tolerance.h: "bitwise", "exact-float64",
  // "dtype-epsilons", "same-dtype-reference") and the largest bound it applied; empty / negative
  // where the case judged no number (it failed before, or was skipped).
  std::string policy;
  double bound = -1;
  // The measured error: the largest difference the case measured, in the units of `bound` (the
  // largest |got - expected| over the values it judged; 0 for a bitwise pass); negative where it
  // judged no number. A failure that stopped early records the error up to where it stopped.
  double error = -1;
  // A shrunk random failure's RapidCheck reproduce string (`--reproduce`), empty otherwise; the
  // reproduce line carries it.
  std::string replay;
  // The case's place in the unsharded run of a command that shards (docs/sharding.md): `kvconform
  // merge` orders the shards' cases by it. Negative: a case every shard contributes to (a
  // campaign's pass line, rebuilt from the summed counters) or a command that does not shard.
  int64_t ordinal = -1;
  // What an expectations file (kvconform/expectations.h, docs/expectations.md) said of this case:
  // outcome "expected_failure" (a DEVIATION its entry expects), "unexpected_pass" (it passed while
  // its entry expects failures; a FAIL under --strict-expectations) or "expected_skip" (not run);
  // empty where no entry spoke of it.
  struct Expectation {
    std::string outcome, file;
    int64_t line = 0;
    std::string pattern, reason, link;
  } expectation;
};

// The margin to the bound, where both are known: bound - error (positive: passed with that much
// room; negative: over the bound by that much; 0 for a bitwise pass). margin_ratio: error / bound
// (below 1 passes; a dashboard can compare it across policies), only where bound > 0.
inline bool has_margin(const CaseResult& r) { return r.bound >= 0 && r.error >= 0; }
inline double margin(const CaseResult& r) { return r.bound - r.error; }
inline bool has_margin_ratio(const CaseResult& r) { return has_margin(r) && r.bound > 0; }
inline double margin_ratio(const CaseResult& r) { return r.error / r.bound; }

// A result named by its key before the case runs: its id, suite, and the fields of the key that the
// reports show (name; backend for the backend, plugin and engine suites; dtype where the key has one).
CaseResult named(const CaseKey& key);
// Names r by `key` as named() does, keeping its verdict and its other fields (a saved plan's result
// takes the corpus entry's name).
void rename(CaseResult& r, const CaseKey& key);
// The key whose named() result has r's suite, name, backend and dtype: what a report read back names
// its case by (summary.json's id is checked against it).
CaseKey key_of(const CaseResult& r);

// What a run of a sharding command was (docs/sharding.md), so that `kvconform merge` combines only
// shards of one run: the same subcommand, build, command (without the flags that only pick the
// shard or the report folder), seed and shard count.
struct RunRecord {
  std::string subcommand;  // "run", "fuzz", "engine", "differential"; empty: nothing recorded (not mergeable)
  std::string build;       // the binary's build id: its commit, "+dirty.<hash of the diff>" for local changes
  int64_t shard_index = 0, shard_count = 1;
  // Tallies of work a report has no case for (fuzz rounds, cases per property, differential
  // sequences per version), in a fixed order; merging sums them.
  std::vector<std::pair<std::string, int64_t>> counters;
  std::vector<std::string> files;  // case files the run wrote, sorted (merging takes the union)
  int64_t counter(const std::string& name) const {
    for (const auto& [key, value] : counters)
      if (key == name) return value;
    return 0;
  }
};

struct RunSummary {
  std::string tool_version;  // "kvconform 0.1.0"
  std::string command;       // the command line, for reproduction
  uint64_t seed = 0;
  RunRecord record;
  std::vector<CaseResult> cases;  // in run order; reports must be byte-identical for the same inputs
  int count(Status s) const;
};

}  // namespace kvc::report
