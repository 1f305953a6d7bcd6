// A layer's token mixers (blocks.h): what each position's block output is before its output projection, from the
// block's normed input rows. Which one a layer has is its ModelConfig's (attention, delta, recurrent, conv).
#include "blocks.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace kvc::engine::reference {

namespace {

// A causal depthwise convolution at position p and channel ch: init plus weight[ch, j] * rows[p - taps + 1 + j][ch] over
// the taps at position 0 or later (zeros before it), in tap order.
double causal_conv(const Vec& weight, const Rows& rows, int64_t taps, int64_t p, int64_t ch, double init) {
  double s = init;
  for (int64_t j = 0; j < taps; ++j)
    if (p - taps + 1 + j >= 0) s += weight[ch * taps + j] * rows[p - taps + 1 + j][ch];
  return s;
}

}  // namespace

Memory memory_of(const Layer& layer, const Rows& memory, const std::vector<bool>& real) {
  const ModelConfig& k = layer.k;
  const int64_t l = layer.l, D = k.dim(l), KVH = k.kv(l);
  auto w = [&](const std::string& what) -> const Vec& { return layer.w(what); };
  Rows cross_keys, cross_values;
  const std::string cross = k.merged_cross_attention ? "self_attn." : "cross_attn.";
  for (const Vec& row : memory) {
    cross_keys.push_back(linear(w(cross + "k_proj.weight"), row, KVH * D, k.qkv_bias ? &w(cross + "k_proj.bias") : nullptr));
    cross_values.push_back(linear(w(cross + "v_proj.weight"), row, KVH * D, k.qkv_bias ? &w(cross + "v_proj.bias") : nullptr));
    for (int64_t i = 0; k.merged_cross_attention && k.qk_norm && i < KVH * D; i += D)
      rms_norm(cross_keys.back().data() + i, D, w("self_attn.k_norm.weight").data(), k.eps, k.gemma_norm);
  }
  return {std::move(cross_keys), std::move(cross_values), real};
}

