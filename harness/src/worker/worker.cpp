// The worker process behind the subprocess protocols (worker.h).
#include "kvconform/worker.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <sstream>
#include <string_view>
#include <vector>

#include "build_paths.h"
#include "kvconform/framing.h"

extern char** environ;

namespace kvc::worker {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr size_t kStderrTail = 2000;  // bytes of the worker's stderr kept for failure messages
constexpr uint32_t kMaxHeader = 1u << 20;

std::string signal_text(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  const char* desc = strsignal(sig);
  return std::string(abbrev ? "SIG" + std::string(abbrev) : "signal " + std::to_string(sig)) + " (" + (desc ? desc : "?") + ")";
}

// Text bytes: printable ASCII, tab, newline, carriage return, or ESC (a log line's ANSI colour codes).
bool printable(const char* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(p[i]);
    if (!((c >= 0x20 && c < 0x7F) || c == '\t' || c == '\n' || c == '\r' || c == 0x1b)) return false;
  }
  return true;
}

// A byte as it is shown in a message: itself where printable, else \xNN.
std::string shown_byte(char ch) {
  const unsigned char c = static_cast<unsigned char>(ch);
  if (c >= 0x20 && c < 0x7F) return std::string(1, ch);
  if (c == '\t') return " ";
  static const char* hex = "0123456789abcdef";
  return std::string("\\x") + hex[c >> 4] + hex[c & 15];
}

std::string seconds(double s) {
  std::ostringstream os;
  os << s;
  return os.str();
}

// The child's environment: this process's, with the checkout's Python package (python/, the
// `kvconform` package that Python adapters import) on PYTHONPATH after any PYTHONPATH already set.
// One place for every worker, kernel and engine alike: the engine venvs are shared between
// checkouts (engines/setup_env.sh caches them by requirements), so an install into them could not
// follow the checkout, and the harness and the package it launches come from the same checkout.
std::vector<std::string> worker_environment() {
  std::vector<std::string> env;
  std::string python_path;
  for (char** e = environ; *e; ++e) {
    if (std::strncmp(*e, "PYTHONPATH=", 11) == 0) python_path = *e + 11;
    else env.emplace_back(*e);
  }
  // A built checkout, not an install elsewhere (a wheel's binary records no checkout: its workers
  // import the installed package).
  const std::string source = kvc::paths::source_dir();
  const std::string package = source + "/python";
  if (!source.empty() && access((package + "/kvconform/__init__.py").c_str(), R_OK) == 0)
    python_path += (python_path.empty() ? "" : ":") + package;
  if (!python_path.empty()) env.push_back("PYTHONPATH=" + python_path);
  return env;
}

}  // namespace

std::string frame(const json& h) { return framing::frame(h); }

bool Worker::start(const json& hello, double startup_timeout_s, End& end, std::string& detail) {
  stop();
  signal(SIGPIPE, SIG_IGN);  // a worker that dies while we write must not kill the harness
  int in[2], out[2], err[2];
  if (pipe(in) != 0 || pipe(out) != 0 || pipe(err) != 0) {
    end = End::LoadFailed;
    detail = std::string("pipe: ") + std::strerror(errno);
    return false;
  }
  // Built before fork: the child only calls async-signal-safe functions.
  const std::vector<std::string> env = worker_environment();
  std::vector<char*> envp;
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const char* argv[] = {"sh", "-c", command_.c_str(), nullptr};
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    end = End::LoadFailed;
    detail = std::string("fork: ") + std::strerror(errno);
    return false;
  }
  if (pid == 0) {
    setpgid(0, 0);
    signal(SIGPIPE, SIG_DFL);
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]}) close(fd);
    execve("/bin/sh", const_cast<char* const*>(argv), envp.data());
    _exit(127);
  }
  setpgid(pid, pid);  // also here: no race with the child's own call
  close(in[0]);
  close(out[1]);
  close(err[1]);
  pid_ = pid;
  to_ = in[1];
  from_ = out[0];
  err_ = err[0];
  for (int fd : {to_, from_, err_}) {
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
  stderr_.clear();
  stderr_cut_ = false;
  cause_.clear();
  json reply;
  std::string payload;
  if (!transact(frame(hello), startup_timeout_s, reply, payload, end, detail)) {
    if (end == End::Exited || end == End::Crashed) end = End::LoadFailed;
    detail = "the worker did not answer hello: " + detail;
    stop();
    return false;
  }
  if (reply.value("status", "") != "ok") {
    end = End::LoadFailed;
    detail = "the worker refused hello: " + reply.value("error", reply.dump());
    stop();
    return false;
  }
  hello_reply_ = reply;
  return true;
}

