// kvconform engine worker for llama.cpp (docs/engines.md, "The engine protocol"), driven natively
// through llama.h: no Python in the loop except the one-off GGUF conversion of a checkpoint.
//
//   kvc_llama_worker [--convert "CMD"]      (stdin/stdout: the protocol; stderr: diagnostics)
//
// load converts MODEL_DIR to a GGUF once (CMD MODEL_DIR OUT.gguf, or through `CMD --serve` kept for the
// worker's life where CMD has that mode; CMD from --convert, else
// $KVC_LLAMA_CONVERT, else the build's default: engines/llama_cpp/convert.py under the golden
// venv's python) into $KVC_LLAMA_GGUF_DIR or ${KVC_CACHE:-~/.cache/kvconform}/llama-VERSION/gguf,
// named by a hash of config.json, model.safetensors and CMD by content (the .py files it names by their
// text, other files by their folder's real path), then loads it; a converter's refusal (exit 3) or
// exception is kept there too, as NAME.refused or NAME.failed.
//
// Options (anything else is refused by name): n_ubatch, n_batch, n_ctx, threads, swa_full (bool),
// kv_unified (bool), flash_attn (bool or "on"/"off"/"auto"), type_k / type_v ("f32" | "f16", also
// "bf16" | "q8_0"),
// rollback_check (bool, default false: answer unsupported when llama_memory_seq_rm succeeded but
// llama_memory_seq_pos_min shows the SWA cache no longer holds the window the next token needs, as
// llama-server checks; off, the worker trusts llama_memory_seq_rm as llama.h documents it).
// Mutants override the architecture's `<arch>.attention.sliding_window` key at load
// (llama_model_kv_override): window±1, or a window larger than any plan ("full"); the loaded
// model's llama_model_n_swa is checked against the intent.
//
// Serving operations: fork is llama_memory_seq_cp of the source's positions [0, length) after the
// target's llama_memory_seq_rm (without kv_unified: of the whole source, then the tail removed); chunked is one llama_decode per chunk (a caller's n_batch, each
// chunk then split by n_ubatch); spec is an extend then a rollback; batch is one llama_batch holding
// every item's tokens under its own seq_id and positions (split only where it exceeds n_batch); shift
// is llama_memory_seq_rm of [keep, keep + discard) then llama_memory_seq_add of -discard to the rest.
// Operation mutants: fork-prefix copies one position short, chunked-restart removes the sequence's
// cells before each chunk (llama_memory_seq_rm [0, chunk start)), spec-rollback removes one token
// more than rejected, batch-offset positions every item at the first item's length, shift-discard+1
// discards one token more than the shift asks; fork-shared is refused (seq_cp already shares cells:
// there is no copy to skip).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gguf.h"
#include "llama.h"

extern char** environ;

#ifndef KVC_LLAMA_VERSION
#define KVC_LLAMA_VERSION "unknown"
#endif
#ifndef KVC_LLAMA_COMMIT
#define KVC_LLAMA_COMMIT "unknown"
#endif
#ifndef KVC_LLAMA_PACKAGE
#define KVC_LLAMA_PACKAGE "llama-cpp-python " KVC_LLAMA_VERSION
#endif
#ifndef KVC_LLAMA_DEFAULT_CONVERT
#define KVC_LLAMA_DEFAULT_CONVERT ""
#endif

using nlohmann::json;

namespace {

struct Unsupported : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The converter raised on this checkpoint (deterministic for its key, so kept like a refusal).
struct ConvertError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

int g_out = -1;  // the protocol's stdout (fd 1 is pointed at stderr so stray prints cannot corrupt it)

bool read_all(int fd, void* p, size_t n) {
  auto* c = static_cast<char*>(p);
  while (n) {
    ssize_t r = ::read(fd, c, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    c += r;
    n -= size_t(r);
  }
  return true;
}

void write_all(int fd, const void* p, size_t n) {
  auto* c = static_cast<const char*>(p);
  while (n) {
    ssize_t r = ::write(fd, c, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      std::perror("kvc_llama_worker: write");
      std::exit(1);
    }
    c += r;
    n -= size_t(r);
  }
}

bool receive(json& h) {
  unsigned char len[4];
  if (!read_all(0, len, 4)) return false;
  uint32_t n = uint32_t(len[0]) | uint32_t(len[1]) << 8 | uint32_t(len[2]) << 16 | uint32_t(len[3]) << 24;
  if (n > (1u << 24)) throw std::runtime_error("header too long");
  std::string s(n, '\0');
  if (!read_all(0, s.data(), n)) return false;
  h = json::parse(s);
  if (h.contains("buffers")) {  // none expected: skip their bytes to stay in frame
    for (auto& b : h["buffers"]) {
      std::vector<char> skip(b.value("nbytes", size_t(0)));
      if (!read_all(0, skip.data(), skip.size())) return false;
    }
  }
  return true;
}

void send(const json& h, const void* payload = nullptr, size_t nbytes = 0) {
  std::string s = h.dump();
  uint32_t n = uint32_t(s.size());
  unsigned char len[4] = {uint8_t(n), uint8_t(n >> 8), uint8_t(n >> 16), uint8_t(n >> 24)};
  write_all(g_out, len, 4);
  write_all(g_out, s.data(), s.size());
  if (nbytes) write_all(g_out, payload, nbytes);
}

void log_to_stderr(enum ggml_log_level level, const char* text, void*) {
  static const bool verbose = std::getenv("KVC_LLAMA_VERBOSE") != nullptr;
  if (level == GGML_LOG_LEVEL_DEBUG && !verbose) return;
  if ((level == GGML_LOG_LEVEL_INFO || level == GGML_LOG_LEVEL_CONT) && !verbose) return;
  std::fputs(text, stderr);
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

uint64_t fnv1a(uint64_t h, const std::string& s) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

void mkdirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      std::string p = path.substr(0, i);
      if (::mkdir(p.c_str(), 0755) != 0 && errno != EEXIST) throw std::runtime_error("mkdir " + p + ": " + std::strerror(errno));
    }
  }
}

