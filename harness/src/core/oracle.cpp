#include "kvconform/oracle.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "kvconform/positions.h"

namespace kvc {

Oracle::Oracle(OracleShape shape, LayerType type, int64_t window, LeftPadding left_padding)
    : shape_(shape), type_(type), window_(window), left_padding_(std::move(left_padding)) {
  if (shape_.heads % shape_.kv_heads != 0)
    throw std::invalid_argument("oracle: heads " + std::to_string(shape_.heads) + " is not a multiple of kv_heads " +
                                std::to_string(shape_.kv_heads));
  if (left_padding_ && static_cast<int64_t>(left_padding_->size()) != shape_.batch)
    throw std::invalid_argument("oracle: left_padding has " + std::to_string(left_padding_->size()) + " rows, batch is " +
                                std::to_string(shape_.batch));
  reset();
}

void Oracle::reset() {
  seen_ = 0;
  keys_.assign(static_cast<size_t>(shape_.batch * shape_.kv_heads), {});
  values_.assign(keys_.size(), {});
}

void Oracle::truncate(int64_t tokens) {
  if (tokens < 0 || tokens > seen_)
    throw std::invalid_argument("oracle: truncate to " + std::to_string(tokens) + " of " + std::to_string(seen_) + " tokens");
  for (size_t bh = 0; bh < keys_.size(); ++bh) {
    keys_[bh].resize(static_cast<size_t>(tokens * shape_.head_dim));
    values_[bh].resize(keys_[bh].size());
  }
  seen_ = tokens;
}

void Oracle::append(const std::vector<double>& k, const std::vector<double>& v, int64_t q) {
  const int64_t d = shape_.head_dim;
  const size_t expected = static_cast<size_t>(shape_.batch * shape_.kv_heads * q * d);
  if (k.size() != expected || v.size() != expected)
    throw std::invalid_argument("oracle: append expects " + std::to_string(expected) + " values");
  for (int64_t bh = 0; bh < shape_.batch * shape_.kv_heads; ++bh) {
    auto first = static_cast<size_t>(bh * q * d), last = first + static_cast<size_t>(q * d);
    keys_[bh].insert(keys_[bh].end(), k.begin() + first, k.begin() + last);
    values_[bh].insert(values_[bh].end(), v.begin() + first, v.begin() + last);
  }
  seen_ += q;
}

double Oracle::key(int64_t b, int64_t h, int64_t t, int64_t d) const {
  return keys_[b * shape_.kv_heads + h][t * shape_.head_dim + d];
}
double Oracle::value(int64_t b, int64_t h, int64_t t, int64_t d) const {
  return values_[b * shape_.kv_heads + h][t * shape_.head_dim + d];
}

bool Oracle::visible(int64_t b, int64_t q_pos, int64_t k_pos) const {
  const int64_t lp = left_padding_ ? (*left_padding_)[b] : 0;
  if (k_pos < lp) return false;  // a padding token is never attended
  return positions::window_allows(type_, window_, lp, q_pos, k_pos);
}

std::vector<double> Oracle::attend(const std::vector<double>& query, int64_t q, const std::vector<double>& sinks) const {
  const int64_t B = shape_.batch, H = shape_.heads, D = shape_.head_dim;
  const int64_t group = H / shape_.kv_heads;
  if (query.size() != static_cast<size_t>(B * H * q * D))
    throw std::invalid_argument("oracle: query has the wrong number of values");
  if (!sinks.empty() && sinks.size() != static_cast<size_t>(H))
    throw std::invalid_argument("oracle: sinks must hold one logit per query head");
  if (q > seen_) throw std::invalid_argument("oracle: more queries than tokens appended");
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  std::vector<double> out(query.size(), 0.0);
  std::vector<double> scores(static_cast<size_t>(seen_));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < q; ++i) {
        const int64_t q_pos = seen_ - q + i;
        const double* qrow = &query[((b * H + h) * q + i) * D];
        double best = -std::numeric_limits<double>::infinity();
        for (int64_t t = 0; t < seen_; ++t) {
          if (!visible(b, q_pos, t)) continue;
          double s = 0;
          for (int64_t d = 0; d < D; ++d) s += qrow[d] * key(b, h / group, t, d);
          scores[t] = s * scale;
          best = std::max(best, scores[t]);
        }
        if (best == -std::numeric_limits<double>::infinity()) continue;  // sees nothing: zeros
        double total = 0;
        if (!sinks.empty()) {  // the sink's share of the softmax, which adds no value
          const double sink = sinks[static_cast<size_t>(h)];
          best = std::max(best, sink);
          total = std::exp(sink - best);
        }
        for (int64_t t = 0; t < seen_; ++t)
          if (visible(b, q_pos, t)) total += (scores[t] = std::exp(scores[t] - best));
        double* orow = &out[((b * H + h) * q + i) * D];
        for (int64_t t = 0; t < seen_; ++t) {
          if (!visible(b, q_pos, t)) continue;
          for (int64_t d = 0; d < D; ++d) orow[d] += scores[t] / total * value(b, h / group, t, d);
        }
      }
  return out;
}

}  // namespace kvc
