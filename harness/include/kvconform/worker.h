// A worker process behind the subprocess protocols (kernels: docs/plugins.md; engines:
// docs/engines.md): `sh -c COMMAND` in its own process group, spoken to over stdin/stdout with
// length-prefixed JSON headers and raw buffers. Every exchange is bounded by a deadline; a worker
// that dies, hangs or breaks the framing is killed, and the caller gets how it ended plus the tail
// of its stderr. No LibTorch here.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "kvconform/plugin_runner.h"

namespace kvc::worker {

using End = plugin::PluginRun::End;

// u32 little-endian header length | header: the start of every message.
std::string frame(const nlohmann::json& header);

class Worker {
 public:
  explicit Worker(std::string command) : command_(std::move(command)) {}
  ~Worker() { stop(); }
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  bool running() const { return pid_ > 0; }
  const std::string& command() const { return command_; }
  // The worker's answer to hello (name, description, and whatever its level adds).
  const nlohmann::json& hello_reply() const { return hello_reply_; }

  // Starts the worker and sends `hello`; false (with end/detail) when it does not answer "ok"
  // within startup_timeout_s, and then it is stopped.
  bool start(const nlohmann::json& hello, double startup_timeout_s, End& end, std::string& detail);
  // Sends one request and reads one reply (header and payload) within timeout_s. False: the
  // worker failed (end, detail say how) and has been stopped.
  bool transact(const std::string& request, double timeout_s, nlohmann::json& reply, std::string& payload, End& end,
                std::string& detail);
  void stop();

 private:
  std::string stderr_note();
  // Appends what the worker wrote to stderr, keeping its cause line and at most a bounded tail.
  void take_stderr(const char* data, size_t n);
  // Keeps the first stderr line from `from` on that says why a process died (an assertion, an abort).
  void remember_cause(size_t from);
  bool died(End& end, std::string& detail);
  // "protocol error: the worker sent WHAT" (or "the worker WHAT" when !sent).
  bool protocol_error(const std::string& what, End& end, std::string& detail, bool sent = true);
  // What a worker printed to its stdout (`in`, plus what follows within 200 ms), quoted.
  std::string stray_text(std::string& in, std::chrono::steady_clock::time_point deadline);

  std::string command_;
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1, err_ = -1;
  std::string stderr_;
  // A backtrace printed after an assertion can push the assertion out of the stderr tail a failure
  // message quotes; its line is kept here, so that the message (and a known deviation's "error") has it.
  std::string cause_;
  bool stderr_cut_ = false;  // stderr_ lost its beginning while it was read
  nlohmann::json hello_reply_;
};

}  // namespace kvc::worker
