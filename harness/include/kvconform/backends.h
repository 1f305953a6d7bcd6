// Attention backends: the ways a sliding-window attention can be computed from a layer's returned
// K/V, each judged against the float64 oracle with one tolerance policy (docs/backends.md). The
// list is registry() (harness/src/backends/backend_registry.cpp): a new backend is its own source file with
// a make_<name>(Fault) factory plus one line there. Backends run on the device of their inputs.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kvconform/masks.h"
#include "kvconform/mutants.h"
#include "kvconform/results.h"
#include "kvconform/seeds.h"
#include "kvconform/tolerance.h"
#include "kvconform/types.h"

namespace kvc::backends {

// One attention call: queries [B, H, q, D], the layer's returned K/V [B, Hkv, kv, D] (rows are the
// tokens [kv_offset, kv_offset + kv_length)) and the step's position-level description.
struct Call {
  at::Tensor query, keys, values;
  MaskRequest mask;
};

// Deliberately wrong windowed kernels, proving that the checks catch the bug class.
enum class Fault {
  None,
  WindowOffByOne,   // window_size = (W, 0): one key too many, the most reported window bug
  FirstRowPadding,  // every batch row uses row 0's left padding (a batch-indexing bug)
  IgnoreKvOffset,   // keys taken to start at position 0 whatever kv_offset says
  // Numerics (the kernel mutants of mutants.h, caught by numeric_scenarios; CPU loop only, other
  // devices compute these on the CPU):
  SoftmaxInInputDtype,  // scores, running max, exp and the softmax sum rounded to the input dtype; P@V in float32
  HalfAccumulation,     // QK dot product, softmax sum and P@V accumulators rounded to the 16-bit input dtype
  NoMaxSubtraction,     // p = exp(score): no running max subtracted, overflows on large logits
  // A backend's own cache (Storage, below): a reset keeps the previous sequence's rows in the slots
  // the new one has not written yet (where they should be zero), which its attention never reads.
  StaleRowsAfterReset,
};
// The backends' fault for a kernel mutant (Mutation::Kernel*: the windowed kernel's) or a storage
// mutant (storage_mutations(): the storing backend's cache); Fault::None for any other.
Fault kernel_fault(Mutation mutation);

// The K/V cache of a backend that keeps one (as a paged or ring kernel keeps its blocks), for one
// layer. A backend opts in to the stored-state check by making one (Backend::storage): the backend
// suite then feeds it each step's new K/V, takes the step's attention from it (`attend`), and after
// every step holds its rows and count, bit for bit, to the reference layer's stored K/V and
// get_seq_length(), as golden replay holds the reference to a fixture's `stored` and the plugin
// checks a plugin's cache_read. Its rows are laid out as the reference layer of the same spec lays
// out its own (docs/backends.md, "Stored state").
class Storage {
 public:
  virtual ~Storage() = default;
  virtual void reset() = 0;  // a new sequence
  // Stores the step's new keys and values [B, Hkv, q, D].
  virtual void update(const at::Tensor& keys, const at::Tensor& values) = 0;
  // Attention of the call's queries over the rows it held before the last update and that update's
  // tokens (the call's own K/V are not read), [B, H, q, D] in the query's dtype.
  virtual at::Tensor attend(const Call& call) const = 0;
  virtual at::Tensor keys() const = 0;  // the stored rows [B, Hkv, rows, D]; undefined before the first update
  virtual at::Tensor values() const = 0;
  virtual int64_t seq_length() const = 0;  // tokens stored since the last reset
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Output [B, H, q, D] in the query's dtype, on the query's device.
  virtual at::Tensor run(const Call& call) const = 0;
  // The dtype whose tolerance judges this backend for inputs of `input`: its own, unless the
  // backend deliberately computes in lower precision (transformers' eager softmax runs in float32).
  virtual DType judged_as(DType input) const { return input; }
  // Its own cache for one layer of `spec`, where it keeps one (the stored-state opt-in); nullptr for
  // a backend that computes from the layer's K/V alone.
  virtual std::unique_ptr<Storage> storage(const LayerSpec& spec) const { return nullptr; }
};

// One entry of the backend registry: what --backend, --list, the reports and docs/backends.md
// name it by.
struct BackendInfo {
  std::string name;
  std::string description;  // one line
  std::function<std::unique_ptr<Backend>(Fault)> make;
};
const std::vector<BackendInfo>& registry();

std::vector<std::string> names();  // registry order
// Throws std::invalid_argument for an unknown name (listing the known ones). A fault applies to
// the windowed kernel only.
std::unique_ptr<Backend> make(const std::string& name, Fault fault = Fault::None);
std::vector<std::unique_ptr<Backend>> all();

// The kernel convention of a window, as FlashAttention / vLLM write it.
struct KernelWindow {
  LayerType type = LayerType::Full;
  int64_t left = -1;                  // sliding: window_size[0] = W - 1 earlier keys besides the query; -1 unbounded
  int64_t chunk = 0;                  // chunked: attention_chunk_size
  std::vector<int64_t> left_padding;  // per batch row (empty: none); keys before it are never seen
};
KernelWindow kernel_window(const MaskRequest& m);  // sliding_window W -> left = W - 1

// The mask-free kernel itself: the keys a query at absolute position p sees are found by index
// arithmetic over [kv_offset, kv_offset + kv): p - left <= key <= p (or the key's chunk), key >= lp.
at::Tensor windowed(const at::Tensor& query, const at::Tensor& keys, const at::Tensor& values,
                    const std::vector<int64_t>& query_positions, int64_t kv_offset, const KernelWindow& window,
                    Fault fault = Fault::None);

// The same-dtype math reference of the tolerance policy: matmul, masked softmax and matmul all in
// the input dtype (no upcast), rows that see nothing zero. Its error against the oracle is what
// the dtype itself costs. sinks (optional, [heads]): per-head logits that join each row's softmax
// without a value, as gpt-oss's eager attention concatenates them (Oracle::attend's sinks).
at::Tensor math_reference(const at::Tensor& query, const at::Tensor& keys, const at::Tensor& values,
                          const at::Tensor& boolean_mask, const at::Tensor& sinks = {});

struct Verdict {
  bool ok = true;
  double error = 0;            // max |out - oracle| over rows that see a key
  double reference_error = 0;  // the same for math_reference
  double bound = 0;
  std::string problem;  // empty when ok: "max error 3.1e-02 > bound 1.0e-03 at [b=0,h=1,q=2,d=0]", "NaN at ..."
  bool only_masked_rows_nonfinite = false;  // the failure is a NaN/Inf in rows that see no key, nothing else
};
// oracle: float64 [B, H, q, D]; sees: bool [B, 1, q, 1], whether the query sees at least one key.
// Rows that see a key are compared with the oracle; a fully masked row must be finite (its value is
// not compared: eager gives the mean of V there, SDPA and FlashAttention zeros). Any NaN/Inf fails.
Verdict judge(const at::Tensor& out, const at::Tensor& reference, const at::Tensor& oracle, const at::Tensor& sees, DType dtype);

// The same with the math reference's error computed once per step and shared between backends.
double reference_error(const at::Tensor& reference, const at::Tensor& oracle, const at::Tensor& sees);
Verdict judge(const at::Tensor& out, double reference_error, const at::Tensor& oracle, const at::Tensor& sees, DType dtype);

// Where a backend faithful to transformers breaks the policy because transformers does: eager in
// float64 (its softmax runs in float32, finfo(float64).min becomes -inf, a fully masked row is NaN).
// Such a failure is reported as a Deviation, not a Fail, when it is confined to fully masked rows.
std::optional<std::string> known_deviation(const std::string& backend, DType dtype);

// A fixed suite for the CLI: built-in step patterns (every cache branch, sliding/chunked/full,
// left padding, GQA) x every dtype x the selected backends on one device, each case judged on
// every step. device "cpu" or "cuda"; on "cuda" without CUDA every case is SKIP.
struct SuiteOptions {
  std::string device = "cpu";
  std::vector<std::string> backends;  // empty: all
  uint64_t seed = kvc::seeds::kDefaultSeed;
  // A deliberately wrong reference layer or mask (--mutant): the suite must then fail. A kernel
  // mutant (is_kernel_mutation) leaves the reference alone and makes `windowed` compute wrongly.
  Mutation mutation = Mutation::None;
  // Run the numerics cases (numeric_scenarios) after the built-in step patterns.
  bool numerics = true;
  // Over the registry id "backend/<scenario>/<cache>/<backend>/<dtype>" (report::id_of); empty = all.
  std::function<bool(const std::string& id)> select;
  bool list_only = false;  // run nothing: one Pass result per selected case, for --list
};
std::vector<report::CaseResult> run_suite(const SuiteOptions& options);

}  // namespace kvc::backends
