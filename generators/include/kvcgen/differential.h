// Live differential fuzzing: random sequences go to the real transformers through a long-lived
// `golden/dump.py --serve` subprocess (JSON lines in, fixtures out), and every step is compared with
// the C++ reference. A disagreement is shrunk and saved as a case file. No LibTorch here.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvconform/mutants.h"
#include "kvconform/seeds.h"

namespace kvc::differential {

// The dumper subprocess of one transformers version.
class Dumper {
 public:
  // python: the interpreter of the pinned env; script: golden/dump.py.
  Dumper(const std::string& python, const std::string& script);
  ~Dumper();
  Dumper(const Dumper&) = delete;
  Dumper& operator=(const Dumper&) = delete;
  // One case in, its fixture out (or {"invalid_case": ...} / {"dumper_error": ...}).
  nlohmann::json dump(const nlohmann::ordered_json& scenario);

 private:
  int to_child_ = -1, from_child_ = -1, pid_ = -1;
  std::string buffer_;
};

struct Options {
  std::string version;         // transformers version, e.g. 5.24.0
  std::string python, script;  // the env's interpreter and golden/dump.py
  uint64_t seed = kvc::seeds::kDefaultSeed;
  int64_t iterations = 1000;                 // random sequences (over all shards)
  int64_t shard_index = 0, shard_count = 1;  // run the sequences i with i % shard_count == shard_index
  double time_budget_s = 0;                  // stop after this many seconds (0: no limit)
  // Dumper processes (one worker thread each) sharing the shard's sequences; the summary is the
  // same for any count (except where a time budget cuts the campaign short).
  int64_t workers = 1;
  std::string out_dir = "regressions";  // the corpus: disagreements go to regressions/differential/<version>/
  // The release whose behaviours (behaviours_for_release) the reference follows; empty = `version`.
  // Another release proves the campaign can fail (their differences must show up as shrunk
  // disagreements).
  std::string reference_release;
  Mutation mutation = Mutation::None;                                 // a deliberately wrong reference (--mutant): must disagree
  std::function<void(int64_t done, int64_t disagreements)> progress;  // called under a lock
};

struct Summary {
  int64_t sequences = 0, steps = 0, disagreements = 0, deviations = 0;
  double seconds = 0;
  int workers = 1;
  std::vector<std::string> saved;  // case files written for disagreements
  std::vector<std::string> messages;
  std::vector<std::string> scenarios, verdicts;  // each disagreement's sequence ("diff_<seed>_<i>") and verdict
  std::vector<int64_t> indices;                  // each disagreement's sequence index i (in increasing order)
};

Summary run(const Options& options);

}  // namespace kvc::differential
