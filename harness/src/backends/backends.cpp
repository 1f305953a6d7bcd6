#include "kvconform/backends.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cmath>
#include <iomanip>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include "kvconform/attention.h"
#include "kvconform/inputs.h"
#include "kvconform/oracle.h"
#include "kvconform/positions.h"
#include "kvconform/reference.h"
#include "kvconform/scenario.h"
#include "kvconform/step_driver.h"
#include "kvconform/tensors.h"

namespace kvc::backends {

namespace {

// c10::Error's what() carries a C++ stack trace after the message; a report line wants the message.
std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

std::string sci(double v) {
  std::ostringstream os;
  os << std::setprecision(2) << std::scientific << v;
  return os.str();
}

// The boolean mask transformers builds, on the query's device.
at::Tensor boolean_on(const Call& c) { return masks::boolean_mask(c.mask).to(c.query.device()); }

class Eager : public Backend {
 public:
  std::string name() const override { return "eager"; }
  DType judged_as(DType input) const override { return input == DType::Float64 ? DType::Float32 : input; }
  at::Tensor run(const Call& c) const override {
    return attention::eager(c.query, c.keys, c.values, masks::additive_mask(boolean_on(c), c.query.scalar_type()));
  }
};

class Sdpa : public Backend {
 public:
  explicit Sdpa(bool allow_is_causal) : allow_is_causal_(allow_is_causal) {}
  std::string name() const override { return allow_is_causal_ ? "sdpa_is_causal" : "sdpa"; }
  at::Tensor run(const Call& c) const override {
    if (allow_is_causal_ && masks::can_skip(c.mask)) return attention::sdpa(c.query, c.keys, c.values, std::nullopt);
    return attention::sdpa(c.query, c.keys, c.values, boolean_on(c));
  }

 private:
  bool allow_is_causal_;
};

class Windowed : public Backend {
 public:
  explicit Windowed(Fault fault) : fault_(fault) {}
  std::string name() const override { return "windowed"; }
  at::Tensor run(const Call& c) const override {
    return windowed(c.query, c.keys, c.values, c.mask.query_positions, c.mask.sizes.kv_offset, kernel_window(c.mask), fault_);
  }