bool Worker::transact(const std::string& request, double timeout_s, json& reply, std::string& payload, End& end,
                      std::string& detail) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  size_t written = 0;
  std::string in;
  size_t need = 4;  // bytes of the whole reply once its header is known
  bool header_known = false;
  size_t header_len = 0;
  char buf[65536];
  for (;;) {
    if (header_known && in.size() >= need) break;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      end = End::TimedOut;
      detail = "timed out after " + seconds(timeout_s) + " s (worker killed)" + stderr_note();
      stop();
      return false;
    }
    pollfd p[3] = {{from_, POLLIN, 0}, {err_, POLLIN, 0}, {written < request.size() ? to_ : -1, POLLOUT, 0}};
    const int ready = poll(p, 3, static_cast<int>(std::min<long long>(left, 1000)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    if (p[1].revents & (POLLIN | POLLHUP)) {
      const ssize_t n = read(err_, buf, sizeof buf);
      if (n > 0) take_stderr(buf, static_cast<size_t>(n));
    }
    if (p[2].revents & POLLOUT) {
      const ssize_t n = write(to_, request.data() + written, request.size() - written);
      if (n > 0) written += static_cast<size_t>(n);
    } else if (p[2].revents & (POLLERR | POLLHUP)) {
      return died(end, detail);
    }
    if (p[0].revents & (POLLIN | POLLHUP)) {
      const ssize_t n = read(from_, buf, sizeof buf);
      if (n == 0) return died(end, detail);
      if (n > 0) in.append(buf, static_cast<size_t>(n));
    }
    if (!header_known && in.size() >= 4) {
      const uint32_t hlen = framing::read_length(in.data());
      if (hlen > kMaxHeader) {
        // Four printable bytes are no length: the worker (or a library it loaded) printed text to
        // the protocol's stdout. Name what it printed rather than the length it would mean.
        if (printable(in.data(), 4)) return protocol_error("printed to stdout: " + stray_text(in, deadline), end, detail, false);
        std::string first;
        for (size_t i = 0; i < in.size() && i < 16; ++i) first += shown_byte(in[i]);
        return protocol_error("a header of " + std::to_string(hlen) + " bytes (its first bytes: '" + first + "')", end, detail);
      }
      if (in.size() < 4 + hlen) continue;
      reply = json::parse(in.begin() + 4, in.begin() + 4 + hlen, nullptr, false);
      if (reply.is_discarded() || !reply.is_object()) return protocol_error("a header that is not a JSON object", end, detail);
      size_t total = 0;
      if (reply.contains("buffers")) {
        if (!reply["buffers"].is_array()) return protocol_error("\"buffers\" is not an array", end, detail);
        for (const json& b : reply["buffers"]) {
          if (!b.is_object() || !b.contains("nbytes") || !b["nbytes"].is_number_unsigned())
            return protocol_error("a buffer without \"nbytes\"", end, detail);
          total += b["nbytes"].get<size_t>();
        }
      }
      header_len = hlen;
      need = 4 + hlen + total;
      header_known = true;
    }
  }
  if (in.size() > need) return protocol_error(std::to_string(in.size() - need) + " bytes after the reply", end, detail);
  payload = in.substr(4 + header_len);
  return true;
}

void Worker::stop() {
  if (pid_ <= 0) return;
  for (int* fd : {&to_, &from_, &err_})
    if (*fd >= 0) {
      close(*fd);
      *fd = -1;
    }
  // A worker reads EOF on stdin and ends; one that does not within a second is killed.
  int status = 0;
  for (int i = 0; i < 20; ++i) {
    if (waitpid(pid_, &status, WNOHANG) != 0) {
      kill(-pid_, SIGKILL);  // whatever it started in its group
      pid_ = -1;
      return;
    }
    usleep(50000);
  }
  kill(-pid_, SIGKILL);
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
}

std::string Worker::stderr_note() {
  // Whatever is still in the pipe belongs to the failure.
  char buf[65536];
  for (;;) {
    const ssize_t n = err_ >= 0 ? read(err_, buf, sizeof buf) : -1;
    if (n <= 0) break;
    take_stderr(buf, static_cast<size_t>(n));
  }
  std::string tail = stderr_cut_ || stderr_.size() > kStderrTail
                         ? "..." + stderr_.substr(stderr_.size() > kStderrTail ? stderr_.size() - kStderrTail : 0)
                         : stderr_;
  if (!cause_.empty() && tail.find(cause_) == std::string::npos) tail = cause_ + "\n" + tail;
  while (!tail.empty() && (tail.back() == '\n' || tail.back() == ' ')) tail.pop_back();
  // One result line: the stderr's own lines are joined with " | ".
  std::string flat;
  for (char c : tail) flat += c == '\n' ? std::string(" | ") : std::string(1, c);
  return flat.empty() ? "" : "; worker stderr: " + flat;
}

