#include <iostream>

#include "kvconform/cases.h"
#include "kvconform/golden.h"

#include "cli_util.h"
#include "commands.h"

int main(int argc, char** argv) {
  // Before anything can run LibTorch: the CPU kernels golden replay judges bitwise
  // (golden/README.md "CPU kernel pin"). An override stays, is said here and in each golden result.
  for (const std::string& o : kvc::golden::pin_cpu_kernels())
    std::cerr << "kvconform: CPU kernels not pinned: " << o << "; golden attention outputs are judged with tolerances\n";
  CLI::App app{"kvconform: conformance checks for sliding-window KV caches against transformers' reference"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "kvconform 0.1.0");
  const kvc::cli::Runner run = kvc::cli::add_run_command(app);
  const kvc::cli::Runner fuzz = kvc::cli::add_fuzz_command(app);
  const kvc::cli::Runner bench = kvc::cli::add_bench_command(app);
  const kvc::cli::Runner replay = kvc::cli::add_replay_command(app);
  const kvc::cli::Runner explain = kvc::cli::add_explain_command(app);
  const kvc::cli::Runner golden = kvc::cli::add_golden_command(app);
  const kvc::cli::Runner engine = kvc::cli::add_engine_command(app);
  const kvc::cli::Runner merge = kvc::cli::add_merge_command(app);
  // Every command that loads case files can lift the size caps (cases/README.md "Size caps").
  bool allow_large = false;
  for (const char* name : {"run", "replay", "explain", "golden"})
    app.get_subcommand(name)->add_flag("--allow-large", allow_large,
                                       "Lift the size caps on case files (also KVC_ALLOW_LARGE=1; KVC_MAX_* raise one)");
  kvc::cli::set_command_line(argc, argv);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints help/version with exit code 0, usage errors with a non-zero code: ours is 2.
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  try {
    if (allow_large) kvc::cases::allow_large();
    if (app.got_subcommand("run")) return run();
    if (app.got_subcommand("fuzz")) return fuzz();
    if (app.got_subcommand("bench")) return bench();
    if (app.got_subcommand("replay")) return replay();
    if (app.got_subcommand("explain")) return explain();
    if (app.got_subcommand("golden")) return golden();
    if (app.got_subcommand("engine")) return engine();
    if (app.got_subcommand("merge")) return merge();
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
