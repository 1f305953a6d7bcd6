// The plugin checks: the parent process computes every input and expectation with LibTorch and the
// reference; the child (plugin_runner.cpp, LibTorch-free) only calls the plugin.
#include "kvconform/plugin_host.h"

#include <ATen/ATen.h>

#include <cstring>
#include <memory>
#include <optional>
#include <sstream>

#include "kvconform/backends.h"
#include "kvconform/cases.h"
#include "kvconform/inputs.h"
#include "kvconform/masks.h"
#include "kvconform/oracle.h"
#include "kvconform/plugin_runner.h"
#include "kvconform/positions.h"
#include "kvconform/regressions.h"
#include "kvconform/reference.h"
#include "kvconform/scenario.h"
#include "kvconform/seeds.h"
#include "kvconform/step_driver.h"
#include "kvconform/tensors.h"
#include "kvconform/tolerance.h"

namespace kvc::plugin {

namespace {

using report::CaseResult;
using report::Status;

kvc_dtype abi_dtype(DType d) {
  switch (d) {
    case DType::Float32: return KVC_FLOAT32;
    case DType::Float16: return KVC_FLOAT16;
    case DType::BFloat16: return KVC_BFLOAT16;
    case DType::Float64: return KVC_FLOAT64;
  }
  return KVC_FLOAT32;
}

Buffer to_buffer(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  Buffer b;
  b.dtype = abi_dtype(dtype_of(c.scalar_type()));
  for (int i = 0; i < 4; ++i) b.shape[i] = c.size(i);
  const auto* p = static_cast<const uint8_t*>(c.data_ptr());
  b.bytes.assign(p, p + c.numel() * c.element_size());
  return b;
}

at::Tensor from_bytes(const std::vector<uint8_t>& bytes, std::vector<int64_t> shape, DType dtype) {
  const auto opts = at::TensorOptions().dtype(scalar_type(dtype));
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  if (static_cast<int64_t>(bytes.size()) != n * static_cast<int64_t>(c10::elementSize(scalar_type(dtype)))) return at::Tensor();
  at::Tensor t = at::empty(shape, opts);
  std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
  return t;
}

std::string status_str(int s) {
  switch (s) {
    case KVC_OK: return "KVC_OK";
    case KVC_ERR_UNSUPPORTED: return "KVC_ERR_UNSUPPORTED";
    case KVC_ERR_INVALID: return "KVC_ERR_INVALID";
    case KVC_ERR_CAPACITY: return "KVC_ERR_CAPACITY";
    case KVC_ERR_INTERNAL: return "KVC_ERR_INTERNAL";
  }
  return "status " + std::to_string(s);
}

// Every token's generated K (or V) rows [B, Hkv, T, D], to name what a wrong row holds.
struct TokenTable {
  at::Tensor keys, values;
  TokenTable(const Scenario& s, int64_t tokens) {
    const int64_t T = std::max<int64_t>(tokens, 1);
    const uint64_t seed = s.seed.value_or(0);
    keys = from_values(inputs::block(seed, inputs::kKey, 0, s.batch, s.kv_heads, 0, T, s.head_dim, s.distribution),
                       {s.batch, s.kv_heads, T, s.head_dim}, s.dtype);
    values = from_values(inputs::block(seed, inputs::kValue, 0, s.batch, s.kv_heads, 0, T, s.head_dim, s.distribution),
                         {s.batch, s.kv_heads, T, s.head_dim}, s.dtype);
  }
  // "token 5", "an unwritten (zero) row", "bytes the plugin never wrote", "values of no token"
  std::string name(const at::Tensor& row, bool keys_table) const {
    const at::Tensor& table = keys_table ? keys : values;
    if (row.isnan().any().item<bool>()) return "bytes the plugin never wrote";
    if (row.eq(0).all().item<bool>()) return "an unwritten (zero) row";
    for (int64_t t = 0; t < table.size(2); ++t)
      if (at::equal(row, table.select(2, t))) return "token " + std::to_string(t);
    return "values of no token";
  }
};

std::string expected_name(const std::optional<int64_t>& tok) { return tok ? std::to_string(*tok) : "an unwritten (zero) row"; }

// First difference between the plugin's rows and the reference's, named by token; empty if equal.
std::string compare_rows(const std::string& what, const OpResult& r, int64_t claimed_rows, const at::Tensor& exp_k,
                         const at::Tensor& exp_v, const positions::Rows& tokens, const Scenario& s, const TokenTable& table,
                         int64_t allocated_rows) {
  const int64_t want = exp_k.size(2);
  if (claimed_rows != want) return what + " " + std::to_string(claimed_rows) + " rows, expected " + std::to_string(want);
  const std::vector<int64_t> shape = {s.batch, s.kv_heads, allocated_rows, s.head_dim};
  const at::Tensor gk = from_bytes(r.out1, shape, s.dtype), gv = from_bytes(r.out2, shape, s.dtype);
  if (!gk.defined() || !gv.defined()) return what + ": the output buffers came back with the wrong size";
  for (int64_t j = 0; j < want; ++j) {
    const at::Tensor k = gk.select(2, j), v = gv.select(2, j);
    const bool k_ok = at::equal(k, exp_k.select(2, j)), v_ok = at::equal(v, exp_v.select(2, j));
    if (k_ok && v_ok) continue;
    const std::string row = what + " row " + std::to_string(j);
    if (!k_ok) return row + " holds " + table.name(k, true) + ", expected " + expected_name(tokens[j]);
    return row + ": keys are right but values hold " + table.name(v, false) + ", expected " + expected_name(tokens[j]);
  }
  return "";
}

void fail(CaseResult& r, const std::string& message, const std::string& detail = "") {
  r.status = Status::Fail;
  r.message = message;
  if (!detail.empty()) r.detail = detail;
}

// The message for an op the plugin never returned from (crash or hang).
std::string ended(const PluginRun& t) { return std::string(to_string(t.end)) + ": " + t.detail; }

kvc_cache_config abi_config(const Scenario& s) {
  const LayerSpec spec = s.layer_spec(0);
  kvc_cache_config c{};
  c.cache = s.cache == CacheKind::Static ? KVC_CACHE_STATIC : KVC_CACHE_DYNAMIC;
  c.layer_type = spec.type == LayerType::Full      ? KVC_LAYER_FULL
                 : spec.type == LayerType::Sliding ? KVC_LAYER_SLIDING
                                                   : KVC_LAYER_CHUNKED;
  c.window = s.window;
  c.max_cache_len = s.max_cache_len;
  c.batch = s.batch;
  c.kv_heads = s.kv_heads;
  c.head_dim = s.head_dim;
  c.dtype = abi_dtype(s.dtype);
  return c;
}

// ---------------------------------------------------------------- cache layer

void check_cache_case(const Target& target, const Scenario& s, double timeout_s, CaseResult& out) {
  const LayerSpec spec = s.layer_spec(0);
  // What the plugin must answer after each step: sizes and rows from the position model
  // (positions.h), K/V bytes from the reference layer.
  struct Expect {
    std::string where;
    bool reset = false;
    int64_t q = 0;
    MaskSizes sizes;
    at::Tensor ret_k, ret_v, st_k, st_v;
    positions::Rows ret_tokens, st_tokens;
  };
  std::vector<Op> ops;
  std::vector<Expect> ex;
  Op create;
  create.kind = Op::Create;
  create.config = abi_config(s);
  ops.push_back(create);
  int64_t most = 0;
  StepDriver driver(s);
  driver.run(
      [&](LayerStep& v) {
        if (v.update_error) std::rethrow_exception(v.update_error);
        Expect e;
        e.where = v.where();
        e.q = v.q;
        e.sizes = positions::mask_sizes(spec, v.seen, v.q);
        e.ret_k = v.returned.keys.clone();  // a static layer returns its live buffer, which later steps overwrite
        e.ret_v = v.returned.values.clone();
        e.ret_tokens = positions::returned_rows(spec, v.seen, v.q);
        e.st_tokens = positions::stored_rows(spec, v.seen + v.q);
        int64_t kept = 0;
        for (const auto& t : e.st_tokens) kept += t.has_value();
        e.st_k = v.cache->keys().slice(2, 0, kept).clone();
        e.st_v = v.cache->values().slice(2, 0, kept).clone();
        e.st_tokens.resize(static_cast<size_t>(kept));
        Op ms;
        ms.kind = Op::MaskSizes;
        ms.q = v.q;
        Op up;
        up.kind = Op::Update;
        up.keys = to_buffer(v.keys);
        up.values = to_buffer(v.values);
        up.out_rows = e.sizes.kv_length;
        Op rd;
        rd.kind = Op::Read;
        rd.config = create.config;
        rd.out_rows = kept;
        ops.push_back(ms);
        ops.push_back(up);
        ops.push_back(rd);
        most = std::max(most, v.seen + v.q);
        ex.push_back(e);
      },
      [&](size_t step) {
        Op op;
        op.kind = Op::Reset;
        ops.push_back(op);
        Expect e;
        e.where = "step " + std::to_string(step) + " (Reset)";
        e.reset = true;
        ex.push_back(e);
      });
  const TokenTable table(s, most);
  out.policy = to_string(Policy::Bitwise);  // rows and K/V bytes
  out.bound = 0;
  const PluginRun t = target.run(ops, timeout_s);
  if (t.end == PluginRun::End::LoadFailed) return fail(out, "cannot load the plugin: " + t.detail);
  // Walk the ops in order; the first problem is the message.
  size_t at_op = 0;
  auto result = [&](const char* call, const std::string& where) -> const OpResult* {
    if (at_op >= t.results.size()) {
      fail(out, where + ": " + call + " never returned: " + ended(t));
      return nullptr;
    }
    return &t.results[at_op++];
  };
  const OpResult* c = result("cache_create", "create " + spec.describe());
  if (!c) return;
  if (c->status == KVC_ERR_UNSUPPORTED) {
    out.status = Status::Skipped;
    out.message = "the plugin does not support " + spec.describe() + " in " + to_string(s.dtype) + ": " + c->error;
    return;
  }
  if (c->status != KVC_OK)
    return fail(out, "cache_create(" + spec.describe() + ") failed: " + status_str(c->status) + " " + c->error);
  for (const Expect& e : ex) {
    const std::string& where = e.where;
    if (e.reset) {
      const OpResult* r = result("cache_reset", where);
      if (!r) return;
      if (r->status != KVC_OK) return fail(out, where + ": cache_reset failed: " + status_str(r->status) + " " + r->error);
      continue;
    }
    const OpResult* ms = result("cache_get_mask_sizes", where);
    if (!ms) return;
    if (ms->status != KVC_OK)
      return fail(out, where + ": cache_get_mask_sizes failed: " + status_str(ms->status) + " " + ms->error);
    if (ms->a != e.sizes.kv_length || ms->b != e.sizes.kv_offset)
      return fail(out, where + ": get_mask_sizes(" + std::to_string(e.q) + ") = (kv_length " + std::to_string(ms->a) +
                           ", kv_offset " + std::to_string(ms->b) + "), expected (" + std::to_string(e.sizes.kv_length) + ", " +
                           std::to_string(e.sizes.kv_offset) + ")");
    const OpResult* up = result("cache_update", where);
    if (!up) return;
    if (!up->guard.empty()) return fail(out, where + ": cache_update wrote outside its output: " + up->guard);
    if (up->status != KVC_OK) return fail(out, where + ": cache_update failed: " + status_str(up->status) + " " + up->error);
    std::string diff = compare_rows("update returned", *up, up->a, e.ret_k, e.ret_v, e.ret_tokens, s, table, e.sizes.kv_length);
    if (!diff.empty()) return fail(out, where + ": " + diff);
    const OpResult* rd = result("cache_read", where);
    if (!rd) return;
    if (!rd->guard.empty()) return fail(out, where + ": cache_read wrote outside its output: " + rd->guard);
    if (rd->status != KVC_OK)
      return fail(out, where + ": cache_stored_rows/cache_read failed: " + status_str(rd->status) + " " + rd->error);
    if (rd->b != e.st_k.size(2))
      return fail(out, where + ": cache_stored_rows = " + std::to_string(rd->b) + ", expected " + std::to_string(e.st_k.size(2)));
    diff = compare_rows("stored", *rd, rd->a, e.st_k, e.st_v, e.st_tokens, s, table, e.st_k.size(2));
    if (!diff.empty()) return fail(out, where + ": " + diff);
  }
  if (!t.ok()) return fail(out, "after the last step: " + ended(t));
  out.error = 0;  // every row and byte equal
}

// ---------------------------------------------------------------- attention kernel

void check_kernel_case(const Target& target, const Scenario& s, double timeout_s, CaseResult& out) {
  const LayerSpec spec = s.layer_spec(0);
  struct Expect {
    std::string where;
    int64_t q;
    at::Tensor oracle, reference, sees;
    std::vector<int> forms = {0, 1};         // indexes into kForms, in the order the ops were sent
    std::vector<int64_t> varlen_q0, cu_q;    // the varlen form: each row's first real query, the packing
    at::Tensor sink_oracle, sink_reference;  // the sinks form: the step with the sinks' share
  };
  std::vector<Op> ops;
  std::vector<Expect> ex;
  const std::string id = out.id;
  // Optional layouts (docs/plugins.md): the key_padding form where the kernel declared it and the
  // case has left padding to express (sliding and full layers; chunks start at the left padding).
  const std::vector<std::string> declared = target.layouts ? target.layouts() : std::vector<std::string>{};
  const auto declares = [&](const char* layout) { return std::find(declared.begin(), declared.end(), layout) != declared.end(); };
  const bool key_padding_form = declares("key_padding_mask") && spec.type != LayerType::Chunked;
  const bool varlen_form = declares("varlen") && spec.type != LayerType::Chunked;
  const bool sinks_form = declares("sinks");
  DriverOptions options;
  options.oracle = true;
  StepDriver driver(s, options);
  driver.run([&](LayerStep& v) {
    if (v.update_error) std::rethrow_exception(v.update_error);
    if (!v.judged) return;  // a numerics case's fill step: the kernel is called on the steps after it
    const at::Tensor mask = masks::boolean_mask(v.mask);
    ex.push_back({v.where(), v.q, v.oracle_output(), backends::math_reference(v.query, v.returned.keys, v.returned.values, mask),
                  mask.any(-1, true)});
    Op op;
    op.kind = Op::Attention;
    op.query = to_buffer(v.query);
    op.keys = to_buffer(v.returned.keys);
    op.values = to_buffer(v.returned.values);
    op.query_positions = v.mask.query_positions;
    op.kv_offset = v.mask.sizes.kv_offset;
    const backends::KernelWindow w = backends::kernel_window(v.mask);
    op.window_kind = spec.type == LayerType::Full      ? KVC_WINDOW_FULL
                     : spec.type == LayerType::Sliding ? KVC_WINDOW_SLIDING
                                                       : KVC_WINDOW_CHUNKED;
    op.window_left = w.left;
    op.chunk_size = w.chunk;
    op.left_padding = w.left_padding;
    op.scale = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
    op.case_id = id;
    op.step = static_cast<int64_t>(v.step);
    op.layer = static_cast<int64_t>(v.layer);
    ops.push_back(op);
    Op masked = op;
    masked.window_kind = KVC_WINDOW_MASK;
    const at::Tensor m8 = mask.squeeze(1).to(at::kByte).contiguous();  // [B, q, kv]
    masked.mask.assign(m8.data_ptr<uint8_t>(), m8.data_ptr<uint8_t>() + m8.numel());
    ops.push_back(masked);
    if (sinks_form) {
      // The window form with one sink logit per query head, drawn like the case's other tensors from
      // its input seed (seeds.h), per step and head: eighths in [-2, 2], exact in every dtype and of
      // the scores' size, so that a kernel that drops them (or adds them twice, or per kv head)
      // moves each row by far more than the bound.
      Op sunk = op;
      std::vector<double> sinks;
      const uint64_t step_seed = seeds::case_seed(s.seed.value_or(0), static_cast<uint64_t>(v.step));
      for (int64_t h = 0; h < s.heads; ++h)
        sinks.push_back(
            static_cast<double>(static_cast<int64_t>(seeds::case_seed(step_seed, static_cast<uint64_t>(h)) % 33) - 16) / 8.0);
      sunk.sinks.assign(sinks.begin(), sinks.end());
      Expect& e = ex.back();
      e.sink_oracle = v.oracle_output(sinks);
      e.sink_reference = backends::math_reference(v.query, v.returned.keys, v.returned.values, mask,
                                                  at::tensor(sinks, at::TensorOptions().dtype(at::kDouble)));
      ops.push_back(sunk);
      e.forms.push_back(4);
    }
    if (key_padding_form && !w.left_padding.empty()) {
      // The same step with the left padding as a per-key mask: key j is real when its position
      // kv_offset + j is not before the row's left padding.
      Op padded = op;
      const int64_t kv = v.returned.keys.size(2);
      padded.key_padding.resize(static_cast<size_t>(s.batch * kv));
      for (int64_t b = 0; b < s.batch; ++b)
        for (int64_t j = 0; j < kv; ++j)
          padded.key_padding[static_cast<size_t>(b * kv + j)] = op.kv_offset + j >= w.left_padding[static_cast<size_t>(b)];
      ops.push_back(padded);
      ex.back().forms.push_back(2);
    }
    if (varlen_form && !w.left_padding.empty()) {
      // The same step packed without the padding (FlashAttention's varlen convention): row b's real
      // queries (positions from left_padding[b] on) and its real keys up to the last query, each
      // [n, heads, D]; queries and keys of a sequence end at the same position.
      Op packed = op;
      packed.varlen = true;
      packed.left_padding.clear();
      Expect& e = ex.back();
      std::vector<at::Tensor> qs, ks, vs;
      packed.cu_seqlens_q = {0};
      packed.cu_seqlens_k = {0};
      const int64_t kv = v.returned.keys.size(2), last = v.mask.query_positions.back();
      for (int64_t b = 0; b < s.batch; ++b) {
        const int64_t lp = w.left_padding[static_cast<size_t>(b)];
        int64_t q0 = 0;
        while (q0 < v.q && v.mask.query_positions[static_cast<size_t>(q0)] < lp) ++q0;
        const int64_t k0 = std::min(kv, std::max<int64_t>(0, lp - op.kv_offset));
        const int64_t k1 = std::max(k0, std::min(kv, last - op.kv_offset + 1));
        qs.push_back(v.query.select(0, b).slice(1, q0, v.q).transpose(0, 1));
        ks.push_back(v.returned.keys.select(0, b).slice(1, k0, k1).transpose(0, 1));
        vs.push_back(v.returned.values.select(0, b).slice(1, k0, k1).transpose(0, 1));
        e.varlen_q0.push_back(q0);
        packed.cu_seqlens_q.push_back(packed.cu_seqlens_q.back() + (v.q - q0));
        packed.cu_seqlens_k.push_back(packed.cu_seqlens_k.back() + (k1 - k0));
      }
      const auto pack = [](const std::vector<at::Tensor>& parts) {
        const at::Tensor t = at::cat(parts, 0).contiguous();
        Buffer b;
        b.dtype = abi_dtype(dtype_of(t.scalar_type()));
        for (int i = 0; i < 3; ++i) b.shape[i] = t.size(i);
        b.shape[3] = 1;
        const auto* p = static_cast<const uint8_t*>(t.data_ptr());
        b.bytes.assign(p, p + t.numel() * t.element_size());
        return b;
      };
      packed.query = pack(qs);
      packed.keys = pack(ks);
      packed.values = pack(vs);
      e.cu_q = packed.cu_seqlens_q;
      ops.push_back(packed);
      e.forms.push_back(3);
    }
  });
  const PluginRun t = target.run(ops, timeout_s);
  if (t.end == PluginRun::End::LoadFailed) return fail(out, "cannot load the plugin: " + t.detail);
  size_t at_op = 0;
  double worst = 0, worst_ref = 0;
  out.policy = to_string(Policy::SameDtypeReference);
  // Form coverage: the steps judged in each form (window, explicit mask, key padding mask where
  // declared) and the kernel's reason where it answered KVC_ERR_UNSUPPORTED; a form it did not
  // serve is named in the verdict.
  static const char* const kForms[5] = {"window", "explicit mask", "key padding mask", "varlen", "sinks"};
  int checked[5] = {0, 0, 0, 0, 0}, offered[5] = {0, 0, 0, 0, 0};
  std::string unsupported[5];
  const auto any_checked = [&] { return checked[0] + checked[1] + checked[2] + checked[3] + checked[4] > 0; };
  const auto failed = [&](const std::string& message) {
    if (any_checked()) out.error = worst;
    fail(out, message);
  };
  for (const Expect& e : ex) {
    const std::string& where = e.where;
    for (const int f : e.forms) {
      const std::string form = kForms[f];
      if (at_op >= t.results.size()) return failed(where + ": attention (" + form + ") never returned: " + ended(t));
      const OpResult& r = t.results[at_op++];
      ++offered[f];
      if (r.status == KVC_ERR_UNSUPPORTED) {
        if (unsupported[f].empty()) unsupported[f] = r.error.empty() ? "KVC_ERR_UNSUPPORTED" : r.error;
        continue;
      }
      if (!r.guard.empty()) return failed(where + ": attention (" + form + ") wrote outside its output: " + r.guard);
      if (r.status != KVC_OK) return failed(where + ": attention (" + form + ") failed: " + status_str(r.status) + " " + r.error);
      at::Tensor got;
      if (f == 3) {  // unpack [total_q, H, D] into [B, H, q, D]; padding queries (they see no key) zero
        const at::Tensor flat = from_bytes(r.out1, {e.cu_q.back(), s.heads, s.head_dim}, s.dtype);
        got = at::zeros({s.batch, s.heads, e.q, s.head_dim}, at::TensorOptions().dtype(scalar_type(s.dtype)));
        for (int64_t b = 0; flat.defined() && b < s.batch; ++b)
          got.select(0, b)
              .slice(1, e.varlen_q0[static_cast<size_t>(b)], e.q)
              .copy_(flat.slice(0, e.cu_q[static_cast<size_t>(b)], e.cu_q[static_cast<size_t>(b) + 1]).transpose(0, 1));
      } else {
        got = from_bytes(r.out1, {s.batch, s.heads, e.q, s.head_dim}, s.dtype);
      }
      const backends::Verdict v = f == 4 ? backends::judge(got, e.sink_reference, e.sink_oracle, e.sees, s.dtype)
                                         : backends::judge(got, e.reference, e.oracle, e.sees, s.dtype);
      worst = std::max(worst, v.error);
      worst_ref = std::max(worst_ref, v.reference_error);
      out.bound = std::max(out.bound, v.bound);
      ++checked[f];
      if (!v.ok) return failed(where + ": attention (" + form + ") " + v.problem);
    }
  }
  if (!t.ok()) return failed("after the last step: " + ended(t));
  if (!any_checked()) {  // no form served: nothing was checked
    out.status = Status::Skipped;
    out.message = "the kernel does not support " + spec.describe() + " in " + to_string(s.dtype) + ": " +
                  (unsupported[0].empty() ? unsupported[1] : unsupported[0]);
    out.error = -1;
    return;
  }
  out.error = worst;
  std::string coverage;
  for (int f = 0; f < 5; ++f) {
    if (unsupported[f].empty()) continue;
    std::string note =
        checked[f] == 0 && f < 2
            ? std::string(kForms[1 - f]) + " form only: the " + kForms[f] + " form answered unsupported (" + unsupported[f] + ")"
            : std::string("the ") + kForms[f] + " form answered unsupported at " + std::to_string(offered[f] - checked[f]) +
                  " of " + std::to_string(offered[f]) + " steps (" + unsupported[f] + ")";
    coverage += (coverage.empty() ? "" : "; ") + note;
  }
  if (!coverage.empty()) out.message = coverage;
  std::ostringstream os;
  os << std::scientific;
  os.precision(2);
  os << "\nmax error " << worst << ", same-dtype math reference " << worst_ref;
  if (!unsupported[1].empty()) os << "; explicit masks unsupported (KVC_ERR_UNSUPPORTED), not checked";
  os << "; forms checked: window " << checked[0] << " of " << ex.size() << " steps, mask " << checked[1] << " of " << ex.size()
     << " steps";
  if (offered[2]) os << ", key padding mask " << checked[2] << " of " << offered[2] << " steps";
  if (offered[3]) os << ", varlen " << checked[3] << " of " << offered[3] << " steps";
  if (offered[4]) os << ", sinks " << checked[4] << " of " << offered[4] << " steps";
  out.detail += os.str();
}

}  // namespace

std::string describe(const Scenario& s) {
  std::ostringstream os;
  os << s.layer_spec(0).describe() << " B=" << s.batch << " H=" << s.heads << " Hkv=" << s.kv_heads << " D=" << s.head_dim << " "
     << to_string(s.dtype);
  if (s.distribution != inputs::Distribution::Mix64) os << " inputs=" << inputs::to_string(s.distribution);
  if (s.left_padding) {
    os << " left_padding=[";
    for (size_t i = 0; i < s.left_padding->size(); ++i) os << (i ? "," : "") << (*s.left_padding)[i];
    os << "]";
  }
  os << " steps=[";
  for (size_t i = 0; i < s.steps.size(); ++i) os << (i ? "," : "") << s.steps[i].tokens << (s.steps[i].judged ? "" : " (fill)");
  os << "] seed=" << s.seed.value_or(0);
  return os.str();
}

// A plugin case's parameters (its report line's "(...)"), also on the SKIP of a run that gave up.
std::string scenario_params(const Scenario& s) {
  return "layer=" + s.layer_spec(0).describe() + ",B=" + std::to_string(s.batch) + ",H=" + std::to_string(s.heads) +
         ",Hkv=" + std::to_string(s.kv_heads) + ",D=" + std::to_string(s.head_dim);
}

CaseResult check_scenario(const Target& target, const std::string& name, const Scenario& s, Part part, const std::string& plugin,
                          double timeout_s) {
  CaseResult r = report::named(report::PluginKey{plugin, name, to_string(s.dtype)});
  r.params = scenario_params(s);
  r.detail = describe(s);
  if (part == Part::Cache) check_cache_case(target, s, timeout_s, r);
  else check_kernel_case(target, s, timeout_s, r);
  return r;
}

bool worker_fault(const CaseResult& r) {
  if (r.status != Status::Fail) return false;
  for (const char* how : {"crashed:", "timed out:", "exited:", "cannot load the plugin:"})
    if (r.message.find(how) != std::string::npos) return true;
  return false;
}

std::string gave_up_message(int failures) {
  return "gave up after " + std::to_string(failures) + " worker failure" + (failures == 1 ? "" : "s") +
         " (--max-worker-failures)";
}

bool checkable(const Scenario& s) {
  if (positions::upstream_deviation(s.layer_spec(0))) return false;
  // A crop or past-recording step is a call on transformers' layer API, which the plugin ABI does not
  // have (golden replay judges those steps); a reset is the ABI's own.
  for (const Step& st : s.steps)
    if (st.call && !st.call->resets()) return false;
  int64_t longest = 0, seen = 0;
  for (const Step& st : s.steps) longest = std::max(longest, seen = st.is_reset() ? 0 : seen + st.tokens);
  const int64_t bound = positions::max_total_tokens(s.layer_spec(0));
  return bound < 0 || longest <= bound;  // past it: a case about the overflow error, not a valid sequence
}

Target plugin_target(const std::string& path) {
  // The layouts the plugin's table lists, from the first run's hello (check_fixed's probe), or from
  // a probe of their own when asked before any run.
  auto declared = std::make_shared<std::optional<std::vector<std::string>>>();
  return {path,
          [path, declared](const std::vector<Op>& ops, double timeout_s) {
            PluginRun t = execute(path, ops, timeout_s);
            if (!*declared && t.ok()) *declared = t.layouts;
            return t;
          },
          [path, declared] {
            if (!*declared) *declared = execute(path, {}, 30).layouts;
            return **declared;
          }};
}

FixedChecks check_fixed(const Target& target, const PluginCheckOptions& options) {
  const std::string& path = target.label;
  FixedChecks out;
  const PluginRun probe = target.run({}, options.timeout_s);
  if (!probe.ok()) {
    CaseResult r = report::named(report::PluginKey{path.substr(path.find_last_of('/') + 1), "load", "mixed"});
    fail(r, std::string("cannot load ") + path + ": " + ended(probe));
    out.results.push_back(r);
    return out;
  }
  out.loaded = true;
  out.name = probe.name.empty() ? path.substr(path.find_last_of('/') + 1) : probe.name;
  out.has_cache = options.cache && probe.has_cache;
  out.has_attention = options.kernel && probe.has_attention;
  auto note = [&](const CaseResult& r) {
    if (worker_fault(r)) {
      if (!out.isolated_failure) out.first_fault = r.id;
      out.isolated_failure = true;
      ++out.worker_failures;
    }
    out.results.push_back(r);
  };
  // One case, unless a selector or the registry filter leaves it out or only its id is wanted.
  auto run = [&](const std::string& name, const Scenario& s, Part part) {
    if (options.dtype && s.dtype != *options.dtype) return;
    if (options.attention && s.layer_spec(0).type != *options.attention) return;
    CaseResult r = report::named(report::PluginKey{out.name, name, to_string(s.dtype)});
    if (options.select && !options.select(r.id)) return;
    if (options.list_only) return out.results.push_back(r);
    if (options.max_worker_failures > 0 && out.worker_failures >= options.max_worker_failures) {
      r.status = Status::Skipped;
      r.params = scenario_params(s);
      r.message = gave_up_message(out.worker_failures);
      return out.results.push_back(r);
    }
    note(check_scenario(target, name, s, part, out.name, options.timeout_s));
  };
  const std::vector<DType> dtypes = {DType::Float32, DType::Float16, DType::BFloat16, DType::Float64};
  size_t round = 0;
  for (const Scenario& builtin : builtin_scenarios(CacheKind::Static))
    for (CacheKind cache : {CacheKind::Static, CacheKind::Dynamic}) {
      Scenario s = builtin;
      s.cache = cache;
      if (positions::upstream_deviation(s.layer_spec(0))) continue;
      const std::string suffix = s.name + "/" + to_string(cache);
      if (out.has_cache) {
        s.dtype = dtypes[round++ % dtypes.size()];  // cache copies bytes: one dtype per scenario, all covered
        run("cache/" + suffix, s, Part::Cache);
      }
      if (out.has_attention)
        for (DType dt : dtypes) {
          s.dtype = dt;
          run("kernel/" + suffix, s, Part::Kernel);
        }
    }
  // The numerics cases (kernel only): thousands of keys, normal and large-magnitude inputs, head_dim
  // 256, every dtype (docs/plugins.md, "Sequences checked").
  if (out.has_attention)
    for (Scenario s : numeric_scenarios(CacheKind::Static))  // the static layer: these judge the kernel
      for (DType dt : dtypes) {
        s.dtype = dt;
        run("kernel/" + s.name + "/static", s, Part::Kernel);
      }
  // A case file's step sequences on every layer type it lists, as cases `<cache>/<name>/<layer type>`.
  auto replay_case = [&](const Scenario& c, const std::string& cache_prefix, const std::string& kernel_prefix,
                         const std::string& name) {
    // Plugins implement the query_length API: a case limited to cache_position releases is not theirs.
    bool query_length_api = c.releases.empty();
    for (const std::string& v : c.releases) {
      try {
        query_length_api |= behaviours_for_release(v).cache_api == CacheApi::QueryLength;
      } catch (const std::invalid_argument&) {  // older than the table: not the query_length API either
      }
    }
    if (!query_length_api) return;
    std::vector<LayerType> types;
    for (LayerType t : c.layer_types)
      if (std::find(types.begin(), types.end(), t) == types.end()) types.push_back(t);
    for (LayerType t : types) {
      // The case's configuration, steps and generator seed on one layer of this type; explicit
      // inputs are not replayed (the plugin is fed the generator's).
      Scenario s = c;
      s.layer_types = {t};
      s.seed = c.seed.value_or(0);
      s.explicit_q.clear(), s.explicit_k.clear(), s.explicit_v.clear();
      for (Step& st : s.steps) st.cache_position.reset();
      if (!checkable(s)) continue;
      const std::string suffix = name + "/" + to_string(t);
      if (out.has_cache) run(cache_prefix + suffix, s, Part::Cache);
      if (out.has_attention) run(kernel_prefix + suffix, s, Part::Kernel);
    }
  };
  if (!options.cases_dir.empty())
    for (const std::string& file : cases::list_case_files(options.cases_dir)) {
      const Scenario c = cases::load_case(file);
      replay_case(c, "golden-cache/", "golden-kernel/", c.name);
    }
  // The found cases of this plugin (regressions/plugin/<name>/) and of its family (a folder whose name
  // and an underscore begin the plugin's: kvc_ggml/ for kvc_ggml_flash). A file that does not load is
  // that entry's FAIL naming the file and field; the run goes on.
  if (!options.regressions_root.empty())
    for (const regressions::Entry& e : regressions::load(options.regressions_root, "plugin")) {
      const std::string folder = regressions::target_name(out.name);
      if (e.target != folder && folder.rfind(e.target + "_", 0) != 0) continue;
      const std::string name = e.target + "/" + e.hash;
      try {
        if (!e.error.empty()) throw cases::CaseError(e.path, "", e.error);
        replay_case(cases::parse_case(e.text, e.path), "regressions/cache/", "regressions/kernel/", name);
      } catch (const std::exception& error) {
        CaseResult r = report::named(report::PluginKey{out.name, "regressions/" + name, "mixed"});
        if (options.select && !options.select(r.id)) continue;
        if (options.list_only) {
          out.results.push_back(r);
          continue;
        }
        fail(r, std::string("the saved case does not load: ") + error.what());
        out.results.push_back(r);
      }
    }
  return out;
}

}  // namespace kvc::plugin
