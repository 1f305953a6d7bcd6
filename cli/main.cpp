// kvconform-libtorch: every subcommand (cli/app.h). `kvconform` hands it those that need LibTorch.
#include "kvconform/cases.h"

#include <CLI/CLI.hpp>

#include "app.h"
#include "commands.h"
#include "zygote.h"

namespace {

int run(int argc, char** argv) {
  using namespace kvc::cli;
  std::vector<Subcommand> subcommands = {{"run", add_run_command},         {"fuzz", add_fuzz_command},
                                         {"bench", add_bench_command},     {"replay", add_replay_command},
                                         {"explain", add_explain_command}, {"golden", add_golden_command}};
  for (const Subcommand& s : subcommands_without_tensors()) subcommands.push_back(s);
  return run_app(argc, argv, subcommands, [](CLI::App& app) {
    // Every command that loads case files can lift the size caps (cases/README.md "Size caps").
    for (const char* name : {"run", "replay", "explain", "golden"})
      app.get_subcommand(name)->add_flag_callback(
          "--allow-large", [] { kvc::cases::allow_large(); },
          "Lift the size caps on case files (also KVC_ALLOW_LARGE=1; KVC_MAX_* raise one)");
  });
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == kvc::cli::kZygoteServeFlag) return kvc::cli::serve_zygote(argc, argv, run);
  return run(argc, argv);
}
