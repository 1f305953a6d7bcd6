#include "kvconform/engine/client.h"

#include <cstring>

#include "kvconform/worker.h"

namespace kvc::engine {

using nlohmann::json;

namespace {
constexpr int kProtocolVersion = 1;
// Interpreter start and imports (torch, mlx) before the hello answer.
constexpr double kStartupTimeoutS = 180;
}  // namespace

EngineClient::EngineClient(EngineSpec spec) : spec_(std::move(spec)), worker_(std::make_unique<worker::Worker>(spec_.command)) {}
EngineClient::~EngineClient() = default;

void EngineClient::stop() { worker_->stop(); }

bool EngineClient::supports(const std::string& op) const {
  if (!info_.contains("operations") || !info_["operations"].is_array()) return false;
  for (const json& o : info_["operations"])
    if (o == op) return true;
  return false;
}

Reply EngineClient::hello() {
  Reply r;
  if (worker_->running()) return r;
  worker::End end{};
  if (!worker_->start({{"op", "hello"}, {"protocol", kProtocolVersion}, {"level", "engine"}}, kStartupTimeoutS, end, r.message)) {
    r.kind = Reply::Kind::Fault;
    r.message = "the engine worker did not start: " + r.message;
    return r;
  }
  info_ = worker_->hello_reply();
  r.header = info_;
  return r;
}

Reply EngineClient::request(const json& header, int64_t rows, int64_t vocab) {
  Reply r = hello();
  if (!r.ok()) return r;
  std::string payload;
  worker::End end{};
  if (!worker_->transact(worker::frame(header), spec_.timeout_s, r.header, payload, end, r.message)) {
    r.kind = Reply::Kind::Fault;
    r.message = std::string(plugin::to_string(end)) + ": " + r.message;
    return r;
  }
  const std::string status = r.header.value("status", "");
  if (status == "unsupported" || status == "error") {
    r.kind = status == "unsupported" ? Reply::Kind::Unsupported : Reply::Kind::Error;
    r.message = r.header.value("error", std::string("(no message)"));
    return r;
  }
  if (status != "ok") {
    r.kind = Reply::Kind::Error;
    r.message = "reply status \"" + status + "\" (expected ok, unsupported or error)";
    return r;
  }
  if (rows < 0) return r;
  const json buffers = r.header.value("buffers", json::array());
  const json want_shape = {rows, vocab};
  const size_t want = static_cast<size_t>(rows * vocab) * 4;
  if (buffers.size() != 1 || buffers[0].value("name", "") != "logits" || buffers[0].value("dtype", "") != "float32" ||
      buffers[0].value("shape", json()) != want_shape || payload.size() != want) {
    r.kind = Reply::Kind::Error;
    r.message = "the reply must carry one float32 buffer \"logits\" of shape " + want_shape.dump() + " (" + std::to_string(want) +
                " bytes); it carried " + buffers.dump() + " and " + std::to_string(payload.size()) + " bytes";
    return r;
  }
  r.logits.resize(static_cast<size_t>(rows * vocab));
  std::memcpy(r.logits.data(), payload.data(), want);
  return r;
}

Reply EngineClient::load(const std::string& model_dir, int64_t max_tokens, int64_t sequences, const std::string& case_id) {
  return request({{"op", "load"},
                  {"case", case_id},
                  {"model", model_dir},
                  {"options", spec_.options},
                  {"mutant", spec_.mutant},
                  {"max_tokens", max_tokens},
                  {"sequences", sequences}},
                 -1, 0);
}

Reply EngineClient::step(const PlanStep& s, const std::string& case_id, int64_t index, int64_t vocab) {
  json h = {{"op", to_string(s.kind)}, {"case", case_id}, {"step", index}};
  if (s.kind != PlanStep::Kind::Reset) h["seq"] = s.seq;
  if (s.kind == PlanStep::Kind::Extend) h["tokens"] = s.tokens;
  if (s.kind == PlanStep::Kind::Rollback) h["n"] = s.n;
  return request(h, s.kind == PlanStep::Kind::Extend ? static_cast<int64_t>(s.tokens.size()) : -1, vocab);
}

}  // namespace kvc::engine
