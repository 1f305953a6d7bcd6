// llama.cpp's attention, as a kvconform plugin kernel (docs/plugins.md, plugins/ggml/README.md):
// the K/V, query and KQ mask of one step go through ggml's CPU backend exactly as llama.cpp's
// llm_graph_context::build_attn_mha wires them (src/llama-graph.cpp):
//   KVC_GGML_FLASH=1: ggml_flash_attn_ext(q, k, v, kq_mask, scale), accumulation precision F32;
//   KVC_GGML_FLASH=0: kq = mul_mat(k, q) (F32 accumulation), soft_max_ext(kq, kq_mask, scale),
//                     mul_mat(cont(transpose(v)), kq): the non-flash path with a non-transposed V.
// The KQ mask is built the way llama.cpp's KV cache builds it (causal, then
// llama_hparams::is_masked_swa, compiled from llama.cpp's own header, with n_swa = W).
//
// Conventions translated (each one stated here, measured in the README):
// - K/V are stored in the case's dtype, as llama.cpp stores its cache (type_k/type_v f32, f16 or
//   bf16); the query is widened to f32 (llama.cpp's activations are f32), which is exact. float64
//   has no ggml type: KVC_ERR_UNSUPPORTED.
// - kvconform's window_left = W - 1 becomes llama.cpp's n_swa = W (a key is masked when
//   p_query - p_key >= n_swa); a chunk size is n_swa with LLAMA_SWA_TYPE_CHUNKED.
// - llama.cpp has no padding tokens: a row with left padding lp is a sequence whose positions
//   start at lp, so llama.cpp position = kvconform position - lp, and pad keys are not in its cache.
//
// - Attention sinks (the "sinks" layout, gpt-oss): an F32 tensor of one logit per head added to the
//   kernel as llama.cpp's gpt-oss graph does (ggml_flash_attn_ext_add_sinks, ggml_soft_max_add_sinks).
//
// Build options: KVC_GGML_N_SWA_DELTA (a mutant hands the kernel n_swa = W + delta),
// KVC_GGML_DROP_SINKS (a mutant that declares sinks and leaves them out),
// KVC_GGML_CAST_KV_F16 (f32 K/V cast to f16 first, as build_attn_mha's flash path does with an f32
// cache), KVC_GGML_RAW_EMPTY_ROWS (ggml's output for a query that sees no key), KVC_PLUGIN_NAME.
#include <cmath>
#include <cstring>
#include <vector>

#include "ggml-cpu.h"
#include "ggml.h"
#include "kvc_plugin_util.h"
#include "kvconform/plugin_abi.h"
#include "llama-hparams.h"  // llama.cpp's src/llama-hparams.h (plugins/ggml/fetch_build_ggml.sh)

#ifndef KVC_GGML_FLASH
#define KVC_GGML_FLASH 1
#endif
#ifndef KVC_GGML_N_SWA_DELTA
#define KVC_GGML_N_SWA_DELTA 0
#endif
#ifndef KVC_PLUGIN_NAME
#define KVC_PLUGIN_NAME "ggml"
#endif

using kvc_util::fail;

