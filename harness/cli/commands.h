// Subcommands of the kvconform CLI. Each registers its options on the CLI11 app and returns the
// process exit code: 0 all pass, 1 some fail, 2 bad usage or bad input.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace kvc::cli {

using Runner = std::function<int()>;

Runner add_run_command(CLI::App& app);

}  // namespace kvc::cli