 private:
  Fault fault_;
};

// Absolute key range [lo, hi] a query at q_pos sees in batch row b (empty when lo > hi).
struct Range {
  int64_t lo, hi;
};
Range key_range(const KernelWindow& w, int64_t b, int64_t q_pos, Fault fault) {
  int64_t lp = 0;
  if (!w.left_padding.empty()) lp = w.left_padding[fault == Fault::FirstRowPadding ? 0 : b];
  Range r{lp, q_pos};
  if (w.type == LayerType::Sliding && w.left >= 0) {
    const int64_t left = fault == Fault::WindowOffByOne ? w.left + 1 : w.left;
    r.lo = std::max(r.lo, q_pos - left);
  } else if (w.type == LayerType::Chunked) {
    r.lo = std::max(r.lo, lp + positions::floor_div(q_pos - lp, w.chunk) * w.chunk);
  }
  return r;
}

bool numeric_fault(Fault f) {
  return f == Fault::SoftmaxInInputDtype || f == Fault::HalfAccumulation || f == Fault::NoMaxSubtraction;
}

// x rounded to dtype t (round to nearest even, as a store in t would): the numeric faults' deliberately
// low precision.
double round_to(at::ScalarType t, double x) {
  switch (t) {
    case at::kHalf: return static_cast<float>(c10::Half(static_cast<float>(x)));
    case at::kBFloat16: return static_cast<float>(c10::BFloat16(static_cast<float>(x)));
    case at::kFloat: return static_cast<float>(x);
    default: return x;
  }
}

// The CPU kernel: for each (b, h, query) scan only its key rows, online softmax (FlashAttention's
// running max and sum) in Acc precision, one rounding to the output dtype at the end.
template <typename Acc>
at::Tensor windowed_cpu(const at::Tensor& query, const at::Tensor& keys, const at::Tensor& values,
                        const std::vector<int64_t>& qpos, int64_t kv_offset, const KernelWindow& w, Fault fault) {
  const at::ScalarType in = query.scalar_type();
  const bool sixteen = in == at::kHalf || in == at::kBFloat16;
  const bool low_softmax = fault == Fault::SoftmaxInInputDtype, low_acc = fault == Fault::HalfAccumulation && sixteen;
  const bool no_max = fault == Fault::NoMaxSubtraction;
  const auto low = [in](Acc x) { return static_cast<Acc>(round_to(in, static_cast<double>(x))); };
  const auto acc_type = std::is_same<Acc, double>::value ? at::kDouble : at::kFloat;
  const at::Tensor Q = query.to(acc_type).contiguous(), K = keys.to(acc_type).contiguous();
  const at::Tensor V = values.to(acc_type).contiguous();
  const int64_t B = Q.size(0), H = Q.size(1), nq = Q.size(2), D = Q.size(3), Hkv = K.size(1), nk = K.size(2);
  const int64_t group = H / Hkv;
  const Acc scale = static_cast<Acc>(1.0 / std::sqrt(static_cast<double>(D)));
  at::Tensor out = at::zeros({B, H, nq, D}, at::TensorOptions().dtype(acc_type));
  const Acc *q = Q.data_ptr<Acc>(), *k = K.data_ptr<Acc>(), *v = V.data_ptr<Acc>();
  Acc* o = out.data_ptr<Acc>();
  const int64_t offset = fault == Fault::IgnoreKvOffset ? 0 : kv_offset;
  std::vector<Acc> acc(static_cast<size_t>(D));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < nq; ++i) {
        const Range r = key_range(w, b, qpos[i], fault);
        const int64_t j0 = std::max<int64_t>(r.lo - offset, 0), j1 = std::min<int64_t>(r.hi - offset, nk - 1);
        const Acc* qr = q + ((b * H + h) * nq + i) * D;
        const int64_t kvh = (b * Hkv + h / group) * nk;
        Acc m = -std::numeric_limits<Acc>::infinity(), l = 0;
        std::fill(acc.begin(), acc.end(), Acc(0));
        for (int64_t j = j0; j <= j1; ++j) {
          const Acc* kr = k + (kvh + j) * D;
          const Acc* vr = v + (kvh + j) * D;
          Acc s = 0;
          for (int64_t d = 0; d < D; ++d) {
            s += qr[d] * kr[d];
            if (low_acc) s = low(s);
          }
          s *= scale;
          if (no_max) {  // Fault::NoMaxSubtraction: exp of the raw score
            const Acc p = std::exp(s);
            l += p;
            for (int64_t d = 0; d < D; ++d) acc[d] += p * vr[d];
            continue;
          }
          if (low_softmax || low_acc) s = low(s);
          const Acc m_new = std::max(m, s);
          Acc c = std::exp(m - m_new), p = std::exp(s - m_new);
          if (low_softmax) {  // Fault::SoftmaxInInputDtype: every softmax quantity in the input dtype
            c = low(std::exp(low(m - m_new)));
            p = low(std::exp(low(s - m_new)));
            l = low(low(l * c) + p);
          } else {
            l = l * c + p;
            if (low_acc) l = low(l);
          }
          for (int64_t d = 0; d < D; ++d) {
            acc[d] = acc[d] * c + p * vr[d];
            if (low_acc) acc[d] = low(acc[d]);
          }
          m = m_new;
        }
        Acc* orow = o + ((b * H + h) * nq + i) * D;
        if (l > 0)
          for (int64_t d = 0; d < D; ++d) orow[d] = acc[d] / l;  // no key: zeros (FlashAttention)
      }
  return out.to(query.scalar_type());
}

// Other devices: the same ranges as tensors (lo/hi per row and query), scores in float32.
at::Tensor windowed_tensor(const at::Tensor& query, const at::Tensor& keys, const at::Tensor& values,
                           const std::vector<int64_t>& qpos, int64_t kv_offset, const KernelWindow& w, Fault fault) {
  const int64_t B = query.size(0), nq = query.size(2), nk = keys.size(2);
  std::vector<int64_t> lo, hi;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < nq; ++i) {
      const Range r = key_range(w, b, qpos[i], fault);
      lo.push_back(r.lo);
      hi.push_back(r.hi);
    }
  const auto dev = query.device();
  const auto longs = at::TensorOptions().dtype(at::kLong);
  const at::Tensor L = at::tensor(lo, longs).to(dev).view({B, 1, nq, 1}), Hi = at::tensor(hi, longs).to(dev).view({B, 1, nq, 1});
  const int64_t offset = fault == Fault::IgnoreKvOffset ? 0 : kv_offset;
  const at::Tensor kpos = at::arange(nk, longs.device(dev)).add(offset).view({1, 1, 1, nk});
  const at::Tensor band = kpos.ge(L).logical_and(kpos.le(Hi));
  const int64_t H = query.size(1), group = H / keys.size(1);
  // Accumulate as the CPU path does: float64 in float64 (judged at 1e-12), everything else in float32.
  const auto acc = query.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  const at::Tensor Kf = keys.to(acc).repeat_interleave(group, 1), Vf = values.to(acc).repeat_interleave(group, 1);
  at::Tensor s = at::matmul(query.to(acc), Kf.transpose(2, 3)) / std::sqrt(static_cast<double>(query.size(3)));
  s = s.masked_fill(band.logical_not(), -std::numeric_limits<float>::infinity());
  const at::Tensor any = band.any(-1, true);
  s = s.masked_fill(any.logical_not(), 0.0);
  return (at::matmul(at::softmax(s, -1), Vf) * any).to(query.scalar_type());
}

}  // namespace

