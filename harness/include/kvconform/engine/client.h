// The host side of the engine protocol (docs/engines.md): one persistent worker per engine
// configuration, started on first use and restarted after it crashes, hangs or breaks the framing.
// No LibTorch here.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvconform/engine/plan.h"

namespace kvc::worker {
class Worker;
}

namespace kvc::engine {

// An engine configuration: the worker command and the options its load gets.
struct EngineSpec {
  std::string name;     // the results' backend column: "transformers-5.24.0/dynamic/sdpa", ...
  std::string command;  // sh -c COMMAND
  nlohmann::json options = nlohmann::json::object();
  std::string mutant = "none";  // none, window_off_by_one+1, window_off_by_one-1, full (the adapter is told a wrong window)
  double timeout_s = 120;       // per request
};

struct Reply {
  enum class Kind { Ok, Unsupported, Error, Fault };  // Fault: the worker crashed, hung or broke the framing
  Kind kind = Kind::Ok;
  std::string message;
  nlohmann::json header;      // the worker's reply header
  std::vector<float> logits;  // a step with new positions: [rows.size(), vocab]
  std::vector<int64_t> rows;  // which of the step's new positions `logits` holds (all unless the engine named a subset)
  bool logprobs = false;      // `logits` holds log-probabilities (the reply's buffer "logprobs"), as a server answers
  bool ok() const { return kind == Kind::Ok; }
};

class EngineClient {
 public:
  explicit EngineClient(EngineSpec spec);
  ~EngineClient();
  const EngineSpec& spec() const { return spec_; }
  void rename(std::string name) { spec_.name = std::move(name); }  // the name its hello announced
  // Starts the worker if needed; its hello answer (name, version, operations) or a Fault.
  Reply hello();
  const nlohmann::json& info() const { return info_; }
  bool supports(const std::string& operation) const;

  Reply load(const std::string& model_dir, int64_t max_tokens, int64_t sequences, const std::string& case_id);
  Reply step(const PlanStep& step, const std::string& case_id, int64_t index, int64_t vocab);
  void stop();  // the next request starts a fresh worker

 private:
  Reply request(const nlohmann::json& header, int64_t expect_logits_rows, int64_t vocab);
  EngineSpec spec_;
  std::unique_ptr<worker::Worker> worker_;
  nlohmann::json info_;
};

}  // namespace kvc::engine
