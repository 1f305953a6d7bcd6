#include "kvconform/golden.h"

#include "golden_record.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/Version.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>
#if __has_include(<torch/headeronly/version.h>)
#include <torch/headeronly/version.h>
#else
#include <torch/version.h>  // LibTorch before 2.9
#endif

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cmath>
#include <iomanip>
#include <sstream>
#include <utility>

#include "kvconform/attention.h"
#include "kvconform/fastpath.h"
#include "kvconform/masks.h"
#include "kvconform/positions.h"
#include "kvconform/reference.h"
#include "kvconform/step_driver.h"
#include "kvconform/tensors.h"
#include "kvconform/tolerance.h"

namespace kvc::golden {

using nlohmann::json;

const json& cpu_kernels() {
  static const json record = [] {
    json r = json::object();
    for (const auto& [name, value] : cpu_pin()) {
      const char* now = std::getenv(name);
      r[name] = now ? json(now) : json(nullptr);
    }
    r["aten_cpu_capability"] = at::get_cpu_capability();
    return r;
  }();
  return record;
}

namespace {

// Exact little-endian bytes of a tensor, contiguous, as the dumper hashes and hex-encodes them.
std::string bytes_of(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.numel() * c.element_size());
}

std::string hex_of(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

json rows_json(const positions::Rows& tokens) {
  json rows = json::array();
  for (const auto& t : tokens) rows.push_back(t ? json(*t) : json(nullptr));
  return rows;
}

// sha256 of a tensor's exact bytes, hashed in place (the cache's buffers are already contiguous).
std::string sha256_of(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  return cases::sha256_hex(c.data_ptr(), static_cast<size_t>(c.numel()) * c.element_size());
}

detail::KvRecord kv_record(const at::Tensor& k, const at::Tensor& v, positions::Rows rows) {
  return {k.sizes().vec(), std::move(rows), sha256_of(k), sha256_of(v)};
}

json kv_json(const detail::KvRecord& r) {
  return {{"shape", r.shape}, {"rows", rows_json(r.rows)}, {"k_sha256", r.k_sha256}, {"v_sha256", r.v_sha256}};
}

// The output's bytes without a copy into transformers' [B, q, H, D] where the kernel's own layout
// serves: eager's matmul leaves [B, H, q, D] contiguous, SDPA's flash kernel [B, q, H, D].
detail::Output output_of(const at::Tensor& out) {  // out: [B, H, q, D]
  detail::Output o;
  o.dtype = to_string(dtype_of(out.scalar_type()));
  o.shape = {out.size(0), out.size(2), out.size(1), out.size(3)};
  o.element_size = out.element_size();
  o.heads_first = out.is_contiguous();
  o.bytes = bytes_of(o.heads_first ? out : out.transpose(1, 2));
  return o;
}

json output_json(const std::optional<detail::Output>& o) {
  if (!o) return nullptr;
  std::string bytes;
  bytes.reserve(o->bytes.size());
  detail::fixture_order(*o, [&](const char* p, size_t n) { bytes.append(p, n); });
  return {{"dtype", o->dtype}, {"shape", o->shape}, {"hex", hex_of(bytes)}};
}

// Python's repr(float): the shortest digits that round-trip, scientific below 1e-4 and from 1e16 on,
// a trailing ".0" on integral values ("-65504.0", "-3.4028234663852886e+38").
std::string python_repr(double v) {
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  const std::string sci(buf, res.ptr);
  const size_t e = sci.find('e');
  const int exp = std::stoi(sci.substr(e + 1));
  std::string mant = sci.substr(0, e), sign;
  if (mant[0] == '-') sign = "-", mant = mant.substr(1);
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  if (exp < -4 || exp >= 16) {
    char tail[16];
    std::snprintf(tail, sizeof tail, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    return sign + digits.substr(0, 1) + (digits.size() > 1 ? "." + digits.substr(1) : "") + tail;
  }
  if (exp < 0) return sign + "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  const size_t whole = static_cast<size_t>(exp) + 1;
  if (digits.size() <= whole) return sign + digits + std::string(whole - digits.size(), '0') + ".0";
  return sign + digits.substr(0, whole) + "." + digits.substr(whole);
}

// finfo(dtype).min as Python prints it, the additive mask's masked value.
std::string masked_value(DType dtype) {
  static const std::string values[] = {python_repr(masks::additive_mask(at::zeros({}, at::kBool), at::kFloat).item<double>()),
                                       python_repr(masks::additive_mask(at::zeros({}, at::kBool), at::kHalf).item<double>()),
                                       python_repr(masks::additive_mask(at::zeros({}, at::kBool), at::kBFloat16).item<double>()),
                                       python_repr(masks::additive_mask(at::zeros({}, at::kBool), at::kDouble).item<double>())};
  return values[static_cast<int>(dtype)];
}

// What Python would have raised: PyTorch maps c10::IndexError to IndexError, c10::ValueError to
// ValueError, c10::TypeError to TypeError and any other c10::Error to RuntimeError, with the same text
// (LibTorch is the same library under both), so those messages are compared exactly. kvconform's own
// checks name the Python type they stand for; their wording is kvconform's, so only the type counts.
json error_record(const std::string& phase, const std::exception& e) {
  std::string type = "RuntimeError", message;
  bool exact = false;
  // c10::Error::what() symbolizes a C++ backtrace (dladdr over every frame): a fifth of a replay's
  // time when asked for every raise, and never part of the message Python shows.
  if (const auto* c = dynamic_cast<const c10::Error*>(&e)) {
    message = c->what_without_backtrace();
    exact = true;
    if (dynamic_cast<const c10::IndexError*>(&e)) type = "IndexError";
    else if (dynamic_cast<const c10::ValueError*>(&e)) type = "ValueError";
    else if (dynamic_cast<const c10::TypeError*>(&e)) type = "TypeError";
  } else if (const auto* p = dynamic_cast<const PythonError*>(&e)) {
    message = e.what();
    type = p->type();
  } else {
    message = e.what();
    if (dynamic_cast<const std::out_of_range*>(&e)) type = "IndexError";
    else if (dynamic_cast<const std::invalid_argument*>(&e)) type = "ValueError";
  }
  if (message.size() > 600) message = message.substr(0, 600) + "...";  // golden/dump.py's MAX_MESSAGE
  return {{"phase", phase}, {"type", type}, {"message", message}, {"message_exact", exact}};
}

// The class transformers instantiates for a layer and what dump.py records about it.
json layer_record_of(size_t index, const LayerSpec& spec, const Scenario& c, const Behaviours& behaviours) {
  const bool is_static = spec.cache == CacheKind::Static;
  std::string cls = is_static ? (spec.is_sliding() ? "StaticSlidingWindowLayer" : "StaticLayer")
                              : (spec.is_sliding() ? "DynamicSlidingWindowLayer" : "DynamicLayer");
  if (is_static && spec.is_sliding() && behaviours.sliding_layer == SlidingLayer::PreMerge)
    cls = spec.type == LayerType::Chunked ? "ChunkedSlidingLayer" : "SlidingWindowLayer";
  return {{"index", index},
          {"type", to_string(spec.type)},
          {"class", cls},
          {"window", spec.is_sliding() ? json(spec.window) : json(nullptr)},
          {"max_cache_len", c.max_cache_len > 0 ? json(c.max_cache_len) : json(nullptr)},
          {"capacity", is_static ? json(positions::capacity(spec)) : json(nullptr)},
          {"is_compileable", is_static}};
}

// The 2D attention_mask as transformers sees it at this step: leading zeros, then ones.
json attention_mask_2d(const Scenario& c, int64_t end) {
  if (!c.left_padding) return nullptr;
  json rows = json::array();
  for (int64_t lp : *c.left_padding) rows.push_back(detail::attention_mask_row(lp, end));
  return rows;
}

json mask_function_record(const Scenario& c, LayerType type, int64_t end) {
  if (type == LayerType::Full) return {{"kind", "causal"}};
  if (type == LayerType::Sliding) return {{"kind", "sliding_window_causal"}, {"window", c.window}};
  json pads = json::array();
  for (int64_t b = 0; b < c.batch; ++b) pads.push_back(c.left_padding ? std::min((*c.left_padding)[b], end) : 0);
  return {{"kind", "chunked_causal"}, {"chunk_size", c.window}, {"left_padding_tokens", pads}};
}

// The masks of one layer-step from the fast path (fastpath.h: masking_utils' mask functions on
// positions, held to masks.cpp by its tests): the boolean mask as bytes [B][q][kv], the SDPA skip
// decision, and the tensors attention needs, made from those bytes.
struct StepMasks {
  std::vector<uint8_t> boolean;
  std::string additive_bytes;
  bool skipped = false;
  at::Tensor boolean_tensor, additive_tensor;
};

StepMasks step_masks(const LayerStep& v, const Scenario& c, const Behaviours& behaviours, Mutation mutation) {
  StepMasks out;
  // The sizes are what the layer under test answered, as transformers' mask builders use them.
  MaskRequest m =
      mask_request(v.driven->spec, behaviours, c.batch, c.left_padding, v.query_start, v.q, v.cache_position, v.sizes);
  m.seen_after = v.seen + v.q;
  fast::boolean_mask(m, out.boolean, mutation);
  out.skipped = fast::skips(m);
  fast::additive_mask_bytes(out.boolean, c.dtype, out.additive_bytes);
  const std::vector<int64_t> shape = {c.batch, 1, v.q, v.sizes.kv_length};
  out.boolean_tensor = at::empty(shape, at::TensorOptions().dtype(at::kBool));  // bool storage: one byte, 0 or 1
  std::memcpy(out.boolean_tensor.data_ptr(), out.boolean.data(), out.boolean.size());
  out.additive_tensor = at::empty(shape, at::TensorOptions().dtype(scalar_type(c.dtype)));
  std::memcpy(out.additive_tensor.data_ptr(), out.additive_bytes.data(), out.additive_bytes.size());
  return out;
}

json mask_rows(const std::vector<uint8_t>& mask, int64_t B, int64_t q,
               int64_t k) {  // per batch row, one '0'/'1' string per query
  json out = json::array();
  for (int64_t b = 0; b < B; ++b) {
    json rows = json::array();
    for (int64_t i = 0; i < q; ++i) {
      std::string s(static_cast<size_t>(k), '0');
      for (int64_t j = 0; j < k; ++j) s[j] = mask[(b * q + i) * k + j] ? '1' : '0';
      rows.push_back(std::move(s));
    }
    out.push_back(std::move(rows));
  }
  return out;
}

// One layer's step as golden/dump.py records it: mask sizes, masks, errors, rows and attention.
detail::LayerValues layer_values(const LayerStep& v, const Scenario& c, const Behaviours& behaviours, Mutation mutation) {
  detail::LayerValues out;
  const MaskRequest& m = v.mask;
  out.seq_length_before = v.seq_length_before;
  out.kv_length = v.sizes.kv_length;
  out.kv_offset = v.sizes.kv_offset;
  out.mask_function = mask_function_record(c, m.type, v.seen + v.q);
  out.q_positions = m.query_positions;
  out.allow_skip = m.allow_skip;
  StepMasks sm = step_masks(v, c, behaviours, mutation);
  out.batch = c.batch;
  out.q = v.q;
  out.sdpa_skipped = sm.skipped;
  out.eager_mask = {to_string(c.dtype), cases::sha256_hex(sm.additive_bytes), masked_value(c.dtype),
                    sm.additive_tensor.sizes().vec()};
  out.mask = std::move(sm.boolean);  // the tensors made from it own their own copies
  if (v.update_error) {
    try {
      std::rethrow_exception(v.update_error);
    } catch (const std::exception& e) {
      out.errors.push_back(error_record("update", e));
    }
    return out;
  }
  out.updated = true;
  out.seq_length_after = v.seq_length_after;
  out.returned = kv_record(v.returned.keys, v.returned.values, v.returned_rows);
  // A static layer returns its whole buffer: the same bytes, hashed once.
  auto same_bytes = [](const at::Tensor& a, const at::Tensor& b) {
    return a.data_ptr() == b.data_ptr() && a.sizes() == b.sizes() && a.strides() == b.strides() &&
           a.scalar_type() == b.scalar_type();
  };
  if (same_bytes(v.cache->keys(), v.returned.keys) && same_bytes(v.cache->values(), v.returned.values))
    out.stored = {out.returned.shape, v.stored_rows, out.returned.k_sha256, out.returned.v_sha256};
  else out.stored = kv_record(v.cache->keys(), v.cache->values(), v.stored_rows);
  try {
    out.eager = output_of(attention::eager(v.query, v.returned.keys, v.returned.values, sm.additive_tensor));
  } catch (const std::exception& e) {
    out.errors.push_back(error_record("attention_eager", e));
  }
  try {
    out.sdpa =
        output_of(attention::sdpa(v.query, v.returned.keys, v.returned.values,
                                  sm.skipped ? std::nullopt : std::optional<at::Tensor>(sm.boolean_tensor), behaviours.sdpa_gqa));
  } catch (const std::exception& e) {
    out.errors.push_back(error_record("attention_sdpa", e));
  }
  return out;
}

// golden/dump.py runs torch with one intra-op thread (the manifest's torch_num_threads), and the CPU
// SDPA kernel's summation order depends on the thread count: replaying with the same count is what
// makes attention outputs bitwise comparable. Restored afterwards for the suites that follow.
// Inference mode: nothing here is differentiated, and leaving autograd's dispatch keys out takes a
// sixth off a replay of tiny tensors (the kernels, and so the bytes, are the same).
struct ReplayMode {
  c10::InferenceMode no_autograd;
  int saved = at::get_num_threads();
  ReplayMode() { at::set_num_threads(1); }
  ~ReplayMode() { at::set_num_threads(saved); }
};

DriverOptions replay_options(const Scenario& c, const Behaviours& behaviours, Mutation mutation) {
  DriverOptions options;
  options.behaviours = behaviours;
  options.mutation = mutation;
  options.track_rows = true;
  // Rows and masks at the position level; K/V bytes and attention through LibTorch. The fast path
  // has no crop: a case with call steps tracks its rows with tag layers.
  options.fast_rows = !c.has_calls();
  options.record_calls = true;
  return options;
}

// A call step's layer as golden/dump.py records it: its counts, stored rows, attributes and raise.
void write_call_layer(const LayerStep& v, json& jl) {
  const CacheLayer& layer = *v.cache;
  jl["cumulative_length_before"] = v.seq_length_before;
  jl["cumulative_length_after"] = v.seq_length_after;
  jl["stored"] = layer.initialized() ? kv_json(kv_record(layer.keys(), layer.values(), v.stored_rows)) : json(nullptr);
  const std::optional<bool> croppable = layer.is_croppable();
  jl["attributes"] = {{"is_croppable", croppable ? json(*croppable) : json(nullptr)},
                      {"max_length", layer.max_length()},
                      {"is_compileable", layer.is_compileable()}};
  jl["errors"] = json::array();
  if (v.call_error) {
    try {
      std::rethrow_exception(v.call_error);
    } catch (const std::exception& e) {
      jl["errors"].push_back(error_record(v.call->method->name, e));
    }
  }
}

// The masks the release's own create_*_mask builders return (golden/dump.py's builder_masks): a
// model calls them once per kind of mask and step, before any layer is updated, with no layer_idx,
// so each is sized from the first layer of its kind (sliding and chunked layers counting as one,
// layer 0 where there is none) and takes its first query's position from cache_position, layer 0's
// count or the sized layer's (Behaviours::builder_query_offset). Recorded at the first layer of each
// type: sdpa (with the release's skip), eager (the additive mask's bytes) and flex (the mask
// function with its offsets on the step's index grid: the boolean mask of the same request, with
// the query offset alone on the cache_position API, as flex_attention_mask adds cache_position[0]).
class StepBuilders {
 public:
  // Every layer's LayerStep of a step, in layer order, before its record is asked.
  void see(const LayerStep& v) {
    if (v.layer == 0) layers_.clear();
    layers_.resize(v.layer + 1);
    layers_[v.layer] = {v.sizes, v.seq_length_before, v.failed_at};
  }

  // null where the layer is not the first of its type.
  json record(const LayerStep& v, const Scenario& c, const Behaviours& b, Mutation mutation) const {
    const LayerType type = c.layer_spec(v.layer).type;
    for (size_t l = 0; l < v.layer; ++l)
      if (c.layer_spec(l).type == type) return nullptr;
    return record_of(type, c.layer_spec(v.layer), v, c, b, mutation);
  }

  // The builders of the mask_builder_call's absent_layer_types ("mask_builders_absent", at layer 0;
  // null elsewhere): a model calls them with a cache that holds no layer of their type (one made
  // without its config), so each is sized from layer 0, as the builders fall back to it.
  json record_absent(const LayerStep& v, const Scenario& c, const Behaviours& b, Mutation mutation) const {
    if (v.layer != 0 || !c.mask_builder_call || c.mask_builder_call->absent_layer_types.empty()) return nullptr;
    json out = json::object();
    for (LayerType t : c.mask_builder_call->absent_layer_types) {
      LayerSpec spec = c.layer_spec(0);
      spec.type = mutation == Mutation::BuilderAbsentTypeAsFull ? LayerType::Full : t;
      spec.window = c.window;  // the config's sliding_window / attention_chunk_size, 0 where it has none
      out[to_string(t)] = record_of(t, spec, v, c, b, mutation);
    }
    return out;
  }

 private:
  static bool not_a_function(const std::optional<NamedMaskFunction>& f) {
    return f && f->kind == NamedMaskFunction::Kind::NotAFunction;
  }

  // One builder's record: `type` names the builder, `spec` the mask it makes (the layer's own, or an
  // absent type's at layer 0).
  json record_of(LayerType type, const LayerSpec& spec, const LayerStep& v, const Scenario& c, const Behaviours& b,
                 Mutation mutation) const {
    const MaskBuilderCall call = c.mask_builder_call.value_or(MaskBuilderCall{});
    const char* name = type == LayerType::Full      ? "create_causal_mask"
                       : type == LayerType::Sliding ? "create_sliding_window_causal_mask"
                                                    : "create_chunked_causal_mask";
    if (call.attention_mask_4d && mutation != Mutation::Builder4dMaskRebuilt) return passed_through(v, c, call, name);
    const bool windowed = type != LayerType::Full;
    size_t sized = 0;
    for (size_t l = 0; l < c.layer_types.size(); ++l)
      if ((c.layer_spec(l).type != LayerType::Full) == windowed) {
        sized = l;
        break;
      }
    if (mutation == Mutation::BuilderSizedFromOwnLayer) sized = v.layer;
    if (call.layer_idx && mutation != Mutation::BuilderIgnoresLayerIdx) sized = static_cast<size_t>(*call.layer_idx);
    std::optional<size_t> offset_from;
    if (b.cache_api == CacheApi::QueryLength)
      offset_from = b.builder_query_offset == BuilderQueryOffset::FirstLayer && mutation != Mutation::BuilderOffsetFromSizedLayer
                        ? 0
                        : sized;
    json rec = {{"builder", name}};
    if (call.cache) {
      rec["sized_from"] = sized;
      rec["query_offset_from"] = offset_from ? json(*offset_from) : json(nullptr);
      int64_t failed = -1;
      for (size_t l : {sized, offset_from.value_or(sized)})
        if (layers_.at(l).failed_at >= 0) failed = failed < 0 ? layers_[l].failed_at : std::min(failed, layers_[l].failed_at);
      if (failed >= 0) {
        rec["skipped"] = "the layer it sizes from failed at step " + std::to_string(failed);
        return rec;
      }
    } else {  // no cache: no layer asked
      rec["sized_from"] = nullptr;
      rec["query_offset_from"] = nullptr;
    }
    // An attention implementation registered with AttentionInterface but not with the mask interface
    // (a custom kernel, a serving backend): _preprocess_mask_arguments exits before any mask is made or
    // refused, and the builder returns the 2D mask's place, none.
    if (call.unregistered_attention) rec["unregistered"] = {{"mask", nullptr}};
    MaskSizes sizes = call.cache ? layers_[sized].sizes : MaskSizes{};
    int64_t start = offset_from ? layers_[*offset_from].seq_length_before : v.seen;
    std::optional<std::vector<int64_t>> positions = v.cache_position;
    if (!call.cache) {
      // _preprocess_mask_arguments without a cache: the step's own keys from 0; from 5.4 (the
      // query_length API) the queries start at 0 too and the keys span the 2D mask where there is one.
      sizes.kv_offset = 0;
      sizes.kv_length = v.q;
      if (b.cache_api == CacheApi::QueryLength) {
        start = 0;
        positions.reset();
        if (c.left_padding && mutation != Mutation::BuilderWithoutCacheSizedByStep) sizes.kv_length = v.seen + v.q;
      }
    }
    // The packed-sequence overlay: position_ids given, neither a cache nor a 2D mask, and more than
    // one sequence in them (find_packed_sequence_indices).
    Packing packing;
    if (!call.cache && !c.left_padding && !call.packed_documents.empty()) packing = packed(call.packed_documents, v.seen, v.q);
    // What the builder raises, after it has asked the cache, in its order: a config without the
    // window (sliding_window / attention_chunk_size), flash_attention_2's refusal of keys past one
    // chunk (under flash only), a mask function that is not callable (or_masks / and_masks).
    const auto raised = [](const char* type) { return json{{"error", {{"phase", "mask_builder"}, {"type", type}}}}; };
    const char* refusal = nullptr;
    if (type != LayerType::Full && spec.window <= 0) refusal = "ValueError";
    const bool flash_refuses = type == LayerType::Chunked && sizes.kv_length + sizes.kv_offset > spec.window;
    const char* flash_refusal = refusal ? refusal : flash_refuses ? "ValueError" : nullptr;
    if (!refusal && (not_a_function(call.or_mask) || not_a_function(call.and_mask)) &&
        mutation != Mutation::BuilderAcceptsNonCallable)
      refusal = "RuntimeError";
    if (!flash_refusal) flash_refusal = refusal;
    if (call.flash)
      rec["flash"] = flash_refusal ? raised(flash_refusal) : json{{"mask", flash_mask(c, v, sizes.kv_length, mutation)}};
    if (refusal) {
      for (const char* impl : {"sdpa", "eager", "flex"}) rec[impl] = raised(refusal);
      if (call.unregistered_attention && mutation == Mutation::UnregisteredAttentionMasked) rec["unregistered"] = rec["eager"];
      return rec;
    }
    const bool custom = call.and_mask || call.or_mask || packing.packed || !call.block_sequence_ids.empty();
    const auto masks = [&](int64_t t0, const std::optional<std::vector<int64_t>>& at) {
      MaskRequest m = mask_request(spec, b, c.batch, c.left_padding, t0, v.q, at, sizes, mutation);
      m.seen_after = v.seen + v.q;
      if (!call.cache) m.allow_skip = true;  // no cache, nothing compileable
      if (custom) m.allow_skip = false;      // a custom mask function or packing is never is_causal
      return m;
    };
    const auto boolean_of = [&](const MaskRequest& m, std::vector<uint8_t>& out) {
      if (custom) composed_mask(m, call, packing, mutation, out);
      else fast::boolean_mask(m, out, mutation);
    };
    const MaskRequest m = masks(start, positions);
    std::vector<uint8_t> boolean;
    boolean_of(m, boolean);
    const bool skipped = fast::skips(m);
    std::string additive;
    fast::additive_mask_bytes(boolean, c.dtype, additive);
    const json shape = {c.batch, 1, v.q, sizes.kv_length};
    const json rows = mask_rows(boolean, c.batch, v.q, sizes.kv_length);
    rec["sdpa"] = {{"skipped", skipped}, {"rows", skipped ? json(nullptr) : rows}};
    rec["eager"] = {{"shape", shape}, {"sha256", cases::sha256_hex(additive)}};
    if (call.unregistered_attention && mutation == Mutation::UnregisteredAttentionMasked) rec["unregistered"] = rec["eager"];
    // flex_attention_mask adds one query offset to the mask function's query index: cache_position[0]
    // on the cache_position API (positions off arange are not followed), the builder's q_offset after.
    int64_t flex_start = positions && !positions->empty() ? positions->front() : start;
    if (mutation == Mutation::FlexWithoutQueryOffset) flex_start = 0;
    std::optional<std::vector<int64_t>> flex_positions;
    if (positions) {
      flex_positions.emplace(static_cast<size_t>(v.q));
      for (int64_t i = 0; i < v.q; ++i) (*flex_positions)[static_cast<size_t>(i)] = flex_start + i;
    }
    std::vector<uint8_t> flex;
    boolean_of(masks(flex_start, flex_positions), flex);
    rec["flex"] = {{"shape", shape}, {"rows", mask_rows(flex, c.batch, v.q, sizes.kv_length)}};
    return rec;
  }

  // flash_attention_mask: the 2D mask's last kv_length keys, or none where there is no padding in
  // them (the case's 2D mask is seen + q long, never shorter than a dynamic layer's kv_length; a
  // static cache's longer kv_length is not modelled: 4.5x answer none there, 5.x the short mask).
  static json flash_mask(const Scenario& c, const LayerStep& v, int64_t kv_length, Mutation mutation) {
    if (!c.left_padding) return nullptr;
    const int64_t total = v.seen + v.q;
    const int64_t from = mutation == Mutation::FlashMaskUncut ? 0 : std::max<int64_t>(total - kv_length, 0);
    json rows = json::array();
    bool every = true;
    for (int64_t pad : *c.left_padding) {
      std::string row;
      for (int64_t j = from; j < total; ++j) row += j >= pad ? '1' : '0';
      every = every && row.find('0') == std::string::npos;
      rows.push_back(row);
    }
    if (every && total - from == kv_length) return nullptr;
    return rows;
  }

  // position_ids of a packed sequence (golden/dump.py's packed_position_ids) for tokens seen ..
  // seen + q, and find_packed_sequence_indices' sequence index of each.
  struct Packing {
    bool packed = false;
    std::vector<int64_t> position_ids, sequence;
  };
  static Packing packed(const std::vector<int64_t>& lengths, int64_t seen, int64_t q) {
    Packing p;
    for (int64_t t = seen; t < seen + q; ++t) {
      int64_t start = 0, end = 0;
      for (int64_t n : lengths)
        if (t >= (end += n)) start = end;
      p.position_ids.push_back(t - start);
    }
    int64_t index = 0;
    for (int64_t i = 0; i < q; ++i) {
      const int64_t previous = i == 0 ? p.position_ids[0] - 1 : p.position_ids[static_cast<size_t>(i) - 1];
      index += p.position_ids[static_cast<size_t>(i)] - previous != 1;
      p.sequence.push_back(index);
    }
    p.packed = index != 0;  // a single sequence is no packing: the overlay is not applied
    return p;
  }

  // The builders' mask with custom mask functions or packing, element by element as masking_utils
  // composes them: ((the builder's mask function | or_mask) & and_mask), evaluated on the packed
  // position_ids when packed, & the same packed sequence, then sdpa_mask's padding of the 2D mask.
  static int64_t floor_div(int64_t a, int64_t b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); }  // Python's //
  static void composed_mask(const MaskRequest& m, const MaskBuilderCall& call, const Packing& packing, Mutation mutation,
                            std::vector<uint8_t>& out) {
    const int64_t kv = m.sizes.kv_length, off = m.sizes.kv_offset, q = m.q();
    out.assign(static_cast<size_t>(m.batch * q * kv), 0);
    const auto position = [&](int64_t index) {  // remap_positions_for_packed_sequence
      if (!packing.packed) return index;
      if (index < 0 || index >= static_cast<int64_t>(packing.position_ids.size()))
        throw std::out_of_range("a packed position index outside the step");
      return packing.position_ids[static_cast<size_t>(index)];
    };
    for (int64_t b = 0; b < m.batch; ++b) {
      const int64_t pad = m.left_padding ? (*m.left_padding)[static_cast<size_t>(b)] : 0;
      const int64_t lead = std::min(pad, m.seen_after);  // chunked_causal_mask_function's left_padding_tokens
      for (int64_t i = 0; i < q; ++i)
        for (int64_t j = 0; j < kv; ++j) {
          const int64_t qi = m.query_positions[static_cast<size_t>(i)], kj = off + j;
          const int64_t x = position(qi), y = position(kj);
          bool allowed = y <= x;
          if (m.type == LayerType::Sliding) allowed = allowed && y > x - m.window;
          if (m.type == LayerType::Chunked) allowed = allowed && floor_div(y - lead, m.window) == floor_div(x - lead, m.window);
          if (call.or_mask && mutation != Mutation::BuilderWithoutOrMask) allowed = allowed || (*call.or_mask)(x, y);
          if (call.and_mask && mutation != Mutation::BuilderWithoutAndMask) allowed = allowed && (*call.and_mask)(x, y);
          if (!call.block_sequence_ids.empty() && mutation != Mutation::BuilderWithoutBlockOverlay) {
            // blockwise_overlay on the raw indices: the same block >= 0 (maybe_pad_block_sequence_ids pads with -1)
            const std::vector<int64_t>& ids = call.block_sequence_ids[static_cast<size_t>(b)];
            const auto block = [&](int64_t x) { return x < static_cast<int64_t>(ids.size()) ? ids[static_cast<size_t>(x)] : -1; };
            allowed = allowed || (block(qi) == block(kj) && block(qi) >= 0);
          }
          if (packing.packed && mutation != Mutation::BuilderPackedAcrossDocuments)
            allowed = allowed && packing.sequence[static_cast<size_t>(qi)] == packing.sequence[static_cast<size_t>(kj)];
          if (m.left_padding) allowed = allowed && kj >= pad && kj < m.seen_after;
          out[static_cast<size_t>((b * q + i) * kv + j)] = allowed;
        }
    }
  }

  // A prepared 4D mask (the 2D mask expanded over the queries) is returned as it is, the cache not
  // asked, under every attention implementation: its rows, and its own boolean bytes for eager.
  static json passed_through(const LayerStep& v, const Scenario& c, const MaskBuilderCall& call, const char* name) {
    const int64_t kv = v.seen + v.q;
    std::vector<uint8_t> mask(static_cast<size_t>(c.batch * v.q * kv));
    for (int64_t b = 0; b < c.batch; ++b)
      for (int64_t i = 0; i < v.q; ++i)
        for (int64_t j = 0; j < kv; ++j)
          mask[static_cast<size_t>((b * v.q + i) * kv + j)] = j >= (*c.left_padding)[static_cast<size_t>(b)];
    const json shape = {c.batch, 1, v.q, kv};
    const json rows = mask_rows(mask, c.batch, v.q, kv);
    json rec = {
        {"builder", name},
        {"sized_from", nullptr},
        {"query_offset_from", nullptr},
        {"sdpa", {{"skipped", false}, {"rows", rows}}},
        {"eager", {{"shape", shape}, {"sha256", cases::sha256_hex(std::string(mask.begin(), mask.end()))}, {"dtype", "bool"}}},
        {"flex", {{"shape", shape}, {"rows", rows}}}};
    // the 4D mask is returned before the attention implementation is looked at: under one the mask
    // interface lacks too
    if (call.unregistered_attention) rec["unregistered"] = rec["eager"];
    return rec;
  }

 private:
  struct Seen {
    MaskSizes sizes;
    int64_t seq_length_before = 0, failed_at = -1;
  };
  std::vector<Seen> layers_;
};

// The reference raised where transformers does not: the reference itself broke.
template <typename F>
auto guarded(const LayerStep& v, F f) {
  try {
    return f();
  } catch (const std::exception& e) {
    throw StepFailure(v.step, v.layer, e.what());
  }
}

}  // namespace

namespace detail {

const char* const kStepFields[5] = {"index", "tokens", "token_range", "cache_position", "attention_mask_2d"};

void write_layer(const LayerValues& v, json& jl) {
  jl["cumulative_length_before"] = v.seq_length_before;
  jl["mask_sizes"] = {{"kv_length", v.kv_length}, {"kv_offset", v.kv_offset}};
  jl["mask_function"] = v.mask_function;
  jl["q_positions"] = v.q_positions;
  jl["allow_is_causal_skip"] = v.allow_skip;
  const json rows = mask_rows(v.mask, v.batch, v.q, v.kv_length);
  jl["sdpa_mask_skipped"] = v.sdpa_skipped;
  jl["sdpa_mask"] = v.sdpa_skipped ? json(nullptr) : rows;
  jl["bool_mask"] = rows;
  jl["eager_mask"] = {{"dtype", v.eager_mask.dtype},
                      {"shape", v.eager_mask.shape},
                      {"sha256", v.eager_mask.sha256},
                      {"masked_value", v.eager_mask.masked_value}};
  jl["cumulative_length_after"] = v.updated ? json(v.seq_length_after) : json(nullptr);
  jl["returned"] = v.updated ? kv_json(v.returned) : json(nullptr);
  jl["stored"] = v.updated ? kv_json(v.stored) : json(nullptr);
  jl["attention"] = {{"eager", output_json(v.eager)}, {"sdpa", output_json(v.sdpa)}};
  jl["errors"] = v.errors;
  if (!v.builders.is_null()) jl["mask_builders"] = v.builders;
  if (!v.builders_absent.is_null()) jl["mask_builders_absent"] = v.builders_absent;
}

json layer_records(const Scenario& c, const Behaviours& behaviours) {
  json records = json::array();
  for (size_t l = 0; l < c.layer_types.size(); ++l) records.push_back(layer_record_of(l, c.layer_spec(l), c, behaviours));
  return records;
}

json step_record(size_t step, int64_t seen, int64_t q, const std::optional<std::vector<int64_t>>& cache_position,
                 const Scenario& c) {
  return {{"index", step},
          {"tokens", q},
          {"token_range", {seen, seen + q}},
          {"cache_position", cache_position ? json(*cache_position) : json(nullptr)},
          {"attention_mask_2d", attention_mask_2d(c, seen + q)},
          {"layers", json::array()}};
}

json call_step_record(size_t step, int64_t seen, const LayerCall& call) {
  return {
      {"index", step},
      {"call", {{"method", call.method->name}, {"argument", call.method->takes_argument ? json(call.argument) : json(nullptr)}}},
      {"tokens", 0},
      {"token_range", {seen, seen}},
      {"cache_position", nullptr},
      {"attention_mask_2d", nullptr},
      {"layers", json::array()}};
}

// Decodes an attention output's hex into doubles (any of the four dtypes).
std::vector<double> decode_output(const json& j) {
  const std::string hex = j.at("hex").get<std::string>();
  std::string bytes(hex.size() / 2, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  const c10::ScalarType t = scalar_type(parse_dtype(j.at("dtype").get<std::string>()));
  const int64_t n = static_cast<int64_t>(bytes.size()) / static_cast<int64_t>(c10::elementSize(t));
  at::Tensor raw = at::empty({n}, at::TensorOptions().dtype(t));
  std::memcpy(raw.data_ptr(), bytes.data(), bytes.size());
  return values_of(raw);
}

}  // namespace detail

json run_case(const Scenario& c, const Behaviours& behaviours, Mutation mutation) {
  const ReplayMode mode;
  json out = {{"format", "kvconform-fixture-v1"}, {"case", c.name},
              {"case_sha256", c.sha256},          {"behaviours", to_json(behaviours)},
              {"torch_version", TORCH_VERSION},   {"cpu_kernels", cpu_kernels()},
              {"dtype", to_string(c.dtype)}};
  out["layers"] = detail::layer_records(c, behaviours);
  StepDriver driver(c, replay_options(c, behaviours, mutation));
  json steps = json::array();
  json js;
  StepBuilders builders;
  driver.run([&](LayerStep& v) {
    if (!v.call) builders.see(v);
    if (v.layer == 0)
      js = v.call ? detail::call_step_record(v.step, v.seen, *v.call)
                  : detail::step_record(v.step, v.seen, v.q, v.cache_position, c);
    json jl = {{"layer", v.layer}};
    if (v.failed_at >= 0) jl["skipped"] = "layer failed at step " + std::to_string(v.failed_at);
    else if (v.call) guarded(v, [&] { write_call_layer(v, jl); });
    else
      guarded(v, [&] {
        detail::LayerValues values = layer_values(v, c, behaviours, mutation);
        values.builders = builders.record(v, c, behaviours, mutation);
        values.builders_absent = builders.record_absent(v, c, behaviours, mutation);
        detail::write_layer(values, jl);
      });
    js["layers"].push_back(jl);
    if (v.layer + 1 == c.layer_types.size()) steps.push_back(js);
  });
  out["steps"] = steps;
  return out;
}

namespace {
struct Differs {};  // the fast path stops at the first field that disagrees

// compare()'s verdict when every field agrees, found without building run_case's JSON: nullopt as
// soon as anything differs (or anything raises), and compare() then tells what and where.
std::optional<report::CaseResult> agreed_without_record(const json& fixture, const Scenario& c, const Behaviours& behaviours,
                                                        Mutation mutation) {
  using detail::agrees;
  if (c.has_calls()) return std::nullopt;  // call steps are judged by compare(run_case) alone
  if (!agrees(fixture.at("dtype"), json(to_string(c.dtype))) ||
      !agrees(fixture.at("layers"), detail::layer_records(c, behaviours)))
    return std::nullopt;
  const json& fsteps = fixture.at("steps");
  const size_t recorded =
      static_cast<size_t>(std::count_if(c.steps.begin(), c.steps.end(), [](const Step& s) { return !s.is_reset(); }));
  if (!fsteps.is_array() || fsteps.size() != recorded) return std::nullopt;
  const ReplayMode mode;
  StepDriver driver(c, replay_options(c, behaviours, mutation));
  size_t k = 0;
  int64_t outputs = 0;
  StepBuilders builders;
  try {
    driver.run([&](LayerStep& v) {
      builders.see(v);
      const json& fs = fsteps.at(k);
      if (v.layer == 0 &&
          !detail::step_matches(fs, {v.step, v.seen, v.q, &v.cache_position, &c.left_padding}, c.layer_types.size()))
        throw Differs{};
      const json& fl = fs.at("layers").at(v.layer);
      if (fl.contains("skipped") != (v.failed_at >= 0)) throw Differs{};
      if (v.failed_at < 0 &&
          !detail::layer_matches(fl,
                                 guarded(v,
                                         [&] {
                                           detail::LayerValues values = layer_values(v, c, behaviours, mutation);
                                           values.builders = builders.record(v, c, behaviours, mutation);
                                           values.builders_absent = builders.record_absent(v, c, behaviours, mutation);
                                           return values;
                                         }),
                                 outputs))
        throw Differs{};
      if (v.layer + 1 == c.layer_types.size()) ++k;
    });
  } catch (const Differs&) {
    return std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;  // compare(run_case) raises it again, where the caller reports it
  }
  return detail::agreed(fixture, c, outputs, outputs, 0.0);
}
}  // namespace

report::CaseResult check(const json& fixture, const Scenario& c, const Behaviours& behaviours, Mutation mutation) {
  if (auto r = agreed_without_record(fixture, c, behaviours, mutation)) return *r;
  return compare(fixture, run_case(c, behaviours, mutation), c);
}

}  // namespace kvc::golden