Rows attention(const Layer& layer, const Rows& h, const std::vector<int32_t>& tokens, const std::vector<bool>& real,
               const Memory& memory, std::vector<Rows>& keys, std::vector<Rows>& values) {
  const Model& model = layer.model;
  const ModelConfig& k = layer.k;
  const int64_t l = layer.l, n = static_cast<int64_t>(h.size());
  auto w = [&](const std::string& what) -> const Vec& { return layer.w(what); };
  Rows mixed(static_cast<size_t>(n));
  const int64_t NQ = k.q_heads(l), D = k.dim(l), KVH = k.kv(l), group = NQ / KVH, Dv = k.vdim(l);  // Dv: a value head's size
  const bool own_kv = !k.shares_kv(l);
  const Vec freq = inv_freq(k, l);
  const double rope_scale = k.yarn.factor > 0 ? k.yarn.attention_factor : 1;
  const Vec* no_bias = nullptr;
  std::vector<Vec> q(static_cast<size_t>(n));
  for (int64_t p = 0; p < n; ++p) {
    q[p] = linear(w("self_attn.q_proj.weight"), h[p], NQ * D, k.qkv_bias ? &w("self_attn.q_proj.bias") : no_bias);
    Vec key, value;
    if (own_kv) {
      key = linear(w("self_attn.k_proj.weight"), h[p], KVH * D, k.qkv_bias ? &w("self_attn.k_proj.bias") : no_bias);
      const bool k_eq_v = !k.k_eq_v.empty() && k.k_eq_v[static_cast<size_t>(l)];
      value =
          k_eq_v ? key : linear(w("self_attn.v_proj.weight"), h[p], KVH * Dv, k.qkv_bias ? &w("self_attn.v_proj.bias") : no_bias);
      for (double& v : value) v = k.value_scale != 1 ? v * k.value_scale : v;  // mimo_v2_flash's attention_value_scale
      for (int64_t i = 0; k.value_embed(l) && i < KVH * Dv; ++i)               // neomme: plus the token's value embedding
        value[i] += model.at("model.value_embeddings.weight")[tokens[p] * KVH * Dv + i];
    }
    // q/k norms over each head (or, qk_norm_whole, over all heads at once), before rope; weighted
    // unless qk_norm_weightless.
    auto qk_weight = [&](const char* what) { return k.qk_norm_weightless ? nullptr : w(what).data(); };
    const int64_t span = k.qk_norm_whole ? NQ * D : D;
    for (int64_t i = 0; k.qk_norm && i < NQ * D; i += span)
      rms_norm(q[p].data() + i, span, qk_weight("self_attn.q_norm.weight"), k.eps, k.gemma_norm, k.l2_norm);
    const int64_t kspan = k.qk_norm_whole ? KVH * D : D;
    for (int64_t i = 0; k.qk_norm && own_kv && i < KVH * D; i += kspan)
      rms_norm(key.data() + i, kspan, qk_weight("self_attn.k_norm.weight"), k.eps, k.gemma_norm, k.l2_norm);
    for (int64_t i = 0; k.v_norm && own_kv && i < KVH * Dv; i += Dv) rms_norm(value.data() + i, Dv, nullptr, k.eps, false);
    if (k.rope(l)) {
      for (int64_t i = 0; i < NQ; ++i) rope(q[p].data() + i * D, freq, p, k.rope_interleaved, rope_scale);
      for (int64_t i = 0; own_kv && i < KVH; ++i) rope(key.data() + i * D, freq, p, k.rope_interleaved, rope_scale);
      for (int64_t i = 0; k.qk_l2_norm && i < NQ; ++i) rms_norm(q[p].data() + i * D, D, nullptr, k.eps, false);
      for (int64_t i = 0; k.qk_l2_norm && own_kv && i < KVH; ++i) rms_norm(key.data() + i * D, D, nullptr, k.eps, false);
    } else if (k.nope_query_length > 0) {  // beam's NoPE layers: (1 + (pos + 1) / length) ** power
      const double t = std::exp(k.nope_query_power * std::log1p((static_cast<double>(p) + 1) / k.nope_query_length));
      for (double& v : q[p]) v *= t;
    } else if (k.temperature_floor_scale > 0) {  // llama4's NoPE layers
      const double t =
          std::log(std::floor((static_cast<double>(p) + 1) / k.temperature_floor_scale) + 1) * k.temperature_attn_scale + 1;
      for (double& v : q[p]) v *= t;
    }
    for (int64_t i = 0; k.query_channel_scale > 0 && i < NQ * D; ++i) {  // dory: (sqk * s)^2 per channel, after rope
      const double s = w("self_attn.sqk")[i] * k.query_channel_scale;
      q[p][i] *= s * s;
    }
    if (own_kv) keys[l].push_back(std::move(key)), values[l].push_back(std::move(value));
  }
  const std::vector<Vec>& K = keys[static_cast<size_t>(k.source(l))];
  const std::vector<Vec>& V = values[static_cast<size_t>(k.source(l))];
  for (int64_t p = 0; p < n; ++p) {
    mixed[p].assign(static_cast<size_t>(NQ * Dv), 0.0);
    for (int64_t head = 0; head < NQ; ++head) {
      const int64_t kv = (head / group) * D, kvv = (head / group) * Dv;  // the head's K/V head
      // softmax over the visible keys' scores (and the sink, a logit with no value), then the values.
      std::vector<int64_t> seen;
      Vec e;
      for (int64_t j = 0; j < n; ++j) {
        if (!visible(k, l, p, j) || (!real.empty() && !real[j])) continue;  // nor a padding key
        double s = dot(q[p].data() + head * D, K[j].data() + kv, D) * k.query_scale;
        if (k.attn_softcap > 0) s = std::tanh(s / k.attn_softcap) * k.attn_softcap;
        seen.push_back(j), e.push_back(s);
      }
      if (e.empty())
        throw std::invalid_argument("position " + std::to_string(p) + " of layer " + std::to_string(l) + " sees no real key");
      const size_t own = seen.size();  // a merged cross-attention's source keys follow, in the same softmax
      for (size_t j = 0; k.merged_cross_attention && j < memory.keys.size(); ++j) {
        if (!memory.real.empty() && !memory.real[j]) continue;
        double s = dot(q[p].data() + head * D, memory.keys[j].data() + kv, D) * k.query_scale;
        if (k.attn_softcap > 0) s = std::tanh(s / k.attn_softcap) * k.attn_softcap;
        seen.push_back(static_cast<int64_t>(j)), e.push_back(s);
      }
      if (e.size() == own && k.merged_cross_attention) throw std::invalid_argument("the source has no real position");
      double top = *std::max_element(e.begin(), e.end());
      const bool sink_here = k.sink(l);
      const double sink = sink_here ? w("self_attn.sinks")[head] : 0;
      if (sink_here) top = std::max(top, sink);
      double sum = 0;
      for (double& v : e) sum += (v = std::exp(v - top));
      if (sink_here) sum += std::exp(sink - top);
      double* out = mixed[p].data() + head * Dv;
      for (size_t i = 0; i < seen.size(); ++i)
        for (int64_t d = 0; d < Dv; ++d)
          out[d] += e[i] / sum * (i < own ? V[seen[i]][kvv + d] : memory.values[static_cast<size_t>(seen[i])][kvv + d]);
      if (k.exclusive_attention) {  // neomme: out - tanh(alpha) (out . u) u, u the position's own value, unit length
        const double* v = V[p].data() + kvv;
        const double length = std::max(std::sqrt(dot(v, v, Dv)), 1e-12);
        double along = 0;
        for (int64_t d = 0; d < Dv; ++d) along += out[d] * (v[d] / length);
        const double scaled = std::tanh(w("self_attn.exclusive_self_attention.alpha")[head]) * along;
        for (int64_t d = 0; d < Dv; ++d) out[d] -= scaled * (v[d] / length);
      }
      if (k.attn_out_norm) rms_norm(out, Dv, nullptr, k.eps, false);  // muse_spark's o_norm, weightless
    }
    if (k.attn_gate) {  // each head (afmoe: each element) times sigmoid(g_proj h) (laguna: its softplus)
      const int64_t per = k.attn_gate_elementwise ? 1 : Dv;
      Vec gate = linear(w("self_attn.g_proj.weight"), h[p], NQ * Dv / per);
      for (size_t i = 0; k.attn_gate_bias && i < gate.size(); ++i)  // beam: plus a bias per head
        gate[i] += w("self_attn.gate_bias")[static_cast<int64_t>(i) * per / Dv];
      for (int64_t i = 0; i < NQ * Dv; ++i) {
        const double s = k.attn_gate_scale > 0 ? w("self_attn.s_gate")[i] * k.attn_gate_scale : 0;  // dory: (s_gate s)^2
        const double z = k.attn_gate_scale > 0 ? gate[i / per] * (s * s) : gate[i / per];  // torch's softplus is linear above 20
        mixed[p][i] *= !k.attn_gate_softplus ? sigmoid(z) : z > 20 ? z : std::log1p(std::exp(z));
      }
    }
    if (k.attn_sub_norm) rms_norm(mixed[p].data(), NQ * Dv, nullptr, k.eps, false, k.l2_norm);  // dory, before o_proj
  }
  return mixed;
}

