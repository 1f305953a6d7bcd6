// Example plugin (docs/plugins.md): a ring-buffer KV cache layer with transformers' observable
// behaviour and a mask-free windowed attention kernel.
//
// The cache keeps `capacity` rows per (batch, kv head) in a ring: a decoded token costs one row
// write (O(1)), never a roll of the buffer; the logical order (oldest first) is index arithmetic,
// (start + i) % capacity. Capacity follows transformers: static sliding min(W, max_cache_len),
// dynamic sliding W - 1, static full max_cache_len, dynamic full unbounded (the ring grows).
//
// The same source builds the mutant plugins, each with one deliberate bug (KVC_MUTANT_*), which the
// host must catch: see plugins/CMakeLists.txt.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <thread>
#include <vector>

#include "../common/kvc_plugin_util.h"
#include "kvconform/plugin_abi.h"

using kvc_util::fail;

struct kvc_cache {
  kvc_cache_config cfg;
  int64_t capacity = 0;             // rows kept; -1 = unbounded (dynamic full)
  int64_t slots = 0;                // rows allocated in the ring
  std::vector<unsigned char> k, v;  // [batch, kv_heads, slots, head_dim], dtype elements
  int64_t start = 0;                // slot of the oldest kept row
  int64_t count = 0;                // rows kept
  int64_t seen = 0;                 // tokens written since the last reset (cumulative_length)
  int64_t previous_seen = 0;
};