KernelWindow kernel_window(const MaskRequest& m) {
  KernelWindow w;
  w.type = m.type;
  if (m.type == LayerType::Sliding) w.left = m.window - 1;
  if (m.type == LayerType::Chunked) w.chunk = m.window;
  if (m.left_padding)
    for (int64_t lp : *m.left_padding) w.left_padding.push_back(std::min(lp, m.seen_after));
  return w;
}

at::Tensor windowed(const at::Tensor& query, const at::Tensor& keys, const at::Tensor& values,
                    const std::vector<int64_t>& query_positions, int64_t kv_offset, const KernelWindow& window, Fault fault) {
  if (static_cast<int64_t>(query_positions.size()) != query.size(2))
    throw std::invalid_argument("windowed: " + std::to_string(query_positions.size()) + " query positions for " +
                                std::to_string(query.size(2)) + " queries");
  if (window.type == LayerType::Chunked && window.chunk <= 0)
    throw std::invalid_argument("windowed: chunk size must be positive");
  if (!query.device().is_cpu() && numeric_fault(fault))  // the numeric faults exist in the CPU loop only
    return windowed(query.cpu(), keys.cpu(), values.cpu(), query_positions, kv_offset, window, fault).to(query.device());
  if (!query.device().is_cpu()) return windowed_tensor(query, keys, values, query_positions, kv_offset, window, fault);
  if (query.scalar_type() == at::kDouble)
    return windowed_cpu<double>(query, keys, values, query_positions, kv_offset, window, fault);
  return windowed_cpu<float>(query, keys, values, query_positions, kv_offset, window, fault);
}

Fault kernel_fault(Mutation m) {
  switch (m) {
    case Mutation::KernelSoftmaxInInputDtype: return Fault::SoftmaxInInputDtype;
    case Mutation::KernelF16Accumulation: return Fault::HalfAccumulation;
    case Mutation::KernelNoMaxSubtraction: return Fault::NoMaxSubtraction;
    case Mutation::StaleRowsAfterReset: return Fault::StaleRowsAfterReset;
    default: return Fault::None;
  }
}

