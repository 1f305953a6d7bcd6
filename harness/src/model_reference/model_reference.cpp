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

// RMSNorm of x[0..n) in place; weight null: weightless; plus_one: gemma's (1 + w); l2: the L2 norm, x * rsqrt(sum x^2 +
// eps), the sum where RMS takes the mean (dory).
void rms_norm(double* x, int64_t n, const double* weight, double eps, bool plus_one, bool l2 = false) {
  const double inv = 1 / std::sqrt((l2 ? dot(x, x, n) : dot(x, x, n) / static_cast<double>(n)) + eps);
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
  if (k.l2_norm) {  // weightless
    Vec y = x;
    rms_norm(y.data(), static_cast<int64_t>(y.size()), nullptr, eps, false, true);
    return y;
  }
  return norm(x, model.at(name + "weight"), k.norm_bias ? &model.at(name + "bias") : nullptr, eps, k.layer_norm,
              plus_one && k.gemma_norm);
}

double sigmoid(double z) { return 1 / (1 + std::exp(-z)); }

// An RMS norm of x * (1 + w), weightless after (muse_spark's input-scaled norm).
Vec input_scaled_norm(Vec x, const Vec& weight, double eps) {
  for (size_t i = 0; i < x.size(); ++i) x[i] *= 1 + weight[i];
  rms_norm(x.data(), static_cast<int64_t>(x.size()), nullptr, eps, false);
  return x;
}
double silu(double a) { return a / (1 + std::exp(-a)); }
double gelu_tanh(double a) { return 0.5 * a * (1 + std::tanh(0.7978845608028654 * (a + 0.044715 * a * a * a))); }
double gelu_erf(double a) { return a * 0.5 * (1 + std::erf(a * M_SQRT1_2)); }
// The MLP's (and ModernBERT's head's) activation.
double activate(const ModelConfig& k, double a) {
  if (k.relu2) return a > 0 ? a * a : 0;  // ergo's relu(x)^2
  return !k.gelu ? silu(a) : k.gelu_exact ? gelu_erf(a) : gelu_tanh(a);
}

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
  const int64_t E = moe.experts, I = moe.intermediate, H = k.expert_width();  // muse_spark's experts: its pooled width
  auto w = [&](const std::string& what) -> const Vec& { return model.at(layer_name(l, k.mlp_prefix + what)); };
  const bool llama4 = moe.routing == MoeRouting::Llama4, gpt_oss = moe.routing == MoeRouting::GptOss;
  Vec logits = linear(w(moe.router + "weight"), h, E, gpt_oss ? &w("router.bias") : nullptr);
  for (double& v : logits) v = moe.router_scale != 1 ? v * moe.router_scale : v;
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
    for (double& v : weight) v = (moe.renormalize ? v / (sum + moe.renormalize_eps) : v) * moe.routed_scale;
  }
  // muse_spark: the experts read pre_expert_norm(pre_expert_proj h), (1 + w).
  const Vec x = moe.pooled > 0
                    ? norm(linear(w("pre_expert_proj.weight"), h, H), w("pre_expert_norm.weight"), nullptr, k.eps, false, true)
                    : h;
  const int64_t cols = k.mlp_ungated ? I : 2 * I;  // ergo's experts have an up projection only
  const Vec& gate_up = w(k.mlp_ungated ? "experts.up_proj" : "experts.gate_up_proj");  // [E, H, 2I] (ergo [E, H, I]): x @ W
  const Vec& down = w("experts.down_proj");                                            // [E, I, H]
  Vec out(static_cast<size_t>(H), 0.0);
  for (size_t r = 0; r < chosen.size(); ++r) {
    const int64_t e = chosen[r];
    Vec in = x;
    if (llama4)  // llama4 scales the expert's input, the others its output
      for (double& v : in) v *= weight[r];
    Vec gate(static_cast<size_t>(I)), up(static_cast<size_t>(I));
    for (int64_t c = 0; c < cols; ++c) {
      double s = 0;
      for (int64_t i = 0; i < H; ++i) s += in[i] * gate_up[(e * H + i) * cols + c];
      if (gpt_oss) s += w("experts.gate_up_proj_bias")[e * 2 * I + c];
      // gpt_oss: gate and up are the even and odd columns (unless gate_up_halves); ergo: up alone; the others: the halves.
      (gpt_oss && !moe.gate_up_halves ? (c % 2 ? up[c / 2] : gate[c / 2])
       : k.mlp_ungated                ? up[c]
                                      : (c < I ? gate[c] : up[c - I])) = s;
    }
    for (int64_t i = 0; i < I; ++i) {
      if (gpt_oss) {  // the clamped SwiGLU
        const double g = std::min(gate[i], moe.swiglu_limit), u = std::clamp(up[i], -moe.swiglu_limit, moe.swiglu_limit);
        gate[i] = (u + 1) * (g / (1 + std::exp(-g * moe.swiglu_alpha)));
      } else if (k.mlp_ungated) {
        gate[i] = activate(k, up[i]);
      } else {
        const double c = moe.expert_limits.empty() ? 0 : moe.expert_limits[static_cast<size_t>(l)];  // step3p7's bound
        gate[i] = (c > 0 ? std::clamp(up[i], -c, c) : up[i]) * (c > 0 ? std::min(silu(gate[i]), c) : silu(gate[i]));
      }
    }
    Vec y(static_cast<size_t>(H));
    Vec expert(static_cast<size_t>(H));
    for (int64_t c = 0; c < H; ++c)
      for (int64_t i = 0; i < I; ++i) expert[c] += gate[i] * down[(e * I + i) * H + c];
    if (moe.expert_norms)  // ergo: the expert's own RMS norm of its output, before its weight
      rms_norm(expert.data(), H, w("experts.post_expert_norm.weight").data() + e * H, k.eps, false);
    for (int64_t c = 0; c < H; ++c) {
      double s = expert[c];
      if (gpt_oss) s += w("experts.down_proj_bias")[e * H + c];
      y[c] = s;
    }
    if (moe.expert_out_norm) y = input_scaled_norm(y, w("experts.post_expert_norm.weight"), k.post_eps > 0 ? k.post_eps : k.eps);
    for (int64_t c = 0; c < H; ++c) out[c] += llama4 ? y[c] : y[c] * weight[r];
  }
  return moe.pooled > 0 ? linear(w("post_expert_proj.weight"), out, k.hidden) : out;
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
    Vec u = proj("up_proj.", h, I);
    Vec g = k.mlp_ungated ? u : proj("gate_proj.", h, I);
    for (int64_t i = 0; k.mlp_channel_scale > 0 && i < I; ++i) {  // dory: times suv * s per channel
      g[i] *= model.at(layer_name(l, "mlp.suv_gate"))[i] * k.mlp_channel_scale;
      u[i] *= model.at(layer_name(l, "mlp.suv_up"))[i] * k.mlp_channel_scale;
    }
    if (!k.activation_sparsity.empty() && k.activation_sparsity[static_cast<size_t>(l)] > 0) {
      // gemma3n: relu(g - (mean(g) + std(g) * z)), the population std, z the target's normal quantile.
      double mean = 0, var = 0;
      for (double v : g) mean += v;
      mean /= static_cast<double>(I);
      for (double v : g) var += (v - mean) * (v - mean);
      const double cutoff = mean + std::sqrt(var / static_cast<double>(I)) * sparsity_quantile(k.activation_sparsity[l]);
      for (double& v : g) v = std::max(v - cutoff, 0.0);
    }
    // step3p7's bound after the activation (mlp_limits): act(gate) <= c, -c <= up <= c.
    const double c = k.mlp_limits.empty() ? 0 : k.mlp_limits[static_cast<size_t>(l)];
    for (int64_t i = 0; i < I; ++i)
      g[i] = k.mlp_ungated
                 ? activate(k, u[i])  // ergo: down(act(up h)), no gate
                 : (c > 0 ? std::min(activate(k, g[i]), c) : activate(k, g[i])) * (c > 0 ? std::clamp(u[i], -c, c) : u[i]);
    if (k.mlp_sub_norm) rms_norm(g.data(), I, nullptr, k.eps, false, k.l2_norm);  // dory's sub-norm before down_proj
    out = proj("down_proj.", g, k.hidden);
    if (moe && k.moe.shared_gate) {
      const double gate =
          sigmoid(dot(model.at(layer_name(l, k.mlp_prefix + "shared_expert_gate.weight")).data(), h.data(), k.hidden));
      for (double& v : out) v *= gate;
    }
    if (moe && k.moe.shared_norm) rms_norm(out.data(), k.hidden, model.at(layer_name(l, p + "norm.weight")).data(), k.eps, false);
  }
  if (moe) {
    const Vec routed = routed_experts(model, k, l, h);
    for (int64_t i = 0; i < k.hidden; ++i) out[i] = (out[i] + routed[i]) * k.moe.combined_scale;
  }
  return out;
}

