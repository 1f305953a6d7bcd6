// The smallest complete kvconform kernel plugin: attention in float64, one query row at a time,
// keys chosen by the window description (or the explicit mask) exactly as plugin_abi.h states it.
#include <cmath>
#include <vector>

#include "kvc_plugin_util.h"
#include "kvconform/plugin_abi.h"

namespace {

bool sees(const kvc_attention_args& a, int64_t b, int64_t i, int64_t j) {
  const kvc_window& w = a.window;
  if (w.kind == KVC_WINDOW_MASK) return w.mask[(b * a.query.shape[2] + i) * a.key.shape[2] + j] != 0;
  const int64_t q = a.query_positions[i], k = a.kv_offset + j, lp = w.left_padding ? w.left_padding[b] : 0;
  if (k > q || k < lp) return false;
  if (w.kind == KVC_WINDOW_SLIDING) return q - k <= w.window_left;
  if (w.kind == KVC_WINDOW_CHUNKED) return (k - lp) / w.chunk_size == (q - lp) / w.chunk_size;  // both >= 0
  return true;
}

kvc_status attention(const kvc_attention_args* args, char* err, size_t err_len) {
  const kvc_attention_args& a = *args;
  kvc_tensor out_t = a.out;  // the caller's output buffer, written through its strides
  const int64_t B = a.query.shape[0], H = a.query.shape[1], nq = a.query.shape[2], D = a.query.shape[3];
  const int64_t group = H / a.key.shape[1], nkv = a.key.shape[2];
  std::vector<double> score(static_cast<size_t>(nkv)), acc(static_cast<size_t>(D));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < nq; ++i) {
        double top = -INFINITY, sum = 0;
        for (int64_t j = 0; j < nkv; ++j) {
          score[j] = -INFINITY;
          if (!sees(a, b, i, j)) continue;
          double s = 0;
          for (int64_t d = 0; d < D; ++d) s += kvc_util::load(a.query, b, h, i, d) * kvc_util::load(a.key, b, h / group, j, d);
          score[j] = s * a.scale;
          top = std::max(top, score[j]);
        }
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t j = 0; j < nkv; ++j) {
          if (score[j] == -INFINITY) continue;
          const double p = std::exp(score[j] - top);
          sum += p;
          for (int64_t d = 0; d < D; ++d) acc[d] += p * kvc_util::load(a.value, b, h / group, j, d);
        }
        for (int64_t d = 0; d < D; ++d) kvc_util::store(out_t, b, h, i, d, sum > 0 ? acc[d] / sum : 0.0);
      }
  return KVC_OK;
}

const kvc_plugin_api api = {KVC_PLUGIN_ABI_VERSION, sizeof(kvc_plugin_api), "naive_attention",
                            "float64 attention, one row at a time (out-of-tree example)", attention,
                            nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};

}  // namespace

extern "C" KVC_PLUGIN_EXPORT const kvc_plugin_api* kvc_plugin_get_api(uint32_t abi_version) {
  return abi_version == KVC_PLUGIN_ABI_VERSION ? &api : nullptr;
}