std::vector<std::string> names() {
  std::vector<std::string> out;
  for (const BackendInfo& b : registry()) out.push_back(b.name);
  return out;
}

std::unique_ptr<Backend> make(const std::string& name, Fault fault) {
  std::string known;
  for (const BackendInfo& b : registry()) {
    if (b.name == name) return b.make(fault);
    known += (known.empty() ? "" : ", ") + b.name;
  }
  throw std::invalid_argument("unknown backend '" + name + "' (expected one of: " + known + ")");
}

std::vector<std::unique_ptr<Backend>> all() {
  std::vector<std::unique_ptr<Backend>> out;
  for (const std::string& n : names()) out.push_back(make(n));
  return out;
}

std::unique_ptr<Backend> make_eager(Fault) { return std::make_unique<Eager>(); }
std::unique_ptr<Backend> make_sdpa(Fault) { return std::make_unique<Sdpa>(false); }
std::unique_ptr<Backend> make_sdpa_is_causal(Fault) { return std::make_unique<Sdpa>(true); }
std::unique_ptr<Backend> make_windowed(Fault fault) { return std::make_unique<Windowed>(fault); }

at::Tensor math_reference(const at::Tensor& query, const at::Tensor& keys, const at::Tensor& values,
                          const at::Tensor& boolean_mask, const at::Tensor& sinks) {
  const int64_t group = query.size(1) / keys.size(1);
  const at::Tensor K = keys.repeat_interleave(group, 1), V = values.repeat_interleave(group, 1);
  const at::Tensor mask = boolean_mask.to(query.device());
  const double scale = 1.0 / std::sqrt(static_cast<double>(query.size(3)));
  at::Tensor s = at::matmul(query, K.transpose(2, 3)) * scale;
  s = s.masked_fill(mask.logical_not(), -std::numeric_limits<double>::infinity());
  const at::Tensor any = mask.any(-1, true);
  s = s.masked_fill(any.logical_not(), 0.0);
  if (sinks.defined()) {  // softmax over [scores, sink], the sink's column dropped
    const at::Tensor sink =
        sinks.to(query.device()).to(query.scalar_type()).view({1, -1, 1, 1}).expand({s.size(0), s.size(1), s.size(2), 1});
    const at::Tensor p = at::softmax(at::cat({s, sink}, -1), -1).narrow(-1, 0, s.size(3));
    return at::matmul(p, V) * any.to(query.scalar_type());
  }
  return at::matmul(at::softmax(s, -1), V) * any.to(query.scalar_type());
}

double reference_error(const at::Tensor& reference, const at::Tensor& oracle, const at::Tensor& sees) {
  const at::Tensor exp = oracle.to(at::kCPU).to(at::kDouble);
  const at::Tensor d = (reference.to(at::kCPU).to(at::kDouble) - exp).abs().nan_to_num(0.0, 0.0, 0.0);
  const at::Tensor masked = d.masked_fill(sees.to(at::kCPU).expand_as(exp).logical_not(), 0.0);
  return masked.numel() ? masked.max().item<double>() : 0.0;
}

Verdict judge(const at::Tensor& out, const at::Tensor& reference, const at::Tensor& oracle, const at::Tensor& sees, DType dtype) {
  return judge(out, reference_error(reference, oracle, sees), oracle, sees, dtype);
}

