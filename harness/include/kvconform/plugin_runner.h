// Runs a script of plugin calls (plugin_abi.h) in a forked child process, with guard bytes around
// every output buffer, and brings the results back over a pipe. A plugin that crashes, aborts, exits
// or hangs ends its script with the signal or the timeout named; the caller goes on. No LibTorch
// here: the child only loads the plugin and copies bytes (a forked LibTorch is not safe to use).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kvconform/plugin_abi.h"

namespace kvc::plugin {

// A contiguous row-major [batch, heads, seq, head_dim] buffer.
struct Buffer {
  kvc_dtype dtype = KVC_FLOAT32;
  int64_t shape[4] = {0, 0, 0, 0};
  std::vector<uint8_t> bytes;
};
size_t element_size(kvc_dtype d);

struct Op {
  enum Kind { Create, MaskSizes, Update, Read, Reset, Attention } kind = Create;
  kvc_cache_config config{};  // Create
  int64_t q = 0;              // MaskSizes: query_length
  Buffer keys, values;        // Update: new tokens; Attention: the K/V
  int64_t out_rows = 0;       // Update, Read: rows the host allocates for the output
  // Attention
  Buffer query;
  std::vector<int64_t> query_positions;
  int64_t kv_offset = 0;
  kvc_window_kind window_kind = KVC_WINDOW_FULL;
  int64_t window_left = 0, chunk_size = 0;
  std::vector<int64_t> left_padding;  // empty: none
  std::vector<uint8_t> mask;          // KVC_WINDOW_MASK: [batch, q, kv]
  double scale = 1.0;
  // Where the call comes from (the subprocess protocol's "case", "step", "layer"; docs/plugins.md):
  // the case's registry id, the step (from 0) and the layer index.
  std::string case_id;
  int64_t step = -1, layer = 0;
  // The optional "key_padding" form of the subprocess protocol (docs/plugins.md, "Optional
  // layouts"): [batch, kv] 1 = a real key, in place of left_padding. Empty: not that form.
  std::vector<uint8_t> key_padding;
  // The optional "varlen" form (docs/plugins.md, "Optional layouts"): query, keys and values packed
  // [total, heads, D] (shape[3] unused) without the padding, sequence b's rows in
  // [cu_seqlens_q[b], cu_seqlens_q[b + 1]); queries and keys aligned at their ends (bottom-right).
  bool varlen = false;
  std::vector<int64_t> cu_seqlens_q, cu_seqlens_k;
  // The optional "sinks" layout (docs/plugins.md, "Optional layouts"): one logit per query head
  // that joins each row's softmax without a value (gpt-oss), sent as a float32 [heads] buffer with
  // the window form. Empty: none.
  std::vector<float> sinks;
};

struct OpResult {
  int status = KVC_OK;
  std::string error;                // the plugin's message when status != KVC_OK
  int64_t a = 0, b = 0;             // MaskSizes: kv_length, kv_offset; Update, Read: rows
  std::vector<uint8_t> out1, out2;  // Update, Read: keys, values; Attention: out (poisoned with 0xFF first)
  std::string guard;                // non-empty when a write landed outside an output buffer
};

// What one plugin run in its child process returned and how it ended (a generated sequence of
// commands is kvcgen::Trace; this is not one).
struct PluginRun {
  enum class End { Completed, LoadFailed, Crashed, TimedOut, Exited };
  End end = End::Completed;
  std::string detail;  // "SIGSEGV (Segmentation fault)", "timed out after 2 s", the dlopen error, ...
  std::string name, description;
  bool has_attention = false, has_cache = false;
  std::vector<std::string> layouts;  // the optional layouts the plugin's table lists (kvc_plugin_api::layouts)
  std::vector<OpResult> results;     // one per op that returned, in order
  bool ok() const { return end == End::Completed; }
};

// Loads `path` in a child, runs `ops` in order (a cache op before Create fails with KVC_ERR_INVALID;
// ops go on after a failed call), destroys the cache and reports. With no ops it only probes the
// plugin (its name and what it exports).
PluginRun execute(const std::string& path, const std::vector<Op>& ops, double timeout_s);

const char* to_string(PluginRun::End e);

// Decodes the records the child wrote to the pipe into `t` (execute's second half). The bytes come
// from the plugin's process, which may have scribbled over them: a truncated or corrupt stream ends
// the run as Exited and is never read past its end (fuzzed by fuzz/plugin_wire_fuzz.cpp).
void decode_run(const std::string& data, PluginRun& t);

}  // namespace kvc::plugin
