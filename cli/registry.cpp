#include "registry.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <stdexcept>

#include "cli_util.h"

namespace kvc::cli {

namespace {
std::vector<Flag>& reproduce_report_flags() {
  static std::vector<Flag> flags;
  return flags;
}
}  // namespace

void reproduce_reports_in(const std::string& report_dir, bool no_report) {
  std::vector<Flag>& flags = reproduce_report_flags();
  if (no_report || report_dir.empty()) {
    flags = {{"--no-report", ""}};
    return;
  }
  // The folder the run was started in, not the run's own report folder: shards of one run (each with
  // its own --report-dir) print the same line as the unsharded run, so merged reports stay equal.
  flags = {{"--report-dir", (std::filesystem::current_path() / "reports" / "reproduce").lexically_normal().string()}};
}

std::string reproduce_line(const std::string& program, const std::string& subcommand, const std::vector<Flag>& given) {
  std::string line = shell_quote(program) + " " + subcommand;
  std::vector<Flag> flags = given;
  const auto says_where = [&](const Flag& f) { return f.name == "--report-dir" || f.name == "--no-report"; };
  if (std::none_of(flags.begin(), flags.end(), says_where))
    for (const Flag& f : reproduce_report_flags()) flags.push_back(f);
  for (const Flag& f : flags) {
    if (!f.name.empty()) line += " " + f.name;
    if (f.value.empty()) continue;
    switch (f.quote) {
      case Flag::Quote::Shell: line += " " + shell_quote(f.value); break;
      case Flag::Quote::Single:
        line += " " + (f.value.find('\'') == std::string::npos ? "'" + f.value + "'" : shell_quote(f.value));
        break;
      case Flag::Quote::None: line += " " + f.value; break;
    }
  }
  return line;
}

const CaseEntry& Registry::add(CaseKey key, std::function<report::CaseResult()> run, std::shared_ptr<const CaseBatch> batch) {
  CaseEntry e;
  e.id = id_of(key);
  e.key = std::move(key);
  e.run = std::move(run);
  e.batch = std::move(batch);
  if (!ids_.insert(e.id).second) throw std::logic_error("case " + e.id + " registered twice");
  entries_.push_back(std::move(e));
  return entries_.back();
}

Registry::Plan Registry::choose(const std::function<bool(const std::string& id)>& selected, int64_t shard_index,
                                int64_t shard_count) const {
  Plan plan;
  for (const CaseEntry& e : entries_) {
    if (e.always) {
      plan.chosen.push_back({&e, -1});  // its ordinal is the case's before it (run)
      continue;
    }
    if (selected && !selected(e.id)) continue;
    const int64_t k = plan.selected++;
    if (k % shard_count == shard_index) plan.chosen.push_back({&e, k});
  }
  return plan;
}

void Registry::run(const Plan& plan, const std::function<void(const Chosen&, report::CaseResult)>& done,
                   const std::function<bool(const Chosen&)>& start,
                   const std::function<std::optional<report::CaseResult>(const CaseEntry&)>& instead) {
  int64_t last_ordinal = 0;
  const CaseBatch* batch_done = nullptr;  // batches are contiguous in registry order
  std::set<const CaseEntry*> replaced;    // the cases `instead` answered for
  for (size_t i = 0; i < plan.chosen.size(); ++i) {
    const Chosen& c = plan.chosen[i];
    if (instead && !c.entry->always) {
      if (std::optional<report::CaseResult> r = instead(*c.entry)) {
        replaced.insert(c.entry);
        done(c, std::move(*r));
        last_ordinal = c.ordinal;
        if (!c.entry->batch) continue;
      }
    }
    if (!c.entry->batch) {
      if (start && !start(c)) continue;
      const Chosen at{c.entry, c.entry->always ? last_ordinal : c.ordinal};
      report::CaseResult r = c.entry->run();
      // The reports name a result by its id: it must be the name the case ran under.
      if (r.id != c.entry->id) throw std::logic_error("case " + c.entry->id + " returned a result named '" + r.id + "'");
      done(at, std::move(r));
      last_ordinal = at.ordinal;
      continue;
    }
    if (c.entry->batch.get() == batch_done) continue;
    batch_done = c.entry->batch.get();
    std::map<std::string, Chosen> of_batch;
    for (size_t j = i; j < plan.chosen.size() && plan.chosen[j].entry->batch.get() == batch_done; ++j) {
      const Chosen& b = plan.chosen[j];
      if (j > i && instead && !b.entry->always && !replaced.count(b.entry))
        if (std::optional<report::CaseResult> r = instead(*b.entry)) {
          replaced.insert(b.entry);
          done(b, std::move(*r));
        }
      if (!replaced.count(b.entry)) of_batch.emplace(b.entry->id, b);
    }
    if (of_batch.empty()) continue;
    batch_done->run([&](const std::string& id) { return of_batch.count(id) > 0; },
                    [&](report::CaseResult r) {
                      if (r.id.empty())
                        throw std::logic_error("a case of the batch of " + c.entry->id + " returned a result with no id");
                      const auto it = of_batch.find(r.id);
                      Chosen at = it != of_batch.end() ? it->second : Chosen{c.entry, last_ordinal};
                      if (at.entry->always) at.ordinal = last_ordinal;
                      last_ordinal = at.ordinal;
                      done(at, std::move(r));
                    });
  }
}

}  // namespace kvc::cli
