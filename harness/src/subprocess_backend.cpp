// The subprocess protocol (docs/plugins.md, "Kernels in another process"). Every message, both ways:
//
//   u32 little-endian header length | header (UTF-8 JSON) | payload: the header's "buffers", in order
//
// Each buffer is {"name", "dtype", "shape", "nbytes"}; its bytes are contiguous row-major
// little-endian. The worker is a long-lived process group; every call is bounded by a deadline, and
// a worker that dies, hangs or answers garbage is killed and started afresh for the next case.
#include "kvconform/subprocess_backend.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

namespace kvc::plugin {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr size_t kStderrTail = 2000;  // bytes of the worker's stderr kept for failure messages
constexpr uint32_t kMaxHeader = 1u << 20;

const char* dtype_name(kvc_dtype d) {
  switch (d) {
    case KVC_FLOAT32: return "float32";
    case KVC_FLOAT16: return "float16";
    case KVC_BFLOAT16: return "bfloat16";
    case KVC_FLOAT64: return "float64";
  }
  return "?";
}

json buffer_entry(const std::string& name, const std::string& dtype, const std::vector<int64_t>& shape, size_t nbytes) {
  return {{"name", name}, {"dtype", dtype}, {"shape", shape}, {"nbytes", nbytes}};
}

std::vector<int64_t> shape_of(const Buffer& b) { return {b.shape[0], b.shape[1], b.shape[2], b.shape[3]}; }

std::string frame(const json& h) {
  const std::string header = h.dump();
  std::string msg;
  const uint32_t n = static_cast<uint32_t>(header.size());
  for (int i = 0; i < 4; ++i) msg.push_back(static_cast<char>((n >> (8 * i)) & 0xFF));
  return msg + header;
}

// One attention op as a request message.
std::string encode_attention(const Op& op) {
  const bool mask = op.window_kind == KVC_WINDOW_MASK;
  json h;
  h["op"] = "attention";
  h["form"] = mask ? "mask" : "window";
  const std::string dtype = dtype_name(op.query.dtype);
  h["dtype"] = dtype;
  // The layer's window in transformers' terms (sliding_window W, attention_chunk_size), also sent
  // with the mask form so an adapter can tell what the mask stands for.
  const bool chunked = op.chunk_size > 0, sliding = !chunked && op.window_left >= 0;
  h["layer_type"] = chunked ? "chunked" : sliding ? "sliding" : "full";
  h["window"] = chunked ? op.chunk_size : sliding ? op.window_left + 1 : 0;
  h["window_left"] = sliding ? op.window_left : -1;
  h["query_positions"] = op.query_positions;
  h["kv_offset"] = op.kv_offset;
  h["left_padding"] = op.left_padding.empty() ? json(nullptr) : json(op.left_padding);
  h["scale"] = op.scale;
  json buffers = json::array();
  buffers.push_back(buffer_entry("query", dtype, shape_of(op.query), op.query.bytes.size()));
  buffers.push_back(buffer_entry("key", dtype, shape_of(op.keys), op.keys.bytes.size()));
  buffers.push_back(buffer_entry("value", dtype, shape_of(op.values), op.values.bytes.size()));
  if (mask) buffers.push_back(buffer_entry("mask", "uint8", {op.query.shape[0], op.query.shape[2], op.keys.shape[2]}, op.mask.size()));
  h["buffers"] = buffers;
  std::string msg = frame(h);
  auto add = [&](const std::vector<uint8_t>& b) { msg.append(reinterpret_cast<const char*>(b.data()), b.size()); };
  add(op.query.bytes);
  add(op.keys.bytes);
  add(op.values.bytes);
  if (mask) add(op.mask);
  return msg;
}

std::string signal_text(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  const char* desc = strsignal(sig);
  return std::string(abbrev ? "SIG" + std::string(abbrev) : "signal " + std::to_string(sig)) + " (" + (desc ? desc : "?") + ")";
}

std::string seconds(double s) {
  std::ostringstream os;
  os << s;
  return os.str();
}

// A worker process: `sh -c COMMAND` in its own process group, three pipes.
class Worker {
 public:
  explicit Worker(std::string command) : command_(std::move(command)) {}
  ~Worker() { stop(); }

