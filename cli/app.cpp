#include "app.h"

#include <CLI/CLI.hpp>

#include <filesystem>
#include <iostream>

#include "cli_util.h"
#include "commands.h"
#include "kvconform/cases.h"
#include "kvconform/cpu_pin.h"

namespace kvc::cli {

int run_app(int argc, char** argv, const std::vector<Subcommand>& subcommands, const std::function<void(CLI::App&)>& configure) {
  // Before anything can run LibTorch: the CPU kernels golden replay judges bitwise
  // (golden/README.md "CPU kernel pin"), and the engine processes `engine` starts inherit them. An
  // override stays, is said here and in each golden result.
  for (const std::string& o : kvc::golden::pin_cpu_kernels())
    std::cerr << "kvconform: CPU kernels not pinned: " << o << "; golden attention outputs are judged with tolerances\n";
  CLI::App app{"kvconform: conformance checks for sliding-window KV caches against transformers' reference"};
  app.require_subcommand(1);
  app.set_version_flag("--version", version_text);
  std::vector<std::pair<CLI::App*, Runner>> runners;
  for (const Subcommand& s : subcommands) {
    Runner runner = s.add(app);
    runners.emplace_back(app.get_subcommand(s.name), std::move(runner));
  }
  if (configure) configure(app);
  set_command_line(argc, argv);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints help/version with exit code 0, usage errors with a non-zero code: ours is 2.
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  try {
    for (const auto& [sub, runner] : runners)
      if (sub->parsed()) return runner();
  } catch (const std::invalid_argument& e) {
    std::cerr << "kvconform: " << e.what() << "\n";
    return 2;
  } catch (const kvc::cases::CaseError& e) {  // bad case or fixture file: file and JSON pointer
    std::cerr << "kvconform: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {  // unreadable input, unwritable report folder, ...
    std::cerr << "kvconform: " << e.what() << "\n";
    return 2;
  }
  return 2;
}

const std::vector<Subcommand>& subcommands_without_tensors() {
  static const std::vector<Subcommand> subcommands = {
      {"engine", add_engine_command}, {"merge", add_merge_command}, {"site", add_site_command}};
  return subcommands;
}

std::string libtorch_binary() { return (std::filesystem::path(self_path()).parent_path() / "kvconform-libtorch").string(); }

}  // namespace kvc::cli