Vec cross_attention(const Layer& layer, const Vec& x, const Memory& memory, double post_eps) {
  const ModelConfig& k = layer.k;
  const int64_t l = layer.l, H = k.hidden;
  auto w = [&](const std::string& what) -> const Vec& { return layer.w(what); };
  const int64_t NQ = k.q_heads(l), D = k.dim(l), KVH = k.kv(l), group = NQ / KVH;
  const Vec hc = layer.norm("pre_cross_attn_layernorm.", x, k.eps);
  const Vec cq = linear(w("cross_attn.q_proj.weight"), hc, NQ * D, k.qkv_bias ? &w("cross_attn.q_proj.bias") : nullptr);
  Vec attended(static_cast<size_t>(NQ * D), 0.0);
  for (int64_t head = 0; head < NQ; ++head) {
    const int64_t kv = (head / group) * D;
    std::vector<size_t> seen;  // every real source position: no rope, no window
    Vec e;
    for (size_t j = 0; j < memory.keys.size(); ++j) {
      if (!memory.real.empty() && !memory.real[j]) continue;
      double sc = dot(cq.data() + head * D, memory.keys[j].data() + kv, D) * k.query_scale;
      if (k.attn_softcap > 0) sc = std::tanh(sc / k.attn_softcap) * k.attn_softcap;
      seen.push_back(j), e.push_back(sc);
    }
    if (e.empty()) throw std::invalid_argument("the source has no real position");
    const double top = *std::max_element(e.begin(), e.end());
    double sum = 0;
    for (double& v : e) sum += (v = std::exp(v - top));
    for (size_t i = 0; i < seen.size(); ++i)
      for (int64_t d = 0; d < D; ++d) attended[head * D + d] += e[i] / sum * memory.values[seen[i]][kv + d];
  }
  const Vec co =
      norm(layer.model, k, layer_name(l, "post_cross_attn_layernorm."),
           linear(w("cross_attn.o_proj.weight"), attended, H, k.o_bias ? &w("cross_attn.o_proj.bias") : nullptr), post_eps);
  return co;
}

