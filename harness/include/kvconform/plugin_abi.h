/* kvconform plugin ABI, version 1 (docs/plugins.md).
 *
 * A plugin is a shared library exporting one C function, kvc_plugin_get_api, that returns a table of
 * function pointers: an attention kernel on raw buffers and/or a KV cache layer. Pure C: no C++
 * types, no exceptions and no allocations cross the boundary; every buffer belongs to the caller.
 *
 * Conventions
 * - Tensors are 4-D, [batch, heads, seq, head_dim], with element strides (not bytes); the caller
 *   passes contiguous row-major buffers today but a plugin must honour the strides.
 * - Positions are absolute token indices in the sequence (0 = first token, padding included).
 * - Every function returns a kvc_status; on failure it writes a NUL-terminated message of at most
 *   err_len bytes (err may be NULL when err_len is 0).
 * - Output buffers are exactly as large as their shape says. The host surrounds each with guard
 *   bytes and fails a plugin that writes one byte outside.
 * - The host calls a plugin from one thread at a time, in a child process of its own.
 */
#ifndef KVCONFORM_PLUGIN_ABI_H
#define KVCONFORM_PLUGIN_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KVC_PLUGIN_ABI_VERSION 1u

typedef enum kvc_status {
  KVC_OK = 0,
  KVC_ERR_UNSUPPORTED = 1, /* this configuration / window kind / dtype is not implemented: the host skips */
  KVC_ERR_INVALID = 2,     /* bad arguments (shapes, dtype mismatch, zero tokens) */
  KVC_ERR_CAPACITY = 3,    /* an output buffer is too small, or a static cache would overflow */
  KVC_ERR_INTERNAL = 4
} kvc_status;

typedef enum kvc_dtype { KVC_FLOAT32 = 0, KVC_FLOAT16 = 1, KVC_BFLOAT16 = 2, KVC_FLOAT64 = 3 } kvc_dtype;

/* config.layer_types in transformers. */
typedef enum kvc_layer_type { KVC_LAYER_FULL = 0, KVC_LAYER_SLIDING = 1, KVC_LAYER_CHUNKED = 2 } kvc_layer_type;
typedef enum kvc_cache_kind { KVC_CACHE_STATIC = 0, KVC_CACHE_DYNAMIC = 1 } kvc_cache_kind;

typedef struct kvc_tensor {
  void* data; /* read-only for inputs (the plugin must not write through it) */
  kvc_dtype dtype;
  int64_t shape[4];  /* [batch, heads, seq, head_dim] */
  int64_t stride[4]; /* in elements */
} kvc_tensor;

/* Which keys a query may see. Key j of the K/V buffers is the token at absolute position
 * kv_offset + j; the query i is at query_positions[i]. Every kind is causal (key <= query) and, with
 * left_padding, never sees a key before left_padding[b] (the row's leading pad tokens). */
typedef enum kvc_window_kind {
  KVC_WINDOW_FULL = 0,    /* causal only */
  KVC_WINDOW_SLIDING = 1, /* query - window_left <= key <= query (FlashAttention window_size = (W - 1, 0)) */
  KVC_WINDOW_CHUNKED = 2, /* same chunk: (key - lp) / chunk_size == (query - lp) / chunk_size, floor division,
                              lp = left_padding[b] (0 without padding): chunks start after the padding */
  KVC_WINDOW_MASK = 3     /* an explicit boolean mask; window_left, chunk_size and left_padding unused */
} kvc_window_kind;

typedef struct kvc_window {
  kvc_window_kind kind;
  int64_t window_left;         /* SLIDING: W - 1 for transformers' sliding_window = W */
  int64_t chunk_size;          /* CHUNKED: attention_chunk_size */
  const int64_t* left_padding; /* [batch] or NULL */
  const uint8_t* mask;         /* MASK: [batch, q, kv] row-major, 1 = attend */
} kvc_window;

typedef struct kvc_attention_args {
  kvc_tensor query;               /* [B, H, q, D] */
  kvc_tensor key;                 /* [B, Hkv, kv, D]; H is a multiple of Hkv (query head h uses kv head h / (H / Hkv)) */
  kvc_tensor value;               /* [B, Hkv, kv, D] */
  kvc_tensor out;                 /* [B, H, q, D], same dtype as query; written by the plugin */
  const int64_t* query_positions; /* [q] absolute positions of the queries */
  int64_t kv_offset;              /* absolute position of key row 0 (get_mask_sizes' kv_offset) */
  kvc_window window;
  double scale; /* softmax scale, head_dim ** -0.5 */
  /* The optional "sinks" layout: [H] one logit per query head that joins each row's softmax with no
   * value (gpt-oss's attention sinks), float32 whatever the case's dtype. NULL: no sinks. The host
   * passes it only to a plugin whose `layouts` list "sinks". */
  const float* sinks;
} kvc_attention_args;
/* A query that may see no key at all must produce finite values (zeros recommended, as FlashAttention). */