std::string gguf_dir() {
  if (const char* d = std::getenv("KVC_LLAMA_GGUF_DIR"); d && *d) return d;
  std::string cache;
  if (const char* c = std::getenv("KVC_CACHE"); c && *c) cache = c;
  else if (const char* home = std::getenv("HOME"); home && *home) cache = std::string(home) + "/.cache/kvconform";
  else throw std::runtime_error("set HOME, KVC_CACHE or KVC_LLAMA_GGUF_DIR");
  return cache + "/llama-" KVC_LLAMA_VERSION "/gguf";
}

// CMD --serve (convert.py's serve mode), started at the first conversion and kept for the worker's
// life: its imports (torch, transformers, the vendored converter) are most of a conversion's time, and
// a cold cache converts every checkpoint once. Each conversion still runs in a child of its own, as
// `CMD MODEL_DIR OUT` would. A command without that mode (no "kvc-convert-serve 1" line) runs once per
// conversion instead.
class ConvertServer {
 public:
  // The conversion's exit code (negative: the signal that ended it) into `code`; false where the
  // server is not up (then nothing was converted).
  bool convert(const std::string& cmd, const std::string& model_dir, const std::string& out, const std::string& log, int& code) {
    if (!started_) start(cmd);
    if (!to_) return false;
    const std::string request = model_dir + "\t" + out + "\t" + log + "\n";
    char line[64];
    if (std::fputs(request.c_str(), to_) < 0 || std::fflush(to_) != 0 || !std::fgets(line, sizeof line, from_)) {
      stop();  // it died: this and later conversions run on their own
      return false;
    }
    code = std::atoi(line);
    return true;
  }
  ~ConvertServer() { stop(); }

 private:
  void start(const std::string& cmd) {
    started_ = true;
    int in[2], back[2];
    if (::pipe(in) != 0) return;
    if (::pipe(back) != 0) return (void)(::close(in[0]), ::close(in[1]));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, back[1], 1);
    for (int fd : {in[0], in[1], back[0], back[1], g_out}) posix_spawn_file_actions_addclose(&fa, fd);
    const std::string script = cmd + " --serve";
    const char* argv[] = {"sh", "-c", script.c_str(), "kvc-convert-serve", nullptr};
    const int rc = posix_spawn(&pid_, "/bin/sh", &fa, nullptr, const_cast<char* const*>(argv), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(in[0]);
    ::close(back[1]);
    if (rc != 0) return (void)(::close(in[1]), ::close(back[0]), pid_ = -1);
    ::fcntl(in[1], F_SETFD, FD_CLOEXEC);
    ::fcntl(back[0], F_SETFD, FD_CLOEXEC);
    to_ = ::fdopen(in[1], "w");
    from_ = ::fdopen(back[0], "r");
    // A command without the mode exits (convert.py-like: a usage error) or, at worst, waits: not forever.
    if (!to_ || !from_) return stop();
    pollfd up{::fileno(from_), POLLIN, 0};
    if (::poll(&up, 1, 120000) != 1) ::kill(pid_, SIGKILL);
    char hello[64];
    if (!std::fgets(hello, sizeof hello, from_) || std::string(hello) != "kvc-convert-serve 1\n") stop();
  }
  void stop() {
    if (to_) std::fclose(to_), to_ = nullptr;  // EOF: the server ends
    if (from_) std::fclose(from_), from_ = nullptr;
    if (pid_ > 0) {
      int status;
      while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {}
      pid_ = -1;
    }
  }
  bool started_ = false;
  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
};

ConvertServer& convert_server() {
  static ConvertServer server;
  return server;
}

// Runs `CMD MODEL_DIR OUT` (through the convert server where there is one), its output copied to our
// stderr; throws with the exit status and the output's last line (a converter's traceback ends with
// the exception that stopped it).
void run_convert(const std::string& cmd, const std::string& model_dir, const std::string& out) {
  char log_path[] = "/tmp/kvc-convert-XXXXXX";
  const int log = mkstemp(log_path);
  if (log < 0) throw std::runtime_error(std::string("cannot create the converter's log: ") + std::strerror(errno));
  int code = 0;  // the exit code, or minus the signal
  if (!convert_server().convert(cmd, model_dir, out, log_path, code)) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, log, 1);
    posix_spawn_file_actions_adddup2(&fa, log, 2);
    posix_spawn_file_actions_addclose(&fa, g_out);
    std::string script = cmd + " \"$1\" \"$2\"";
    const char* argv[] = {"sh", "-c", script.c_str(), "kvc-convert", model_dir.c_str(), out.c_str(), nullptr};
    pid_t pid;
    int rc = posix_spawn(&pid, "/bin/sh", &fa, nullptr, const_cast<char* const*>(argv), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
      close(log);
      unlink(log_path);
      throw std::runtime_error(std::string("cannot start the converter: ") + std::strerror(rc));
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  }
  unlink(log_path);  // the open descriptor keeps it
  std::string output;
  lseek(log, 0, SEEK_SET);
  char buf[65536];
  for (ssize_t n; (n = read(log, buf, sizeof buf)) > 0;) output.append(buf, static_cast<size_t>(n));
  close(log);
  std::fwrite(output.data(), 1, output.size(), stderr);
  std::string last;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);)
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  if (code == 3)  // convert.py: an architecture this version does not convert
    throw Unsupported("llama.cpp's convert_hf_to_gguf.py of this version has no class for the checkpoint's architecture (" +
                      (last.empty() ? model_dir : last.substr(0, 300)) + ")");
  // A Python exception in the conversion itself (exit 1, not an import or resource error) recurs
  // for the same key: it is thrown as ConvertError, which convert() keeps beside the GGUFs.
  if (code == 1) {
    // a traceback's last line: "module.Name: message" (struct.error, ValueError, ...)
    const size_t colon = last.find(": ");
    const std::string kind = colon == std::string::npos ? "" : last.substr(0, colon);
    const bool exception = !kind.empty() && kind.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.") == std::string::npos;
    const bool environment = kind == "ModuleNotFoundError" || kind == "ImportError" || kind == "MemoryError" ||
                             kind == "OSError" || kind == "KeyboardInterrupt" || kind.find("Permission") != std::string::npos;
    if (exception && !environment) throw ConvertError("converter failed (exit 1: " + last.substr(0, 300) + ")");
  }
  if (code != 0)
    throw std::runtime_error("converter failed (" + (code > 0 ? "exit " + std::to_string(code) : "signal " + std::to_string(-code)) +
                             (last.empty() ? "" : ": " + last.substr(0, 300)) + "): " + cmd + " " + model_dir + " " + out);
}

