// The oracle's row memo (engine/oracle_memo.h): the rows its oracles computed, kept in the process
// and in files under a key of everything they were computed from.
#include "kvconform/engine/oracle_memo.h"

#include <gnu/libc-version.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <unordered_map>

#include <nlohmann/json.hpp>

namespace kvc::engine {

using nlohmann::json;

namespace {

// Every field's value, bound by name: a field added to OracleOptions leaves this binding one name
// short, which does not compile, so two options that compute different rows never share a key.
std::string options_text(const OracleOptions& o) {
  const auto& [windows, chunks, kv_half, q_half, gelu_half, k_block, v_block, q_block, kv_bf16, chunk_shift, reach_delta, causal,
               cross_window, cross_softmax_apart, window_delta_position, window_delta] = o;
  const json j = {windows,
                  chunks,
                  kv_half,
                  q_half,
                  gelu_half,
                  kv_bf16,
                  static_cast<int>(k_block),
                  static_cast<int>(v_block),
                  static_cast<int>(q_block),
                  chunk_shift,
                  window_delta_position,
                  window_delta,
                  reach_delta,
                  causal,
                  cross_window,
                  cross_softmax_apart};
  return j.dump();
}

// KVC_ORACLE_MEMO: unset, the oracles' rows are kept in the process and in files; "process", in the
// process only; "0", not at all (docs/performance.md measures each).
std::string memo_mode() {
  static const std::string mode = [] {
    const char* v = std::getenv("KVC_ORACLE_MEMO");
    return std::string(v ? v : "");
  }();
  return mode;
}

// The memo's second level, shared by the processes of a test run (the engine tests judge the same
// models and plans on many engines, each in its own kvconform) and by later runs of the same
// oracle: one file per key in ${KVC_CACHE:-$HOME/.cache/kvconform}/oracle/<id>/. The id digests
// the oracle's code (oracle_code_id(): its archives' bytes, so the compiler and flags too), glibc's
// version and the CPU's model and flags (libm picks its exp and tanh by them), so another oracle or
// machine computes its own rows; a file ends with the digest of its rows, so a torn or damaged one
// is computed again. Best effort: a folder or file that cannot be written only costs the
// computation. Other ids' folders unused for a week are removed.
class OracleFiles {
 public:
  static OracleFiles& get() {
    static OracleFiles files;
    return files;
  }
  const std::string& dir() const { return dir_; }
  std::optional<std::vector<double>> read(const std::string& key) const {
    if (dir_.empty()) return std::nullopt;
    std::ifstream in(dir_ + "/" + key + ".f64", std::ios::binary);
    if (!in) return std::nullopt;
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t digest = 32;
    if (bytes.size() < digest || (bytes.size() - digest) % sizeof(double) != 0) return std::nullopt;
    const std::string_view rows(bytes.data(), bytes.size() - digest);
    if (content_digest({rows}) != std::string_view(bytes).substr(rows.size())) return std::nullopt;
    std::vector<double> out(rows.size() / sizeof(double));
    std::memcpy(out.data(), rows.data(), rows.size());
    return out;
  }
  void write(const std::string& key, const std::vector<double>& rows) {
    if (dir_.empty()) return;
    const std::string_view bytes(reinterpret_cast<const char*>(rows.data()), rows.size() * sizeof(double));
    // A long random campaign draws plans no later run repeats: each process writes at most this much.
    if ((written_ += bytes.size()) > kWriteBudget) return;
    static std::atomic<uint64_t> serial{0};
    const std::string path = dir_ + "/" + key + ".f64",
                      part = path + ".part." + std::to_string(getpid()) + "." + std::to_string(serial++);
    {
      std::ofstream out(part, std::ios::binary);
      out << bytes << content_digest({bytes});
      if (!out.flush()) return (void)std::remove(part.c_str());
    }
    if (std::rename(part.c_str(), path.c_str()) != 0) return (void)std::remove(part.c_str());
    std::lock_guard<std::mutex> lock(m_);
    written_paths_.push_back(path);
  }
  std::vector<std::string> written() const {
    std::lock_guard<std::mutex> lock(m_);
    return written_paths_;
  }