  bool running() const { return pid_ > 0; }
  const std::string& name() const { return name_; }
  const std::string& description() const { return description_; }

  // Starts the worker and exchanges hello; on failure fills `end`/`detail` and leaves it stopped.
  bool start(Trace::End& end, std::string& detail) {
    stop();
    signal(SIGPIPE, SIG_IGN);  // a worker that dies while we write must not kill the harness
    int in[2], out[2], err[2];
    if (pipe(in) != 0 || pipe(out) != 0 || pipe(err) != 0) {
      end = Trace::End::LoadFailed;
      detail = std::string("pipe: ") + std::strerror(errno);
      return false;
    }
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid < 0) {
      end = Trace::End::LoadFailed;
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
      execl("/bin/sh", "sh", "-c", command_.c_str(), static_cast<char*>(nullptr));
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
    json reply;
    std::string payload;
    if (!transact(frame({{"op", "hello"}, {"protocol", kProtocolVersion}}), kStartupTimeoutS, reply, payload, end, detail)) {
      if (end == Trace::End::Exited || end == Trace::End::Crashed) end = Trace::End::LoadFailed;
      detail = "the worker did not answer hello: " + detail;
      stop();
      return false;
    }
    if (reply.value("status", "") != "ok") {
      end = Trace::End::LoadFailed;
      detail = "the worker refused hello: " + reply.value("error", reply.dump());
      stop();
      return false;
    }
    name_ = reply.value("name", "");
    description_ = reply.value("description", "");
    return true;
  }