Rows gated_delta_net(const Layer& layer, const Rows& h) {
  const ModelConfig& k = layer.k;
  const int64_t n = static_cast<int64_t>(h.size());
  auto w = [&](const std::string& what) -> const Vec& { return layer.w(what); };
  Rows mixed(static_cast<size_t>(n));
  // The gated DeltaNet block: qkv = in_proj_qkv h; c = silu(its causal depthwise conv, no bias); q, k, v its thirds,
  // q and k L2-normed per key head (x * rsqrt(sum x^2 + 1e-6)), q times delta_k_dim ** -0.5. Per value head (its key
  // head j / (HV / HK)): beta = sigmoid(b), decay exp(-exp(A_log) softplus(a + dt_bias)); the state S [DK, DV] decays,
  // then S += k (beta (v - S^T k))^T (the delta rule); the output S^T q RMS-normed, times the weight and silu(z).
  const int64_t C = k.delta_conv_width(), taps = k.conv_kernel, HK = k.delta_k_heads, HV = k.delta_v_heads;
  const int64_t DK = k.delta_k_dim, DV = k.delta_v_dim, Kd = HK * DK;
  auto d = [&](const std::string& what) -> const Vec& { return w("linear_attn." + what); };
  std::vector<Vec> qkv(static_cast<size_t>(n));
  Vec S(static_cast<size_t>(HV * DK * DV), 0.0);
  for (int64_t p = 0; p < n; ++p) {
    qkv[p] = linear(d("in_proj_qkv.weight"), h[p], C);
    const Vec z = linear(d("in_proj_z.weight"), h[p], HV * DV), b = linear(d("in_proj_b.weight"), h[p], HV),
              a = linear(d("in_proj_a.weight"), h[p], HV);
    Vec c(static_cast<size_t>(C));
    for (int64_t ch = 0; ch < C; ++ch) {
      c[ch] = silu(causal_conv(d("conv1d.weight"), qkv, taps, p, ch, 0.0));
    }
    for (int64_t i = 0; i < 2 * HK; ++i) {  // the q heads, then the k heads
      const double inv = 1 / std::sqrt(dot(c.data() + i * DK, c.data() + i * DK, DK) + 1e-6);
      for (int64_t e = 0; e < DK; ++e)
        c[i * DK + e] = c[i * DK + e] * inv * (i < HK ? 1 / std::sqrt(static_cast<double>(DK)) : 1.0);
    }
    mixed[p].resize(static_cast<size_t>(HV * DV));
    for (int64_t j = 0; j < HV; ++j) {
      const double* q = c.data() + (j / (HV / HK)) * DK;
      const double* key = c.data() + Kd + (j / (HV / HK)) * DK;
      const double* v = c.data() + 2 * Kd + j * DV;
      const double beta = sigmoid(b[j]), in = a[j] + d("dt_bias")[j];
      const double decay = std::exp(-(k.delta_decay_scale * std::exp(d("A_log")[j])) * (in > 20 ? in : std::log1p(std::exp(in))));
      double* state = S.data() + j * DK * DV;
      for (int64_t e = 0; e < DK * DV; ++e) state[e] = p == 0 ? 0.0 : state[e] * decay;
      Vec delta_v(static_cast<size_t>(DV));
      for (int64_t e = 0; e < DV; ++e) {
        double s = 0;
        for (int64_t i = 0; i < DK; ++i) s += state[i * DV + e] * key[i];
        delta_v[e] = (v[e] - s) * beta;
      }
      for (int64_t i = 0; i < DK; ++i)
        for (int64_t e = 0; e < DV; ++e) state[i * DV + e] += key[i] * delta_v[e];
      double* o = mixed[p].data() + j * DV;
      double sq = 0;
      for (int64_t e = 0; e < DV; ++e) {
        double s = 0;
        for (int64_t i = 0; i < DK; ++i) s += state[i * DV + e] * q[i];
        o[e] = s;
        sq += s * s;
      }
      const double inv = 1 / std::sqrt(sq / static_cast<double>(DV) + k.eps);
      for (int64_t e = 0; e < DV; ++e) {
        o[e] = o[e] * inv * d("norm.weight")[e];
        if (k.delta_norm_gated) o[e] *= silu(z[j * DV + e]);
      }
    }
  }
  return mixed;
}

