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

namespace {
template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

// "a/b" as {"a", "b"}, at the first (or last) slash; no slash: {"a/b", ""}.
std::pair<std::string, std::string> split(const std::string& s, bool at_last) {
  const auto slash = at_last ? s.rfind('/') : s.find('/');
  if (slash == std::string::npos) return {s, ""};
  return {s.substr(0, slash), s.substr(slash + 1)};
}
}  // namespace

std::string suite_of(const CaseKey& key) {
  return std::visit(
      Overloaded{[](const GoldenKey&) { return std::string("golden"); }, [](const BackendKey&) { return std::string("backend"); },
                 [](const PropertyKey&) { return std::string("property"); },
                 [](const PluginKey&) { return std::string("plugin"); }, [](const EngineKey&) { return std::string("engine"); },
                 [](const CampaignKey& k) { return k.suite; }},
      key);
}

std::string id_of(const CaseKey& key) {
  return suite_of(key) + "/" +
         std::visit(Overloaded{[](const GoldenKey& k) { return k.release + "/" + k.name; },
                               [](const BackendKey& k) { return k.scenario + "/" + k.cache + "/" + k.backend + "/" + k.dtype; },
                               [](const PropertyKey& k) { return k.property; },
                               [](const PluginKey& k) { return k.plugin + "/" + k.name + "/" + k.dtype; },
                               [](const EngineKey& k) { return k.engine + "/" + k.model + "/" + k.plan; },
                               [](const CampaignKey& k) { return k.name; }},
                    key);
}

CaseResult named(const CaseKey& key) {
  CaseResult r;
  rename(r, key);
  return r;
}

void rename(CaseResult& r, const CaseKey& key) {
  r.id = id_of(key);
  r.suite = suite_of(key);
  std::visit(Overloaded{[&](const GoldenKey& k) { r.name = k.release + "/" + k.name; },
                        [&](const BackendKey& k) {
                          r.name = k.scenario + "/" + k.cache;
                          r.backend = k.backend;
                          r.dtype = k.dtype;
                        },
                        [&](const PropertyKey& k) { r.name = k.property; },
                        [&](const PluginKey& k) {
                          r.name = k.name;
                          r.backend = k.plugin;
                          r.dtype = k.dtype;
                        },
                        [&](const EngineKey& k) {
                          r.name = k.model + "/" + k.plan;
                          r.backend = k.engine;
                        },
                        [&](const CampaignKey& k) { r.name = k.name; }},
             key);
}

CaseKey key_of(const CaseResult& r) {
  if (r.suite == "golden") {
    auto [release, name] = split(r.name, false);
    return GoldenKey{release, name};
  }
  if (r.suite == "backend") {
    auto [scenario, cache] = split(r.name, true);
    return BackendKey{scenario, cache, r.backend, r.dtype};
  }
  if (r.suite == "property") return PropertyKey{r.name};
  if (r.suite == "plugin") return PluginKey{r.backend, r.name, r.dtype};
  if (r.suite == "engine") {
    auto [model, plan] = split(r.name, false);
    return EngineKey{r.backend, model, plan};
  }
  return CampaignKey{r.suite, r.name};
}

}  // namespace kvc::report
