// The subprocess protocol (docs/plugins.md, "Kernels in another process"). Every message, both ways:
//
//   u32 little-endian header length | header (UTF-8 JSON) | payload: the header's "buffers", in order
//
// Each buffer is {"name", "dtype", "shape", "nbytes"}; its bytes are contiguous row-major
// little-endian. The worker is a long-lived process group; every call is bounded by a deadline, and
// a worker that dies, hangs or answers garbage is killed and started afresh for the next case.
#include "kvconform/subprocess_backend.h"

#include <algorithm>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "kvconform/worker.h"

namespace kvc::plugin {

namespace {

using nlohmann::json;
using worker::frame;
using worker::Worker;

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

// The packed [total, heads, D] of the varlen form, the [B, heads, n, D] of the others.
std::vector<int64_t> shape_of(const Op& op, const Buffer& b) {
  return op.varlen ? std::vector<int64_t>{b.shape[0], b.shape[1], b.shape[2]} : shape_of(b);
}

// One attention op as a request message.
std::string encode_attention(const Op& op) {
  const bool mask = op.window_kind == KVC_WINDOW_MASK, key_padding = !op.key_padding.empty();
  json h;
  h["op"] = "attention";
  h["form"] = mask ? "mask" : key_padding ? "key_padding" : op.varlen ? "varlen" : "window";
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
  h["left_padding"] = op.left_padding.empty() || key_padding ? json(nullptr) : json(op.left_padding);
  h["scale"] = op.scale;
  // Where the call comes from, so an adapter can tie its own logs to a failure.
  if (op.varlen) {  // positions are the sequences' own: no padding, queries end where the keys end
    h["query_positions"] = nullptr;
    h["kv_offset"] = nullptr;
    h["left_padding"] = nullptr;
    h["cu_seqlens_q"] = op.cu_seqlens_q;
    h["cu_seqlens_k"] = op.cu_seqlens_k;
    int64_t max_q = 0, max_k = 0;
    for (size_t b = 0; b + 1 < op.cu_seqlens_q.size(); ++b) {
      max_q = std::max(max_q, op.cu_seqlens_q[b + 1] - op.cu_seqlens_q[b]);
      max_k = std::max(max_k, op.cu_seqlens_k[b + 1] - op.cu_seqlens_k[b]);
    }
    h["max_seqlen_q"] = max_q;
    h["max_seqlen_k"] = max_k;
  }
  if (!op.sinks.empty()) h["sinks"] = true;
  h["case"] = op.case_id;
  h["step"] = op.step;
  h["layer"] = op.layer;
  json buffers = json::array();
  buffers.push_back(buffer_entry("query", dtype, shape_of(op, op.query), op.query.bytes.size()));
  buffers.push_back(buffer_entry("key", dtype, shape_of(op, op.keys), op.keys.bytes.size()));
  buffers.push_back(buffer_entry("value", dtype, shape_of(op, op.values), op.values.bytes.size()));
  if (mask)
    buffers.push_back(buffer_entry("mask", "uint8", {op.query.shape[0], op.query.shape[2], op.keys.shape[2]}, op.mask.size()));
  if (key_padding)
    buffers.push_back(buffer_entry("key_padding_mask", "uint8", {op.query.shape[0], op.keys.shape[2]}, op.key_padding.size()));
  if (!op.sinks.empty())
    buffers.push_back(buffer_entry("sinks", "float32", {static_cast<int64_t>(op.sinks.size())}, op.sinks.size() * sizeof(float)));
  h["buffers"] = buffers;
  std::string msg = frame(h);
  auto add = [&](const std::vector<uint8_t>& b) { msg.append(reinterpret_cast<const char*>(b.data()), b.size()); };
  add(op.query.bytes);
  add(op.keys.bytes);
  add(op.values.bytes);
  if (mask) add(op.mask);
  if (key_padding) add(op.key_padding);
  if (!op.sinks.empty())  // little-endian float32, as every buffer of the protocol
    msg.append(reinterpret_cast<const char*>(op.sinks.data()), op.sinks.size() * sizeof(float));
  return msg;
}

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
  const std::vector<int64_t> shape = shape_of(op, op.query);
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

PluginRun execute_command(const std::string& command, const std::vector<Op>& ops, double timeout_s) {
  PluginRun t;
  auto& slot = workers()[command];
  if (!slot) slot = std::make_unique<Worker>(command);
  Worker& w = *slot;
  if (!w.running() && !w.start({{"op", "hello"}, {"protocol", kProtocolVersion}}, kStartupTimeoutS, t.end, t.detail)) return t;
  t.name = w.hello_reply().value("name", "");
  t.description = w.hello_reply().value("description", "");
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
  Target t{
      command, [command](const std::vector<Op>& ops, double timeout_s) { return execute_command(command, ops, timeout_s); }, {}};
  t.layouts = [command] {
    std::vector<std::string> out;
    const auto it = workers().find(command);
    if (it == workers().end() || !it->second) return out;
    const json declared = it->second->hello_reply().value("layouts", json::array());
    if (declared.is_array())
      for (const json& l : declared)
        if (l.is_string()) out.push_back(l.get<std::string>());
    return out;
  };
  return t;
}

void stop_worker(const std::string& command) { workers().erase(command); }

void stop_workers() { workers().clear(); }

}  // namespace kvc::plugin