void Worker::take_stderr(const char* data, size_t n) {
  const size_t from = stderr_.size();
  stderr_.append(data, n);
  remember_cause(from);
  if (stderr_.size() > 4 * kStderrTail) {
    stderr_.erase(0, stderr_.size() - kStderrTail);
    stderr_cut_ = true;
  }
}

void Worker::remember_cause(size_t from) {
  // The first such line is the cause; what follows it (a debugger's backtrace frames, "#3 ... in ggml_abort
  // (... fmt="GGML_ASSERT(%s) failed")") only repeats it. Lines that end in the new bytes are read (a line
  // split across reads is seen whole once its newline arrives).
  if (!cause_.empty()) return;
  size_t start = from == 0 ? std::string::npos : stderr_.rfind('\n', from - 1);
  start = start == std::string::npos ? 0 : start + 1;
  for (size_t end; (end = stderr_.find('\n', start)) != std::string::npos && cause_.empty(); start = end + 1) {
    const std::string_view line(stderr_.data() + start, end - start);
    if (const size_t first = line.find_first_not_of(" \t"); first != std::string_view::npos && line[first] == '#') continue;
    for (const char* marker : {"ASSERT", "Assertion", "assertion failed", "terminate called", "Fatal Python error", "GGML_ABORT"})
      if (line.find(marker) != std::string_view::npos) {
        cause_ = std::string(line.substr(0, 400));
        break;
      }
  }
}

bool Worker::died(End& end, std::string& detail) {
  usleep(20000);
  const std::string note = stderr_note();
  int status = 0;
  pid_t r = 0;
  for (int i = 0; i < 100 && (r = waitpid(pid_, &status, WNOHANG)) == 0; ++i) usleep(20000);
  if (r == pid_ && WIFSIGNALED(status)) {
    end = End::Crashed;
    detail = "the worker was killed by " + signal_text(WTERMSIG(status)) + note;
  } else if (r == pid_ && WIFEXITED(status) && WEXITSTATUS(status) > 128 && WEXITSTATUS(status) < 128 + 32) {
    // dash runs `sh -c 'python ...'` as a child and reports its death by a signal as 128 + signal.
    end = End::Crashed;
    detail = "the worker was killed by " + signal_text(WEXITSTATUS(status) - 128) + " (its shell exited with " +
             std::to_string(WEXITSTATUS(status)) + ")" + note;
  } else if (r == pid_ && WIFEXITED(status)) {
    end = End::Exited;
    detail = "the worker exited with status " + std::to_string(WEXITSTATUS(status)) + note;
  } else {
    end = End::Exited;
    detail = "the worker closed its stdout" + note;
  }
  if (r == pid_) pid_ = -1;  // reaped: stop() must not wait for it again
  stop();
  return false;
}

std::string Worker::stray_text(std::string& in, Clock::time_point deadline) {
  // The rest of the printed line may still be in flight: wait up to 200 ms for it.
  const auto until = std::min(deadline, Clock::now() + std::chrono::milliseconds(200));
  char buf[4096];
  constexpr size_t kShown = 200;
  while (in.size() < kShown && in.find('\n') == std::string::npos && Clock::now() < until) {
    pollfd p = {from_, POLLIN, 0};
    if (poll(&p, 1, 20) <= 0) continue;
    const ssize_t n = read(from_, buf, sizeof buf);
    if (n <= 0) break;
    in.append(buf, static_cast<size_t>(n));
  }
  // Its first line, as far as it is text: what it printed (a reply may follow it).
  std::string shown;
  size_t i = 0;
  for (; i < in.size() && i < kShown && in[i] != '\n' && printable(&in[i], 1); ++i) shown += shown_byte(in[i]);
  if (i == kShown) shown += "...";
  return "'" + shown + "'";
}

bool Worker::protocol_error(const std::string& what, End& end, std::string& detail, bool sent) {
  end = End::Exited;
  detail = std::string("protocol error: the worker ") + (sent ? "sent " : "") + what + stderr_note();
  stop();
  return false;
}

}  // namespace kvc::worker