 private:
  OracleFiles() {
    namespace fs = std::filesystem;
    if (memo_mode() == "process") return;
    const char* cache = std::getenv("KVC_CACHE");
    const char* home = std::getenv("HOME");
    if (!(cache && *cache) && !(home && *home)) return;
    const fs::path root = (cache && *cache ? fs::path(cache) : fs::path(home) / ".cache/kvconform") / "oracle";
    std::string cpu;
    std::ifstream info("/proc/cpuinfo");
    for (std::string line; std::getline(info, line) && cpu.size() < 2;)
      if (line.rfind("model name", 0) == 0 || line.rfind("flags", 0) == 0) cpu += line + "\n";
    const fs::path dir = root / content_digest({oracle_code_id(), gnu_get_libc_version(), cpu});
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) return;
    dir_ = dir.string();
    const auto week_ago = fs::file_time_type::clock::now() - std::chrono::hours(24 * 7);
    for (const fs::directory_entry& other : fs::directory_iterator(root, ec))
      if (other.path() != dir && other.last_write_time(ec) < week_ago && !ec) fs::remove_all(other.path(), ec);
  }
  static constexpr uint64_t kWriteBudget = uint64_t{256} << 20;
  std::string dir_;  // empty: no files
  std::atomic<uint64_t> written_{0};
  mutable std::mutex m_;
  std::vector<std::string> written_paths_;  // at most kWriteBudget's worth of files
};

// The oracles' rows of each step, kept under (the model's digest, the oracle's options, steps
// 0..i): a run judges the same plans on every engine configuration, and a shrink tries plans that
// begin with the steps of the plan it shrinks. The oracles are deterministic and read nothing else,
// so a kept row is the row they would compute again. In the process, then in files (OracleFiles).
class OracleMemo {
 public:
  std::optional<std::vector<double>> find(const std::string& key) {
    {
      std::lock_guard<std::mutex> lock(m_);
      const auto it = rows_.find(key);
      if (it != rows_.end()) return ++stats_.hits, it->second;
    }
    std::optional<std::vector<double>> read = OracleFiles::get().read(key);
    std::lock_guard<std::mutex> lock(m_);
    if (!read) return ++stats_.misses, std::nullopt;
    ++stats_.hits, ++stats_.file_hits;
    remember(key, *read);
    return read;
  }
  void keep(const std::string& key, const std::vector<double>& rows) {
    OracleFiles::get().write(key, rows);
    std::lock_guard<std::mutex> lock(m_);
    remember(key, rows);
  }
  OracleMemoStats stats() {
    std::lock_guard<std::mutex> lock(m_);
    return stats_;
  }
  void forget() {
    std::lock_guard<std::mutex> lock(m_);
    rows_.clear(), bytes_ = 0;
  }
  static bool on() { return memo_mode() != "0"; }

 private:
  void remember(const std::string& key, const std::vector<double>& rows) {
    const size_t size = rows.size() * sizeof(double) + key.size();
    if (bytes_ + size > kBytes) rows_.clear(), bytes_ = 0;  // a bound, not a cache policy: runs that fill it are rare
    if (rows_.emplace(key, rows).second) bytes_ += size;
  }
  static constexpr size_t kBytes = size_t{512} << 20;
  std::mutex m_;
  std::unordered_map<std::string, std::vector<double>> rows_;
  size_t bytes_ = 0;
  OracleMemoStats stats_;
};

OracleMemo& oracle_memo() {
  static OracleMemo memo;
  return memo;
}

}  // namespace

std::string oracle_rows_key(const std::string& model_digest, const char* type, const OracleOptions& options) {
  return content_digest({model_digest, type, options_text(options)});
}
std::string next_oracle_rows_key(const std::string& key, const std::string& step) { return content_digest({key, step}); }
bool oracle_memo_on() { return OracleMemo::on(); }
std::optional<std::vector<double>> find_oracle_rows(const std::string& key) { return oracle_memo().find(key); }
void keep_oracle_rows(const std::string& key, const std::vector<double>& rows) { oracle_memo().keep(key, rows); }

OracleMemoStats oracle_memo_stats() { return oracle_memo().stats(); }
std::string oracle_files_dir() { return OracleMemo::on() ? OracleFiles::get().dir() : ""; }
std::vector<std::string> oracle_files_written() { return OracleFiles::get().written(); }
void forget_kept_oracle_rows() { oracle_memo().forget(); }

}  // namespace kvc::engine