Verdict judge(const at::Tensor& out, double ref_error, const at::Tensor& oracle, const at::Tensor& sees, DType dtype) {
  Verdict v;
  const at::Tensor got = out.to(at::kCPU).to(at::kDouble), exp = oracle.to(at::kCPU).to(at::kDouble);
  if (got.sizes() != exp.sizes()) {
    v.ok = false;
    std::ostringstream os;
    os << "output shape " << got.sizes() << ", expected " << exp.sizes();
    v.problem = os.str();
    return v;
  }
  const at::Tensor rows = sees.to(at::kCPU).expand_as(exp);
  auto where = [&](int64_t i) {
    std::vector<int64_t> idx(4);
    for (int d = 3; d >= 0; --d) {
      idx[d] = i % exp.size(d);
      i /= exp.size(d);
    }
    return "[b=" + std::to_string(idx[0]) + ",h=" + std::to_string(idx[1]) + ",q=" + std::to_string(idx[2]) +
           ",d=" + std::to_string(idx[3]) + "]";
  };
  const ReferenceRule p = reference_rule(dtype);
  v.reference_error = ref_error;
  v.bound = std::max(p.floor, p.factor * ref_error);
  const at::Tensor diff = (got - exp).abs().masked_fill(rows.logical_not(), 0.0).flatten();
  // NaN propagates through max: one reduction answers both questions in the common case.
  v.error = diff.numel() ? diff.max().item<double>() : 0.0;
  const bool finite_rows = std::isfinite(v.error);
  if (!finite_rows || !got.isfinite().all().item<bool>()) {
    const at::Tensor bad = got.isfinite().logical_not();
    v.ok = false;
    v.problem = std::string(got.isnan().any().item<bool>() ? "NaN" : "Inf") + " at " +
                where(bad.flatten().nonzero()[0][0].item<int64_t>()) + " where the oracle is finite";
    v.only_masked_rows_nonfinite = !bad.logical_and(rows).any().item<bool>();
    if (!v.only_masked_rows_nonfinite) {
      v.error = std::numeric_limits<double>::infinity();
      return v;
    }
    v.problem += " (a fully masked row)";
    if (v.error > v.bound) {  // the rows that see a key are still judged
      v.only_masked_rows_nonfinite = false;
      v.problem = "max error " + sci(v.error) + " > bound " + sci(v.bound) + "; and " + v.problem;
    }
    return v;
  }
  if (v.error > v.bound) {
    v.ok = false;
    v.problem = "max error " + sci(v.error) + " > bound " + sci(v.bound) + " (same-dtype math reference error " +
                sci(v.reference_error) + ") at " + where(diff.argmax().item<int64_t>());
  }
  return v;
}

std::optional<std::string> known_deviation(const std::string& backend, DType dtype) {
  if (backend == "eager" && dtype == DType::Float64)
    return "transformers' eager softmax runs in float32: finfo(float64).min becomes -inf and a fully masked row is NaN "
           "(which then spreads through 0 * NaN in the next layer's P @ V)";
  return std::nullopt;
}

namespace {
// Where a backend's own cache differs from the reference layer's stored state after a step: its row
// count, the first row whose keys or values differ, its count against get_seq_length(); "" when
// they agree bit for bit.
std::string stored_difference(const Storage& s, const CacheLayer& layer) {
  if (s.seq_length() != layer.seq_length())
    return "stored state: seq_length " + std::to_string(s.seq_length()) + ", the reference layer's get_seq_length() " +
           std::to_string(layer.seq_length());
  if (!layer.initialized() || !s.keys().defined())
    return layer.initialized() == s.keys().defined()
               ? ""
               : "stored state: the reference layer holds rows and the cache none, or the other way";
  const at::Tensor k = s.keys().cpu(), v = s.values().cpu();
  if (k.sizes() != layer.keys().sizes())
    return "stored state: " + std::to_string(k.size(2)) + " rows, the reference layer " + std::to_string(layer.keys().size(2));
  for (int64_t r = 0; r < k.size(2); ++r)
    for (auto [name, got, want] :
         {std::tuple<const char*, at::Tensor, at::Tensor>{"keys", k, layer.keys()}, {"values", v, layer.values()}})
      if (!at::equal(got.select(2, r), want.select(2, r)))
        return "stored state: row " + std::to_string(r) + "'s " + name + " differ from the reference layer's (" +
               (want.select(2, r).abs().sum().item<double>() == 0 ? "which is unwritten, zero" : "a written row") + ")";
  return "";
}
}  // namespace

