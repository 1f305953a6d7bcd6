// kvconform: runs the subcommands that need no tensors (engine, merge) in this process, and execs
// kvconform-libtorch beside it, with the same arguments, for everything else (cli/app.h), or with
// KVC_ZYGOTE=1 hands that run to a kvconform-libtorch fork server (zygote.h).
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <string>

#include "app.h"
#include "zygote.h"

int main(int argc, char** argv) {
  using namespace kvc::cli;
  const std::string first = argc > 1 ? argv[1] : "";
  for (const Subcommand& s : subcommands_without_tensors())
    if (first == s.name) return run_app(argc, argv, subcommands_without_tensors());
  const std::string full = libtorch_binary();
  hand_off_to_zygote(full, argv);
  execv(full.c_str(), argv);
  std::cerr << "kvconform: cannot run " << full << " (" << std::strerror(errno)
            << "): the subcommands that need LibTorch run in kvconform-libtorch, installed beside kvconform\n";
  return 2;
}