std::string gguf_architecture(const std::string& path) {
  gguf_init_params p{true, nullptr};
  gguf_context* g = gguf_init_from_file(path.c_str(), p);
  if (!g) throw std::runtime_error("cannot read GGUF " + path);
  std::string arch;
  int64_t k = gguf_find_key(g, "general.architecture");
  if (k >= 0) arch = gguf_get_val_str(g, k);
  gguf_free(g);
  if (arch.empty()) throw std::runtime_error("no general.architecture in " + path);
  return arch;
}

bool opt_bool(const json& v, const char* key) {
  if (v.is_boolean()) return v.get<bool>();
  throw std::runtime_error(std::string("option ") + key + " must be a boolean, not " + v.dump());
}

uint32_t opt_uint(const json& v, const char* key) {
  if (v.is_number_integer() && v.get<int64_t>() > 0 && v.get<int64_t>() <= INT32_MAX) return v.get<uint32_t>();
  throw std::runtime_error(std::string("option ") + key + " must be a positive integer, not " + v.dump());
}

ggml_type opt_type(const json& v, const char* key) {
  if (v == "f32") return GGML_TYPE_F32;
  if (v == "f16") return GGML_TYPE_F16;
  if (v == "bf16") return GGML_TYPE_BF16;
  if (v == "q8_0") return GGML_TYPE_Q8_0;  // beyond the float types: llama.cpp's own refusals show (V needs flash_attn)
  throw std::runtime_error(std::string("option ") + key + " must be \"f32\", \"f16\", \"bf16\" or \"q8_0\", not " + v.dump());
}

llama_flash_attn_type opt_flash(const json& v) {
  if (v == true || v == "on" || v == "enabled") return LLAMA_FLASH_ATTN_TYPE_ENABLED;
  if (v == false || v == "off" || v == "disabled") return LLAMA_FLASH_ATTN_TYPE_DISABLED;
  if (v == "auto") return LLAMA_FLASH_ATTN_TYPE_AUTO;
  throw std::runtime_error("option flash_attn must be a boolean or \"on\" / \"off\" / \"auto\", not " + v.dump());
}

class Engine {
 public:
  explicit Engine(std::string convert) : convert_(std::move(convert)) {}
  ~Engine() { unload(); }