namespace {

size_t row_bytes(const kvc_cache* c) { return static_cast<size_t>(c->cfg.head_dim) * kvc_util::element_size(c->cfg.dtype); }

unsigned char* slot_ptr(std::vector<unsigned char>& buf, const kvc_cache* c, int64_t b, int64_t h, int64_t slot) {
  return buf.data() + static_cast<size_t>((b * c->cfg.kv_heads + h) * c->slots + slot) * row_bytes(c);
}

// Slot of the i-th kept row, oldest first.
int64_t slot_of(const kvc_cache* c, int64_t i) {
#ifdef KVC_MUTANT_WRAP_ORDER
  return i;  // BUG: physical order; wrong as soon as the ring has wrapped
#else
  return (c->start + i) % c->slots;
#endif
}

// get_mask_sizes after `old` tokens for q new ones (transformers 5.x, cache_utils.py).
void mask_sizes(const kvc_cache* c, int64_t old, int64_t q, int64_t* kv_length, int64_t* kv_offset) {
  const kvc_cache_config& f = c->cfg;
  if (f.layer_type == KVC_LAYER_FULL) {
    *kv_offset = 0;
    *kv_length = f.cache == KVC_CACHE_STATIC ? f.max_cache_len : old + q;
    return;
  }
  if (f.cache == KVC_CACHE_STATIC) {
    const int64_t C = c->capacity;
    *kv_offset = std::max<int64_t>(old - C + 1, 0);
    *kv_length = old >= C ? C + q - 1 : (old + q > C ? old + q : C);
  } else {
    const int64_t W = f.window;
    *kv_offset = std::max<int64_t>(old - W + 1, 0);
    *kv_length = old >= W ? W - 1 + q : old + q;
  }
}

void copy_in(kvc_cache* c, std::vector<unsigned char>& buf, int64_t slot, const kvc_tensor& src, int64_t row) {
  const size_t es = kvc_util::element_size(c->cfg.dtype);
  for (int64_t b = 0; b < c->cfg.batch; ++b)
    for (int64_t h = 0; h < c->cfg.kv_heads; ++h) {
      unsigned char* dst = slot_ptr(buf, c, b, h, slot);
      for (int64_t d = 0; d < c->cfg.head_dim; ++d) std::memcpy(dst + d * es, kvc_util::at(src, b, h, row, d), es);
    }
}

// Copies one row (all batch rows and heads) into row `row` of dst; src is a ring slot, an input row,
// or nothing (zeros).
void copy_out(const kvc_cache* c, kvc_tensor& dst, int64_t row, const std::vector<unsigned char>* ring, int64_t slot,
              const kvc_tensor* input, int64_t input_row) {
  const size_t es = kvc_util::element_size(c->cfg.dtype);
  for (int64_t b = 0; b < c->cfg.batch; ++b)
    for (int64_t h = 0; h < c->cfg.kv_heads; ++h)
      for (int64_t d = 0; d < c->cfg.head_dim; ++d) {
        void* out = kvc_util::at_mut(dst, b, h, row, d);
        if (ring)
          std::memcpy(
              out, ring->data() + static_cast<size_t>((b * c->cfg.kv_heads + h) * c->slots + slot) * row_bytes(c) + d * es, es);
        else if (input) std::memcpy(out, kvc_util::at(*input, b, h, input_row, d), es);
        else std::memset(out, 0, es);
      }
}

// Unbounded layers: double the ring, re-laid out oldest first.
void grow(kvc_cache* c) {
  const int64_t slots = std::max<int64_t>(16, 2 * c->slots);
  std::vector<unsigned char> k(static_cast<size_t>(c->cfg.batch * c->cfg.kv_heads * slots) * row_bytes(c));
  std::vector<unsigned char> v(k.size());
  for (int64_t b = 0; b < c->cfg.batch; ++b)
    for (int64_t h = 0; h < c->cfg.kv_heads; ++h)
      for (int64_t i = 0; i < c->count; ++i) {
        const size_t from = static_cast<size_t>((b * c->cfg.kv_heads + h) * c->slots + (c->start + i) % c->slots) * row_bytes(c);
        const size_t to = static_cast<size_t>((b * c->cfg.kv_heads + h) * slots + i) * row_bytes(c);
        std::memcpy(k.data() + to, c->k.data() + from, row_bytes(c));
        std::memcpy(v.data() + to, c->v.data() + from, row_bytes(c));
      }
  c->k.swap(k);
  c->v.swap(v);
  c->slots = slots;
  c->start = 0;
}

bool same_layout(const kvc_cache* c, const kvc_tensor& t, int64_t rows) {
  return t.dtype == c->cfg.dtype && t.shape[0] == c->cfg.batch && t.shape[1] == c->cfg.kv_heads && t.shape[2] == rows &&
         t.shape[3] == c->cfg.head_dim;
}

kvc_status cache_create(const kvc_cache_config* cfg, kvc_cache** out, char* err, size_t err_len) {
  if (!cfg || !out) return fail(KVC_ERR_INVALID, err, err_len, "null argument");
#ifdef KVC_MUTANT_UNSUPPORTED  // supports nothing: a run over it checks nothing, which must not pass
  return fail(KVC_ERR_UNSUPPORTED, err, err_len, "this plugin supports no layer");
#endif
  if (cfg->batch <= 0 || cfg->kv_heads <= 0 || cfg->head_dim <= 0)
    return fail(KVC_ERR_INVALID, err, err_len, "batch, kv_heads and head_dim must be positive");
  int64_t capacity;
  if (cfg->layer_type == KVC_LAYER_FULL) {
    capacity = cfg->cache == KVC_CACHE_STATIC ? cfg->max_cache_len : -1;
  } else if (cfg->cache == KVC_CACHE_STATIC) {
    capacity = std::min(cfg->window, cfg->max_cache_len);
  } else {
    capacity = cfg->window - 1;
  }
  if (capacity == 0)
    return fail(KVC_ERR_UNSUPPORTED, err, err_len, "a layer that keeps no row (dynamic sliding window 1) is not supported");
  if (cfg->layer_type != KVC_LAYER_FULL && cfg->window <= 0)
    return fail(KVC_ERR_INVALID, err, err_len, "window must be positive, got %lld", static_cast<long long>(cfg->window));
  kvc_cache* c = new (std::nothrow) kvc_cache;
  if (!c) return fail(KVC_ERR_INTERNAL, err, err_len, "out of memory");
  c->cfg = *cfg;
  c->capacity = capacity;
  if (capacity > 0) {
    c->slots = capacity;
    c->k.assign(static_cast<size_t>(cfg->batch * cfg->kv_heads * capacity) * row_bytes(c), 0);
    c->v.assign(c->k.size(), 0);
  }
  *out = c;
  return KVC_OK;
}

kvc_status cache_get_mask_sizes(const kvc_cache* c, int64_t q, int64_t* kv_length, int64_t* kv_offset, char* err,
                                size_t err_len) {
  if (q <= 0) return fail(KVC_ERR_INVALID, err, err_len, "query_length must be positive");
#ifdef KVC_MUTANT_STALE_KV_OFFSET
  int64_t stale_length;
  mask_sizes(c, c->seen, q, kv_length, &stale_length);
  mask_sizes(c, c->previous_seen, q, &stale_length, kv_offset);  // BUG: offset from the step before
#else
  mask_sizes(c, c->seen, q, kv_length, kv_offset);
#endif
  return KVC_OK;
}

kvc_status cache_update(kvc_cache* c, const kvc_tensor* keys, const kvc_tensor* values, kvc_tensor* out_keys,
                        kvc_tensor* out_values, int64_t* out_rows, char* err, size_t err_len) {
  const int64_t q = keys->shape[2];
  if (q <= 0) return fail(KVC_ERR_INVALID, err, err_len, "an update needs at least one token");
  if (!same_layout(c, *keys, q) || !same_layout(c, *values, q))
    return fail(KVC_ERR_INVALID, err, err_len, "keys/values do not match the layer's batch, heads, head_dim or dtype");
#ifdef KVC_MUTANT_CRASH
  if (c->seen > 0) {
    int* volatile nowhere = nullptr;
    *nowhere = 42;  // BUG: segfault on the second update
  }
#endif
#ifdef KVC_MUTANT_HANG
  if (c->seen > 0 && c->cfg.batch > 1)
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // BUG: never returns
#endif
  const int64_t old = c->seen;
  if (c->cfg.cache == KVC_CACHE_STATIC && c->cfg.layer_type == KVC_LAYER_FULL && old + q > c->capacity)
    return fail(KVC_ERR_CAPACITY, err, err_len, "static full layer of %lld rows cannot take %lld more tokens after %lld",
                static_cast<long long>(c->capacity), static_cast<long long>(q), static_cast<long long>(old));
  int64_t kv_length, kv_offset;
  mask_sizes(c, old, q, &kv_length, &kv_offset);
  if (!same_layout(c, *out_keys, out_keys->shape[2]) || !same_layout(c, *out_values, out_values->shape[2]))
    return fail(KVC_ERR_INVALID, err, err_len, "output buffers do not match the layer");
  if (out_keys->shape[2] < kv_length || out_values->shape[2] < kv_length)
    return fail(KVC_ERR_CAPACITY, err, err_len, "update returns %lld rows, the output holds %lld",
                static_cast<long long>(kv_length), static_cast<long long>(out_keys->shape[2]));
  // Returned rows: tokens [kv_offset, kv_offset + kv_length); kept tokens are [old - count, old).
  const int64_t first_kept = old - c->count;
  for (int64_t j = 0; j < kv_length; ++j) {
    const int64_t tok = kv_offset + j;
    if (tok < old) {
      if (tok < first_kept)
        return fail(KVC_ERR_INTERNAL, err, err_len, "token %lld is no longer kept", static_cast<long long>(tok));
      const int64_t slot = slot_of(c, tok - first_kept);
      copy_out(c, *out_keys, j, &c->k, slot, nullptr, 0);
      copy_out(c, *out_values, j, &c->v, slot, nullptr, 0);
    } else if (tok < old + q) {
      copy_out(c, *out_keys, j, nullptr, 0, keys, tok - old);
      copy_out(c, *out_values, j, nullptr, 0, values, tok - old);
    } else {  // an unfilled static buffer: rows past the last token are zeros
      copy_out(c, *out_keys, j, nullptr, 0, nullptr, 0);
      copy_out(c, *out_values, j, nullptr, 0, nullptr, 0);
    }
  }
  *out_rows = kv_length;
  // Keep the newest tokens: one slot write per token.
  const int64_t skip = c->capacity > 0 ? std::max<int64_t>(q - c->capacity, 0) : 0;
#ifdef KVC_MUTANT_PARTIAL_WRAP
  const bool was_full = c->capacity > 0 && c->count == c->slots;
  const int64_t first_slot = c->start, written = q - skip;
#endif
  for (int64_t i = skip; i < q; ++i) {
    if (c->capacity < 0 && c->count == c->slots) grow(c);
    int64_t slot;
    if (c->count < c->slots) {
      slot = (c->start + c->count) % c->slots;
      ++c->count;
    } else {
      slot = c->start;
      c->start = (c->start + 1) % c->slots;
    }
#ifdef KVC_MUTANT_PARTIAL_WRAP
    // BUG: a write of several rows into the full ring that reaches its end is split in two copies,
    // the first one row short: the rest starts at slot 0 one row early and the last slot stays stale.
    if (was_full && written > 1 && first_slot + written >= c->slots) {
      const int64_t r = i - skip, first = c->slots - first_slot - 1;
      slot = r < first ? first_slot + r : (r - first) % c->slots;
    }
#endif
    copy_in(c, c->k, slot, *keys, i);
    copy_in(c, c->v, slot, *values, i);
  }
  c->previous_seen = old;
  c->seen = old + q;
  return KVC_OK;
}

kvc_status cache_stored_rows(const kvc_cache* c, int64_t* rows, char*, size_t) {
  *rows = c->count;
  return KVC_OK;
}

kvc_status cache_read(const kvc_cache* c, kvc_tensor* keys, kvc_tensor* values, int64_t* rows, char* err, size_t err_len) {
  if (keys->shape[2] < c->count || values->shape[2] < c->count)
    return fail(KVC_ERR_CAPACITY, err, err_len, "%lld rows kept, the output holds %lld", static_cast<long long>(c->count),
                static_cast<long long>(keys->shape[2]));
#ifdef KVC_MUTANT_READ_PAST_END
  const int64_t n = c->count + 1;  // BUG: `<=` instead of `<`: one row more than kept, past the end
#else
  const int64_t n = c->count;
#endif
  for (int64_t i = 0; i < n; ++i) {
    const int64_t slot = slot_of(c, i);
    copy_out(c, *keys, i, &c->k, slot, nullptr, 0);
    copy_out(c, *values, i, &c->v, slot, nullptr, 0);
  }
  *rows = c->count;
  return KVC_OK;
}

kvc_status cache_reset(kvc_cache* c, char*, size_t) {
  c->start = c->count = c->seen = c->previous_seen = 0;
  std::fill(c->k.begin(), c->k.end(), 0);
  std::fill(c->v.begin(), c->v.end(), 0);
  return KVC_OK;
}

void cache_destroy(kvc_cache* c) { delete c; }

// ---- the kernel: each query scans only the key rows its window allows (index arithmetic, no
// mask), online softmax in float64, one rounding to the output dtype.
int64_t floor_div(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

// x rounded to the input dtype, as a store in it would: the numerics mutants' deliberately low precision.
double round_to(kvc_dtype t, double x) {
  switch (t) {
    case KVC_FLOAT16: return kvc_util::half_to_float(kvc_util::float_to_half(static_cast<float>(x)));
    case KVC_BFLOAT16: return kvc_util::bf16_to_float(kvc_util::float_to_bf16(static_cast<float>(x)));
    case KVC_FLOAT32: return static_cast<float>(x);
    default: return x;
  }
}

kvc_status attention(const kvc_attention_args* a, char* err, size_t err_len) {
#ifdef KVC_MUTANT_UNSUPPORTED
  return fail(KVC_ERR_UNSUPPORTED, err, err_len, "this plugin supports no attention");
#endif
  const kvc_tensor &Q = a->query, &K = a->key, &V = a->value;
  kvc_tensor O = a->out;
  const int64_t B = Q.shape[0], H = Q.shape[1], nq = Q.shape[2], D = Q.shape[3], Hkv = K.shape[1], nk = K.shape[2];
  if (Hkv <= 0 || H % Hkv != 0)
    return fail(KVC_ERR_INVALID, err, err_len, "heads %lld not a multiple of kv heads %lld", static_cast<long long>(H),
                static_cast<long long>(Hkv));
  if (K.shape[0] != B || K.shape[3] != D || V.shape[2] != nk || O.shape[2] != nq || O.dtype != Q.dtype)
    return fail(KVC_ERR_INVALID, err, err_len, "inconsistent shapes");
  const kvc_window& w = a->window;
  if (w.kind == KVC_WINDOW_CHUNKED && w.chunk_size <= 0)
    return fail(KVC_ERR_INVALID, err, err_len, "chunk_size must be positive");
  if (w.kind == KVC_WINDOW_MASK && !w.mask) return fail(KVC_ERR_INVALID, err, err_len, "KVC_WINDOW_MASK without a mask");
  const int64_t group = H / Hkv;
  std::vector<double> acc(static_cast<size_t>(D)), qrow(static_cast<size_t>(D));
  for (int64_t b = 0; b < B; ++b) {
    const int64_t lp = w.left_padding ? w.left_padding[b] : 0;
    for (int64_t i = 0; i < nq; ++i) {
      const int64_t qp = a->query_positions[i];
      // Absolute key range [lo, hi].
      int64_t lo = lp, hi = qp;
      if (w.kind == KVC_WINDOW_SLIDING) {
#ifdef KVC_MUTANT_WINDOW_OFF_BY_ONE
        lo = std::max(lo, qp - (w.window_left + 1));  // BUG: W + 1 tokens, the classic off-by-one
#else
        lo = std::max(lo, qp - w.window_left);
#endif
      } else if (w.kind == KVC_WINDOW_CHUNKED) {
        lo = std::max(lo, lp + floor_div(qp - lp, w.chunk_size) * w.chunk_size);
      } else if (w.kind == KVC_WINDOW_MASK) {
        lo = a->kv_offset;
        hi = a->kv_offset + nk - 1;
      }
      const int64_t j0 = std::max<int64_t>(lo - a->kv_offset, 0), j1 = std::min<int64_t>(hi - a->kv_offset, nk - 1);
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t d = 0; d < D; ++d) qrow[d] = kvc_util::load(Q, b, h, i, d);
        double m = -std::numeric_limits<double>::infinity(), l = 0;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t j = j0; j <= j1; ++j) {
          if (w.kind == KVC_WINDOW_MASK && !w.mask[(b * nq + i) * nk + j]) continue;
          double s = 0;
#if defined(KVC_MUTANT_F16_ACCUMULATION)
          // BUG: every accumulator (dot product, softmax sum, P@V) kept in the 16-bit input dtype.
          const bool low = Q.dtype == KVC_FLOAT16 || Q.dtype == KVC_BFLOAT16;
          const auto r = [&](double x) { return low ? round_to(Q.dtype, x) : x; };
          for (int64_t d = 0; d < D; ++d) s = r(s + qrow[d] * kvc_util::load(K, b, h / group, j, d));
          s = r(s * a->scale);
          const double m_new = std::max(m, s), c = std::exp(m - m_new), p = std::exp(s - m_new);
          l = r(l * c + p);
          for (int64_t d = 0; d < D; ++d) acc[d] = r(acc[d] * c + p * kvc_util::load(V, b, h / group, j, d));
          m = m_new;
#elif defined(KVC_MUTANT_SOFTMAX_IN_INPUT_DTYPE)
          // BUG: scores, running max, exp and the softmax sum rounded to the input dtype (P@V in float64).
          for (int64_t d = 0; d < D; ++d) s += qrow[d] * kvc_util::load(K, b, h / group, j, d);
          s = round_to(Q.dtype, s * a->scale);
          const double m_new = std::max(m, s);
          const double c = round_to(Q.dtype, std::exp(round_to(Q.dtype, m - m_new)));
          const double p = round_to(Q.dtype, std::exp(round_to(Q.dtype, s - m_new)));
          l = round_to(Q.dtype, round_to(Q.dtype, l * c) + p);
          for (int64_t d = 0; d < D; ++d) acc[d] = acc[d] * c + p * kvc_util::load(V, b, h / group, j, d);
          m = m_new;
#elif defined(KVC_MUTANT_NO_MAX_SUBTRACTION)
          // BUG: exp of the raw score, no running max: overflows once logits pass ~709 (float64).
          for (int64_t d = 0; d < D; ++d) s += qrow[d] * kvc_util::load(K, b, h / group, j, d);
          s *= a->scale;
          const double p = std::exp(s);
          l += p;
          for (int64_t d = 0; d < D; ++d) acc[d] += p * kvc_util::load(V, b, h / group, j, d);
          m = std::max(m, s);
#else
          for (int64_t d = 0; d < D; ++d) s += qrow[d] * kvc_util::load(K, b, h / group, j, d);
          s *= a->scale;
          const double m_new = std::max(m, s), c = std::exp(m - m_new), p = std::exp(s - m_new);
          l = l * c + p;
          for (int64_t d = 0; d < D; ++d) acc[d] = acc[d] * c + p * kvc_util::load(V, b, h / group, j, d);
          m = m_new;
#endif
        }
        for (int64_t d = 0; d < D; ++d) kvc_util::store(O, b, h, i, d, l > 0 ? acc[d] / l : 0.0);
      }
    }
  }
  return KVC_OK;
}

