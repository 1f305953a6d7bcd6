#include "expectation_options.h"

#include <filesystem>
#include <iostream>
#include <map>
#include <set>

namespace kvc::cli {

void add_expectation_options(CLI::App* cmd, ExpectationArgs& a, bool none_flag) {
  CLI::Option* files = cmd->add_option(
      "--expectations", a.files,
      "An expectations file of the implementation under test (docs/expectations.md; repeatable): the cases it expects to "
      "fail are reported as expected failures (DEVIATION) and do not fail the run, those it skips are not run");
  cmd->add_flag("--strict-expectations", a.strict,
                "An entry whose cases all passed is an unexpected pass that fails the run (its passing cases are FAIL)");
  cmd->add_flag("--update-expectations", a.update,
                "Rewrite the expectations files from this run: entries whose cases now pass dropped, a new entry (placeholder "
                "reason) for each failure none expects; the rest kept as written");
  if (none_flag)
    cmd->add_flag("--no-expectations", a.none,
                  "Load no expectations file, not even the engine folders' own: every failure a FAIL")
        ->excludes(files);
}

void Expectations::load(const std::string& path, const std::string& shown, bool check_unmatched, bool may_be_missing,
                        const std::vector<std::string>& diagnosis_kinds) {
  File f{path, shown, set->entries().size(), 0, check_unmatched};
  if (std::filesystem::exists(path) || !may_be_missing) {
    std::vector<expect::Expectation> entries = expect::load(path, shown, diagnosis_kinds);
    f.count = entries.size();
    set->add(std::move(entries));
  }
  files.push_back(f);
}

void finish_expectations(const Expectations& x, const ExpectationArgs& a, std::vector<report::CaseResult>& cases,
                         const std::vector<std::string>& ids,
                         const std::function<std::string(const report::CaseResult&)>& home_of) {
  const std::vector<expect::Expectation>& entries = x.set->entries();
  const auto file_of = [&](size_t entry) -> const Expectations::File* {
    for (const Expectations::File& f : x.files)
      if (entry >= f.first && entry < f.first + f.count) return &f;
    return nullptr;
  };
  for (size_t i : x.set->unmatched(ids)) {
    const Expectations::File* f = file_of(i);
    if (f && f->check_unmatched)
      std::cerr << "expectations: warning: " << entries[i].where() << ": \"" << entries[i].pattern
                << "\" matches no case of this run\n";
  }
  const std::vector<expect::Set::Stale> stale = x.set->stale();
  for (const expect::Set::Stale& s : stale) {
    const expect::Expectation& e = entries[s.entry];
    std::cerr << "expectations: " << (a.strict ? "FAIL" : "warning") << ": " << e.where() << ": unexpected pass: \"" << e.pattern
              << "\" expects a failure and its " << s.passed.size() << " case" << (s.passed.size() == 1 ? "" : "s")
              << " passed (first " << s.passed.front() << ")" << (a.update ? "; dropped" : "; --update-expectations drops it")
              << "\n";
  }
  x.set->mark_unexpected_passes(cases, a.strict);
  if (!a.update) return;
  // Each file: its stale entries dropped, the failures whose home it is added.
  std::map<std::string, std::set<int64_t>> drop;
  for (const expect::Set::Stale& s : stale)
    if (const Expectations::File* f = file_of(s.entry)) drop[f->path].insert(entries[s.entry].line);
  std::map<std::string, std::vector<std::string>> add;
  for (const report::CaseResult& c : cases)
    if (c.status == report::Status::Fail && c.expectation.outcome.empty())
      if (const std::string home = home_of(c); !home.empty()) add[home].push_back(c.id);
  for (const Expectations::File& f : x.files) {
    const auto d = drop.find(f.path);
    const auto n = add.find(f.path);
    if (d == drop.end() && n == add.end()) continue;
    expect::update_file(f.path, d == drop.end() ? std::set<int64_t>{} : d->second,
                        n == add.end() ? std::vector<std::string>{} : n->second);
    std::cerr << "expectations: updated " << f.shown << ": " << (d == drop.end() ? 0 : d->second.size())
              << " entries dropped (now passing), " << (n == add.end() ? 0 : n->second.size()) << " added (reason \""
              << expect::kPlaceholderReason << "\" to fill in)\n";
  }
}

}  // namespace kvc::cli
