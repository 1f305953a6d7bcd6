// The plugin checks: the parent process computes every input and expectation with LibTorch and the
// reference; the child (plugin_runner.cpp, LibTorch-free) only calls the plugin.
#include "kvconform/plugin_host.h"

#include <ATen/ATen.h>
#include <rapidcheck.h>
#include <rapidcheck/detail/TestListenerAdapter.h>

#include <cstring>
#include <memory>
#include <sstream>

#include "kvconform/backends.h"
#include "kvconform/cases.h"
#include "kvconform/inputs.h"
#include "kvconform/masks.h"
#include "kvconform/oracle.h"
#include "kvconform/plugin_runner.h"
#include "kvconform/positions.h"
#include "kvconform/reference.h"
#include "kvconform/scenario.h"
#include "kvconform/step_patterns.h"
#include "kvconform/tensors.h"

namespace kvc::plugin {

namespace {

using report::CaseResult;
using report::Status;

// One step sequence on one layer configuration.
struct Sequence {
  StepPattern p;
  CacheKind cache = CacheKind::Static;
  DType dtype = DType::Float32;
  std::string describe() const {
    std::ostringstream os;
    os << p.spec(cache).describe() << " B=" << p.batch << " H=" << p.heads << " Hkv=" << p.kv_heads << " D=" << p.head_dim
       << " " << to_string(dtype);
    if (p.left_padding) {
      os << " left_padding=[";
      for (size_t i = 0; i < p.left_padding->size(); ++i) os << (i ? "," : "") << (*p.left_padding)[i];
      os << "]";
    }
    os << " steps=[";
    for (size_t i = 0; i < p.steps.size(); ++i) os << (i ? "," : "") << p.steps[i];
    os << "] seed=" << p.seed;
    return os.str();
  }
};

void showValue(const Sequence& s, std::ostream& os) { os << s.describe(); }

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
  if (static_cast<int64_t>(bytes.size()) != n * static_cast<int64_t>(c10::elementSize(scalar_type(dtype))))
    return at::Tensor();
  at::Tensor t = at::empty(shape, opts);
  std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
  return t;
}

std::string step_label(size_t index, int64_t q, int64_t seen) {
  std::string what = q == 0 ? "Reset" : seen == 0 ? "Prefill(" + std::to_string(q) + ")"
                                  : q == 1       ? "Decode"
                                                 : "Extend(" + std::to_string(q) + ")";
  if (q != 0 && seen > 0) what += " after " + std::to_string(seen) + " tokens";
  return "step " + std::to_string(index + 1) + " (" + what + ")";
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
  TokenTable(const Sequence& s, int64_t tokens) {
    const StepPattern& p = s.p;
    const int64_t T = std::max<int64_t>(tokens, 1);
    keys = from_values(inputs::block(p.seed, inputs::kKey, 0, p.batch, p.kv_heads, 0, T, p.head_dim),
                       {p.batch, p.kv_heads, T, p.head_dim}, s.dtype);
    values = from_values(inputs::block(p.seed, inputs::kValue, 0, p.batch, p.kv_heads, 0, T, p.head_dim),
                         {p.batch, p.kv_heads, T, p.head_dim}, s.dtype);
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

std::string expected_name(const std::optional<int64_t>& tok) {
  return tok ? std::to_string(*tok) : "an unwritten (zero) row";
}

// First difference between the plugin's rows and the reference's, named by token; empty if equal.
std::string compare_rows(const std::string& what, const OpResult& r, int64_t claimed_rows, const at::Tensor& exp_k,
                         const at::Tensor& exp_v, const positions::Rows& tokens, const Sequence& s, const TokenTable& table,
                         int64_t allocated_rows) {
  const StepPattern& p = s.p;
  const int64_t want = exp_k.size(2);
  if (claimed_rows != want)
    return what + " " + std::to_string(claimed_rows) + " rows, expected " + std::to_string(want);
  const std::vector<int64_t> shape = {p.batch, p.kv_heads, allocated_rows, p.head_dim};
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
std::string ended(const Trace& t) { return std::string(to_string(t.end)) + ": " + t.detail; }

CaseResult new_case(const std::string& name, const Sequence& s, const std::string& plugin, const Target& target) {
  CaseResult r;
  r.suite = "plugin";
  r.name = name;
  r.params = "layer=" + s.p.spec(s.cache).describe() + ",B=" + std::to_string(s.p.batch) + ",H=" + std::to_string(s.p.heads) +
             ",Hkv=" + std::to_string(s.p.kv_heads) + ",D=" + std::to_string(s.p.head_dim);
  r.backend = plugin;
  r.dtype = to_string(s.dtype);
  r.reproduce = target.reproduce;
  r.detail = s.describe();
  return r;
}

// ---------------------------------------------------------------- cache layer

void check_cache_case(const Target& target, const Sequence& s, double timeout_s, CaseResult& out) {
  const StepPattern& p = s.p;
  const LayerSpec spec = p.spec(s.cache);
  struct Expect {
    size_t step;
    int64_t seen, q;
    MaskSizes sizes;
    at::Tensor ret_k, ret_v, st_k, st_v;
    positions::Rows ret_tokens, st_tokens;
  };
  std::vector<Op> ops;
  std::vector<std::pair<size_t, size_t>> op_step;  // op index -> (expectation index, part)
  std::vector<Expect> ex;

  Op create;
  create.kind = Op::Create;
  create.config.cache = s.cache == CacheKind::Static ? KVC_CACHE_STATIC : KVC_CACHE_DYNAMIC;
  create.config.layer_type = p.type == LayerType::Full ? KVC_LAYER_FULL : p.type == LayerType::Sliding ? KVC_LAYER_SLIDING : KVC_LAYER_CHUNKED;
  create.config.window = p.window;
  create.config.max_cache_len = p.max_cache_len;
  create.config.batch = p.batch;
  create.config.kv_heads = p.kv_heads;
  create.config.head_dim = p.head_dim;
  create.config.dtype = abi_dtype(s.dtype);
  ops.push_back(create);

  auto layer = make_layer(spec);
  int64_t seen = 0, most = 0;
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const int64_t q = p.steps[i];
    Expect e{i, seen, q, {}, {}, {}, {}, {}, {}, {}};
    if (q == 0) {
      layer->reset();
      seen = 0;
      Op op;
      op.kind = Op::Reset;
      ops.push_back(op);
      ex.push_back(e);
      continue;
    }
    e.sizes = positions::mask_sizes(spec, seen, q);
    const at::Tensor K = from_values(inputs::block(p.seed, inputs::kKey, 0, p.batch, p.kv_heads, seen, q, p.head_dim),
                                     {p.batch, p.kv_heads, q, p.head_dim}, s.dtype);
    const at::Tensor V = from_values(inputs::block(p.seed, inputs::kValue, 0, p.batch, p.kv_heads, seen, q, p.head_dim),
                                     {p.batch, p.kv_heads, q, p.head_dim}, s.dtype);
    layer->get_mask_sizes(q);
    const KV r = layer->update(K, V);
    e.ret_k = r.keys.clone();  // a static layer returns its live buffer, which later steps overwrite
    e.ret_v = r.values.clone();
    e.ret_tokens = positions::returned_rows(spec, seen, q);
    e.st_tokens = positions::stored_rows(spec, seen + q);
    int64_t kept = 0;
    for (const auto& t : e.st_tokens) kept += t.has_value();
    e.st_k = layer->keys().slice(2, 0, kept).clone();
    e.st_v = layer->values().slice(2, 0, kept).clone();
    e.st_tokens.resize(static_cast<size_t>(kept));
    Op ms;
    ms.kind = Op::MaskSizes;
    ms.q = q;
    Op up;
    up.kind = Op::Update;
    up.keys = to_buffer(K);
    up.values = to_buffer(V);
    up.out_rows = e.sizes.kv_length;
    Op rd;
    rd.kind = Op::Read;
    rd.config = create.config;
    rd.out_rows = kept;
    ops.push_back(ms);
    ops.push_back(up);
    ops.push_back(rd);
    seen += q;
    most = std::max(most, seen);
    ex.push_back(e);
  }
  const TokenTable table(s, most);
  const Trace t = target.run(ops, timeout_s);
  if (t.end == Trace::End::LoadFailed) return fail(out, "cannot load the plugin: " + t.detail);
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
  if (c->status != KVC_OK) return fail(out, "cache_create(" + spec.describe() + ") failed: " + status_str(c->status) + " " + c->error);
  for (const Expect& e : ex) {
    const std::string where = step_label(e.step, e.q, e.seen);
    if (e.q == 0) {
      const OpResult* r = result("cache_reset", where);
      if (!r) return;
      if (r->status != KVC_OK) return fail(out, where + ": cache_reset failed: " + status_str(r->status) + " " + r->error);
      continue;
    }
    const OpResult* ms = result("cache_get_mask_sizes", where);
    if (!ms) return;
    if (ms->status != KVC_OK) return fail(out, where + ": cache_get_mask_sizes failed: " + status_str(ms->status) + " " + ms->error);
    if (ms->a != e.sizes.kv_length || ms->b != e.sizes.kv_offset)
      return fail(out, where + ": get_mask_sizes(" + std::to_string(e.q) + ") = (kv_length " + std::to_string(ms->a) +
                           ", kv_offset " + std::to_string(ms->b) + "), expected (" + std::to_string(e.sizes.kv_length) +
                           ", " + std::to_string(e.sizes.kv_offset) + ")");
    const OpResult* up = result("cache_update", where);
    if (!up) return;
    if (!up->guard.empty()) return fail(out, where + ": cache_update wrote outside its output: " + up->guard);
    if (up->status != KVC_OK) return fail(out, where + ": cache_update failed: " + status_str(up->status) + " " + up->error);
    std::string diff = compare_rows("update returned", *up, up->a, e.ret_k, e.ret_v, e.ret_tokens, s, table, e.sizes.kv_length);
    if (!diff.empty()) return fail(out, where + ": " + diff);
    const OpResult* rd = result("cache_read", where);
    if (!rd) return;
    if (!rd->guard.empty()) return fail(out, where + ": cache_read wrote outside its output: " + rd->guard);
    if (rd->status != KVC_OK) return fail(out, where + ": cache_stored_rows/cache_read failed: " + status_str(rd->status) + " " + rd->error);
    if (rd->b != e.st_k.size(2))
      return fail(out, where + ": cache_stored_rows = " + std::to_string(rd->b) + ", expected " + std::to_string(e.st_k.size(2)));
    diff = compare_rows("stored", *rd, rd->a, e.st_k, e.st_v, e.st_tokens, s, table, e.st_k.size(2));
    if (!diff.empty()) return fail(out, where + ": " + diff);
  }
  if (!t.ok()) return fail(out, "after the last step: " + ended(t));
}

// ---------------------------------------------------------------- attention kernel

void check_kernel_case(const Target& target, const Sequence& s, double timeout_s, CaseResult& out) {
  const StepPattern& p = s.p;
  const LayerSpec spec = p.spec(s.cache);
  struct Expect {
    size_t step;
    int64_t seen, q;
    at::Tensor oracle, reference, sees;
  };
  std::vector<Op> ops;
  std::vector<Expect> ex;
  auto layer = make_layer(spec);
  Oracle oracle(OracleShape{p.batch, p.heads, p.kv_heads, p.head_dim}, p.type, p.window, p.left_padding);
  int64_t seen = 0;
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const int64_t q = p.steps[i];
    if (q == 0) {
      layer->reset();
      oracle.reset();
      seen = 0;
      continue;
    }
    const auto kv = inputs::block(p.seed, inputs::kKey, 0, p.batch, p.kv_heads, seen, q, p.head_dim);
    const auto vv = inputs::block(p.seed, inputs::kValue, 0, p.batch, p.kv_heads, seen, q, p.head_dim);
    const auto qv = inputs::block(p.seed, inputs::kQuery, 0, p.batch, p.heads, seen, q, p.head_dim);
    masks::MaskQuery m;
    m.type = p.type;
    m.window = p.window;
    m.batch = p.batch;
    for (int64_t j = 0; j < q; ++j) m.query_positions.push_back(seen + j);
    m.sizes = layer->get_mask_sizes(q);
    m.left_padding = p.left_padding;
    m.tokens_so_far = seen + q;
    const KV r = layer->update(from_values(kv, {p.batch, p.kv_heads, q, p.head_dim}, s.dtype),
                               from_values(vv, {p.batch, p.kv_heads, q, p.head_dim}, s.dtype));
    oracle.append(kv, vv, q);
    const at::Tensor Q = from_values(qv, {p.batch, p.heads, q, p.head_dim}, s.dtype);
    const at::Tensor mask = masks::boolean_mask(m);
    Expect e{i, seen, q, from_values(oracle.attend(qv, q), {p.batch, p.heads, q, p.head_dim}, DType::Float64),
             backends::math_reference(Q, r.keys, r.values, mask), mask.any(-1, true)};
    Op op;
    op.kind = Op::Attention;
    op.query = to_buffer(Q);
    op.keys = to_buffer(r.keys);
    op.values = to_buffer(r.values);
    op.query_positions = m.query_positions;
    op.kv_offset = m.sizes.kv_offset;
    const backends::KernelWindow w = backends::kernel_window(m);
    op.window_kind = p.type == LayerType::Full ? KVC_WINDOW_FULL : p.type == LayerType::Sliding ? KVC_WINDOW_SLIDING : KVC_WINDOW_CHUNKED;
    op.window_left = w.left;
    op.chunk_size = w.chunk;
    op.left_padding = w.left_padding;
    op.scale = 1.0 / std::sqrt(static_cast<double>(p.head_dim));
    ops.push_back(op);
    op.window_kind = KVC_WINDOW_MASK;
    const at::Tensor m8 = mask.squeeze(1).to(at::kByte).contiguous();  // [B, q, kv]
    op.mask.assign(m8.data_ptr<uint8_t>(), m8.data_ptr<uint8_t>() + m8.numel());
    ops.push_back(op);
    ex.push_back(e);
    seen += q;
  }
  const Trace t = target.run(ops, timeout_s);
  if (t.end == Trace::End::LoadFailed) return fail(out, "cannot load the plugin: " + t.detail);
  size_t at_op = 0;
  double worst = 0, worst_ref = 0;
  bool mask_unsupported = false;
  for (const Expect& e : ex) {
    const std::string where = step_label(e.step, e.q, e.seen);
    for (const char* form : {"window", "explicit mask"}) {
      if (at_op >= t.results.size()) return fail(out, where + ": attention (" + form + ") never returned: " + ended(t));
      const OpResult& r = t.results[at_op++];
      const bool is_mask = form[0] == 'e';
      if (r.status == KVC_ERR_UNSUPPORTED) {
        if (is_mask) {
          mask_unsupported = true;
          continue;
        }
        out.status = Status::Skipped;
        out.message = "the kernel does not support " + spec.describe() + " in " + to_string(s.dtype) + ": " + r.error;
        return;
      }
      if (!r.guard.empty()) return fail(out, where + ": attention (" + form + ") wrote outside its output: " + r.guard);
      if (r.status != KVC_OK) return fail(out, where + ": attention (" + form + ") failed: " + status_str(r.status) + " " + r.error);
      const at::Tensor got = from_bytes(r.out1, {p.batch, p.heads, e.q, p.head_dim}, s.dtype);
      const backends::Verdict v = backends::judge(got, e.reference, e.oracle, e.sees, s.dtype);
      worst = std::max(worst, v.error);
      worst_ref = std::max(worst_ref, v.reference_error);
      if (!v.ok) return fail(out, where + ": attention (" + form + ") " + v.problem);
    }
  }
  if (!t.ok()) return fail(out, "after the last step: " + ended(t));
  std::ostringstream os;
  os << std::scientific;
  os.precision(2);
  os << "\nmax error " << worst << ", same-dtype math reference " << worst_ref;
  if (mask_unsupported) os << "; explicit masks unsupported (KVC_ERR_UNSUPPORTED), not checked";
  out.detail += os.str();
}

// ---------------------------------------------------------------- random campaign

// A random configuration (the property campaign's generator) and a valid step sequence.
rc::Gen<Sequence> gen_sequence() {
  return rc::gen::exec([] {
    const ScenarioConfig c = *gen_config();
    Sequence s;
    s.p.name = "random";
    s.p.type = c.attention;
    s.p.window = c.window;
    s.p.max_cache_len = c.max_cache_len;
    s.p.batch = c.batch;
    s.p.heads = c.heads;
    s.p.kv_heads = c.kv_heads;
    s.p.head_dim = c.head_dim;
    s.p.left_padding = c.left_padding;
    s.p.seed = c.seed;
    s.dtype = c.dtype;
    s.cache = *rc::gen::element(CacheKind::Static, CacheKind::Dynamic);
    const int64_t n_steps = *rc::gen::inRange<int64_t>(1, 12);
    int64_t seen = 0;
    for (int64_t i = 0; i < n_steps; ++i) {
      if (seen == 0) {
        const int64_t n = *rc::gen::inRange<int64_t>(c.max_left_padding() + 1, c.max_tokens + 1);
        s.p.steps.push_back(n);
        seen = n;
        continue;
      }
      const int kind = *rc::gen::inRange(0, 10);
      if (kind < 6 && seen + 1 <= c.max_tokens) {
        s.p.steps.push_back(1);
        seen += 1;
      } else if (kind < 9 && seen + 2 <= c.max_tokens) {
        const int64_t n = *rc::gen::inRange<int64_t>(2, c.max_tokens - seen + 1);
        s.p.steps.push_back(n);
        seen += n;
      } else {
        s.p.steps.push_back(0);
        seen = 0;
      }
    }
    return s;
  });
}

void run_campaign(const Target& target, const std::string& part, const std::string& plugin,
                  const PluginCheckOptions& o, std::vector<CaseResult>& results) {
  CaseResult out;
  out.suite = "plugin";
  out.name = "campaign/" + part;
  out.params = "seed=" + std::to_string(o.seed) + ",iterations=" + std::to_string(o.iterations);
  out.backend = plugin;
  out.dtype = "mixed";
  out.reproduce = target.reproduce + " --seed " + std::to_string(o.seed);
  auto last = std::make_shared<std::string>();
  auto skipped = std::make_shared<int>(0);
  const bool cache = part == "cache";
  const auto property = [=] {
    const Sequence s = *gen_sequence();
    if (positions::upstream_deviation(s.p.spec(s.cache))) {  // nothing a plugin can be held to: not a pass
      ++*skipped;
      return;
    }
    CaseResult r = new_case(part, s, plugin, target);
    if (cache) check_cache_case(target, s, o.timeout_s, r); else check_kernel_case(target, s, o.timeout_s, r);
    if (r.status == Status::Skipped) ++*skipped;
    if (r.status == Status::Fail) {
      *last = r.message + "\n  case: " + s.describe();
      RC_FAIL(*last);
    }
  };
  rc::detail::TestMetadata metadata;
  metadata.id = "plugin_" + part;
  rc::detail::TestParams params;
  params.seed = o.seed;
  params.maxSuccess = o.iterations;
  params.maxSize = o.max_size;
  params.disableShrinking = false;
  rc::detail::TestListenerAdapter quiet;
  const rc::detail::TestResult result = rc::detail::checkProperty(rc::detail::toProperty(property), metadata, params, quiet, {});
  if (result.is<rc::detail::SuccessResult>()) {
    // A random case the plugin answered KVC_ERR_UNSUPPORTED (or that kvconform cannot hold it to) was
    // not checked: counted apart, and a campaign that checked none is a SKIP, never a pass.
    const int total = result.get<rc::detail::SuccessResult>().numSuccess, checked = total - *skipped;
    out.message = std::to_string(checked) + " random cases checked, " + std::to_string(*skipped) + " skipped";
    out.detail = out.message + " (unsupported by the plugin or an upstream deviation)";
    if (checked == 0) out.status = Status::Skipped;
  } else {
    std::ostringstream failure;
    rc::detail::printResultMessage(result, failure);
    out.status = Status::Fail;
    out.message = last->substr(0, last->find('\n')) + " (shrunk)";
    out.detail = failure.str();
  }
  results.push_back(out);
}

}  // namespace

std::vector<report::CaseResult> check_plugin(const std::string& path, const PluginCheckOptions& options) {
  return check_target({path, "kvconform run --plugin " + path,
                       [path](const std::vector<Op>& ops, double timeout_s) { return execute(path, ops, timeout_s); }},
                      options);
}

std::vector<report::CaseResult> check_target(const Target& target, const PluginCheckOptions& options) {
  const std::string& path = target.label;
  std::vector<CaseResult> results;
  const Trace probe = target.run({}, options.timeout_s);
  if (!probe.ok()) {
    CaseResult r;
    r.suite = "plugin";
    r.name = "load";
    r.backend = path.substr(path.find_last_of('/') + 1);
    r.dtype = "mixed";
    fail(r, std::string("cannot load ") + path + ": " + ended(probe));
    results.push_back(r);
    return results;
  }
  const std::string name = probe.name.empty() ? path.substr(path.find_last_of('/') + 1) : probe.name;
  bool isolated_failure = false;  // a crash or hang: the random campaign would only repeat it
  auto note = [&](const CaseResult& r) {
    if (r.status == Status::Fail &&
        (r.message.find("crashed:") != std::string::npos || r.message.find("timed out:") != std::string::npos ||
         r.message.find("exited:") != std::string::npos))
      isolated_failure = true;
    results.push_back(r);
  };
  const std::vector<DType> dtypes = {DType::Float32, DType::Float16, DType::BFloat16, DType::Float64};
  size_t round = 0;
  for (const StepPattern& p : step_patterns())
    for (CacheKind cache : {CacheKind::Static, CacheKind::Dynamic}) {
      if (positions::upstream_deviation(p.spec(cache))) continue;
      if (options.cache && probe.has_cache) {
        Sequence s{p, cache, dtypes[round++ % dtypes.size()]};  // cache copies bytes: one dtype per pattern, all covered
        CaseResult r = new_case("cache/" + p.name + "/" + to_string(cache), s, name, target);
        check_cache_case(target, s, options.timeout_s, r);
        note(r);
      }
      if (options.kernel && probe.has_attention)
        for (DType dt : dtypes) {
          Sequence s{p, cache, dt};
          CaseResult r = new_case("kernel/" + p.name + "/" + to_string(cache), s, name, target);
          check_kernel_case(target, s, options.timeout_s, r);
          note(r);
        }
    }
  if (!options.cases_dir.empty())
    for (const std::string& file : cases::list_case_files(options.cases_dir)) {
      const cases::Case c = cases::load_case(file);
      // Plugins implement the query_length API: a case limited to cache_position releases is not theirs.
      bool query_length_api = c.profiles.empty();
      for (const std::string& v : c.profiles) {
        try {
          query_length_api |= behaviours_for_release(v).cache_api == CacheApi::QueryLength;
        } catch (const std::invalid_argument&) {  // older than the table: not the query_length API either
        }
      }
      if (!query_length_api) continue;
      std::vector<LayerType> types;
      for (LayerType t : c.layer_types)
        if (std::find(types.begin(), types.end(), t) == types.end()) types.push_back(t);
      for (LayerType t : types) {
        Sequence s;
        s.p = {c.name, t, c.window, c.max_cache_len, c.batch, c.heads, c.kv_heads, c.head_dim, c.left_padding, {},
               c.seed.value_or(0)};
        for (const cases::Step& st : c.steps) s.p.steps.push_back(st.tokens);
        s.cache = c.cache;
        s.dtype = c.dtype;
        if (positions::upstream_deviation(s.p.spec(s.cache))) continue;
        int64_t longest = 0, seen = 0;
        for (int64_t q : s.p.steps) longest = std::max(longest, seen = q == 0 ? 0 : seen + q);
        const int64_t bound = positions::max_total_tokens(s.p.spec(s.cache));
        if (bound >= 0 && longest > bound) continue;  // a case about the overflow error, not a valid sequence
        const std::string suffix = c.name + "/" + to_string(t);
        if (options.cache && probe.has_cache) {
          CaseResult r = new_case("golden-cache/" + suffix, s, name, target);
          check_cache_case(target, s, options.timeout_s, r);
          note(r);
        }
        if (options.kernel && probe.has_attention) {
          CaseResult r = new_case("golden-kernel/" + suffix, s, name, target);
          check_kernel_case(target, s, options.timeout_s, r);
          note(r);
        }
      }
    }
  if (options.iterations > 0 && !isolated_failure) {
    if (options.cache && probe.has_cache) run_campaign(target, "cache", name, options, results);
    if (options.kernel && probe.has_attention) run_campaign(target, "kernel", name, options, results);
  }
  return results;
}

}  // namespace kvc::plugin