  json load(const json& h) {
    unload();
    const std::string model_dir = h.at("model").get<std::string>();
    const json options = h.value("options", json::object());
    const std::string mutant = h.value("mutant", std::string("none"));
    const int64_t max_tokens = h.value("max_tokens", int64_t(0));
    const int64_t sequences = h.value("sequences", int64_t(1));
    if (sequences < 1 || sequences > 256) throw std::runtime_error("sequences must be 1..256");

    llama_context_params cp = llama_context_default_params();
    cp.n_ubatch = 512;
    cp.n_batch = 512;
    cp.n_seq_max = uint32_t(sequences);
    cp.n_threads = cp.n_threads_batch = 1;  // tiny models: more threads only spin on a shared machine
    cp.no_perf = true;
    bool n_batch_given = false, n_ctx_given = false;
    rollback_check_ = false;
    for (auto& [key, v] : options.items()) {
      if (key == "n_ubatch") cp.n_ubatch = opt_uint(v, "n_ubatch");
      else if (key == "n_batch") cp.n_batch = opt_uint(v, "n_batch"), n_batch_given = true;
      else if (key == "n_ctx") cp.n_ctx = opt_uint(v, "n_ctx"), n_ctx_given = true;
      else if (key == "threads") cp.n_threads = cp.n_threads_batch = int32_t(opt_uint(v, "threads"));
      else if (key == "swa_full") cp.swa_full = opt_bool(v, "swa_full");
      else if (key == "kv_unified") cp.kv_unified = opt_bool(v, "kv_unified");
      else if (key == "rollback_check") rollback_check_ = opt_bool(v, "rollback_check");
      else if (key == "flash_attn") cp.flash_attn_type = opt_flash(v);
      else if (key == "type_k") cp.type_k = opt_type(v, "type_k");
      else if (key == "type_v") cp.type_v = opt_type(v, "type_v");
      else
        throw std::runtime_error("unknown option \"" + key +
                                 "\" (llama.cpp options: n_ubatch, n_batch, n_ctx, threads, swa_full, kv_unified, flash_attn, type_k, type_v, rollback_check)");
    }
    if (!n_batch_given && cp.n_batch < cp.n_ubatch) cp.n_batch = cp.n_ubatch;
    if (!n_ctx_given) {
      // Every sequence's whole plan, plus a margin; llama.cpp splits n_ctx between the sequences
      // unless kv_unified.
      cp.n_ctx = uint32_t((std::max<int64_t>(max_tokens, 1) + 64) * sequences);
    }

    // The checkpoint's window, for the mutants.
    json cfg = json::parse(slurp(model_dir + "/config.json"));
    // null (no window: mistral, phi3, exaone4 all-full configs) is no window, as transformers reads it.
    const int64_t window = cfg.contains("sliding_window") && cfg["sliding_window"].is_number_integer()
                               ? cfg["sliding_window"].get<int64_t>()
                               : 0;

    const std::string gguf = convert(model_dir);
    const std::string arch = gguf_architecture(gguf);

    std::vector<llama_model_kv_override> ov;
    int64_t want_swa = -1;
    if (mutant != "none") {
      if (mutant == "window+1") want_swa = window + 1;
      else if (mutant == "window-1") want_swa = window - 1;
      // "full": a window larger than any plan, so sliding layers see everything; not far larger, as
      // llama.cpp sizes the SWA cache from n_swa * n_seq_max in uint32 arithmetic.
      else if (mutant == "full") want_swa = std::max<int64_t>(int64_t(1) << 20, max_tokens + 1);
      else if (mutant == "shift-no-rerotate") throw Unsupported("shift-no-rerotate: llama.h has no shift without llama.cpp's own K-shift");
      else if (mutant == "fork-shared") throw Unsupported("fork-shared: llama_memory_seq_cp shares cells by design, there is no copy to skip");
      else if (mutant == "fork-prefix" || mutant == "chunked-restart" || mutant == "spec-rollback" || mutant == "batch-offset" ||
               mutant == "shift-discard+1")
        want_swa = -1;
      else throw std::runtime_error("unknown mutant \"" + mutant + "\" (none, window+1, window-1, full, fork-prefix, chunked-restart, spec-rollback, batch-offset, shift-discard+1)");
    }
    operation_mutant_ = want_swa == -1 ? mutant : "none";
    if (want_swa != -1 && mutant != "none") {
      if (window <= 0) throw Unsupported("the checkpoint has no sliding_window to mutate");
      llama_model_kv_override o{};
      o.tag = LLAMA_KV_OVERRIDE_TYPE_INT;
      std::snprintf(o.key, sizeof o.key, "%s.attention.sliding_window", arch.c_str());
      o.val_i64 = want_swa;
      ov.push_back(o);
      ov.push_back(llama_model_kv_override{});  // key[0] == 0 ends the list
    }

    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    if (!ov.empty()) mp.kv_overrides = ov.data();
    model_ = llama_model_load_from_file(gguf.c_str(), mp);
    if (!model_) {
      // llama.cpp's own reason ("tensor 'blk.0.attn_q.weight' has wrong shape; ...") is in its log.
      const std::string why = last_error();
      throw std::runtime_error("llama_model_load_from_file failed for " + gguf + (why.empty() ? " (see stderr)" : ": " + why));
    }

    const int32_t n_swa = llama_model_n_swa(model_);
    if (mutant != "none" && operation_mutant_ == "none") {
      if (n_swa == 0)
        throw Unsupported("llama.cpp runs architecture \"" + arch + "\" without a sliding window (llama_model_n_swa = 0): " +
                          arch + ".attention.sliding_window is not read, so there is no window to mutate");
      if (n_swa != want_swa)
        throw std::runtime_error("mutant " + mutant + ": llama_model_n_swa is " + std::to_string(n_swa) + ", not " + std::to_string(want_swa));
    }

    ctx_ = llama_init_from_model(model_, cp);
    if (!ctx_) {
      unload();
      throw Unsupported("llama_init_from_model refused the context (options " + options.dump() + "): " + last_error());
    }
    mem_ = llama_get_memory(ctx_);
    kv_unified_ = cp.kv_unified || sequences == 1;
    vocab_ = llama_vocab_n_tokens(llama_model_get_vocab(model_));
    n_swa_ = n_swa;
    n_batch_ = int32_t(llama_n_batch(ctx_));
    batch_ = llama_batch_init(n_batch_, 0, 1);
    have_batch_ = true;
    len_.assign(size_t(sequences), 0);

    char desc[256] = {0};
    llama_model_desc(model_, desc, sizeof desc);
    // Where llama.cpp computes below float32, so the harness's same-dtype reference does too: an f16
    // cache; flash attention (auto included: it resolves to on for the CPU) casts K/V to f16 and reads Q
    // as f16; ggml's CPU GELU is a float16 table (gemma's MLP).
    const bool fa = cp.flash_attn_type != LLAMA_FLASH_ATTN_TYPE_DISABLED;
    json precision = json::object();
    if (fa || cp.type_k != GGML_TYPE_F32 || cp.type_v != GGML_TYPE_F32) precision["kv"] = "float16";
    if (fa) precision["q"] = "float16";
    if (arch.rfind("gemma", 0) == 0) precision["gelu"] = "float16";
    return {{"status", "ok"},
            {"vocab", vocab_},
            {"precision", precision},
            {"dtype", "float32"},
            {"arch", arch},
            {"n_swa", n_swa},
            {"n_ctx", llama_n_ctx(ctx_)},
            {"n_batch", llama_n_batch(ctx_)},
            {"n_ubatch", llama_n_ubatch(ctx_)},
            {"gguf", gguf},
            {"model_desc", desc}};
  }

