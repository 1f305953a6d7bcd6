// The plain model reference (engine/model_reference.h): one forward over a ModelConfig, written to
// be read top to bottom. Every family is the data of its description; nothing here is per family.
// The operations keep the order transformers' modeling code writes them in (x * rsqrt(mean + eps) *
// w, sums over their terms from the first, the softmax's weights then the values in key order), which
// is also the order SequenceOracle keeps through its tiles and lanes: the two agree bit for bit.
#include "kvconform/engine/model_reference.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <stdexcept>
#include <string>

namespace kvc::engine {
namespace {

using Vec = std::vector<double>;

double dot(const double* a, const double* b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// nn.Linear: out[r] = W[r, :] . x (+ bias[r]), W [rows, cols] row-major.
Vec linear(const Vec& w, const Vec& x, int64_t rows, const Vec* bias = nullptr) {
  const int64_t cols = static_cast<int64_t>(x.size());
  Vec out(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    out[r] = dot(w.data() + r * cols, x.data(), cols);
    if (bias) out[r] += (*bias)[r];
  }
  return out;
}

// RMSNorm of x[0..n) in place; weight null: weightless; plus_one: gemma's (1 + w).
void rms_norm(double* x, int64_t n, const double* weight, double eps, bool plus_one) {
  const double inv = 1 / std::sqrt(dot(x, x, n) / static_cast<double>(n) + eps);
  for (int64_t i = 0; i < n; ++i) x[i] = weight ? x[i] * inv * (plus_one ? 1 + weight[i] : weight[i]) : x[i] * inv;
}

// A norm of a whole row: a LayerNorm (centred first; plus its bias, where it has one) or an RMSNorm.
Vec norm(Vec x, const Vec& weight, const Vec* bias, double eps, bool layer_norm, bool plus_one) {
  if (layer_norm) {
    double mean = 0;
    for (double v : x) mean += v;
    mean /= static_cast<double>(x.size());
    for (double& v : x) v -= mean;
  }
  rms_norm(x.data(), static_cast<int64_t>(x.size()), weight.data(), eps, plus_one && !layer_norm);
  for (size_t i = 0; bias && i < x.size(); ++i) x[i] += (*bias)[i];
  return x;
}

// The model's norm named `name` ("model.norm."): a LayerNorm (cohere2; its bias where norm_bias) or an
// RMSNorm (gemma's 1 + w where gemma_norm and plus_one).
Vec norm(const Model& model, const ModelConfig& k, const std::string& name, const Vec& x, double eps, bool plus_one = true) {
  return norm(x, model.at(name + "weight"), k.norm_bias ? &model.at(name + "bias") : nullptr, eps, k.layer_norm,
              plus_one && k.gemma_norm);
}

double sigmoid(double z) { return 1 / (1 + std::exp(-z)); }
double silu(double a) { return a / (1 + std::exp(-a)); }
double gelu_tanh(double a) { return 0.5 * a * (1 + std::tanh(0.7978845608028654 * (a + 0.044715 * a * a * a))); }
double gelu_erf(double a) { return a * 0.5 * (1 + std::erf(a * M_SQRT1_2)); }
// The MLP's (and ModernBERT's head's) activation.
double activate(const ModelConfig& k, double a) { return !k.gelu ? silu(a) : k.gelu_exact ? gelu_erf(a) : gelu_tanh(a); }

// Weights divided by their sum, after subtracting the largest (softmax of logits).
void softmax(Vec& v) {
  const double top = *std::max_element(v.begin(), v.end());
  double sum = 0;
  for (double& x : v) sum += (x = std::exp(x - top));
  for (double& x : v) x /= sum;
}

std::string layer_name(int64_t l, const std::string& what) { return "model.layers." + std::to_string(l) + "." + what; }

// The layer's rope frequencies over its rotary entries: base ** (-2i / d), the first `angles` of them
// (proportional rope; the rest 0), or YaRN's blend of them and them / factor.
Vec inv_freq(const ModelConfig& k, int64_t l) {
  const size_t li = static_cast<size_t>(l);
  const double base = !k.rope_thetas.empty()                                           ? k.rope_thetas[li]
                      : k.attention(l) == Attention::Sliding && k.rope_local_theta > 0 ? k.rope_local_theta
                                                                                       : k.rope_theta;
  const int64_t rd = k.rotary(l);
  const int64_t angles = k.rope_angles.empty() || k.rope_angles[li] == 0 ? rd / 2 : k.rope_angles[li];
  const double d = static_cast<double>(rd);
  Vec f;
  for (int64_t i = 0; i < rd / 2; ++i) f.push_back(i < angles ? 1.0 / std::pow(base, static_cast<double>(2 * i) / d) : 0.0);
  const ModelConfig::Yarn& y = k.yarn;
  if (y.factor > 0) {
    // transformers' _compute_yarn_parameters: frequencies below the dim that turns beta_slow times over
    // original_max_position are divided by factor, those above the one that turns beta_fast times kept,
    // a linear ramp between.
    auto dim_of = [&](double turns) { return d * std::log(y.original_max_position / (turns * 2 * M_PI)) / (2 * std::log(base)); };
    double low = dim_of(y.beta_fast), high = dim_of(y.beta_slow);
    if (y.truncate) low = std::floor(low), high = std::ceil(high);
    low = std::max(low, 0.0), high = std::min(high, d - 1);
    if (low == high) high += 0.001;
    for (int64_t i = 0; i < rd / 2; ++i) {
      const double pos_freq = std::pow(base, static_cast<double>(2 * i) / d);
      const double extrapolation = 1 - std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
      f[i] = 1.0 / (y.factor * pos_freq) * (1 - extrapolation) + 1.0 / pos_freq * extrapolation;
    }
  }
  return f;
}

// Rotates one head's first rd entries by pos * freq: pairs (i, i + rd/2), or (2i, 2i + 1) interleaved.
void rope(double* v, const Vec& freq, int64_t pos, bool interleaved, double scale) {
  const int64_t half = static_cast<int64_t>(freq.size());
  for (int64_t i = 0; i < half; ++i) {
    const double angle = static_cast<double>(pos) * freq[i];
    double c = std::cos(angle), s = std::sin(angle);
    if (scale != 1) c *= scale, s *= scale;
    const int64_t ia = interleaved ? 2 * i : i, ib = interleaved ? 2 * i + 1 : i + half;
    const double a = v[ia], b = v[ib];
    v[ia] = a * c - b * s;
    v[ib] = b * c + a * s;
  }
}

// The layer's rule: may the query at `pos` see the key at j? An encoder's (bidirectional) query sees
// every key, on a sliding layer those from reach_before before it to reach_after after it.
bool visible(const ModelConfig& k, int64_t l, int64_t pos, int64_t j) {
  const size_t li = static_cast<size_t>(l);
  if (k.bidirectional) return k.windows[li] == 0 || (pos - k.reach_before[li] <= j && j <= pos + k.reach_after[li]);
  if (j > pos) return false;
  switch (k.attention(l)) {
    case Attention::Sliding: return pos - k.windows[li] < j;
    case Attention::Chunked: return j / k.chunks[li] == pos / k.chunks[li];
    case Attention::Full: return true;
  }
  return true;
}

// The routed experts of a MoE layer for one normed row h (MoeConfig tells the routings apart).
Vec routed_experts(const Model& model, const ModelConfig& k, int64_t l, const Vec& h) {
  const MoeConfig& moe = k.moe;
  const int64_t E = moe.experts, I = moe.intermediate, H = k.hidden;
  auto w = [&](const std::string& what) -> const Vec& { return model.at(layer_name(l, k.mlp_prefix + what)); };
  const bool llama4 = moe.routing == MoeRouting::Llama4, gpt_oss = moe.routing == MoeRouting::GptOss;
  Vec logits = linear(w(moe.router + "weight"), h, E, gpt_oss ? &w("router.bias") : nullptr);
  for (double& v : logits) v = moe.router_softcap > 0 ? std::tanh(v / moe.router_softcap) * moe.router_softcap : v;
  Vec score = logits;
  if (moe.routing == MoeRouting::TopK && moe.score == MoeScore::Softmax) softmax(score);
  if (moe.routing == MoeRouting::TopK && moe.score == MoeScore::Sigmoid)
    for (double& s : score) s = sigmoid(s);
  Vec choice = moe.select_logits ? logits : score;
  if (moe.selection_bias)
    for (int64_t e = 0; e < E; ++e) choice[e] += w(moe.router + "e_score_correction_bias")[e];
  if (moe.groups > 1) {  // only the experts of the topk_groups groups whose two best choices sum highest
    const int64_t per = E / moe.groups;
    Vec group_score;
    for (int64_t g = 0; g < moe.groups; ++g) {
      Vec members(choice.begin() + g * per, choice.begin() + (g + 1) * per);
      std::sort(members.begin(), members.end(), std::greater<double>());
      group_score.push_back(members[0] + members[1]);
    }
    std::vector<int64_t> groups(static_cast<size_t>(moe.groups));
    for (int64_t g = 0; g < moe.groups; ++g) groups[g] = g;
    std::stable_sort(groups.begin(), groups.end(), [&](int64_t a, int64_t b) { return group_score[a] > group_score[b]; });
    for (int64_t r = moe.topk_groups; r < moe.groups; ++r)
      for (int64_t e = groups[r] * per; e < (groups[r] + 1) * per; ++e) choice[e] = -INFINITY;
  }
  std::vector<int64_t> chosen(static_cast<size_t>(E));  // best first; ties to the lower index
  for (int64_t e = 0; e < E; ++e) chosen[e] = e;
  std::stable_sort(chosen.begin(), chosen.end(), [&](int64_t a, int64_t b) { return choice[a] > choice[b]; });
  chosen.resize(static_cast<size_t>(moe.top_k));
  Vec weight;
  for (int64_t e : chosen) weight.push_back(llama4 ? sigmoid(logits[e]) : gpt_oss ? logits[e] : score[e]);
  if (gpt_oss || moe.score == MoeScore::TopKSoftmax) softmax(weight);
  if (moe.routing == MoeRouting::TopK) {
    double sum = 0;
    for (double v : weight) sum += v;
    for (double& v : weight) v = (moe.renormalize ? v / sum : v) * moe.routed_scale;
  }
  const Vec& gate_up = w("experts.gate_up_proj");  // [E, H, 2I]: x @ W
  const Vec& down = w("experts.down_proj");        // [E, I, H]
  Vec out(static_cast<size_t>(H), 0.0);
  for (size_t r = 0; r < chosen.size(); ++r) {
    const int64_t e = chosen[r];
    Vec in = h;
    if (llama4)  // llama4 scales the expert's input, the others its output
      for (double& v : in) v *= weight[r];
    Vec gate(static_cast<size_t>(I)), up(static_cast<size_t>(I));
    for (int64_t c = 0; c < 2 * I; ++c) {
      double s = 0;
      for (int64_t i = 0; i < H; ++i) s += in[i] * gate_up[(e * H + i) * 2 * I + c];
      if (gpt_oss) s += w("experts.gate_up_proj_bias")[e * 2 * I + c];
      // gpt_oss: gate and up are the even and odd columns; the others: the halves.
      (gpt_oss ? (c % 2 ? up[c / 2] : gate[c / 2]) : (c < I ? gate[c] : up[c - I])) = s;
    }
    for (int64_t i = 0; i < I; ++i) {
      if (gpt_oss) {  // the clamped SwiGLU
        const double g = std::min(gate[i], moe.swiglu_limit), u = std::clamp(up[i], -moe.swiglu_limit, moe.swiglu_limit);
        gate[i] = (u + 1) * (g / (1 + std::exp(-g * moe.swiglu_alpha)));
      } else {
        gate[i] = up[i] * silu(gate[i]);
      }
    }
    for (int64_t c = 0; c < H; ++c) {
      double s = 0;
      for (int64_t i = 0; i < I; ++i) s += gate[i] * down[(e * I + i) * H + c];
      if (gpt_oss) s += w("experts.down_proj_bias")[e * H + c];
      out[c] += llama4 ? s : s * weight[r];
    }
  }
  return out;
}

// The layer's feed-forward of one normed row: the dense MLP, or on a MoE layer the routed experts
// plus the shared one.
Vec feed_forward(const Model& model, const ModelConfig& k, int64_t l, const Vec& h) {
  const bool moe = !k.moe.layers.empty() && k.moe.layers[static_cast<size_t>(l)];
  const int64_t I = moe ? k.moe.shared_intermediate : k.intermediate;
  Vec out(static_cast<size_t>(k.hidden), 0.0);
  if (I > 0) {  // act(gate h) * (up h), then down
    const std::string p = k.mlp_prefix + (moe ? k.moe.shared : "");
    auto proj = [&](const std::string& what, const Vec& in, int64_t rows) {  // with its bias where mlp_bias (not an expert)
      return linear(model.at(layer_name(l, p + what + "weight")), in, rows,
                    k.mlp_bias && !moe ? &model.at(layer_name(l, p + what + "bias")) : nullptr);
    };
    Vec g = proj("gate_proj.", h, I);
    const Vec u = proj("up_proj.", h, I);
    for (int64_t i = 0; i < I; ++i) g[i] = activate(k, g[i]) * u[i];
    out = proj("down_proj.", g, k.hidden);
    if (moe && k.moe.shared_gate) {
      const double gate =
          sigmoid(dot(model.at(layer_name(l, k.mlp_prefix + "shared_expert_gate.weight")).data(), h.data(), k.hidden));
      for (double& v : out) v *= gate;
    }
  }
  if (moe) {
    const Vec routed = routed_experts(model, k, l, h);
    for (int64_t i = 0; i < k.hidden; ++i) out[i] = (out[i] + routed[i]) * k.moe.combined_scale;
  }
  return out;
}

}  // namespace

std::vector<double> reference_logits(const Model& model, const std::vector<int32_t>& tokens) {
  return reference_logits(model, model.config, tokens);
}

std::vector<double> reference_logits(const Model& model, const ModelConfig& k, const std::vector<int32_t>& tokens,
                                     const std::vector<bool>& real) {
  if (!real.empty() && real.size() != tokens.size()) throw std::invalid_argument("real: one entry per token");
  const int64_t n = static_cast<int64_t>(tokens.size()), H = k.hidden;
  for (int32_t t : tokens)
    if (t < 0 || t >= k.vocab) throw std::invalid_argument("token " + std::to_string(t) + " is outside the vocabulary");
  const double post_eps = k.post_eps > 0 ? k.post_eps : k.eps;  // a sandwich's post-attention and post-MLP norms'
  if (k.depth_scaled_residual && (k.norm_placement != NormPlacement::Sandwich || k.parallel_block))
    throw std::invalid_argument("ModelConfig::depth_scaled_residual: modelled with the sandwich norms only");
  // The residual stream, one row per position: the token's embedding (a placeholder id's is id 0's),
  // scaled, then ModernBERT's LayerNorm or muse_glimmer's weightless RMS norm of it.
  const Vec& embed = model.at("model.embed_tokens.weight");
  std::vector<Vec> x;
  for (int32_t t : tokens) {
    const int64_t id = std::count(k.zero_tokens.begin(), k.zero_tokens.end(), t) ? 0 : t;
    x.emplace_back(embed.begin() + id * H, embed.begin() + (id + 1) * H);
    for (double& v : x.back()) v *= k.embed_scale;
    if (k.embed_norm)
      x.back() = norm(x.back(), model.at("model.embed_norm.weight"), k.norm_bias ? &model.at("model.embed_norm.bias") : nullptr,
                      k.eps, true, false);
    if (k.embed_rms_norm) rms_norm(x.back().data(), H, nullptr, k.eps, false);
  }
  // Per layer, every position's keys and values ([position][kv heads * head dim]); a layer that
  // shares K/V reads its source layer's.
  std::vector<std::vector<Vec>> keys(static_cast<size_t>(k.layers)), values(static_cast<size_t>(k.layers));
  for (int64_t l = 0; l < k.layers; ++l) {
    auto w = [&](const std::string& what) -> const Vec& { return model.at(layer_name(l, what)); };
    const int64_t D = k.dim(l), KVH = k.kv(l), group = k.heads / KVH, Dv = k.vdim(l);  // Dv: a value head's size
    const bool own_kv = !k.shares_kv(l), conv = k.conv(l);
    const Vec freq = inv_freq(k, l);
    const double rope_scale = k.yarn.factor > 0 ? k.yarn.attention_factor : 1;
    std::vector<Vec> h(static_cast<size_t>(n)), mixed(static_cast<size_t>(n));  // the block's input; its output before o_proj
    // Post: no input norm; embed_norm: layer 0 reads the normed embeddings as they are.
    const bool in_norm = k.norm_placement != NormPlacement::Post && !(k.embed_norm && l == 0);
    for (int64_t p = 0; p < n; ++p) h[p] = in_norm ? norm(model, k, layer_name(l, "input_layernorm."), x[p], k.eps) : x[p];
    if (conv) {
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
          double s = k.conv_bias ? w("conv.conv.bias")[c] : 0.0;
          for (int64_t j = 0; j < taps; ++j)
            if (p - taps + 1 + j >= 0) s += w("conv.conv.weight")[c * taps + j] * bx[p - taps + 1 + j][c];
          mixed[p][c] = bcx[H + c] * s;
        }
      }
    } else {
      const Vec* no_bias = nullptr;
      std::vector<Vec> q(static_cast<size_t>(n));
      for (int64_t p = 0; p < n; ++p) {
        q[p] = linear(w("self_attn.q_proj.weight"), h[p], k.heads * D, k.qkv_bias ? &w("self_attn.q_proj.bias") : no_bias);
        Vec key, value;
        if (own_kv) {
          key = linear(w("self_attn.k_proj.weight"), h[p], KVH * D, k.qkv_bias ? &w("self_attn.k_proj.bias") : no_bias);
          const bool k_eq_v = !k.k_eq_v.empty() && k.k_eq_v[static_cast<size_t>(l)];
          value = k_eq_v
                      ? key
                      : linear(w("self_attn.v_proj.weight"), h[p], KVH * Dv, k.qkv_bias ? &w("self_attn.v_proj.bias") : no_bias);
          for (double& v : value) v = k.value_scale != 1 ? v * k.value_scale : v;  // mimo_v2_flash's attention_value_scale
        }
        // q/k norms over each head (or, qk_norm_whole, over all heads at once), before rope; weighted
        // unless qk_norm_weightless.
        auto qk_weight = [&](const char* what) { return k.qk_norm_weightless ? nullptr : w(what).data(); };
        const int64_t span = k.qk_norm_whole ? k.heads * D : D;
        for (int64_t i = 0; k.qk_norm && i < k.heads * D; i += span)
          rms_norm(q[p].data() + i, span, qk_weight("self_attn.q_norm.weight"), k.eps, k.gemma_norm);
        const int64_t kspan = k.qk_norm_whole ? KVH * D : D;
        for (int64_t i = 0; k.qk_norm && own_kv && i < KVH * D; i += kspan)
          rms_norm(key.data() + i, kspan, qk_weight("self_attn.k_norm.weight"), k.eps, k.gemma_norm);
        for (int64_t i = 0; k.v_norm && own_kv && i < KVH * Dv; i += Dv) rms_norm(value.data() + i, Dv, nullptr, k.eps, false);
        if (k.rope(l)) {
          for (int64_t i = 0; i < k.heads; ++i) rope(q[p].data() + i * D, freq, p, k.rope_interleaved, rope_scale);
          for (int64_t i = 0; own_kv && i < KVH; ++i) rope(key.data() + i * D, freq, p, k.rope_interleaved, rope_scale);
          for (int64_t i = 0; k.qk_l2_norm && i < k.heads; ++i) rms_norm(q[p].data() + i * D, D, nullptr, k.eps, false);
          for (int64_t i = 0; k.qk_l2_norm && own_kv && i < KVH; ++i) rms_norm(key.data() + i * D, D, nullptr, k.eps, false);
        } else if (k.nope_query_length > 0) {  // beam's NoPE layers: (1 + (pos + 1) / length) ** power
          const double t = std::exp(k.nope_query_power * std::log1p((static_cast<double>(p) + 1) / k.nope_query_length));
          for (double& v : q[p]) v *= t;
        } else if (k.temperature_floor_scale > 0) {  // llama4's NoPE layers
          const double t =
              std::log(std::floor((static_cast<double>(p) + 1) / k.temperature_floor_scale) + 1) * k.temperature_attn_scale + 1;
          for (double& v : q[p]) v *= t;
        }
        if (own_kv) keys[l].push_back(std::move(key)), values[l].push_back(std::move(value));
      }
      const std::vector<Vec>& K = keys[static_cast<size_t>(k.source(l))];
      const std::vector<Vec>& V = values[static_cast<size_t>(k.source(l))];
      for (int64_t p = 0; p < n; ++p) {
        mixed[p].assign(static_cast<size_t>(k.heads * Dv), 0.0);
        for (int64_t head = 0; head < k.heads; ++head) {
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
          double top = *std::max_element(e.begin(), e.end());
          const bool sink_here = k.sink(l);
          const double sink = sink_here ? w("self_attn.sinks")[head] : 0;
          if (sink_here) top = std::max(top, sink);
          double sum = 0;
          for (double& v : e) sum += (v = std::exp(v - top));
          if (sink_here) sum += std::exp(sink - top);
          double* out = mixed[p].data() + head * Dv;
          for (size_t i = 0; i < seen.size(); ++i)
            for (int64_t d = 0; d < Dv; ++d) out[d] += e[i] / sum * V[seen[i]][kvv + d];
        }
        if (k.attn_gate) {  // each head (afmoe: each element) times sigmoid(g_proj h) (laguna: its softplus)
          const int64_t per = k.attn_gate_elementwise ? 1 : Dv;
          Vec gate = linear(w("self_attn.g_proj.weight"), h[p], k.heads * Dv / per);
          for (size_t i = 0; k.attn_gate_bias && i < gate.size(); ++i)  // beam: plus a bias per head
            gate[i] += w("self_attn.gate_bias")[static_cast<int64_t>(i) * per / Dv];
          for (int64_t i = 0; i < k.heads * Dv; ++i) {
            const double z = gate[i / per];  // torch's softplus is linear above its threshold 20
            mixed[p][i] *= !k.attn_gate_softplus ? sigmoid(z) : z > 20 ? z : std::log1p(std::exp(z));
          }
        }
      }
    }
    // The block's output projection, the norms around it and the feed-forward, per position.
    const std::string o = conv ? "conv.out_proj." : "self_attn.o_proj.";
    const bool o_bias = conv ? k.conv_bias : k.o_bias;
    // x + out, or beam's depth-scaled residual: out / sqrt(d) + x * sqrt((d - 1) / d), d = 2(l + 1) after the
    // attention and 2(l + 1) + 1 after the MLP.
    auto add = [&](Vec& x, const Vec& out, double scale, int64_t d) {
      const double a = 1.0 / std::sqrt(static_cast<double>(d)),
                   b = std::sqrt(static_cast<double>(d - 1) / static_cast<double>(d));
      for (int64_t i = 0; i < H; ++i) x[i] = k.depth_scaled_residual ? out[i] * a + x[i] * b : x[i] + out[i] * scale;
    };
    for (int64_t p = 0; p < n; ++p) {
      Vec out = linear(w(o + "weight"), mixed[p], H, o_bias ? &w(o + "bias") : nullptr);
      Vec ff_in;
      switch (k.parallel_block ? NormPlacement::Pre : k.norm_placement) {
        case NormPlacement::Pre:
          for (int64_t i = 0; i < H; ++i) x[p][i] += out[i] * (k.parallel_block ? 1 : k.residual_scale);
          ff_in = k.parallel_block ? h[p] : norm(model, k, layer_name(l, k.pre_ff_norm), x[p], k.eps);
          break;
        case NormPlacement::Sandwich:
          out = norm(model, k, layer_name(l, "post_attention_layernorm."), out, post_eps);
          add(x[p], out, 1, 2 * (l + 1));
          ff_in = norm(model, k, layer_name(l, "pre_feedforward_layernorm."), x[p], k.eps);
          break;
        case NormPlacement::Post:
          out = norm(model, k, layer_name(l, "post_attention_layernorm."), out, k.eps);
          for (int64_t i = 0; i < H; ++i) x[p][i] += out[i];
          ff_in = x[p];
          break;
      }
      Vec ff = feed_forward(model, k, l, ff_in);
      if (k.norm_placement != NormPlacement::Pre)
        ff = norm(model, k, layer_name(l, "post_feedforward_layernorm."), ff,
                  k.norm_placement == NormPlacement::Sandwich ? post_eps : k.eps);
      add(x[p], ff, k.residual_scale, 2 * (l + 1) + 1);
      if (k.layer_scalar)
        for (double& v : x[p]) v *= w("layer_scalar")[0];
    }
  }
  // The final norm (its weight plain where final_norm_plain), the prediction head, lm_head.
  const Vec& head = model.at(k.tied ? "model.embed_tokens.weight" : "lm_head.weight");
  std::vector<double> logits;
  for (int64_t p = 0; p < n; ++p) {
    Vec y = norm(model, k, "model.norm.", x[p], k.eps, !k.final_norm_plain);
    if (k.prediction_head == PredictionHead::ModernBert) {  // head.norm(act(head.dense y)), head.norm a LayerNorm
      y = linear(model.at("head.dense.weight"), y, H, k.head_dense_bias ? &model.at("head.dense.bias") : nullptr);
      for (double& v : y) v = activate(k, v);
      y = norm(y, model.at("head.norm.weight"), k.norm_bias ? &model.at("head.norm.bias") : nullptr, k.eps, true, false);
    } else if (k.prediction_head == PredictionHead::Ultrabert) {  // gelu_tanh(linear2 gelu_tanh(linear1 y))
      y = linear(model.at("head.linear1.weight"), y, k.head_size);
      for (double& v : y) v = gelu_tanh(v);
      y = linear(model.at("head.linear2.weight"), y, H);
      for (double& v : y) v = gelu_tanh(v);
    }
    for (double v : linear(head, y, k.vocab, k.lm_head_bias ? &model.at("lm_head.bias") : nullptr)) {
      v *= k.logit_scale;
      if (k.final_softcap > 0) v = std::tanh(v / k.final_softcap) * k.final_softcap;
      logits.push_back(v);
    }
  }
  return logits;
}

}  // namespace kvc::engine