  // Sends one request and reads one reply within timeout_s. False: the worker failed (end, detail
  // say how) and has been stopped.
  bool transact(const std::string& request, double timeout_s, json& reply, std::string& payload, Trace::End& end,
                std::string& detail) {
    const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
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
        end = Trace::End::TimedOut;
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
        if (n > 0) {
          stderr_.append(buf, static_cast<size_t>(n));
          if (stderr_.size() > 4 * kStderrTail) stderr_.erase(0, stderr_.size() - kStderrTail);
        }
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
        uint32_t hlen = 0;
        for (int i = 0; i < 4; ++i) hlen |= static_cast<uint32_t>(static_cast<uint8_t>(in[i])) << (8 * i);
        if (hlen > kMaxHeader) return protocol_error("a header of " + std::to_string(hlen) + " bytes", end, detail);
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

  void stop() {
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

 private:
  std::string stderr_note() {
    // Whatever is still in the pipe belongs to the failure.
    char buf[65536];
    for (;;) {
      const ssize_t n = err_ >= 0 ? read(err_, buf, sizeof buf) : -1;
      if (n <= 0) break;
      stderr_.append(buf, static_cast<size_t>(n));
    }
    std::string tail = stderr_.size() > kStderrTail ? "..." + stderr_.substr(stderr_.size() - kStderrTail) : stderr_;
    while (!tail.empty() && (tail.back() == '\n' || tail.back() == ' ')) tail.pop_back();
    // One result line: the stderr's own lines are joined with " | ".
    std::string flat;
    for (char c : tail) flat += c == '\n' ? std::string(" | ") : std::string(1, c);
    return flat.empty() ? "" : "; worker stderr: " + flat;
  }

  bool died(Trace::End& end, std::string& detail) {
    usleep(20000);
    const std::string note = stderr_note();
    int status = 0;
    pid_t r = 0;
    for (int i = 0; i < 100 && (r = waitpid(pid_, &status, WNOHANG)) == 0; ++i) usleep(20000);
    if (r == pid_ && WIFSIGNALED(status)) {
      end = Trace::End::Crashed;
      detail = "the worker was killed by " + signal_text(WTERMSIG(status)) + note;
    } else if (r == pid_ && WIFEXITED(status) && WEXITSTATUS(status) > 128 && WEXITSTATUS(status) < 128 + 32) {
      // dash runs `sh -c 'python ...'` as a child and reports its death by a signal as 128 + signal.
      end = Trace::End::Crashed;
      detail = "the worker was killed by " + signal_text(WEXITSTATUS(status) - 128) + " (its shell exited with " +
               std::to_string(WEXITSTATUS(status)) + ")" + note;
    } else if (r == pid_ && WIFEXITED(status)) {
      end = Trace::End::Exited;
      detail = "the worker exited with status " + std::to_string(WEXITSTATUS(status)) + note;
    } else {
      end = Trace::End::Exited;
      detail = "the worker closed its stdout" + note;
    }
    if (r == pid_) pid_ = -1;  // reaped: stop() must not wait for it again
    stop();
    return false;
  }

  bool protocol_error(const std::string& what, Trace::End& end, std::string& detail) {
    end = Trace::End::Exited;
    detail = "protocol error: the worker sent " + what + stderr_note();
    stop();
    return false;
  }

  std::string command_;
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1, err_ = -1;
  std::string stderr_, name_, description_;
};

std::map<std::string, std::unique_ptr<Worker>>& workers() {
  static std::map<std::string, std::unique_ptr<Worker>> w;
  return w;
}

// The reply to one attention op, checked against the shape and dtype the host expects.
OpResult decode_attention(const Op& op, const json& reply, const std::string& payload) {
  OpResult r;
  const std::string status = reply.value("status", "");
  if (status == "unsupported" || status == "error") {
    r.status = status == "unsupported" ? KVC_ERR_UNSUPPORTED : KVC_ERR_INTERNAL;
    r.error = reply.value("error", "");
    return r;
  }
  if (status != "ok") {
    r.status = KVC_ERR_INTERNAL;
    r.error = "reply status \"" + status + "\" (expected ok, unsupported or error)";
    return r;
  }
  const size_t want = op.query.bytes.size();
  const json buffers = reply.value("buffers", json::array());
  if (buffers.size() != 1 || buffers[0].value("name", "") != "out") {
    r.status = KVC_ERR_INTERNAL;
    r.error = "the reply must carry exactly one buffer named \"out\"";
    return r;
  }
  const json& b = buffers[0];
  const std::vector<int64_t> shape = shape_of(op.query);
  if (b.value("dtype", "") != dtype_name(op.query.dtype) || b.value("shape", json()) != json(shape) || payload.size() != want) {
    r.status = KVC_ERR_INTERNAL;
    r.error = "out came back as " + b.value("dtype", std::string("?")) + " " + b.value("shape", json()).dump() + " (" +
              std::to_string(payload.size()) + " bytes), expected " + dtype_name(op.query.dtype) + " " + json(shape).dump() +
              " (" + std::to_string(want) + " bytes)";
    return r;
  }
  r.out1.assign(payload.begin(), payload.end());
  return r;
}

}  // namespace

Trace execute_command(const std::string& command, const std::vector<Op>& ops, double timeout_s) {
  Trace t;
  auto& slot = workers()[command];
  if (!slot) slot = std::make_unique<Worker>(command);
  Worker& w = *slot;
  if (!w.running() && !w.start(t.end, t.detail)) return t;
  t.name = w.name();
  t.description = w.description();
  t.has_attention = true;
  for (const Op& op : ops) {
    if (op.kind != Op::Attention) {
      OpResult r;
      r.status = KVC_ERR_UNSUPPORTED;
      r.error = "the subprocess protocol carries attention kernels only";
      t.results.push_back(r);
      continue;
    }
    json reply;
    std::string payload;
    if (!w.transact(encode_attention(op), timeout_s, reply, payload, t.end, t.detail)) return t;
    t.results.push_back(decode_attention(op, reply, payload));
  }
  return t;
}

Target backend_command_target(const std::string& command) {
  return {command, "kvconform run --backend-cmd '" + command + "'",
          [command](const std::vector<Op>& ops, double timeout_s) { return execute_command(command, ops, timeout_s); }};
}

void stop_worker(const std::string& command) { workers().erase(command); }

void stop_workers() { workers().clear(); }

}  // namespace kvc::plugin