std::vector<report::CaseResult> run_suite(const SuiteOptions& options) {
  std::vector<std::string> selected = options.backends.empty() ? names() : options.backends;
  std::vector<std::unique_ptr<Backend>> backends;
  for (const std::string& n : selected) backends.push_back(make(n, kernel_fault(options.mutation)));
  if (options.device != "cpu" && options.device != "cuda")
    throw std::invalid_argument("unknown device '" + options.device + "' (expected cpu or cuda)");
  const bool available = options.device == "cpu" || at::hasCUDA();
  const at::Device device = options.device == "cuda" ? at::Device(at::kCUDA) : at::Device(at::kCPU);

  std::vector<report::CaseResult> results;
  std::vector<Scenario> scenarios = builtin_scenarios(CacheKind::Static);
  const size_t patterns = scenarios.size();
  if (options.numerics)
    for (const Scenario& n : numeric_scenarios(CacheKind::Static)) scenarios.push_back(n);
  for (size_t index = 0; index < scenarios.size(); ++index)
    for (CacheKind cache : {CacheKind::Static, CacheKind::Dynamic}) {
      // The numerics cases judge kernels, not cache branches: the static layer only (each costs a
      // fill of thousands of tokens).
      if (index >= patterns && cache == CacheKind::Dynamic) continue;
      Scenario sc = scenarios[index];
      for (DType dtype : {DType::Float32, DType::Float16, DType::BFloat16, DType::Float64}) {
        sc.cache = cache;
        sc.dtype = dtype;
        const LayerSpec spec = sc.layer_spec(0);
        // Run every selected backend over the same steps; one result per backend.
        std::vector<report::CaseResult> cases;
        std::vector<const Backend*> chosen;
        for (const auto& be : backends) {
          report::CaseResult r = report::named(report::BackendKey{sc.name, to_string(cache), be->name(), to_string(dtype)});
          r.params = "layer=" + spec.describe() + ",device=" + options.device + ",seed=" + std::to_string(options.seed);
          if (sc.distribution != inputs::Distribution::Mix64)
            r.params += ",D=" + std::to_string(sc.head_dim) + ",inputs=" + inputs::to_string(sc.distribution);
          if (options.select && !options.select(r.id)) continue;
          chosen.push_back(be.get());
          if (options.list_only) {
            results.push_back(r);
            continue;
          }
          if (!available) {
            r.status = report::Status::Skipped;
            r.message = "CUDA is not available in this LibTorch build or on this machine";
          }
          cases.push_back(r);
        }
        if (options.list_only || chosen.empty()) continue;
        // The numerics cases' tensors are many but small (a few queries over a long cache): one
        // intra-op thread, as measured faster than ATen's pool on a loaded machine (docs/backends.md).
        const int threads = at::get_num_threads();
        if (index >= patterns) at::set_num_threads(1);
        if (available) try {
            Scenario run = sc;
            run.seed = options.seed ^ *sc.seed;  // the run's seed varies every built-in scenario's inputs
            DriverOptions driver_options;
            driver_options.mutation = options.mutation;
            driver_options.oracle = true;
            StepDriver driver(run, driver_options);
            std::vector<double> worst(chosen.size(), 0.0), worst_ref(chosen.size(), 0.0), bound(chosen.size(), 0.0);
            std::vector<std::vector<std::string>> notes(chosen.size());
            // The stored-state opt-in: a backend with a cache of its own is fed every step (fill steps
            // too) and answers from it; its rows are held to the reference layer's after each step.
            std::vector<std::unique_ptr<Storage>> stores;
            for (const Backend* be : chosen) stores.push_back(be->storage(spec));
            int64_t judged = 0;
            driver.run([&](LayerStep& v) {
              if (v.update_error) std::rethrow_exception(v.update_error);
              for (auto& s : stores) {
                if (s && v.seen == 0) s->reset();  // a step after no token starts a sequence (a reset step's)
                if (s) s->update(v.keys.to(device), v.values.to(device));
              }
              if (!v.judged) return;  // a numerics case's fill step: only the layer, the oracle and caches are fed
              Call call;
              call.mask = v.mask;
              call.query = v.query.to(device);
              call.keys = v.returned.keys.to(device);
              call.values = v.returned.values.to(device);
              const at::Tensor O = v.oracle_output(), sees = v.sees_any();
              // The same-dtype reference (FlashAttention's rule) is computed from every token so far and
              // the window rule, not from the layer's rows and mask: were it fed the layer's output, a
              // wrong layer or mask would inflate the reference error, and with it the bound.
              const at::Tensor ref =
                  math_reference(call.query, v.all_keys().to(device), v.all_values().to(device), v.visible_keys());
              // Every step is judged, also after a failure or deviation: the first failure is the
              // message, later problems and every deviation go into the detail.
              for (size_t i = 0; i < chosen.size(); ++i) {
                report::CaseResult& r = cases[i];
                Verdict verdict;
                try {
                  const at::Tensor out = stores[i] ? stores[i]->attend(call) : chosen[i]->run(call);
                  verdict = judge(out, ref, O, sees, chosen[i]->judged_as(dtype));
                  if (stores[i] && verdict.ok) {
                    if (std::string why = stored_difference(*stores[i], *v.cache); !why.empty()) {
                      verdict.ok = false;
                      verdict.problem = why;
                    }
                  }
                } catch (const std::exception& e) {
                  verdict.ok = false;
                  verdict.problem = std::string("threw: ") + e.what();
                }
                worst[i] = std::max(worst[i], verdict.error);
                worst_ref[i] = std::max(worst_ref[i], verdict.reference_error);
                bound[i] = std::max(bound[i], verdict.bound);
                const std::string step = "step " + std::to_string(v.step) + " (" + std::to_string(v.q) + " tokens after " +
                                         std::to_string(v.seen) + ")";
                if (!verdict.ok && verdict.only_masked_rows_nonfinite && known_deviation(r.backend, dtype)) {
                  notes[i].push_back(step + ": deviation: " + verdict.problem);
                  if (r.status == report::Status::Pass) {
                    r.status = report::Status::Deviation;
                    r.message = step + ": " + verdict.problem + ": " + *known_deviation(r.backend, dtype);
                  }
                } else if (!verdict.ok) {
                  notes[i].push_back(step + ": FAIL: " + verdict.problem);
                  if (r.status != report::Status::Fail) {
                    r.status = report::Status::Fail;
                    r.message = step + ": " + verdict.problem;
                  }
                }
              }
              ++judged;
            });
            for (size_t i = 0; i < chosen.size(); ++i) {
              cases[i].policy = to_string(Policy::SameDtypeReference);
              cases[i].bound = bound[i];
              cases[i].error = worst[i];
              cases[i].detail = "max error " + sci(worst[i]) + ", same-dtype math reference " + sci(worst_ref[i]) + " over " +
                                std::to_string(judged) + " judged steps";
              for (const std::string& n : notes[i]) cases[i].detail += "\n" + n;
            }
          } catch (const std::exception& e) {
            // The reference or the oracle itself failed: every backend's case fails with the reason,
            // and the suite goes on with the next case.
            for (report::CaseResult& r : cases) {
              r.status = report::Status::Fail;
              r.message = std::string("the reference layer or oracle raised: ") + first_line(e.what());
            }
          }
        if (index >= patterns) at::set_num_threads(threads);
        results.insert(results.end(), cases.begin(), cases.end());
      }
    }
  return results;
}

}  // namespace kvc::backends
