// Subcommands of the kvconform CLI. Each registers its options on the CLI11 app and returns the
// process exit code: 0 all pass, 1 some fail, 2 bad usage or bad input.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>

namespace kvc::cli {

using Runner = std::function<int()>;

Runner add_run_command(CLI::App& app);
Runner add_fuzz_command(CLI::App& app);    // fuzz_command.cpp
Runner add_bench_command(CLI::App& app);   // bench_command.cpp (the one CLI file with LibTorch)
Runner add_replay_command(CLI::App& app);   // replay_command.cpp
Runner add_explain_command(CLI::App& app);  // replay_command.cpp

// Round r of `kvconform fuzz --seed S` runs the campaign with this seed (documented in docs/cli.md).
uint64_t fuzz_round_seed(uint64_t seed, uint64_t round);

}  // namespace kvc::cli
