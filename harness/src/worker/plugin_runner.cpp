#include "kvconform/plugin_runner.h"

#include <dlfcn.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <cstddef>
#include <sstream>
#include <stdexcept>

namespace kvc::plugin {

size_t element_size(kvc_dtype d) {
  switch (d) {
    case KVC_FLOAT32: return 4;
    case KVC_FLOAT16:
    case KVC_BFLOAT16: return 2;
    case KVC_FLOAT64: return 8;
  }
  return 0;
}

const char* to_string(PluginRun::End e) {
  switch (e) {
    case PluginRun::End::Completed: return "completed";
    case PluginRun::End::LoadFailed: return "load failed";
    case PluginRun::End::Crashed: return "crashed";
    case PluginRun::End::TimedOut: return "timed out";
    case PluginRun::End::Exited: return "exited";
  }
  return "?";
}

namespace {

constexpr uint8_t kGuard = 0xA5;   // around every output buffer
constexpr uint8_t kPoison = 0xFF;  // inside output buffers before a call: NaN in every float dtype
constexpr size_t kGuardBytes = 4096;
constexpr size_t kErrLen = 512;

// An output buffer with guard regions on both sides.
class Guarded {
 public:
  Guarded(kvc_dtype dtype, const int64_t shape[4], const char* what) : what_(what) {
    size_t n = element_size(dtype);
    for (int i = 0; i < 4; ++i) n *= static_cast<size_t>(shape[i]);
    size_ = n;
    mem_.assign(size_ + 2 * kGuardBytes, kGuard);
    std::memset(mem_.data() + kGuardBytes, kPoison, size_);
    t_.data = mem_.data() + kGuardBytes;
    t_.dtype = dtype;
    for (int i = 0; i < 4; ++i) t_.shape[i] = shape[i];
    t_.stride[3] = 1;
    for (int i = 2; i >= 0; --i) t_.stride[i] = t_.stride[i + 1] * shape[i + 1];
  }
  kvc_tensor* tensor() { return &t_; }
  std::vector<uint8_t> contents() const {
    return {mem_.begin() + kGuardBytes, mem_.begin() + static_cast<std::ptrdiff_t>(kGuardBytes + size_)};
  }
  // "out_keys: 64 bytes written after the end (first at +0)"; empty when intact.
  std::string check() const {
    size_t before = 0, after = 0, first_before = 0, first_after = 0;
    for (size_t i = 0; i < kGuardBytes; ++i)
      if (mem_[i] != kGuard) {
        if (!before++) first_before = kGuardBytes - i;
      }
    for (size_t i = 0; i < kGuardBytes; ++i)
      if (mem_[kGuardBytes + size_ + i] != kGuard) {
        if (!after++) first_after = i;
      }
    std::string s;
    if (after)
      s += std::string(what_) + ": " + std::to_string(after) + " byte(s) written past the end (first at byte +" +
           std::to_string(first_after) + " after it, buffer of " + std::to_string(size_) + " bytes)";
    if (before)
      s += std::string(s.empty() ? "" : "; ") + what_ + ": " + std::to_string(before) +
           " byte(s) written before the start (furthest at -" + std::to_string(first_before) + ")";
    return s;
  }

