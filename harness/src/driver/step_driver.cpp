#include "kvconform/step_driver.h"

#include <ATen/ATen.h>

#include "kvconform/fastpath.h"
#include "kvconform/tensors.h"

namespace kvc {

namespace {

// A position-tag tensor [1, 1, n, 1] float64 holding token + 1 (0 = never written).
positions::Rows rows_of_tags(const at::Tensor& tags) {
  positions::Rows rows;
  for (double v : values_of(tags)) rows.push_back(v == 0 ? std::nullopt : std::optional<int64_t>(static_cast<int64_t>(v) - 1));
  return rows;
}

// Concatenates per-step blocks [B, H, q_s, D] (row-major) along the token axis.
at::Tensor concat(const std::vector<std::vector<double>>& blocks, const std::vector<int64_t>& tokens, int64_t batch,
                  int64_t heads, int64_t head_dim, DType dtype) {
  std::vector<at::Tensor> parts;
  for (size_t s = 0; s < blocks.size(); ++s) parts.push_back(from_values(blocks[s], {batch, heads, tokens[s], head_dim}, dtype));
  return at::cat(parts, 2);
}

std::vector<int64_t> history_tokens(const std::vector<std::vector<double>>& blocks, const Scenario& c) {
  std::vector<int64_t> tokens;
  for (const auto& block : blocks) tokens.push_back(static_cast<int64_t>(block.size()) / (c.batch * c.kv_heads * c.head_dim));
  return tokens;
}

}  // namespace

namespace {
positions::Rows rows_of_tokens(const fast::TokenRows& tokens) {
  positions::Rows rows;
  rows.reserve(tokens.size());
  for (int64_t t : tokens) rows.push_back(t == fast::kUnwritten ? std::nullopt : std::optional<int64_t>(t));
  return rows;
}
}  // namespace

struct StepDriver::Impl {
  std::vector<std::unique_ptr<CacheLayer>> layers, tags;
  std::vector<fast::Layer> fast_layers;
  fast::TokenRows fast_returned;
  std::vector<std::unique_ptr<Oracle>> oracles;
  std::vector<int64_t> failed_at;
  // Per driven layer: every step's K and V since the last reset, and the step sizes.
  std::vector<std::vector<std::vector<double>>> key_history, value_history;
};

StepDriver::StepDriver(const Scenario& scenario, DriverOptions options)
    : scenario_(scenario), options_(std::move(options)), impl_(std::make_unique<Impl>()) {
  layers_ = options_.layers;
  if (layers_.empty())
    for (size_t l = 0; l < scenario_.layer_types.size(); ++l)
      layers_.push_back({scenario_.layer_spec(l), l, "layer " + std::to_string(l)});
  for (const DrivenLayer& d : layers_) {
    impl_->layers.push_back(make_layer(d.spec, options_.behaviours, options_.mutation));
    // The tag shadow is the same implementation (mutant included), so messages name real rows.
    if (options_.track_rows && options_.fast_rows)
      impl_->fast_layers.emplace_back(d.spec, options_.behaviours, options_.mutation);
    else if (options_.track_rows) impl_->tags.push_back(make_layer(d.spec, options_.behaviours, options_.mutation));
    if (options_.oracle)
      impl_->oracles.push_back(
          std::make_unique<Oracle>(OracleShape{scenario_.batch, scenario_.heads, scenario_.kv_heads, scenario_.head_dim},
                                   d.spec.type, scenario_.window, scenario_.left_padding));
  }
  impl_->failed_at.assign(layers_.size(), -1);
  impl_->key_history.resize(layers_.size());
  impl_->value_history.resize(layers_.size());
}

StepDriver::~StepDriver() = default;

const CacheLayer& StepDriver::layer(size_t i) const { return *impl_->layers.at(i); }

void StepDriver::run(const Check& check, const OnReset& on_reset) {
  for (const Step& s : scenario_.steps) step(s, check, on_reset);
}

void StepDriver::start_sequence(size_t s, const OnReset& on_reset) {
  for (auto& f : impl_->fast_layers) f.reset();
  for (auto& o : impl_->oracles) o->reset();
  for (auto& h : impl_->key_history) h.clear();
  for (auto& h : impl_->value_history) h.clear();
  seen_ = 0;
  fed_ = 0;
  if (on_reset) on_reset(s);
}

void StepDriver::call_step(size_t s, const Step& st, const Check& check, const OnReset& on_reset) {
  const LayerCall& call = *st.call;
  if (!options_.record_calls && !call.resets())
    throw StepFailure(
        s, 0, "a " + call.show() + " step: this suite replays no call steps other than reset (golden replay judges them)");
  if (!impl_->fast_layers.empty())
    throw StepFailure(
        s, 0, "a " + call.show() + " step: the fast path's rows follow updates and resets only (track rows with tag layers)");
  for (size_t l = 0; l < layers_.size(); ++l) {
    CacheLayer& layer = *impl_->layers[l];
    LayerStep v;
    v.step = s;
    v.layer = l;
    v.driven = &layers_[l];
    v.scenario = &scenario_;
    v.seen = seen_;
    v.call = &call;
    v.failed_at = impl_->failed_at[l];
    v.cache = &layer;
    if (v.failed_at < 0) {
      v.seq_length_before = layer.seq_length();
      try {
        call.method->call(layer, call.argument);
      } catch (const PythonError&) {  // what transformers raises there: the layer goes on
        v.call_error = std::current_exception();
      } catch (const std::invalid_argument&) {  // a ValueError of transformers'
        v.call_error = std::current_exception();
      } catch (const std::exception& e) {  // the reference cannot make the call (an unmodelled release)
        throw StepFailure(s, l, e.what());
      }
      if (!impl_->tags.empty()) {
        try {
          call.method->call(*impl_->tags[l], call.argument);
        } catch (const std::exception&) {  // raises as the layer does; the rows are read as they are
        }
        if (impl_->tags[l]->initialized()) v.stored_rows = rows_of_tags(impl_->tags[l]->keys());
      }
      v.seq_length_after = layer.seq_length();
    }
    if (options_.record_calls) check(v);
  }
  if (call.resets()) return start_sequence(s, on_reset);
  seen_ = call.method->positions_after(seen_, call.argument);
  // The oracle and the K/V history keep the tokens the case still counts: the next tokens extend
  // those (a layer that kept a removed row then differs from the oracle).
  for (auto& o : impl_->oracles)
    if (o->seen() > seen_) o->truncate(seen_);
  for (size_t l = 0; l < impl_->key_history.size(); ++l)
    for (auto* history : {&impl_->key_history[l], &impl_->value_history[l]}) {
      const int64_t per_token = scenario_.batch * scenario_.kv_heads * scenario_.head_dim;
      int64_t held = 0;
      for (const auto& block : *history) held += static_cast<int64_t>(block.size()) / per_token;
      while (held > seen_ && !history->empty()) {
        std::vector<double>& block = history->back();
        const int64_t q = static_cast<int64_t>(block.size()) / per_token, drop = std::min(q, held - seen_);
        if (drop == q) {
          history->pop_back();
        } else {  // [B, Hkv, q, D] row-major: keep each (batch, head)'s first q - drop tokens
          std::vector<double> kept;
          const int64_t d = scenario_.head_dim, keep = q - drop;
          for (int64_t bh = 0; bh < scenario_.batch * scenario_.kv_heads; ++bh)
            kept.insert(kept.end(), block.begin() + bh * q * d, block.begin() + (bh * q + keep) * d);
          block = std::move(kept);
        }
        held -= drop;
      }
    }
}

void StepDriver::step(const Step& st, const Check& check, const OnReset& on_reset) {
  const size_t s = step_index_++;
  const Scenario& c = scenario_;
  if (st.is_call()) return call_step(s, st, check, on_reset);
  if (st.is_reset()) {  // a new sequence, as on a new layer (the layers' own reset is a call step)
    for (auto& l : impl_->layers) l->clear();
    for (auto& t : impl_->tags) t->clear();
    return start_sequence(s, on_reset);
  }
  const int64_t q = st.tokens;
  std::vector<int64_t> arange(static_cast<size_t>(q));
  for (int64_t i = 0; i < q; ++i) arange[i] = seen_ + i;
  // The cache_position API passes cache_position (the step's, or arange from the tokens so far) to
  // get_mask_sizes and update; the query_length API has none.
  std::optional<std::vector<int64_t>> cache_position;
  if (options_.behaviours.cache_api == CacheApi::CachePosition) cache_position = st.cache_position.value_or(arange);
  auto inputs_of = [&](inputs::TensorId id, uint64_t input_layer) {
    const auto& given = id == inputs::kQuery ? c.explicit_q : id == inputs::kKey ? c.explicit_k : c.explicit_v;
    if (!given.empty()) return given.at(s);
    // An explicit case without q takes its queries from the generator with seed 0.
    return inputs::block(c.seed.value_or(0), id, input_layer, c.batch, id == inputs::kQuery ? c.heads : c.kv_heads, fed_, q,
                         c.head_dim, c.distribution);
  };
  for (size_t l = 0; l < layers_.size(); ++l) {
    CacheLayer& layer = *impl_->layers[l];
    LayerStep v;
    v.step = s;
    v.layer = l;
    v.driven = &layers_[l];
    v.scenario = &c;
    v.seen = seen_;
    v.q = q;
    v.judged = st.judged;
    v.cache_position = cache_position;
    v.failed_at = impl_->failed_at[l];
    v.cache = &layer;
    if (v.failed_at >= 0) {
      check(v);
      continue;
    }
    try {
      const uint64_t in = layers_[l].input_layer;
      // A fill step (Step::judged false) asks no attention of anyone: no queries drawn.
      if (st.judged) v.query_values = inputs_of(inputs::kQuery, in);
      v.key_values = inputs_of(inputs::kKey, in);
      v.value_values = inputs_of(inputs::kValue, in);
      if (st.judged) v.query = from_values(v.query_values, {c.batch, c.heads, q, c.head_dim}, c.dtype);
      v.keys = from_values(v.key_values, {c.batch, c.kv_heads, q, c.head_dim}, c.dtype);
      v.values = from_values(v.value_values, {c.batch, c.kv_heads, q, c.head_dim}, c.dtype);
      v.seq_length_before = layer.seq_length();
      v.query_start = options_.behaviours.cache_api == CacheApi::QueryLength ? v.seq_length_before : seen_;
      v.sizes = cache_position ? layer.mask_sizes_for_positions(*cache_position) : layer.get_mask_sizes(q);
      assign_mask_request(v.mask, layer.spec(), options_.behaviours, c.batch, c.left_padding, v.query_start, q, cache_position,
                          v.sizes, options_.mutation);
      v.mask.seen_after = seen_ + q;  // the 2D attention_mask covers the case's tokens
      v.lost_keys = positions::loses_window_keys(layer.spec(), seen_, q, c.left_padding.value_or(std::vector<int64_t>{}));
      if (options_.oracle) {
        impl_->oracles[l]->append(v.key_values, v.value_values, q);
        impl_->key_history[l].push_back(v.key_values);
        impl_->value_history[l].push_back(v.value_values);
        v.oracle = impl_->oracles[l].get();
        v.key_history = &impl_->key_history[l];
        v.value_history = &impl_->value_history[l];
      }
      try {
        v.returned = layer.update(v.keys, v.values, cache_position);
      } catch (const std::exception&) {
        v.update_error = std::current_exception();
        impl_->failed_at[l] = static_cast<int64_t>(s);
      }
      if (v.ran()) {
        v.seq_length_after = layer.seq_length();
        if (options_.track_rows && options_.fast_rows) {
          fast::Layer& f = impl_->fast_layers[l];
          f.update(q, impl_->fast_returned, cache_position ? &*cache_position : nullptr);
          v.returned_rows = rows_of_tokens(impl_->fast_returned);
          v.stored_rows = rows_of_tokens(f.stored());
        } else if (options_.track_rows) {
          const at::Tensor tag = at::arange(seen_ + 1, seen_ + q + 1, at::kDouble).view({1, 1, q, 1});
          v.returned_rows = rows_of_tags(impl_->tags[l]->update(tag, tag, cache_position).keys);
          v.stored_rows = rows_of_tags(impl_->tags[l]->keys());
        }
      }
    } catch (const std::exception& e) {
      throw StepFailure(s, l, e.what());
    }
    check(v);
  }
  seen_ += q;
  fed_ += q;
}

std::string LayerStep::where() const {
  if (call) return "step " + std::to_string(step) + " (" + call->show() + " after " + std::to_string(seen) + " tokens)";
  const std::string what = seen == 0 ? "Prefill(" + std::to_string(q) + ")"
                           : q == 1  ? "Decode after " + std::to_string(seen) + " tokens"
                                     : "Extend(" + std::to_string(q) + ") after " + std::to_string(seen) + " tokens";
  return "step " + std::to_string(step) + " (" + what + ")";
}

namespace {
void need_oracle(const Oracle* o) {
  if (!o) throw std::logic_error("LayerStep: the oracle was not requested (DriverOptions::oracle)");
}
}  // namespace

at::Tensor LayerStep::oracle_output(const std::vector<double>& sinks) const {
  need_oracle(oracle);
  const Scenario& c = *scenario;
  return from_values(oracle->attend(query_values, q, sinks), {c.batch, c.heads, q, c.head_dim}, DType::Float64);
}

bool LayerStep::visible(int64_t b, int64_t query_position, int64_t key_position) const {
  need_oracle(oracle);
  return oracle->visible(b, query_position, key_position);
}

at::Tensor LayerStep::visible_keys() const {
  need_oracle(oracle);
  const int64_t B = scenario->batch, n = seen + q;
  std::vector<double> v;
  v.reserve(static_cast<size_t>(B * q * n));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < q; ++i)
      for (int64_t k = 0; k < n; ++k) v.push_back(oracle->visible(b, seen + i, k));
  return from_values(v, {B, 1, q, n}, DType::Float64).to(at::kBool);
}

at::Tensor LayerStep::sees_any() const {
  need_oracle(oracle);
  const int64_t B = scenario->batch;
  std::vector<double> v;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < q; ++i) {
      bool any = false;
      for (int64_t k = 0; k <= seen + i && !any; ++k) any = oracle->visible(b, seen + i, k);
      v.push_back(any);
    }
  return from_values(v, {B, 1, q, 1}, DType::Float64).to(at::kBool);
}

at::Tensor LayerStep::all_keys() const {
  need_oracle(oracle);
  return concat(*key_history, history_tokens(*key_history, *scenario), scenario->batch, scenario->kv_heads, scenario->head_dim,
                scenario->dtype);
}

at::Tensor LayerStep::all_values() const {
  need_oracle(oracle);
  return concat(*value_history, history_tokens(*value_history, *scenario), scenario->batch, scenario->kv_heads,
                scenario->head_dim, scenario->dtype);
}

}  // namespace kvc
