// The streams some families carry beside the residual (blocks.h): per-layer inputs (gemma3n, embedding_gemma2) and
// gemma3n's AltUp.
#include "blocks.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace kvc::engine::reference {
namespace {

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

}  // namespace

Rows per_layer_inputs(const Model& model, const ModelConfig& k, int32_t token, const Vec& x) {
  const int64_t P = k.per_layer_input;
  const std::string& at = k.per_layer_tensors.first;
  Rows pli;
  const Vec projected = linear(model.at(at + "per_layer_model_projection.weight"), x, k.layers * P);
  const int64_t id = token < k.per_layer_vocab ? token : 0;
  for (int64_t l = 0; l < k.layers; ++l) {
    Vec row(projected.begin() + l * P, projected.begin() + (l + 1) * P);
    for (double& v : row) v *= k.per_layer_projection_scale;
    rms_norm(row.data(), P, model.at(at + "per_layer_projection_norm.weight").data(), k.eps, k.gemma_norm);
    for (int64_t j = 0; j < P && k.per_layer_vocab > 0; ++j)  // none: projection-only inputs (embedding_gemma2)
      row[j] = (row[j] + model.at(at + "embed_tokens_per_layer.weight")[(id * k.layers + l) * P + j] * k.per_layer_embed_scale) *
               k.per_layer_input_scale;
    pli.push_back(std::move(row));
  }
  return pli;
}

Vec per_layer_branch(const Layer& layer, const Vec& s, const Vec& input) {
  const ModelConfig& k = layer.k;
  const int64_t P = k.per_layer_input;
  const std::string& in = k.per_layer_tensors.second;
  Vec gate = linear(layer.w(in + "per_layer_input_gate.weight"), s, P);
  for (int64_t j = 0; j < P; ++j) gate[j] = activate(k, gate[j]) * input[j];
  return layer.norm(in + "post_per_layer_input_norm.", linear(layer.w(in + "per_layer_projection.weight"), gate, k.hidden),
                    k.eps);
}

Rows altup_streams(const Model& model, const ModelConfig& k, const Vec& x) {
  Rows streams;
  for (int64_t i = 0; i < k.altup_inputs; ++i)
    streams.push_back(
        i == 0 ? x
               : rescaled(linear(model.at("model.altup_projections." + std::to_string(i - 1) + ".weight"), x, k.hidden), rms(x)));
  return streams;
}

// pred_q = s_q + sum_p c[q * A + p] s_p, c from the active stream's modalities.
Rows altup_predict(const Layer& layer, const Rows& st) {
  const ModelConfig& k = layer.k;
  const int64_t NA = k.altup_inputs, H = k.hidden;
  Rows pred;
  const Vec c =
      linear(layer.w("altup.prediction_coefs.weight"), modalities(layer.model, k, layer.l, st[k.altup_active]), NA * NA);
  for (int64_t q = 0; q < NA; ++q) {
    Vec row(static_cast<size_t>(H));
    for (int64_t i = 0; i < H; ++i) {
      double sum = 0;
      for (int64_t r = 0; r < NA; ++r) sum += st[r][i] * c[q * NA + r];
      row[i] = sum + st[q][i];
    }
    pred.push_back(std::move(row));
  }
  return pred;
}

// s_i = (y - pred_active) * (correction_coefs(modalities(y))_i + 1) + pred_i; then the per-layer input's branch of the
// active stream (times correct_output_scale) into s_1...
void altup_correct(const Layer& layer, Rows& streams, const Rows& pred, const Vec& y, const Vec* per_layer_input) {
  const ModelConfig& k = layer.k;
  const int64_t NA = k.altup_inputs, H = k.hidden;
  auto w = [&](const std::string& what) -> const Vec& { return layer.w(what); };
  const Vec m = modalities(layer.model, k, layer.l, y);
  for (int64_t i = 0; i < NA; ++i) {
    const double coef = dot(w("altup.correction_coefs.weight").data() + i * NA, m.data(), NA) + 1;
    for (int64_t c = 0; c < H; ++c) streams[i][c] = (y[c] - pred[k.altup_active][c]) * coef + pred[i][c];
  }
  Vec active = streams[k.altup_active];
  for (int64_t c = 0; k.altup_correct_scale && c < H; ++c) active[c] *= w("altup.correct_output_scale")[c];
  if (per_layer_input) {  // streams 1.. += the branch of the active stream
    const Vec added = per_layer_branch(layer, active, *per_layer_input);
    for (int64_t i = 1; i < NA; ++i)
      for (int64_t c = 0; c < H; ++c) streams[i][c] += added[c];
  }
}

// The mean of stream 0 and the others' altup_unembed_projections at stream 0's RMS.
Vec altup_merge(const Model& model, const ModelConfig& k, Rows st) {
  const int64_t NA = k.altup_inputs, H = k.hidden;
  for (int64_t i = 1; i < NA; ++i)
    st[i] =
        rescaled(linear(model.at("model.altup_unembed_projections." + std::to_string(i - 1) + ".weight"), st[i], H), rms(st[0]));
  Vec x(static_cast<size_t>(H));
  for (int64_t c = 0; c < H; ++c) {
    double sum = 0;
    for (int64_t i = 0; i < NA; ++i) sum += st[i][c];
    x[c] = sum / static_cast<double>(NA);
  }
  return x;
}

}  // namespace kvc::engine::reference
