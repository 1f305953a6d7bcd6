#include "registry.h"

#include <map>
#include <stdexcept>

#include "cli_util.h"

namespace kvc::cli {

namespace {
template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;
}  // namespace

std::string suite_of(const CaseKey& key) {
  return std::visit(Overloaded{[](const GoldenKey&) { return std::string("golden"); },
                               [](const BackendKey&) { return std::string("backend"); },
                               [](const PropertyKey&) { return std::string("property"); },
                               [](const PluginKey&) { return std::string("plugin"); },
                               [](const EngineKey&) { return std::string("engine"); }},
                    key);
}

std::string id_of(const CaseKey& key) {
  const std::string suite = suite_of(key);
  return suite + "/" +
         std::visit(Overloaded{[](const GoldenKey& k) { return k.release + "/" + k.name; },
                               [](const BackendKey& k) { return k.scenario + "/" + k.cache + "/" + k.backend + "/" + k.dtype; },
                               [](const PropertyKey& k) { return k.property; },
                               [](const PluginKey& k) { return k.plugin + "/" + k.name + "/" + k.dtype; },
                               [](const EngineKey& k) { return k.engine + "/" + k.model + "/" + k.plan; }},
                    key);
}

CaseKey key_of(const report::CaseResult& r) {
  if (r.suite == "golden") {
    const auto slash = r.name.find('/');
    return GoldenKey{r.name.substr(0, slash), slash == std::string::npos ? "" : r.name.substr(slash + 1)};
  }
  if (r.suite == "backend") {
    const auto slash = r.name.rfind('/');
    return BackendKey{r.name.substr(0, slash), slash == std::string::npos ? "" : r.name.substr(slash + 1), r.backend, r.dtype};
  }
  if (r.suite == "property") return PropertyKey{r.name};
  if (r.suite == "plugin") return PluginKey{r.backend, r.name, r.dtype};
  if (r.suite == "engine") {
    const auto slash = r.name.find('/');
    return EngineKey{r.backend, r.name.substr(0, slash), slash == std::string::npos ? "" : r.name.substr(slash + 1)};
  }
  throw std::logic_error("a case of no registered suite: '" + r.suite + "'");
}

std::string reproduce_line(const std::string& program, const std::string& subcommand, const std::vector<Flag>& flags) {
  std::string line = shell_quote(program) + " " + subcommand;
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

const CaseEntry& Registry::add(CaseKey key, std::function<report::CaseResult()> run,
                               std::shared_ptr<const CaseBatch> batch) {
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
                   const std::function<bool(const Chosen&)>& start) {
  int64_t last_ordinal = 0;
  const CaseBatch* batch_done = nullptr;  // batches are contiguous in registry order
  for (size_t i = 0; i < plan.chosen.size(); ++i) {
    const Chosen& c = plan.chosen[i];
    if (!c.entry->batch) {
      if (start && !start(c)) continue;
      const Chosen at{c.entry, c.entry->always ? last_ordinal : c.ordinal};
      report::CaseResult r = c.entry->run();
      // The reports name a result by report::case_id: it must be the name the case ran under.
      if (report::case_id(r) != c.entry->id)
        throw std::logic_error("case " + c.entry->id + " returned a result named " + report::case_id(r));
      done(at, std::move(r));
      last_ordinal = at.ordinal;
      continue;
    }
    if (c.entry->batch.get() == batch_done) continue;
    batch_done = c.entry->batch.get();
    std::map<std::string, Chosen> of_batch;
    for (size_t j = i; j < plan.chosen.size() && plan.chosen[j].entry->batch.get() == batch_done; ++j)
      of_batch.emplace(plan.chosen[j].entry->id, plan.chosen[j]);
    batch_done->run([&](const std::string& id) { return of_batch.count(id) > 0; },
                    [&](report::CaseResult r) {
                      const auto it = of_batch.find(report::case_id(r));
                      Chosen at = it != of_batch.end() ? it->second : Chosen{c.entry, last_ordinal};
                      if (at.entry->always) at.ordinal = last_ordinal;
                      last_ordinal = at.ordinal;
                      done(at, std::move(r));
                    });
  }
}

}  // namespace kvc::cli