#ifndef KVC_PLUGIN_NAME
#define KVC_PLUGIN_NAME "ring_buffer"
#endif

// A table as a plugin built before `layouts` existed has it (KVC_OLD_TABLE): its struct_size ends
// before the field, and the word after it is whatever follows in memory, here a "sinks" the host
// must not read (this plugin has no sinks form). KVC_MUTANT_TABLE_TOO_SMALL: smaller still, refused.
#if defined(KVC_OLD_TABLE)
#define KVC_TABLE_SIZE KVC_PLUGIN_API_BASE_SIZE
#define KVC_TABLE_LAYOUTS "sinks"
#elif defined(KVC_MUTANT_TABLE_TOO_SMALL)
#define KVC_TABLE_SIZE (KVC_PLUGIN_API_BASE_SIZE - sizeof(void*))
#define KVC_TABLE_LAYOUTS nullptr
#else
#define KVC_TABLE_SIZE sizeof(kvc_plugin_api)
#define KVC_TABLE_LAYOUTS nullptr  // none beyond the window and mask forms
#endif

const kvc_plugin_api kApi = {
    KVC_PLUGIN_ABI_VERSION,
    static_cast<uint32_t>(KVC_TABLE_SIZE),
    KVC_PLUGIN_NAME,
    "ring-buffer KV cache (O(1) decode writes) and a mask-free windowed attention kernel",
    attention,
    cache_create,
    cache_get_mask_sizes,
    cache_update,
    cache_stored_rows,
    cache_read,
    cache_reset,
    cache_destroy,
    KVC_TABLE_LAYOUTS,
};

}  // namespace

extern "C" KVC_PLUGIN_EXPORT const kvc_plugin_api* kvc_plugin_get_api(uint32_t abi_version) {
  return abi_version == KVC_PLUGIN_ABI_VERSION ? &kApi : nullptr;
}
