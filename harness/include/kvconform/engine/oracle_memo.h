// The oracle's row memo: the rows a model oracle computed for a plan's steps, kept in this process
// and in files shared by the processes of a run and later runs of the same oracle code
// (KVC_ORACLE_MEMO, docs/performance.md). A row is kept under the content of everything it was
// computed from: the model's files, the oracle's arithmetic type, every field of its options and every
// step so far. No LibTorch here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kvconform/engine/model.h"

namespace kvc::engine {

// The key of an oracle's rows before its first step: the model's digest (Model::digest), its type
// ("float64", "float32") and every field of `options`.
std::string oracle_rows_key(const std::string& model_digest, const char* type, const OracleOptions& options);
// The key after one more step (its plan text).
std::string next_oracle_rows_key(const std::string& key, const std::string& step);

// false under KVC_ORACLE_MEMO=0: nothing is kept or found.
bool oracle_memo_on();
std::optional<std::vector<double>> find_oracle_rows(const std::string& key);
void keep_oracle_rows(const std::string& key, const std::vector<double>& rows);

// How often a SequenceModel found a step's rows kept (in this process or, file_hits of them, in the
// oracle's files: KVC_ORACLE_MEMO), and how often it computed them.
struct OracleMemoStats {
  int64_t hits = 0, misses = 0, file_hits = 0;
};
OracleMemoStats oracle_memo_stats();
// The folder of the oracle's files (empty: none kept), the files this process wrote there (other
// processes write beside it), and forgetting the rows kept in this process, as a new process starts
// with none (tests).
std::string oracle_files_dir();
// The model oracle's code: a digest of the archives that hold it (generated at build time,
// cmake/oracle_code_id.cmake), which keys the oracle's files.
const char* oracle_code_id();
std::vector<std::string> oracle_files_written();
void forget_kept_oracle_rows();

}  // namespace kvc::engine