typedef struct kvc_cache_config {
  kvc_cache_kind cache;
  kvc_layer_type layer_type;
  int64_t window;        /* sliding_window or attention_chunk_size; unused for FULL */
  int64_t max_cache_len; /* static caches */
  int64_t batch, kv_heads, head_dim;
  kvc_dtype dtype;
} kvc_cache_config;

typedef struct kvc_cache kvc_cache; /* opaque, owned by the plugin */

typedef struct kvc_plugin_api {
  uint32_t abi_version; /* KVC_PLUGIN_ABI_VERSION the plugin was built against */
  uint32_t struct_size; /* sizeof(kvc_plugin_api) */
  const char* name;     /* short, [a-z0-9_]: used as the backend name in reports */
  const char* description;

  /* (a) Attention on raw buffers. NULL when the plugin has no kernel. */
  kvc_status (*attention)(const kvc_attention_args* args, char* err, size_t err_len);

  /* (b) A cache layer with transformers' observable behaviour (5.x API). All NULL when the plugin
   * has no cache. */
  kvc_status (*cache_create)(const kvc_cache_config* config, kvc_cache** out, char* err, size_t err_len);
  /* Called before update for the same step, as transformers' mask builders do: the K/V the next
   * update returns are the tokens [kv_offset, kv_offset + kv_length). */
  kvc_status (*cache_get_mask_sizes)(const kvc_cache* cache, int64_t query_length, int64_t* kv_length, int64_t* kv_offset,
                                     char* err, size_t err_len);
  /* Writes q new tokens (keys/values [B, Hkv, q, D]) and copies the K/V attention must use into
   * out_keys/out_values, whose shape[2] is the capacity in rows the host allocated (the kv_length
   * get_mask_sizes promised); *out_rows receives the number of rows written. Rows past the last
   * written token (an unfilled static buffer) are zeros. */
  kvc_status (*cache_update)(kvc_cache* cache, const kvc_tensor* keys, const kvc_tensor* values, kvc_tensor* out_keys,
                             kvc_tensor* out_values, int64_t* out_rows, char* err, size_t err_len);
  /* Number of token rows the layer keeps now: min(tokens seen, capacity), unwritten rows excluded. */
  kvc_status (*cache_stored_rows)(const kvc_cache* cache, int64_t* rows, char* err, size_t err_len);
  /* Copies the kept rows, oldest token first, into keys/values (shape[2] = capacity in rows). */
  kvc_status (*cache_read)(const kvc_cache* cache, kvc_tensor* keys, kvc_tensor* values, int64_t* rows, char* err,
                           size_t err_len);
  /* Forgets every token (the next update starts a new sequence); keeps the configuration. */
  kvc_status (*cache_reset)(kvc_cache* cache, char* err, size_t err_len);
  void (*cache_destroy)(kvc_cache* cache);

  /* The optional layouts the kernel serves besides the window and mask forms, comma-separated
   * ("sinks"), as the subprocess protocol's hello lists them; NULL or "": none. A plugin built before
   * this field existed has a smaller struct_size (KVC_PLUGIN_API_BASE_SIZE) and declares none. */
  const char* layouts;
} kvc_plugin_api;

/* The size of kvc_plugin_api without the fields added within version 1 (layouts): the smallest
 * struct_size the host accepts. */
#define KVC_PLUGIN_API_BASE_SIZE offsetof(kvc_plugin_api, layouts)

/* The one exported symbol. Returns NULL when the plugin cannot serve abi_version. */
typedef const kvc_plugin_api* (*kvc_plugin_get_api_fn)(uint32_t abi_version);
#define KVC_PLUGIN_ENTRY "kvc_plugin_get_api"

#if defined(__GNUC__)
#define KVC_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define KVC_PLUGIN_EXPORT
#endif

KVC_PLUGIN_EXPORT const kvc_plugin_api* kvc_plugin_get_api(uint32_t abi_version);

#ifdef __cplusplus
}
#endif

#endif /* KVCONFORM_PLUGIN_ABI_H */
