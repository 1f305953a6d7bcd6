// windowed_cache: the windowed kernel over a K/V cache of its own, the backend that opts in to the
// stored-state check (backends::Storage). Its cache keeps the rows positions.h says a layer of the
// spec keeps (written from the documented rules, not from the reference layers), laid out as the
// layer lays them out (unwritten rows zero); the step's attention reads that cache and the step's
// new tokens, never the layer's K/V. Without its cache (a caller that passes only the layer's K/V:
// the property campaign's backends_vs_oracle) it is the windowed kernel over the call's K/V.
#include <ATen/ATen.h>

#include <algorithm>
#include <stdexcept>

#include "kvconform/backends.h"
#include "kvconform/positions.h"

namespace kvc::backends {

namespace {

class WindowedCacheStorage : public Storage {
 public:
  WindowedCacheStorage(LayerSpec spec, Fault fault) : spec_(spec), fault_(fault) {}

  void reset() override {
    // The stale-rows mutant keeps the buffers; the next sequence's unwritten rows then read them.
    if (fault_ == Fault::StaleRowsAfterReset) stale_k_ = keys_, stale_v_ = values_;
    keys_ = values_ = at::Tensor();
    rows_.clear();
    seen_ = 0;
  }

  void update(const at::Tensor& k, const at::Tensor& v) override {
    // What the cache held (its written rows, in token order) and the new tokens: tokens [first_, seen_ + q).
    std::vector<int64_t> held;
    for (size_t r = 0; r < rows_.size(); ++r)
      if (rows_[r]) held.push_back(static_cast<int64_t>(r));
    std::sort(held.begin(), held.end(), [&](int64_t a, int64_t b) { return *rows_[a] < *rows_[b]; });
    first_ = held.empty() ? seen_ : *rows_[held.front()];
    if (!held.empty() && *rows_[held.back()] - first_ + 1 != static_cast<int64_t>(held.size()))
      throw std::logic_error("windowed_cache: the cache holds tokens that are not consecutive");
    const at::Tensor index = at::tensor(held, at::TensorOptions().dtype(at::kLong)).to(k.device());  // rows in token order
    attended_k_ = held.empty() ? k.clone() : at::cat({keys_.index_select(2, index), k}, 2);
    attended_v_ = held.empty() ? v.clone() : at::cat({values_.index_select(2, index), v}, 2);
    seen_ += k.size(2);
    // The new layout: each row holds its token from what was attended, or zeros.
    rows_ = positions::stored_rows(spec_, seen_);
    std::vector<int64_t> written, source;
    for (size_t r = 0; r < rows_.size(); ++r)
      if (rows_[r]) written.push_back(static_cast<int64_t>(r)), source.push_back(*rows_[r] - first_);
    const std::vector<int64_t> shape{k.size(0), k.size(1), static_cast<int64_t>(rows_.size()), k.size(3)};
    // Unwritten rows are zero (the stale-rows mutant: what the buffer held before the reset).
    const bool stale = stale_k_.defined() && stale_k_.sizes() == at::IntArrayRef(shape);
    at::Tensor nk = stale ? stale_k_.clone() : at::zeros(shape, k.options());
    at::Tensor nv = stale ? stale_v_.clone() : at::zeros(shape, k.options());
    const auto on = [&](const std::vector<int64_t>& x) {
      return at::tensor(x, at::TensorOptions().dtype(at::kLong)).to(k.device());
    };
    if (!written.empty()) {
      nk.index_copy_(2, on(written), attended_k_.index_select(2, on(source)));
      nv.index_copy_(2, on(written), attended_v_.index_select(2, on(source)));
    }
    keys_ = nk, values_ = nv;
  }

  at::Tensor attend(const Call& c) const override {
    return windowed(c.query, attended_k_, attended_v_, c.mask.query_positions, first_, kernel_window(c.mask));
  }

  at::Tensor keys() const override { return keys_; }
  at::Tensor values() const override { return values_; }
  int64_t seq_length() const override { return seen_; }

 private:
  LayerSpec spec_;
  Fault fault_;
  at::Tensor keys_, values_, stale_k_, stale_v_, attended_k_, attended_v_;
  positions::Rows rows_;  // the token each stored row holds
  int64_t seen_ = 0, first_ = 0;
};

class WindowedCache : public Backend {
 public:
  explicit WindowedCache(Fault fault) : fault_(fault) {}
  std::string name() const override { return "windowed_cache"; }
  at::Tensor run(const Call& c) const override {
    return windowed(c.query, c.keys, c.values, c.mask.query_positions, c.mask.sizes.kv_offset, kernel_window(c.mask));
  }
  std::unique_ptr<Storage> storage(const LayerSpec& spec) const override {
    return std::make_unique<WindowedCacheStorage>(spec, fault_);
  }

 private:
  Fault fault_;
};

}  // namespace

std::unique_ptr<Backend> make_windowed_cache(Fault fault) { return std::make_unique<WindowedCache>(fault); }

}  // namespace kvc::backends