namespace {

bool ggml_type_of(kvc_dtype d, ggml_type* t) {
  switch (d) {
    case KVC_FLOAT32: *t = GGML_TYPE_F32; return true;
    case KVC_FLOAT16: *t = GGML_TYPE_F16; return true;
    case KVC_BFLOAT16: *t = GGML_TYPE_BF16; return true;
    case KVC_FLOAT64: return false;
  }
  return false;
}

// K or V [B, Hkv, kv, D] into a ggml tensor of ne = {D, kv, Hkv, B}, bits unchanged: ggml's f16 and
// bf16 are the IEEE half and bfloat16 bit patterns kvconform passes.
void copy_kv(const kvc_tensor& src, ggml_tensor* dst) {
  const size_t es = kvc_util::element_size(src.dtype);
  auto* out = static_cast<char*>(dst->data);
  for (int64_t b = 0; b < src.shape[0]; ++b)
    for (int64_t h = 0; h < src.shape[1]; ++h)
      for (int64_t j = 0; j < src.shape[2]; ++j)
        for (int64_t d = 0; d < src.shape[3]; ++d)
          std::memcpy(out + d * dst->nb[0] + j * dst->nb[1] + h * dst->nb[2] + b * dst->nb[3], kvc_util::at(src, b, h, j, d), es);
}

// The additive KQ mask, F16 ne = {kv, q, 1, B}: 0 = attend, -INF = masked (llama.cpp's mask_keep/drop).
bool build_mask(const kvc_attention_args& a, ggml_tensor* mask, char* err, size_t err_len) {
  const int64_t B = a.query.shape[0], nq = a.query.shape[2], nkv = a.key.shape[2];
  const ggml_fp16_t keep = ggml_fp32_to_fp16(0.0f), drop = ggml_fp32_to_fp16(-INFINITY);
  auto* m = static_cast<ggml_fp16_t*>(mask->data);
  llama_swa_type swa_type = LLAMA_SWA_TYPE_NONE;
  int64_t n_swa = 0;
  switch (a.window.kind) {
    case KVC_WINDOW_FULL: break;
    case KVC_WINDOW_SLIDING:
      swa_type = LLAMA_SWA_TYPE_STANDARD;
      n_swa = a.window.window_left + 1 + KVC_GGML_N_SWA_DELTA;
      break;
    case KVC_WINDOW_CHUNKED:
      swa_type = LLAMA_SWA_TYPE_CHUNKED;
      n_swa = a.window.chunk_size;
      break;
    case KVC_WINDOW_MASK:
      if (!a.window.mask) {
        fail(KVC_ERR_INVALID, err, err_len, "KVC_WINDOW_MASK without a mask");
        return false;
      }
      for (int64_t b = 0; b < B; ++b)
        for (int64_t i = 0; i < nq; ++i)
          for (int64_t j = 0; j < nkv; ++j) m[(b * nq + i) * nkv + j] = a.window.mask[(b * nq + i) * nkv + j] ? keep : drop;
      return true;
  }
  if (swa_type != LLAMA_SWA_TYPE_NONE && n_swa <= 0) {
    fail(KVC_ERR_UNSUPPORTED, err, err_len, "window %lld has no llama.cpp n_swa", static_cast<long long>(n_swa));
    return false;
  }
  for (int64_t b = 0; b < B; ++b) {
    const int64_t lp = a.window.left_padding ? a.window.left_padding[b] : 0;
    for (int64_t i = 0; i < nq; ++i) {
      const int64_t p1 = a.query_positions[i] - lp;
      for (int64_t j = 0; j < nkv; ++j) {
        const int64_t p0 = a.kv_offset + j - lp;
        // A pad token is in no llama.cpp sequence; then causality and the SWA rule, in the order
        // llama.cpp's KV cache applies them (llama-kv-cache.cpp, set_input_kq_mask).
        bool masked = p1 < 0 || p0 < 0 || p0 > p1;
        if (!masked && swa_type != LLAMA_SWA_TYPE_NONE)
          masked = llama_hparams::is_masked_swa(static_cast<uint32_t>(n_swa), swa_type, static_cast<llama_pos>(p0),
                                                static_cast<llama_pos>(p1));
        m[(b * nq + i) * nkv + j] = masked ? drop : keep;
      }
    }
  }
  return true;
}

kvc_status attention(const kvc_attention_args* args, char* err, size_t err_len) {
  const kvc_attention_args& a = *args;
  kvc_tensor out_t = a.out;  // the caller's output buffer, written through its strides
  ggml_type kv_type;
  if (!ggml_type_of(a.key.dtype, &kv_type))
    return fail(KVC_ERR_UNSUPPORTED, err, err_len, "ggml has no float64 type (llama.cpp caches are f32, f16, bf16 or quantized)");
  if (a.query.dtype != a.key.dtype || a.value.dtype != a.key.dtype || a.out.dtype != a.query.dtype)
    return fail(KVC_ERR_INVALID, err, err_len, "query, key, value and out must share one dtype");
  const int64_t B = a.query.shape[0], H = a.query.shape[1], nq = a.query.shape[2], D = a.query.shape[3];
  const int64_t Hkv = a.key.shape[1], nkv = a.key.shape[2];
  if (Hkv <= 0 || H % Hkv != 0 || a.key.shape[3] != D || a.value.shape[3] != D || a.key.shape[0] != B)
    return fail(KVC_ERR_INVALID, err, err_len, "shapes do not match");
  if (nq == 0) return KVC_OK;
  if (nkv == 0) {  // nothing to attend: finite zeros, as the ABI recommends
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < nq; ++i)
          for (int64_t d = 0; d < D; ++d) kvc_util::store(out_t, b, h, i, d, 0.0);
    return KVC_OK;
  }

  // Every tensor of the graph lives in one context: inputs, the transposed V, KQ and its softmax.
  const size_t elems = static_cast<size_t>(B) * (2 * H * nq * D + 4 * Hkv * nkv * D + 2 * H * nq * nkv + nq * nkv);
  ggml_init_params ip{elems * sizeof(float) + 64 * ggml_tensor_overhead() + ggml_graph_overhead() + (1u << 20), nullptr, false};
  ggml_context* ctx = ggml_init(ip);
  if (!ctx) return fail(KVC_ERR_INTERNAL, err, err_len, "ggml_init failed");

