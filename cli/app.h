// The kvconform command line, shared by its two binaries: `kvconform`, which runs the subcommands
// that need no tensors itself and hands every other to `kvconform-libtorch` beside it, and
// `kvconform-libtorch`, which has them all. A LibTorch process pays about 0.2 s of static
// initialisers before main; engine campaigns and merges start kvconform hundreds of times a test run.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace CLI {
class App;  // no CLI11 here: it costs about 3 s of every translation unit that includes it
}

namespace kvc::cli {

// A subcommand's work once its options are parsed: the process exit code.
using Runner = std::function<int()>;

struct Subcommand {
  const char* name;
  Runner (*add)(CLI::App&);
};

// The subcommands that need no tensors, which `kvconform` runs itself: engine, merge, site.
const std::vector<Subcommand>& subcommands_without_tensors();

// Pins the CPU kernels, parses the command line into `subcommands` (`configure` adds options after
// them) and runs the one given: 0 all pass, 1 some fail, 2 bad usage or bad input.
int run_app(int argc, char** argv, const std::vector<Subcommand>& subcommands,
            const std::function<void(CLI::App&)>& configure = {});

// The sibling binary with every subcommand: kvconform-libtorch in this binary's folder.
std::string libtorch_binary();

}  // namespace kvc::cli
