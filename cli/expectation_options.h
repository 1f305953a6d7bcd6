// The expectations flags of `run` and `engine` (docs/expectations.md), and what a run does with
// them once its cases have run: warnings for entries that matched no case, unexpected passes
// (FAIL under --strict-expectations), and --update-expectations. No LibTorch.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kvconform/expectations.h"
#include "kvconform/results.h"

namespace kvc::cli {

struct ExpectationArgs {
  std::vector<std::string> files;  // --expectations (repeatable)
  bool strict = false, update = false, none = false;
};
// --expectations FILE, --strict-expectations, --update-expectations; `none_flag` adds
// --no-expectations (engine: not even the engine folders' files).
void add_expectation_options(CLI::App* cmd, ExpectationArgs& a, bool none_flag);

// The files a run loaded, each with the entries it gave the set.
struct Expectations {
  std::shared_ptr<expect::Set> set = std::make_shared<expect::Set>();
  struct File {
    std::string path, shown;
    size_t first = 0, count = 0;  // its entries in set->entries()
    bool check_unmatched = true;  // warn about its entries that match no case of this run
  };
  std::vector<File> files;
  // Loads `path` (shown in messages and reports as `shown`); a file that does not exist is an
  // error unless `may_be_missing` (an engine folder without one: it has none, and an update writes it).
  void load(const std::string& path, const std::string& shown, bool check_unmatched, bool may_be_missing = false,
            const std::vector<std::string>& diagnosis_kinds = {});
};

// After the run, before the reports are written: warns on stderr about each entry that matched no
// case of `ids` (file, line, pattern), reports unexpected passes (marked in summary.cases, FAIL
// under --strict-expectations), and with --update-expectations rewrites each file: stale entries
// dropped, each FAIL no entry expects added to the file `home_of` names for it ("" : to none).
void finish_expectations(const Expectations& x, const ExpectationArgs& a, std::vector<report::CaseResult>& cases,
                         const std::vector<std::string>& ids,
                         const std::function<std::string(const report::CaseResult&)>& home_of);

}  // namespace kvc::cli