// gemma3n's AltUp: the RMS of a row, torch.mean(x ** 2) ** 0.5; a row rescaled to the RMS `target` (its own RMS
// clamped below by 1e-5 before the root); the modalities tanh(router(RMSNorm_w(x) * altup_router_scale)).
double rms(const Vec& x) {
  return std::sqrt(dot(x.data(), x.data(), static_cast<int64_t>(x.size())) / static_cast<double>(x.size()));
}
Vec rescaled(Vec x, double target) {
  const double n = static_cast<double>(x.size());
  const double magnitude = std::sqrt(std::max(dot(x.data(), x.data(), static_cast<int64_t>(x.size())) / n, 1e-5));
  for (double& v : x) v = v * target / magnitude;
  return x;
}
Vec modalities(const Model& model, const ModelConfig& k, int64_t l, Vec x) {
  rms_norm(x.data(), k.hidden, model.at(layer_name(l, "altup.router_norm.weight")).data(), k.eps, false);
  for (double& v : x) v *= k.altup_router_scale;
  Vec m = linear(model.at(layer_name(l, "altup.modality_router.weight")), x, k.altup_inputs);
  for (double& v : m) v = std::tanh(v);
  return m;
}

// One stack's forward: its output rows (logits, or an encoder-decoder's encoder's final-normed hidden states). memory:
// the encoder's rows an encoder-decoder's decoder cross-attends (memory_real: the source's attention_mask).
std::vector<double> stack_forward(const Model& model, const ModelConfig& k, const std::vector<int32_t>& tokens,
                                  const std::vector<bool>& real, const std::vector<Vec>& memory,
                                  const std::vector<bool>& memory_real);

}  // namespace

