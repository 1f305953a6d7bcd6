// The ground truth for attention: a deliberately naive full-attention reference. It keeps every
// key and value ever written, computes in float64 with plain loops (no LibTorch), and applies the
// window rule per query over absolute positions. Short enough to read in one sitting.
#pragma once

#include <cstdint>
#include <vector>

#include "kvconform/types.h"

namespace kvc {

struct OracleShape {
  int64_t batch = 1;
  int64_t heads = 1;     // query heads
  int64_t kv_heads = 1;  // divides heads (GQA/MQA share a kv head between heads / kv_heads queries)
  int64_t head_dim = 1;
};

class Oracle {
 public:
  // left_padding: per-row leading pad tokens that no query may attend to (nullopt = no padding).
  Oracle(OracleShape shape, LayerType type, int64_t window, LeftPadding left_padding);

  // Appends q tokens; k and v are row-major [batch, kv_heads, q, head_dim].
  void append(const std::vector<double>& k, const std::vector<double>& v, int64_t q);
  int64_t seen() const { return seen_; }
  // Keeps the first `tokens` tokens (a crop's rollback); throws std::invalid_argument past seen().
  void truncate(int64_t tokens);

  // Whether the query at absolute position q_pos of row b may see the key at k_pos.
  bool visible(int64_t b, int64_t q_pos, int64_t k_pos) const;

  // Attention of queries at absolute positions [seen - q, seen) (the last q appended tokens).
  // query: row-major [batch, heads, q, head_dim]; result has the same layout. A query that may
  // see no key at all gets zeros (the FlashAttention convention). sinks: one logit per query head
  // that joins every row's softmax without a value (gpt-oss's attention sinks: the eager forward's
  // softmax over [scores, sink], the sink's column dropped); empty: none.
  std::vector<double> attend(const std::vector<double>& query, int64_t q, const std::vector<double>& sinks = {}) const;

  void reset();

 private:
  double key(int64_t b, int64_t h, int64_t t, int64_t d) const;
  double value(int64_t b, int64_t h, int64_t t, int64_t d) const;

  OracleShape shape_;
  LayerType type_;
  int64_t window_;
  LeftPadding left_padding_;
  int64_t seen_ = 0;
  // Per (batch, kv_head): every token's row, appended in order.
  std::vector<std::vector<double>> keys_, values_;
};

}  // namespace kvc
