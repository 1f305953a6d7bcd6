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
  // An engine may answer a subset of the new positions (e.g. only the last, as a server does): the
  // header's "rows" names them, increasing indices into the step's new positions.
  if (r.header.contains("rows")) {
    const json& named = r.header["rows"];
    bool valid = named.is_array();
    for (size_t k = 0; valid && k < named.size(); ++k) {
      valid = named[k].is_number_integer() && named[k].get<int64_t>() >= 0 && named[k].get<int64_t>() < rows &&
              (k == 0 || named[k].get<int64_t>() > r.rows.back());
      if (valid) r.rows.push_back(named[k].get<int64_t>());
    }
    if (!valid) {
      r.kind = Reply::Kind::Error;
      r.message = "the reply's \"rows\" must be increasing indices in [0, " + std::to_string(rows) + "); it was " + named.dump();
      return r;
    }
  } else {
    for (int64_t k = 0; k < rows; ++k) r.rows.push_back(k);
  }
  const int64_t got = static_cast<int64_t>(r.rows.size());
  const json buffers = r.header.value("buffers", json::array());
  const json want_shape = {got, vocab};
  const size_t want = static_cast<size_t>(got * vocab) * 4;
  if (got == 0 && buffers.empty()) return r;
  // "logprobs" instead of "logits": log-probabilities over the vocabulary (a server's answer), judged
  // as log-softmax against the oracle's.
  const std::string name = buffers.size() == 1 ? buffers[0].value("name", "") : "";
  if ((name != "logits" && name != "logprobs") || buffers[0].value("dtype", "") != "float32" ||
      buffers[0].value("shape", json()) != want_shape || payload.size() != want) {
    r.kind = Reply::Kind::Error;
    r.message = "the reply must carry one float32 buffer \"logits\" (or \"logprobs\") of shape " + want_shape.dump() + " (" +
                std::to_string(want) + " bytes); it carried " + buffers.dump() + " and " + std::to_string(payload.size()) +
                " bytes";
    return r;
  }
  r.logprobs = name == "logprobs";
  r.logits.resize(static_cast<size_t>(got * vocab));
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
  json h = s.to_json();
  h["case"] = case_id;
  h["step"] = index;
  return request(h, s.logits() ? static_cast<int64_t>(s.positions({}).size()) : -1, vocab);
}

}  // namespace kvc::engine