std::vector<double> reference_logits(const Model& model, const std::vector<int32_t>& tokens, const std::vector<int32_t>& source,
                                     const std::vector<bool>& source_real) {
  return reference_logits(model, model.config, tokens, {}, source, source_real);
}

std::vector<double> reference_logits(const Model& model, const ModelConfig& k, const std::vector<int32_t>& tokens,
                                     const std::vector<bool>& real, const std::vector<int32_t>& source,
                                     const std::vector<bool>& source_real) {
  std::vector<Vec> memory;
  if (k.encoder) {  // an encoder-decoder: its encoder's output rows over the source, the decoder's memory
    if (!model.encoder) throw std::invalid_argument(k.name + ": an encoder-decoder's model needs its encoder");
    if (!source_real.empty() && source_real.size() != source.size())
      throw std::invalid_argument("source_real: one entry per source token");
    const Vec rows = stack_forward(*model.encoder, *k.encoder, source, source_real, {}, {});
    for (size_t j = 0; j < source.size(); ++j)
      memory.emplace_back(rows.begin() + static_cast<std::ptrdiff_t>(j * k.cross_width),
                          rows.begin() + static_cast<std::ptrdiff_t>((j + 1) * k.cross_width));
  }
  return stack_forward(model, k, tokens, real, memory, source_real);
}