 private:
  const char* what_;
  size_t size_ = 0;
  std::vector<uint8_t> mem_;
  kvc_tensor t_{};
};

kvc_tensor input_tensor(const Buffer& b) {
  kvc_tensor t{};
  t.data = const_cast<uint8_t*>(b.bytes.data());
  t.dtype = b.dtype;
  for (int i = 0; i < 4; ++i) t.shape[i] = b.shape[i];
  t.stride[3] = 1;
  for (int i = 2; i >= 0; --i) t.stride[i] = t.stride[i + 1] * b.shape[i + 1];
  return t;
}

// --- the wire format between child and parent: tagged records of length-prefixed fields ---
void put_u64(std::string& s, uint64_t v) { s.append(reinterpret_cast<const char*>(&v), sizeof v); }
void put_bytes(std::string& s, const void* p, size_t n) {
  put_u64(s, n);
  s.append(static_cast<const char*>(p), n);
}
void put_str(std::string& s, const std::string& v) { put_bytes(s, v.data(), v.size()); }

struct Reader {
  const std::string& s;
  size_t at = 0;
  bool ok = true;
  uint64_t u64() {
    uint64_t v = 0;
    if (at + sizeof v > s.size()) {
      ok = false;
      return 0;
    }
    std::memcpy(&v, s.data() + at, sizeof v);
    at += sizeof v;
    return v;
  }
  std::string str() {
    const uint64_t n = u64();
    // Not `at + n > size`: a length near 2^64 wraps that sum, and the reader would jump backwards
    // into bytes it has read (found by fuzz/plugin_wire_fuzz.cpp; a loop when it lands on a record).
    if (!ok || n > s.size() - at) {
      ok = false;
      return {};
    }
    std::string v = s.substr(at, n);
    at += n;
    return v;
  }
};

bool write_all(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

std::string c_str(const char* p) { return p ? p : ""; }

OpResult run_op(const kvc_plugin_api* api, kvc_cache*& cache, const Op& op) {
  OpResult r;
  char err[kErrLen] = {0};
  auto status = [&](kvc_status s) {
    r.status = s;
    if (s != KVC_OK) r.error = std::string(err, strnlen(err, kErrLen));
  };
  const bool cache_api = api->cache_create && api->cache_get_mask_sizes && api->cache_update && api->cache_stored_rows &&
                         api->cache_read && api->cache_reset && api->cache_destroy;
  if (op.kind != Op::Attention && !cache_api) {
    r.status = KVC_ERR_UNSUPPORTED;
    r.error = "the plugin exports no cache layer";
    return r;
  }
  if (op.kind != Op::Attention && op.kind != Op::Create && !cache) {
    r.status = KVC_ERR_INVALID;
    r.error = "no cache: cache_create failed or was not called";
    return r;
  }
  switch (op.kind) {
    case Op::Create: {
      if (cache) api->cache_destroy(cache);
      cache = nullptr;
      status(api->cache_create(&op.config, &cache, err, kErrLen));
      if (r.status == KVC_OK && !cache) {
        r.status = KVC_ERR_INTERNAL;
        r.error = "cache_create returned KVC_OK but no cache";
      }
      break;
    }
    case Op::MaskSizes: status(api->cache_get_mask_sizes(cache, op.q, &r.a, &r.b, err, kErrLen)); break;
    case Op::Update: {
      const kvc_tensor k = input_tensor(op.keys), v = input_tensor(op.values);
      int64_t shape[4] = {op.keys.shape[0], op.keys.shape[1], op.out_rows, op.keys.shape[3]};
      Guarded ok(op.keys.dtype, shape, "update out_keys"), ov(op.values.dtype, shape, "update out_values");
      r.a = -1;
      status(api->cache_update(cache, &k, &v, ok.tensor(), ov.tensor(), &r.a, err, kErrLen));
      r.out1 = ok.contents();
      r.out2 = ov.contents();
      r.guard = ok.check();
      if (r.guard.empty()) r.guard = ov.check();
      break;
    }
    case Op::Read: {
      int64_t shape[4] = {op.config.batch, op.config.kv_heads, op.out_rows, op.config.head_dim};
      Guarded ok(op.config.dtype, shape, "read keys"), ov(op.config.dtype, shape, "read values");
      int64_t stored = -1;
      status(api->cache_stored_rows(cache, &stored, err, kErrLen));
      r.b = stored;
      if (r.status != KVC_OK) break;
      r.a = -1;
      status(api->cache_read(cache, ok.tensor(), ov.tensor(), &r.a, err, kErrLen));
      r.out1 = ok.contents();
      r.out2 = ov.contents();
      r.guard = ok.check();
      if (r.guard.empty()) r.guard = ov.check();
      break;
    }
    case Op::Reset: status(api->cache_reset(cache, err, kErrLen)); break;
    case Op::Attention: {
      if (!api->attention) {
        r.status = KVC_ERR_UNSUPPORTED;
        r.error = "the plugin exports no attention kernel";
        break;
      }
      kvc_attention_args args{};
      args.query = input_tensor(op.query);
      args.key = input_tensor(op.keys);
      args.value = input_tensor(op.values);
      Guarded out(op.query.dtype, op.query.shape, "attention out");
      args.out = *out.tensor();
      args.query_positions = op.query_positions.data();
      args.kv_offset = op.kv_offset;
      args.window.kind = op.window_kind;
      args.window.window_left = op.window_left;
      args.window.chunk_size = op.chunk_size;
      args.window.left_padding = op.left_padding.empty() ? nullptr : op.left_padding.data();
      args.window.mask = op.mask.empty() ? nullptr : op.mask.data();
      args.scale = op.scale;
      args.sinks = op.sinks.empty() ? nullptr : op.sinks.data();
      status(api->attention(&args, err, kErrLen));
      r.out1 = out.contents();
      r.guard = out.check();
      break;
    }
  }
  return r;
}

[[noreturn]] void child_main(int fd, const std::string& path, const std::vector<Op>& ops) {
  // A crashing plugin is reported by the signal that killed the child: handlers the host process
  // installed (ASan's SEGV handler in a KVC_SANITIZE build exits with status 1) must not turn it
  // into something else.
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) signal(sig, SIG_DFL);
  std::string msg;
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    msg = "E";
    put_str(msg, c_str(dlerror()));
    write_all(fd, msg);
    _exit(0);
  }
  auto get = reinterpret_cast<kvc_plugin_get_api_fn>(dlsym(handle, KVC_PLUGIN_ENTRY));
  if (!get) {
    msg = "E";
    put_str(msg, std::string("no symbol ") + KVC_PLUGIN_ENTRY + " in " + path);
    write_all(fd, msg);
    _exit(0);
  }
  const kvc_plugin_api* api = get(KVC_PLUGIN_ABI_VERSION);
  if (!api || api->abi_version != KVC_PLUGIN_ABI_VERSION || api->struct_size < KVC_PLUGIN_API_BASE_SIZE) {
    msg = "E";
    put_str(msg,
            !api ? "kvc_plugin_get_api(" + std::to_string(KVC_PLUGIN_ABI_VERSION) + ") returned NULL (ABI version not supported)"
                 : "the plugin was built for ABI version " + std::to_string(api->abi_version) + " (struct size " +
                       std::to_string(api->struct_size) + "), the host speaks version " + std::to_string(KVC_PLUGIN_ABI_VERSION));
    write_all(fd, msg);
    _exit(0);
  }
  msg = "H";
  put_str(msg, c_str(api->name));
  put_str(msg, c_str(api->description));
  put_u64(msg, api->attention != nullptr);
  put_u64(msg, api->cache_create != nullptr);
  // The optional layouts in a record of their own, read only where the plugin's table has the field:
  // a plugin built before it, and a stream written before it, stay valid.
  if (api->struct_size >= offsetof(kvc_plugin_api, layouts) + sizeof(api->layouts) && api->layouts && *api->layouts) {
    msg += "L";
    put_str(msg, api->layouts);
  }
  if (!write_all(fd, msg)) _exit(3);
  kvc_cache* cache = nullptr;
  for (const Op& op : ops) {
    const OpResult r = run_op(api, cache, op);
    msg = "R";
    put_u64(msg, static_cast<uint64_t>(static_cast<int64_t>(r.status)));
    put_str(msg, r.error);
    put_u64(msg, static_cast<uint64_t>(r.a));
    put_u64(msg, static_cast<uint64_t>(r.b));
    put_bytes(msg, r.out1.data(), r.out1.size());
    put_bytes(msg, r.out2.data(), r.out2.size());
    put_str(msg, r.guard);
    if (!write_all(fd, msg)) _exit(3);
  }
  if (cache) api->cache_destroy(cache);
  write_all(fd, "Z");
  _exit(0);
}

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  const char* desc = strsignal(sig);
  return std::string(abbrev ? "SIG" + std::string(abbrev) : "signal " + std::to_string(sig)) + " (" + (desc ? desc : "?") + ")";
}

}  // namespace

