// The operations the plain model reference's blocks are written in (blocks.h), in the order of operations
// transformers' modeling code writes them.
#include "blocks.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace kvc::engine::reference {

double dot(const double* a, const double* b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// nn.Linear: out[r] = W[r, :] . x (+ bias[r]), W [rows, cols] row-major.
Vec linear(const Vec& w, const Vec& x, int64_t rows, const Vec* bias) {
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
void rms_norm(double* x, int64_t n, const double* weight, double eps, bool plus_one, bool l2) {
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
Vec norm(const Model& model, const ModelConfig& k, const std::string& name, const Vec& x, double eps, bool plus_one) {
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

}  // namespace kvc::engine::reference