  std::vector<float> extend(int seq, const std::vector<llama_token>& tokens) {
    check_seq(seq);
    std::vector<float> out(tokens.size() * size_t(vocab_));
    size_t done = 0;
    while (done < tokens.size()) {
      const size_t n = std::min(tokens.size() - done, size_t(n_batch_));
      batch_.n_tokens = int32_t(n);
      for (size_t i = 0; i < n; ++i) {
        batch_.token[i] = tokens[done + i];
        batch_.pos[i] = llama_pos(len_[size_t(seq)] + int64_t(i));
        batch_.n_seq_id[i] = 1;
        batch_.seq_id[i][0] = seq;
        batch_.logits[i] = 1;
      }
      const int32_t rc = llama_decode(ctx_, batch_);
      if (rc != 0) {
        // The batch may be partly in the cache (rc 2 aborts keep finished ubatches); the sequence's
        // length is what the memory now says.
        const llama_pos pmax = llama_memory_seq_pos_max(mem_, seq);
        len_[size_t(seq)] = pmax < 0 ? 0 : int64_t(pmax) + 1;
        throw std::runtime_error("llama_decode returned " + std::to_string(rc) + " (seq " + std::to_string(seq) + ", " +
                                 std::to_string(n) + " tokens at position " + std::to_string(batch_.pos[0]) + "): " + last_error());
      }
      for (size_t i = 0; i < n; ++i) {
        const float* l = llama_get_logits_ith(ctx_, int32_t(i));
        if (!l) throw std::runtime_error("llama_get_logits_ith(" + std::to_string(i) + ") returned NULL");
        std::memcpy(out.data() + (done + i) * size_t(vocab_), l, sizeof(float) * size_t(vocab_));
      }
      len_[size_t(seq)] += int64_t(n);
      done += n;
    }
    return out;
  }

  // Several sequences' tokens in llama_batch calls of at most n_batch tokens (chunked: of `chunk`
  // tokens, one llama_decode per chunk); the logits of every new position, item after item.
  std::vector<float> decode(const std::vector<std::pair<int, std::vector<llama_token>>>& items, size_t chunk, bool chunked) {
    struct Tok {
      int seq;
      llama_pos pos;
      llama_token token;
    };
    std::vector<Tok> all;
    for (const auto& [seq, tokens] : items) {
      check_seq(seq);
      const int64_t base = operation_mutant_ == "batch-offset" ? len_[size_t(items[0].first)] : len_[size_t(seq)];
      for (size_t k = 0; k < tokens.size(); ++k) all.push_back({seq, llama_pos(base + int64_t(k)), tokens[k]});
    }
    std::vector<float> out(all.size() * size_t(vocab_));
    const size_t group = std::max<size_t>(1, std::min(size_t(n_batch_), chunk));
    for (size_t g = 0; g < all.size(); g += group) {
      const size_t n = std::min(group, all.size() - g);
      if (chunked && operation_mutant_ == "chunked-restart" && all[g].pos > 0) llama_memory_seq_rm(mem_, all[g].seq, 0, all[g].pos);
      batch_.n_tokens = int32_t(n);
      for (size_t i = 0; i < n; ++i) {
        batch_.token[i] = all[g + i].token;
        batch_.pos[i] = all[g + i].pos;
        batch_.n_seq_id[i] = 1;
        batch_.seq_id[i][0] = all[g + i].seq;
        batch_.logits[i] = 1;
      }
      const int32_t rc = llama_decode(ctx_, batch_);
      if (rc != 0) {
        // The batch may be partly in the cache: each sequence's length is what the memory now says.
        for (const auto& [seq, tokens] : items) {
          const llama_pos pmax = llama_memory_seq_pos_max(mem_, seq);
          len_[size_t(seq)] = pmax < 0 ? 0 : int64_t(pmax) + 1;
        }
        throw std::runtime_error("llama_decode returned " + std::to_string(rc) + " (" + std::to_string(n) + " tokens, the first of seq " +
                                 std::to_string(all[g].seq) + " at position " + std::to_string(all[g].pos) + "): " + last_error());
      }
      for (size_t i = 0; i < n; ++i) {
        const float* l = llama_get_logits_ith(ctx_, int32_t(i));
        if (!l) throw std::runtime_error("llama_get_logits_ith(" + std::to_string(i) + ") returned NULL");
        std::memcpy(out.data() + (g + i) * size_t(vocab_), l, sizeof(float) * size_t(vocab_));
      }
    }
    for (const auto& [seq, tokens] : items) len_[size_t(seq)] += int64_t(tokens.size());
    return out;
  }