  ggml_tensor* q = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, D, nq, H, B);
  ggml_tensor* k = ggml_new_tensor_4d(ctx, kv_type, D, nkv, Hkv, B);
  ggml_tensor* v = ggml_new_tensor_4d(ctx, kv_type, D, nkv, Hkv, B);
  ggml_tensor* mask = ggml_new_tensor_4d(ctx, GGML_TYPE_F16, nkv, nq, 1, B);
  auto* qd = static_cast<float*>(q->data);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < nq; ++i)
        for (int64_t d = 0; d < D; ++d)
          qd[((b * H + h) * nq + i) * D + d] = static_cast<float>(kvc_util::load(a.query, b, h, i, d));
  copy_kv(a.key, k);
  copy_kv(a.value, v);
  if (!build_mask(a, mask, err, err_len)) {
    ggml_free(ctx);
    return a.window.kind == KVC_WINDOW_MASK ? KVC_ERR_INVALID : KVC_ERR_UNSUPPORTED;
  }
  const float scale = static_cast<float>(a.scale);
  ggml_tensor* sinks = nullptr;
#ifndef KVC_GGML_DROP_SINKS
  if (a.sinks) {
    sinks = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, H);
    std::memcpy(sinks->data, a.sinks, static_cast<size_t>(H) * sizeof(float));
  }
#endif

  ggml_tensor* out;
#if KVC_GGML_FLASH
#ifdef KVC_GGML_CAST_KV_F16
  if (k->type == GGML_TYPE_F32) k = ggml_cast(ctx, k, GGML_TYPE_F16);
  if (v->type == GGML_TYPE_F32) v = ggml_cast(ctx, v, GGML_TYPE_F16);
#endif
  out = ggml_flash_attn_ext(ctx, q, k, v, mask, scale, 0.0f, 0.0f);  // ne = {D, H, q, B}
  ggml_prec_set_acc(out, GGML_PREC_F32);
  if (sinks) ggml_flash_attn_ext_add_sinks(out, sinks);
#else
  ggml_tensor* kq = ggml_mul_mat(ctx, k, q);  // ne = {kv, q, H, B}
  ggml_prec_set_acc(kq, GGML_PREC_F32);
  kq = ggml_soft_max_ext(ctx, kq, mask, scale, 0.0f);
  if (sinks) ggml_soft_max_add_sinks(kq, sinks);
  ggml_tensor* vt = ggml_cont(ctx, ggml_transpose(ctx, v));  // ne = {kv, D, Hkv, B}
  out = ggml_mul_mat(ctx, vt, kq);                           // ne = {D, q, H, B}
#endif
  ggml_cgraph* graph = ggml_new_graph(ctx);
  ggml_build_forward_expand(graph, out);
  // One thread: the same bits on every machine and run, and the host runs cases in parallel anyway.
  if (ggml_graph_compute_with_ctx(ctx, graph, 1) != GGML_STATUS_SUCCESS) {
    ggml_free(ctx);
    return fail(KVC_ERR_INTERNAL, err, err_len, "ggml_graph_compute failed");
  }
  // A query that sees no key is a pad token, which no llama.cpp sequence has: llama.cpp never asks
  // ggml for such a row (soft_max_ext makes it NaN, flash_attn_ext zeros). Its output is zeros, as
  // the ABI recommends; KVC_GGML_RAW_EMPTY_ROWS keeps ggml's own (README: the convention finding).
  std::vector<char> empty(static_cast<size_t>(B * nq), 1);
  const auto* md = static_cast<const ggml_fp16_t*>(mask->data);
  const ggml_fp16_t keep = ggml_fp32_to_fp16(0.0f);
  for (int64_t r = 0; r < B * nq; ++r)
    for (int64_t j = 0; j < nkv && empty[r]; ++j) empty[r] = md[r * nkv + j] != keep;
  const auto* o = static_cast<const char*>(out->data);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < nq; ++i)
        for (int64_t d = 0; d < D; ++d) {
#ifndef KVC_GGML_RAW_EMPTY_ROWS
          if (empty[b * nq + i]) {
            kvc_util::store(out_t, b, h, i, d, 0.0);
            continue;
          }
#endif
#if KVC_GGML_FLASH
          const char* p = o + d * out->nb[0] + h * out->nb[1] + i * out->nb[2] + b * out->nb[3];
#else
          const char* p = o + d * out->nb[0] + i * out->nb[1] + h * out->nb[2] + b * out->nb[3];
#endif
          float f;
          std::memcpy(&f, p, sizeof f);
          kvc_util::store(out_t, b, h, i, d, f);
        }
  ggml_free(ctx);
  return KVC_OK;
}

const kvc_plugin_api api = {
    KVC_PLUGIN_ABI_VERSION,
    sizeof(kvc_plugin_api),
    KVC_PLUGIN_NAME,
#if KVC_GGML_FLASH
    "llama.cpp ggml_flash_attn_ext (CPU), KQ mask by llama_hparams::is_masked_swa",
#else
    "llama.cpp mul_mat + ggml_soft_max_ext + mul_mat (CPU), KQ mask by llama_hparams::is_masked_swa",
#endif
    attention,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
    "sinks",
};

}  // namespace

extern "C" KVC_PLUGIN_EXPORT const kvc_plugin_api* kvc_plugin_get_api(uint32_t abi_version) {
  return abi_version == KVC_PLUGIN_ABI_VERSION ? &api : nullptr;
}