Rows rg_lru(const Layer& layer, const Rows& h) {
  const ModelConfig& k = layer.k;
  const int64_t n = static_cast<int64_t>(h.size());
  auto w = [&](const std::string& what) -> const Vec& { return layer.w(what); };
  Rows mixed(static_cast<size_t>(n));
  // Griffin's RG-LRU block: y = act(linear_y h); c = the causal depthwise conv of x = linear_x h (plus its bias);
  // per block of channels the input gate i and the recurrence gate r of c (c @ W + b, through a sigmoid); the
  // decay a = exp(-lru_decay_scale * r * softplus(recurrent_param)); state = a * state + sqrt(1 - a^2) * i * c,
  // at position 0 i * c (the reset); the output row state * y.
  const int64_t W = k.lru_width, bw = W / k.lru_blocks, taps = k.conv_kernel;
  auto t = [&](const std::string& what) -> const Vec& { return w("temporal_block." + what); };
  std::vector<Vec> xs(static_cast<size_t>(n));
  Vec state(static_cast<size_t>(W), 0.0);
  for (int64_t p = 0; p < n; ++p) {
    Vec y = linear(t("linear_y.weight"), h[p], W, &t("linear_y.bias"));
    for (double& v : y) v = activate(k, v);
    xs[p] = linear(t("linear_x.weight"), h[p], W, &t("linear_x.bias"));
    Vec c(static_cast<size_t>(W));
    for (int64_t ch = 0; ch < W; ++ch) {
      c[ch] = causal_conv(t("conv_1d.weight"), xs, taps, p, ch, t("conv_1d.bias")[ch]);
    }
    mixed[p].resize(static_cast<size_t>(W));
    for (int64_t ch = 0; ch < W; ++ch) {
      const int64_t b = ch / bw, col = ch % bw;
      double zi = 0, za = 0;
      for (int64_t i = 0; i < bw; ++i) {
        zi += c[b * bw + i] * t("rg_lru.input_gate_weight")[(b * bw + i) * bw + col];
        za += c[b * bw + i] * t("rg_lru.recurrent_gate_weight")[(b * bw + i) * bw + col];
      }
      const double gate_i = sigmoid(zi + t("rg_lru.input_gate_bias")[ch]), r = sigmoid(za + t("rg_lru.recurrent_gate_bias")[ch]);
      const double lambda = t("rg_lru.recurrent_param")[ch];
      const double log_a = -k.lru_decay_scale * r * (lambda > 20 ? lambda : std::log1p(std::exp(lambda)));
      const double normalized = c[ch] * gate_i * (p == 0 ? 1.0 : std::sqrt(1 - std::exp(2 * log_a)));
      state[ch] = p == 0 ? normalized : std::exp(log_a) * state[ch] + normalized;
      mixed[p][ch] = state[ch] * y[ch];
    }
  }
  return mixed;
}

Rows short_conv(const Layer& layer, const Rows& h) {
  const ModelConfig& k = layer.k;
  const int64_t n = static_cast<int64_t>(h.size());
  auto w = [&](const std::string& what) -> const Vec& { return layer.w(what); };
  Rows mixed(static_cast<size_t>(n));
  const int64_t H = k.hidden;
  // LFM2's short convolution: B, C, x' = in_proj(h); out = C * (causal depthwise conv of B * x' over
  // the last conv_kernel positions, zeros before position 0).
  const int64_t taps = k.conv_kernel;
  const Vec* in_bias = k.conv_bias ? &w("conv.in_proj.bias") : nullptr;
  std::vector<Vec> bx(static_cast<size_t>(n), Vec(static_cast<size_t>(H)));
  for (int64_t p = 0; p < n; ++p) {
    const Vec bcx = linear(w("conv.in_proj.weight"), h[p], 3 * H, in_bias);
    for (int64_t c = 0; c < H; ++c) bx[p][c] = bcx[c] * bcx[2 * H + c];
    mixed[p].resize(static_cast<size_t>(H));
    for (int64_t c = 0; c < H; ++c) {
      mixed[p][c] = bcx[H + c] * causal_conv(w("conv.conv.weight"), bx, taps, p, c, k.conv_bias ? w("conv.conv.bias")[c] : 0.0);
    }
  }
  return mixed;
}

}  // namespace kvc::engine::reference