namespace {
std::vector<double> stack_forward(const Model& model, const ModelConfig& k, const std::vector<int32_t>& tokens,
                                  const std::vector<bool>& real, const std::vector<Vec>& memory,
                                  const std::vector<bool>& memory_real) {
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
    const int64_t R = k.embed_width();  // neomme's factorized table: a row of R, times its projection [H, R]
    x.emplace_back(embed.begin() + id * R, embed.begin() + (id + 1) * R);
    if (k.embedding_rank > 0) x.back() = linear(model.at("model.embed_tokens.embedding_projection.weight"), x.back(), H);
    for (double& v : x.back()) v *= k.embed_scale;
    if (k.embed_norm)
      x.back() = norm(x.back(), model.at("model.embed_norm.weight"), k.norm_bias ? &model.at("model.embed_norm.bias") : nullptr,
                      k.eps, true, false);
    if (k.embed_rms_norm) rms_norm(x.back().data(), H, nullptr, k.eps, false);
  }
  const std::vector<Vec> x0 = x;  // the layers' input (neomme's initial-state mix reads it in every layer)
  // Each position's per-layer inputs (one row of P per layer; gemma3n, embedding_gemma2) and its AltUp streams
  // (gemma3n: stream 0 the embedding, stream i its altup_projections[i - 1] at the embedding's RMS).
  const int64_t P = k.per_layer_input, NA = k.altup_inputs;
  const std::string& at = k.per_layer_tensors.first;
  std::vector<std::vector<Vec>> pli(static_cast<size_t>(n)), streams(static_cast<size_t>(n));
  for (int64_t p = 0; p < n; ++p) {
    if (P > 0) {
      const Vec projected = linear(model.at(at + "per_layer_model_projection.weight"), x[p], k.layers * P);
      const int64_t id = tokens[p] < k.per_layer_vocab ? tokens[p] : 0;
      for (int64_t l = 0; l < k.layers; ++l) {
        Vec row(projected.begin() + l * P, projected.begin() + (l + 1) * P);
        for (double& v : row) v *= k.per_layer_projection_scale;
        rms_norm(row.data(), P, model.at(at + "per_layer_projection_norm.weight").data(), k.eps, k.gemma_norm);
        for (int64_t j = 0; j < P && k.per_layer_vocab > 0; ++j)  // none: projection-only inputs (embedding_gemma2)
          row[j] =
              (row[j] + model.at(at + "embed_tokens_per_layer.weight")[(id * k.layers + l) * P + j] * k.per_layer_embed_scale) *
              k.per_layer_input_scale;
        pli[p].push_back(std::move(row));
      }
    }
    for (int64_t i = 0; i < NA; ++i)
      streams[p].push_back(
          i == 0
              ? x[p]
              : rescaled(linear(model.at("model.altup_projections." + std::to_string(i - 1) + ".weight"), x[p], H), rms(x[p])));
  }
  // Per layer, every position's keys and values ([position][kv heads * head dim]); a layer that
  // shares K/V reads its source layer's.
  std::vector<std::vector<Vec>> keys(static_cast<size_t>(k.layers)), values(static_cast<size_t>(k.layers));
  std::vector<Vec> entry;  // a looped section's input: the final norm of each row where its first pass begins
  for (int64_t l = 0; l < k.layers; ++l) {
    if (!k.loop_entries.empty() && k.loop_entries[static_cast<size_t>(l)]) {  // a pass begins: x = norm(x) + entry
      const bool first = entry.empty();
      for (int64_t p = 0; p < n; ++p) {
        const Vec y = norm(model, k, "model.norm.", x[p], k.eps, !k.final_norm_plain);
        if (first) entry.push_back(y);
        for (int64_t i = 0; i < H; ++i) x[p][i] = y[i] + entry[p][i];
      }
    }
    auto w = [&](const std::string& what) -> const Vec& { return model.at(layer_name(l, what)); };
    const int64_t NQ = k.q_heads(l), D = k.dim(l), KVH = k.kv(l), group = NQ / KVH, Dv = k.vdim(l);  // Dv: a value head's size
    const bool own_kv = !k.shares_kv(l), conv = k.conv(l), recurrent = k.recurrent(l), delta = k.delta(l);
    const Vec freq = inv_freq(k, l);
    const double rope_scale = k.yarn.factor > 0 ? k.yarn.attention_factor : 1;
    // An encoder-decoder's cross keys and values: the layer's cross_attn k_proj and v_proj of every memory row (merged:
    // its self_attn's, the keys through k_norm per head, no rope).
    std::vector<Vec> cross_keys, cross_values;
    const std::string cross = k.merged_cross_attention ? "self_attn." : "cross_attn.";
    for (const Vec& row : memory) {
      cross_keys.push_back(linear(w(cross + "k_proj.weight"), row, KVH * D, k.qkv_bias ? &w(cross + "k_proj.bias") : nullptr));
      cross_values.push_back(linear(w(cross + "v_proj.weight"), row, KVH * D, k.qkv_bias ? &w(cross + "v_proj.bias") : nullptr));
      for (int64_t i = 0; k.merged_cross_attention && k.qk_norm && i < KVH * D; i += D)
        rms_norm(cross_keys.back().data() + i, D, w("self_attn.k_norm.weight").data(), k.eps, k.gemma_norm);
    }
    // AltUp: every stream predicted, pred_q = s_q + sum_p c[q * A + p] s_p (c from the active stream's modalities);
    // the layer runs on the active prediction.
    std::vector<std::vector<Vec>> pred(static_cast<size_t>(n));
    for (int64_t p = 0; p < n && NA > 0; ++p) {
      const std::vector<Vec>& st = streams[p];
      const Vec c = linear(w("altup.prediction_coefs.weight"), modalities(model, k, l, st[k.altup_active]), NA * NA);
      for (int64_t q = 0; q < NA; ++q) {
        Vec row(static_cast<size_t>(H));
        for (int64_t i = 0; i < H; ++i) {
          double sum = 0;
          for (int64_t r = 0; r < NA; ++r) sum += st[r][i] * c[q * NA + r];
          row[i] = sum + st[q][i];
        }
        pred[p].push_back(std::move(row));
      }
      x[p] = pred[p][k.altup_active];
    }
    std::vector<Vec> h(static_cast<size_t>(n)), mixed(static_cast<size_t>(n));  // the block's input; its output before o_proj
    // Post: no input norm; embed_norm: layer 0 reads the normed embeddings as they are.
    const bool in_norm = k.norm_placement != NormPlacement::Post && !(k.embed_norm && l == 0);
    for (int64_t p = 0; p < n; ++p) {
      Vec in = x[p];  // neomme: lambdas[0] * x + lambdas[1] * x0 goes into the norm; x stays the residual
      for (int64_t i = 0; k.initial_mix && i < H; ++i) in[i] = w("lambdas")[0] * x[p][i] + w("lambdas")[1] * x0[p][i];
      h[p] = in_norm ? norm(model, k, layer_name(l, "input_layernorm."), in, k.eps) : in;
    }
    if (delta) {
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
          double s = 0;
          for (int64_t j = 0; j < taps; ++j)
            if (p - taps + 1 + j >= 0) s += d("conv1d.weight")[ch * taps + j] * qkv[p - taps + 1 + j][ch];
          c[ch] = silu(s);
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
          const double decay =
              std::exp(-(k.delta_decay_scale * std::exp(d("A_log")[j])) * (in > 20 ? in : std::log1p(std::exp(in))));
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
    } else if (recurrent) {
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
          double s = t("conv_1d.bias")[ch];
          for (int64_t j = 0; j < taps; ++j)
            if (p - taps + 1 + j >= 0) s += t("conv_1d.weight")[ch * taps + j] * xs[p - taps + 1 + j][ch];
          c[ch] = s;
        }
        mixed[p].resize(static_cast<size_t>(W));
        for (int64_t ch = 0; ch < W; ++ch) {
          const int64_t b = ch / bw, col = ch % bw;
          double zi = 0, za = 0;
          for (int64_t i = 0; i < bw; ++i) {
            zi += c[b * bw + i] * t("rg_lru.input_gate_weight")[(b * bw + i) * bw + col];
            za += c[b * bw + i] * t("rg_lru.recurrent_gate_weight")[(b * bw + i) * bw + col];
          }
          const double gate_i = sigmoid(zi + t("rg_lru.input_gate_bias")[ch]),
                       r = sigmoid(za + t("rg_lru.recurrent_gate_bias")[ch]);
          const double lambda = t("rg_lru.recurrent_param")[ch];
          const double log_a = -k.lru_decay_scale * r * (lambda > 20 ? lambda : std::log1p(std::exp(lambda)));
          const double normalized = c[ch] * gate_i * (p == 0 ? 1.0 : std::sqrt(1 - std::exp(2 * log_a)));
          state[ch] = p == 0 ? normalized : std::exp(log_a) * state[ch] + normalized;
          mixed[p][ch] = state[ch] * y[ch];
        }
      }
    } else if (conv) {
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
        q[p] = linear(w("self_attn.q_proj.weight"), h[p], NQ * D, k.qkv_bias ? &w("self_attn.q_proj.bias") : no_bias);
        Vec key, value;
        if (own_kv) {
          key = linear(w("self_attn.k_proj.weight"), h[p], KVH * D, k.qkv_bias ? &w("self_attn.k_proj.bias") : no_bias);
          const bool k_eq_v = !k.k_eq_v.empty() && k.k_eq_v[static_cast<size_t>(l)];
          value = k_eq_v
                      ? key
                      : linear(w("self_attn.v_proj.weight"), h[p], KVH * Dv, k.qkv_bias ? &w("self_attn.v_proj.bias") : no_bias);
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
          for (size_t j = 0; k.merged_cross_attention && j < memory.size(); ++j) {
            if (!memory_real.empty() && !memory_real[j]) continue;
            double s = dot(q[p].data() + head * D, cross_keys[j].data() + kv, D) * k.query_scale;
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
              out[d] += e[i] / sum * (i < own ? V[seen[i]][kvv + d] : cross_values[static_cast<size_t>(seen[i])][kvv + d]);
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
            const double z =
                k.attn_gate_scale > 0 ? gate[i / per] * (s * s) : gate[i / per];  // torch's softplus is linear above 20
            mixed[p][i] *= !k.attn_gate_softplus ? sigmoid(z) : z > 20 ? z : std::log1p(std::exp(z));
          }
        }
        if (k.attn_sub_norm) rms_norm(mixed[p].data(), NQ * Dv, nullptr, k.eps, false, k.l2_norm);  // dory, before o_proj
      }
    }
    // Every residual add, one rule: x = keep * x + branch * block per dimension, or, where dory interpolates, x = h +
    // branch * (block - h), h the block's normed input. keep and branch: 1 and `scale` (the plain add), ergo's gates w:
    // sqrt(1 + sigmoid(w)) exp(-softplus(w) / 2) and sigmoid(w), dory's rates |lambda * s|, muse_spark's gates g: alpha =
    // sqrt(max(sigmoid(-g / T) (1 + beta), 1e-3)) and beta = sigmoid(g / T), beam's depth-scaled sqrt((d - 1) / d) and
    // 1 / sqrt(d), d = 2(l + 1) after the attention and 2(l + 1) + 1 after the MLP.
    auto residual_add = [&](Vec& x, const Vec& block, const Vec& h_in, bool mlp, double scale) {
      const double d = static_cast<double>(2 * (l + 1) + (mlp ? 1 : 0));
      for (int64_t i = 0; i < H; ++i) {
        double keep = 1, branch = scale;
        if (k.residual_gates) {
          const double g = w(mlp ? "feedforward_residual_gate.weight" : "attention_residual_gate.weight")[i];
          const double softplus = g > 20 ? g : std::log1p(std::exp(g));
          branch = 1 / (1 + std::exp(-g)), keep = std::sqrt(1 + branch) * std::exp(-0.5 * softplus);
        } else if (k.residual_interpolation > 0) {
          branch = std::abs(w(mlp ? "lambda_2" : "lambda_1")[i] * k.residual_interpolation);
          x[i] = h_in[i] + branch * (block[i] - h_in[i]);
          continue;
        } else if (k.residual_gate_temperature > 0) {
          const double g = w(mlp ? "post_feedforward_residual_gate.gate" : "post_attention_residual_gate.gate")[i] /
                           k.residual_gate_temperature;
          branch = 1 / (1 + std::exp(-g)), keep = std::sqrt(std::max(1 / (1 + std::exp(g)) * (1 + branch), 1e-3));
        } else if (k.depth_scaled_residual) {
          keep = std::sqrt((d - 1) / d), branch = 1 / std::sqrt(d);
        }
        x[i] = keep * x[i] + branch * block[i];
      }
    };
    // The block's output projection, the norms around it and the feed-forward, per position.
    const std::string o = recurrent ? "temporal_block.linear_out."
                          : delta   ? "linear_attn.out_proj."
                          : conv    ? "conv.out_proj."
                                    : "self_attn.o_proj.";
    const bool o_bias = recurrent || (delta ? false : conv ? k.conv_bias : k.o_bias);
    for (int64_t p = 0; p < n; ++p) {
      Vec out = linear(w(o + "weight"), mixed[p], H, o_bias ? &w(o + "bias") : nullptr);
      Vec ff_in;
      switch (k.parallel_block ? NormPlacement::Pre : k.norm_placement) {
        case NormPlacement::Pre:
          for (int64_t i = 0; i < H; ++i) x[p][i] += out[i] * (k.parallel_block ? 1 : k.residual_scale);
          ff_in = k.parallel_block ? h[p] : norm(model, k, layer_name(l, k.pre_ff_norm), x[p], k.eps);
          break;
        case NormPlacement::Sandwich:
          if (k.post_attn_norm_weightless) rms_norm(out.data(), H, nullptr, post_eps, false);
          else out = norm(model, k, layer_name(l, "post_attention_layernorm."), out, post_eps);
          residual_add(x[p], out, h[p], false, 1);
          if (k.laurel_rank > 0) {  // LAuReL: (x + h + RMSNorm_w(right(left(h)))) / sqrt(2), h the attention's input
            Vec laurel = linear(w("laurel.linear_right.weight"), linear(w("laurel.linear_left.weight"), h[p], k.laurel_rank), H);
            laurel = norm(model, k, layer_name(l, "laurel.post_laurel_norm."), laurel, k.eps);
            for (int64_t i = 0; i < H; ++i) x[p][i] = (x[p][i] + (h[p][i] + laurel[i])) / M_SQRT2;
          }
          if (k.cross_width > 0 && !k.merged_cross_attention) {  // x += post_cross_attn_layernorm(cross_attn(...))
            const Vec hc = norm(model, k, layer_name(l, "pre_cross_attn_layernorm."), x[p], k.eps);
            const Vec cq = linear(w("cross_attn.q_proj.weight"), hc, NQ * D, k.qkv_bias ? &w("cross_attn.q_proj.bias") : nullptr);
            Vec attended(static_cast<size_t>(NQ * D), 0.0);
            for (int64_t head = 0; head < NQ; ++head) {
              const int64_t kv = (head / group) * D;
              std::vector<size_t> seen;  // every real source position: no rope, no window
              Vec e;
              for (size_t j = 0; j < memory.size(); ++j) {
                if (!memory_real.empty() && !memory_real[j]) continue;
                double sc = dot(cq.data() + head * D, cross_keys[j].data() + kv, D) * k.query_scale;
                if (k.attn_softcap > 0) sc = std::tanh(sc / k.attn_softcap) * k.attn_softcap;
                seen.push_back(j), e.push_back(sc);
              }
              if (e.empty()) throw std::invalid_argument("the source has no real position");
              const double top = *std::max_element(e.begin(), e.end());
              double sum = 0;
              for (double& v : e) sum += (v = std::exp(v - top));
              for (size_t i = 0; i < seen.size(); ++i)
                for (int64_t d = 0; d < D; ++d) attended[head * D + d] += e[i] / sum * cross_values[seen[i]][kv + d];
            }
            const Vec co = norm(
                model, k, layer_name(l, "post_cross_attn_layernorm."),
                linear(w("cross_attn.o_proj.weight"), attended, H, k.o_bias ? &w("cross_attn.o_proj.bias") : nullptr), post_eps);
            for (int64_t i = 0; i < H; ++i) x[p][i] += co[i];
          }
          ff_in = norm(model, k, layer_name(l, "pre_feedforward_layernorm."), x[p], k.eps);
          break;
        case NormPlacement::Post:
          out = norm(model, k, layer_name(l, "post_attention_layernorm."), out, k.eps);
          for (int64_t i = 0; i < H; ++i) x[p][i] += out[i];
          ff_in = x[p];
          break;
      }
      Vec ff = feed_forward(model, k, l, ff_in);
      if (k.post_ff_norm_input_scaled) ff = input_scaled_norm(ff, w("post_feedforward_layernorm.weight"), post_eps);
      else if (k.norm_placement != NormPlacement::Pre)
        ff = norm(model, k, layer_name(l, "post_feedforward_layernorm."), ff,
                  k.norm_placement == NormPlacement::Sandwich ? post_eps : k.eps);
      residual_add(x[p], ff, ff_in, true, k.residual_scale);
      // The per-layer input's branch of a row s: norm(per_layer_projection(act(per_layer_input_gate s) * pli_l)).
      const std::string& in = k.per_layer_tensors.second;
      auto per_layer_branch = [&](const Vec& s) {
        Vec gate = linear(w(in + "per_layer_input_gate.weight"), s, P);
        for (int64_t j = 0; j < P; ++j) gate[j] = activate(k, gate[j]) * pli[p][l][j];
        return norm(model, k, layer_name(l, in + "post_per_layer_input_norm."),
                    linear(w(in + "per_layer_projection.weight"), gate, H), k.eps);
      };
      if (P > 0 && NA == 0) {  // x += the branch of x
        const Vec added = per_layer_branch(x[p]);
        for (int64_t i = 0; i < H; ++i) x[p][i] += added[i];
      }
      if (k.layer_scalar)
        for (double& v : x[p]) v *= w("layer_scalar")[0];
      if (NA > 0) {
        // AltUp's correction: s_i = (y - pred_active) * (correction_coefs(modalities(y))_i + 1) + pred_i, y the layer's
        // output; then RMSNorm_w(per_layer_projection(act(per_layer_input_gate(s_active * scale)) * pli)) into s_1...
        const Vec m = modalities(model, k, l, x[p]);
        for (int64_t i = 0; i < NA; ++i) {
          const double coef = dot(w("altup.correction_coefs.weight").data() + i * NA, m.data(), NA) + 1;
          for (int64_t c = 0; c < H; ++c) streams[p][i][c] = (x[p][c] - pred[p][k.altup_active][c]) * coef + pred[p][i][c];
        }
        Vec active = streams[p][k.altup_active];
        for (int64_t c = 0; k.altup_correct_scale && c < H; ++c) active[c] *= w("altup.correct_output_scale")[c];
        if (P > 0) {  // streams 1.. += the branch of the active stream
          const Vec added = per_layer_branch(active);
          for (int64_t i = 1; i < NA; ++i)
            for (int64_t c = 0; c < H; ++c) streams[p][i][c] += added[c];
        }
      }
    }
  }
  // AltUp: the final norm reads the mean of stream 0 and the others' altup_unembed_projections at stream 0's RMS.
  for (int64_t p = 0; p < n && NA > 0; ++p) {
    std::vector<Vec> st = streams[p];
    for (int64_t i = 1; i < NA; ++i)
      st[i] = rescaled(linear(model.at("model.altup_unembed_projections." + std::to_string(i - 1) + ".weight"), st[i], H),
                       rms(st[0]));
    for (int64_t c = 0; c < H; ++c) {
      double sum = 0;
      for (int64_t i = 0; i < NA; ++i) sum += st[i][c];
      x[p][c] = sum / static_cast<double>(NA);
    }
  }
  // The final norm (its weight plain where final_norm_plain), the prediction head, lm_head; an encoder-decoder's
  // encoder's rows are the final norm's.
  const Vec& head = model.at(k.tied || k.hidden_output ? "model.embed_tokens.weight" : "lm_head.weight");
  std::vector<double> logits;
  for (int64_t p = 0; p < n; ++p) {
    Vec y = norm(model, k, "model.norm.", x[p], k.eps, !k.final_norm_plain);
    if (k.hidden_output) {
      logits.insert(logits.end(), y.begin(), y.end());
      continue;
    }
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
    if (k.embedding_rank > 0) {  // neomme's factorized head: y^T U [R] (U the unembedding, tied: the embedding's), then lm_head
      const Vec& u = model.at(k.tied ? "model.embed_tokens.embedding_projection.weight" : "unembedding_projection.weight");
      Vec r(static_cast<size_t>(k.embedding_rank), 0.0);
      for (int64_t i = 0; i < H; ++i)
        for (int64_t j = 0; j < k.embedding_rank; ++j) r[j] += y[i] * u[i * k.embedding_rank + j];
      y = std::move(r);
    }
    for (double v : linear(head, y, k.out_width(), k.lm_head_bias ? &model.at("lm_head.bias") : nullptr)) {
      v *= k.logit_scale;
      if (k.logit_channel_scale > 0) v *= model.at("lm_head.logit_scale")[logits.size() % k.out_width()] * k.logit_channel_scale;
      if (k.final_softcap > 0) v = std::tanh(v / k.final_softcap) * k.final_softcap;
      logits.push_back(v);
    }
  }
  return logits;
}

}  // namespace

}  // namespace kvc::engine
