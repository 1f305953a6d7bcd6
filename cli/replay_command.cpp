// `kvconform replay CASE` and `kvconform explain CASE --step N`: one scenario file against its
// golden fixtures, and one step of it laid out field by field (reference vs fixture).
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "commands.h"
#include "kvconform/behaviours.h"
#include "kvconform/cases.h"
#include "kvconform/fixture_check.h"
#include "kvconform/golden.h"
#include "kvconform/positions.h"
#include "kvconform/report.h"

namespace kvc::cli {

namespace {
namespace fs = std::filesystem;

struct CaseArgs {
  std::string path, fixtures = "golden/fixtures", release, report_dir;
  int step = -1;
  bool json = false;
};

// The release a case runs under when no fixture names one: the newest row of the release table.
std::string newest_release() { return release_table().back().first; }

std::string fixture_file(const CaseArgs& a, const std::string& version, const Scenario& c) {
  return (fs::path(a.fixtures) / version / (c.name + ".json")).string();
}

// The fixture's behaviours (its record, checked against the table), else the table's for release `version`.
golden::FixtureBehaviours behaviours_of(const CaseArgs& a, const std::string& version, const Scenario& c,
                                        const std::optional<nlohmann::json>& fixture) {
  if (fixture) return golden::fixture_behaviours(*fixture, version, fixture_file(a, version, c));
  return {behaviours_for_release(version), ""};
}

// Releases to use: --release, else every fixture folder; each with its fixture file when present.
std::vector<std::pair<std::string, std::optional<nlohmann::json>>> fixtures_for(const Scenario& c, const CaseArgs& a) {
  std::vector<std::string> versions;
  if (!a.release.empty()) versions.push_back(a.release);
  else if (fs::is_directory(a.fixtures)) versions = golden::fixture_versions(a.fixtures);
  std::vector<std::pair<std::string, std::optional<nlohmann::json>>> out;
  for (const std::string& v : versions) {
    if (!c.applies_to(v)) continue;
    const fs::path f = fs::path(a.fixtures) / v / (c.name + ".json");
    std::optional<nlohmann::json> fixture;
    if (fs::exists(f)) {  // malformed: cases::CaseError naming the file and pointer (exit 2)
      fixture = cases::parse_json(cases::read_file(f.string()), f.string());
      golden::check_fixture(*fixture, {c.steps.size(), c.layer_types.size(), "", a.path}, f.string());
    }
    out.emplace_back(v, std::move(fixture));
  }
  if (out.empty() && !a.release.empty()) throw std::invalid_argument("case " + c.name + " does not apply to " + a.release);
  if (out.empty()) out.emplace_back(newest_release(), std::nullopt);  // no fixtures at all: the reference alone
  return out;
}

std::string compact(const nlohmann::json& j) { return j.is_null() ? "-" : j.dump(); }
}  // namespace

Runner add_replay_command(CLI::App& app) {
  auto a = std::make_shared<CaseArgs>();
  CLI::App* cmd = app.add_subcommand("replay", "Replay one case file through the reference and compare with its golden fixtures");
  cmd->add_option("CASE", a->path, "A scenario file (cases/README.md)")->required();
  cmd->add_option("--fixtures", a->fixtures, "Golden fixtures folder (default golden/fixtures)");
  CLI::Option* release = cmd->add_option("--release", a->release,
                                         "Only this transformers release's fixture, and the behaviours the reference "
                                         "follows with --json (default: every fixture folder; with --json the newest "
                                         "known release)");
  add_old_spelling(cmd, "--version", release, a->release);
  cmd->add_option("--report-dir", a->report_dir, "Also write junit.xml, summary.json, summary.md, report.html here");
  cmd->add_flag("--json", a->json,
                "Print the reference's observations for the case as fixture-format JSON (no fixtures needed) and exit 0");
  return [a]() -> int {
    const Scenario c = cases::load_case(a->path);
    if (a->json) {
      const std::string release = !a->release.empty() ? a->release : newest_release();
      nlohmann::json out = golden::run_case(c, behaviours_for_release(release));
      out["release"] = release;
      std::cout << out.dump(1) << "\n";
      return 0;
    }
    report::RunSummary summary;
    summary.tool_version = kToolVersion;
    summary.command = command_line();
    for (const auto& [version, fixture] : fixtures_for(c, *a)) {
      const golden::FixtureBehaviours fb = behaviours_of(*a, version, c, fixture);
      const nlohmann::json reference = golden::run_case(c, fb.behaviours);
      report::CaseResult r;
      if (fixture && !fb.mismatch.empty()) {
        r = golden::behaviours_failure(*fixture, version, c, fb.mismatch);
      } else if (fixture) {
        r = golden::compare(*fixture, reference, c);
      } else {
        report::rename(r, report::GoldenKey{version, c.name});
        r.backend = "reference";
        r.dtype = to_string(c.dtype);
        r.status = report::Status::Skipped;
        r.message = "no fixture for this case: the reference ran " + std::to_string(reference["steps"].size()) +
                    " steps (kvconform golden regenerates fixtures)";
      }
      r.reproduce = "kvconform replay " + shell_quote(a->path) + " --release " + version;
      std::cout << r.name << "(" << r.params << "): " << to_string(r.status) << (r.message.empty() ? "" : " " + r.message)
                << "\n";
      if (r.status == report::Status::Fail && !r.detail.empty()) std::cout << r.detail << "\n";
      summary.cases.push_back(std::move(r));
    }
    const int failed = summary.count(report::Status::Fail);
    if (!a->report_dir.empty()) report::write_reports(summary, a->report_dir);
    const int skipped = summary.count(report::Status::Skipped);
    std::cout << (static_cast<int>(summary.cases.size()) - failed - skipped) << " passed, " << failed << " failed";
    if (skipped) std::cout << ", " << skipped << " skipped";
    std::cout << "\n";
    return failed == 0 ? 0 : 1;
  };
}

// The masks of one layer and step as a picture: rows are queries, columns absolute key positions.
// '#' attended, '.' outside the window (or chunk), 'p' inside it but a padding token, ' ' a future
// key; '+' the reference attends where transformers does not, '-' the reverse. Returns mismatches.
int draw_masks(const Scenario& c, size_t layer, const nlohmann::json& rl, const nlohmann::json* fixture_masks) {
  const LayerSpec spec = c.layer_spec(layer);
  const int64_t offset = rl["mask_sizes"].value("kv_offset", int64_t{0});
  const int64_t length = rl["mask_sizes"].value("kv_length", int64_t{0});
  std::cout << "  keys " << offset << ".." << offset + length - 1 << " (kv_offset " << offset << ", kv_length " << length
            << "); ";
  if (spec.type == LayerType::Sliding)
    std::cout << "window " << spec.window << ": each query sees itself and " << spec.window - 1 << " earlier keys\n";
  else if (spec.type == LayerType::Chunked)
    std::cout << "chunks of " << spec.window << " counted from each row's first real token\n";
  else std::cout << "full causal attention\n";
  std::cout << "  # attended  . outside the window  p padding  (blank) future key  + / - reference attends / misses vs "
               "transformers\n";
  int mismatches = 0;
  for (size_t b = 0; b < rl["bool_mask"].size(); ++b) {
    const int64_t lp = c.left_padding ? (*c.left_padding)[b] : 0;
    std::string tens, ones;
    for (int64_t j = 0; j < length; ++j) {
      const int64_t k = offset + j;
      tens += k >= 10 ? static_cast<char>('0' + (k / 10) % 10) : ' ';
      ones += static_cast<char>('0' + k % 10);
    }
    std::cout << "  batch row " << b << (lp ? " (" + std::to_string(lp) + " padding tokens)" : std::string()) << "\n";
    if (tens.find_first_not_of(' ') != std::string::npos) std::cout << "        " << tens << "\n";
    std::cout << "        " << ones << "\n";
    const nlohmann::json& rows = rl["bool_mask"][b];
    for (size_t i = 0; i < rows.size(); ++i) {
      const int64_t q = rl["q_positions"][i].get<int64_t>();
      const std::string ref = rows[i].get<std::string>();
      std::string fix = ref;
      if (fixture_masks && b < fixture_masks->size() && i < (*fixture_masks)[b].size())
        fix = (*fixture_masks)[b][i].get<std::string>();
      std::string line;
      for (int64_t j = 0; j < length && j < static_cast<int64_t>(ref.size()); ++j) {
        const int64_t k = offset + j;
        const bool r = ref[j] == '1', f = j < static_cast<int64_t>(fix.size()) && fix[j] == '1';
        if (r != f) {
          line += r ? '+' : '-';
          ++mismatches;
        } else if (r) {
          line += '#';
        } else if (k > q) {
          line += ' ';
        } else if (positions::window_allows(spec.type, spec.window, lp, q, k)) {
          line += 'p';
        } else {
          line += '.';
        }
      }
      std::cout << "  q" << std::setw(4) << std::left << q << std::right << " " << line << "\n";
    }
  }
  return mismatches;
}

Runner add_explain_command(CLI::App& app) {
  auto a = std::make_shared<CaseArgs>();
  CLI::App* cmd = app.add_subcommand("explain", "Show one step of a case: mask sizes, rows and masks, reference vs fixture");
  cmd->add_option("CASE", a->path, "A scenario file (cases/README.md)")->required();
  cmd->add_option("--step", a->step, "Step index, from 0")->required()->check(CLI::NonNegativeNumber);
  cmd->add_option("--fixtures", a->fixtures, "Golden fixtures folder (default golden/fixtures)");
  CLI::Option* release =
      cmd->add_option("--release", a->release, "Transformers release whose fixture and behaviours to use (default: the newest)");
  add_old_spelling(cmd, "--version", release, a->release);
  return [a]() -> int {
    const Scenario c = cases::load_case(a->path);
    if (a->step >= static_cast<int>(c.steps.size()))
      throw std::invalid_argument("--step " + std::to_string(a->step) + ": " + c.name + " has " + std::to_string(c.steps.size()) +
                                  " steps (0.." + std::to_string(c.steps.size() - 1) + ")");
    auto all = fixtures_for(c, *a);
    const auto& [version, fixture] = all.back();  // versions are sorted: the newest
    const golden::FixtureBehaviours fb = behaviours_of(*a, version, c, fixture);
    if (!fb.mismatch.empty()) std::cout << fb.mismatch << "\n(the reference follows the table)\n";
    const nlohmann::json reference = golden::run_case(c, fb.behaviours);
    const nlohmann::json& rs = reference["steps"][static_cast<size_t>(a->step)];
    const nlohmann::json* fs_ = fixture && (*fixture)["steps"].size() > static_cast<size_t>(a->step)
                                    ? &(*fixture)["steps"][static_cast<size_t>(a->step)]
                                    : nullptr;
    int differences = 0;
    std::cout << c.name << " step " << a->step << " (" << c.steps[static_cast<size_t>(a->step)].tokens
              << " tokens), transformers " << version << (fs_ ? " fixture vs reference" : " reference only (no fixture)") << "\n";
    for (size_t l = 0; l < rs["layers"].size(); ++l) {
      const nlohmann::json& rl = rs["layers"][l];
      const nlohmann::json* fl = fs_ && l < (*fs_)["layers"].size() ? &(*fs_)["layers"][l] : nullptr;
      std::cout << "\nlayer " << l << " " << c.layer_spec(l).describe() << "\n";
      const auto field = [&](const char* label, const nlohmann::json& ref, const nlohmann::json* fix) {
        const bool differ = fix && *fix != ref;
        differences += differ;
        std::cout << "  " << (differ ? "≠ " : "  ") << label << ": " << compact(ref);
        if (fix && differ) std::cout << "   fixture: " << compact(*fix);
        std::cout << "\n";
      };
      const auto sub = [](const nlohmann::json* j, const char* a, const char* b = nullptr) -> const nlohmann::json* {
        if (!j || !j->contains(a)) return nullptr;
        const nlohmann::json* x = &(*j)[a];
        if (b) x = x->is_object() && x->contains(b) ? &(*x)[b] : nullptr;
        return x;
      };
      const nlohmann::json null;
      for (const char* k : {"cumulative_length_before", "mask_sizes", "q_positions", "sdpa_mask_skipped"})
        field(k, rl.value(k, null), sub(fl, k));
      // A layer whose update raised has null returned/stored (both sides, or the errors differ).
      const auto rows = [&](const char* k) { return rl.contains(k) && rl[k].is_object() ? rl[k].value("rows", null) : null; };
      field("returned rows", rows("returned"), sub(fl, "returned", "rows"));
      field("stored rows", rows("stored"), sub(fl, "stored", "rows"));
      // Errors are compared by phase, as golden::compare does: the messages are each language's own.
      const auto phases = [](const nlohmann::json* errors) {
        nlohmann::json p = nlohmann::json::array();
        if (errors && errors->is_array())
          for (const auto& e : *errors) p.push_back(e.value("phase", std::string("?")));
        return p;
      };
      const nlohmann::json ref_phases = phases(rl.contains("errors") ? &rl["errors"] : nullptr);
      const nlohmann::json fix_phases = phases(sub(fl, "errors"));
      if (!ref_phases.empty() || !fix_phases.empty()) field("raised in", ref_phases, fl ? &fix_phases : nullptr);
      if (rl.contains("bool_mask")) differences += draw_masks(c, l, rl, sub(fl, "bool_mask"));
    }
    std::cout << "\n" << differences << " differences\n";
    return differences == 0 ? 0 : 1;
  };
}

}  // namespace kvc::cli
