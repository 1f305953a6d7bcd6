// Expectations owned by the implementation under test (docs/expectations.md): a JSON-with-comments
// file in the implementation's repository listing case-id patterns with the outcome expected of
// them ("fail": an expected failure, reported as a DEVIATION that names the entry and does not fail
// the run; "skip": the case is not run), a reason and optionally an upstream link and what the
// failure must look like (the engine's diagnosis kind, its error text, any logit failure, the
// model's family). `kvconform run --expectations FILE`, `kvconform engine` (and each engine folder's
// engines/<engine>/expectations.jsonc by default) and the pytest plugin read it; an entry whose
// cases all passed is an unexpected pass, an entry that matches no case is a warning, and
// --update-expectations rewrites the file from a run. No LibTorch here.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvconform/regex.h"
#include "kvconform/results.h"

namespace kvc::expect {

enum class Outcome { Fail, Skip };
const char* to_string(Outcome o);  // "fail", "skip"

// One entry of an expectations file.
struct Expectation {
  std::string file;     // the file as the reports show it (as given, or engines/<engine>/expectations.jsonc)
  int64_t line = 0;     // the line of its opening brace
  std::string pattern;  // ECMAScript regex, searched in the case id (as --filter is)
  Outcome outcome = Outcome::Fail;
  std::string reason, link;
  // What a failure must be for the entry to expect it (any failure where none is given):
  std::string family;     // regex over the engine case's model family (config.model_type); empty: any
  std::string diagnosis;  // an engine diagnosis kind (engine/check.h to_string(Diagnosis::Kind)); empty: any
  nlohmann::json params = nlohmann::json::object();  // the diagnosis's parameters that must be equal
  std::string error;                                 // text the failure's error contains
  bool any_logits = false;                           // "failure": "logits": any logit failure
  // "releases": {"from": A, "fixed_in": B} (either may be left out): only cases whose engine release, the
  // first X.Y.Z of the configuration's name in the case id ("engine/transformers-5.24.0/...": 5.24.0), is
  // >= A and < B; the release that fixed it upstream is where the entry stops expecting the failure.
  std::string from, fixed_in;
  std::string where() const { return file + ":" + std::to_string(line); }
};

// The engine release a case id carries (the first X.Y.Z after a '-' in its configuration's first
// segment: "engine/transformers-5.24.0/static/eager/m/p" gives "5.24.0"), or "" where none.
std::string case_release(const std::string& id);
// Whether the entry's "releases" range holds the case (true when the entry has no range).
bool in_release_range(const Expectation& e, const std::string& id);

// A file's entries, in file order. `diagnosis_kinds`: the names a "diagnosis" may take (empty: any).
// Throws std::invalid_argument "FILE:LINE: /expectations/N/FIELD: problem, got VALUE" for a file that
// does not read, does not parse, or has a bad field; nothing is loaded then.
std::vector<Expectation> load(const std::string& path, const std::string& shown,
                              const std::vector<std::string>& diagnosis_kinds = {});

// What a failure was, for the entries' qualifiers.
struct Failure {
  std::string error;    // where an entry's "error" text is looked for
  bool logits = false;  // the case failed on its logits (rather than on an error)
  // The hypotheses that fit (kind name, parameters); empty with logits: unexplained.
  std::vector<std::pair<std::string, nlohmann::json>> diagnoses;
};

// The expectations of one run: every file given, the tally of what each entry met, and the
// verdicts they give. Thread-safe (engine cases may judge from several threads).
class Set {
 public:
  void add(std::vector<Expectation> entries);
  bool empty() const { return entries_.empty(); }
  const std::vector<Expectation>& entries() const { return entries_; }

  // The first "skip" entry whose pattern matches the case id, if any.
  const Expectation* skip(const std::string& id) const;
  // A SKIP result for a case a "skip" entry names.
  static report::CaseResult skipped(const report::CaseKey& key, const Expectation& e);

  // Judges a finished case: `id` is what the patterns see, `family` the model's family (engine
  // cases; empty elsewhere, where entries that name a family do not apply). A FAIL that an entry
  // expects becomes that entry's expected failure: a DEVIATION whose message names the entry, and
  // whose `expectation` says so. A pass counts for every entry that applies to it (unexpected
  // passes are decided over the whole run: stale()). Returns the entry that excused it.
  const Expectation* judge(report::CaseResult& r, const std::string& id, const std::string& family, const Failure& failure);

  // After the run: the "fail" entries that applied to cases that all passed (none failed as
  // expected), each with the ids of those cases.
  struct Stale {
    size_t entry;
    std::vector<std::string> passed;
  };
  std::vector<Stale> stale() const;
  // The entries whose pattern matches none of `ids` nor any case judged: a warning each.
  std::vector<size_t> unmatched(const std::vector<std::string>& ids) const;
  // Marks the run's passing cases of stale entries: expectation "unexpected_pass", and with
  // `strict` a FAIL saying which entry expected it to fail. Returns how many were marked.
  int mark_unexpected_passes(std::vector<report::CaseResult>& cases, bool strict) const;

 private:
  const Expectation* applies(size_t i, const std::string& id, const std::string& family) const;
  std::vector<Expectation> entries_;
  std::vector<Regex> patterns_, families_;
  mutable std::mutex mutex_;
  struct Tally {
    int64_t excused = 0, failed = 0;
    std::vector<std::string> passed;
    bool seen = false;
  };
  std::vector<Tally> tally_;
};

// Writes `path` from a run (--update-expectations), as Dawn's expectation tooling does: every entry
// kept as written (its text and the comments before it), but the ones `drop` names (stale: their
// cases now pass); one new "fail" entry per id of `add` (an exact pattern and a placeholder reason).
// A file that does not exist yet is created. Written atomically (a temporary file renamed over it).
void update_file(const std::string& path, const std::set<int64_t>& drop_lines, const std::vector<std::string>& add);

// `text` as an ECMAScript regex that matches exactly it.
std::string regex_quote(const std::string& text);

// The placeholder reason of an entry --update-expectations adds.
constexpr const char* kPlaceholderReason = "TODO: why this case fails (added by --update-expectations)";

}  // namespace kvc::expect