void decode_run(const std::string& data, PluginRun& t) {
  Reader in{data};
  bool finished = false;
  while (in.ok && in.at < data.size()) {
    const char tag = data[in.at++];
    if (tag == 'E') {
      t.end = PluginRun::End::LoadFailed;
      t.detail = in.str();
      return;
    } else if (tag == 'H') {
      t.name = in.str();
      t.description = in.str();
      t.has_attention = in.u64();
      t.has_cache = in.u64();
    } else if (tag == 'L') {
      std::stringstream list(in.str());
      for (std::string layout; std::getline(list, layout, ',');)
        if (!layout.empty()) t.layouts.push_back(layout);
    } else if (tag == 'R') {
      OpResult r;
      r.status = static_cast<int>(static_cast<int64_t>(in.u64()));
      r.error = in.str();
      r.a = static_cast<int64_t>(in.u64());
      r.b = static_cast<int64_t>(in.u64());
      const std::string o1 = in.str(), o2 = in.str();
      r.out1.assign(o1.begin(), o1.end());
      r.out2.assign(o2.begin(), o2.end());
      r.guard = in.str();
      if (in.ok) t.results.push_back(std::move(r));
    } else if (tag == 'Z') {
      finished = true;
    } else {
      in.ok = false;
    }
  }
  if (!finished && t.end == PluginRun::End::Completed) {
    t.end = PluginRun::End::Exited;
    t.detail = "the child ended without finishing its calls";
  }
}

PluginRun execute(const std::string& path, const std::vector<Op>& ops, double timeout_s) {
  PluginRun t;
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    close(fds[0]);
    child_main(fds[1], path, ops);
  }
  close(fds[1]);
  std::string data;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  bool timed_out = false;
  char buf[65536];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF: the child is done (or dead)
    data.append(buf, static_cast<size_t>(n));
  }
  if (timed_out) kill(pid, SIGKILL);
  close(fds[0]);
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  decode_run(data, t);
  if (timed_out) {
    t.end = PluginRun::End::TimedOut;
    t.detail = "timed out after " + std::to_string(timeout_s).substr(0, std::to_string(timeout_s).find('.') + 2) + " s (killed)";
  } else if (WIFSIGNALED(wstatus)) {
    t.end = PluginRun::End::Crashed;
    t.detail = "killed by " + signal_name(WTERMSIG(wstatus));
  } else if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) != 0 && t.end != PluginRun::End::LoadFailed) {
    t.end = PluginRun::End::Exited;
    t.detail = "the plugin exited with status " + std::to_string(WEXITSTATUS(wstatus));
  }
  return t;
}

}  // namespace kvc::plugin