  void fork(int seq, int from, int64_t length) {
    check_seq(seq);
    check_seq(from);
    if (seq == from || length < 0 || length > len_[size_t(from)])
      throw std::runtime_error("fork of " + std::to_string(length) + " tokens of seq " + std::to_string(from) + " (" +
                               std::to_string(len_[size_t(from)]) + " tokens) into seq " + std::to_string(seq));
    const int64_t keep = operation_mutant_ == "fork-prefix" ? std::max<int64_t>(0, length - 1) : length;
    if (!llama_memory_seq_rm(mem_, seq, -1, -1)) throw std::runtime_error("llama_memory_seq_rm of the fork's target returned false");
    len_[size_t(seq)] = 0;
    // llama.cpp copies a partial range only between sequences of one stream (kv_unified); across
    // streams (the default with n_seq_max > 1) a partial seq_cp aborts the process (GGML_ASSERT
    // "seq_cp() is only supported for full KV buffers"). So the whole source is copied and the tail
    // removed, as a caller of the non-unified cache must; kv_unified copies the range itself.
    if (keep > 0) {
      if (kv_unified_) {
        llama_memory_seq_cp(mem_, from, seq, 0, llama_pos(keep));
      } else {
        llama_memory_seq_cp(mem_, from, seq, -1, -1);
        if (keep < len_[size_t(from)] && !llama_memory_seq_rm(mem_, seq, llama_pos(keep), -1))
          throw Unsupported("fork: llama_memory_seq_rm(seq " + std::to_string(seq) + ", p0 " + std::to_string(keep) +
                            ", p1 -1) after copying the whole source returned false: " + last_error());
      }
    }
    len_[size_t(seq)] = keep;
    const llama_pos pmax = llama_memory_seq_pos_max(mem_, seq);
    if (int64_t(pmax) + 1 != keep)
      throw Unsupported("after llama_memory_seq_cp(" + std::to_string(from) + " -> " + std::to_string(seq) + ", [0, " + std::to_string(keep) +
                        ")) the target ends at position " + std::to_string(pmax) + ": " + last_error());
  }

  void rollback(int seq, int64_t n) {
    check_seq(seq);
    int64_t& len = len_[size_t(seq)];
    if (n < 0 || n > len) throw std::runtime_error("rollback of " + std::to_string(n) + " tokens from a sequence of " + std::to_string(len));
    if (n == 0) return;
    if (!llama_memory_seq_rm(mem_, seq, llama_pos(len - n), -1))
      throw Unsupported("llama_memory_seq_rm(seq " + std::to_string(seq) + ", p0 " + std::to_string(len - n) +
                        ", p1 -1) returned false: llama.cpp cannot remove a partial sequence from this memory" +
                        (last_error().empty() ? "" : ": " + last_error()));
    len -= n;
    // llama_memory_seq_rm returns true on an SWA cache even when the cells the next token needs
    // (positions len - n_swa + 1 .. len - 1) were already overwritten: what is left is only visible
    // through llama_memory_seq_pos_min (llama-server checks it and reprocesses the prompt).
    const llama_pos pmin = llama_memory_seq_pos_min(mem_, seq), pmax = llama_memory_seq_pos_max(mem_, seq);
    const int64_t need = std::max<int64_t>(0, len - n_swa_ + 1);
    const bool lost = n_swa_ > 0 && len > 0 && (pmin < 0 || int64_t(pmin) > need);
    std::fprintf(stderr, "kvc_llama_worker: rollback seq %d by %lld to %lld: memory holds positions %d..%d%s\n", seq,
                 static_cast<long long>(n), static_cast<long long>(len), pmin, pmax,
                 lost ? " (the window's keys are gone: the next token's logits will be wrong)" : "");
    if (lost && rollback_check_)
      throw Unsupported("after llama_memory_seq_rm (which returned true) the memory of seq " + std::to_string(seq) +
                        " holds positions " + std::to_string(pmin) + ".." + std::to_string(pmax) + ", but the next token (position " +
                        std::to_string(len) + ") needs keys from position " + std::to_string(need) +
                        ": the SWA cache overwrote them (swa_full would keep them)");
  }

  // llama.cpp's context shift (what llama-server's context_shift does): the cells of positions
  // [keep, keep + discard) removed, the later ones moved down; llama.cpp re-rotates the moved keys
  // (its K-shift) at the next decode. A memory that cannot shift (an SWA cache smaller than the full
  // one, i.e. without swa_full) would abort there, so it is refused here.
  void shift(int seq, int64_t keep, int64_t discard) {
    check_seq(seq);
    int64_t& len = len_[size_t(seq)];
    if (keep < 0 || discard <= 0 || keep + discard > len)
      throw std::runtime_error("shift discarding " + std::to_string(discard) + " after " + std::to_string(keep) + " of a sequence of " +
                               std::to_string(len));
    if (!llama_memory_can_shift(mem_))
      throw Unsupported("llama_memory_can_shift is false for this memory (an SWA cache needs swa_full to shift)");
    if (!llama_memory_seq_rm(mem_, seq, llama_pos(keep), llama_pos(keep + discard)))
      throw Unsupported("llama_memory_seq_rm(seq " + std::to_string(seq) + ", p0 " + std::to_string(keep) + ", p1 " +
                        std::to_string(keep + discard) + ") returned false" + (last_error().empty() ? "" : ": " + last_error()));
    llama_memory_seq_add(mem_, seq, llama_pos(keep + discard), -1, llama_pos(-discard));
    len -= discard;
  }

  void reload(int seq) {
    check_seq(seq);
    const size_t size = llama_state_seq_get_size(ctx_, seq);
    std::vector<uint8_t> state(size);
    const size_t got = llama_state_seq_get_data(ctx_, state.data(), state.size(), seq);
    if (got == 0 && len_[size_t(seq)] > 0) throw std::runtime_error("llama_state_seq_get_data returned 0: " + last_error());
    if (!llama_memory_seq_rm(mem_, seq, -1, -1)) throw std::runtime_error("llama_memory_seq_rm of the whole sequence returned false");
    const size_t set = llama_state_seq_set_data(ctx_, state.data(), got, seq);
    if (set == 0) throw std::runtime_error("llama_state_seq_set_data returned 0 (failed to load " + std::to_string(got) + " bytes): " + last_error());
    const llama_pos pmax = llama_memory_seq_pos_max(mem_, seq);
    if (int64_t(pmax) + 1 != len_[size_t(seq)])
      throw std::runtime_error("after reload, the sequence ends at position " + std::to_string(pmax) + ", expected " +
                               std::to_string(len_[size_t(seq)] - 1));
  }

