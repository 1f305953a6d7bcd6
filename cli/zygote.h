// A fork server for kvconform-libtorch, on with KVC_ZYGOTE=1 (scripts/test.sh sets it). Every
// LibTorch process pays about 0.2 s of static initialisers before main, and a test run starts
// kvconform-libtorch over a thousand times, most of them for a second or less of work.
//
// The launcher hands its run (argv, working directory, environment, umask, standard streams as
// file descriptors) to a server that has run those initialisers once; the server forks, and the
// child runs main's work as a fresh kvconform-libtorch would, while the launcher waits and exits
// with the child's status or dies of its signal. SIGINT, SIGTERM, SIGHUP and SIGQUIT to the
// launcher go to the child; a launcher that dies (SIGKILL) takes the child with it. One server per
// binary (path, inode, size, time) and environment, so that whatever the initialisers read from
// the environment is what a fresh start reads; it leaves after 30 s without a run. Anything
// unusual (no socket, a server that does not start) and the launcher execs as it always did.
#pragma once

#include <functional>
#include <string>

namespace kvc::cli {

// Returns only where no server took the run (KVC_ZYGOTE unset, or anything failed): the caller
// then execs `binary` itself. Otherwise exits as the served run did.
void hand_off_to_zygote(const std::string& binary, char** argv);

// `binary --zygote-serve PATH READY_FD`: the server's loop; `run(argc, argv)` is main's work in
// each child. Returns the server's exit code.
inline constexpr const char* kZygoteServeFlag = "--zygote-serve";
int serve_zygote(int argc, char** argv, const std::function<int(int, char**)>& run);

}  // namespace kvc::cli