  void reset() {
    if (!ctx_) throw std::runtime_error("reset before load");
    llama_memory_clear(mem_, true);
    std::fill(len_.begin(), len_.end(), 0);
  }

  int32_t vocab() const { return vocab_; }
  const std::string& operation_mutant() const { return operation_mutant_; }
  int64_t length(int seq) const { return len_.at(size_t(seq)); }

  static std::string& last_error_ref() {
    static std::string s;
    return s;
  }
  static std::string last_error() { return last_error_ref(); }

 private:
  void check_seq(int seq) {
    if (!ctx_) throw std::runtime_error("no model loaded");
    if (seq < 0 || size_t(seq) >= len_.size())
      throw std::runtime_error("seq " + std::to_string(seq) + " out of range (sequences " + std::to_string(len_.size()) + ")");
  }

  std::string convert(const std::string& model_dir) {
    if (convert_.empty())
      throw std::runtime_error("no converter: pass --convert \"PYTHON engines/llama_cpp/convert.py\" or set KVC_LLAMA_CONVERT");
    uint64_t hsh = 1469598103934665603ull;
    hsh = fnv1a(hsh, slurp(model_dir + "/config.json"));
    hsh = fnv1a(hsh, slurp(model_dir + "/model.safetensors"));
    // The command by content, not by where the checkout is: every clone names its own convert.py and
    // venv, and a key holding those paths converted every checkpoint again in each CI clone. A .py
    // counts by its text (an edited convert.py reconverts); another file by its folder's real path
    // (a venv's folder is named by the hash of its pins); any other word as written.
    std::istringstream words(convert_);
    for (std::string w; words >> w;) {
      struct stat ws{};
      if (::stat(w.c_str(), &ws) != 0 || !S_ISREG(ws.st_mode)) {
        hsh = fnv1a(hsh, "word " + w);
      } else if (w.size() > 3 && w.compare(w.size() - 3, 3, ".py") == 0) {
        hsh = fnv1a(hsh, "script " + slurp(w));
      } else {
        const size_t slash = w.rfind('/');
        const std::string folder = slash == std::string::npos ? "." : w.substr(0, slash == 0 ? 1 : slash);
        char real[PATH_MAX];
        hsh = fnv1a(hsh, std::string("file ") + (::realpath(folder.c_str(), real) ? real : folder.c_str()) + "/" +
                             (slash == std::string::npos ? w : w.substr(slash + 1)));
      }
    }
    hsh = fnv1a(hsh, KVC_LLAMA_VERSION " " KVC_LLAMA_COMMIT);
    char name[64];
    std::snprintf(name, sizeof name, "kvc-%016llx", static_cast<unsigned long long>(hsh));
    const std::string dir = gguf_dir();
    const std::string path = dir + "/" + name + ".gguf";
    // A refusal or a converter exception is kept beside the GGUFs under the same key: converting
    // only to fail again cost each case of such a checkpoint a Python start (torch, transformers).
    const std::string refused = dir + "/" + name + ".refused";
    struct stat st{};
    if (::stat(path.c_str(), &st) == 0) return path;
    if (::stat(refused.c_str(), &st) == 0) throw Unsupported(slurp(refused));
    const std::string failed = dir + "/" + name + ".failed";
    if (::stat(failed.c_str(), &st) == 0) throw ConvertError(slurp(failed));
    mkdirs(dir);
    const std::string tmp = path + ".tmp" + std::to_string(::getpid());
    std::fprintf(stderr, "kvc_llama_worker: converting %s -> %s\n", model_dir.c_str(), path.c_str());
    try {
      run_convert(convert_, model_dir, tmp);
    } catch (const Unsupported& e) {
      ::unlink(tmp.c_str());
      keep_verdict(refused, e.what());
      throw;
    } catch (const ConvertError& e) {
      ::unlink(tmp.c_str());
      keep_verdict(failed, e.what());
      throw;
    } catch (...) {
      ::unlink(tmp.c_str());
      throw;
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) throw std::runtime_error("rename " + tmp + ": " + std::strerror(errno));
    return path;
  }

  static void keep_verdict(const std::string& path, const std::string& text) {
    const std::string tmp = path + ".tmp" + std::to_string(::getpid());
    if (std::ofstream(tmp) << text) std::rename(tmp.c_str(), path.c_str());
  }

  void unload() {
    if (have_batch_) llama_batch_free(batch_), have_batch_ = false;
    if (ctx_) llama_free(ctx_), ctx_ = nullptr;
    if (model_) llama_model_free(model_), model_ = nullptr;
    mem_ = nullptr;
    len_.clear();
  }

  std::string convert_;
  llama_model* model_ = nullptr;
  llama_context* ctx_ = nullptr;
  llama_memory_t mem_ = nullptr;
  llama_batch batch_{};
  bool have_batch_ = false;
  int32_t vocab_ = 0;
  int32_t n_batch_ = 0;
  int32_t n_swa_ = 0;
  bool rollback_check_ = false;
  std::string operation_mutant_ = "none";
  bool kv_unified_ = false;
  std::vector<int64_t> len_;
};

// Keeps llama.cpp's warning/error lines of the current op, for error replies.
void log_and_keep(enum ggml_log_level level, const char* text, void* ud) {
  if (level == GGML_LOG_LEVEL_WARN || level == GGML_LOG_LEVEL_ERROR) {
    // Every warning and error of the current op, joined: llama.cpp's reason is often the first
    // line ("init: invalid token[0] = 300"), its summary the last.
    std::string& s = Engine::last_error_ref();
    std::string t(text);
    while (!t.empty() && (t.back() == '\n' || t.back() == '\r')) t.pop_back();
    if (!t.empty() && s.size() < 2000) s += (s.empty() ? "" : " | ") + t;
  }
  log_to_stderr(level, text, ud);
}

}  // namespace

int main(int argc, char** argv) {
  // An abort (GGML_ASSERT) would attach gdb for a backtrace: about a second per aborting case, and
  // its output buries the assertion. KVC_GGML_BACKTRACE=1 keeps ggml's backtrace.
  if (const char* b = std::getenv("KVC_GGML_BACKTRACE"); !(b && std::string(b) == "1")) setenv("GGML_NO_BACKTRACE", "1", 1);
  std::string convert;
  if (const char* c = std::getenv("KVC_LLAMA_CONVERT"); c && *c) convert = c;
  else convert = KVC_LLAMA_DEFAULT_CONVERT;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--convert" && i + 1 < argc) convert = argv[++i];
    else if (a.rfind("--convert=", 0) == 0) convert = a.substr(10);
    else {
      std::fprintf(stderr, "usage: %s [--convert \"PYTHON engines/llama_cpp/convert.py\"]\n", argv[0]);
      return 2;
    }
  }
  // The protocol owns the original stdout; everything else printing to fd 1 lands on stderr.
  g_out = ::dup(1);
  if (g_out < 0 || ::dup2(2, 1) < 0) {
    std::perror("kvc_llama_worker: dup");
    return 1;
  }
  ::fcntl(g_out, F_SETFD, FD_CLOEXEC);

  llama_log_set(log_and_keep, nullptr);
  llama_backend_init();
  Engine engine(convert);
  json h;
  while (true) {
    try {
      if (!receive(h)) break;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "kvc_llama_worker: bad frame: %s\n", e.what());
      return 1;
    }
    const std::string op = h.value("op", std::string());
    Engine::last_error_ref().clear();
    try {
      if (op == "hello") {
        send({{"status", "ok"},
              {"name", "llama.cpp"},
              {"version", KVC_LLAMA_PACKAGE " (llama.cpp " KVC_LLAMA_COMMIT ")"},
              {"description", std::string("llama.cpp through llama.h, CPU (") + llama_print_system_info() + ")"},
              {"operations", {"rollback", "reload", "sequences", "fork", "chunked", "spec", "batch", "shift"}}});
      } else if (op == "load") {
        send(engine.load(h));
      } else if (op == "extend") {
        std::vector<llama_token> tokens = h.at("tokens").get<std::vector<llama_token>>();
        std::vector<float> logits = engine.extend(h.at("seq").get<int>(), tokens);
        const size_t nbytes = logits.size() * sizeof(float);
        send({{"status", "ok"},
              {"buffers", {{{"name", "logits"}, {"dtype", "float32"}, {"shape", {tokens.size(), engine.vocab()}}, {"nbytes", nbytes}}}}},
             logits.data(), nbytes);
      } else if (op == "chunked" || op == "spec" || op == "batch") {
        std::vector<std::pair<int, std::vector<llama_token>>> items;
        if (op == "batch")
          for (const json& item : h.at("items")) items.push_back({item.at("seq").get<int>(), item.at("tokens").get<std::vector<llama_token>>()});
        else
          items.push_back({h.at("seq").get<int>(), h.at("tokens").get<std::vector<llama_token>>()});
        const int64_t chunk = op == "chunked" ? h.at("chunk").get<int64_t>() : int64_t(1) << 40;
        if (chunk <= 0) throw std::runtime_error("chunk must be positive");
        std::vector<float> logits = engine.decode(items, size_t(chunk), op == "chunked");
        if (op == "spec") {
          const int64_t n = h.at("n").get<int64_t>() + (engine.operation_mutant() == "spec-rollback" ? 1 : 0);
          engine.rollback(items[0].first, std::min<int64_t>(n, engine.length(items[0].first)));
        }
        const size_t nbytes = logits.size() * sizeof(float);
        send({{"status", "ok"},
              {"buffers", {{{"name", "logits"}, {"dtype", "float32"}, {"shape", {logits.size() / size_t(engine.vocab()), engine.vocab()}}, {"nbytes", nbytes}}}}},
             logits.data(), nbytes);
      } else if (op == "fork") {
        engine.fork(h.at("seq").get<int>(), h.at("from").get<int>(), h.at("length").get<int64_t>());
        send({{"status", "ok"}});
      } else if (op == "shift") {
        const int seq = h.at("seq").get<int>();
        const int64_t keep = h.at("keep").get<int64_t>(), discard = h.at("discard").get<int64_t>();
        // the mutant drops one token more than asked where there is one
        const int64_t more = engine.operation_mutant() == "shift-discard+1" && keep + discard < engine.length(seq) ? 1 : 0;
        engine.shift(seq, keep, discard + more);
        send({{"status", "ok"}});
      } else if (op == "rollback") {
        engine.rollback(h.at("seq").get<int>(), h.at("n").get<int64_t>());
        send({{"status", "ok"}});
      } else if (op == "reload") {
        engine.reload(h.at("seq").get<int>());
        send({{"status", "ok"}});
      } else if (op == "reset") {
        engine.reset();
        send({{"status", "ok"}});
      } else if (op == "shutdown" || op == "exit") {
        send({{"status", "ok"}});
        break;
      } else {
        send({{"status", "error"}, {"error", "unknown op \"" + op + "\""}});
      }
    } catch (const Unsupported& e) {
      send({{"status", "unsupported"}, {"error", e.what()}});
    } catch (const std::exception& e) {
      send({{"status", "error"}, {"error", e.what()}});
    }
  }
  llama_backend_free();
  return 0;
}
